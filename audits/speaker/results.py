"""The speaker section's typed result: one record per SV backend, then the judges' (``summary.json``'s ``speaker``).

Every figure under a backend is a small frozen record: the headline (EER, minDCF, accuracy at the
chosen threshold, trial counts), the slices and slice pairs, the DET curve and score histogram,
the condition-matched subsets, which speakers the backend confuses, and the audio-LM judges'
same/different decisions. Records keep the keys they were read with (``audits.records``), so
``summary.json`` read and written again is the same text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from audits.judging import JudgeResult
from audits.records import EntriesResult, Record, figure


@dataclass(frozen=True)
class SliceFigures(Record):
    """EER, minDCF and accuracy over one slice (or slice pair) of the trials; None where a class is missing (``note`` says so)."""

    eer: float | None = None
    min_dcf: float | None = None
    accuracy: float | None = None
    n_trials: int = 0
    n_target: int = 0
    n_nontarget: int = 0
    n_eval_trials: int = 0
    note: str | None = figure(optional=True)


@dataclass(frozen=True)
class DetCurve(Record):
    """The DET curve: miss and false-accept rates (and their probits) at each threshold (the first is None: accept all)."""

    p_fa: tuple[float, ...] = ()
    p_miss: tuple[float, ...] = ()
    probit_fa: tuple[float, ...] = ()
    probit_miss: tuple[float, ...] = ()
    threshold: tuple[float | None, ...] = ()


@dataclass(frozen=True)
class ScoreHistogram(Record):
    """Target and non-target score counts over shared bin edges."""

    edges: tuple[float, ...] = ()
    target: tuple[int, ...] = ()
    nontarget: tuple[int, ...] = ()


@dataclass(frozen=True)
class SubsetFigures(Record):
    """A condition-matched subset (``speaker.subsets``): trials generated among its clips only, scored at the
    main threshold; ``error`` says why a subset could not be scored (then the figures are absent)."""

    filter: Mapping[str, tuple[str, ...]] = figure({})
    n_utts: int = 0
    error: str | None = figure(optional=True)
    eer: float | None = figure(optional=True)
    min_dcf: float | None = figure(optional=True)
    accuracy: float | None = figure(optional=True)
    threshold: float | None = figure(optional=True)
    n_trials: int | None = figure(optional=True)
    n_target: int | None = figure(optional=True)
    n_nontarget: int | None = figure(optional=True)
    warnings: tuple[str, ...] | None = figure(optional=True)


@dataclass(frozen=True)
class SpeakerFigures(Record):
    """One labelled speaker's own (target) trials: mean score and the share rejected at the threshold."""

    n_target: int = 0
    mean_target_score: float | None = None
    miss_rate: float | None = None


@dataclass(frozen=True)
class SpeakerPair(Record):
    """Two labelled speakers' non-target trials: mean score and the share accepted at the threshold."""

    a: str = ""
    b: str = ""
    n_nontarget: int = 0
    mean_score: float | None = None
    false_accept_rate: float | None = None


@dataclass(frozen=True)
class SpeakerPairStats(Record):
    """Which speakers the backend keeps apart and which it confuses (``speaker_pair_stats``)."""

    per_speaker: Mapping[str, SpeakerFigures] = figure({}, codec=("map", SpeakerFigures))
    confusable_pairs: tuple[SpeakerPair, ...] = figure((), codec=("list", SpeakerPair))
    n_speaker_pairs: int = 0
    n_pairs_mostly_accepted: int = 0
    pairs_mostly_accepted: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class DroppedTrial(Record):
    """A trial left out because a clip has no embedding, and why."""

    label: int = 0
    enroll: str = ""
    test: str = ""
    reason: str = ""


@dataclass(frozen=True)
class SkippedTrial(Record):
    """A trial whose combined clip could not be written (a clip did not decode)."""

    enroll: str = ""
    test: str = ""
    reason: str = ""


@dataclass(frozen=True)
class CombinedClips(Record):
    """The 'enroll, beep, test' clips written for audio judges (``speaker.combined_clips``)."""

    n_clips: int = 0
    manifest: str = ""
    skipped: tuple[SkippedTrial, ...] = figure((), codec=("list", SkippedTrial))


@dataclass(frozen=True)
class SpeakerBackendResult(Record):
    """One SV backend: its verification figures, slices, subsets and speakers, then status and run facts.

    A backend that did not run (or could not be scored) has only ``status``, ``facts``, ``trial_source``
    and ``error`` (with the failed-clip counts when embeddings exist); every other figure is then None."""

    eer: float | None = figure(optional=True)
    min_dcf: float | None = figure(optional=True)
    accuracy: float | None = figure(optional=True)
    threshold: float | None = figure(optional=True)
    threshold_source: str | None = figure(optional=True)
    eer_threshold: float | None = figure(optional=True)
    min_dcf_threshold: float | None = figure(optional=True)
    n_trials: int | None = figure(optional=True)
    n_target: int | None = figure(optional=True)
    n_nontarget: int | None = figure(optional=True)
    n_eval_trials: int | None = figure(optional=True)
    p_target: float | None = figure(optional=True)
    c_miss: float | None = figure(optional=True)
    c_fa: float | None = figure(optional=True)
    norm: str | None = figure(optional=True)
    slices: Mapping[str, SliceFigures] | None = figure(optional=True, codec=("map", SliceFigures))
    slice_pairs: Mapping[str, SliceFigures] | None = figure(optional=True, codec=("map", SliceFigures))
    det: DetCurve | None = figure(optional=True, codec=DetCurve)
    score_hist: ScoreHistogram | None = figure(optional=True, codec=ScoreHistogram)
    single_clip_speakers: tuple[str, ...] | None = figure(optional=True)
    speakers_without_cross_pairs: tuple[str, ...] | None = figure(optional=True)
    unlabelled_utts: tuple[str, ...] | None = figure(optional=True)
    warnings: tuple[str, ...] | None = figure(optional=True)
    subsets: Mapping[str, SubsetFigures] | None = figure(optional=True, codec=("map", SubsetFigures))
    speakers: SpeakerPairStats | None = figure(optional=True, codec=SpeakerPairStats)
    notes: tuple[str, ...] | None = figure(optional=True)
    scores_path: str | None = figure(optional=True)
    status: str | None = figure(optional=True)
    facts: Mapping[str, Any] | None = figure(optional=True)
    trial_source: str | None = figure(optional=True)
    n_failed_clips: int | None = figure(optional=True)
    failed_clips: Mapping[str, str] | None = figure(optional=True)
    n_dropped_trials: int | None = figure(optional=True)
    dropped_trials: tuple[DroppedTrial, ...] | None = figure(optional=True, codec=("list", DroppedTrial))
    error: str | None = figure(optional=True)
    device: str | None = figure(optional=True)
    batch_size: int | None = figure(optional=True)
    n_utts: int | None = figure(optional=True)
    n_failed: int | None = figure(optional=True)
    audio_s: float | None = figure(optional=True)
    infer_s: float | None = figure(optional=True)
    rtfx: float | None = figure(optional=True)
    warmup_batches: int | None = figure(optional=True)
    model_id: str | None = figure(optional=True)
    combined_clips: CombinedClips | None = figure(optional=True, codec=CombinedClips)


@dataclass(frozen=True)
class VerificationFigures(Record):
    """Accuracy, false accept and false reject rates of same/different decisions (``judge_verify.verification_figures``);
    ``threshold`` is an embedding backend's, when these are its decisions on the judged trials."""

    n_trials: int = 0
    n_target: int = 0
    n_nontarget: int = 0
    accuracy: float | None = None
    false_accept_rate: float | None = None
    false_reject_rate: float | None = None
    threshold: float | None = figure(optional=True)


@dataclass(frozen=True)
class SpeakerJudgeResult(JudgeResult):
    """One audio-LM judge's same/different decisions on a balanced sample of the trials, scored, beside the
    embedding backends' decisions on the same trials (``on_judged_trials``)."""

    n_trials: int | None = figure(optional=True)
    n_target: int | None = figure(optional=True)
    n_nontarget: int | None = figure(optional=True)
    accuracy: float | None = figure(optional=True)
    false_accept_rate: float | None = figure(optional=True)
    false_reject_rate: float | None = figure(optional=True)
    n_trials_available: int | None = figure(optional=True)
    n_trials_sampled: int | None = figure(optional=True)
    n_trials_without_audio: int | None = figure(optional=True)
    clip_errors: Mapping[str, str] | None = figure(optional=True)
    sample: Mapping[str, Any] | None = figure(optional=True)
    decision: str | None = figure(optional=True)
    on_judged_trials: Mapping[str, VerificationFigures] | None = figure(optional=True, codec=("map", VerificationFigures))
    rows_path: str | None = figure(optional=True)


@dataclass(frozen=True)
class SpeakerResult(EntriesResult[SpeakerBackendResult]):
    """Every SV backend's result by backend name, and the judges' when the recipe asked them."""

    judges: Mapping[str, SpeakerJudgeResult] | None = None

    entry_type = SpeakerBackendResult
    judge_type = SpeakerJudgeResult
