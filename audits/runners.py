"""Which runner moves the audio: a registry of runner factories (entry-point group ``audit_engine.runners``).

The in-process and Ray runners are entries like a plug-in's (pyproject.toml), so the pipeline
never branches on the runner's name, and a separate package can add one (a batch scheduler's,
say) under a new ``--engine`` name. A factory gets the engine options, the opened dataset, the
resolved model specs, the run store, the recipe and the progress callback, and returns an object
with ``run()`` (per-model facts) and ``plan`` (what ``RunStore.consolidate`` checks), which is
what both built-in runners offer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from engine.data import DecodeOptions, ModelSpec, ProgressFn
from engine.datasets import Dataset
from engine.engine import EngineOptions
from engine.errors import ConfigError, RegistryError
from engine.registry import Registry
from engine.run.store import RunStore

if TYPE_CHECKING:
    from audits.recipes import Recipe


class Runner(Protocol):
    """What the pipeline needs of a runner."""

    plan: Any

    def run(self) -> dict[str, dict[str, Any]]: ...


class RunnerFactory(Protocol):
    """A runner registry entry: builds (does not start) the runner for one run."""

    def __call__(
        self, engine: EngineOptions, dataset: Dataset, specs: list[ModelSpec], store: RunStore, recipe: Recipe, progress: ProgressFn | None
    ) -> Runner: ...


RUNNERS: Registry[RunnerFactory] = Registry("runner", "audit_engine.runners")


def decode_options(recipe: Recipe) -> DecodeOptions:
    """How a run decodes audio (duration bound, paths outside the dataset root): the one definition,
    used by the runners and by the audit sections' context."""
    return DecodeOptions(max_duration_s=recipe.dataset.max_duration_s, allow_outside_root=recipe.dataset.allow_outside_root)


def inprocess_runner(
    engine: EngineOptions, dataset: Dataset, specs: list[ModelSpec], store: RunStore, recipe: Recipe, progress: ProgressFn | None
) -> Runner:
    """Every model in this process, one after another (engine/run/runner.py)."""
    from engine.run.runner import InProcessRunner

    return InProcessRunner(
        dataset,
        specs,
        store,
        warmup=recipe.warmup,
        decode_options=decode_options(recipe),
        progress=progress,
        max_models_loaded=engine.max_models_loaded,
        memory_budget_mb=engine.memory_budget_mb,
    )


def ray_runner(
    engine: EngineOptions, dataset: Dataset, specs: list[ModelSpec], store: RunStore, recipe: Recipe, progress: ProgressFn | None
) -> Runner:
    """Ray actors, on this machine or a cluster at ``engine.address`` (engine/run/ray_runner.py)."""
    from engine.run.ray_runner import RayRunner

    return RayRunner(
        dataset,
        specs,
        store,
        warmup=recipe.warmup,
        decode_options=decode_options(recipe),
        progress=progress,
        address=engine.address,
        workers=engine.workers,
        max_retries=engine.max_retries,
        unit_timeout_s=engine.unit_timeout_s,
        runtime_env=engine.runtime_env,
    )


def check_runner(kind: str) -> None:
    """Refuse an unknown runner name before anything opens (``ConfigError`` with close matches)."""
    try:
        RUNNERS.check(kind)
    except RegistryError as exc:
        raise ConfigError(f"--engine: {exc}") from None


def make_runner(
    engine: EngineOptions, dataset: Dataset, specs: list[ModelSpec], store: RunStore, recipe: Recipe, progress: ProgressFn | None
) -> Runner:
    """The runner registered under ``engine.kind``, built for this run."""
    check_runner(engine.kind)
    return RUNNERS.get(engine.kind)(engine, dataset, specs, store, recipe, progress)
