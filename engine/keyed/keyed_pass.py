"""Keyed passes on the run's engine: work whose result is one JSON object per ``(backend, unit)``.

The conversation section's diarization and long-form ASR (one result per recording) and the
judges' questions (one verdict per item) are not rows per clip of a shard, so they do not fit the
Parquet units of ``engine/run/store.py``; they keep the same promises through
``engine/keyed/unit_store.KeyedUnitStore`` (hashed safe names, markers with input fingerprints and
settings, atomic writes, exact resume) and run on the same two runners as every other pass:

* **The driver schedules and writes; workers do the audio work.** A unit's ``payload`` names what
  the worker reads (a recording's path, a clip's location), never the audio itself; the worker
  (a :class:`KeyedWorker`, named ``module:attr`` so a Ray actor can import it) loads its backend
  once and turns payloads into results. The driver stores each result the moment it arrives
  (``KeyedUnitStore.put``), so a run killed at any point resumes with only unfinished units.
* **Runners.** ``inprocess``: one worker at a time in this process. ``ray``: one actor per worker
  spec (more with ``--workers``), sized by the spec's ``num_gpus``/``num_cpus``/``memory_mb``
  like an ASR model's actors, pinned to a GPU when it asks for one (``device: auto`` then
  resolves to cuda inside the actor). A worker's facts record the runner, host, pid and, on Ray,
  node and GPU ids.
* **Longest first, across passes.** Every pending unit of every pass handed over together is
  ordered by its audio length; actors whose work is longest start first and each actor always
  takes the longest unit it can run, so the slowest recording does not start last.
* **Failures.** A failed unit is retried (``--max-retries``); a unit that still fails is returned
  in :attr:`KeyedOutcome.failed` with its error and is not stored, so the next run retries it
  (nothing wrong is ever reused). A refused key or an empty account
  (``HostedAuthError``/``HostedQuotaError``) fails every remaining unit of that worker at once,
  without another request. A worker that cannot load fails all its units with the load error.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.backends.hosted.scrub import error_text, install_log_scrubber
from engine.errors import AuditError, ConfigError, HostedAuthError, HostedQuotaError
from engine.keyed.unit_store import KeyedUnitStore

log = logging.getLogger(__name__)

FATAL_ERRORS: tuple[type[BaseException], ...] = (HostedAuthError, HostedQuotaError)
"""Errors after which a worker sends nothing more: its remaining units fail with the same error."""

KeyedProgress = Callable[[str, int, dict[str, Any]], None]


class KeyedWorker(Protocol):
    """What a keyed pass runs: built from its spec's options, loaded once, then one call per unit."""

    def load(self) -> Mapping[str, Any]:
        """Load the backend; returns its facts (backend_info)."""

    def run(self, payload: Mapping[str, Any]) -> Any:
        """One unit's result (JSON-able); raises when the unit failed."""

    def facts(self) -> Mapping[str, Any]:
        """Facts after the work (e.g. a hosted judge's usage and cost)."""

    def close(self) -> None:
        """Free the backend."""


@dataclass(frozen=True)
class WorkerSpec:
    """One backend of a keyed pass: ``worker`` (``module:attr``) built with ``options`` on a worker sized by ``placement``."""

    name: str  # the store's backend name (a diarizer, a model, a judge)
    worker: str
    options: Mapping[str, Any] = field(default_factory=dict)
    placement: Mapping[str, float] = field(default_factory=dict)  # num_gpus, num_cpus, memory_mb
    concurrency: int = 1  # units one worker runs at once (a hosted judge's request limit)
    gpu_capable: bool = False  # on Ray, without num_gpus in placement: one GPU per actor when the cluster has GPUs
    max_actors: int | None = None  # on Ray, at most this many actors whatever --workers (a hosted judge: 1, its limits hold)


@dataclass(frozen=True)
class KeyedUnit:
    """One unit: which worker runs it, the marker's ``inputs``/``settings``, what the worker reads, its audio seconds."""

    backend: str
    unit: str
    inputs: Mapping[str, Any]
    settings: Mapping[str, Any]
    payload: Mapping[str, Any]
    cost_s: float = 0.0


@dataclass(frozen=True)
class KeyedPass:
    """A pass: its store, its workers and its units (every unit's ``backend`` names one of ``workers``)."""

    store: KeyedUnitStore
    workers: tuple[WorkerSpec, ...]
    units: tuple[KeyedUnit, ...]

    def __post_init__(self) -> None:
        names = [w.name for w in self.workers]
        if len(set(names)) != len(names):
            raise ConfigError(f"{self.store.pass_name}: two workers share a name in {names}")
        unknown = sorted({u.backend for u in self.units} - set(names))
        if unknown:
            raise ConfigError(f"{self.store.pass_name}: units name workers that are not given: {', '.join(unknown)}")
        KeyedUnitStore.check_names(names, sorted({u.unit for u in self.units}))


@dataclass
class KeyedOutcome:
    """What a set of keyed passes did: facts per ``(pass, worker)``, results of every unit and the failed units."""

    facts: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    results: dict[tuple[str, str, str], Any] = field(default_factory=dict)  # (pass, backend, unit) -> result
    failed: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (pass, backend, unit) -> error

    def raise_failed(self, what: str) -> None:
        """Raise one error naming every failed unit (their siblings are already stored)."""
        if not self.failed:
            return
        lines = [f"{p} {b} / {u}: {e}" for (p, b, u), e in sorted(self.failed.items())]
        shown = "; ".join(lines[:10]) + (f"; and {len(lines) - 10} more" if len(lines) > 10 else "")
        raise KeyedPassError(
            f"{what}: {len(lines)} unit(s) failed after retries ({shown}); every other unit is stored: "
            "fix the cause and re-run the same command to compute only these"
        )


class KeyedPassError(AuditError):
    """Units of a keyed pass failed after their retries."""


def load_worker(path: str) -> type:
    """The worker class named ``module:attr`` (imported lazily, so a Ray worker process can build it)."""
    module, _, attr = path.partition(":")
    if not module or not attr:
        raise ConfigError(f"keyed pass: worker must be named 'module:attr', got {path!r}")
    try:
        return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"keyed pass: cannot import worker {path!r}: {exc}") from None


def _placement_facts() -> dict[str, Any]:
    from engine.run.ray_setup import placement

    return placement()


def pending_units(passes: Sequence[KeyedPass], outcome: KeyedOutcome) -> list[tuple[KeyedPass, KeyedUnit]]:
    """Units whose stored result is not vouched for by its marker, longest first; vouched results go into ``outcome``."""
    todo: list[tuple[KeyedPass, KeyedUnit]] = []
    for p in passes:
        for u in p.units:
            found = p.store.get(u.backend, u.unit, u.inputs, u.settings)
            if found is None:
                todo.append((p, u))
            else:
                outcome.results[(p.store.pass_name, u.backend, u.unit)] = found
    todo.sort(key=lambda pu: -float(pu[1].cost_s))  # stable: equal lengths keep the pass's order
    return todo


def _store(p: KeyedPass, u: KeyedUnit, result: Any, outcome: KeyedOutcome) -> None:
    import json

    p.store.put(u.backend, u.unit, u.inputs, u.settings, result)
    outcome.results[(p.store.pass_name, u.backend, u.unit)] = json.loads(json.dumps(result, sort_keys=True, default=str))


def _fatal(exc: BaseException) -> BaseException | None:
    cause = getattr(exc, "cause", None)  # a Ray task error wraps the worker's exception
    for e in (exc, cause):
        if isinstance(e, FATAL_ERRORS):
            return e
    return None


def _groups(todo: Sequence[tuple[KeyedPass, KeyedUnit]]) -> list[tuple[KeyedPass, WorkerSpec, list[KeyedUnit]]]:
    """Pending units per (pass, worker), the group with the most audio first (each group's units stay longest first)."""
    by: dict[tuple[str, str], tuple[KeyedPass, WorkerSpec, list[KeyedUnit]]] = {}
    for p, u in todo:
        key = (p.store.pass_name, u.backend)
        if key not in by:
            spec = next(w for w in p.workers if w.name == u.backend)
            by[key] = (p, spec, [])
        by[key][2].append(u)
    return sorted(by.values(), key=lambda g: -sum(float(u.cost_s) for u in g[2]))


# --------------------------------------------------------------------------------------------
# in-process
# --------------------------------------------------------------------------------------------


def run_inprocess(passes: Sequence[KeyedPass], *, max_retries: int = 2, progress: KeyedProgress | None = None) -> KeyedOutcome:
    """Run every pending unit in this process, one worker at a time (the one with the most audio first)."""
    outcome = KeyedOutcome()
    todo = pending_units(passes, outcome)
    for p, spec, units in _groups(todo):
        key = (p.store.pass_name, spec.name)
        facts: dict[str, Any] = {"runner": "inprocess", "pass": key[0], "name": spec.name, **_placement_facts(), "pending": len(units)}
        outcome.facts[key] = facts
        t0 = time.perf_counter()
        try:
            worker = load_worker(spec.worker)(**dict(spec.options))
            facts.update(dict(worker.load() or {}))
        except Exception as exc:  # noqa: BLE001 - a worker that cannot load fails its units, named
            msg = error_text(exc, "load failed: ")
            facts.update(status="load_failed", error=msg)
            for u in units:
                outcome.failed[(key[0], u.backend, u.unit)] = msg
            continue
        facts["load_s"] = round(time.perf_counter() - t0, 3)
        fatal: list[BaseException] = []

        def one(u: KeyedUnit, worker: Any = worker, fatal: list[BaseException] = fatal) -> tuple[KeyedUnit, Any, str | None]:
            last = ""
            for _ in range(max_retries + 1):
                if fatal:
                    return u, None, error_text(fatal[0])
                try:
                    return u, worker.run(dict(u.payload)), None
                except Exception as exc:  # noqa: BLE001 - retried, then the unit's error
                    hit = _fatal(exc)
                    if hit is not None:
                        fatal.append(hit)
                        return u, None, error_text(hit)
                    last = error_text(exc)
            return u, None, last

        try:
            if spec.concurrency > 1:
                with ThreadPoolExecutor(max_workers=min(spec.concurrency, len(units)), thread_name_prefix="keyed") as pool:
                    results = pool.map(one, units)
                    for u, result, err in results:
                        _finish(p, u, result, err, outcome, progress)
            else:
                for u in units:
                    _finish(p, *one(u), outcome, progress)
            facts.update(dict(worker.facts() or {}))
        finally:
            worker.close()
    return outcome


def _finish(p: KeyedPass, u: KeyedUnit, result: Any, err: str | None, outcome: KeyedOutcome, progress: KeyedProgress | None) -> None:
    if err is not None:
        outcome.failed[(p.store.pass_name, u.backend, u.unit)] = err
        log.warning("%s %s / %s failed: %s", p.store.pass_name, u.backend, u.unit, err)
        return
    _store(p, u, result, outcome)
    if progress:
        progress(p.store.pass_name, 1, {"backend": u.backend, "unit": u.unit})


# --------------------------------------------------------------------------------------------
# Ray
# --------------------------------------------------------------------------------------------


class KeyedActor:
    """A Ray actor holding one loaded worker for its life (wrapped with ``ray.remote`` on first use)."""

    def __init__(self, worker: str, options: Mapping[str, Any], log_level: int | None = None) -> None:
        from engine.run.ray_setup import worker_logging

        install_log_scrubber()
        worker_logging(log_level)  # the worker's log records reach the driver (and a job's logs) at the driver's level
        self.worker = load_worker(worker)(**dict(options))

    def load(self) -> dict[str, Any]:
        facts = dict(self.worker.load() or {})
        actor = _placement_facts()
        try:
            import ray

            actor.update(node_id=ray.get_runtime_context().get_node_id(), gpu_ids=[str(g) for g in ray.get_gpu_ids()])
        except Exception:  # noqa: BLE001 - placement facts are informative only
            pass
        facts["actor"] = actor
        return facts

    def run(self, payload: Mapping[str, Any]) -> Any:
        return self.worker.run(payload)

    def facts(self) -> dict[str, Any]:
        return dict(self.worker.facts() or {})

    def close(self) -> None:
        self.worker.close()


_ACTOR: Any = None


def _actor_cls() -> Any:
    global _ACTOR
    if _ACTOR is None:
        import ray

        _ACTOR = ray.remote(KeyedActor)
    return _ACTOR


@dataclass
class _Group:
    """One (pass, worker) on Ray: its actors, its queue (longest first) and what is in flight."""

    p: KeyedPass
    spec: WorkerSpec
    queue: list[KeyedUnit]
    tries: dict[str, int] = field(default_factory=dict)
    actors: list[Any] = field(default_factory=list)
    loading: dict[Any, Any] = field(default_factory=dict)  # load ref -> actor
    ready: list[Any] = field(default_factory=list)
    inflight: dict[Any, tuple[Any, KeyedUnit, float]] = field(default_factory=dict)  # ref -> (actor, unit, started)
    fatal: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    gpus: float = 0.0  # GPUs in the cluster


def _actor_options(spec: WorkerSpec, gpus_in_cluster: float) -> dict[str, Any]:
    """Ray options of a worker's actor: its placement; a GPU-capable worker that names no ``num_gpus`` gets one GPU when there are any."""
    default_gpus = 1.0 if spec.gpu_capable and gpus_in_cluster > 0 else 0.0
    opts: dict[str, Any] = {
        "num_cpus": float(spec.placement.get("num_cpus", 1.0)),
        "num_gpus": float(spec.placement.get("num_gpus", default_gpus)),
    }
    if spec.placement.get("memory_mb"):
        opts["memory"] = int(float(spec.placement["memory_mb"]) * 1024 * 1024)
    if spec.concurrency > 1:
        opts["max_concurrency"] = int(spec.concurrency)
    return opts


def run_ray(
    passes: Sequence[KeyedPass],
    *,
    workers: int | None = None,
    max_retries: int = 2,
    unit_timeout_s: float | None = None,
    progress: KeyedProgress | None = None,
) -> KeyedOutcome:
    """Run every pending unit on Ray actors (Ray must be initialised: ``EngineOptions.start``)."""
    import ray

    outcome = KeyedOutcome()
    groups = [_Group(p, spec, list(units)) for p, spec, units in _groups(pending_units(passes, outcome))]
    cls = _actor_cls()
    gpus = float(ray.cluster_resources().get("GPU", 0.0))
    for g in groups:
        g.gpus = gpus  # the group with the most audio asks for its actors first
        n = max(1, min(int(workers or 1), len(g.queue), int(g.spec.max_actors or len(g.queue) or 1)))
        g.facts = {"runner": "ray", "pass": g.p.store.pass_name, "name": g.spec.name, "pending": len(g.queue), "actors": []}
        for _ in range(n):
            _spawn(cls, g)
    try:
        while any(g.loading or g.inflight or (g.queue and g.fatal is None and (g.actors or g.ready)) for g in groups):
            for g in groups:
                _submit(g, outcome)
            refs = [r for g in groups for r in (*g.loading, *g.inflight)]
            if not refs:
                break
            done, _ = ray.wait(refs, num_returns=1, timeout=1.0)
            for ref in done:
                g = next(g for g in groups if ref in g.loading or ref in g.inflight)
                if ref in g.loading:
                    _loaded(cls, g, ref, outcome, max_retries)
                else:
                    _ran(cls, g, ref, outcome, max_retries, progress)
            if unit_timeout_s:
                _timeouts(cls, groups, unit_timeout_s, outcome, max_retries)
            for g in groups:
                _retire(g)
    finally:
        for g in groups:
            for a in list(g.actors):
                _kill(g, a, graceful=not g.inflight)
            key = (g.p.store.pass_name, g.spec.name)
            outcome.facts[key] = g.facts
            for u in g.queue:  # left because the worker could not load or stopped on a fatal error
                outcome.failed.setdefault((key[0], u.backend, u.unit), g.fatal or "not run")
    return outcome


def _spawn(cls: Any, g: _Group) -> None:
    level = logging.getLogger().getEffectiveLevel()  # the worker's log records reach the driver at this level
    actor = cls.options(**_actor_options(g.spec, g.gpus)).remote(g.spec.worker, dict(g.spec.options), level)
    g.actors.append(actor)
    g.loading[actor.load.remote()] = actor


def _kill(g: _Group, actor: Any, graceful: bool = True) -> None:
    """Remove an actor; an idle one first reports its closing facts (a hosted judge's usage) and closes its backend."""
    import ray

    if actor in g.actors:
        g.actors.remove(actor)
    if actor in g.ready:
        g.ready.remove(actor)
    idle = not any(a is actor for a, _, _ in g.inflight.values()) and actor not in g.loading.values()
    try:
        if graceful and idle:
            g.facts.update(dict(ray.get(actor.facts.remote(), timeout=60) or {}))
            ray.get(actor.close.remote(), timeout=60)
    except Exception:  # noqa: BLE001 - closing is best effort; the actor is killed anyway
        pass
    ray.kill(actor, no_restart=True)


def _submit(g: _Group, outcome: KeyedOutcome) -> None:
    """Each ready actor takes the longest queued units, up to its concurrency."""
    if g.fatal is not None:
        return
    for actor in list(g.ready):
        busy = sum(1 for a, _, _ in g.inflight.values() if a is actor)
        while g.queue and busy < g.spec.concurrency:
            u = g.queue.pop(0)
            g.inflight[actor.run.remote(dict(u.payload))] = (actor, u, time.monotonic())
            busy += 1


def _loaded(cls: Any, g: _Group, ref: Any, outcome: KeyedOutcome, max_retries: int) -> None:
    import ray

    actor = g.loading.pop(ref)
    try:
        facts = ray.get(ref)
    except Exception as exc:  # noqa: BLE001 - a load failure fails the worker's units, named
        from engine.run.ray_setup import short_error

        g.fatal = f"load failed: {short_error(exc)}"
        g.facts.update(status="load_failed", error=g.fatal)
        _kill(g, actor, graceful=False)
        return
    placement = facts.pop("actor", {})
    g.facts["actors"].append(placement)
    g.facts.update(facts)
    g.ready.append(actor)


def _ran(cls: Any, g: _Group, ref: Any, outcome: KeyedOutcome, max_retries: int, progress: KeyedProgress | None) -> None:
    import ray

    actor, u, _ = g.inflight.pop(ref)
    try:
        result = ray.get(ref)
    except Exception as exc:  # noqa: BLE001 - retried, then the unit's error
        _unit_error(cls, g, actor, u, exc, outcome, max_retries)
        return
    _finish(g.p, u, result, None, outcome, progress)


def _unit_error(cls: Any, g: _Group, actor: Any, u: KeyedUnit, exc: BaseException, outcome: KeyedOutcome, max_retries: int) -> None:
    from ray.exceptions import ActorDiedError, RayActorError

    from engine.run.ray_setup import short_error

    hit = _fatal(exc)
    key = (g.p.store.pass_name, u.backend, u.unit)
    if hit is not None:
        g.fatal = error_text(hit)
        outcome.failed[key] = g.fatal
        return
    if isinstance(exc, (RayActorError, ActorDiedError)) and actor in g.actors:  # the process died: a new actor takes over
        g.actors.remove(actor)
        if actor in g.ready:
            g.ready.remove(actor)
        _spawn(cls, g)
    g.tries[u.unit] = g.tries.get(u.unit, 0) + 1
    if g.tries[u.unit] <= max_retries:
        g.queue.insert(0, u)
        return
    outcome.failed[key] = short_error(exc)
    log.warning("%s %s / %s failed: %s", *key, outcome.failed[key])


def _timeouts(cls: Any, groups: Sequence[_Group], limit_s: float, outcome: KeyedOutcome, max_retries: int) -> None:
    now = time.monotonic()
    for g in groups:
        for ref, (actor, u, started) in list(g.inflight.items()):
            if now - started > limit_s and ref in g.inflight:
                for r2, (a2, u2, _) in list(g.inflight.items()):  # everything on that actor is lost with it
                    if a2 is actor:
                        g.inflight.pop(r2)
                        if u2 is not u:
                            g.queue.insert(0, u2)
                _kill(g, actor, graceful=False)
                _spawn(cls, g)
                _unit_error(cls, g, None, u, TimeoutError(f"unit took longer than {limit_s:g} s"), outcome, max_retries)


def _retire(g: _Group) -> None:
    """An actor with nothing left to run is closed, so its CPU/GPU goes to actors still waiting to start."""
    if g.queue and g.fatal is None:
        return
    for actor in list(g.ready):
        if not any(a is actor for a, _, _ in g.inflight.values()):
            _kill(g, actor)


__all__ = [
    "FATAL_ERRORS",
    "KeyedActor",
    "KeyedOutcome",
    "KeyedPass",
    "KeyedPassError",
    "KeyedUnit",
    "KeyedWorker",
    "WorkerSpec",
    "load_worker",
    "pending_units",
    "run_inprocess",
    "run_ray",
]
