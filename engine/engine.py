"""The run's engine: which runner moves the audio of every pass (ASR, SV, SER, probe re-runs).

A recipe run picks one engine (``--engine inprocess|ray``, ``--address``); the pipeline hands it
to every section (``SectionContext.engine``), and every pass is submitted through
:meth:`EngineOptions.runner`, so ``--engine ray`` and ``--address`` cover the whole recipe and
nothing outside ``engine/`` knows which runner ran a pass. Each pass's model facts record it
(``facts['engine']['runner']``: ``inprocess`` or ``ray``, with host, pid and GPU ids).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.config import Field
from engine.data import DecodeOptions, ModelSpec, ProgressFn
from engine.datasets.base import Dataset
from engine.errors import ConfigError
from engine.keyed.keyed_pass import KeyedOutcome, KeyedPass, KeyedProgress, run_inprocess, run_ray
from engine.run.runner import InProcessRunner
from engine.run.store import RunStore

if TYPE_CHECKING:
    from engine.run.joint_pass import JointRecord, PassStores

ENGINE_KINDS = ("inprocess", "ray")
"""The runners that run every pass kind; a plug-in runner (``audit_engine.runners``) runs the ASR pass only."""


@dataclass(frozen=True)
class EngineOptions:
    """Which runner moves the audio: ``inprocess`` (default on one machine), ``ray``, or a plug-in's name.

    The pipeline checks the name against the runner registry (``audits/runners.py``) before
    anything opens; :meth:`runner` builds the section passes' runners.
    """

    kind: str = "inprocess"
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
        are refused here, before the run directory is touched); the runner's name is checked by
        the runner registry."""
        for name, f in ENGINE_FIELDS.items():
            f.check(getattr(self, name), f"--{name.replace('_', '-')}")
        if self.kind == "ray":
            from engine.run.ray_setup import require_ray

            require_ray()
        if self.runtime_env is not None:
            from engine.run.ray_setup import check_runtime_env

            check_runtime_env(self.runtime_env, "--runtime-env")

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
    ) -> Any:
        """A runner for one pass (``specs`` of one kind, ``store`` of that kind) or a joint run (``specs`` of
        several kinds, ``store`` a :class:`~engine.run.joint_pass.PassStores`); ``run()`` returns model facts.
        ``warmups`` overrides ``warmup`` per model name."""
        dec = decode_options or DecodeOptions()
        if self.kind not in ENGINE_KINDS:
            raise ConfigError(
                f"engine '{self.kind}' is a plug-in runner: it runs the recipe's ASR pass, but speaker, emotion and probe "
                f"passes run on {' or '.join(ENGINE_KINDS)}; use --engine inprocess or --engine ray for a recipe with these sections"
            )
        if self.kind == "ray":
            from engine.run.ray_runner import RayRunner

            return RayRunner(
                dataset,
                list(specs),
                store,
                warmup=warmup,
                warmups=warmups,
                decode_options=dec,
                progress=progress,
                address=self.address,
                workers=self.workers,
                max_retries=self.max_retries,
                unit_timeout_s=self.unit_timeout_s,
                runtime_env=self.runtime_env,
            )
        return InProcessRunner(
            dataset,
            list(specs),
            store,
            warmup=warmup,
            decode_options=dec,
            progress=progress,
            max_models_loaded=self.max_models_loaded,
            memory_budget_mb=self.memory_budget_mb,
            warmups=warmups,
        )

    def run_keyed(self, passes: Sequence[KeyedPass], progress: KeyedProgress | None = None) -> KeyedOutcome:
        """Run keyed passes (diarization, long-form ASR, judge questions: ``engine/keyed/keyed_pass.py``) on this engine.

        Every pending unit of ``passes`` is scheduled together, longest first; results are stored
        by this process as they arrive. On Ray, Ray must be started (:meth:`start`) or it is
        started here for the call.
        """
        if self.kind not in ENGINE_KINDS:
            raise ConfigError(
                f"engine '{self.kind}' is a plug-in runner: it runs the recipe's ASR pass only; use --engine inprocess or --engine ray"
            )
        if self.kind == "ray":
            started = self.start()
            try:
                return run_ray(
                    passes, workers=self.workers, max_retries=self.max_retries, unit_timeout_s=self.unit_timeout_s, progress=progress
                )
            finally:
                self.stop(started)
        return run_inprocess(passes, max_retries=self.max_retries, progress=progress)

    def start(self) -> bool:
        """Connect to (or start) Ray once for a whole recipe, so its passes share one instance; True if this call started it."""
        if self.kind != "ray":
            return False
        from engine.run.ray_setup import init_ray

        return init_ray(self.address, runtime_env=self.runtime_env)

    def facts(self) -> dict[str, Any]:
        """What summary.json records about the engine (``engine`` section): runner, address, workers,
        and the runtime environment with secret-looking values redacted; on Ray, the cluster joined."""
        out: dict[str, Any] = {"runner": self.kind, "address": self.address, "workers": self.workers}
        if self.runtime_env is not None:
            from engine.run.ray_setup import runtime_env_record

            out["runtime_env"] = runtime_env_record(self.runtime_env)
        if self.kind == "ray":
            from engine.run.ray_setup import connection_facts

            out["ray"] = connection_facts()
        return out

    def stop(self, started: bool) -> None:
        if started:
            import ray

            ray.shutdown()


__all__ = ["ENGINE_KINDS", "EngineOptions"]


ENGINE_FIELDS: dict[str, Field] = {
    "kind": Field(str, "inprocess", "the runner's registry name (--engine)"),
    "address": Field(str, None, "Ray cluster address", nullable=True),
    "workers": Field(int, None, "cap on Ray actors per model on CPU", ge=1, le=10_000, nullable=True),
    "max_retries": Field(int, 2, "retries of a failed unit", ge=0, le=100),
    "unit_timeout_s": Field(float, None, "seconds a unit may take before it is retried", gt=0, nullable=True),
    "max_models_loaded": Field(int, None, "in-process: models loaded at once", ge=1, le=1000, nullable=True),
    "memory_budget_mb": Field(float, None, "in-process: memory the loaded models may take, MB", gt=0, le=1e9, nullable=True),
    "runtime_env": Field(dict, None, "Ray: the job's runtime environment (a YAML/JSON file or inline JSON)", nullable=True),
}
"""The engine's options (CLI flags), typed and bounded (engine.config.Field)."""
