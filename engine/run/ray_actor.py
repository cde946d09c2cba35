"""The Ray engine's model actor: one loaded backend of any pass kind for the actor's whole life (see engine/run/ray_runner.py)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from engine.backends.hosted.scrub import install_log_scrubber
from engine.data import DecodedAudio, ModelSpec, Shard
from engine.errors import AuditError
from engine.run.ray_setup import placement, worker_logging
from engine.run.runner import load_model, process_pass

log = logging.getLogger(__name__)


class ModelActor:
    """Holds one loaded model for its whole life; wrapped with ``ray.remote`` by :class:`RayRunner`."""

    def __init__(self, spec: ModelSpec, warmup: int, log_level: int | None = None) -> None:
        install_log_scrubber()  # the actor's log lines reach the driver's console
        worker_logging(log_level)  # ... at the driver's level, through Ray's log_to_driver
        self.spec = spec
        self.warmup = warmup
        self.backend: Any = None

    def load(self) -> dict[str, Any]:
        """Load and warm the model; returns its facts (a load failure is a status, not an exception)."""
        state = load_model(self.spec, self.warmup)
        self.backend = state.backend
        facts = dict(state.facts)
        try:
            import ray

            ctx = ray.get_runtime_context()
            facts["actor"] = {**placement(), "node_id": ctx.get_node_id(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}
        except Exception:  # noqa: BLE001 - placement facts are informative only
            facts["actor"] = placement()
        if facts.get("status") == "loaded":
            where = facts["actor"]
            log.info(
                "model %s loaded in %.1f s (actor on %s, pid %s, device %s)",
                self.spec.name,
                float(facts.get("load_s") or 0.0),
                where.get("host"),
                where.get("pid"),
                facts.get("info", {}).get("device"),
            )
        return facts

    def process(self, shard: Shard, decoded: Sequence[DecodedAudio]) -> list[dict[str, Any]]:
        """Run one shard through the backend (rows in shard order, errors included), whatever the pass kind."""
        if self.backend is None:
            raise AuditError(f"model {self.spec.name} is not loaded in this actor")
        # Arrays from the object store are read-only views; some backends write into their input.
        own = [d if d.samples is None or d.samples.flags.writeable else replace(d, samples=np.array(d.samples)) for d in decoded]
        return process_pass(self.backend, self.spec, shard, own)

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()
            self.backend = None

    def usage(self) -> dict[str, Any] | None:
        """Hosted backends: this process's usage figures (collected by engine/run/ray_usage.py); None for local models."""
        fn = getattr(self.backend, "usage", None)
        return fn() if callable(fn) else None
