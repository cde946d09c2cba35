"""Prosody-contrast audit for paired renditions (same text, different delivery; SpeechEQ-style).

Each pair (a, b) gets a contrast score from six acoustic features, maximum 8 points:

=================  ===========================================  =========================
feature            gap measured as                              points
=================  ===========================================  =========================
pitch              |12*log2(f0_median_a / f0_median_b)| (st)    2 if >= 2 st, 1 if >= 1 st
speaking rate      max/min - 1 of syllable_rate                 2 if >= 20 %, 1 if >= 10 %
spectral centroid  max/min - 1 of spectral_centroid_hz          1 if >= 10 %
RMS energy         |rms_db_a - rms_db_b| (dB)                   1 if >= 3 dB
MFCC mean          Euclidean distance of mfcc_mean_1..12        1 if >= 1.5
duration           max/min - 1 of speech_s (else duration_s)    1 if >= 10 %
=================  ===========================================  =========================

The thresholds sit near just-noticeable differences (about one semitone of pitch, a few dB of
level, ten percent of tempo); ``ContrastRules`` changes them. A feature that cannot be measured
on either clip (no voicing, no speech) earns 0 points and is named in the pair's ``missing``.
Pairs scoring below ``threshold`` (default 4) are listed: their renditions barely differ, so
they should not be presented as distinct emotional deliveries. Descriptors come from the
``prosody`` SER backend (``EmotionOutput.descriptors``).
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from engine.errors import ConfigError

log = logging.getLogger(__name__)

MAX_SCORE = 8
FEATURES = ("pitch", "rate", "centroid", "energy", "mfcc", "duration")


@dataclass(frozen=True)
class ContrastRules:
    """Gap thresholds for each feature's points (see the module docstring)."""

    pitch_st_2: float = 2.0
    pitch_st_1: float = 1.0
    rate_rel_2: float = 0.20
    rate_rel_1: float = 0.10
    centroid_rel: float = 0.10
    energy_db: float = 3.0
    mfcc_dist: float = 1.5
    duration_rel: float = 0.10

    def __post_init__(self) -> None:
        if any(v <= 0 for v in asdict(self).values()):
            raise ConfigError("prosody-contrast thresholds must be positive")
        if self.pitch_st_1 > self.pitch_st_2 or self.rate_rel_1 > self.rate_rel_2:
            raise ConfigError("the 1-point threshold must not exceed the 2-point threshold")


def _finite(*xs: float | None) -> bool:
    return all(x is not None and np.isfinite(x) for x in xs)


def _num(x: float | None) -> float:
    """``x`` as a float once :func:`_finite` has vouched for it (NaN otherwise)."""
    return float("nan") if x is None else float(x)


def _rel_gap(a: float | None, b: float | None) -> float | None:
    if not _finite(a, b):
        return None
    fa, fb = _num(a), _num(b)
    if min(fa, fb) <= 0:
        return None
    return float(max(fa, fb) / min(fa, fb) - 1.0)


def feature_gaps(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float | None]:
    """The six raw gaps between two descriptor sets (None where not measurable)."""
    fa, fb = a.get("f0_median_hz"), b.get("f0_median_hz")
    pitch = abs(12 * math.log2(_num(fa) / _num(fb))) if _finite(fa, fb) and _num(fa) > 0 and _num(fb) > 0 else None
    ea, eb = a.get("rms_db"), b.get("rms_db")
    energy = abs(_num(ea) - _num(eb)) if _finite(ea, eb) else None
    ma = [a.get(f"mfcc_mean_{k}") for k in range(1, 13)]
    mb = [b.get(f"mfcc_mean_{k}") for k in range(1, 13)]
    mfcc = float(np.linalg.norm(np.subtract([_num(x) for x in ma], [_num(x) for x in mb]))) if _finite(*ma, *mb) else None
    da = a.get("speech_s") if _finite(a.get("speech_s")) else a.get("duration_s")
    db = b.get("speech_s") if _finite(b.get("speech_s")) else b.get("duration_s")
    return {
        "pitch": pitch,
        "rate": _rel_gap(a.get("syllable_rate"), b.get("syllable_rate")),
        "centroid": _rel_gap(a.get("spectral_centroid_hz"), b.get("spectral_centroid_hz")),
        "energy": energy,
        "mfcc": mfcc,
        "duration": _rel_gap(da, db),
    }


def gap_points(gaps: Mapping[str, float | None], rules: ContrastRules = ContrastRules()) -> dict[str, int]:
    """Points per feature for the given gaps."""

    def two(g: float | None, hi: float, lo: float) -> int:
        return 0 if g is None else 2 if g >= hi else 1 if g >= lo else 0

    def one(g: float | None, t: float) -> int:
        return 0 if g is None else int(g >= t)

    return {
        "pitch": two(gaps["pitch"], rules.pitch_st_2, rules.pitch_st_1),
        "rate": two(gaps["rate"], rules.rate_rel_2, rules.rate_rel_1),
        "centroid": one(gaps["centroid"], rules.centroid_rel),
        "energy": one(gaps["energy"], rules.energy_db),
        "mfcc": one(gaps["mfcc"], rules.mfcc_dist),
        "duration": one(gaps["duration"], rules.duration_rel),
    }


@dataclass
class PairContrast:
    """The contrast score of one pair of renditions."""

    a: str
    b: str
    score: int
    points: dict[str, int]
    gaps: dict[str, float | None]
    missing: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "score": self.score, "points": self.points, "gaps": self.gaps, "missing": self.missing}


def contrast_score(
    a: Mapping[str, float], b: Mapping[str, float], rules: ContrastRules = ContrastRules(), ids: tuple[str, str] = ("a", "b")
) -> PairContrast:
    """Score one pair of descriptor sets (0..8)."""
    gaps = feature_gaps(a, b)
    pts = gap_points(gaps, rules)
    return PairContrast(ids[0], ids[1], int(sum(pts.values())), pts, gaps, [k for k, v in gaps.items() if v is None])


@dataclass
class ProsodyContrastResult:
    """Scores of every pair, the weak pairs, and what could not be scored."""

    pairs: list[PairContrast]
    threshold: float
    rules: ContrastRules
    skipped: list[dict[str, str]]

    @property
    def below_threshold(self) -> list[PairContrast]:
        return [p for p in self.pairs if p.score < self.threshold]

    def to_dict(self) -> dict[str, Any]:
        scores = [p.score for p in self.pairs]
        return {
            "n_pairs": len(self.pairs),
            "mean_score": float(np.mean(scores)) if scores else None,
            "median_score": float(np.median(scores)) if scores else None,
            "max_score": MAX_SCORE,
            "threshold": self.threshold,
            "n_below_threshold": len(self.below_threshold),
            "below_threshold": [{"a": p.a, "b": p.b, "score": p.score} for p in self.below_threshold],
            "mean_points": {f: float(np.mean([p.points[f] for p in self.pairs])) for f in FEATURES} if self.pairs else {},
            "pairs": [p.to_dict() for p in self.pairs],
            "skipped": list(self.skipped),
            "rules": asdict(self.rules),
        }


def audit_pairs(
    pairs: Sequence[tuple[str, str]],
    descriptors: Mapping[str, Mapping[str, float]],
    threshold: float = 4.0,
    rules: ContrastRules = ContrastRules(),
) -> ProsodyContrastResult:
    """Score every pair; pairs naming a clip without descriptors are skipped and listed."""
    if not 0 <= threshold <= MAX_SCORE:
        raise ConfigError(f"prosody-contrast threshold must lie in [0, {MAX_SCORE}], got {threshold}")
    scored: list[PairContrast] = []
    skipped: list[dict[str, str]] = []
    for a, b in pairs:
        absent = [u for u in (a, b) if u not in descriptors]
        if absent:
            skipped.append({"a": a, "b": b, "reason": f"no prosody descriptors for {', '.join(absent)} (failed or not run)"})
            continue
        scored.append(contrast_score(descriptors[a], descriptors[b], rules, ids=(a, b)))
    if skipped:
        log.warning("%d rendition pair(s) skipped for lack of descriptors", len(skipped))
    return ProsodyContrastResult(scored, float(threshold), rules, skipped)


def pairs_from_parents(parent_of: Mapping[str, str | None]) -> list[tuple[str, str]]:
    """(source, rendition) pairs from derived clips' ``parent_id`` (e.g. demo emotion transforms)."""
    return sorted((p, c) for c, p in parent_of.items() if p is not None and p in parent_of)
