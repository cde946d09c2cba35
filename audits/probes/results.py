"""The probes section's typed result: one record per probe that ran (``summary.json``'s ``probes.<probe>``).

A probe's JSON object mixes two kinds of keys: the probe's own facts (how many clips, its settings,
its status) and one entry per model (``probes.<probe>.<model>``: a rate with its interval and
counts). ``ProbeRecord`` reads the first as declared fields and the second as ``models`` (every
undeclared key whose value is an object with a ``rate``), each entry a record of the probe's
``model_type``; key order is kept as read, so the file read and written again is the same text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Self

from audits.records import EMPTY, EntriesResult, Record, figure, freeze, thaw


@dataclass(frozen=True)
class ProbeFigures(Record):
    """A model's entry of a probe this module does not know: its rate and interval (other figures under ``extra``)."""

    rate: float | None = figure()
    ci95: tuple[float, float] | None = figure()


@dataclass(frozen=True)
class ProbeRecord(Record):
    """One probe: its facts as declared fields, every model's entry under ``models`` (``model_type`` records)."""

    models: Mapping[str, Record] = field(default_factory=lambda: EMPTY, kw_only=True)
    """Per model (in the order the probe wrote them): its rate, interval and counts."""

    model_type: ClassVar[type[Record]] = ProbeFigures

    @classmethod
    def declared(cls) -> list[dataclasses.Field[Any]]:
        return [f for f in super().declared() if f.name != "models"]

    @classmethod
    def is_model_entry(cls, key: str, value: Any) -> bool:
        """A model's entry: an undeclared key holding an object with a ``rate`` (what the probes' tables read)."""
        return key not in {f.name for f in cls.declared()} and isinstance(value, Mapping) and "rate" in value

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """The probe's record (model entries typed, facts as fields, other keys under ``extra``), key order kept."""
        models = {str(k): cls.model_type.from_json(v) for k, v in data.items() if cls.is_model_entry(str(k), v)}
        facts = super().from_json({k: v for k, v in data.items() if k not in models})
        return dataclasses.replace(facts, models=MappingProxyType(models), layout=tuple(str(k) for k in data))

    def keys(self) -> Iterator[str]:
        """As read; built in code: the models first, then the facts (the order the probes write)."""
        if self.layout is None:
            yield from self.models
        yield from super().keys()

    def to_json(self) -> dict[str, Any]:
        names = {f.name for f in self.declared()}

        def value(k: str) -> Any:
            if k in names:
                return getattr(self, k)
            return self.models[k] if k in self.models else self.extra[k]

        return {k: thaw(value(k)) for k in self.keys()}

    def model(self, name: str) -> Record:
        """One model's entry (``KeyError`` naming the models there are when absent)."""
        try:
            return self.models[name]
        except KeyError:
            raise KeyError(f"no model '{name}' in this probe (models: {', '.join(self.models) or 'none'})") from None

    def facts(self) -> Iterator[tuple[str, Any]]:
        """The probe's own keys and values (everything but the models' entries), in the order they are written."""
        names = {f.name for f in self.declared()}
        for k in self.keys():
            if k not in self.models:
                yield k, getattr(self, k) if k in names else self.extra[k]

    def judge_results(self) -> Mapping[str, Any] | None:
        """The audio-LM judges' results of this probe (``judges``), when it asked them."""
        judges = getattr(self, "judges", None) if "judges" in {f.name for f in self.declared()} else self.extra.get("judges")
        return judges if isinstance(judges, Mapping) else None


def figure_value(record: Record, key: str) -> Any:
    """A figure of a record by its JSON key, None when the record does not hold it (read code that serves every
    probe's entries alike: counts are named differently by each probe)."""
    if key not in set(record.keys()):
        return None
    return getattr(record, key) if key in {f.name for f in record.declared()} else record.extra[key]


# ------------------------------------------------------------------ masking


@dataclass(frozen=True)
class LeakFigures(Record):
    """Gated leak counts: of the targets a model wrote on the unmasked audio (gated), how many it still wrote masked."""

    rate: float | None = figure()
    ci95: tuple[float, float] | None = figure()
    n_gated: int = figure(0)
    n_leaked: int = figure(0)
    n_total: int = figure(0)
    n_not_gated: int = figure(0)
    n_failed: int = figure(0)
    status: str | None = figure()
    note: str | None = figure(optional=True)
    """Why the rate is undefined (only when no target was gated)."""


@dataclass(frozen=True)
class MaskingModel(LeakFigures):
    """One model on the primary variant, per target kind and per variant; ``k``/``n`` repeat leaked/gated for the tables."""

    variant: str | None = figure()
    n_clips: int = figure(0)
    by_kind: Mapping[str, LeakFigures] = figure(EMPTY, codec=("map", LeakFigures))
    by_variant: Mapping[str, LeakFigures] = figure(EMPTY, codec=("map", LeakFigures))
    k: int | None = figure()
    n: int | None = figure()


@dataclass(frozen=True)
class MaskingProbe(ProbeRecord):
    """``probes.masking``: every model's gated leak rate, the masked set's counts, what was skipped and the settings."""

    n_clips: int | None = figure(optional=True)
    n_clips_masked: int | None = figure(optional=True)
    n_derived: int | None = figure(optional=True)
    skipped: Mapping[str, int] | None = figure(optional=True)
    skipped_examples: tuple[Mapping[str, Any], ...] | None = figure(optional=True)
    skipped_file: str | None = figure(optional=True)
    timing_method: str | None = figure(optional=True)
    settings: Mapping[str, Any] | None = figure(optional=True)
    failed_models: Mapping[str, str] | None = figure(optional=True)
    status: str | None = figure(optional=True)
    note: str | None = figure(optional=True)

    model_type = MaskingModel


# ------------------------------------------------------------------ orthography


@dataclass(frozen=True)
class ArmRate(Record):
    """How often a model wrote one spelling arm where the reference uses it: ``hits`` of ``n``."""

    n: int = figure(0)
    hits: int = figure(0)
    p: float | None = figure()
    ci95: tuple[float, float] | None = figure()


@dataclass(frozen=True)
class OrthographyFamily(Record):
    """One convention family (e.g. ``digits-words``): each arm's rate, the switch (lowest arm) and its status."""

    kind: str | None = figure()
    switch: float | None = figure()
    ci95: tuple[float, float] | None = figure()
    limiting_arm: str | None = figure()
    status: str | None = figure()
    arms: Mapping[str, ArmRate] = figure(EMPTY, codec=("map", ArmRate))
    n_clips: int = figure(0)
    n_ref_mixed: int = figure(0)
    n_hyp_absent: int = figure(0)


@dataclass(frozen=True)
class OrthographyModel(Record):
    """One model: the switch (P(writes the reference's arm), minimum over arms), pooled arms and every family."""

    rate: float | None = figure()
    switch: float | None = figure()
    ci95: tuple[float, float] | None = figure()
    limiting_arm: str | None = figure()
    limiting_family: str | None = figure()
    status: str | None = figure()
    note: str | None = figure()
    pool: bool | None = figure()
    pooled: Mapping[str, ArmRate] | None = figure(optional=True, codec=("map", ArmRate))
    min_clips_per_arm: int | None = figure()
    n_clips: int = figure(0)
    n_missing_hyp: int = figure(0)
    n_failed_hyp: int = figure(0)
    families: Mapping[str, OrthographyFamily] = figure(EMPTY, codec=("map", OrthographyFamily))
    k: int | None = figure()
    n: int | None = figure()


@dataclass(frozen=True)
class OrthographyProbe(ProbeRecord):
    """``probes.orthography``: every model's switch, and the settings (families, arms' provenance)."""

    settings: Mapping[str, Any] | None = figure(optional=True)

    model_type = OrthographyModel


# ------------------------------------------------------------------ bad reference


@dataclass(frozen=True)
class AcceptRefFigures(Record):
    """accept-ref: of the reference errors a model was eligible on, how many it wrote as the reference has them."""

    rate: float | None = figure()
    ci95: tuple[float, float] | None = figure()
    n_ref: int = figure(0)
    n_eligible: int = figure(0)
    k: int | None = figure()
    n: int | None = figure()


@dataclass(frozen=True)
class ReferenceSpan(Record):
    """One reference error on one clip, how the panel found it, and each model's verdict on it."""

    clip_id: str = figure("")
    kind: str = figure("")
    position: str = figure("")
    text: str = figure("")
    ref_span: str = figure("")
    replacement: str = figure("")
    token_indices: tuple[int, ...] = figure(())
    n_panel_agree: int = figure(0)
    n_panel_eligible: int = figure(0)
    median_cer: float | None = figure()
    source: str | None = figure()
    verdicts: Mapping[str, str] = figure(EMPTY)


@dataclass(frozen=True)
class PlantedErrors(Record):
    """The reference errors planted in a copy of the dataset, and how many the panel found."""

    n_planted: int = figure(0)
    n_planted_found: int = figure(0)
    n_spans_on_unplanted_clips: int = figure(0)
    by_kind: Mapping[str, int] = figure(EMPTY)
    file: str | None = figure()


@dataclass(frozen=True)
class BadReferenceProbe(ProbeRecord):
    """``probes.bad_reference``: every model's accept-ref, the panel, the spans it found and what was planted."""

    n_clips: int | None = figure(optional=True)
    panel: tuple[str, ...] | None = figure(optional=True)
    n_spans: int | None = figure(optional=True)
    source: str | None = figure(optional=True)
    settings: Mapping[str, Any] | None = figure(optional=True)
    normalizer: Mapping[str, str] | None = figure(optional=True)
    spans: tuple[ReferenceSpan, ...] | None = figure(optional=True, codec=("list", ReferenceSpan))
    panel_overlap: tuple[str, ...] | None = figure(optional=True)
    failed_models: Mapping[str, str] | None = figure(optional=True)
    planted: PlantedErrors | None = figure(optional=True, codec=PlantedErrors)
    status: str | None = figure(optional=True)

    model_type = AcceptRefFigures


# ------------------------------------------------------------------ synthetic voice


@dataclass(frozen=True)
class RateDifference(Record):
    """A paired difference of rates (real minus one voice arm) over ``n_pairs`` items."""

    rate: float | None = figure()
    ci95: tuple[float, float] | None = figure()
    n_pairs: int = figure(0)


@dataclass(frozen=True)
class SyntheticFigures(Record):
    """Real minus synthetic-voice rate of writing the benchmark's version, paired over items, with both rates."""

    rate: float | None = figure()
    ci95: tuple[float, float] | None = figure()
    n_pairs: int = figure(0)
    n: int = figure(0)
    n_clips: int = figure(0)
    real_rate: float | None = figure()
    real_ci95: tuple[float, float] | None = figure()
    synthetic_rate: float | None = figure()
    synthetic_ci95: tuple[float, float] | None = figure()
    status: str | None = figure()
    generic_rate: float | None = figure(optional=True)
    matched_rate: float | None = figure(optional=True)


@dataclass(frozen=True)
class SyntheticArm(SyntheticFigures):
    """One voice arm (generic or matched) over every source, then per source probe (masking, bad_reference)."""

    by_source: Mapping[str, SyntheticFigures] | None = figure(optional=True, codec=("map", SyntheticFigures))


@dataclass(frozen=True)
class SyntheticModel(SyntheticArm):
    """One model: the headline difference (real - generic), every arm, and the paired differences per arm."""

    rate_definition: str | None = figure(optional=True)
    arms: Mapping[str, SyntheticArm] | None = figure(optional=True, codec=("map", SyntheticArm))
    real_minus_generic: RateDifference | None = figure(optional=True, codec=RateDifference)
    real_minus_matched: RateDifference | None = figure(optional=True, codec=RateDifference)


@dataclass(frozen=True)
class MatchedVoices(Record):
    """The matched arm's voices: the pool, which voice each speaker got, and how close they are (speaker embeddings)."""

    pool: tuple[str, ...] = figure(())
    n_speakers: int = figure(0)
    chosen: Mapping[str, int] = figure(EMPTY)
    similarity: Mapping[str, float] = figure(EMPTY)
    calibration_text: str | None = figure()
    encoder: str | None = figure()
    method: str | None = figure()
    file: str | None = figure()
    encoder_info: Mapping[str, Any] | None = figure(optional=True)
    match_clips_per_speaker: int | None = figure(optional=True)
    exclude_source_voice: bool | None = figure(optional=True)


@dataclass(frozen=True)
class SyntheticVoiceProbe(ProbeRecord):
    """``probes.synthetic_voice``: every model's real-vs-synthetic difference, the voices and clip counts, the judges."""

    tts: Mapping[str, Any] | None = figure(optional=True)
    arms: tuple[str, ...] | None = figure(optional=True)
    matched: MatchedVoices | None = figure(optional=True, codec=MatchedVoices)
    n_generic_clips: int | None = figure(optional=True)
    n_matched_clips: int | None = figure(optional=True)
    n_masking_clips: int | None = figure(optional=True)
    n_bad_reference_clips: int | None = figure(optional=True)
    skipped: Mapping[str, int] | None = figure(optional=True)
    judges: Mapping[str, Any] | None = figure(optional=True)
    """The audio-LM judges' synthetic-speech likelihoods, when the recipe asked them."""
    failed_models: Mapping[str, str] | None = figure(optional=True)
    status: str | None = figure(optional=True)
    note: str | None = figure(optional=True)

    model_type = SyntheticModel


PROBE_TYPES: Mapping[str, type[ProbeRecord]] = MappingProxyType(
    {
        "masking": MaskingProbe,
        "orthography": OrthographyProbe,
        "bad_reference": BadReferenceProbe,
        "synthetic_voice": SyntheticVoiceProbe,
    }
)
"""Each probe's record class by probe name (another probe's result reads as a plain ``ProbeRecord``)."""


@dataclass(frozen=True)
class ProbesResult(EntriesResult[ProbeRecord]):
    """Every probe's result by probe name (masking, orthography, bad_reference, synthetic_voice), each its own record."""

    entry_type = ProbeRecord

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """Each probe read with its record class (``PROBE_TYPES``); ``judges`` kept frozen."""
        entries = {str(k): PROBE_TYPES.get(str(k), ProbeRecord).from_json(v) for k, v in data.items() if k != "judges"}
        return cls(MappingProxyType(entries), freeze(data["judges"]) if "judges" in data else None)  # type: ignore[arg-type]

    def probe(self, name: str) -> ProbeRecord:
        """One probe's record (``KeyError`` naming the probes there are when absent)."""
        return self.entry(name)
