"""Choosing the models of a sweep, and asking the workers (not the driver) whether they can run.

The driver's availability answer is advisory when it cannot tell (``Availability.checked`` is
False: hub weights not in *this* machine's cache, which a worker with network access or its own
cache may have). Only a definite "no" (a missing package, a missing API key, a local path that
does not exist) skips a model up front; every other model is attempted, and the process that
loads it records its own reason if it cannot. ``audit sweep --check`` runs the same check inside
the cluster: one Ray task per model, with the resources that model's actors would take.
"""

from __future__ import annotations

import difflib
import logging
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.errors import ConfigError
from engine.model_registry import ModelEntry

log = logging.getLogger(__name__)


def select_models(registry: Mapping[str, ModelEntry], selection: str) -> list[str]:
    """``all`` | a comma-separated list | a registry tag -> registry names, checked before anything loads.

    A name given twice, or a name in no registry, is an error naming the entry.
    """
    sel = selection.strip()
    if not sel:
        raise ConfigError("--models is empty: give all, a comma-separated list of registry names, or a tag")
    if sel == "all":
        return sorted(registry)
    if "," in sel or sel in registry:
        names = [m.strip() for m in sel.split(",")]
        if any(not n for n in names):
            raise ConfigError(f"--models '{selection}': an empty name between commas")
        seen: set[str] = set()
        for n in names:
            if n in seen:
                raise ConfigError(f"--models: model '{n}' is named twice; each model runs once per sweep")
            seen.add(n)
            if n not in registry:
                close = difflib.get_close_matches(n, list(registry), n=3, cutoff=0.5)
                hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
                raise ConfigError(f"--models: unknown model '{n}' (in no registry under configs/models){hint}")
        return names
    chosen = sorted(n for n, e in registry.items() if sel in e.tags)
    if not chosen:
        tags = sorted({t for e in registry.values() for t in e.tags})
        close = difflib.get_close_matches(sel, list(registry) + tags, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ConfigError(f"--models: '{sel}' is neither a registry model nor a tag{hint} (tags: {', '.join(tags)})")
    return chosen


@dataclass
class SweepPlan:
    """Which models run, which are skipped up front (and why), and which are only advisory."""

    run: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    advisory: dict[str, str] = field(default_factory=dict)  # attempted; the loading process decides


def plan_sweep(registry: Mapping[str, ModelEntry], names: Sequence[str], explicit: bool) -> SweepPlan:
    """Skip only definite "no"s; a positive control runs only when named explicitly."""
    plan = SweepPlan()
    for name in names:
        e = registry[name]
        if "control" in e.tags and not explicit:
            plan.skipped[name] = "positive control (name it explicitly to include it)"
            continue
        avail = e.availability()
        if avail.runnable:
            plan.run.append(name)
        elif not avail.checked:
            plan.run.append(name)
            plan.advisory[name] = f"not checked here: {avail.reason}"
        else:
            plan.skipped[name] = avail.reason
    return plan


def _check_here(backend: str, options: Mapping[str, Any], extra: str | None) -> dict[str, Any]:
    """Runs inside a Ray worker: the availability answer of that machine."""
    from engine.backends.availability import model_availability

    avail = model_availability(backend, options, extra)
    return {"runnable": avail.runnable, "reason": avail.reason, "checked": avail.checked, "host": socket.gethostname(), "pid": os.getpid()}


def actor_resources(entry: ModelEntry, gpu_total: float) -> tuple[float, float]:
    """(num_cpus, num_gpus) one actor of ``entry`` takes (the Ray runner's rule, without probing options)."""
    meta = entry.spec().meta
    num_cpus = float(meta.get("num_cpus", 1.0))
    if "num_gpus" in meta:
        return num_cpus, float(meta["num_gpus"])
    explicit_cpu = str(entry.options.get("device", "")) == "cpu"
    return num_cpus, (1.0 if gpu_total > 0 and not explicit_cpu else 0.0)


def check_in_workers(
    registry: Mapping[str, ModelEntry], names: Sequence[str], address: str | None = None, timeout_s: float = 300.0
) -> dict[str, dict[str, Any]]:
    """Each model's availability as a Ray worker with that model's resources sees it.

    A model no node can hold is answered without submitting anything (it would wait forever).
    """
    import ray

    from engine.cluster import node_capacity, placement_problem
    from engine.ray_runner import init_ray

    started = init_ray(address)
    try:
        gpu_total = float(ray.cluster_resources().get("GPU", 0.0))
        capacity = node_capacity()
        cpu_cap = capacity.get("CPU", 1.0) or 1.0
        fn = ray.remote(_check_here)
        refs: dict[str, Any] = {}
        out: dict[str, dict[str, Any]] = {}
        for name in names:
            e = registry[name]
            num_cpus, num_gpus = actor_resources(e, gpu_total)
            problem = placement_problem(name, num_gpus, e.spec().meta, capacity)
            if problem:
                out[name] = {"runnable": False, "reason": problem, "checked": True, "where": "cluster"}
                continue
            opts = {"num_cpus": min(num_cpus, cpu_cap), "num_gpus": num_gpus}
            refs[name] = fn.options(**opts).remote(e.backend, dict(e.options), e.extra)
        ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout_s)
        done = set(ready)
        for name, ref in refs.items():
            if ref in done:
                res = ray.get(ref)
                out[name] = {**res, "where": f"worker {res['host']}"}
            else:
                ray.cancel(ref, force=True)
                out[name] = {"runnable": False, "reason": f"no worker could take the check within {timeout_s:g} s", "checked": False, "where": "cluster"}
        return {n: out[n] for n in names}
    finally:
        if started:
            ray.shutdown()
