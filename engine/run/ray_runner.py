"""The Ray engine: long-lived model actors, streamed ``(model, shard)`` units, resume, fault handling.

It runs passes of every kind (ASR, speaker verification, emotion; ``engine/run/passes.py``): a
spec's ``kind`` picks the backend registry and the rows its actors return, and the store given
is that kind's, so everything below holds for each pass.

Same contract as :class:`engine.run.runner.InProcessRunner` (constructor, ``run() -> facts``, progress
events, rows identical because both call ``decode_shard`` and ``process_pass``), with Ray doing the
placement:

* **Actors.** Each :class:`ModelActor` loads one model once (``load_model``, warm-up included) and
  then processes unit after unit. With GPUs in the cluster an actor asks for one GPU
  (``spec.meta['num_gpus']`` overrides, fractional allowed) and its backend gets ``device='cuda'``
  when it has a ``device`` option (Ray pins the actor through ``CUDA_VISIBLE_DEVICES``); a backend
  that declares ``cpu_only`` (hand-made features, e.g. ``prosody``) never takes a GPU. Without
  GPUs, actors take ``num_cpus`` each (default 1, ``spec.meta['num_cpus']``) from a CPU budget
  that keeps ``reserve_cpus`` (default 1 on machines with >= 2 CPUs) free for the driver and for
  decoding, so a 2-core laptop runs one actor and never deadlocks.
* **Longest first, then split.** Every model gets one actor before any gets a second, slowest
  first; idle slots at the tail take extra copies of the model with the most work left
  (``engine/run/schedule.py``). An actor whose model has no queued shard left is retired.
* **Streaming with backpressure.** At most ``max_in_flight`` units are submitted at once, at most
  ``actor_queue_depth`` per actor (2: the next unit's audio is ready when the current one ends).
* **Decoding once per shard.** A shard is decoded and resampled by a Ray task (not in the driver,
  so the driver never holds audio and its memory does not grow with the dataset); the decoded
  list lives in the object store and every model's actor reads the same object. A bounded LRU of
  shard refs (``shard_cache_size``) keeps decoded shards across models; a model prefers shards
  still cached, so the next model in a slot starts where the previous one ended.
  Evicted shards are decoded again when needed. The first model's first shards are decoded
  while its actors load (the load hides the decode worker's start-up).
* **Writes and resume.** Actors return rows; the driver writes each unit with
  ``RunStore.write_unit`` (part under a temporary name, atomic rename, then the marker). The
  runner plans every unit (``plan``, attached to the store as in the in-process runner): units
  whose marker agrees with their part and matches the plan (same utterances, clips and
  settings) are skipped, units whose rows an earlier run stored under another layout are
  rebuilt from them, and quarantined units (below) are retried.
* **Hosted APIs.** A hosted model's actors report their usage (calls billed, cache hits, cost)
  after each unit and when they go; the driver adds it to earlier sessions' in the model's facts
  (``engine/run/ray_usage.py``), as the in-process runner does.
* **Failures.** An actor that dies (segfault, OOM kill, ``os._exit``) or exceeds
  ``unit_timeout_s`` on a unit is killed and replaced; the unit it was running is retried up to
  ``max_retries`` times, then quarantined: its rows are written with
  ``error='unit failed after N attempts: <reason>'`` and it is listed in the model's
  ``facts['failed_units']``. Units queued behind it are requeued without penalty. A model whose
  backend cannot load is reported in its facts (status ``unavailable`` / ``failed-to-load`` and
  the backend's message) and the other models go on.
"""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from engine.data import DecodeOptions, ModelSpec, ProgressFn, WorkUnit
from engine.datasets.base import Dataset
from engine.errors import AuditError, ConfigError
from engine.run.cluster import node_capacity, placement_problem
from engine.run.passes import is_cpu_only
from engine.run.ray_actor import ModelActor
from engine.run.ray_setup import accepts_option, check_positive, driver_log_level, init_ray, missing_on_workers, short_error
from engine.run.ray_usage import RayUsage, final_usage, is_hosted
from engine.run.runner import InProcessRunner, decode_shard, failed_rows, start_info
from engine.run.schedule import choose_run, order_runs
from engine.run.store import RunPlan, RunStore

if TYPE_CHECKING:
    from engine.run.joint_pass import PassStores

log = logging.getLogger(__name__)

_NO_LIMIT = 1 << 30
_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@dataclass
class _Task:
    shard_id: str
    ref: Any
    head_since: float | None = None  # when it became the actor's running unit (for timeouts)


@dataclass
class _Actor:
    key: int
    model: str
    handle: Any
    num_cpus: float
    num_gpus: float
    load_ref: Any = None
    loaded: bool = False
    started: float = field(default_factory=time.monotonic)
    inflight: deque[_Task] = field(default_factory=deque)


@dataclass
class _ModelRun:
    spec: ModelSpec  # with device='cuda' added where the actor gets a GPU
    queue: deque[str]
    num_cpus: float
    num_gpus: float
    facts: dict[str, Any] = field(default_factory=dict)
    failed: bool = False
    loaded_once: bool = False
    actors: list[int] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)
    failed_units: list[dict[str, Any]] = field(default_factory=list)
    load_failures: int = 0
    restarts: int = 0
    actors_started: int = 0
    units_done: int = 0
    loading_announced: bool = False
    threads: int = 1  # OpenMP/BLAS threads per actor when the driver sets none
    ready_at: float | None = None  # run clock: first actor loaded and warm
    done_at: float | None = None  # run clock: last unit written
    placements: list[dict[str, Any]] = field(default_factory=list)  # host, pid, GPU ids of each actor that loaded
    audio_missing_on_workers: int = 0  # clips a worker did not find that the driver reads: storage not shared


_ACTOR_CLS: Any = None
_DECODE_FN: Any = None


def _remote_types() -> tuple[Any, Any]:
    """``ray.remote`` wrappers, built on first use so that importing this module does not import ray."""
    global _ACTOR_CLS, _DECODE_FN
    if _ACTOR_CLS is None:
        import ray

        _ACTOR_CLS = ray.remote(ModelActor)
        _DECODE_FN = ray.remote(decode_shard)
    return _ACTOR_CLS, _DECODE_FN


class RayRunner:
    """Runs pending ``(model, shard)`` units on Ray actors; see the module docstring for the scheme.

    ``address``: an existing cluster ('auto', 'ray://host:10001', 'host:6379'); None starts a local
    Ray instance with this machine's CPUs/GPUs (or reuses one already initialised in-process).
    ``workers``: at most this many actors per model. ``max_in_flight``: units submitted at once
    (default: ``actor_queue_depth`` per actor slot). ``unit_timeout_s``: a unit running longer is
    treated as a hung actor. ``num_cpus``/``num_gpus``: resources of a local instance.
    ``runtime_env``: passed to ``ray.init`` (e.g. ``working_dir`` or env vars on a cluster; ``--runtime-env``).
    ``log_to_driver``: workers' output, the actors' log records at the driver's level included, is
    forwarded to the driver (Ray's ``log_to_driver``; under ``ray job submit``, into the job's logs).
    ``thread_env``: 'driver' (default) gives actors the driver's OMP/MKL thread variables, so
    results match the in-process runner; 'ray' keeps Ray's OMP_NUM_THREADS=<num_cpus>.
    ``worker_niceness``: nice value of the workers of a local instance (Ray's default is 15).
    """

    def __init__(
        self,
        dataset: Dataset,
        models: Sequence[ModelSpec],
        store: RunStore | PassStores,
        warmup: int = 1,
        decode_options: DecodeOptions | None = None,
        progress: ProgressFn | None = None,
        *,
        warmups: Mapping[str, int] | None = None,
        address: str | None = None,
        workers: int | None = None,
        max_in_flight: int | None = None,
        max_retries: int = 2,
        unit_timeout_s: float | None = None,
        load_timeout_s: float | None = None,
        num_cpus: int | None = None,
        num_gpus: int | None = None,
        reserve_cpus: float | None = None,
        actor_queue_depth: int = 2,
        shard_cache_size: int = 16,
        retry_quarantined: bool = True,
        runtime_env: Mapping[str, Any] | None = None,
        log_to_driver: bool = True,
        thread_env: str = "driver",
        worker_niceness: int = 0,
    ) -> None:
        check_positive("workers", workers, integer=True)
        check_positive("max_in_flight", max_in_flight, integer=True)
        check_positive("unit_timeout_s", unit_timeout_s)
        check_positive("load_timeout_s", load_timeout_s)
        check_positive("actor_queue_depth", actor_queue_depth, integer=True)
        check_positive("shard_cache_size", shard_cache_size, integer=True)
        if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries < 0:
            raise ConfigError(f"RayRunner: 'max_retries' must be an integer >= 0, got {max_retries!r}")
        if thread_env not in ("driver", "ray"):
            raise ConfigError(f"RayRunner: 'thread_env' must be 'driver' or 'ray', got {thread_env!r}")
        if reserve_cpus is not None and reserve_cpus < 0:
            raise ConfigError(f"RayRunner: 'reserve_cpus' must be >= 0, got {reserve_cpus!r}")
        names = [m.name for m in models]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"model names must be unique in a run; repeated: {', '.join(dupes)}")
        self.dataset = dataset
        self.models = list(models)
        self.store = store
        self.warmup = warmup
        self.warmups = dict(warmups or {})  # per-model warm-up counts (a joint run's section backends keep theirs)
        self.decode_options = decode_options or DecodeOptions()
        self.plan = RunPlan.build(dataset, self.models, asdict(self.decode_options))
        store.use_plan(self.plan)
        self.progress = progress
        self.address = address
        self.workers = workers
        self.max_in_flight = max_in_flight
        self.max_retries = max_retries
        self.unit_timeout_s = unit_timeout_s
        self.load_timeout_s = load_timeout_s
        self.num_cpus = num_cpus
        self.num_gpus = num_gpus
        self.reserve_cpus = reserve_cpus
        self.actor_queue_depth = actor_queue_depth
        self.shard_cache_size = shard_cache_size
        self.retry_quarantined = retry_quarantined
        self.runtime_env = dict(runtime_env) if runtime_env else None
        self.log_to_driver = log_to_driver
        self.thread_env = thread_env
        self.worker_niceness = worker_niceness
        # run state
        self._runs: dict[str, _ModelRun] = {}
        self._actors: dict[int, _Actor] = {}
        self._watch: dict[Any, tuple[str, int]] = {}
        self._cache: OrderedDict[str, tuple[Any, Any]] = OrderedDict()
        self._next_key = 0
        self._cpu_budget = 1.0
        self._gpu_total = 0.0
        self._decode_cpus = 0.0
        self._label_keys: dict[str, list[str]] = {}
        self._t0 = time.perf_counter()
        self.stats: dict[str, Any] = {}
        self._usage = RayUsage({})  # hosted APIs' calls billed and cost, per model (engine/run/ray_usage.py)
        self._storage_warned = False

    # -- what is left to do -------------------------------------------------------------------
    def _quarantined(self, unit: WorkUnit) -> bool:
        import json

        try:
            return bool(json.loads(self.store.marker_path(unit).read_text()).get("quarantined"))
        except (OSError, ValueError):
            return False

    def pending(self) -> list[WorkUnit]:
        """Units without a marker that matches the plan (and, by default, units quarantined by an earlier run)."""
        self.store.use_plan(self.plan)
        retry = self._quarantined if self.retry_quarantined else None
        return self.store.pending_units([m.name for m in self.models], also=retry)

    # -- ray lifecycle ------------------------------------------------------------------------
    def _init_ray(self) -> bool:
        """Connect to / start Ray; returns True when this runner started it (and must shut it down)."""
        return init_ray(
            self.address,
            num_cpus=self.num_cpus,
            num_gpus=self.num_gpus,
            runtime_env=self.runtime_env,
            log_to_driver=self.log_to_driver,
            worker_niceness=self.worker_niceness,
        )

    def _plan(self, pending: Sequence[WorkUnit]) -> None:
        """Resource budget for actors and decode tasks; per-model actor resources and options."""
        import ray

        res = ray.cluster_resources()
        total_cpu = float(res.get("CPU", 0.0))
        self._gpu_total = float(res.get("GPU", 0.0))
        reserve = self.reserve_cpus if self.reserve_cpus is not None else (1.0 if total_cpu >= 2 else 0.0)
        by_model: dict[str, deque[str]] = {m.name: deque() for m in self.models}
        for u in pending:
            by_model[u.model].append(u.shard_id)
        biggest = 0.0
        capacity = node_capacity()  # one actor must fit on one node, not on the cluster's total
        for spec in self.models:
            if not by_model[spec.name]:
                continue
            meta = dict(spec.meta)
            cpu_only = is_cpu_only(spec)  # declared by the backend: no GPU, whatever the cluster has
            device_ok = not cpu_only and accepts_option(spec, "device", "cuda")
            explicit_cpu = str(spec.options.get("device", "")) == "cpu"
            if cpu_only:
                num_gpus = 0.0
            elif "num_gpus" in meta:
                num_gpus = float(meta["num_gpus"])
            else:
                num_gpus = 1.0 if (self._gpu_total > 0 and device_ok and not explicit_cpu) else 0.0
            num_cpus = float(meta.get("num_cpus", 1.0))
            if num_cpus > total_cpu > 0:
                log.warning("model %s asks for %g CPUs per actor; the cluster has %g, using %g", spec.name, num_cpus, total_cpu, total_cpu)
                num_cpus = total_cpu
            run_spec = spec
            if num_gpus > 0 and device_ok and "device" not in spec.options:
                run_spec = replace(spec, options={**dict(spec.options), "device": "cuda"})
            # Several CPU actors of one model share a machine: split its cores between them instead
            # of letting each backend (and its BLAS) start one thread per core.
            slots = max(1, int(max(num_cpus, total_cpu - reserve) // num_cpus)) if num_gpus == 0 else 1
            if self.workers:
                slots = min(slots, self.workers)
            node_cpus = (
                min(total_cpu, float(os.cpu_count() or total_cpu)) if total_cpu > 0 else 1.0
            )  # a cluster total is no per-node figure
            threads = max(1, int(node_cpus // slots))
            if slots > 1 and "cpu_threads" not in spec.options and accepts_option(spec, "cpu_threads", 1):
                run_spec = replace(run_spec, options={**dict(run_spec.options), "cpu_threads": threads})
            run = _ModelRun(run_spec, by_model[spec.name], num_cpus, num_gpus, threads=threads)
            problem = placement_problem(spec.name, num_gpus, meta, capacity)
            if problem:
                self._fail_model(run, "unavailable", problem)
            else:
                biggest = max(biggest, num_cpus)
            self._runs[spec.name] = run
        self._runs = order_runs(self._runs)  # slowest first (engine/run/schedule.py)
        self._cpu_budget = max(biggest, total_cpu - reserve)
        # Decode tasks take a CPU when one is left over after the actor budget; otherwise they run
        # unreserved (num_cpus=0) rather than wait forever behind the actors.
        self._decode_cpus = min(1.0, max(0.0, total_cpu - self._cpu_budget))
        slots = max(1, int(self._cpu_budget // max(biggest, 1e-9))) if biggest else 1
        self.stats.update(
            cpu_total=total_cpu,
            gpu_total=self._gpu_total,
            cpu_budget=self._cpu_budget,
            decode_cpus=self._decode_cpus,
            actor_slots_cpu=slots,
        )
        if self.max_in_flight is None:
            gpu_slots = int(self._gpu_total) if self._gpu_total else 0
            self._max_in_flight = self.actor_queue_depth * max(1, slots + gpu_slots)
        else:
            self._max_in_flight = self.max_in_flight

    # -- main loop -----------------------------------------------------------------------------
    def run(self) -> dict[str, dict[str, Any]]:
        """Process pending units; returns per-model facts (also written to the store)."""
        if not self.dataset.has_audio:  # predictions-only datasets have nothing for actors to do
            inproc = InProcessRunner(self.dataset, self.models, self.store, self.warmup, self.decode_options, self.progress)
            self.plan = inproc.plan
            return inproc.run()
        pending = self.store.rebuild_from_parts(self.pending())
        if not pending:
            if self.progress:
                self.progress("start", 0, start_info(self.models, []))
            previous = self.store.read_model_facts()
            result = {m.name: previous.get(m.name, {"model": m.name, "status": "loaded"}) for m in self.models}
            self.plan.not_run = {n for n, f in result.items() if f.get("status") != "loaded"}
            return result
        self._usage = RayUsage(self.store.read_model_facts())  # a resumed run keeps counting
        started = self._init_ray()
        self._t0 = t0 = time.perf_counter()
        try:
            if self.progress:
                self.progress("start", len(pending), start_info(self.models, pending))
            self._plan(pending)
            self._prefetch()
            self._loop()
        finally:
            self._shutdown_actors()
            self._cache.clear()
            self.stats["wall_s"] = time.perf_counter() - t0
            if started:
                import ray

                ray.shutdown()
        previous = self.store.read_model_facts()
        out: dict[str, dict[str, Any]] = {}
        for spec in self.models:
            run = self._runs.get(spec.name)
            if run is None:
                out[spec.name] = previous.get(spec.name, {"model": spec.name, "status": "loaded"})
                continue
            facts = dict(run.facts) or {"model": spec.name, "backend": spec.backend, "status": "not-started"}
            facts["failed_units"] = list(run.failed_units)
            facts["engine"] = {
                "runner": "ray",
                "actors_started": run.actors_started,
                "actor_restarts": run.restarts,
                "load_failures": run.load_failures,
                "num_cpus_per_actor": run.num_cpus,
                "num_gpus_per_actor": run.num_gpus,
                "units_written": run.units_done,
                # seconds since the run began: the span between them is processing without loading
                "first_actor_ready_s": run.ready_at,
                "last_unit_written_s": run.done_at,
                "actors": list(run.placements),
            }
            if run.audio_missing_on_workers:
                facts["engine"]["audio_missing_on_workers"] = run.audio_missing_on_workers
            run.facts = facts
            self.store.write_model_facts(spec.name, facts)
            out[spec.name] = facts
        self.plan.not_run = {n for n, f in out.items() if f.get("status") != "loaded"}
        return out

    def _loop(self) -> None:
        import ray

        while True:
            self._retire_idle()
            self._submit()
            self._start_actors()
            if not self._watch:
                if any(r.queue and not r.failed for r in self._runs.values()):
                    raise AuditError("the Ray engine cannot place any actor for the remaining units (no resources); check `ray status`")
                return
            ready, _ = ray.wait(list(self._watch), num_returns=1, timeout=self._poll_timeout())
            if ready:
                first = set(ready)
                rest = [r for r in self._watch if r not in first]
                if rest:
                    more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                    ready = ready + more
                order = {r: i for i, r in enumerate(self._watch)}
                for ref in sorted(ready, key=lambda r: order.get(r, 0)):
                    if ref in self._watch:  # an earlier result may have retired its actor
                        self._handle(ref)
            self._check_timeouts()

    def _poll_timeout(self) -> float:
        now = time.monotonic()
        wait = 1.0
        if self.unit_timeout_s is not None:
            for a in self._actors.values():
                if a.inflight and a.inflight[0].head_since is not None:
                    wait = min(wait, a.inflight[0].head_since + self.unit_timeout_s - now)
        if self.load_timeout_s is not None:
            for a in self._actors.values():
                if not a.loaded:
                    wait = min(wait, a.started + self.load_timeout_s - now)
        return max(0.02, wait)

    # -- actors ----------------------------------------------------------------------------------
    def _used(self) -> tuple[float, float]:
        cpu = sum(a.num_cpus for a in self._actors.values())
        gpu = sum(a.num_gpus for a in self._actors.values())
        return cpu, gpu

    def _start_actors(self) -> None:
        """Fill free slots in the order engine/run/schedule.py chooses; a chosen model that does not fit waits."""
        actor_cls, _ = _remote_types()
        while (run := choose_run(self._runs.values(), {k: a.loaded for k, a in self._actors.items()}, self.workers, self._t0)) is not None:
            cpu, gpu = self._used()
            fits_cpu = cpu + run.num_cpus <= self._cpu_budget + 1e-9 or not self._actors
            if not (fits_cpu and gpu + run.num_gpus <= self._gpu_total + 1e-9):
                return
            self._new_actor(actor_cls, run)

    def _new_actor(self, actor_cls: Any, run: _ModelRun) -> None:
        if self.progress and not run.loading_announced:
            self.progress("loading", 0, {"model": run.spec.name})
            run.loading_announced = True
        opts: dict[str, Any] = {"num_cpus": run.num_cpus, "num_gpus": run.num_gpus, "max_restarts": 0, "max_task_retries": 0}
        memory_mb = run.spec.meta.get("memory_mb")
        if memory_mb:  # reserved on the node: Ray places no second copy where it would not fit
            opts["memory"] = int(float(memory_mb) * 2**20)
        env = self._thread_env(run)
        if env:
            opts["runtime_env"] = {"env_vars": env}
        handle = actor_cls.options(**opts).remote(run.spec, self.warmups.get(run.spec.name, self.warmup), driver_log_level())
        key = self._next_key
        self._next_key += 1
        actor = _Actor(key, run.spec.name, handle, run.num_cpus, run.num_gpus)
        actor.load_ref = handle.load.remote()
        self._actors[key] = actor
        self._watch[actor.load_ref] = ("load", key)
        run.actors.append(key)
        run.actors_started += 1
        log.debug("started actor %d for %s (cpus=%g gpus=%g)", key, run.spec.name, run.num_cpus, run.num_gpus)

    def _thread_env(self, run: _ModelRun) -> dict[str, str] | None:
        """Thread-count variables for an actor's process: the driver's (default) or Ray's own.

        Ray starts workers with OMP_NUM_THREADS=<num_cpus>, and numpy's BLAS reads it at import:
        single-threaded BLAS changes the float sums in Whisper's log-Mel features, and an int8
        CTranslate2 model can then emit a different word. With 'driver' the actor's process starts
        with the driver's values; an unset OMP_NUM_THREADS becomes the machine's CPU count split
        between the model's concurrent actors (with one actor: what the libraries assume when it
        is unset, so rows equal the in-process runner's).
        """
        if self.thread_env == "ray":
            return None
        env = {name: os.environ[name] for name in _THREAD_VARS if name in os.environ}
        env.setdefault("OMP_NUM_THREADS", str(run.threads))
        return env

    def _remove_actor(self, actor: _Actor) -> None:
        import ray

        for ref in [r for r, (_, k) in self._watch.items() if k == actor.key]:
            del self._watch[ref]
        self._actors.pop(actor.key, None)
        self._usage.retire(actor.key)
        run = self._runs[actor.model]
        if actor.key in run.actors:
            run.actors.remove(actor.key)
        try:
            ray.kill(actor.handle, no_restart=True)
        except Exception as exc:  # noqa: BLE001 - already gone
            log.debug("actor %d was already gone: %s", actor.key, exc)

    def _retire_idle(self) -> None:
        """An actor whose model has nothing queued and nothing in flight frees its slot."""
        for actor in list(self._actors.values()):
            run = self._runs[actor.model]
            if actor.loaded and not actor.inflight and (not run.queue or run.failed):
                log.debug("retiring actor %d of %s", actor.key, actor.model)
                self._final_usage(actor)
                self._remove_actor(actor)

    def _shutdown_actors(self) -> None:
        for actor in list(self._actors.values()):
            self._final_usage(actor)
            self._remove_actor(actor)
        self._watch.clear()

    # -- units -----------------------------------------------------------------------------------
    def _next_shard(self, run: _ModelRun) -> str:
        """Prefer a shard whose decoded audio is still cached (most recent first)."""
        if run.queue[0] not in self._cache:
            queued = set(run.queue)
            for sid in reversed(self._cache):
                if sid in queued:
                    run.queue.remove(sid)
                    return sid
        return run.queue.popleft()

    def _shard_refs(self, shard_id: str) -> tuple[Any, Any]:
        import ray

        if shard_id in self._cache:
            self._cache.move_to_end(shard_id)
            return self._cache[shard_id]
        _, decode_fn = _remote_types()
        shard = self.dataset.load_shard(shard_id)
        self._label_keys[shard_id] = sorted({k for u in shard.utterances for k in u.labels})
        shard_ref = ray.put(shard)
        decoded_ref = decode_fn.options(num_cpus=self._decode_cpus).remote(shard_ref, self.dataset.root, self.decode_options)
        self._cache[shard_id] = (shard_ref, decoded_ref)
        while len(self._cache) > self.shard_cache_size:
            self._cache.popitem(last=False)  # in-flight tasks keep their own references
        return shard_ref, decoded_ref

    def _prefetch(self) -> None:
        """Start decoding the first model's first shards before any actor has loaded.

        Loading a model takes seconds (CPU) to minutes (large GPU checkpoints); decoding the
        shards its actors will ask for first, and starting the decode worker process, fit inside
        that time instead of after it. The refs go into the shard cache, which the first units
        then take (``_next_shard`` prefers cached shards).
        """
        n = min(self.shard_cache_size, self._max_in_flight)
        for run in self._runs.values():
            if run.failed or not run.queue:
                continue
            for shard_id in list(run.queue)[:n]:
                self._shard_refs(shard_id)
            return  # only the first (slowest) model's actors start now

    def _n_inflight(self) -> int:
        return sum(len(a.inflight) for a in self._actors.values())

    def _submit(self) -> None:
        n = self._n_inflight()
        for depth in range(1, self.actor_queue_depth + 1):
            for actor in list(self._actors.values()):
                run = self._runs[actor.model]
                if not actor.loaded or run.failed or len(actor.inflight) >= depth or not run.queue:
                    continue
                if n >= self._max_in_flight:
                    return
                shard_id = self._next_shard(run)
                shard_ref, decoded_ref = self._shard_refs(shard_id)
                ref = actor.handle.process.remote(shard_ref, decoded_ref)
                actor.inflight.append(_Task(shard_id, ref, time.monotonic() if not actor.inflight else None))
                self._watch[ref] = ("unit", actor.key)
                n += 1

    def _handle(self, ref: Any) -> None:
        import ray
        from ray.exceptions import RayActorError, RayError, RayTaskError, WorkerCrashedError

        kind, key = self._watch.pop(ref)
        actor = self._actors[key]
        run = self._runs[actor.model]
        if kind == "usage":
            try:
                self._usage.update(actor.model, key, ray.get(ref))
            except RayError:  # a dead actor: its unit's result says so; its last figures count
                return
            self._store_usage(run)
            return
        if kind == "load":
            try:
                facts = ray.get(ref)
            except (RayActorError, WorkerCrashedError) as exc:
                self._actor_died(actor, f"actor died while loading: {short_error(exc)}", during_load=True)
                return
            except RayError as exc:
                facts = {"model": run.spec.name, "backend": run.spec.backend, "status": "failed-to-load", "error": short_error(exc)}
            self._loaded(actor, run, facts)
            return
        task = actor.inflight[0] if actor.inflight else None
        if task is None or task.ref != ref:  # results of one actor arrive in order; be safe anyway
            task = next(t for t in actor.inflight if t.ref == ref)
        try:
            rows = ray.get(ref)
        except (RayActorError, WorkerCrashedError) as exc:
            self._actor_died(actor, f"actor died: {short_error(exc)}")
            return
        except RayTaskError as exc:
            actor.inflight.remove(task)
            self._cache.pop(task.shard_id, None)
            self._set_next_head(actor)
            self._unit_failed(run, task.shard_id, f"error in actor: {short_error(exc)}")
            return
        except RayError as exc:  # lost objects, dead owner or node: decode again and retry
            actor.inflight.remove(task)
            self._cache.pop(task.shard_id, None)
            self._set_next_head(actor)
            self._unit_failed(run, task.shard_id, f"{type(exc).__name__}: {short_error(exc)}")
            return
        actor.inflight.remove(task)
        self._set_next_head(actor)
        self._write(run, task.shard_id, rows)
        if is_hosted(run.facts):  # answered after the actor's next queued unit; the driver does not wait
            self._watch[actor.handle.usage.remote()] = ("usage", key)

    def _store_usage(self, run: _ModelRun) -> None:
        """Keep a hosted model's usage (this session's actors plus earlier sessions) current in its facts."""
        if self._usage.apply(run.spec.name, run.facts):
            self.store.write_model_facts(run.spec.name, run.facts)

    def _final_usage(self, actor: _Actor) -> None:
        """Before a hosted actor goes, read its final figures (after its queued units: they are billed)."""
        run = self._runs[actor.model]
        if actor.loaded and is_hosted(run.facts):
            self._usage.update(actor.model, actor.key, final_usage(actor.handle))
            self._store_usage(run)

    def _set_next_head(self, actor: _Actor) -> None:
        if actor.inflight and actor.inflight[0].head_since is None:
            actor.inflight[0].head_since = time.monotonic()

    def _loaded(self, actor: _Actor, run: _ModelRun, facts: dict[str, Any]) -> None:
        if facts.get("status") == "loaded":
            actor.loaded = True
            run.placements.append({**dict(facts.get("actor") or {}), "device": (facts.get("info") or {}).get("device")})
            if not run.loaded_once:
                run.loaded_once = True
                run.ready_at = time.perf_counter() - self._t0
                run.facts = dict(facts)
                self._usage.apply(run.spec.name, run.facts)
                self.store.write_model_facts(run.spec.name, run.facts)
            return
        if run.loaded_once:  # it loaded before: treat as a transient failure of this actor
            self._actor_died(actor, f"reload failed: {facts.get('error')}", during_load=True)
            return
        self._remove_actor(actor)
        run.facts = facts
        self._fail_model(run, str(facts.get("status", "failed-to-load")), str(facts.get("error", "unknown error")), facts)

    def _fail_model(self, run: _ModelRun, status: str, message: str, facts: Mapping[str, Any] | None = None) -> None:
        """The model cannot run here: record why, stop its actors; its units stay pending for a resume."""
        run.failed = True
        base = dict(
            facts or {"model": run.spec.name, "backend": run.spec.backend, "batch_size": run.spec.batch_size, **dict(run.spec.meta)}
        )
        base.update(status=status, error=message)
        run.facts = base
        self.store.write_model_facts(run.spec.name, base)
        n = len(run.queue) + sum(len(self._actors[k].inflight) for k in run.actors)
        for key in list(run.actors):
            self._remove_actor(self._actors[key])
        run.queue.clear()
        log.error("model %s: %s; its %d unit(s) are skipped", run.spec.name, message, n)
        if self.progress and n:
            self.progress("skip", n, {"model": run.spec.name, "reason": message})

    def _actor_died(self, actor: _Actor, reason: str, during_load: bool = False) -> None:
        run = self._runs[actor.model]
        tasks = list(actor.inflight)
        self._remove_actor(actor)
        if during_load:
            run.load_failures += 1
            log.warning("model %s: %s (load attempt %d)", run.spec.name, reason, run.load_failures)
            if run.load_failures > self.max_retries:
                self._fail_model(run, "failed-to-load", f"{reason} (after {run.load_failures} attempts)")
            return
        run.restarts += 1
        log.warning("model %s: %s; restarting the actor", run.spec.name, reason)
        for task in reversed(tasks[1:]):  # queued behind the failing unit: back to the front, no penalty
            run.queue.appendleft(task.shard_id)
        if tasks:
            self._unit_failed(run, tasks[0].shard_id, reason)

    def _unit_failed(self, run: _ModelRun, shard_id: str, reason: str) -> None:
        n = run.attempts.get(shard_id, 0) + 1
        run.attempts[shard_id] = n
        if n <= self.max_retries:
            log.warning("model %s, shard %s: attempt %d failed (%s); retrying", run.spec.name, shard_id, n, reason)
            run.queue.appendleft(shard_id)
            if self.progress:
                self.progress("retry", 0, {"model": run.spec.name, "shard": shard_id, "reason": reason, "attempt": n})
            return
        message = f"unit failed after {n} attempts: {reason}"
        log.error("model %s, shard %s: %s; quarantined", run.spec.name, shard_id, message)
        shard = self.dataset.load_shard(shard_id)
        rows = failed_rows(run.spec, shard, message)
        run.failed_units.append({"shard": shard_id, "reason": reason, "attempts": n})
        self._label_keys.setdefault(shard_id, sorted({k for u in shard.utterances for k in u.labels}))
        self._write(run, shard_id, rows, {"quarantined": True, "reason": reason, "attempts": n})

    def _write(self, run: _ModelRun, shard_id: str, rows: list[dict[str, Any]], extra: Mapping[str, Any] | None = None) -> None:
        unit = WorkUnit(run.spec.name, shard_id)
        try:
            self.store.write_unit(unit, rows, self._label_keys.get(shard_id, []), extra)
        except OSError as exc:
            raise AuditError(
                f"cannot write results of {unit.key} under {self.store.root}: {exc}; "
                "finished units are kept: fix the problem (disk space, permissions) and re-run the same command to resume"
            ) from exc
        run.units_done += 1
        run.done_at = time.perf_counter() - self._t0
        missing = missing_on_workers(rows)
        if missing:
            run.audio_missing_on_workers += len(missing)
            if not self._storage_warned:
                self._storage_warned = True
                log.warning(
                    "%s, shard %s: %d audio file(s) were not found by the Ray worker that decoded them, but this driver reads them "
                    "(e.g. %s): every Ray node must read the dataset's audio at the same path (shared storage, docs/cluster.md); "
                    "their rows carry the error, and the model's facts count them (engine.audio_missing_on_workers)",
                    run.spec.name,
                    shard_id,
                    len(missing),
                    missing[0],
                )
        if self.progress:
            self.progress("unit", 1, {"model": run.spec.name, "shard": shard_id, "rows": rows})

    def _check_timeouts(self) -> None:
        now = time.monotonic()
        for actor in list(self._actors.values()):
            if self.unit_timeout_s is not None and actor.inflight:
                head = actor.inflight[0]
                if head.head_since is not None and now - head.head_since > self.unit_timeout_s:
                    self._actor_died(actor, f"unit timed out after {self.unit_timeout_s:g} s (the actor was killed)")
                    continue
            if self.load_timeout_s is not None and not actor.loaded and now - actor.started > self.load_timeout_s:
                self._actor_died(actor, f"loading timed out after {self.load_timeout_s:g} s", during_load=True)


__all__ = ["ModelActor", "RayRunner", "init_ray"]
