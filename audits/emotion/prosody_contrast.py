"""Prosody-contrast audit for paired renditions (same text, different delivery), as SpeechEQ defines it.

Each pair (a, b) gets a contrast score from six acoustic dimensions, at most 8 points; a pair
below 4 fails. The default definition, ``speecheq``, is the paper's: librosa descriptors (the
``seq_*`` keys of the ``prosody`` backend), pitch and rate gaps worth up to 2 points each, the
other four up to 1 each. The paper gives no per-feature thresholds; these were chosen near
just-noticeable differences and checked on within-voice pairs (docs/metrics.md, "Prosody
contrast"):

=================  ==============================================  =========================
dimension          gap measured as                                 points
=================  ==============================================  =========================
mean pitch         |12*log2(pitch_mean_a / pitch_mean_b)| (st)     2 if >= 2 st, 1 if >= 1 st
zero-crossing      max/min - 1 of the mean zero-crossing rate      2 if >= 20 %, 1 if >= 10 %
spectral centroid  max/min - 1 of the mean centroid                1 if >= 10 %
RMS energy         |20*log10(rms_a / rms_b)| (dB)                  1 if >= 3 dB
mean MFCC          |mfcc_mean_a - mfcc_mean_b|                     1 if >= 1.0
duration           max/min - 1 of the clip duration                1 if >= 10 %
=================  ==============================================  =========================

``semitone-syllable`` is an earlier variant kept as a named option; it differs from the paper:
pitch is the median f0 of a hand-written YIN tracker, rate a syllable-nucleus rate instead of the
zero-crossing rate, MFCC the Euclidean distance of 12 MFCC means, and duration the speech span
(``ContrastRules``). A feature that cannot be measured on either clip (no voicing, no speech)
earns 0 points and is named in the pair's ``missing``.
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
SPEECHEQ = "speecheq"
SEMITONE_SYLLABLE = "semitone-syllable"
DEFINITIONS = (SPEECHEQ, SEMITONE_SYLLABLE)
DEFAULT_DEFINITION = SPEECHEQ


@dataclass(frozen=True)
class SpeechEQRules:
    """Gap thresholds of the SpeechEQ definition (the paper fixes the points, not the thresholds)."""

    pitch_st_2: float = 2.0
    pitch_st_1: float = 1.0
    zcr_rel_2: float = 0.20
    zcr_rel_1: float = 0.10
    centroid_rel: float = 0.10
    energy_db: float = 3.0
    mfcc_abs: float = 1.0
    duration_rel: float = 0.10

    def __post_init__(self) -> None:
        if any(v <= 0 for v in asdict(self).values()):
            raise ConfigError("prosody-contrast thresholds must be positive")
        if self.pitch_st_1 > self.pitch_st_2 or self.zcr_rel_1 > self.zcr_rel_2:
            raise ConfigError("the 1-point threshold must not exceed the 2-point threshold")


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


def _two(g: float | None, hi: float, lo: float) -> int:
    return 0 if g is None else 2 if g >= hi else 1 if g >= lo else 0


def _one(g: float | None, t: float) -> int:
    return 0 if g is None else int(g >= t)


def speecheq_gaps(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float | None]:
    """The six SpeechEQ gaps between two ``seq_*`` descriptor sets (None where not measurable)."""
    fa, fb = a.get("seq_pitch_mean_hz"), b.get("seq_pitch_mean_hz")
    pitch = abs(12 * math.log2(_num(fa) / _num(fb))) if _finite(fa, fb) and _num(fa) > 0 and _num(fb) > 0 else None
    ra, rb = a.get("seq_rms"), b.get("seq_rms")
    energy = abs(20 * math.log10(_num(ra) / _num(rb))) if _finite(ra, rb) and _num(ra) > 0 and _num(rb) > 0 else None
    ma, mb = a.get("seq_mfcc_mean"), b.get("seq_mfcc_mean")
    return {
        "pitch": pitch,
        "rate": _rel_gap(a.get("seq_zcr"), b.get("seq_zcr")),
        "centroid": _rel_gap(a.get("seq_centroid_hz"), b.get("seq_centroid_hz")),
        "energy": energy,
        "mfcc": abs(_num(ma) - _num(mb)) if _finite(ma, mb) else None,
        "duration": _rel_gap(a.get("seq_duration_s"), b.get("seq_duration_s")),
    }


def speecheq_points(gaps: Mapping[str, float | None], rules: SpeechEQRules = SpeechEQRules()) -> dict[str, int]:
    """Points per dimension: pitch and rate up to 2, the other four up to 1 (at most 8)."""
    return {
        "pitch": _two(gaps["pitch"], rules.pitch_st_2, rules.pitch_st_1),
        "rate": _two(gaps["rate"], rules.zcr_rel_2, rules.zcr_rel_1),
        "centroid": _one(gaps["centroid"], rules.centroid_rel),
        "energy": _one(gaps["energy"], rules.energy_db),
        "mfcc": _one(gaps["mfcc"], rules.mfcc_abs),
        "duration": _one(gaps["duration"], rules.duration_rel),
    }


def gap_points(gaps: Mapping[str, float | None], rules: ContrastRules = ContrastRules()) -> dict[str, int]:
    """Points per feature for the given gaps (the ``semitone-syllable`` variant)."""
    two, one = _two, _one

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
    a: Mapping[str, float],
    b: Mapping[str, float],
    rules: ContrastRules | SpeechEQRules | None = None,
    ids: tuple[str, str] = ("a", "b"),
    definition: str = DEFAULT_DEFINITION,
) -> PairContrast:
    """Score one pair of descriptor sets (0..8) under ``definition`` (its default rules when None)."""
    if definition == SPEECHEQ:
        seq_rules = rules if isinstance(rules, SpeechEQRules) else SpeechEQRules()
        gaps = speecheq_gaps(a, b)
        pts = speecheq_points(gaps, seq_rules)
    elif definition == SEMITONE_SYLLABLE:
        gaps = feature_gaps(a, b)
        pts = gap_points(gaps, rules if isinstance(rules, ContrastRules) else ContrastRules())
    else:
        raise ConfigError(f"prosody-contrast definition '{definition}' is not one of {DEFINITIONS}")
    if rules is not None and not isinstance(rules, SpeechEQRules if definition == SPEECHEQ else ContrastRules):
        raise ConfigError(f"rules of type {type(rules).__name__} do not belong to the '{definition}' definition")
    return PairContrast(ids[0], ids[1], int(sum(pts.values())), pts, gaps, [k for k, v in gaps.items() if v is None])


@dataclass
class ProsodyContrastResult:
    """Scores of every pair, the weak pairs, and what could not be scored."""

    pairs: list[PairContrast]
    threshold: float
    rules: ContrastRules | SpeechEQRules
    skipped: list[dict[str, str]]
    definition: str = DEFAULT_DEFINITION

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
            "definition": self.definition,
            "rules": asdict(self.rules),
        }


def audit_pairs(
    pairs: Sequence[tuple[str, str]],
    descriptors: Mapping[str, Mapping[str, float]],
    threshold: float = 4.0,
    rules: ContrastRules | SpeechEQRules | None = None,
    definition: str = DEFAULT_DEFINITION,
) -> ProsodyContrastResult:
    """Score every pair; pairs naming a clip without descriptors are skipped and listed.

    ``definition``: ``speecheq`` (the paper's, default) or ``semitone-syllable`` (the earlier variant).
    """
    if not 0 <= threshold <= MAX_SCORE:
        raise ConfigError(f"prosody-contrast threshold must lie in [0, {MAX_SCORE}], got {threshold}")
    if definition not in DEFINITIONS:
        raise ConfigError(f"prosody-contrast definition '{definition}' is not one of {DEFINITIONS}")
    used: ContrastRules | SpeechEQRules = rules if rules is not None else (SpeechEQRules() if definition == SPEECHEQ else ContrastRules())
    scored: list[PairContrast] = []
    skipped: list[dict[str, str]] = []
    for a, b in pairs:
        absent = [u for u in (a, b) if u not in descriptors]
        if absent:
            skipped.append({"a": a, "b": b, "reason": f"no prosody descriptors for {', '.join(absent)} (failed or not run)"})
            continue
        scored.append(contrast_score(descriptors[a], descriptors[b], used, ids=(a, b), definition=definition))
    if skipped:
        log.warning("%d rendition pair(s) skipped for lack of descriptors", len(skipped))
    return ProsodyContrastResult(scored, float(threshold), used, skipped, definition)


def pairs_from_parents(parent_of: Mapping[str, str | None]) -> list[tuple[str, str]]:
    """(source, rendition) pairs from derived clips' ``parent_id`` (e.g. demo emotion transforms)."""
    return sorted((p, c) for c, p in parent_of.items() if p is not None and p in parent_of)
