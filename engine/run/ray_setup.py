"""Worker set-up shared by shard passes and keyed passes: connecting to Ray (as ``ray.init`` resolves the
address, ``RAY_ADDRESS`` included), the job's runtime environment (``--runtime-env``), worker logging,
where a worker runs (``placement``), option checks, short error lines.

The one module of ``engine/run/`` that ``engine/keyed/`` imports (tests/test_layers.py).

Kept apart from ``engine/run/ray_runner.py`` so the runner stays one readable file; nothing here
imports ray at module level.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.backends.availability import require_modules
from engine.backends.hosted.scrub import REDACTED, SECRET_NAME, install_log_scrubber, scrub
from engine.config import check_keys, load_yaml
from engine.data import ModelSpec
from engine.errors import ConfigError
from engine.run.cluster import check_address
from engine.run.passes import registry_for

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


def ray_target(address: str | None) -> str | None:
    """The cluster ``ray.init(address=address)`` will join, or None when it will start a new local instance.

    Follows ``ray.init`` exactly: ``RAY_ADDRESS`` replaces an unset or ``auto`` address (what Ray
    Jobs sets for the job's driver); ``ray://`` is Ray Client; ``local`` starts an instance; an
    unset address also joins a cluster that ``ray start`` began on this machine.
    """
    env = os.environ.get("RAY_ADDRESS", "")
    effective = env if env and address in (None, "auto") else address
    if effective and effective.lower().startswith(("http://", "https://")):
        where = "RAY_ADDRESS" if effective == env else "--address"
        raise ConfigError(
            f"{where} is {effective}, a dashboard (Jobs API) address: that is what `ray job submit` takes. The engine joins a "
            "cluster at its GCS address (HEAD_IP:6379) or through Ray Client (ray://HEAD_IP:10001); "
            f"{'unset RAY_ADDRESS in this shell' if where == 'RAY_ADDRESS' else 'pass one of those'}, or submit the run as a job "
            "(docs/cluster.md)"
        )
    if effective and "://" in effective:
        return effective  # Ray Client
    try:
        from ray._private.services import canonicalize_bootstrap_address

        found = canonicalize_bootstrap_address(effective)  # type: ignore[arg-type]  # None is documented there
        return None if found is None else (effective if effective and effective != "auto" else str(found))
    except (ImportError, AttributeError):  # another Ray release: the documented rule without the local-cluster lookup
        return effective if effective and effective != "local" else None
    except Exception:  # noqa: BLE001 - 'auto' with no cluster running: ray.init says so itself
        return effective or "auto"


def init_ray(
    address: str | None = None,
    *,
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    runtime_env: Mapping[str, Any] | None = None,
    log_to_driver: bool = True,
    worker_niceness: int = 0,
) -> bool:
    """Connect to a cluster or start a quiet local instance; True if this call started Ray in this process.

    Where it connects is what ``ray.init`` decides (:func:`ray_target`: ``address``, else
    ``RAY_ADDRESS``, as under ``ray job submit``). Joining a cluster passes only what a driver may
    set (``runtime_env``, ``log_to_driver``): the cluster keeps the resources and system settings
    it was started with, and ``num_cpus``/``num_gpus``/``worker_niceness`` apply to a local
    instance only. A local instance runs its workers at ``worker_niceness`` (Ray's own default is
    15, which on a busy machine starves model actors behind every other process; 0 = the driver's
    priority). ``log_to_driver`` forwards the workers' output (the actors' log records included,
    :func:`worker_logging`) to this process's stderr. An instance already initialised in this
    process is reused.
    """
    require_ray()
    import ray

    if ray.is_initialized():
        if address:
            log.info("Ray is already initialised in this process; ignoring address %s", address)
        return False
    target = ray_target(address)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    kwargs: dict[str, Any] = {"log_to_driver": log_to_driver, "logging_level": logging.WARNING}
    if runtime_env:
        kwargs["runtime_env"] = dict(runtime_env)
    if target is not None:
        check_address(target)  # nothing listening: fail in seconds, saying what was tried
        if num_cpus is not None or num_gpus is not None:
            log.info("joining the Ray cluster at %s: it keeps its own CPUs and GPUs (num_cpus/num_gpus apply to a local instance)", target)
        ray.init(address=address, **kwargs)  # ray.init resolves RAY_ADDRESS itself, as ray_target did
        _CONNECTION.clear()
        _CONNECTION.update(
            cluster="joined",
            address=target,
            via="RAY_ADDRESS"
            if address in (None, "auto") and os.environ.get("RAY_ADDRESS")
            else ("address" if address else "the cluster `ray start` began on this machine"),
        )
    else:
        ray.init(
            address=address,
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            include_dashboard=False,
            _system_config={"worker_niceness": int(worker_niceness)},
            **kwargs,
        )
        _CONNECTION.clear()
        _CONNECTION.update(cluster="started locally")
    log.info("Ray resources: %s", {k: v for k, v in ray.cluster_resources().items() if k in ("CPU", "GPU", "memory")})
    return True


def worker_logging(level: int | None) -> None:
    """In a Ray worker: let the engine's ``logging`` records at ``level`` (the driver's) reach the
    worker's stderr, which Ray forwards to the driver (``log_to_driver``) and to a job's logs.

    A worker's root logger has no handler of its own, so without this only warnings and errors
    get out (through ``logging.lastResort``). Idempotent: one handler per process.
    """
    if level is None:
        return
    root = logging.getLogger()
    if not any(getattr(h, "_audit_worker", False) for h in root.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        handler._audit_worker = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(level)
    install_log_scrubber()  # the new handler too: no key in a forwarded line


def placement() -> dict[str, Any]:
    """Where this process runs: host, process id and the GPUs it may see (``CUDA_VISIBLE_DEVICES``)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return {"host": socket.gethostname(), "pid": os.getpid(), "gpu_ids": [g for g in (visible or "").split(",") if g] if visible else []}


#: How this process's Ray instance came about (init_ray), for summary.json's engine facts.
_CONNECTION: dict[str, Any] = {}


def connection_facts() -> dict[str, Any]:
    """The Ray instance this process uses: joined a cluster or started locally, its GCS address, nodes, Ray's version."""
    import ray

    if not ray.is_initialized():
        return {}
    facts = dict(_CONNECTION) or {"cluster": "initialised by the caller"}
    try:
        facts.update(gcs_address=ray.get_runtime_context().gcs_address, nodes=sum(1 for n in ray.nodes() if n.get("Alive")))
    except Exception:  # noqa: BLE001 - Ray Client and older releases expose less; the facts are informative
        pass
    facts["ray_version"] = ray.__version__
    return facts


def load_runtime_env(text: str | None) -> dict[str, Any] | None:
    """``--runtime-env``: inline JSON (text starting with ``{``) or a YAML/JSON file, read with the one
    YAML loader (engine/config.py); checked by :func:`check_runtime_env`. Errors name the flag."""
    if text is None:
        return None
    where = "--runtime-env"
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except ValueError as exc:
            raise ConfigError(
                f"{where}: not valid JSON ({exc}); give inline JSON such as "
                '\'{"env_vars": {"HF_HOME": "/shared/hf"}}\' or the path of a YAML/JSON file'
            ) from None
    else:
        path = Path(stripped).expanduser()
        if not path.is_file():
            raise ConfigError(f"{where}: '{text}' is neither inline JSON (starting with '{{') nor an existing file")
        data = load_yaml(path)
        where = f"{where} {path}"
    return check_runtime_env(data, where)


def check_runtime_env(value: Any, where: str) -> dict[str, Any]:
    """A runtime environment Ray will accept, or a ``ConfigError`` naming the key.

    A mapping of Ray's own fields only (a misspelt field would be a plug-in name to Ray and be
    ignored with a warning); ``env_vars`` maps names to strings (Ray refuses numbers there); every
    value is plain JSON (no NaN); then Ray's own validation (``ray.runtime_env.RuntimeEnv``).
    """
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{where}: expected a mapping of runtime_env fields (env_vars, working_dir, pip, ...), got {type(value).__name__}"
        )
    from ray.runtime_env import RuntimeEnv

    check_keys(value, {k for k in RuntimeEnv.known_fields if not k.startswith("_")}, where)
    env_vars = value.get("env_vars")
    if env_vars is not None:
        if not isinstance(env_vars, Mapping):
            raise ConfigError(f"{where}: env_vars must map variable names to strings, got {type(env_vars).__name__}")
        for name, var in env_vars.items():
            if not isinstance(name, str) or not isinstance(var, str):
                raise ConfigError(f'{where}: env_vars.{name}: Ray takes strings only, got {type(var).__name__} {var!r}; quote it ("{var}")')
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: every value must be plain JSON (strings, numbers, lists, mappings; no NaN): {exc}") from None
    try:
        RuntimeEnv(**dict(value))
    except Exception as exc:  # noqa: BLE001 - Ray's validation errors vary by field; each becomes one clear message
        raise ConfigError(f"{where}: Ray refuses this runtime_env: {type(exc).__name__}: {exc}") from None
    return dict(value)


def runtime_env_record(runtime_env: Mapping[str, Any]) -> dict[str, Any]:
    """The runtime environment as summary.json records it: ``env_vars`` values whose name looks like a
    secret (``*_KEY``, ``*_TOKEN``, ...) are redacted, every other string passes the secret scrubber."""

    def clean(node: Any) -> Any:
        if isinstance(node, str):
            return scrub(node)
        if isinstance(node, Mapping):
            return {str(k): clean(v) for k, v in node.items()}
        if isinstance(node, (list, tuple)):
            return [clean(v) for v in node]
        return node

    out = clean(runtime_env)
    env_vars = out.get("env_vars")
    if isinstance(env_vars, dict):
        out["env_vars"] = {k: (REDACTED if SECRET_NAME.search(k) else v) for k, v in env_vars.items()}
    return out  # type: ignore[no-any-return]


_NOT_FOUND = re.compile(r"audio file not found: '(.+?)'")


def missing_on_workers(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Audio paths a worker reported as not found (in ``rows``' errors) that this process can read:
    the sign of a node that does not mount the dataset's storage."""
    out = []
    for row in rows:
        m = _NOT_FOUND.search(str(row.get("error") or ""))
        if m and os.path.isfile(m.group(1)):
            out.append(m.group(1))
    return out


def driver_log_level() -> int:
    """The level this process logs at (what its workers' records are filtered to)."""
    return logging.getLogger().getEffectiveLevel()


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


__all__ = [
    "accepts_option",
    "check_positive",
    "check_runtime_env",
    "connection_facts",
    "driver_log_level",
    "init_ray",
    "load_runtime_env",
    "missing_on_workers",
    "ray_target",
    "require_ray",
    "runtime_env_record",
    "short_error",
    "worker_logging",
]
