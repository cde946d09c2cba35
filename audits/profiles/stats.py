"""The numbers of a robustness profile: condition WERs, the study's gaps, paired gap tests, rank stability.

Every WER is corpus-level (edits over reference words) on clips with speech, as in
``audits.asr.scoring``; every interval resamples whole speakers (speaker-block bootstrap; a clip
without a speaker is its own block, with the clips derived from it), with the percentile method, as in
``audits.asr.stats``. Every interval and test goes through the one testability rule
(``audits.asr.stats.check_testable``): what the data cannot support is ``not_testable`` with the
reason, never a zero-width interval or a p-value.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from audits.asr.paired import _count_matrix, holm, shifted_p
from audits.asr.scoring import ScoringOptions, block_unit, correct_gaps, gap_metrics
from audits.asr.stats import (
    BlockGroup,
    Estimate,
    Interval,
    NotTestable,
    _block_codes,
    check_testable,
    estimate_fields,
    percentile_interval,
    ratio_estimates,
)
from audits.clips import block_keys

GAP_PAIR_METHOD = (
    "gap(A) - gap(B) on the clips both models scored; speakers of each side of the gap resampled once for both models "
    "(paired speaker-block bootstrap); shifted-null two-sided p; Holm across every gap and pair"
)
TAU_METHOD = "Kendall's tau-b between the overall WER ranking and the condition's WER ranking; speaker-block bootstrap percentile interval"


def _f(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def speech_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Scored rows that count towards WER: decoded, with a reference that has words."""
    keep = frame["ok"] & ~frame["speech_free"] if "speech_free" in frame else frame["ok"] & (frame["n_words"] > 0)
    return frame[keep]


def blocks_of(rows: pd.DataFrame) -> np.ndarray:
    """Speaker of each row, or its source clip where the speaker is unknown (a derived clip is in its source's block)."""
    return block_keys(rows)


def wer_with_interval(rows: pd.DataFrame, n_boot: int, seed: int, alpha: float = 0.05, name: str = "the group") -> dict[str, Any]:
    """Corpus WER of speech rows with its speaker-block bootstrap interval (or why it is not testable)."""
    words = float(rows["n_words"].sum())
    if words <= 0:
        return {
            "wer": None,
            "ci95": None,
            "not_testable": f"no scored clip with reference words in {name}",
            "n_utts": len(rows),
            "n_words": 0,
            "n_speakers": 0,
        }
    b = blocks_of(rows)
    (est,) = ratio_estimates(
        [(rows["word_errors"].to_numpy(), rows["n_words"].to_numpy())], b, name, n_boot, seed, alpha, ("WER",), block_unit(rows)
    )
    return {
        "wer": float(rows["word_errors"].sum()) / words,
        **estimate_fields(est),
        "n_utts": len(rows),
        "n_words": int(words),
        "n_speakers": len(set(b)),
    }


def conditions_present(frame: pd.DataFrame, columns: Sequence[str]) -> list[tuple[str, str]]:
    """(column, value) of every condition with speech rows, in column order then value order."""
    rows = speech_rows(frame)
    out: list[tuple[str, str]] = []
    for col in columns:
        if col in rows:
            out.extend((col, str(v)) for v in sorted(rows[col].dropna().astype(str).unique()))
    return out


def profiles(frame: pd.DataFrame, conditions: Sequence[tuple[str, str]], n_boot: int, seed: int, alpha: float) -> dict[str, Any]:
    """Per model: overall WER and the WER of every condition, each with its interval."""
    rows = speech_rows(frame)
    out: dict[str, Any] = {}
    for mi, (model, g) in enumerate(sorted(rows.groupby("model"), key=lambda kv: str(kv[0]))):
        per: dict[str, Any] = {}
        for ci, (col, val) in enumerate(conditions):
            sub = g[g[col].astype(str) == val] if col in g else g.iloc[0:0]
            per[f"{col}={val}"] = wer_with_interval(sub, n_boot, seed + mi * 1000 + ci + 1, alpha, f"{col}={val}")
        out[str(model)] = {"overall": wer_with_interval(g, n_boot, seed + mi * 1000, alpha, f"{model}'s clips"), "conditions": per}
    return out


def gap_table(
    frame: pd.DataFrame, gaps: Sequence[tuple[str, str, str]], n_boot: int, seed: int, alpha: float
) -> dict[str, list[dict[str, Any]]]:
    """Per model, each gap WER(a) - WER(b) with its interval and p; Holm across every gap of every model."""
    opts = ScoringOptions(n_boot=n_boot, seed=seed, alpha=alpha)
    per_model: dict[str, dict[str, Any]] = {}
    for mi, (model, g) in enumerate(sorted(frame.groupby("model"), key=lambda kv: str(kv[0]))):
        found = []
        for gi, (col, a, b) in enumerate(gaps):
            if col not in g:
                continue
            gg = g.assign(**{col: g[col].astype("string")})
            found.append(gap_metrics(gg, col, a, b, opts, mi * 1000 + gi))
        per_model[str(model)] = {"gaps": found}
    correct_gaps(per_model, alpha)
    return {m: v["gaps"] for m, v in per_model.items()}


def _group_matrix(rows: pd.DataFrame, models: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(errors[m, u], scored[m, u], words[u], block codes[u]) of the clips in ``rows``."""
    utts = np.sort(rows["utt_id"].astype(str).unique())
    ui = np.searchsorted(utts, rows["utt_id"].astype(str).to_numpy())
    mi = np.searchsorted(np.asarray(models), rows["model"].astype(str).to_numpy())
    err = np.zeros((len(models), len(utts)))
    ok = np.zeros((len(models), len(utts)), dtype=bool)
    err[mi, ui] = rows["word_errors"].to_numpy(dtype=np.float64)
    ok[mi, ui] = True
    words = np.zeros(len(utts))
    words[ui] = rows["n_words"].to_numpy(dtype=np.float64)
    blk = pd.Series(blocks_of(rows), index=ui).groupby(level=0).first().reindex(range(len(utts))).astype(str).to_numpy()
    return err, ok, words, _block_codes(blk, len(utts))


def paired_gap_tests(frame: pd.DataFrame, gaps: Sequence[tuple[str, str, str]], n_boot: int, seed: int, alpha: float) -> dict[str, Any]:
    """Is model A's gap smaller than model B's? Every pair of models, every gap, Holm-corrected.

    On the clips both models scored, ``diff`` = gap(A) - gap(B); negative means A's gap is smaller.
    One count matrix per side of the gap (different speakers) serves every pair, so A and B are
    judged on the same resampled speakers.
    """
    rows = speech_rows(frame)
    models = sorted(str(m) for m in rows["model"].unique())
    out: dict[str, Any] = {"method": GAP_PAIR_METHOD, "correction": "holm", "alpha": alpha, "n_boot": n_boot, "pairs": []}
    if len(models) < 2:
        return out
    found: list[dict[str, Any]] = []
    for gi, (col, a, b) in enumerate(gaps):
        if col not in rows:
            continue
        sides = []
        for si, val in enumerate((a, b)):
            sub = rows[rows[col].astype("string") == val]
            if sub.empty:
                break
            err, ok, words, codes = _group_matrix(sub, models)
            counts = _count_matrix(int(codes.max()) + 1, n_boot, seed + 7919 * (gi + 1) + si)
            sides.append((err, ok, words, codes, counts, block_unit(sub)))
        if len(sides) < 2:
            continue
        for ia, ib in itertools.combinations(range(len(models)), 2):
            reps = np.zeros(n_boot)
            point = 0.0
            groups: list[BlockGroup] = []
            no_words = ""
            for sign, val, (err, ok, words, codes, counts, unit) in zip((1.0, -1.0), (a, b), sides):
                shared = ok[ia] & ok[ib]
                w = words[shared].sum()
                if w <= 0:
                    no_words = f"no clip of {col}={val} with reference words that both models scored"
                    break
                nb = counts.shape[1]
                d = np.bincount(codes[shared], err[ia, shared] - err[ib, shared], nb)
                wd = np.bincount(codes[shared], words[shared], nb)
                groups.append(BlockGroup(f"{col}={val}", d, wd, unit))
                with np.errstate(invalid="ignore", divide="ignore"):
                    reps += sign * (counts @ d) / (counts @ wd)
                point += sign * (err[ia, shared].sum() - err[ib, shared].sum()) / w
            entry: dict[str, Any] = {
                "gap": f"{col}: {a} − {b}",
                "label": col,
                "a_value": a,
                "b_value": b,
                "model_a": models[ia],
                "model_b": models[ib],
            }
            est: Estimate = (
                NotTestable(no_words)
                if no_words
                else (
                    check_testable(groups, "WER difference of the two models") or percentile_interval(reps, alpha, "difference of the gaps")
                )
            )
            if isinstance(est, Interval):
                entry.update(diff=float(point), ci95=est.as_list(), p_value=shifted_p(reps[np.isfinite(reps)], point))
                found.append(entry)
            else:
                entry.update(diff=None if no_words else float(point), ci95=None, p_value=None, not_testable=est.reason)
            out["pairs"].append(entry)
    adjusted = holm([e["p_value"] for e in found])
    for e, p in zip(found, adjusted):
        e["p_holm"] = float(p)
        e["smaller_gap"] = (e["model_a"] if e["diff"] < 0 else e["model_b"]) if p < alpha and e["diff"] != 0 else None
    for e in out["pairs"]:
        e.setdefault("p_holm", None)
        e.setdefault("smaller_gap", None)
    return out


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of each row of ``x`` against the same row of ``y`` ((B, n) arrays; NaN when undefined)."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    iu = np.triu_indices(x.shape[1], 1)
    dx = np.sign(x[:, :, None] - x[:, None, :])[:, iu[0], iu[1]]
    dy = np.sign(y[:, :, None] - y[:, None, :])[:, iu[0], iu[1]]
    num = (dx * dy).sum(axis=1)
    den = np.sqrt((dx != 0).sum(axis=1) * (dy != 0).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = num / den
    bad = ~np.isfinite(x).all(axis=1) | ~np.isfinite(y).all(axis=1) | (den == 0)
    tau[bad] = np.nan
    return tau


def ranks(values: Mapping[str, float]) -> dict[str, float]:
    """Rank of each model by WER (1 = lowest), ties sharing their mean rank."""
    order = sorted(values.values())
    return {m: 1 + (order.index(v) + len(order) - 1 - order[::-1].index(v)) / 2 for m, v in values.items()}


def rank_stability(frame: pd.DataFrame, conditions: Sequence[tuple[str, str]], n_boot: int, seed: int, alpha: float) -> dict[str, Any]:
    """Kendall's tau between the overall ranking and each condition's, with intervals, and the rank movers.

    One speaker-level count matrix over every speaker drives the overall and every condition's
    WER in each replicate, so a replicate's two rankings come from the same resampled speakers.
    """
    rows = speech_rows(frame)
    models = sorted(str(m) for m in rows["model"].unique())
    out: dict[str, Any] = {"method": TAU_METHOD, "n_models": len(models), "n_boot": n_boot, "conditions": {}, "movers": []}
    if len(models) < 2:
        return out
    blk = blocks_of(rows)
    names, codes = np.unique(blk, return_inverse=True)
    nb = len(names)
    mi = np.searchsorted(np.asarray(models), rows["model"].astype(str).to_numpy())
    counts = _count_matrix(nb, n_boot, seed + 104729)
    unit = block_unit(rows)

    def sums(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        e = np.zeros((len(models), nb))
        w = np.zeros((len(models), nb))
        np.add.at(e, (mi[mask], codes[mask]), rows["word_errors"].to_numpy(dtype=np.float64)[mask])
        np.add.at(w, (mi[mask], codes[mask]), rows["n_words"].to_numpy(dtype=np.float64)[mask])
        return e, w

    def wers(e: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with np.errstate(invalid="ignore", divide="ignore"):
            point = e.sum(axis=1) / w.sum(axis=1)
            reps = (counts @ e.T) / (counts @ w.T)
        return point, reps

    all_point, all_reps = wers(*sums(np.ones(len(rows), dtype=bool)))
    overall = dict(zip(models, all_point.tolist()))
    overall_rank = ranks(overall)
    out["overall_rank"] = overall_rank
    shifts: dict[str, list[tuple[float, str]]] = {m: [] for m in models}
    for col, val in conditions:
        mask = (rows[col].astype("string") == val).fillna(False).to_numpy(dtype=bool) if col in rows else np.zeros(len(rows), dtype=bool)
        e, w = sums(mask)
        point, reps = wers(e, w)
        have = np.isfinite(point)
        key = f"{col}={val}"
        entry: dict[str, Any] = {"n_models": int(have.sum()), "tau": None, "ci95": None, "ranks": {}, "rank_shift": {}}
        if have.sum() < 2:
            entry["not_testable"] = f"{int(have.sum())} model(s) with a WER in {key}; Kendall's tau compares at least 2"
        else:
            tau = float(kendall_tau_b(all_point[have], point[have])[0])
            cond_rank = ranks({m: float(p) for m, p, h in zip(models, point, have) if h})
            sub_overall = ranks({m: overall[m] for m, h in zip(models, have) if h})
            entry.update(tau=_f(tau), ranks=cond_rank, rank_shift={m: cond_rank[m] - sub_overall[m] for m in cond_rank})
            # the rule: at least two speakers in the condition, WERs that vary between them; tau defined
            verdict = check_testable([BlockGroup(key, e[i], w[i], unit) for i in np.flatnonzero(have)])
            if verdict is None and _f(tau) is None:
                verdict = NotTestable(f"Kendall's tau is undefined in {key}: every model has the same WER there, or overall")
            if verdict is not None:
                entry["not_testable"] = verdict.reason
            else:
                taus = kendall_tau_b(all_reps[:, have], reps[:, have])
                taus = taus[np.isfinite(taus)]
                if taus.size:
                    # tau takes few values: an interval at one value is a result (>= 95 % of resamples agree), not a degeneracy
                    lo, hi = np.quantile(taus, [alpha / 2, 1 - alpha / 2])
                    entry["ci95"] = [float(lo), float(hi)]
                else:
                    entry["not_testable"] = f"no bootstrap replicate of Kendall's tau could be computed in {key}"
                entry["n_replicates"] = int(taus.size)
            for m, s in entry["rank_shift"].items():
                shifts[m].append((s, key))
        out["conditions"][key] = entry
    movers = []
    for m, lst in shifts.items():
        if lst:
            s, key = max(lst, key=lambda t: (abs(t[0]), t[1]))
            movers.append({"model": m, "max_shift": s, "condition": key, "mean_abs_shift": float(np.mean([abs(x) for x, _ in lst]))})
    out["movers"] = sorted(movers, key=lambda d: (-abs(d["max_shift"]), -d["mean_abs_shift"], d["model"]))
    return out
