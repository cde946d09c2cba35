"""Exports of a run: Open ASR Leaderboard JSONL per model, the slice table as CSV, a DuckDB file.

* ``exports/oasr/<model>.jsonl``: one line per scored utterance with the leaderboard's keys
  ``audio_filepath`` (the utt_id), ``duration``, ``time`` (inference seconds), ``text`` (the raw
  reference) and ``pred_text`` (the raw hypothesis), plus the utterance's slice labels as
  extra keys (the leaderboard's tools ignore them; this project's ``oasr-predictions`` reader
  reads them back as labels). Failed rows are left out, as WER leaves them out, and counted in
  ``exports/oasr/index.json``.
* ``exports/slices.csv``: one row per model and slice with WER and its interval.
* ``exports/results.duckdb``: tables ``utterances``, ``models``, ``slices``, ``gaps``, ``probes``.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from audits.cohort import slice_family
from engine.data import RESULT_COLUMNS
from engine.store import atomic_write_text

log = logging.getLogger(__name__)

SLICE_COLUMNS = ("model", "slice", "label", "value", "wer", "ci_lo", "ci_hi", "cer", "cer_ci_lo", "cer_ci_hi", "n_utts", "n_failed", "n_words", "n_speakers", "rtfx")
MODEL_COLUMNS = (
    "model", "status", "backend", "params_m", "wer", "ci_lo", "ci_hi", "cer", "rtfx", "n_utts", "n_failed", "n_words",
    "audio_s", "infer_s", "batch_size", "device", "dtype", "warmup_batches", "tags",
)
GAP_COLUMNS = ("model", "label", "a", "b", "gap", "ci_lo", "ci_hi", "excludes_zero", "wer_a", "wer_b", "n_a", "n_b")
PROBE_COLUMNS = ("probe", "model", "rate", "ci_lo", "ci_hi", "n", "k")
_EXCLUDED_LABELS = frozenset(RESULT_COLUMNS) | {"derivation", "emotion_source", "text", "audio"}


def safe_filename(name: str) -> str:
    """A model name as a file name: path separators and odd characters become '_'."""
    s = re.sub(r"[^A-Za-z0-9._+-]+", "_", name).strip("._")
    return s or "model"


def _ci(ci: Any) -> tuple[float | None, float | None]:
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        return ci[0], ci[1]
    return None, None


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
                    "n_a": g.get("n_a"), "n_b": g.get("n_b"),
                }
            )
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


def frame(rows: list[dict[str, Any]], columns: Iterable[str]) -> pd.DataFrame:
    """Rows as a DataFrame with the given columns even when there are no rows."""
    cols = list(columns)
    return pd.DataFrame(rows, columns=cols) if rows else pd.DataFrame({c: pd.Series(dtype="object") for c in cols})


def label_columns(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if c not in _EXCLUDED_LABELS and not c.startswith("_")]


def _num(x: Any) -> float | None:
    if x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _is_ok(row: Mapping[str, Any]) -> bool:
    err = row.get("error")
    missing = lambda v: v is None or (isinstance(v, float) and math.isnan(v))
    return missing(err) and not missing(row.get("hyp_raw")) and not missing(row.get("ref_raw"))


def write_oasr_jsonl(table: pd.DataFrame, out_dir: Path) -> dict[str, Path]:
    """Write ``<out_dir>/<model>.jsonl`` per model and ``index.json`` (file, rows, left-out failures)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    labels = label_columns(table)
    paths: dict[str, Path] = {}
    index: dict[str, Any] = {}
    used: dict[str, str] = {}
    for model, g in sorted(table.groupby("model", sort=True), key=lambda kv: str(kv[0])):
        name = safe_filename(str(model))
        if name in used:
            raise ValueError(f"models '{used[name]}' and '{model}' map to one export file name '{name}.jsonl'")
        used[name] = str(model)
        lines: list[str] = []
        n_failed = 0
        for row in g.sort_values("utt_id").to_dict("records"):
            if not _is_ok(row):
                n_failed += 1
                continue
            rec: dict[str, Any] = {
                "audio_filepath": str(row["utt_id"]),
                "duration": _num(row.get("duration_s")),
                "time": _num(row.get("infer_s")),
                "text": str(row["ref_raw"]),
                "pred_text": str(row["hyp_raw"]),
            }
            for c in labels:
                v = row.get(c)
                if v is not None and not (isinstance(v, float) and math.isnan(v)):
                    rec[c] = v if isinstance(v, (str, int, float, bool)) else str(v)
            lines.append(json.dumps(rec, ensure_ascii=False))
        path = out_dir / f"{name}.jsonl"
        atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))
        paths[str(model)] = path
        index[str(model)] = {"file": path.name, "n_rows": len(lines), "n_failed_left_out": n_failed}
        if n_failed:
            log.info("%s: %d failed row(s) left out of the OASR export (as WER leaves them out)", model, n_failed)
    atomic_write_text(out_dir / "index.json", json.dumps(index, indent=2))
    return paths


def write_slices_csv(summary: Mapping[str, Any], path: Path) -> Path:
    """The slice table as CSV (``SLICE_COLUMNS``); empty cells for missing numbers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(SLICE_COLUMNS))
        w.writeheader()
        for r in slice_rows(summary):
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in SLICE_COLUMNS})
    tmp.replace(path)
    return path


def write_duckdb(summary: Mapping[str, Any], table: pd.DataFrame, path: Path) -> Path:
    """A DuckDB database file with the result rows and the summary's tables (replaced if present)."""
    import duckdb

    from audits.query import summary_frames

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    if tmp.exists():
        tmp.unlink()
    con = duckdb.connect(str(tmp))
    try:
        frames = {"utterances": table, **summary_frames(summary)}
        for name, df in frames.items():
            con.register(f"_{name}_df", df)
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM _{name}_df")
            con.unregister(f"_{name}_df")
    finally:
        con.close()
    tmp.replace(path)
    return path


def write_exports(summary: Mapping[str, Any], table: pd.DataFrame, run_dir: Path, duckdb_file: bool = True) -> dict[str, Path]:
    """Every export under ``run_dir/exports``; returns what was written by kind."""
    out = Path(run_dir) / "exports"
    written: dict[str, Path] = {"oasr": out / "oasr"}
    write_oasr_jsonl(table, out / "oasr")
    written["slices_csv"] = write_slices_csv(summary, out / "slices.csv")
    if duckdb_file:
        written["duckdb"] = write_duckdb(summary, table, out / "results.duckdb")
    return written
