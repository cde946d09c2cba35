"""The emotion section's typed result: one record per SER backend, then the judges' (``summary.json``'s ``emotion``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from audits.records import EntriesResult, Record, figure


@dataclass(frozen=True)
class EmotionBackendResult(Record):
    """One SER backend: status and run facts, warnings, and its figures (UA, WA, macro-F1, CCC, pairs) as read."""

    status: str | None = figure(optional=True)
    facts: Mapping[str, Any] | None = figure(optional=True)
    warnings: tuple[str, ...] | None = figure(optional=True)


@dataclass(frozen=True)
class EmotionResult(EntriesResult[EmotionBackendResult]):
    """Every SER backend's result by backend name, and the judges' when the recipe asked them."""

    entry_type = EmotionBackendResult
