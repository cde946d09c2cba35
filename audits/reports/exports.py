"""Exports of a run: Open ASR Leaderboard JSONL per model, the slice table as CSV, a DuckDB file.

* ``exports/oasr/<model>.jsonl``: one line per scored source clip (derived clips of a
  ``perturbations`` block are left out, as the summary's figures leave them out) with the leaderboard's keys
  ``audio_filepath`` (the utt_id), ``duration``, ``time`` (inference seconds), ``text`` (the raw
  reference) and ``pred_text`` (the raw hypothesis), plus the utterance's slice labels as
  extra keys (the leaderboard's tools ignore them; this project's ``oasr-predictions`` reader
  reads them back as labels). Failed rows are left out, as WER leaves them out, and counted in
  ``exports/oasr/index.json``.
* ``exports/slices.csv``: one row per model and slice with WER and its interval.
* ``exports/results.duckdb``: tables ``utterances`` (every row, derived clips included, with their
  ``perturbation`` column), ``scored`` (those rows scored with the run's normalizer: ``ref_norm``,
  ``hyp_norm``, ``n_words``, ``word_errors``, ..., as ``audit query``'s ``scored`` view has them, so
  ``sum(word_errors) / sum(n_words)`` over any grouping is its corpus WER), ``models``, ``slices``, ``gaps``, ``pairs``, and
  every audit section's tables (``AuditSection.tables``), with their columns even when the
  section did not run.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from audits.clips import source_rows
from audits.reports.tables import SLICE_COLUMNS, label_columns, slice_rows, summary_frames
from engine.errors import ConfigError
from engine.storage import atomic_write_text

if TYPE_CHECKING:
    from audits.result import RunResult

log = logging.getLogger(__name__)


def safe_filename(name: str) -> str:
    """A model name as a file name: path separators and odd characters become '_'."""
    s = re.sub(r"[^A-Za-z0-9._+-]+", "_", name).strip("._")
    return s or "model"


def export_file_names(models: Iterable[str]) -> dict[str, str]:
    """Each model's OASR export file (``<safe_filename>.jsonl``); ``ConfigError`` when two models would share one.

    One rule for the run's check before any model loads and for the writer: ``sim x`` and
    ``sim_x`` (or ``Sim-X`` and ``sim-x``, one file on a case-insensitive file system) are named
    together with the file they would share, before anything is written.
    """
    names: dict[str, str] = {}
    seen: dict[str, str] = {}
    clashes: list[str] = []
    for model in sorted(dict.fromkeys(str(m) for m in models)):
        file = f"{safe_filename(model)}.jsonl"
        key = file.casefold()
        if key in seen:
            clashes.append(f"'{seen[key]}' and '{model}' (both exports/oasr/{names[seen[key]]})")
        else:
            seen[key] = model
        names[model] = file
    if clashes:
        raise ConfigError(
            f"model names that would share one export file: {'; '.join(clashes)}; rename one of each pair "
            "(in the model registry, or with a registry entry of another name)"
        )
    return names


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
    files = export_file_names(table["model"].astype(str).unique()) if len(table) else {}
    for model, g in sorted(table.groupby("model", sort=True), key=lambda kv: str(kv[0])):
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
        path = out_dir / files[str(model)]
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


def write_duckdb(source: RunResult | Mapping[str, Any], table: pd.DataFrame, path: Path, scored: pd.DataFrame | None = None) -> Path:
    """A DuckDB database file with the result rows, the scored rows and the summary's tables (replaced if present).

    ``scored``: the run's own scoring pass, reused when it covers every row of ``table``; otherwise
    the rows are scored here, as ``audit query``'s ``scored`` view scores them.
    """
    import duckdb

    from audits.reports.views import scored_frame
    from audits.result import RunResult

    run = RunResult.of_summary(source)
    summary = run.plain_summary

    if scored is None or len(scored) != len(table):
        scored = scored_frame(summary, table)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    if tmp.exists():
        tmp.unlink()
    con = duckdb.connect(str(tmp))
    try:
        frames = {"utterances": table, "scored": scored, **summary_frames(run)}
        for name, df in frames.items():
            con.register(f"_{name}_df", df)
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM _{name}_df")
            con.unregister(f"_{name}_df")
    finally:
        con.close()
    tmp.replace(path)
    return path


def write_exports(
    source: RunResult | Mapping[str, Any], table: pd.DataFrame, run_dir: Path, duckdb_file: bool = True, scored: pd.DataFrame | None = None
) -> dict[str, Path]:
    """Every export under ``run_dir/exports``; returns what was written by kind (``scored``: see :func:`write_duckdb`)."""
    from audits.result import RunResult

    run = RunResult.of_summary(source)
    summary = run.plain_summary
    out = Path(run_dir) / "exports"
    written: dict[str, Path] = {"oasr": out / "oasr"}
    write_oasr_jsonl(source_rows(table), out / "oasr")  # the benchmark's clips, as the summary scores them
    written["slices_csv"] = write_slices_csv(summary, out / "slices.csv")
    if duckdb_file:
        written["duckdb"] = write_duckdb(run, table, out / "results.duckdb", scored)
    return written
