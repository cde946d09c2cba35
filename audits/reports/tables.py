"""The summary's figures as flat tables (models, slices, gaps, probes): one definition shared by exports, queries and reports."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from audits.asr.cohort import slice_family
from engine.data import RESULT_COLUMNS

# Hallucination figures (audits/asr/hallucination.py), flattened beside WER in the model and slice tables.
HALLUCINATION_COLUMNS = (
    "insertion_rate", "n_loops", "loop_rate", "wer_without_loops", "n_long", "n_short", "n_speech_free", "n_hallucinated",
    "hallucination_rate", "hallucination_ci_lo", "hallucination_ci_hi", "avg_logprob_loops", "avg_logprob_other", "no_speech_flagged",
)

SLICE_COLUMNS = (
    "model", "slice", "label", "value", "wer", "ci_lo", "ci_hi", "cer", "cer_ci_lo", "cer_ci_hi", "n_utts", "n_failed", "n_words", "n_speakers", "rtfx",
    *HALLUCINATION_COLUMNS,
)


MODEL_COLUMNS = (
    "model", "status", "backend", "params_m", "wer", "ci_lo", "ci_hi", "cer", "rtfx", "n_utts", "n_failed", "n_words",
    "audio_s", "infer_s", "batch_size", "device", "dtype", "warmup_batches", "tags", *HALLUCINATION_COLUMNS,
)


GAP_COLUMNS = ("model", "label", "a", "b", "gap", "ci_lo", "ci_hi", "excludes_zero", "wer_a", "wer_b", "n_a", "n_b", "p_value", "p_holm", "significant")


PAIR_COLUMNS = ("a", "b", "diff", "ci_lo", "ci_hi", "p_value", "p_holm", "better", "n_utts")


PROBE_COLUMNS = ("probe", "model", "rate", "ci_lo", "ci_hi", "n", "k")


SYNTHETIC_ARM_COLUMNS = (
    "model", "arm", "n_pairs", "n_clips", "real_rate", "real_ci_lo", "real_ci_hi", "synthetic_rate", "synthetic_ci_lo",
    "synthetic_ci_hi", "diff", "diff_ci_lo", "diff_ci_hi",
)


_EXCLUDED_LABELS = frozenset(RESULT_COLUMNS) | {"derivation", "emotion_source", "text", "audio"}


def _ci(ci: Any) -> tuple[float | None, float | None]:
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        return ci[0], ci[1]
    return None, None


def hallucination_fields(figures: Mapping[str, Any]) -> dict[str, Any]:
    """The ``hallucination`` figures of a model or slice as flat columns (None when absent)."""
    h = figures.get("hallucination") or {}
    lo, hi = _ci(h.get("hallucination_ci95"))
    out = {c: h.get(c) for c in HALLUCINATION_COLUMNS}
    out["hallucination_ci_lo"], out["hallucination_ci_hi"] = lo, hi
    return out


def slice_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The slice table: one row per (model, ``label=value``) of ``summary.json``."""
    rows = []
    for model, m in sorted((summary.get("models") or {}).items()):
        for key, s in sorted((m.get("slices") or {}).items()):
            label, value = slice_family(key)
            lo, hi = _ci(s.get("ci95"))
            clo, chi = _ci(s.get("cer_ci95"))
            rows.append(
                {
                    "model": model, "slice": key, "label": label, "value": value, "wer": s.get("wer"), "ci_lo": lo, "ci_hi": hi,
                    "cer": s.get("cer"), "cer_ci_lo": clo, "cer_ci_hi": chi, "n_utts": s.get("n_utts"), "n_failed": s.get("n_failed"),
                    "n_words": s.get("n_words"), "n_speakers": s.get("n_speakers"), "rtfx": s.get("rtfx"),
                    **hallucination_fields(s),
                }
            )
    return rows


def model_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per model with its overall numbers and run facts (``params_m`` in millions)."""
    rows = []
    for model, m in sorted((summary.get("models") or {}).items()):
        lo, hi = _ci(m.get("ci95"))
        rows.append(
            {
                "model": model, "status": m.get("status"), "backend": m.get("backend"), "params_m": m.get("params_m"),
                "wer": m.get("wer"), "ci_lo": lo, "ci_hi": hi, "cer": m.get("cer"), "rtfx": m.get("rtfx"),
                "n_utts": m.get("n_utts"), "n_failed": m.get("n_failed"), "n_words": m.get("n_words"),
                "audio_s": m.get("audio_s"), "infer_s": m.get("infer_s"), "batch_size": m.get("batch_size"),
                "device": m.get("device"), "dtype": m.get("dtype"), "warmup_batches": m.get("warmup_batches"),
                "tags": ",".join(map(str, m.get("tags") or [])),
                **hallucination_fields(m),
            }
        )
    return rows


def gap_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per model and fairness gap (WER of ``a`` minus WER of ``b``)."""
    rows = []
    for model, m in sorted((summary.get("models") or {}).items()):
        for g in m.get("gaps") or []:
            lo, hi = _ci(g.get("ci95"))
            rows.append(
                {
                    "model": model, "label": g.get("label"), "a": g.get("a"), "b": g.get("b"), "gap": g.get("gap"), "ci_lo": lo, "ci_hi": hi,
                    "excludes_zero": bool(g.get("excludes_zero")), "wer_a": g.get("wer_a"), "wer_b": g.get("wer_b"),
                    "n_a": g.get("n_a"), "n_b": g.get("n_b"), "p_value": g.get("p_value"), "p_holm": g.get("p_holm"),
                    "significant": bool(g.get("significant")),
                }
            )
    return rows


def pair_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per pair of models: paired WER difference (a - b), interval, p and Holm p, verdict."""
    rows = []
    for p in (summary.get("comparisons") or {}).get("pairs") or []:
        lo, hi = _ci(p.get("ci95"))
        rows.append({"a": p.get("a"), "b": p.get("b"), "diff": p.get("diff"), "ci_lo": lo, "ci_hi": hi, "p_value": p.get("p_value"),
                     "p_holm": p.get("p_holm"), "better": p.get("better"), "n_utts": p.get("n_utts")})
    return rows


def probe_model_results(probe: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The per-model entries of one probe (mappings with a ``rate``); other keys are probe facts."""
    return {str(k): v for k, v in probe.items() if isinstance(v, Mapping) and "rate" in v}


def probe_counts(r: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(numerator, denominator) of a probe rate, whatever the probe calls them."""
    n = next((r[k] for k in ("n_eligible", "n", "n_clips", "n_trials", "n_words") if r.get(k) is not None), None)
    k = next((r[k] for k in ("n_ref", "k", "n_leaked", "n_hits", "n_flagged", "successes") if r.get(k) is not None), None)
    return (None if k is None else int(k)), (None if n is None else int(n))


def probe_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for probe, p in sorted((summary.get("probes") or {}).items()):
        if not isinstance(p, Mapping):
            continue
        for model, r in sorted(probe_model_results(p).items()):
            lo, hi = _ci(r.get("ci95"))
            k, n = probe_counts(r)
            rows.append({"probe": probe, "model": model, "rate": r.get("rate"), "ci_lo": lo, "ci_hi": hi, "n": n, "k": k})
    return rows


def synthetic_arm_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The synthetic-voice probe per model and voice arm: real rate, synthetic rate, paired difference."""
    probe = (summary.get("probes") or {}).get("synthetic_voice")
    rows: list[dict[str, Any]] = []
    if not isinstance(probe, Mapping):
        return rows
    for model, r in sorted(probe_model_results(probe).items()):
        for arm, a in (r.get("arms") or {}).items():
            (rl, rh), (sl, sh), (dl, dh) = _ci(a.get("real_ci95")), _ci(a.get("synthetic_ci95")), _ci(a.get("ci95"))
            rows.append({
                "model": model, "arm": arm, "n_pairs": a.get("n_pairs"), "n_clips": a.get("n_clips"),
                "real_rate": a.get("real_rate"), "real_ci_lo": rl, "real_ci_hi": rh,
                "synthetic_rate": a.get("synthetic_rate"), "synthetic_ci_lo": sl, "synthetic_ci_hi": sh,
                "diff": a.get("rate"), "diff_ci_lo": dl, "diff_ci_hi": dh,
            })
    return rows


def frame(rows: list[dict[str, Any]], columns: Iterable[str]) -> pd.DataFrame:
    """Rows as a DataFrame with the given columns even when there are no rows."""
    cols = list(columns)
    return pd.DataFrame(rows, columns=cols) if rows else pd.DataFrame({c: pd.Series(dtype="object") for c in cols})


def label_columns(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if c not in _EXCLUDED_LABELS and not c.startswith("_")]


def summary_frames(summary: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
    """The summary's tables as DataFrames (stable columns even when empty)."""
    models = frame(model_rows(summary), MODEL_COLUMNS)
    models["params_m"] = pd.to_numeric(models["params_m"], errors="coerce")
    return {
        "models": models,
        "slices": frame(slice_rows(summary), SLICE_COLUMNS),
        "gaps": frame(gap_rows(summary), GAP_COLUMNS),
        "probes": frame(probe_rows(summary), PROBE_COLUMNS),
        "pairs": frame(pair_rows(summary), PAIR_COLUMNS),
        "synthetic_voice_arms": frame(synthetic_arm_rows(summary), SYNTHETIC_ARM_COLUMNS),
    }
