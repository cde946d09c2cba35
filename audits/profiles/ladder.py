"""WER along a ladder of one condition's levels (SNR in dB, RT60 in s, bitrate ...): slope and breaking point.

The ladder is a label column whose values are a baseline (e.g. ``clean``) and levels with a
number each (e.g. ``noise-20db: 20``). Per model:

* WER of the baseline and of every level, with speaker-block bootstrap intervals;
* ``slope``: the least-squares slope of WER against the level's number (WER points per unit,
  e.g. per dB; for an SNR ladder it is negative when WER rises as SNR falls);
* ``breaking_point``: the first level, from the mildest to the harshest, whose WER exceeds the
  baseline WER by more than ``margin`` (absolute WER, 0.05 = 5 points); its interval is the
  percentile interval of the breaking level over the bootstrap replicates (a replicate that never
  breaks counts as beyond the harshest level, shown as null).

Every interval goes through the one testability rule (``audits.asr.stats.check_testable``): a
level with fewer than two speakers, or levels whose WER is the same in every speaker, make the
slope's and the breaking point's intervals ``null`` with ``slope_not_testable`` /
``breaking_not_testable`` saying why. The breaking point takes few values, so an interval at one
level (``[10, 10]``) is a result (at least 95 % of the resamples break there), not a degeneracy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from audits.asr.paired import _count_matrix
from audits.asr.scoring import block_unit
from audits.asr.stats import BlockGroup, Interval, check_testable, percentile_interval
from audits.profiles.stats import blocks_of, speech_rows, wer_with_interval


@dataclass(frozen=True)
class LadderSpec:
    """One ladder: ``column``'s ``baseline`` value and ``levels`` as (value, number), mildest first."""

    column: str
    baseline: str
    levels: tuple[tuple[str, float], ...]
    unit: str = ""
    name: str = ""


def _f(x: Any) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def slope(x: Sequence[float], y: np.ndarray) -> np.ndarray:
    """Least-squares slope of each row of ``y`` ((B, n) or (n,)) on ``x``; NaN where a row has NaN."""
    xa = np.asarray(x, dtype=np.float64)
    xc = xa - xa.mean()
    den = float((xc**2).sum())
    ya = np.atleast_2d(np.asarray(y, dtype=np.float64))
    if den == 0:
        return np.full(ya.shape[0], np.nan)
    return ((ya - ya.mean(axis=1, keepdims=True)) * xc).sum(axis=1) / den


def breaking_index(base: np.ndarray, levels: np.ndarray, margin: float) -> np.ndarray:
    """Index of the first level whose WER exceeds ``base`` by more than ``margin`` (n_levels when none)."""
    lv = np.atleast_2d(levels)
    over = np.nan_to_num(lv - np.atleast_1d(base)[:, None], nan=-np.inf) > margin
    return np.where(over.any(axis=1), over.argmax(axis=1), lv.shape[1])


def ladder_for_model(g: pd.DataFrame, spec: LadderSpec, margin: float, n_boot: int, seed: int, alpha: float) -> dict[str, Any]:
    """The ladder of one model's scored rows ``g``."""
    rows = speech_rows(g)
    col = rows[spec.column].astype("string") if spec.column in rows else pd.Series(pd.NA, index=rows.index, dtype="string")
    values = [spec.baseline] + [v for v, _ in spec.levels]
    per = {
        v: wer_with_interval(rows[(col == v).fillna(False)], n_boot, seed + i + 1, alpha, f"{spec.column}={v}")
        for i, v in enumerate(values)
    }
    out: dict[str, Any] = {
        "baseline": {"value": spec.baseline, **per[spec.baseline]},
        "levels": [{"value": v, "level": x, **per[v]} for v, x in spec.levels],
    }
    sub = rows[col.isin(values).fillna(False)]
    base_wer = per[spec.baseline]["wer"]
    level_wers = np.array([np.nan if per[v]["wer"] is None else per[v]["wer"] for v, _ in spec.levels])
    xs = [x for _, x in spec.levels]
    out["slope"] = _f(slope(xs, level_wers)[0]) if len(xs) >= 2 else None
    out["slope_ci95"] = None
    out["breaking_point"] = None
    out["breaking_ci95"] = None
    if len(xs) < 2:
        out["slope_not_testable"] = f"{len(xs)} level(s); a slope needs at least 2"
    if base_wer is None or sub.empty:
        out["breaking_not_testable"] = (
            f"no scored clip with reference words in {spec.column}={spec.baseline}" if base_wer is None else "no scored clip on the ladder"
        )
        out.setdefault("slope_not_testable", out["breaking_not_testable"])
        return out
    idx = int(breaking_index(np.array([base_wer]), level_wers[None, :], margin)[0])
    out["breaking_point"] = spec.levels[idx][1] if idx < len(spec.levels) else None
    out["breaking_value"] = spec.levels[idx][0] if idx < len(spec.levels) else None
    # replicates: one speaker-block count matrix for the baseline and every level
    names, codes = np.unique(blocks_of(sub), return_inverse=True)
    counts = _count_matrix(len(names), n_boot, seed + 15485863)
    subcol = sub[spec.column].astype("string").to_numpy()
    unit = block_unit(sub)

    def group(v: str) -> BlockGroup:
        m = subcol == v
        e = np.bincount(codes[m], sub["word_errors"].to_numpy(dtype=np.float64)[m], len(names))
        w = np.bincount(codes[m], sub["n_words"].to_numpy(dtype=np.float64)[m], len(names))
        return BlockGroup(f"{spec.column}={v}", e, w, unit)

    def reps(g: BlockGroup) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray((counts @ g.numer) / (counts @ g.denom))

    base_g = group(spec.baseline)
    level_g = [group(v) for v, _ in spec.levels]
    base_r = reps(base_g)
    lv_r = np.stack([reps(g) for g in level_g], axis=1)
    if len(xs) >= 2:
        verdict = check_testable(level_g)
        est = verdict if verdict is not None else percentile_interval(slope(xs, lv_r), alpha, "slope")
        if isinstance(est, Interval):
            out["slope_ci95"] = est.as_list()
        else:
            out["slope_not_testable"] = est.reason
    verdict = check_testable([base_g, *level_g])
    if verdict is not None:
        out["breaking_not_testable"] = verdict.reason
        return out
    ok = np.isfinite(base_r)
    bi = breaking_index(base_r[ok], lv_r[ok], margin)
    if bi.size:
        lo_i, hi_i = np.quantile(bi, [alpha / 2, 1 - alpha / 2], method="inverted_cdf")
        out["breaking_ci95"] = [spec.levels[int(i)][1] if int(i) < len(spec.levels) else None for i in (lo_i, hi_i)]
        out["breaking_share"] = float(np.mean(bi < len(spec.levels)))  # replicates that break inside the ladder
    else:
        out["breaking_not_testable"] = f"no bootstrap replicate with reference words in {spec.column}={spec.baseline}"
    return out


def ladders(frame: pd.DataFrame, specs: Sequence[LadderSpec], margin: float, n_boot: int, seed: int, alpha: float) -> list[dict[str, Any]]:
    """Every ladder for every model: ``[{name, column, unit, margin, models: {model: ...}}]``."""
    out = []
    for li, spec in enumerate(specs):
        models = {}
        for mi, (m, g) in enumerate(sorted(frame.groupby("model"), key=lambda kv: str(kv[0]))):
            models[str(m)] = ladder_for_model(g, spec, margin, n_boot, seed + 100_000 * (li + 1) + 1000 * mi, alpha)
        out.append(
            {
                "name": spec.name or spec.column,
                "column": spec.column,
                "baseline": spec.baseline,
                "unit": spec.unit,
                "levels": [{"value": v, "level": x} for v, x in spec.levels],
                "margin": margin,
                "models": models,
            }
        )
    return out
