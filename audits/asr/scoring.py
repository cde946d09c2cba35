"""Corpus WER/CER per model and per slice, with speaker-block bootstrap intervals and gaps.

WER/CER are corpus-level: total edits over total reference words (characters) in the slice,
never a mean of per-utterance rates. Text is normalized here, at scoring time; the stored rows
keep raw text. CER counts characters of the normalized text, spaces included (as jiwer does).
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from rapidfuzz.distance import Levenshtein

from audits.asr.hallucination import add_row_flags, hallucination_metrics, speech_free_labels
from audits.asr.paired import holm, shifted_p
from audits.asr.stats import (
    BlockGroup,
    Estimate,
    Interval,
    NotTestable,
    check_testable,
    estimate_fields,
    percentile_interval,
    ratio_difference_replicates,
    ratio_estimates,
)
from engine.data import CONFIDENCE_COLUMNS, RESULT_COLUMNS, SPEECH_FREE_LABEL, SPEECH_FREE_VALUE
from normalizers import Normalizer, fast_normalizer

log = logging.getLogger(__name__)

# Values taken as the reference side of a gap when a slice family has them.
BASELINES: Mapping[str, str] = {
    "accent_group": "native",
    "emotion": "neutral",
    "background": "clean",
    "conversation": "single",
}
NON_SLICE_COLUMNS = frozenset(RESULT_COLUMNS) | frozenset(CONFIDENCE_COLUMNS) | {"derivation", "emotion_source", "text", "audio"}


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


_POOL_NORMALIZER: Callable[[str], str] | None = None


def _normalize_chunk(texts: list[str]) -> list[str]:
    if _POOL_NORMALIZER is None:
        raise RuntimeError("normalizer pool worker started without a normalizer")
    return [_POOL_NORMALIZER(t) for t in texts]


def _scoring_workers(n_texts: int, workers: int | None) -> int:
    if workers is not None:
        return max(1, int(workers))
    env = os.environ.get("AUDIT_SCORING_WORKERS")
    if env:
        return max(1, int(env))
    if n_texts < 20_000 or not sys.platform.startswith("linux"):
        return 1  # a pool costs more than it saves on small tables
    return max(1, min(4, os.cpu_count() or 1))


def normalize_unique(texts: Iterable[str], normalizer: Normalizer, workers: int | None = None) -> dict[str, str]:
    """Normalize each distinct string once (references repeat across models), in parallel when many.

    ``workers``: processes (None = automatic: all cores up to 4 when there are >= 20,000 distinct
    strings; env ``AUDIT_SCORING_WORKERS`` overrides). Output never depends on the worker count.
    """
    global _POOL_NORMALIZER
    unique = list(dict.fromkeys(texts))
    fn = fast_normalizer(normalizer)
    n_workers = _scoring_workers(len(unique), workers)
    if n_workers <= 1 or len(unique) < 2 * n_workers:
        return {t: fn(t) for t in unique}
    import multiprocessing as mp

    _POOL_NORMALIZER = fn
    step = max(1, -(-len(unique) // (n_workers * 8)))
    chunks = [unique[i : i + step] for i in range(0, len(unique), step)]
    try:
        with mp.get_context("fork").Pool(n_workers) as pool:
            results = pool.map(_normalize_chunk, chunks)
    finally:
        _POOL_NORMALIZER = None
    return {t: n for chunk, out in zip(chunks, results) for t, n in zip(chunk, out)}


def score_table(rows: pd.DataFrame, normalizer: Normalizer, workers: int | None = None) -> ScoredRows:
    """Add ``ref_norm``, ``hyp_norm``, ``n_words``, ``word_errors``, ``n_chars``, ``char_errors``, ``ok``.

    ``workers``: processes for normalization (see ``normalize_unique``).
    """
    df = rows.copy()
    ok = df["error"].isna() & df["hyp_raw"].notna() & df["ref_raw"].notna()
    ok_list = ok.tolist()

    def text(value: Any) -> str | None:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        return str(value)

    refs = [text(r) if o else None for r, o in zip(df["ref_raw"].tolist(), ok_list)]
    hyps = [text(h) if o else None for h, o in zip(df["hyp_raw"].tolist(), ok_list)]
    cache = normalize_unique((t for t in refs + hyps if t is not None), normalizer, workers)
    ref_n = ["" if r is None else cache[r] for r in refs]
    hyp_n = ["" if h is None else cache[h] for h in hyps]
    n = len(ref_n)
    nw = np.zeros(n, dtype=np.int64)
    subs = np.zeros(n, dtype=np.int64)
    dels = np.zeros(n, dtype=np.int64)
    ins = np.zeros(n, dtype=np.int64)
    nc = np.zeros(n, dtype=np.int64)
    ce = np.zeros(n, dtype=np.int64)
    editops = Levenshtein.editops
    distance = Levenshtein.distance
    for k, (r, h, o) in enumerate(zip(ref_n, hyp_n, ok_list)):
        if not o:
            continue
        rw, hw = r.split(), h.split()
        nw[k] = len(rw)
        nc[k] = len(r)
        if r == h:
            continue  # identical normalized text: no word or character edits
        s = d = i = 0
        for op in editops(rw, hw):
            tag = op.tag
            if tag == "replace":
                s += 1
            elif tag == "delete":
                d += 1
            else:
                i += 1
        subs[k], dels[k], ins[k] = s, d, i
        ce[k] = distance(r, h)
    # The explicit content label decides whether a clip is speech-free, never the reference
    # (engine.data.is_speech_free). A clip said to hold speech whose reference normalizes to
    # nothing ("uh" under whisper-english) cannot be scored: every word of its hypothesis would
    # count as a hallucination. A clip labelled speech-free whose reference has words (a
    # predictions file, rows edited after the run) cannot be either. Each becomes a failed row saying why.
    labelled_free = speech_free_labels(df)
    ok_arr = ok.to_numpy(dtype=bool)
    empty_speech = ok_arr & (nw == 0) & ~labelled_free
    worded_free = ok_arr & (nw > 0) & labelled_free
    if empty_speech.any() or worded_free.any():
        errors = df["error"].astype(object).to_numpy(copy=True)
        # one message for every such row (the row keeps its reference), so failure counts group them
        errors[empty_speech] = (
            f"reference normalizes to no words; fix it, or give it '{SPEECH_FREE_LABEL}: {SPEECH_FREE_VALUE}' and an empty reference"
        )
        errors[worded_free] = (
            f"labelled '{SPEECH_FREE_LABEL}: {SPEECH_FREE_VALUE}' but its reference has words; empty the reference, or label the clip "
            "as speech"
        )
        df["error"] = errors
        bad = empty_speech | worded_free
        ok_arr = ok_arr & ~bad
        for arr in (subs, dels, ins, ce, nc, nw):
            arr[bad] = 0
    df["ok"] = ok_arr
    df["ref_norm"] = ref_n
    df["hyp_norm"] = hyp_n
    df["n_words"] = nw
    df["word_errors"] = subs + dels + ins
    df["subs"] = subs
    df["dels"] = dels
    df["ins"] = ins
    df["n_chars"] = nc
    df["char_errors"] = ce
    add_row_flags(df, labelled_free)  # speech_free, hyp_words, loop, length_outlier (audits/asr/hallucination.py)
    labels = [c for c in rows.columns if c not in NON_SLICE_COLUMNS]
    return ScoredRows(df, getattr(normalizer, "name", "custom"), getattr(normalizer, "version", "unknown"), labels)


def _ratio(num: float, den: float) -> float | None:
    return float(num) / float(den) if den > 0 else None


def _clean(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)


def block_unit(rows: pd.DataFrame) -> str:
    """What a resampling block of ``rows`` is in messages: ``speaker``, or ``clip`` when no row has a speaker."""
    return "speaker" if "speaker" in rows and rows["speaker"].notna().any() else "clip"


def speaker_blocks(rows: pd.DataFrame) -> np.ndarray:
    """The resampling block of each row: its speaker, or its own clip where the speaker is unknown."""
    return rows["speaker"].where(rows["speaker"].notna(), rows["utt_id"]).astype(str).to_numpy()


def group_metrics(g: pd.DataFrame, opts: ScoringOptions, seed_offset: int = 0, name: str = "the model's clips") -> dict[str, Any]:
    """All numbers of one group of rows (a model, or a model's slice ``name``).

    Speech-free clips (empty normalized reference) are left out of WER and CER and scored apart
    in ``hallucination`` (their edits have no reference words to divide by). The intervals go
    through the testability rule (``audits.asr.stats.check_testable``): a group with fewer than
    two speakers, or with the same rate in every speaker, gets ``ci95: null`` and ``not_testable``.
    """
    okg = g[g["ok"] & ~g["speech_free"]]
    blocks = speaker_blocks(okg) if len(okg) else None
    n_spk = len(set(blocks)) if blocks is not None else 0
    ci_method = f"{block_unit(okg)}-block bootstrap"
    n_words = int(okg["n_words"].sum())
    n_chars = int(okg["n_chars"].sum())
    we = int(okg["word_errors"].sum())
    ce = int(okg["char_errors"].sum())
    wer_est: Estimate
    cer_est: Estimate
    if len(okg):
        # one set of speaker draws serves WER and CER (same seed: same intervals as two calls)
        wer_est, cer_est = ratio_estimates(
            [(okg["word_errors"].to_numpy(), okg["n_words"].to_numpy()), (okg["char_errors"].to_numpy(), okg["n_chars"].to_numpy())],
            blocks,
            name,
            opts.n_boot,
            opts.seed + seed_offset,
            opts.alpha,
            unit=block_unit(okg),
        )
    else:
        wer_est = cer_est = NotTestable(f"no scored clip with speech in {name}")
    okall = g[g["ok"]]  # speed counts every scored clip, speech-free ones included
    timed = okall[okall["infer_s"].notna()] if "infer_s" in okall else okall.iloc[0:0]
    audio_s = float(okall["duration_s"].fillna(0).sum())
    infer_s = float(timed["infer_s"].sum()) if len(timed) else 0.0
    timed_audio = float(timed["duration_s"].fillna(0).sum()) if len(timed) else 0.0
    return {
        "n_utts": len(g),
        "n_scored": len(okall),
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
        **estimate_fields(wer_est),
        **estimate_fields(cer_est, "cer_ci95", "cer_not_testable"),
        "exact_match_rate": _ratio(int((okg["word_errors"] == 0).sum()), len(okg)),  # utterances with no word error
        "n_speakers": int(n_spk),
        "ci_method": ci_method,
        "audio_s": audio_s,
        "infer_s": infer_s,
        "rtfx": _ratio(timed_audio, infer_s),
        "hallucination": hallucination_metrics(g),
    }


def default_gaps(frame: pd.DataFrame, label_columns: Iterable[str]) -> list[tuple[str, str, str]]:
    """Every non-baseline value minus the family's baseline (e.g. noise-10db minus clean)."""
    gaps: list[tuple[str, str, str]] = []
    for col in label_columns:
        base = BASELINES.get(col)
        if base is None or col not in frame:
            continue
        values = sorted(v for v in frame[col].dropna().unique() if v != base)
        if base in set(frame[col].dropna().unique()):
            gaps.extend((col, v, base) for v in values)
    return gaps


def gap_metrics(g: pd.DataFrame, label: str, a: str, b: str, opts: ScoringOptions, seed: int) -> dict[str, Any]:
    """WER(a) - WER(b) of one model's rows, with its interval and shifted-null p through the testability rule.

    Each side's speaker blocks are resampled on their own; a side with fewer than two speakers,
    or both sides with the same WER in every speaker, make the gap not testable: ``ci95``,
    ``p_value`` and ``significant`` are null and ``not_testable`` says why.
    """
    ga = g[(g[label] == a) & g["ok"] & ~g["speech_free"]]
    gb = g[(g[label] == b) & g["ok"] & ~g["speech_free"]]
    wa = _ratio(ga["word_errors"].sum(), ga["n_words"].sum())
    wb = _ratio(gb["word_errors"].sum(), gb["n_words"].sum())
    base = {"label": label, "a": a, "b": b}
    if wa is None or wb is None:
        missing = a if wa is None else b
        return {
            **base,
            "gap": None,
            "ci95": None,
            "excludes_zero": None,
            "p_value": None,
            "n_a": len(ga),
            "n_b": len(gb),
            "not_testable": f"no scored clip with reference words in {label}={missing}",
        }
    ba, bb = speaker_blocks(ga), speaker_blocks(gb)
    verdict = check_testable(
        [
            BlockGroup.of(f"{label}={a}", ga["word_errors"].to_numpy(), ga["n_words"].to_numpy(), ba, block_unit(ga)),
            BlockGroup.of(f"{label}={b}", gb["word_errors"].to_numpy(), gb["n_words"].to_numpy(), bb, block_unit(gb)),
        ]
    )
    est: Estimate = verdict if verdict is not None else NotTestable("")
    p_value: float | None = None
    if verdict is None:
        reps = ratio_difference_replicates(
            ga["word_errors"].to_numpy(),
            ga["n_words"].to_numpy(),
            ba,
            gb["word_errors"].to_numpy(),
            gb["n_words"].to_numpy(),
            bb,
            opts.n_boot,
            opts.seed + seed,
        )
        est = percentile_interval(reps, opts.alpha, "gap")
        if isinstance(est, Interval):
            p_value = _clean(shifted_p(reps, wa - wb))
    fields = estimate_fields(est)
    return {
        **base,
        "gap": wa - wb,
        "wer_a": wa,
        "wer_b": wb,
        **fields,
        "excludes_zero": bool(est.lo > 0 or est.hi < 0) if isinstance(est, Interval) else None,
        "p_value": p_value,
        "n_a": len(ga),
        "n_b": len(gb),
    }


def _model_metrics(
    g: pd.DataFrame, mi: int, labels: Sequence[str], gaps: Sequence[tuple[str, str, str]], opts: ScoringOptions
) -> dict[str, Any]:
    """Everything ``summarize_models`` reports for one model (``mi``: its index, which seeds it)."""
    m = group_metrics(g, opts, seed_offset=mi * 1000, name=f"{g['model'].iloc[0]}'s clips" if len(g) else "the model's clips")
    failures = g.loc[~g["ok"], "error"].fillna("no hypothesis").astype(str)
    m["failures"] = {str(k): int(v) for k, v in failures.str.slice(0, 200).value_counts().items()}
    slices: dict[str, Any] = {}
    for li, col in enumerate(labels):
        for vi, (value, sg) in enumerate(sorted(g.groupby(col, dropna=True), key=lambda kv: str(kv[0]))):
            if len(sg) < opts.min_slice_utts:
                continue
            sm = group_metrics(sg, opts, seed_offset=mi * 1000 + li * 100 + vi + 1, name=f"{col}={value}")
            slices[f"{col}={value}"] = sm
    m["slices"] = slices
    m["gaps"] = [gap_metrics(g, lab, a, b, opts, mi * 1000 + gi) for gi, (lab, a, b) in enumerate(gaps) if lab in g.columns]
    return m


_POOL_GROUPS: list[pd.DataFrame] | None = None
_POOL_ARGS: tuple[Sequence[str], Sequence[tuple[str, str, str]], ScoringOptions] | None = None


def _pool_model_metrics(mi: int) -> dict[str, Any]:
    if _POOL_GROUPS is None or _POOL_ARGS is None:
        raise RuntimeError("scoring pool worker started without its data")
    return _model_metrics(_POOL_GROUPS[mi], mi, *_POOL_ARGS)


def summarize_models(scored: ScoredRows, opts: ScoringOptions = ScoringOptions(), workers: int | None = None) -> dict[str, dict[str, Any]]:
    """Per model: overall metrics, ``slices`` keyed ``"<label>=<value>"``, ``gaps`` and failures.

    ``workers``: processes, one model at a time each (None = automatic: all cores up to 4 when
    there are several models and >= 20,000 rows; env ``AUDIT_SCORING_WORKERS`` overrides).
    Each model's numbers depend only on its sorted position, never on the worker count.
    """
    global _POOL_GROUPS, _POOL_ARGS
    df = scored.frame
    labels = list(opts.slice_columns) if opts.slice_columns is not None else scored.label_columns
    labels = [c for c in labels if c in df.columns]
    gaps = list(opts.gaps) or default_gaps(df, labels)
    groups = sorted(df.groupby("model", sort=True), key=lambda kv: str(kv[0]))
    n_workers = min(_scoring_workers(len(df), workers), len(groups))
    if n_workers <= 1:
        return correct_gaps({str(model): _model_metrics(g, mi, labels, gaps, opts) for mi, (model, g) in enumerate(groups)}, opts.alpha)
    import multiprocessing as mp

    _POOL_GROUPS = [g for _, g in groups]
    _POOL_ARGS = (labels, gaps, opts)
    try:
        with mp.get_context("fork").Pool(n_workers) as pool:
            results = pool.map(_pool_model_metrics, range(len(groups)), chunksize=1)
    finally:
        _POOL_GROUPS = _POOL_ARGS = None
    return correct_gaps({str(model): m for (model, _), m in zip(groups, results)}, opts.alpha)


def correct_gaps(per_model: dict[str, dict[str, Any]], alpha: float) -> dict[str, dict[str, Any]]:
    """Holm-adjust the gap p-values across every testable gap of every model (one family), in place.

    Adds ``p_holm`` and ``significant`` (``p_holm`` < alpha) to each gap; ``excludes_zero``
    stays the uncorrected interval check. A gap that is not testable has no p-value, is not part
    of the family, and its ``p_holm`` and ``significant`` are null.
    """
    found = [g for m in per_model.values() for g in m.get("gaps") or [] if g.get("p_value") is not None]
    adjusted = holm([g["p_value"] for g in found])
    for g, p in zip(found, adjusted):
        g["p_holm"] = float(p)
        g["significant"] = bool(p < alpha)
    for m in per_model.values():
        for g in m.get("gaps") or []:
            g.setdefault("p_holm", None)
            g.setdefault("significant", None if g.get("p_value") is None else False)
    return per_model
