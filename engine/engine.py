"""The run's engine: which runner moves the audio of every pass (ASR, SV, SER, probe re-runs, keyed passes).

A recipe run picks one engine (``--engine NAME``, ``--address``); the pipeline hands it to every
section (``SectionContext.engine``), and every pass is submitted through :class:`EngineOptions`
(:meth:`EngineOptions.runner` for shard passes, :meth:`EngineOptions.run_keyed` for keyed
passes), so ``--engine ray`` and ``--address`` cover the whole recipe and nothing outside
``engine/`` knows which runner ran a pass. Each pass's model facts record it
(``facts['engine']['runner']``: the runner's name, with host, pid and GPU ids).

Runners are registry entries (entry-point group ``audit_engine.runners``): subclasses of
:class:`Runner` that declare the pass kinds they run (:attr:`Runner.runs`). The engine asks that
declaration before it hands a runner any pass and never branches on a runner's name, so a
plug-in runner that declares keyed passes gets them, and one that does not is refused, naming
the runners that would run them. The pass kinds:

* ``shard:asr``, ``shard:sv``, ``shard:ser``: models of that kind over a dataset's shards, one
  result row per clip (``engine/run/``);
* ``joint``: several kinds in one shard run, each shard decoded once for all of them
  (``engine/run/joint_pass.py``; a runner declaring it also declares the shard kinds it joins);
* ``keyed``: keyed JSON units (diarization, long-form ASR, judges, the probes' helpers: ``engine/keyed/``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from engine.data import DecodeOptions, ModelSpec, ProgressFn
from engine.datasets.base import Dataset
from engine.errors import ConfigError, RegistryError
from engine.keyed.keyed_pass import KeyedOutcome, KeyedPass, KeyedProgress, run_inprocess, run_ray
from engine.options import Field
from engine.registry import Registry
from engine.run.passes import PASS_KINDS
from engine.run.runner import InProcessRunner
from engine.run.store import RunStore

if TYPE_CHECKING:
    from engine.run.joint_pass import JointRecord, PassStores


def shard_pass(kind: str) -> str:
    """The pass kind of models of ``kind`` (``asr``, ``sv``, ``ser``) run over a dataset's shards."""
    return f"shard:{kind}"


SHARD_ASR, SHARD_SV, SHARD_SER = (shard_pass(k) for k in PASS_KINDS)
KEYED = "keyed"
"""Keyed JSON units (``engine/keyed/keyed_pass.py``)."""
JOINT = "joint"
"""Several shard kinds as one run, each shard decoded once (``engine/run/joint_pass.py``)."""
ALL_PASSES: tuple[str, ...] = (*(shard_pass(k) for k in PASS_KINDS), JOINT, KEYED)
"""Every pass kind a runner may declare, in the order messages list them."""


class ShardRun(Protocol):
    """One shard pass (or a joint run) built by a runner: its plan, the units still to run, and ``run()``."""

    plan: Any

    def pending(self) -> Any: ...

    def run(self) -> dict[str, dict[str, Any]]: ...


@dataclass(frozen=True)
class PassNeed:
    """A pass a section will submit to the engine: what it is (for messages) and the pass kinds it takes."""

    what: str
    kinds: frozenset[str]


class Runner:
    """A way to move audio, registered under an ``--engine`` name; subclasses declare :attr:`runs`.

    A runner gets the run's :class:`EngineOptions` and builds shard passes (:meth:`shard_run`),
    runs keyed passes (:meth:`run_keyed`) when it declares ``keyed``, and may hold a session for
    the whole recipe (:meth:`start`/:meth:`stop`, e.g. a Ray instance). It is constructed cheaply;
    nothing starts before :meth:`start` or the first pass.
    """

    runs: ClassVar[frozenset[str]] = frozenset({SHARD_ASR})
    """The pass kinds this runner runs (``ALL_PASSES``); the engine refuses it any other before anything runs."""
    takes_address: ClassVar[bool] = False
    """Whether it joins a cluster at ``--address`` (:func:`runner_for_address`)."""

    def __init__(self, options: EngineOptions) -> None:
        self.options = options

    @classmethod
    def check_declaration(cls, name: str) -> None:
        """Refuse a declaration the engine cannot honour (unknown kinds; ``joint`` without two shard kinds)."""
        runs = getattr(cls, "runs", None)
        if not isinstance(runs, (frozenset, set, tuple, list)) or not all(isinstance(k, str) for k in runs):
            raise ConfigError(
                f"runner '{name}' ({cls.__module__}.{cls.__qualname__}): 'runs' must be a set of pass kinds from {ALL_PASSES}"
            )
        unknown = sorted(set(runs) - set(ALL_PASSES))
        if unknown:
            raise ConfigError(f"runner '{name}' declares unknown pass kind(s) {', '.join(unknown)} (known: {', '.join(ALL_PASSES)})")
        if JOINT in runs and len([k for k in runs if k.startswith("shard:")]) < 2:
            raise ConfigError(f"runner '{name}' declares '{JOINT}' but fewer than two shard kinds to join")

    def check(self) -> None:
        """The runner's own prerequisites, before the dataset opens (an optional package, a setting); default: none."""

    def shard_run(
        self,
        dataset: Dataset,
        specs: Sequence[ModelSpec],
        store: RunStore | PassStores,
        *,
        warmup: int,
        warmups: Mapping[str, int] | None,
        decode_options: DecodeOptions,
        progress: ProgressFn | None,
    ) -> ShardRun:
        """One shard pass (``specs`` of one kind) or a joint run (several kinds, ``store`` a ``PassStores``)."""
        raise NotImplementedError(f"{type(self).__qualname__} declares shard passes but has no shard_run")

    def run_keyed(self, passes: Sequence[KeyedPass], progress: KeyedProgress | None) -> KeyedOutcome:
        """Run keyed passes (only called when ``keyed`` is declared)."""
        raise NotImplementedError(f"{type(self).__qualname__} declares keyed passes but has no run_keyed")

    def start(self) -> bool:
        """Open a session for the whole recipe; True if this call opened it (default: nothing to open)."""
        return False

    def stop(self, started: bool) -> None:
        """Close what :meth:`start` opened."""

    def facts(self) -> dict[str, Any]:
        """What summary.json's ``engine`` section records about this runner beyond the options (default: nothing)."""
        return {}


class InProcessEngine(Runner):
    """Every pass in this process, one model (or load group) at a time (``engine/run/runner.py``, ``engine/keyed/``)."""

    runs = frozenset(ALL_PASSES)

    def shard_run(
        self,
        dataset: Dataset,
        specs: Sequence[ModelSpec],
        store: RunStore | PassStores,
        *,
        warmup: int,
        warmups: Mapping[str, int] | None,
        decode_options: DecodeOptions,
        progress: ProgressFn | None,
    ) -> ShardRun:
        o = self.options
        return InProcessRunner(
            dataset,
            list(specs),
            store,
            warmup=warmup,
            decode_options=decode_options,
            progress=progress,
            max_models_loaded=o.max_models_loaded,
            memory_budget_mb=o.memory_budget_mb,
            warmups=warmups,
        )

    def run_keyed(self, passes: Sequence[KeyedPass], progress: KeyedProgress | None) -> KeyedOutcome:
        return run_inprocess(passes, max_retries=self.options.max_retries, progress=progress)


class RayEngine(Runner):
    """Ray actors, on this machine or a cluster at ``--address`` (``engine/run/ray_runner.py``); one Ray
    instance serves every pass of a recipe (:meth:`start`)."""

    runs = frozenset(ALL_PASSES)
    takes_address = True

    def check(self) -> None:
        from engine.run.ray_setup import require_ray

        require_ray()

    def shard_run(
        self,
        dataset: Dataset,
        specs: Sequence[ModelSpec],
        store: RunStore | PassStores,
        *,
        warmup: int,
        warmups: Mapping[str, int] | None,
        decode_options: DecodeOptions,
        progress: ProgressFn | None,
    ) -> ShardRun:
        from engine.run.ray_runner import RayRunner

        o = self.options
        return RayRunner(
            dataset,
            list(specs),
            store,
            warmup=warmup,
            warmups=warmups,
            decode_options=decode_options,
            progress=progress,
            address=o.address,
            workers=o.workers,
            max_retries=o.max_retries,
            unit_timeout_s=o.unit_timeout_s,
            runtime_env=o.runtime_env,
        )

    def run_keyed(self, passes: Sequence[KeyedPass], progress: KeyedProgress | None) -> KeyedOutcome:
        """Ray must be started (:meth:`start`) or it is started here for the call."""
        o = self.options
        started = self.start()
        try:
            return run_ray(passes, workers=o.workers, max_retries=o.max_retries, unit_timeout_s=o.unit_timeout_s, progress=progress)
        finally:
            self.stop(started)

    def start(self) -> bool:
        from engine.run.ray_setup import init_ray

        return init_ray(self.options.address, runtime_env=self.options.runtime_env)

    def stop(self, started: bool) -> None:
        if started:
            import ray

            ray.shutdown()

    def facts(self) -> dict[str, Any]:
        from engine.run.ray_setup import connection_facts

        return {"ray": connection_facts()}


RUNNERS: Registry[type[Runner]] = Registry("runner", "audit_engine.runners")
"""The runners by ``--engine`` name; built-ins (``inprocess``, ``ray``) are entries in pyproject.toml like a plug-in's."""


def runner_class(name: str) -> type[Runner]:
    """The runner registered under ``name``, its declaration checked (``ConfigError`` naming it otherwise)."""
    try:
        cls = RUNNERS.get(name)
    except RegistryError as exc:
        raise ConfigError(f"--engine: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, Runner)):
        entry = next(e for e in RUNNERS.entries() if e.name == name)
        raise ConfigError(
            f"runner '{name}' ({entry.describe()}) is not a subclass of engine.engine.Runner; a runner declares the pass kinds it "
            "runs (docs/design.md, Registries)"
        )
    cls.check_declaration(name)
    return cls


def runners_for(kinds: Iterable[str]) -> list[str]:
    """The registered runners that declare every pass kind of ``kinds`` (imports each runner's module); a runner
    whose entry or declaration is broken is not offered (choosing it says why)."""
    need = set(kinds)
    out = []
    for n in RUNNERS.names():
        try:
            runs = runner_class(n).runs
        except (ConfigError, RegistryError):
            continue
        if need <= set(runs):
            out.append(n)
    return out


DEFAULT_RUNNER = "inprocess"
"""The runner of a run that names none (``--engine`` not given)."""


def runner_for_address(kind: str, address: str | None) -> str:
    """The runner of ``--engine kind --address address``: ``kind`` itself when no address is given or it
    declares ``takes_address``; with the default runner, the one registered runner that takes an address
    (so ``--address`` alone means Ray); otherwise a ``ConfigError`` naming the runners that take one."""
    if address is None or runner_class(kind).takes_address:
        return kind
    takers = []
    for n in RUNNERS.names():
        try:
            if runner_class(n).takes_address:
                takers.append(n)
        except (ConfigError, RegistryError):
            continue
    if kind == DEFAULT_RUNNER and len(takers) == 1:
        return takers[0]
    which = " or ".join(f"--engine {n}" for n in takers) or "none is registered"
    raise ConfigError(f"--address: engine '{kind}' takes no cluster address (runners that do: {which})")


def _passes_text(kinds: Iterable[str]) -> str:
    return ", ".join(k for k in ALL_PASSES if k in set(kinds))


@dataclass(frozen=True)
class EngineOptions:
    """Which runner moves the audio (``kind``: a runner registry name, ``inprocess`` by default) and its settings.

    The pipeline checks the options (:meth:`check`) and what the recipe's sections need of the
    runner (:meth:`missing`) before anything opens.
    """

    kind: str = DEFAULT_RUNNER
    address: str | None = None
    workers: int | None = None
    max_retries: int = 2
    unit_timeout_s: float | None = None
    max_models_loaded: int | None = None  # in-process: models resident at once (engine/run/memory_plan.py)
    memory_budget_mb: float | None = None  # in-process: memory the loaded models may take
    runtime_env: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    """Ray: the job's runtime environment (``--runtime-env``), passed to ``ray.init``
    (see :func:`engine.run.ray_setup.check_runtime_env`)."""
    joint: Mapping[str, JointRecord] = field(default_factory=dict, compare=False)
    """Section backends this recipe run already ran together with its ASR pass (``engine/run/joint_pass.py``), by name."""

    def check(self) -> None:
        """Every option typed and in range (``--memory-budget-mb -5``, ``--max-models-loaded 0``
        are refused here, before the run directory is touched), the runner known and its own
        prerequisites met (Ray installed for ``ray``)."""
        for name, f in ENGINE_FIELDS.items():
            f.check(getattr(self, name), f"--{name.replace('_', '-')}")
        self._runner().check()
        if self.runtime_env is not None:
            from engine.run.ray_setup import check_runtime_env

            check_runtime_env(self.runtime_env, "--runtime-env")

    def _runner(self) -> Runner:
        return runner_class(self.kind)(self)

    def runs(self, kind: str) -> bool:
        """Whether this engine's runner declares pass kind ``kind``."""
        return kind in runner_class(self.kind).runs

    def missing(self, kinds: Iterable[str]) -> list[str]:
        """The pass kinds of ``kinds`` this engine's runner does not declare (``[]`` when it runs them all)."""
        have = runner_class(self.kind).runs
        return [k for k in ALL_PASSES if k in set(kinds) and k not in have]

    def refusal(self, kinds: Iterable[str]) -> str:
        """The one wording of "this runner does not run these passes": what it runs and which runners would."""
        kinds = list(kinds)
        declared = _passes_text(runner_class(self.kind).runs) or "no passes"
        others = [n for n in runners_for(kinds) if n != self.kind]
        fix = f"use {' or '.join(f'--engine {n}' for n in others)}" if others else "no registered runner declares them"
        return f"engine '{self.kind}' does not run {_passes_text(kinds)} passes (it declares: {declared}); {fix}"

    def require(self, kinds: Iterable[str], what: str) -> None:
        """Refuse (``ConfigError``) to hand the runner passes of kinds it does not declare."""
        missing = self.missing(kinds)
        if missing:
            raise ConfigError(f"{what}: {self.refusal(missing)}")

    def runner(
        self,
        dataset: Dataset,
        specs: Sequence[ModelSpec],
        store: RunStore | PassStores,
        *,
        warmup: int = 1,
        warmups: Mapping[str, int] | None = None,
        decode_options: DecodeOptions | None = None,
        progress: ProgressFn | None = None,
    ) -> ShardRun:
        """A runner for one pass (``specs`` of one kind, ``store`` of that kind) or a joint run (``specs`` of
        several kinds, ``store`` a :class:`~engine.run.joint_pass.PassStores`); ``run()`` returns model facts.
        ``warmups`` overrides ``warmup`` per model name."""
        kinds = {shard_pass(s.kind) for s in specs}
        self.require(kinds | ({JOINT} if len(kinds) > 1 else set()), f"a pass of {', '.join(sorted({s.kind for s in specs}))} models")
        return self._runner().shard_run(
            dataset, specs, store, warmup=warmup, warmups=warmups, decode_options=decode_options or DecodeOptions(), progress=progress
        )

    def run_keyed(self, passes: Sequence[KeyedPass], progress: KeyedProgress | None = None) -> KeyedOutcome:
        """Run keyed passes (diarization, long-form ASR, judge questions: ``engine/keyed/keyed_pass.py``) on this engine.

        Every pending unit of ``passes`` is scheduled together, longest first; results are stored
        by this process as they arrive.
        """
        self.require([KEYED], "keyed passes")
        return self._runner().run_keyed(passes, progress)

    def start(self) -> bool:
        """Open the runner's session once for a whole recipe (one Ray instance for every pass); True if this call opened it."""
        return self._runner().start()

    def facts(self) -> dict[str, Any]:
        """What summary.json records about the engine (``engine`` section): runner, address, workers,
        the runtime environment with secret-looking values redacted, and the runner's own facts (on
        Ray, the cluster joined)."""
        out: dict[str, Any] = {"runner": self.kind, "address": self.address, "workers": self.workers}
        if self.runtime_env is not None:
            from engine.run.ray_setup import runtime_env_record

            out["runtime_env"] = runtime_env_record(self.runtime_env)
        out.update(self._runner().facts())
        return out

    def stop(self, started: bool) -> None:
        self._runner().stop(started)


__all__ = [
    "ALL_PASSES",
    "JOINT",
    "KEYED",
    "RUNNERS",
    "SHARD_ASR",
    "SHARD_SER",
    "SHARD_SV",
    "EngineOptions",
    "InProcessEngine",
    "PassNeed",
    "RayEngine",
    "Runner",
    "ShardRun",
    "runner_class",
    "runner_for_address",
    "runners_for",
    "shard_pass",
]


ENGINE_FIELDS: dict[str, Field] = {
    "kind": Field(str, DEFAULT_RUNNER, "the runner's registry name (--engine)"),
    "address": Field(str, None, "Ray cluster address", nullable=True),
    "workers": Field(int, None, "cap on Ray actors per model on CPU", ge=1, le=10_000, nullable=True),
    "max_retries": Field(int, 2, "retries of a failed unit", ge=0, le=100),
    "unit_timeout_s": Field(float, None, "seconds a unit may take before it is retried", gt=0, nullable=True),
    "max_models_loaded": Field(int, None, "in-process: models loaded at once", ge=1, le=1000, nullable=True),
    "memory_budget_mb": Field(float, None, "in-process: memory the loaded models may take, MB", gt=0, le=1e9, nullable=True),
    "runtime_env": Field(dict, None, "Ray: the job's runtime environment (a YAML/JSON file or inline JSON)", nullable=True),
}
"""The engine's options (CLI flags), typed and bounded (engine.options.Field)."""
