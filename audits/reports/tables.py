"""The summary's figures as flat tables: one definition shared by exports, queries and reports.

The ASR tables (``models``, ``slices``, ``gaps``, ``pairs``) are defined here; every audit
section adds its own through its ``tables`` hook (``audits.sections``), so nothing here knows a
section.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from audits.asr.cohort import slice_family
from engine.data import RESULT_COLUMNS
from engine.errors import RegistryError

if TYPE_CHECKING:
    from audits.result import RunResult

# Hallucination figures (audits/asr/hallucination.py), flattened beside WER in the model and slice tables.
HALLUCINATION_COLUMNS = (
    "insertion_rate",
    "n_loops",
    "loop_rate",
    "wer_without_loops",
    "n_long",
    "n_short",
    "n_speech_free",
    "n_hallucinated",
    "hallucination_rate",
    "hallucination_ci_lo",
    "hallucination_ci_hi",
    "avg_logprob_loops",
    "avg_logprob_other",
    "no_speech_flagged",
)

SLICE_COLUMNS = (
    "model",
    "slice",
    "label",
    "value",
    "wer",
    "ci_lo",
    "ci_hi",
    "cer",
    "cer_ci_lo",
    "cer_ci_hi",
    "n_utts",
    "n_failed",
    "n_words",
    "n_speakers",
    "rtfx",
    "not_testable",
    *HALLUCINATION_COLUMNS,
)


MODEL_COLUMNS = (
    "model",
    "status",
    "backend",
    "params_m",
    "wer",
    "ci_lo",
    "ci_hi",
    "cer",
    "rtfx",
    "n_utts",
    "n_failed",
    "n_words",
    "audio_s",
    "infer_s",
    "batch_size",
    "device",
    "dtype",
    "warmup_batches",
    "tags",
    "not_testable",
    *HALLUCINATION_COLUMNS,
)


GAP_COLUMNS = (
    "model",
    "label",
    "a",
    "b",
    "gap",
    "ci_lo",
    "ci_hi",
    "excludes_zero",
    "wer_a",
    "wer_b",
    "n_a",
    "n_b",
    "p_value",
    "p_holm",
    "significant",
    "not_testable",
)


PAIR_COLUMNS = ("a", "b", "diff", "ci_lo", "ci_hi", "p_value", "p_holm", "better", "n_utts", "not_testable")


_EXCLUDED_LABELS = frozenset(RESULT_COLUMNS) | {"derivation", "emotion_source", "text", "audio"}


def ci_pair(ci: Any) -> tuple[float | None, float | None]:
    """``[lo, hi]`` of a summary as two columns (``(None, None)`` when absent)."""
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        return ci[0], ci[1]
    return None, None


def hallucination_fields(figures: Mapping[str, Any]) -> dict[str, Any]:
    """The ``hallucination`` figures of a model or slice as flat columns (None when absent)."""
    h = figures.get("hallucination") or {}
    lo, hi = ci_pair(h.get("hallucination_ci95"))
    out = {c: h.get(c) for c in HALLUCINATION_COLUMNS}
    out["hallucination_ci_lo"], out["hallucination_ci_hi"] = lo, hi
    return out


def slice_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The slice table: one row per (model, ``label=value``) of ``summary.json``."""
    rows = []
    for model, m in sorted((summary.get("models") or {}).items()):
        for key, s in sorted((m.get("slices") or {}).items()):
            label, value = slice_family(key)
            lo, hi = ci_pair(s.get("ci95"))
            clo, chi = ci_pair(s.get("cer_ci95"))
            rows.append(
                {
                    "model": model,
                    "slice": key,
                    "label": label,
                    "value": value,
                    "wer": s.get("wer"),
                    "ci_lo": lo,
                    "ci_hi": hi,
                    "not_testable": s.get("not_testable"),
                    "cer": s.get("cer"),
                    "cer_ci_lo": clo,
                    "cer_ci_hi": chi,
                    "n_utts": s.get("n_utts"),
                    "n_failed": s.get("n_failed"),
                    "n_words": s.get("n_words"),
                    "n_speakers": s.get("n_speakers"),
                    "rtfx": s.get("rtfx"),
                    **hallucination_fields(s),
                }
            )
    return rows


def model_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per model with its overall numbers and run facts (``params_m`` in millions)."""
    rows = []
    for model, m in sorted((summary.get("models") or {}).items()):
        lo, hi = ci_pair(m.get("ci95"))
        rows.append(
            {
                "model": model,
                "status": m.get("status"),
                "backend": m.get("backend"),
                "params_m": m.get("params_m"),
                "wer": m.get("wer"),
                "ci_lo": lo,
                "ci_hi": hi,
                "not_testable": m.get("not_testable"),
                "cer": m.get("cer"),
                "rtfx": m.get("rtfx"),
                "n_utts": m.get("n_utts"),
                "n_failed": m.get("n_failed"),
                "n_words": m.get("n_words"),
                "audio_s": m.get("audio_s"),
                "infer_s": m.get("infer_s"),
                "batch_size": m.get("batch_size"),
                "device": m.get("device"),
                "dtype": m.get("dtype"),
                "warmup_batches": m.get("warmup_batches"),
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
            lo, hi = ci_pair(g.get("ci95"))
            rows.append(
                {
                    "model": model,
                    "label": g.get("label"),
                    "a": g.get("a"),
                    "b": g.get("b"),
                    "gap": g.get("gap"),
                    "ci_lo": lo,
                    "ci_hi": hi,
                    "excludes_zero": g.get("excludes_zero"),
                    "wer_a": g.get("wer_a"),
                    "wer_b": g.get("wer_b"),
                    "n_a": g.get("n_a"),
                    "n_b": g.get("n_b"),
                    "p_value": g.get("p_value"),
                    "p_holm": g.get("p_holm"),
                    "significant": g.get("significant"),
                    "not_testable": g.get("not_testable"),
                }
            )
    return rows


def pair_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per pair of models: paired WER difference (a - b), interval, p and Holm p, verdict."""
    rows = []
    for p in (summary.get("comparisons") or {}).get("pairs") or []:
        lo, hi = ci_pair(p.get("ci95"))
        rows.append(
            {
                "a": p.get("a"),
                "b": p.get("b"),
                "diff": p.get("diff"),
                "ci_lo": lo,
                "ci_hi": hi,
                "p_value": p.get("p_value"),
                "p_holm": p.get("p_holm"),
                "better": p.get("better"),
                "n_utts": p.get("n_utts"),
                "not_testable": p.get("not_testable"),
            }
        )
    return rows


def frame(rows: list[dict[str, Any]], columns: Iterable[str]) -> pd.DataFrame:
    """Rows as a DataFrame with the given columns even when there are no rows."""
    cols = list(columns)
    return pd.DataFrame(rows, columns=cols) if rows else pd.DataFrame({c: pd.Series(dtype="object") for c in cols})


def label_columns(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if c not in _EXCLUDED_LABELS and not c.startswith("_")]


def summary_frames(source: RunResult | Mapping[str, Any]) -> dict[str, pd.DataFrame]:
    """The summary's tables as DataFrames (stable columns even when empty), then each section's tables.

    Every registered section is asked, present in the summary or not, so every table
    of a section exists (empty, with its columns) in every run and a query never depends on which
    sections ran.
    """
    from audits.result import RunResult
    from audits.sections import ordered

    run = RunResult.of_summary(source)
    summary = run.plain_summary
    models = frame(model_rows(summary), MODEL_COLUMNS)
    models["params_m"] = pd.to_numeric(models["params_m"], errors="coerce")
    out = {
        "models": models,
        "slices": frame(slice_rows(summary), SLICE_COLUMNS),
        "gaps": frame(gap_rows(summary), GAP_COLUMNS),
        "pairs": frame(pair_rows(summary), PAIR_COLUMNS),
    }
    for sec in ordered():
        for name, df in sec.tables(run.result(sec.key), run).items():
            if name in out:
                raise RegistryError(f"audit section '{sec.key}' defines a table '{name}' that another table already uses; rename it")
            out[name] = df
    return out
