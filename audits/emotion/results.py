"""The emotion section's typed result: one record per SER backend, then the judges' (``summary.json``'s ``emotion``).

Every figure under a backend is a small frozen record: categorical scores (UA, WA, macro-F1, the
confusion matrix, per class and per slice), dimensional CCC with pairwise order accuracy, arousal
ordering (all pairs, same-speaker pairs, per label pair), prosody contrast of rendition pairs, and
model-derived labels; the audio-LM judges' A/B answers per dimension. Records keep the keys they
were read with (``audits.records``), so ``summary.json`` read and written again is the same text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from audits.judging import JudgeResult
from audits.records import EntriesResult, Record, figure


@dataclass(frozen=True)
class ComparisonFigures(Record):
    """Relative comparison accuracy: over clip pairs whose reference differs, the share the prediction orders the same way."""

    accuracy: float | None = None
    n_pairs: int = 0
    n_pred_ties: int = 0


@dataclass(frozen=True)
class Confusion(Record):
    """The confusion matrix: rows are reference labels, columns predictions, both in ``labels`` order."""

    labels: tuple[str, ...] = ()
    matrix: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class ClassFigures(Record):
    """One canonical class: recall, precision, F1 and its reference count."""

    recall: float = 0.0
    precision: float = 0.0
    f1: float = 0.0
    support: int = 0


@dataclass(frozen=True)
class CategoricalSlice(Record):
    """UA, WA and macro-F1 over the clips of one ``key=value`` slice."""

    ua: float | None = None
    wa: float | None = None
    macro_f1: float | None = None
    n_utts: int = 0


@dataclass(frozen=True)
class DimensionFigures(Record):
    """One reference dimension: CCC and pairwise order accuracy of the predicted values."""

    n_utts: int = 0
    ccc: float | None = None
    comparison: ComparisonFigures | None = figure(codec=ComparisonFigures)


@dataclass(frozen=True)
class LabelMean(Record):
    """The predicted arousal dimension over the clips of one label."""

    mean: float | None = None
    sd: float | None = None
    n_utts: int = 0


@dataclass(frozen=True)
class ArousalOrdering(Record):
    """Does the backend's arousal order clips as their labels' expected arousal does (all pairs, same-speaker pairs, per
    label pair)? ``skipped`` says why it could not be measured."""

    dimension: str | None = figure(optional=True)
    expected_arousal: Mapping[str, float | None] | None = figure(optional=True)
    expected_arousal_source: str | None = figure(optional=True)
    n_utts: int | None = figure(optional=True)
    skipped: str | None = figure(optional=True)
    all_pairs_sampled: bool | None = figure(optional=True)
    all: ComparisonFigures | None = figure(optional=True, codec=ComparisonFigures)
    within_speaker: ComparisonFigures | None = figure(optional=True, codec=ComparisonFigures)
    by_label_pair_within_speaker: Mapping[str, ComparisonFigures] | None = figure(optional=True, codec=("map", ComparisonFigures))
    label_means: Mapping[str, LabelMean] | None = figure(optional=True, codec=("map", LabelMean))


@dataclass(frozen=True)
class PairScore(Record):
    """A rendition pair's contrast score (0..8)."""

    a: str = ""
    b: str = ""
    score: int = 0


@dataclass(frozen=True)
class ContrastPair(Record):
    """A rendition pair scored: points and gaps per feature, features that could not be measured, both sides' label and speaker."""

    a: str = ""
    b: str = ""
    score: int = 0
    points: Mapping[str, int] = figure({})
    gaps: Mapping[str, float | None] = figure({})
    missing: tuple[str, ...] = ()
    label_a: str | None = None
    label_b: str | None = None
    speaker_a: str | None = None
    speaker_b: str | None = None


@dataclass(frozen=True)
class SkippedPair(Record):
    """A rendition pair that could not be scored, and why."""

    a: str = ""
    b: str = ""
    reason: str = ""


class Skipped:
    """``prosody_contrast.skipped``: the reason the whole audit was skipped (text), or the pairs it skipped (records)."""

    @classmethod
    def from_json(cls, value: Any) -> str | tuple[SkippedPair, ...]:
        return value if isinstance(value, str) else tuple(SkippedPair.from_json(v) for v in value)


@dataclass(frozen=True)
class LabelPairContrast(Record):
    """Mean contrast score of the rendition pairs of one label pair."""

    mean_score: float | None = None
    n_pairs: int = 0


@dataclass(frozen=True)
class ControlContrast(Record):
    """The same-label control: pairs of one text with one label, whose contrast is not delivery."""

    n_pairs: int = 0
    mean_score: float | None = None
    what: str = ""


@dataclass(frozen=True)
class ProsodyContrast(Record):
    """Prosody contrast of rendition pairs (``audits.emotion.prosody_contrast``); ``skipped`` is the reason (text) when
    nothing was scored, else the pairs left out."""

    pairing: str | None = figure(optional=True)
    n_pairs: int | None = figure(optional=True)
    mean_score: float | None = figure(optional=True)
    median_score: float | None = figure(optional=True)
    max_score: int | None = figure(optional=True)
    threshold: float | None = figure(optional=True)
    n_below_threshold: int | None = figure(optional=True)
    below_threshold: tuple[PairScore, ...] | None = figure(optional=True, codec=("list", PairScore))
    mean_points: Mapping[str, float] | None = figure(optional=True)
    skipped: str | tuple[SkippedPair, ...] | None = figure(optional=True, codec=Skipped)
    definition: str | None = figure(optional=True)
    rules: Mapping[str, float] | None = figure(optional=True)
    pairs: tuple[ContrastPair, ...] | None = figure(optional=True, codec=("list", ContrastPair))
    pairs_path: str | None = figure(optional=True)
    confounded_by_voice: bool | None = figure(optional=True)
    by_label_pair: Mapping[str, LabelPairContrast] | None = figure(optional=True, codec=("map", LabelPairContrast))
    control_same_label: ControlContrast | None = figure(optional=True, codec=ControlContrast)


@dataclass(frozen=True)
class DerivedLabels(Record):
    """Emotion labels predicted by the backend (``derive_labels``), always marked model-derived."""

    model_derived: bool = True
    skipped: str | None = figure(optional=True)
    label_key: str | None = figure(optional=True)
    counts: Mapping[str, int] | None = figure(optional=True)
    min_confidence: float | None = figure(optional=True)
    path: str | None = figure(optional=True)
    note: str | None = figure(optional=True)


@dataclass(frozen=True)
class EmotionBackendResult(Record):
    """One SER backend: status and run facts, categorical and dimensional scores, arousal ordering, prosody contrast.

    Categorical figures (``ua`` .. ``per_class``) are there when the backend gives categories and clips carry labels;
    a backend that did not run (or could not be scored) has only ``status``, ``facts`` and ``error``."""

    status: str | None = figure(optional=True)
    facts: Mapping[str, Any] | None = figure(optional=True)
    n_failed_clips: int | None = figure(optional=True)
    failed_clips: Mapping[str, str] | None = figure(optional=True)
    error: str | None = figure(optional=True)
    n_utts: int | None = figure(optional=True)
    n_missing: int | None = figure(optional=True)
    missing_utts: tuple[str, ...] | None = figure(optional=True)
    ua: float | None = figure(optional=True)
    wa: float | None = figure(optional=True)
    macro_f1: float | None = figure(optional=True)
    n_scored: int | None = figure(optional=True)
    confusion: Confusion | None = figure(optional=True, codec=Confusion)
    per_class: Mapping[str, ClassFigures] | None = figure(optional=True, codec=("map", ClassFigures))
    dimensional: Mapping[str, DimensionFigures] | None = figure(optional=True, codec=("map", DimensionFigures))
    slices: Mapping[str, CategoricalSlice] | None = figure(optional=True, codec=("map", CategoricalSlice))
    label_map: Mapping[str, str] | None = figure(optional=True)
    dropped_unmapped: Mapping[str, int] | None = figure(optional=True)
    warnings: tuple[str, ...] | None = figure(optional=True)
    n_scored_outputs: int | None = figure(optional=True)
    categorical: Mapping[str, Any] | None = figure(optional=True)
    arousal_ordering: ArousalOrdering | None = figure(optional=True, codec=ArousalOrdering)
    prosody_contrast: ProsodyContrast | None = figure(optional=True, codec=ProsodyContrast)
    model_derived_labels: DerivedLabels | None = figure(optional=True, codec=DerivedLabels)
    notes: tuple[str, ...] | None = figure(optional=True)
    device: str | None = figure(optional=True)
    batch_size: int | None = figure(optional=True)
    n_failed: int | None = figure(optional=True)
    audio_s: float | None = figure(optional=True)
    infer_s: float | None = figure(optional=True)
    rtfx: float | None = figure(optional=True)
    warmup_batches: int | None = figure(optional=True)
    model_id: str | None = figure(optional=True)


@dataclass(frozen=True)
class JudgeDimension(Record):
    """One judge's A/B answers on one dimension ('aroused', 'positive') against the labels' expected order."""

    n_pairs: int = 0
    n_with_truth: int = 0
    n_unparseable: int = 0
    n_scored: int = 0
    accuracy: float | None = None
    n_ordered: int = 0
    accuracy_ordered: float | None = None
    n_same_answers: int = 0


@dataclass(frozen=True)
class EmotionJudgeResult(JudgeResult):
    """One audio-LM judge's answers on a sample of the rendition pairs: which sounds more aroused / positive, per dimension."""

    n_pairs_available: int | None = figure(optional=True)
    dimensions: Mapping[str, JudgeDimension] | None = figure(optional=True, codec=("map", JudgeDimension))
    n_pairs_sampled: int | None = figure(optional=True)
    n_pairs_without_audio: int | None = figure(optional=True)
    clip_errors: Mapping[str, str] | None = figure(optional=True)
    sample: Mapping[str, Any] | None = figure(optional=True)
    truth: Mapping[str, str] | None = figure(optional=True)
    expected_valence: Mapping[str, float | None] | None = figure(optional=True)
    order: str | None = figure(optional=True)
    rows_path: str | None = figure(optional=True)


@dataclass(frozen=True)
class EmotionResult(EntriesResult[EmotionBackendResult]):
    """Every SER backend's result by backend name, and the judges' when the recipe asked them."""

    judges: Mapping[str, EmotionJudgeResult] | None = None

    entry_type = EmotionBackendResult
    judge_type = EmotionJudgeResult
