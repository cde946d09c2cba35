"""The masked-word probe's audio operations: hide a timed span of a clip (pure functions of samples).

They live in the engine because the masking derivation runs on the engine's workers
(``engine.keyed.probe_workers.MaskWorker``): the driver picks the targets and their word spans (text
work, ``audits.probes.masking``), a worker decodes the clip and calls :func:`mask_targets`. The
span, widened by a small pad that never reaches into the neighbouring words, is replaced by

``silence``   zeros (5 ms raised-cosine ramps at the edges, so no click announces the gap);
``attenuate`` the same audio at ``attenuate_db``;
``noise``     pink (or white) noise at the clip's active speech level.

The noise of each derived clip is seeded by its id and the probe's seed, so a clip is the same
sample for sample wherever and whenever it is derived.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from engine.data import SAMPLE_RATE
from engine.errors import ConfigError

VARIANTS = ("silence", "attenuate", "noise")
NOISE_COLORS = ("pink", "white")


@dataclass(frozen=True)
class SpanTiming:
    """The time span of a run of reference words [word_start, word_end) and its neighbours' edges."""

    start: float
    end: float
    prev_end: float  # end of the previous known word (0 at the clip start)
    next_start: float  # start of the next known word (clip end when none)
    method: str
    how: str  # the weakest 'how' among the words
    prev_start: float = 0.0  # start of the previous known word (0 when none)
    next_end: float | None = None  # end of the next known word (clip end when none)


class SignalSettings(Protocol):
    """What :func:`apply_mask` reads of the probe's settings."""

    @property
    def ramp_s(self) -> float: ...

    @property
    def attenuate_db(self) -> float: ...

    @property
    def noise_color(self) -> str: ...


@dataclass(frozen=True)
class MaskSignal:
    """The audio side of the probe's settings: what a worker needs to derive the masked clips of one clip."""

    variants: tuple[str, ...] = ("silence",)
    pad_s: float = 0.05
    min_clip_s: float = 1.0
    attenuate_db: float = -30.0
    noise_color: str = "pink"
    max_span_fraction: float = 0.5
    min_span_s: float = 0.04
    ramp_s: float = 0.005
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "variants": list(self.variants),
            "pad_s": self.pad_s,
            "min_clip_s": self.min_clip_s,
            "attenuate_db": self.attenuate_db,
            "noise_color": self.noise_color,
            "max_span_fraction": self.max_span_fraction,
            "min_span_s": self.min_span_s,
            "ramp_s": self.ramp_s,
            "seed": self.seed,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MaskSignal:
        # values as given (no float() of an int): they are written into each clip's derivation record
        return cls(
            tuple(str(v) for v in d["variants"]),
            d["pad_s"],
            d["min_clip_s"],
            d["attenuate_db"],
            str(d["noise_color"]),
            d["max_span_fraction"],
            d["min_span_s"],
            d["ramp_s"],
            d["seed"],
        )


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


def mask_interval(
    span: SpanTiming, pad_s: float, duration_s: float, x: np.ndarray | None = None, sr: int = SAMPLE_RATE
) -> tuple[float, float]:
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
    settings: SignalSettings,
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


def derived_id(parent: str, k: int, variant: str) -> str:
    """The id of target ``k`` of clip ``parent`` masked with ``variant``."""
    return f"{parent}~mask-{k}-{variant}"


def seed_for(utt_id: str, seed: int) -> np.random.Generator:
    """The noise generator of one derived clip: its id and the probe's seed, nothing else."""
    h = int.from_bytes(hashlib.sha256(f"{seed}:{utt_id}".encode()).digest()[:8], "little")
    return np.random.default_rng(h)


@dataclass(frozen=True)
class PlannedTarget:
    """One target the driver placed: its index among the clip's targets, its record (text side) and its word span."""

    index: int
    target: Mapping[str, Any]
    span: SpanTiming

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "target": dict(self.target), "span": {f: getattr(self.span, f) for f in _SPAN_FIELDS}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PlannedTarget:
        return cls(int(d["index"]), dict(d["target"]), SpanTiming(**dict(d["span"])))


_SPAN_FIELDS = ("start", "end", "prev_end", "next_start", "method", "how", "prev_start", "next_end")


@dataclass
class TargetMasks:
    """What one target gave: its derived clips ``(id, samples, derivation)`` or why it has none (``reason``, ``detail``)."""

    index: int
    clips: list[tuple[str, np.ndarray, dict[str, Any]]] = field(default_factory=list)
    reason: str | None = None
    detail: str = ""


def mask_targets(parent: str, audio: np.ndarray, targets: Sequence[PlannedTarget], signal: MaskSignal) -> list[TargetMasks]:
    """Every variant of every placed target of clip ``parent`` (in the order given), or the reason a target has none.

    A target whose masked span (refined and padded on the audio) is shorter than ``min_span_s`` or
    longer than ``max_span_fraction`` of the clip gets ``target-too-short``/``target-covers-clip``.
    """
    duration = len(audio) / SAMPLE_RATE
    out: list[TargetMasks] = []
    for t in targets:
        span = t.span
        lo, hi = mask_interval(span, signal.pad_s, duration, audio)
        if hi - lo < signal.min_span_s:
            out.append(TargetMasks(t.index, reason="target-too-short", detail=f"masked span is {hi - lo:.3f} s"))
            continue
        if hi - lo > signal.max_span_fraction * duration:
            out.append(
                TargetMasks(
                    t.index,
                    reason="target-covers-clip",
                    detail=f"span {hi - lo:.2f} s of a {duration:.2f} s clip exceeds max_span_fraction",
                )
            )
            continue
        got = TargetMasks(t.index)
        for variant in signal.variants:
            uid = derived_id(parent, t.index, variant)
            y = apply_mask(audio, lo, hi, variant, signal, seed_for(uid, signal.seed))
            derivation: dict[str, Any] = {
                "probe": "masking",
                "target": dict(t.target),
                "target_index": t.index,
                "span_s": [round(lo, 4), round(hi, 4)],
                "word_span_s": [round(span.start, 4), round(span.end, 4)],
                "pad_s": signal.pad_s,
                "variant": variant,
                "timing_method": span.method,
                "timing_how": span.how,
            }
            if variant == "attenuate":
                derivation["attenuate_db"] = signal.attenuate_db
            if variant == "noise":
                derivation["noise"] = signal.noise_color
            got.clips.append((uid, y, derivation))
        out.append(got)
    return out


__all__ = [
    "NOISE_COLORS",
    "VARIANTS",
    "MaskSignal",
    "PlannedTarget",
    "SignalSettings",
    "SpanTiming",
    "TargetMasks",
    "active_rms",
    "apply_mask",
    "colored_noise",
    "derived_id",
    "mask_interval",
    "mask_targets",
    "refine_span",
    "seed_for",
]
