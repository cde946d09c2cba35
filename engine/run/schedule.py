"""Which model the Ray runner gives the next free actor slot: longest first, then split the tail.

Measured with scripts/sweep_sim.py (40 models, RTFx 50..3,300, 8 GPUs; docs/performance.md):
spreading each model over every free GPU (the runner's first rule) loads every model 8 times
and reaches about 0.80 of the lower bound; registry order with one GPU per model leaves the
slowest model for the end (0.65); longest first with one GPU per model reaches 0.99, and
splitting the remaining work of a model over GPUs that have nothing else to do trims the tail.

Rules, in order:

1. Every model with queued shards gets one actor before any model gets a second, in priority
   order: the slowest first (registry ``rtfx`` when given; otherwise more parameters first),
   ties in registry order.
2. Then a free slot goes to the model with the most remaining work per copy, if that work (its
   queued shards x the seconds per shard measured so far / (copies + 1)) exceeds the time one
   more copy takes to load. A model with nothing measured yet is not split.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from engine.data import ModelSpec


def priority(spec: ModelSpec) -> float:
    """Larger = expected to take longer per audio second (1/RTFx, or parameters as a proxy)."""
    meta = spec.meta
    if meta.get("rtfx"):
        return 1.0 / float(meta["rtfx"])
    if meta.get("params_m"):
        return float(meta["params_m"]) / 200_000.0  # ~RTFx 330 at 0.6 B parameters: ordering only
    return 0.0


def order_runs(runs: Mapping[str, Any]) -> dict[str, Any]:
    """``runs`` (name -> run with a ``spec``) re-ordered longest first; stable for ties."""
    return dict(sorted(runs.items(), key=lambda kv: -priority(kv[1].spec)))


def choose_run(runs: Iterable[Any], loaded: Mapping[int, bool], workers: int | None, t0: float) -> Any | None:
    """The run that should get the next actor slot (rule 1, then rule 2), or None.

    ``runs`` are the Ray runner's ``_ModelRun`` records in priority order; ``loaded`` maps actor
    keys to whether the actor finished loading; ``t0`` is the run clock's origin (perf_counter).
    """
    live = [r for r in runs if not r.failed and r.queue]
    for run in live:
        if not run.actors:
            return run
    best, best_work = None, 0.0
    now = time.perf_counter() - t0
    for run in live:
        copies = len(run.actors)
        if (workers and copies >= workers) or len(run.queue) <= copies or not run.loaded_once or run.units_done == 0:
            continue
        if any(not loaded.get(k, False) for k in run.actors):
            continue  # a copy is still loading: learn from it first
        elapsed = max(1e-9, (run.done_at or now) - (run.ready_at or 0.0))
        per_unit = elapsed * copies / run.units_done
        work = len(run.queue) * per_unit / (copies + 1)
        if work > float(run.facts.get("load_s") or 0.0) and work > best_work:
            best, best_work = run, work
    return best
