"""What one probe hands the next, as frozen dataclasses (the synthetic-voice probe reuses the others' work).

The masking probe's build and scored records tell the synthetic-voice probe which clips leaked a
masked word; the bad-reference probe's report, references and planted errors tell it which
references a model wrote and what the corrected text is. Each probe's step returns its part of
``summary.json`` and, when a later probe may use it, its state here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from audits.probes.bad_reference import BadReferenceReport
    from audits.probes.masking import MaskBuild
    from audits.probes.masking_score import MaskRecord
    from engine.datasets.base import Dataset
    from engine.engine import EngineOptions


@dataclass(frozen=True)
class MaskingState:
    """The masked set the masking probe built, and its scored records (empty when no clip could be masked)."""

    build: MaskBuild
    records: Sequence[MaskRecord] = ()


@dataclass(frozen=True)
class BadReferenceState:
    """The bad-reference probe's report and the references it judged.

    ``plan`` maps a clip with a planted error to ``{kind, original, corrupted}``; ``work`` is the
    dataset the panel ran on (the planted copy when errors were planted); ``corrections`` are the
    human-verified references, when the recipe gave them.
    """

    report: BadReferenceReport
    refs: Mapping[str, str]
    plan: Mapping[str, Mapping[str, str]]
    work: Dataset
    corrections: Mapping[str, str] | None = None


@dataclass(frozen=True)
class ProbeState:
    """The earlier probes' state, as the synthetic-voice probe receives it."""

    masking: MaskingState | None = None
    bad_reference: BadReferenceState | None = None
    engine: EngineOptions | None = None
    """The run's engine: the probe's re-runs are submitted to it (None: in-process)."""
