"""Hallucination and insertion figures: what WER hides when a model invents words.

A model that loops ("thank you thank you thank you ...") on one clip can move a corpus WER by
ten points, and a model that transcribes silence adds words no reference can absorb. These
figures make that visible, per model and per slice, next to WER (docs/metrics.md,
"Hallucinations and insertions"):

* insertion rate: inserted words over reference words (the I of S+D+I, corpus-level);
* repetition loops: a hypothesis holding some n-gram (1 <= n <= ``LOOP_MAX_N``) repeated back to
  back at least ``LOOP_MIN_REPEATS`` times, more often than the reference repeats anything;
* length-ratio outliers: hypothesis/reference word ratio above ``RATIO_HIGH`` or below
  ``RATIO_LOW``, with at least ``RATIO_MIN_DIFF`` words of difference;
* WER without looped clips, shown beside WER (looped clips stay in WER);
* speech-free clips (empty normalized reference) scored apart from WER: the share of them that
  get any words (hallucination rate, Wilson interval) and how many words.

Backend confidences (``asr_avg_logprob``, ``asr_no_speech_prob``), when the backend stored
them, say whether the model itself knew: the mean log-probability of looped against other
clips, and how many hallucinated speech-free clips the model had flagged as no-speech.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from audits.asr.stats import wilson_interval
from engine.data import SPEECH_FREE_LABEL, is_speech_free

LOOP_MAX_N = 4  # longest repeated n-gram looked for (words)
LOOP_MIN_REPEATS = 4  # k: back-to-back copies that make a loop
RATIO_HIGH = 2.0  # hypothesis words / reference words above this: a long outlier
RATIO_LOW = 0.5  # ... below this: a short outlier (dropped speech)
RATIO_MIN_DIFF = 3  # and at least this many words apart, so a 1-word reference heard as 2 words is not flagged
NO_SPEECH_FLAG = 0.6  # no-speech probability at or above which Whisper itself calls a window silent (its default)
AVG_LOGPROB_COLUMN = "asr_avg_logprob"
NO_SPEECH_COLUMN = "asr_no_speech_prob"


def tandem_repeats(words: Sequence[str], max_n: int = LOOP_MAX_N) -> int:
    """Most back-to-back copies of any n-gram (n <= ``max_n``) in ``words``; 1 when nothing repeats.

    A run of c copies of an n-gram is a stretch where word i equals word i+n for (c-1)*n
    consecutive positions, so each n costs one pass.
    """
    best = 1 if words else 0
    size = len(words)
    for n in range(1, max_n + 1):
        if size < 2 * n:
            break
        run = 0
        for a, b in zip(words, words[n:]):
            if a == b:
                run += 1
                copies = run // n + 1
                if copies > best:
                    best = copies
            else:
                run = 0
    return best


def _might_loop(words: Sequence[str], k: int) -> bool:
    """Cheap necessary condition: k copies of an n-gram leave at least k-1 repeated tokens."""
    return len(words) >= k and len(set(words)) <= len(words) - (k - 1)


def is_loop(hyp_words: Sequence[str], ref_words: Sequence[str], k: int = LOOP_MIN_REPEATS, max_n: int = LOOP_MAX_N) -> bool:
    """The hypothesis repeats an n-gram k+ times back to back, and more often than the reference does."""
    if not _might_loop(hyp_words, k):
        return False
    copies = tandem_repeats(hyp_words, max_n)
    return copies >= k and copies > tandem_repeats(ref_words, max_n)


def length_outlier(n_ref: int, n_hyp: int) -> str | None:
    """``"long"``, ``"short"`` or None for one clip with a non-empty reference."""
    if n_ref <= 0 or abs(n_hyp - n_ref) < RATIO_MIN_DIFF:
        return None
    ratio = n_hyp / n_ref
    if ratio > RATIO_HIGH:
        return "long"
    if ratio < RATIO_LOW:
        return "short"
    return None


def speech_free_labels(df: pd.DataFrame) -> np.ndarray:
    """Per row, whether the row's clip is labelled speech-free (``engine.data.is_speech_free``, row by row)."""
    if SPEECH_FREE_LABEL not in df.columns:
        return np.zeros(len(df), dtype=bool)
    return np.array([is_speech_free({SPEECH_FREE_LABEL: v}) for v in df[SPEECH_FREE_LABEL].tolist()], dtype=bool)


def add_row_flags(df: pd.DataFrame, labelled_free: np.ndarray | None = None) -> None:
    """Add ``speech_free``, ``hyp_words``, ``loop`` and ``length_outlier`` to a scored frame, in place.

    ``labelled_free``: per row, whether the clip is labelled speech-free (``content: speech-free``;
    read from the frame's ``content`` column when not given). The label decides, never the
    reference: a clip labelled speech whose reference normalizes to nothing is no speech-free clip.
    """
    if labelled_free is None:
        labelled_free = speech_free_labels(df)
    ok = df["ok"].to_numpy(dtype=bool)
    n_ref = df["n_words"].to_numpy()
    hyps = df["hyp_norm"].tolist()
    refs = df["ref_norm"].tolist()
    n = len(df)
    hyp_words = np.zeros(n, dtype=np.int64)
    loop = np.zeros(n, dtype=bool)
    k = LOOP_MIN_REPEATS
    for i, (o, h, r) in enumerate(zip(ok, hyps, refs)):
        if not o:
            continue
        hw = h.split()
        size = len(hw)
        hyp_words[i] = size
        if size >= k and len(set(hw)) <= size - (k - 1):  # _might_loop, inlined: this loop runs once per row
            loop[i] = is_loop(hw, r.split())
    # length outliers, vectorized (same rule as ``length_outlier``)
    ref_n = n_ref.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(ref_n > 0, hyp_words / np.maximum(ref_n, 1), np.nan)
    apart = (np.abs(hyp_words - n_ref) >= RATIO_MIN_DIFF) & (n_ref > 0) & ok
    outlier = np.full(n, None, dtype=object)
    outlier[apart & (ratio > RATIO_HIGH)] = "long"
    outlier[apart & (ratio < RATIO_LOW)] = "short"
    # speech-free: a scored clip labelled so (score_table has failed the labelled clips whose
    # reference has words, and the unlabelled ones whose reference has none)
    df["speech_free"] = ok & np.asarray(labelled_free, dtype=bool) & (n_ref == 0)
    df["hyp_words"] = hyp_words
    df["loop"] = loop
    df["length_outlier"] = outlier


def _mean(values: pd.Series) -> float | None:
    v = pd.to_numeric(values, errors="coerce").dropna()
    return float(v.mean()) if len(v) else None


def _ratio(num: float, den: float) -> float | None:
    return float(num) / float(den) if den > 0 else None


def hallucination_metrics(g: pd.DataFrame) -> dict[str, Any]:
    """The figures of one group of scored rows (a model, or one of its slices)."""
    okg = g[g["ok"]]
    sf_mask = okg["speech_free"].to_numpy(dtype=bool)
    speech = okg[~sf_mask]
    free = okg[sf_mask]
    n_words = int(speech["n_words"].sum())
    loops = speech["loop"].to_numpy(dtype=bool)
    kept = speech[~loops]
    n_long = int((speech["length_outlier"] == "long").sum())
    n_short = int((speech["length_outlier"] == "short").sum())
    halluc = free["hyp_words"].to_numpy() > 0
    n_free = len(free)
    n_hall = int(halluc.sum())
    lo, hi = wilson_interval(n_hall, n_free) if n_free else (None, None)
    out: dict[str, Any] = {
        "n_clips": len(speech),
        "insertions": int(speech["ins"].sum()),
        "insertion_rate": _ratio(speech["ins"].sum(), n_words),
        "n_loops": int(loops.sum()),
        "loop_rate": _ratio(loops.sum(), len(speech)),
        "loop_words": int(speech.loc[loops, "hyp_words"].sum()),
        "wer_without_loops": _ratio(kept["word_errors"].sum(), kept["n_words"].sum()),
        "n_long": n_long,
        "n_short": n_short,
        "length_outlier_rate": _ratio(n_long + n_short, len(speech)),
        "n_speech_free": n_free,
        "n_hallucinated": n_hall,
        "hallucination_rate": _ratio(n_hall, n_free),
        "hallucination_ci95": [lo, hi],
        "hallucinated_words": int(free["hyp_words"].sum()),
    }
    if AVG_LOGPROB_COLUMN in okg and okg[AVG_LOGPROB_COLUMN].notna().any():
        out["avg_logprob_loops"] = _mean(speech.loc[loops, AVG_LOGPROB_COLUMN])
        out["avg_logprob_other"] = _mean(speech.loc[~loops, AVG_LOGPROB_COLUMN])
    if NO_SPEECH_COLUMN in okg and okg[NO_SPEECH_COLUMN].notna().any():
        probs = pd.to_numeric(free.loc[halluc, NO_SPEECH_COLUMN], errors="coerce")
        out["no_speech_flagged"] = int((probs >= NO_SPEECH_FLAG).sum())
        out["no_speech_prob_hallucinated"] = _mean(probs)
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}


SCORING_NOTE = (
    f"insertion rate = inserted words / reference words; loop = an n-gram (n <= {LOOP_MAX_N}) repeated back to back "
    f">= {LOOP_MIN_REPEATS} times, more often than in the reference (looped clips stay in WER; wer_without_loops beside it); "
    f"length outlier = hypothesis/reference words > {RATIO_HIGH} or < {RATIO_LOW} and >= {RATIO_MIN_DIFF} words apart; "
    "speech-free clips (empty normalized reference) are left out of WER and CER and scored as hallucination rate "
    "(share with any hypothesis word, Wilson 95% interval)"
)
