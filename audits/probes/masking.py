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
from audits.probes.word_timings import SpanTiming, span_timing
from engine.audio import decode
from engine.data import SAMPLE_RATE, Utterance
from engine.datasets.base import Dataset
from engine.errors import ConfigError
from engine.shards import encode_audio, write_shards

log = logging.getLogger(__name__)

VARIANTS = ("silence", "attenuate", "noise")
NOISE_COLORS = ("pink", "white")
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
            raise ConfigError(
                f"probes.masking.primary_variant '{self.primary_variant}' is not among the variants {list(self.variants)}"
            )
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

    def skip_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.skipped:
            out[s.reason] = out.get(s.reason, 0) + 1
        return out


# ------------------------------------------------------------------ signal operations


def active_rms(x: np.ndarray, sr: int = SAMPLE_RATE, floor_db: float = 40.0) -> float:
    """RMS over 20 ms frames within ``floor_db`` of the loudest frame: the level of the speech itself."""
    hop = max(1, int(0.02 * sr))
    n = len(x) // hop
    if n == 0:
        return float(np.sqrt(np.mean(np.square(x)))) if len(x) else 0.0
    power = np.mean(np.square(x[: n * hop].reshape(n, hop).astype(np.float64)), axis=1)
    top = power.max()
    if top <= 0:
        return 0.0
    active = power[power >= top * 10 ** (-floor_db / 10)]
    return float(np.sqrt(active.mean()))


def colored_noise(n: int, color: str, rng: np.random.Generator) -> np.ndarray:
    """Unit-RMS white or pink (1/f power) noise."""
    white = rng.standard_normal(n)
    if color == "pink" and n > 2:
        spec = np.fft.rfft(white)
        f = np.arange(spec.size, dtype=np.float64)
        f[0] = 1.0
        white = np.fft.irfft(spec / np.sqrt(f), n)
    rms = float(np.sqrt(np.mean(white**2))) or 1.0
    return (white / rms).astype(np.float32)


def _frame_db(x: np.ndarray, sr: int, hop_s: float = 0.01) -> np.ndarray:
    hop = max(1, int(hop_s * sr))
    n = max(1, len(x) // hop)
    frames = np.asarray(x[: n * hop], dtype=np.float64).reshape(n, hop) if len(x) >= hop else np.asarray(x, dtype=np.float64)[None, :]
    db = 10 * np.log10(np.mean(frames**2, axis=1) + 1e-10)
    return np.convolve(db, np.ones(3) / 3, mode="same")  # 30 ms smoothing


def refine_span(x: np.ndarray, span: SpanTiming, max_shift_s: float = 0.15, sr: int = SAMPLE_RATE) -> tuple[float, float]:
    """Move the span's edges to the quietest point near them (word boundaries sit in energy dips).

    Word timestamps from a recognizer's attention are often off by 0.1-0.2 s; a masked word whose
    first or last phoneme stays audible can be recognized by an honest model. Each edge moves to the
    lowest-energy 10 ms frame within ``max_shift_s`` outward (40 ms inward), never past the middle of
    the neighbouring word.
    """
    db = _frame_db(x, sr)
    hop = 0.01
    prev_mid = 0.5 * (span.prev_start + span.prev_end)
    nxt_end = span.next_end if span.next_end is not None else len(x) / sr
    next_mid = 0.5 * (span.next_start + nxt_end)

    def argmin_in(lo: float, hi: float, default: float) -> float:
        a, b = max(0, int(lo / hop)), min(len(db), int(np.ceil(hi / hop)) + 1)
        if b <= a:
            return default
        return (a + int(np.argmin(db[a:b]))) * hop

    start = argmin_in(max(prev_mid, span.start - max_shift_s), span.start + 0.04, span.start)
    end = argmin_in(span.end - 0.04, min(next_mid, span.end + max_shift_s), span.end) + hop
    if end - start < 0.04:
        return span.start, span.end
    return start, end


def mask_interval(span: SpanTiming, pad_s: float, duration_s: float, x: np.ndarray | None = None,
        sr: int = SAMPLE_RATE) -> tuple[float, float]:
    """The target span (edges refined on the audio when given) widened by ``pad_s`` into quiet audio only.

    The pad stops short of the neighbouring words: it extends an edge only over frames that stay
    within 6 dB of the edge's own level (a pause), and never past the neighbour's timing.
    """
    if x is None:
        lo = max(0.0, span.prev_end, span.start - pad_s)
        hi = min(duration_s, span.next_start, span.end + pad_s)
        return lo, max(lo, hi)
    start, end = refine_span(x, span, sr=sr)
    db = _frame_db(x, sr)
    hop = 0.01

    def level(t: float) -> float:
        return float(db[min(len(db) - 1, max(0, int(t / hop)))])

    lo, hi = start, end
    edge = level(start)
    while lo - hop >= max(0.0, start - pad_s) and level(lo - hop) <= edge + 6.0:
        lo -= hop
    edge = level(end - hop)
    while hi + hop <= min(duration_s, end + pad_s) and level(hi) <= edge + 6.0:
        hi += hop
    return max(0.0, lo), min(duration_s, max(lo, hi))


def apply_mask(
    x: np.ndarray,
    start_s: float,
    end_s: float,
    variant: str,
    settings: MaskSettings,
    rng: np.random.Generator,
    sr: int = SAMPLE_RATE,
) -> np.ndarray:
    """A copy of ``x`` with [start_s, end_s) silenced, attenuated or replaced by noise (ramped edges)."""
    if variant not in VARIANTS:
        raise ConfigError(f"unknown masking variant '{variant}'; choose from {list(VARIANTS)}")
    y = np.array(x, dtype=np.float32, copy=True)
    a = max(0, round(start_s * sr))
    b = min(len(y), round(end_s * sr))
    if b <= a:
        return y
    n = b - a
    ramp = min(int(settings.ramp_s * sr), n // 2)
    # w = 1 inside the masked span, 0 outside, raised-cosine ramps at the edges (inside the span)
    w = np.ones(n, dtype=np.float32)
    if ramp > 0:
        edge = (0.5 - 0.5 * np.cos(np.pi * np.arange(ramp) / ramp)).astype(np.float32)
        w[:ramp] = edge
        w[n - ramp :] = edge[::-1]
    level = active_rms(x, sr)
    seg = y[a:b]
    if variant == "silence":
        y[a:b] = seg * (1.0 - w)
    elif variant == "attenuate":
        g = np.float32(10 ** (settings.attenuate_db / 20))
        y[a:b] = seg * (1.0 - w) + seg * g * w
    else:
        noise = colored_noise(n, settings.noise_color, rng) * np.float32(level)
        y[a:b] = seg * (1.0 - w) + noise * w
    return y


# ------------------------------------------------------------------ building the derived set


def derived_id(parent: str, k: int, variant: str) -> str:
    return f"{parent}~mask-{k}-{variant}"


def _seed_for(utt_id: str, seed: int) -> np.random.Generator:
    import hashlib

    h = int.from_bytes(hashlib.sha256(f"{seed}:{utt_id}".encode()).digest()[:8], "little")
    return np.random.default_rng(h)


def mask_clip(
    utt: Utterance,
    audio: np.ndarray,
    timings_fn: Callable[[], Sequence[Any]],
    settings: MaskSettings,
) -> tuple[list[Utterance], list[Skip]]:
    """Derived masked utterances of one clip (one per target and variant), or the reasons there are none.

    ``timings_fn`` is called only when the clip has a target (alignment is the costly step).
    """
    ref = utt.reference
    if not ref or not ref.strip():
        return [], [Skip(utt.utt_id, "no-reference", "the clip has no reference text")]
    duration = len(audio) / SAMPLE_RATE
    if duration < settings.min_clip_s:
        return [], [Skip(utt.utt_id, "clip-too-short", f"clip is {duration:.2f} s, shorter than min_clip_s = {settings.min_clip_s:g} s")]
    targets = select_mask_targets(ref, settings.max_targets, kinds=settings.kinds, ner=settings.ner if "entity" in settings.kinds else None)
    if not targets:
        return [], [Skip(utt.utt_id, "no-maskable-word", explain_no_targets(ref) or "no target of the configured kinds")]
    timings = timings_fn()
    out: list[Utterance] = []
    skips: list[Skip] = []
    for k, target in enumerate(targets):
        span = span_timing(timings, target.word_start, target.word_end, duration)
        if span is None:
            skips.append(Skip(utt.utt_id, "timing-unknown", "the word timings could not place this target", target.text))
            continue
        lo, hi = mask_interval(span, settings.pad_s, duration, audio)
        if hi - lo < settings.min_span_s:
            skips.append(Skip(utt.utt_id, "target-too-short", f"masked span is {hi - lo:.3f} s", target.text))
            continue
        if hi - lo > settings.max_span_fraction * duration:
            skips.append(
                Skip(utt.utt_id, "target-covers-clip", f"span {hi - lo:.2f} s of a {duration:.2f} s clip exceeds max_span_fraction",
                    target.text)
            )
            continue
        for variant in settings.variants:
            uid = derived_id(utt.utt_id, k, variant)
            y = apply_mask(audio, lo, hi, variant, settings, _seed_for(uid, settings.seed))
            derivation = {
                "probe": "masking",
                "target": target.to_dict(),
                "target_index": k,
                "span_s": [round(lo, 4), round(hi, 4)],
                "word_span_s": [round(span.start, 4), round(span.end, 4)],
                "pad_s": settings.pad_s,
                "variant": variant,
                "timing_method": span.method,
                "timing_how": span.how,
            }
            if variant == "attenuate":
                derivation["attenuate_db"] = settings.attenuate_db
            if variant == "noise":
                derivation["noise"] = settings.noise_color
            out.append(
                Utterance(
                    utt_id=uid,
                    reference=ref,
                    audio_bytes=encode_audio(y, SAMPLE_RATE, "FLAC"),
                    duration_s=round(duration, 6),
                    speaker=utt.speaker,
                    labels=dict(utt.labels),
                    parent_id=utt.utt_id,
                    derivation=derivation,
                )
            )
    return out, skips


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
    """Mask every clip of ``dataset`` (or the ids in ``only``) into Parquet shards under ``out_dir``."""
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
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("shard-*.parquet"):
        old.unlink()
    if derived:
        write_shards(derived, out_dir, shard_size=64)
    with open(out_dir / "skipped.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(s.to_dict()) + "\n" for s in build.skipped)
    log.info(
        "masking: %d derived clips from %d of %d clips; skipped %s",
        len(derived), build.n_clips_masked, build.n_clips, build.skip_counts() or "none",
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
