"""A plug-in runner: every model in this process, one model loaded at a time.

A batch scheduler's runner would submit the units elsewhere; this one keeps the engine's unit
contract by handing the work to the engine's in-process runner with ``max_models_loaded=1``.
Plug-in runners run the recipe's ASR pass; sections with passes of their own need a built-in one.
"""

from __future__ import annotations

from typing import Any

from audits.runners import Runner, decode_options
from engine.data import ModelSpec, ProgressFn
from engine.datasets import Dataset
from engine.engine import EngineOptions
from engine.run.runner import InProcessRunner
from engine.run.store import RunStore


def serial_runner(
    engine: EngineOptions, dataset: Dataset, specs: list[ModelSpec], store: RunStore, recipe: Any, progress: ProgressFn | None
) -> Runner:
    """The runner factory registered under ``audit_engine.runners`` (``--engine toy-serial``)."""
    return InProcessRunner(
        dataset, specs, store, warmup=recipe.warmup, decode_options=decode_options(recipe), progress=progress, max_models_loaded=1
    )
