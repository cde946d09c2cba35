"""Hosted-API usage (calls billed, cache hits, audio hours, cost) across the actors of a Ray run.

Each Ray actor holds its own backend, so its usage counters live in the actor's process. The Ray
runner asks a hosted model's actor for its figures after every unit (asynchronously: the answer
arrives after the actor's next queued unit, never blocking the driver), once more when the actor
is retired or shut down, and keeps the last answer of an actor that died. A model's usage is then
what earlier sessions of the same run recorded (its stored facts), plus the final figures of this
session's removed actors, plus the latest figures of its live ones, combined with
:func:`engine.backends.hosted.base.combine_usage` exactly as the in-process runner does, so
summary.json's cost accounting is the same under both runners.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from engine.backends.hosted.base import combine_usage

log = logging.getLogger(__name__)


def is_hosted(facts: Mapping[str, Any]) -> bool:
    """Whether a model's load facts carry hosted-API usage (local models have none to collect)."""
    return isinstance((facts.get("info") or {}).get("usage"), Mapping)


class RayUsage:
    """Per-model usage of one Ray session, added to what earlier sessions recorded."""

    def __init__(self, previous_facts: Mapping[str, Mapping[str, Any]]) -> None:
        self._previous = {name: ((f.get("info") or {}).get("usage")) for name, f in previous_facts.items()}
        self._live: dict[int, tuple[str, dict[str, Any]]] = {}  # actor key -> (model, latest figures)
        self._gone: dict[str, list[dict[str, Any]]] = {}  # model -> final figures of removed actors

    def update(self, model: str, actor_key: int, usage: Mapping[str, Any] | None) -> None:
        """The latest figures reported by one live actor (they only grow, so the last one counts)."""
        if isinstance(usage, Mapping):
            self._live[actor_key] = (model, dict(usage))

    def retire(self, actor_key: int) -> None:
        """An actor is gone: its last figures become final for this session."""
        entry = self._live.pop(actor_key, None)
        if entry is not None:
            self._gone.setdefault(entry[0], []).append(entry[1])

    def total(self, model: str) -> dict[str, Any] | None:
        """Earlier sessions plus every actor of this one; None when nothing was ever reported."""
        parts = [*self._gone.get(model, []), *(u for m, u in self._live.values() if m == model)]
        prev = self._previous.get(model)
        out: dict[str, Any] | None = dict(prev) if isinstance(prev, Mapping) else None
        for part in parts:
            out = combine_usage(out, part)
        return out

    def apply(self, model: str, facts: dict[str, Any]) -> bool:
        """Put the model's usage into ``facts['info']['usage']``; True when it changed the facts."""
        if not is_hosted(facts):
            return False
        total = self.total(model)
        if total is None:
            return False
        facts.setdefault("info", {})["usage"] = total
        return True


def final_usage(handle: Any, timeout_s: float = 30.0) -> dict[str, Any] | None:
    """Ask a live, idle actor for its figures before it is removed; None if it cannot answer."""
    import ray
    from ray.exceptions import GetTimeoutError, RayError

    try:
        usage = ray.get(handle.usage.remote(), timeout=timeout_s)
    except (RayError, GetTimeoutError) as exc:  # a dead or hung actor keeps its last reported figures
        log.warning("could not read the usage of a retiring actor (%s); its last reported figures count", type(exc).__name__)
        return None
    return dict(usage) if isinstance(usage, Mapping) else None
