"""Masked-word probe, audio side: hide a target word in the clip and write the derived clips.

For each clip the text side (:mod:`audits.probes.masking_score`) picks targets (numbers, proper
nouns, entities); word timings (:mod:`audits.probes.word_timings`) give the target's time span;
the span, widened by a small pad that never reaches into the neighbouring words, is replaced by

``silence``   zeros (5 ms raised-cosine ramps at the edges, so no click announces the gap);
``attenuate`` the same audio at ``attenuate_db`` (-30 dB by default; a model that still hears the
              word is listening, not leaking, so this variant is reported beside the primary one);
``noise``     pink (or white) noise at the clip's active speech level (phonemic-restoration test).

Each masked clip becomes a derived utterance ``<parent>~mask-<k>-<variant>`` with ``parent_id``
and a derivation record (the target, its span, pad, variant and timing method), written as
Parquet shards that the engine runs like any dataset. Clips that cannot be masked are skipped
with a reason that is counted and listed, never silently dropped.

The audio operations themselves are :mod:`engine.audio.masking` (re-exported here): the probe's
derivation runs on the engine's workers (:mod:`audits.probes.mask_pass`); this module keeps the
text side (settings, targets, skips) and the in-process form of the derivation.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from audits.probes.masking_score import KINDS, MaskTarget, explain_no_targets, select_mask_targets
from audits.probes.word_timings import span_timing
from engine.audio.decoding import decode
from engine.audio.masking import (
    NOISE_COLORS,
    VARIANTS,
    MaskSignal,
    PlannedTarget,
    SpanTiming,
    active_rms,
    apply_mask,
    colored_noise,
    derived_id,
    mask_interval,
    mask_targets,
    refine_span,
)
from engine.audio.shards import encode_audio, write_shards
from engine.data import SAMPLE_RATE, Utterance
from engine.datasets.base import Dataset
from engine.errors import ConfigError

log = logging.getLogger(__name__)

SKIP_REASONS = (
    "no-reference",
    "audio-error",
    "clip-too-short",
    "no-maskable-word",
    "timing-unknown",
    "target-too-short",
    "target-covers-clip",
)


@dataclass(frozen=True)
class MaskSettings:
    """How targets are chosen and hidden (``probes.masking`` in a recipe)."""

    variants: tuple[str, ...] = ("silence",)
    primary_variant: str = "silence"
    max_targets: int = 1
    pad_s: float = 0.05
    min_clip_s: float = 1.0
    kinds: tuple[str, ...] = ("number", "proper-noun")
    ner: str | None = None  # spaCy model name for 'entity' targets
    attenuate_db: float = -30.0
    noise_color: str = "pink"
    max_span_fraction: float = 0.5
    min_span_s: float = 0.04
    ramp_s: float = 0.005
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.variants:
            raise ConfigError("probes.masking.variants must name at least one of " + ", ".join(VARIANTS))
        bad = [v for v in self.variants if v not in VARIANTS]
        if bad:
            raise ConfigError(f"probes.masking.variants: unknown variant(s) {bad}; choose from {list(VARIANTS)}")
        if self.primary_variant not in self.variants:
            raise ConfigError(f"probes.masking.primary_variant '{self.primary_variant}' is not among the variants {list(self.variants)}")
        badk = [k for k in self.kinds if k not in KINDS]
        if badk or not self.kinds:
            raise ConfigError(f"probes.masking.kinds: {badk or 'empty'}; choose from {list(KINDS)}")
        if self.max_targets < 1:
            raise ConfigError(f"probes.masking.max_targets must be >= 1, got {self.max_targets}")
        if not 0.0 <= self.pad_s <= 0.5:
            raise ConfigError(f"probes.masking.pad_s must be between 0 and 0.5 s, got {self.pad_s}")
        if self.min_clip_s < 0:
            raise ConfigError(f"probes.masking.min_clip_s must be >= 0, got {self.min_clip_s}")
        if self.attenuate_db >= 0:
            raise ConfigError(f"probes.masking.attenuate_db must be negative (a cut), got {self.attenuate_db}")
        if self.noise_color not in NOISE_COLORS:
            raise ConfigError(f"probes.masking.noise must be one of {list(NOISE_COLORS)}, got '{self.noise_color}'")
        if not 0.0 < self.max_span_fraction <= 1.0:
            raise ConfigError(f"probes.masking.max_span_fraction must be in (0, 1], got {self.max_span_fraction}")


@dataclass(frozen=True)
class Skip:
    """A clip (or one target of it) that was not masked, and why."""

    utt_id: str
    reason: str
    detail: str = ""
    target: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"utt_id": self.utt_id, "reason": self.reason, "detail": self.detail}
        if self.target is not None:
            d["target"] = self.target
        return d


@dataclass
class MaskBuild:
    """What the audio side produced: derived clips (by id) and skips."""

    derived_dir: Path
    derivations: dict[str, dict[str, Any]] = field(default_factory=dict)  # derived utt_id -> record
    parents: dict[str, str] = field(default_factory=dict)  # derived utt_id -> parent utt_id
    skipped: list[Skip] = field(default_factory=list)
    n_clips: int = 0
    n_clips_masked: int = 0
    facts: dict[str, Any] = field(default_factory=dict)  # the derivation pass's worker facts (runner, pid, ...) when run on the engine

    def skip_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.skipped:
            out[s.reason] = out.get(s.reason, 0) + 1
        return out


# ------------------------------------------------------------------ building the derived set


def signal_of(settings: MaskSettings) -> MaskSignal:
    """The audio side of the settings: what a worker needs to mask a clip (``engine.audio.masking``)."""
    return MaskSignal(
        tuple(settings.variants),
        settings.pad_s,
        settings.min_clip_s,
        settings.attenuate_db,
        settings.noise_color,
        settings.max_span_fraction,
        settings.min_span_s,
        settings.ramp_s,
        settings.seed,
    )


def clip_targets(reference: str | None, settings: MaskSettings) -> list[MaskTarget]:
    """The targets of a clip's reference (none without a reference)."""
    if not reference or not reference.strip():
        return []
    return select_mask_targets(
        reference, settings.max_targets, kinds=settings.kinds, ner=settings.ner if "entity" in settings.kinds else None
    )


def text_skip(utt: Utterance, duration_s: float, targets: Sequence[MaskTarget], settings: MaskSettings) -> Skip | None:
    """Why a readable clip gives no masked clip at all, decided before any target is placed (None: it has targets)."""
    ref = utt.reference
    if not ref or not ref.strip():
        return Skip(utt.utt_id, "no-reference", "the clip has no reference text")
    if duration_s < settings.min_clip_s:
        return Skip(utt.utt_id, "clip-too-short", f"clip is {duration_s:.2f} s, shorter than min_clip_s = {settings.min_clip_s:g} s")
    if not targets:
        return Skip(utt.utt_id, "no-maskable-word", explain_no_targets(ref) or "no target of the configured kinds")
    return None


def place_targets(utt_id: str, targets: Sequence[MaskTarget], timings: Sequence[Any], duration_s: float) -> list[PlannedTarget | Skip]:
    """Each target's word span from the word timings (in target order), or ``timing-unknown`` when they cannot place it."""
    out: list[PlannedTarget | Skip] = []
    for k, target in enumerate(targets):
        span = span_timing(timings, target.word_start, target.word_end, duration_s)
        if span is None:
            out.append(Skip(utt_id, "timing-unknown", "the word timings could not place this target", target.text))
        else:
            out.append(PlannedTarget(k, target.to_dict(), span))
    return out


def mask_clip(
    utt: Utterance,
    audio: np.ndarray,
    timings_fn: Callable[[], Sequence[Any]],
    settings: MaskSettings,
) -> tuple[list[Utterance], list[Skip]]:
    """Derived masked utterances of one clip (one per target and variant), or the reasons there are none, in this process.

    ``timings_fn`` is called only when the clip has a target (alignment is the costly step). The
    masked-word probe derives its clips on the engine's workers (``audits.probes.mask_pass``) with
    the same functions; this is the in-process form (the synthetic-voice probe's renditions).
    """
    duration = len(audio) / SAMPLE_RATE
    targets = clip_targets(utt.reference, settings)
    skip = text_skip(utt, duration, targets, settings)
    if skip is not None:
        return [], [skip]
    placed = place_targets(utt.utt_id, targets, timings_fn(), duration)
    masks = {m.index: m for m in mask_targets(utt.utt_id, audio, [p for p in placed if isinstance(p, PlannedTarget)], signal_of(settings))}
    out: list[Utterance] = []
    skips: list[Skip] = []
    for p, target in zip(placed, targets):
        if isinstance(p, Skip):
            skips.append(p)
            continue
        m = masks[p.index]
        if m.reason is not None:
            skips.append(Skip(utt.utt_id, m.reason, m.detail, target.text))
            continue
        for uid, y, derivation in m.clips:
            out.append(derived_utterance(utt, uid, encode_audio(y, SAMPLE_RATE, "FLAC"), duration, derivation))
    return out, skips


def derived_utterance(parent: Utterance, uid: str, audio_bytes: bytes, duration_s: float, derivation: Mapping[str, Any]) -> Utterance:
    """A masked clip of ``parent`` as an utterance of the derived set (its encoded audio and derivation record)."""
    return Utterance(
        utt_id=uid,
        reference=parent.reference,
        audio_bytes=audio_bytes,
        duration_s=round(duration_s, 6),
        speaker=parent.speaker,
        labels=dict(parent.labels),
        parent_id=parent.utt_id,
        derivation=dict(derivation),
    )


def clips_needing_timings(dataset: Dataset, settings: MaskSettings, only: Iterable[str] | None = None) -> list[Utterance]:
    """The clips :func:`build_masked_set` will ask timings for: benchmark clips with a reference and a target.

    Decided from the text alone, so the timings can be computed as one pass on the engine before
    any clip is masked; a clip whose audio turns out unreadable or too short gets its timing unit
    all the same (cheap; its skip reason is still the decoder's or the length check's).
    """
    wanted = set(only) if only is not None else None
    out: list[Utterance] = []
    for shard in dataset.iter_shards():
        for u in shard.utterances:
            if (u.derivation or {}).get("probe") or (wanted is not None and u.utt_id not in wanted) or u.problem:
                continue
            if not u.reference or not u.reference.strip():
                continue
            ner = settings.ner if "entity" in settings.kinds else None
            if select_mask_targets(u.reference, settings.max_targets, kinds=settings.kinds, ner=ner):
                out.append(u)
    return out


TimingsFor = Callable[[Utterance, np.ndarray], Sequence[Any]]
"""Word timings of one clip from its utterance and decoded samples (the probe reads them from the engine's results)."""


def build_masked_set(
    dataset: Dataset,
    timings_for: TimingsFor,
    settings: MaskSettings,
    out_dir: Path,
    only: Iterable[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> MaskBuild:
    """Mask every clip of ``dataset`` (or the ids in ``only``) into Parquet shards under ``out_dir``, in this process.

    The probe derives its set on the engine's workers instead (``audits.probes.mask_pass.derive_masked_set``:
    the same clips, bytes and skips); this form decodes and masks here, for a caller with its own timings.
    """
    wanted = set(only) if only is not None else None
    build = MaskBuild(out_dir)
    derived: list[Utterance] = []
    done = 0
    for shard in dataset.iter_shards():
        for u in shard.utterances:
            if (u.derivation or {}).get("probe") or (wanted is not None and u.utt_id not in wanted):  # probe audio is never re-masked
                continue
            build.n_clips += 1
            if u.problem:
                build.skipped.append(Skip(u.utt_id, "audio-error", u.problem))
                continue
            d = decode(u, root=dataset.root)
            if d.error is not None:
                build.skipped.append(Skip(u.utt_id, "audio-error", d.error))
                continue

            def timings(u: Utterance = u, x: np.ndarray = d.samples) -> Sequence[Any]:
                return timings_for(u, x)

            utts, skips = mask_clip(u, d.samples, timings, settings)
            build.skipped.extend(skips)
            if utts:
                build.n_clips_masked += 1
            for m in utts:
                derived.append(m)
                build.derivations[m.utt_id] = dict(m.derivation or {})
                build.parents[m.utt_id] = u.utt_id
            done += 1
            if progress is not None:
                progress(done, dataset.n_utts)
    return write_build(build, derived)


def write_build(build: MaskBuild, derived: Sequence[Utterance]) -> MaskBuild:
    """Write the derived clips as Parquet shards (replacing older ones) and the skips as ``skipped.jsonl``."""
    out_dir = build.derived_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("shard-*.parquet"):
        old.unlink()
    if derived:
        write_shards(list(derived), out_dir, shard_size=64)
    with open(out_dir / "skipped.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(s.to_dict()) + "\n" for s in build.skipped)
    log.info(
        "masking: %d derived clips from %d of %d clips; skipped %s",
        len(derived),
        build.n_clips_masked,
        build.n_clips,
        build.skip_counts() or "none",
    )
    return build


def records_from_rows(
    build_derivations: Mapping[str, Mapping[str, Any]],
    parents: Mapping[str, str],
    derived_hyps: Mapping[tuple[str, str], str | None],
    original_hyps: Mapping[tuple[str, str], str | None],
    models: Sequence[str],
) -> list[Any]:
    """MaskRecords for every (model, derived clip): hyps keyed by (model, utt_id), None when failed."""
    from audits.probes.masking_score import MaskRecord

    out = []
    for uid, der in build_derivations.items():
        target = MaskTarget.from_dict(dict(der["target"]))
        parent = parents[uid]
        for m in models:
            out.append(
                MaskRecord(
                    model=m,
                    parent_id=parent,
                    target=target,
                    hyp_original=original_hyps.get((m, parent)),
                    hyp_masked=derived_hyps.get((m, uid)),
                    variant=str(der["variant"]),
                )
            )
    return out


__all__ = [
    "NOISE_COLORS",
    "SKIP_REASONS",
    "VARIANTS",
    "MaskBuild",
    "MaskSettings",
    "Skip",
    "SpanTiming",
    "active_rms",
    "apply_mask",
    "build_masked_set",
    "clip_targets",
    "clips_needing_timings",
    "colored_noise",
    "derived_id",
    "derived_utterance",
    "mask_clip",
    "mask_interval",
    "place_targets",
    "records_from_rows",
    "refine_span",
    "signal_of",
    "text_skip",
    "write_build",
]
