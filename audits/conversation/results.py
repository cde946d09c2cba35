"""The conversation section's typed result (``summary.json``'s ``conversation``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from audits.records import Record, figure


@dataclass(frozen=True)
class ConversationResult(Record):
    """The conversation set, how it was segmented and scored, diarization figures, every model's long-form figures."""

    dataset: Mapping[str, Any] | None = figure(optional=True)
    segmentation: Mapping[str, Any] | None = figure(optional=True)
    scoring: Mapping[str, str] | None = figure(optional=True)
    attribution: str | None = figure(optional=True)
    diarization: Mapping[str, Any] | None = figure(optional=True)
    models: Mapping[str, Any] | None = figure(optional=True)
    """Per model: long-form WER, cpWER, tcpWER, slices, whole-recording WER."""
    problems: Mapping[str, Any] | None = figure(optional=True)
    normalizer: Mapping[str, str] | None = figure(optional=True)
