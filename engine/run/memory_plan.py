"""How many models one process may hold at once: load groups that fit a memory budget.

A sweep of 40 models in one process must not load 40 models. Each model's resident size is
estimated (the registry's ``memory_mb`` when given, otherwise parameters x bytes per weight of
its dtype, plus overhead), and models are packed in registry order into groups whose sum stays
under the budget (a share of the RAM available when the run starts, or an explicit figure) and,
optionally, under a count. The in-process runner then loads one group, passes every pending
shard of the group's models through it (each decoded shard serves the whole group), closes it
and moves to the next group. When everything fits, there is one group and the runner behaves
exactly as it always did.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from engine.data import ModelSpec
from engine.errors import ConfigError

log = logging.getLogger(__name__)

#: Bytes per weight for the dtype names backends take (``dtype``, ``torch_dtype``, ``compute_type``).
DTYPE_BYTES = {
    "float32": 4.0,
    "fp32": 4.0,
    "float": 4.0,
    "auto": 4.0,
    "default": 4.0,
    "float16": 2.0,
    "fp16": 2.0,
    "half": 2.0,
    "bfloat16": 2.0,
    "bf16": 2.0,
    "int8_float16": 1.0,
    "int8_float32": 1.0,
    "int8": 1.0,
    "int8_bfloat16": 1.0,
    "int4": 0.5,
}
#: Activations, buffers, the framework itself: on top of the weights.
OVERHEAD = 1.3
#: A model with no size known (no params_m, no memory_mb), e.g. a small HMM decoder or an API client.
UNKNOWN_MB = 500.0
#: Share of the available RAM that loaded models may take by default (the rest: decoded audio, rows).
DEFAULT_SHARE = 0.6


def dtype_bytes(spec: ModelSpec) -> float:
    """Bytes per weight of the dtype the model's options name (float32 when they name none)."""
    for key in ("dtype", "torch_dtype", "compute_type"):
        value = spec.options.get(key)
        if value is not None:
            return DTYPE_BYTES.get(str(value).lower().replace("torch.", ""), 4.0)
    return 4.0


def estimate_mb(spec: ModelSpec) -> float:
    """Resident MB of one loaded copy: registry ``memory_mb``, else params x dtype bytes x overhead."""
    meta = spec.meta
    if meta.get("memory_mb") is not None:
        return float(meta["memory_mb"])
    if meta.get("params_m") is not None:
        return float(meta["params_m"]) * dtype_bytes(spec) * OVERHEAD
    return UNKNOWN_MB


def available_mb() -> float:
    """RAM available to new allocations now (MemAvailable; psutil where /proc is absent)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) / 1024.0
    except OSError:
        pass  # no /proc (not Linux): fall through to the portable estimate below
    try:
        import psutil

        return float(psutil.virtual_memory().available) / 2**20
    except ImportError:
        return float("inf")


@dataclass(frozen=True)
class LoadGroup:
    """Models loaded together, and the memory they are estimated to take."""

    models: tuple[str, ...]
    estimated_mb: float


def plan_groups(specs: Sequence[ModelSpec], max_models: int | None = None, budget_mb: float | None = None) -> list[LoadGroup]:
    """Pack models, in order, into groups under ``budget_mb`` (default: a share of available RAM)
    and ``max_models``; a model bigger than the budget alone gets a group of its own (and a warning)."""
    if max_models is not None and (isinstance(max_models, bool) or not isinstance(max_models, int) or max_models < 1):
        raise ConfigError(f"max_models_loaded must be a positive integer or unset, got {max_models!r}")
    if budget_mb is not None and (isinstance(budget_mb, bool) or not isinstance(budget_mb, (int, float)) or budget_mb <= 0):
        raise ConfigError(f"memory_budget_mb must be a positive number or unset, got {budget_mb!r}")
    budget = float(budget_mb) if budget_mb is not None else DEFAULT_SHARE * available_mb()
    groups: list[LoadGroup] = []
    current: list[str] = []
    used = 0.0
    for spec in specs:
        size = estimate_mb(spec)
        full = bool(current) and (used + size > budget or (max_models is not None and len(current) >= max_models))
        if full:
            groups.append(LoadGroup(tuple(current), used))
            current, used = [], 0.0
        if size > budget:
            log.warning("model %s is estimated at %.0f MB, above the memory budget of %.0f MB; it is loaded alone", spec.name, size, budget)
        current.append(spec.name)
        used += size
    if current:
        groups.append(LoadGroup(tuple(current), used))
    return groups
