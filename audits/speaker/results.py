"""The speaker section's typed result: one record per SV backend, then the judges' (``summary.json``'s ``speaker``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from audits.records import EntriesResult, Record, figure


@dataclass(frozen=True)
class SpeakerBackendResult(Record):
    """One SV backend: status and run facts, its verification figures (EER, minDCF, slices, subsets) as read."""

    status: str | None = figure(optional=True)
    facts: Mapping[str, Any] | None = figure(optional=True)
    trial_source: str | None = figure(optional=True)
    subsets: Mapping[str, Any] | None = figure(optional=True)
    speakers: Mapping[str, Any] | None = figure(optional=True)
    notes: tuple[str, ...] | None = figure(optional=True)
    scores_path: str | None = figure(optional=True)
    model_id: str | None = figure(optional=True)


@dataclass(frozen=True)
class SpeakerResult(EntriesResult[SpeakerBackendResult]):
    """Every SV backend's result by backend name, and the judges' when the recipe asked them."""

    entry_type = SpeakerBackendResult
