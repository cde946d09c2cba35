"""Ray set-up shared by the Ray runner: connecting, option checks, short error lines.

Kept apart from ``engine/ray_runner.py`` so the runner stays one readable file; nothing here
imports ray at module level.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from engine.backends.availability import require_modules
from engine.backends.hosted.scrub import scrub
from engine.cluster import check_address
from engine.data import ModelSpec
from engine.errors import ConfigError
from engine.passes import registry_for

log = logging.getLogger(__name__)


def accepts_option(spec: ModelSpec, name: str, value: Any) -> bool:
    """Whether the backend takes option ``name`` (constructors are cheap and reject unknown names)."""
    if name in spec.options:
        return True
    try:
        registry_for(spec.kind).get(spec.backend)(**{**dict(spec.options), name: value})
    except Exception:  # noqa: BLE001 - an unknown option or a bad config means "not accepted"
        return False
    return True


def require_ray() -> None:
    """Ray is an optional extra: say which one before anything starts (``BackendUnavailable``)."""
    require_modules("the Ray engine (--engine ray, --address)", ("ray",), "ray")


def init_ray(
    address: str | None = None,
    *,
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    runtime_env: Mapping[str, Any] | None = None,
    log_to_driver: bool = False,
    worker_niceness: int = 0,
) -> bool:
    """Connect to a cluster (``address``) or start a quiet local instance; True if this call did it.

    A local instance runs its workers at ``worker_niceness`` (Ray's own default is 15, which on a
    busy machine starves model actors behind every other process; 0 = the driver's priority). A
    cluster keeps the settings it was started with. An instance already initialised in this
    process is reused.
    """
    require_ray()
    import ray

    if ray.is_initialized():
        if address:
            log.info("Ray is already initialised in this process; ignoring address %s", address)
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": log_to_driver, "logging_level": logging.WARNING}
    if runtime_env:
        kwargs["runtime_env"] = dict(runtime_env)
    if address:
        check_address(address)  # nothing listening: fail in seconds, saying what was tried
        ray.init(address=address, **kwargs)
    else:
        ray.init(num_cpus=num_cpus, num_gpus=num_gpus, _system_config={"worker_niceness": int(worker_niceness)}, **kwargs)
    log.info("Ray resources: %s", {k: v for k, v in ray.cluster_resources().items() if k in ("CPU", "GPU", "memory")})
    return True


def check_positive(name: str, value: float | None, integer: bool = False) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 or (integer and not isinstance(value, int)):
        kind = "a positive integer" if integer else "a positive number"
        raise ConfigError(f"RayRunner: '{name}' must be {kind} or unset, got {value!r}")



def short_error(exc: BaseException, limit: int = 400) -> str:
    """One line of an exception (Ray's own messages carry whole tracebacks), secrets scrubbed
    before it is cut (a cut key would no longer match)."""
    cause = getattr(exc, "cause", None)
    text = scrub(f"{type(cause).__name__}: {cause}" if cause is not None else str(exc))
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    line = lines[-1] if cause is None and len(lines) > 1 else lines[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


__all__ = ["accepts_option", "check_positive", "init_ray", "require_ray", "short_error"]
