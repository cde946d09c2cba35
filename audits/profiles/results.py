"""The profiles and perturbations sections' typed results (``summary.json``'s ``profiles`` and ``perturbations``).

Small frozen records (``audits.records``) for every figure: a WER with its interval per model and
condition, the gap table (the ASR section's ``GapFigures``) with its paired gap tests, rank
stability, each ladder's steps with its slope and breaking point, and the trade-offs. A record read
from ``summary.json`` keeps the key order and any key it does not declare, so the file read and
written again is the same text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from audits.asr.results import GapFigures
from audits.records import EMPTY, Record, figure


@dataclass(frozen=True)
class WerFigures(Record):
    """Corpus WER of a group of clips with speech, its speaker-block bootstrap interval (or why not testable), its size."""

    wer: float | None = figure()
    ci95: tuple[float, float] | None = figure()
    not_testable: str | None = figure(optional=True)
    n_utts: int = figure(0)
    n_words: int = figure(0)
    n_speakers: int = figure(0)


@dataclass(frozen=True)
class ModelProfile(Record):
    """One model's robustness profile: WER over all its clips and per ``column=value`` condition."""

    overall: WerFigures | None = figure(codec=WerFigures)
    conditions: Mapping[str, WerFigures] = figure(EMPTY, codec=("map", WerFigures))


@dataclass(frozen=True)
class ConditionMapReport(Record):
    """What one condition map did to one label column: the values it mapped (and how), those it left unmapped."""

    map: str = figure("")
    file: str | None = figure()
    column: str = figure("")
    outputs: tuple[str, ...] = figure(())
    sources: Mapping[str, str] = figure(EMPTY)
    mapped: Mapping[str, Mapping[str, Any]] = figure(EMPTY)
    """Per label value: the map's outputs, the entry and source it came from, how it matched, and its clips."""
    unmapped: Mapping[str, int] = figure(EMPTY)
    """Label values no entry matches, with their clip counts (in no condition, never dropped silently)."""
    column_missing: bool | None = figure(optional=True)


class GapList:
    """Codec of a list of gaps (one model's entry of the gap table)."""

    @staticmethod
    def from_json(data: Any) -> tuple[GapFigures, ...]:
        return tuple(GapFigures.from_json(g) for g in data)


@dataclass(frozen=True)
class PairedGapTest(Record):
    """Is model A's gap smaller than model B's: gap(A) - gap(B) on the clips both scored, interval, Holm-corrected p."""

    gap: str = figure("")
    label: str = figure("")
    a_value: str = figure("")
    b_value: str = figure("")
    model_a: str = figure("")
    model_b: str = figure("")
    diff: float | None = figure()
    ci95: tuple[float, float] | None = figure()
    p_value: float | None = figure()
    not_testable: str | None = figure(optional=True)
    p_holm: float | None = figure()
    smaller_gap: str | None = figure()


@dataclass(frozen=True)
class PairedGapTests(Record):
    """Every pair of models on every gap, with how they were tested."""

    method: str = figure("")
    correction: str = figure("")
    alpha: float | None = figure()
    n_boot: int | None = figure()
    pairs: tuple[PairedGapTest, ...] = figure((), codec=("list", PairedGapTest))


@dataclass(frozen=True)
class GapTable(Record):
    """The study's gap table: the gaps asked, those skipped (and why), each model's gaps, the paired gap tests."""

    gaps: tuple[str, ...] = figure(())
    skipped: tuple[Mapping[str, str], ...] = figure(())
    models: Mapping[str, tuple[GapFigures, ...]] = figure(EMPTY, codec=("map", GapList))
    paired: PairedGapTests | None = figure(codec=PairedGapTests)


@dataclass(frozen=True)
class RankCondition(Record):
    """Kendall's tau between the overall ranking and one condition's, with its interval and each model's rank shift."""

    n_models: int = figure(0)
    tau: float | None = figure()
    ci95: tuple[float, float] | None = figure()
    ranks: Mapping[str, float] = figure(EMPTY)
    rank_shift: Mapping[str, float] = figure(EMPTY)
    not_testable: str | None = figure(optional=True)
    n_replicates: int | None = figure(optional=True)


@dataclass(frozen=True)
class RankMover(Record):
    """A model's largest rank shift over the conditions, where, and its mean absolute shift."""

    model: str = figure("")
    max_shift: float = figure(0.0)
    condition: str = figure("")
    mean_abs_shift: float = figure(0.0)


@dataclass(frozen=True)
class RankStability(Record):
    """How stable the models' ranking is across conditions (Kendall's tau-b per condition) and who moves most."""

    method: str = figure("")
    n_models: int = figure(0)
    n_boot: int | None = figure()
    conditions: Mapping[str, RankCondition] = figure(EMPTY, codec=("map", RankCondition))
    movers: tuple[RankMover, ...] = figure((), codec=("list", RankMover))
    overall_rank: Mapping[str, float] | None = figure(optional=True)


@dataclass(frozen=True)
class LadderStep(Record):
    """One step of a ladder: the label value and its number (e.g. ``noise-10db`` at 10 dB SNR)."""

    value: str = figure("")
    level: float | None = figure()


@dataclass(frozen=True)
class LadderPoint(Record):
    """One model's WER at the ladder's baseline or one of its steps (``level`` None for the baseline)."""

    value: str = figure("")
    level: float | None = figure(optional=True)
    wer: float | None = figure()
    ci95: tuple[float, float] | None = figure()
    not_testable: str | None = figure(optional=True)
    n_utts: int = figure(0)
    n_words: int = figure(0)
    n_speakers: int = figure(0)


@dataclass(frozen=True)
class LadderModel(Record):
    """One model on one ladder: WER at the baseline and every step, the degradation slope and the breaking point.

    Which of the ``*_not_testable`` reasons, ``breaking_value`` and ``breaking_share`` are there depends on the
    data (``audits.profiles.ladder.ladder_for_model``); a record read back keeps them in the order they were written.
    """

    baseline: LadderPoint | None = figure(codec=LadderPoint)
    levels: tuple[LadderPoint, ...] = figure((), codec=("list", LadderPoint))
    slope: float | None = figure()
    """WER change per unit of the ladder (least squares over the steps)."""
    slope_ci95: tuple[float, float] | None = figure()
    breaking_point: float | None = figure()
    """The first step whose WER exceeds the baseline's by more than the margin (None: none inside the ladder)."""
    breaking_ci95: tuple[float | None, float | None] | None = figure()
    slope_not_testable: str | None = figure(optional=True)
    breaking_not_testable: str | None = figure(optional=True)
    breaking_value: str | None = figure(optional=True)
    breaking_share: float | None = figure(optional=True)


@dataclass(frozen=True)
class Ladder(Record):
    """One ladder (a label column's baseline and steps, mildest first) for every model."""

    name: str = figure("")
    column: str = figure("")
    baseline: str = figure("")
    unit: str = figure("")
    levels: tuple[LadderStep, ...] = figure((), codec=("list", LadderStep))
    margin: float | None = figure()
    models: Mapping[str, LadderModel] = figure(EMPTY, codec=("map", LadderModel))


@dataclass(frozen=True)
class TradeOffModel(Record):
    """One model's WER against its speed (RTFx) and its cost per audio hour (null when unknown, never 0)."""

    wer: float | None = figure()
    ci95: tuple[float, float] | None = figure()
    rtfx: float | None = figure()
    cost_per_audio_hour_usd: float | None = figure()
    cost_basis: str | None = figure()
    not_testable: str | None = figure(optional=True)


@dataclass(frozen=True)
class TradeOffs(Record):
    """WER against RTFx and against cost per audio hour, with the Pareto fronts of each."""

    models: Mapping[str, TradeOffModel] = figure(EMPTY, codec=("map", TradeOffModel))
    pareto_wer_rtfx: tuple[str, ...] = figure(())
    pareto_wer_cost: tuple[str, ...] = figure(())
    gpu_hour_usd: float | None = figure()


@dataclass(frozen=True)
class ProfilesResult(Record):
    """Condition WERs per profile, the gap table, rank stability, ladders and trade-offs."""

    condition_maps: tuple[ConditionMapReport, ...] | None = figure(optional=True, codec=("list", ConditionMapReport))
    columns: tuple[str, ...] | None = figure(optional=True)
    missing_columns: tuple[str, ...] | None = figure(optional=True)
    conditions: tuple[str, ...] | None = figure(optional=True)
    n_boot: int | None = figure(optional=True)
    seed: int | None = figure(optional=True)
    alpha: float | None = figure(optional=True)
    profiles: Mapping[str, ModelProfile] | None = figure(optional=True, codec=("map", ModelProfile))
    gap_table: GapTable | None = figure(optional=True, codec=GapTable)
    rank_stability: RankStability | None = figure(optional=True, codec=RankStability)
    ladders: tuple[Ladder, ...] | None = figure(optional=True, codec=("list", Ladder))
    trade_offs: TradeOffs | None = figure(optional=True, codec=TradeOffs)
    rows: str | None = figure(optional=True)
    """Which rows the figures count ("source clips": derived copies never enter a condition)."""
    normalizer: str | None = figure(optional=True)

    def profile(self, model: str) -> ModelProfile:
        """One model's profile (``KeyError`` naming the models there are when absent)."""
        profiles = self.profiles or EMPTY
        try:
            return profiles[model]
        except KeyError:
            raise KeyError(f"no model '{model}' in the profiles (models: {', '.join(profiles) or 'none'})") from None


@dataclass(frozen=True)
class PerturbationFamily(Record):
    """One perturbation family: its kind, its levels (mildest first) and their unit, and the recorded sources' folder."""

    name: str = figure("")
    kind: str = figure("")
    noise: str | None = figure()
    levels: tuple[float, ...] = figure(())
    unit: str = figure("")
    folder: str | None = figure(optional=True)


@dataclass(frozen=True)
class PerturbationsResult(Record):
    """The derived levels' families and their WER ladders (slope, breaking point) per model."""

    families: tuple[PerturbationFamily, ...] | None = figure(optional=True, codec=("list", PerturbationFamily))
    seed: int | None = figure(optional=True)
    normalizer: Any = figure(optional=True)
    n_boot: int | None = figure(optional=True)
    derived: Mapping[str, Any] | None = figure(optional=True)
    """What was derived: clip counts and, for recorded noise or room responses, every source file with its digest."""
    ladders: tuple[Ladder, ...] | None = figure(optional=True, codec=("list", Ladder))
