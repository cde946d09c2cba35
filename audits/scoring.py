"""Corpus WER/CER per model and per slice, with speaker-block bootstrap intervals and gaps.

WER/CER are corpus-level: total edits over total reference words (characters) in the slice,
never a mean of per-utterance rates. Text is normalized here, at scoring time; the stored rows
keep raw text. CER counts characters of the normalized text, spaces included (as jiwer does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from rapidfuzz.distance import Levenshtein

from audits.stats import block_bootstrap_ratio, bootstrap_ratio_difference
from engine.data import RESULT_COLUMNS
from normalizers import Normalizer

# Values taken as the reference side of a gap when a slice family has them.
BASELINES: Mapping[str, str] = {
    "accent_group": "native",
    "emotion": "neutral",
    "background": "clean",
    "conversation": "single",
}
NON_SLICE_COLUMNS = frozenset(RESULT_COLUMNS) | {"derivation", "emotion_source", "text", "audio"}


@dataclass(frozen=True)
class ScoringOptions:
    n_boot: int = 1000
    seed: int = 0
    alpha: float = 0.05
    slice_columns: Sequence[str] | None = None  # None = every label column
    gaps: Sequence[tuple[str, str, str]] = ()  # (label, value_a, value_b): WER(a) - WER(b)
    min_slice_utts: int = 1


@dataclass
class ScoredRows:
    """Per-row edit counts next to the raw rows (one DataFrame, derived numbers come from it)."""

    frame: pd.DataFrame
    normalizer_name: str
    normalizer_version: str
    label_columns: list[str] = field(default_factory=list)


def score_table(rows: pd.DataFrame, normalizer: Normalizer) -> ScoredRows:
    """Add ``ref_norm``, ``hyp_norm``, ``n_words``, ``word_errors``, ``n_chars``, ``char_errors``, ``ok``."""
    df = rows.copy()
    ok = df["error"].isna() & df["hyp_raw"].notna() & df["ref_raw"].notna()
    cache: dict[str, str] = {}

    def norm(text: Any) -> str:
        if text is None or (isinstance(text, float) and math.isnan(text)):
            return ""
        s = str(text)
        if s not in cache:
            cache[s] = normalizer(s)
        return cache[s]

    ref_n = [norm(r) if o else "" for r, o in zip(df["ref_raw"], ok)]
    hyp_n = [norm(h) if o else "" for h, o in zip(df["hyp_raw"], ok)]
    nw, we, subs, dels, ins, nc, ce = [], [], [], [], [], [], []
    for r, h, o in zip(ref_n, hyp_n, ok):
        if not o:
            nw.append(0), we.append(0), subs.append(0), dels.append(0), ins.append(0), nc.append(0), ce.append(0)
            continue
        rw, hw = r.split(), h.split()
        s = d = i = 0
        for op in Levenshtein.editops(rw, hw):
            if op.tag == "replace":
                s += 1
            elif op.tag == "delete":
                d += 1
            else:
                i += 1
        nw.append(len(rw)), we.append(s + d + i), subs.append(s), dels.append(d), ins.append(i)
        nc.append(len(r)), ce.append(Levenshtein.distance(r, h))
    df["ok"] = ok.to_numpy()
    df["ref_norm"] = ref_n
    df["hyp_norm"] = hyp_n
    df["n_words"] = np.asarray(nw, dtype=np.int64)
    df["word_errors"] = np.asarray(we, dtype=np.int64)
    df["subs"] = np.asarray(subs, dtype=np.int64)
    df["dels"] = np.asarray(dels, dtype=np.int64)
    df["ins"] = np.asarray(ins, dtype=np.int64)
    df["n_chars"] = np.asarray(nc, dtype=np.int64)
    df["char_errors"] = np.asarray(ce, dtype=np.int64)
    labels = [c for c in rows.columns if c not in NON_SLICE_COLUMNS]
    return ScoredRows(df, getattr(normalizer, "name", "custom"), getattr(normalizer, "version", "unknown"), labels)


def _ratio(num: float, den: float) -> float | None:
    return float(num) / float(den) if den > 0 else None


def _clean(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)


def group_metrics(g: pd.DataFrame, opts: ScoringOptions, seed_offset: int = 0) -> dict[str, Any]:
    """All numbers of one group of rows (a model, or a model's slice)."""
    okg = g[g["ok"]]
    blocks = okg["speaker"].where(okg["speaker"].notna(), okg["utt_id"]).astype(str).to_numpy() if len(okg) else None
    n_spk = len(set(blocks)) if blocks is not None else 0
    ci_method = "speaker-block bootstrap"
    if blocks is not None and n_spk < 2 and len(okg) > 1:
        # one speaker: between-speaker variance cannot be estimated; resample utterances instead
        blocks = okg["utt_id"].astype(str).to_numpy()
        ci_method = "utterance bootstrap (single speaker)"
    n_words = int(okg["n_words"].sum())
    n_chars = int(okg["n_chars"].sum())
    we = int(okg["word_errors"].sum())
    ce = int(okg["char_errors"].sum())
    wer_ci = block_bootstrap_ratio(okg["word_errors"].to_numpy(), okg["n_words"].to_numpy(), blocks, opts.n_boot, opts.seed + seed_offset, opts.alpha) if len(okg) else (math.nan, math.nan)
    cer_ci = block_bootstrap_ratio(okg["char_errors"].to_numpy(), okg["n_chars"].to_numpy(), blocks, opts.n_boot, opts.seed + seed_offset, opts.alpha) if len(okg) else (math.nan, math.nan)
    timed = okg[okg["infer_s"].notna()] if "infer_s" in okg else okg.iloc[0:0]
    audio_s = float(okg["duration_s"].fillna(0).sum())
    infer_s = float(timed["infer_s"].sum()) if len(timed) else 0.0
    timed_audio = float(timed["duration_s"].fillna(0).sum()) if len(timed) else 0.0
    return {
        "n_utts": int(len(g)),
        "n_scored": int(len(okg)),
        "n_failed": int((~g["ok"]).sum()),
        "n_words": n_words,
        "n_chars": n_chars,
        "word_errors": we,
        "substitutions": int(okg["subs"].sum()),
        "deletions": int(okg["dels"].sum()),
        "insertions": int(okg["ins"].sum()),
        "char_errors": ce,
        "wer": _ratio(we, n_words),
        "cer": _ratio(ce, n_chars),
        "ci95": [_clean(wer_ci[0]), _clean(wer_ci[1])],
        "cer_ci95": [_clean(cer_ci[0]), _clean(cer_ci[1])],
        "n_speakers": int(n_spk),
        "ci_method": ci_method,
        "audio_s": audio_s,
        "infer_s": infer_s,
        "rtfx": _ratio(timed_audio, infer_s),
    }


def default_gaps(frame: pd.DataFrame, label_columns: Iterable[str]) -> list[tuple[str, str, str]]:
    """Every non-baseline value minus the family's baseline (e.g. noise-10db minus clean)."""
    gaps = []
    for col in label_columns:
        base = BASELINES.get(col)
        if base is None or col not in frame:
            continue
        values = sorted(v for v in frame[col].dropna().unique() if v != base)
        if base in set(frame[col].dropna().unique()):
            gaps.extend((col, v, base) for v in values)
    return gaps


def gap_metrics(g: pd.DataFrame, label: str, a: str, b: str, opts: ScoringOptions, seed: int) -> dict[str, Any]:
    ga = g[(g[label] == a) & g["ok"]]
    gb = g[(g[label] == b) & g["ok"]]
    wa = _ratio(ga["word_errors"].sum(), ga["n_words"].sum())
    wb = _ratio(gb["word_errors"].sum(), gb["n_words"].sum())
    if wa is None or wb is None:
        return {"label": label, "a": a, "b": b, "gap": None, "ci95": [None, None], "excludes_zero": False, "n_a": int(len(ga)), "n_b": int(len(gb))}

    def blocks(x: pd.DataFrame) -> np.ndarray:
        return x["speaker"].where(x["speaker"].notna(), x["utt_id"]).astype(str).to_numpy()

    lo, hi = bootstrap_ratio_difference(
        ga["word_errors"].to_numpy(), ga["n_words"].to_numpy(), blocks(ga),
        gb["word_errors"].to_numpy(), gb["n_words"].to_numpy(), blocks(gb),
        opts.n_boot, opts.seed + seed, opts.alpha,
    )
    lo_c, hi_c = _clean(lo), _clean(hi)
    return {
        "label": label,
        "a": a,
        "b": b,
        "gap": wa - wb,
        "wer_a": wa,
        "wer_b": wb,
        "ci95": [lo_c, hi_c],
        "excludes_zero": bool(lo_c is not None and hi_c is not None and (lo_c > 0 or hi_c < 0)),
        "n_a": int(len(ga)),
        "n_b": int(len(gb)),
    }


def summarize_models(scored: ScoredRows, opts: ScoringOptions = ScoringOptions()) -> dict[str, dict[str, Any]]:
    """Per model: overall metrics, ``slices`` keyed ``"<label>=<value>"``, ``gaps`` and failures."""
    df = scored.frame
    labels = list(opts.slice_columns) if opts.slice_columns is not None else scored.label_columns
    labels = [c for c in labels if c in df.columns]
    gaps = list(opts.gaps) or default_gaps(df, labels)
    out: dict[str, dict[str, Any]] = {}
    for mi, (model, g) in enumerate(sorted(df.groupby("model", sort=True), key=lambda kv: str(kv[0]))):
        m = group_metrics(g, opts, seed_offset=mi * 1000)
        failures = g.loc[~g["ok"], "error"].fillna("no hypothesis").astype(str)
        m["failures"] = {str(k): int(v) for k, v in failures.str.slice(0, 200).value_counts().items()}
        slices: dict[str, Any] = {}
        for li, col in enumerate(labels):
            for vi, (value, sg) in enumerate(sorted(g.groupby(col, dropna=True), key=lambda kv: str(kv[0]))):
                if len(sg) < opts.min_slice_utts:
                    continue
                sm = group_metrics(sg, opts, seed_offset=mi * 1000 + li * 100 + vi + 1)
                slices[f"{col}={value}"] = sm
        m["slices"] = slices
        m["gaps"] = [gap_metrics(g, lab, a, b, opts, mi * 1000 + gi) for gi, (lab, a, b) in enumerate(gaps) if lab in g.columns]
        out[str(model)] = m
    return out
