"""Compare two run directories, ignoring what legitimately changes between runs (timings, timestamps).

Use it to check that a new version of the engine gives the same results as an old one on the same
dataset: ``python scripts/compare_runs.py runs/old runs/new``. It compares

* ``summary.json`` field by field, skipping timing fields (RTFx, inference/load/wall seconds) and
  timestamps, and reporting every other difference by its JSON path;
* ``utterances.parquet`` row by row (sorted by model and utt_id), every column but ``infer_s``;
* ``report.md`` line by line, with timing columns of its tables blanked;
* the tables of ``exports/`` (every CSV and JSON-lines file, and every table of ``results.duckdb``)
  row by row, less timing columns;
* the key order of every object of ``summary.json`` (a reader of the file sees the same layout);
* with ``--ignore KEY,...`` and ``--ignore-columns HEADING,...``: less those summary keys (anywhere)
  and those report table columns (dropped, so a new figure's column does not shift the others).

``digest`` (the summary's seal, which covers its timestamps) is never compared.

It prints the differences and exits 1 when there are any (0 when the runs agree).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

# what legitimately differs between two runs of the same clips: timings, the process id, and digests over rows that
# hold timings (``rows.sha256`` covers ``infer_s``; the rows themselves are compared column by column less it);
# ``time`` is the Open ASR Leaderboard export's per-clip transcription time
TIMING_KEYS = frozenset(
    {"created_at", "infer_s", "rtfx", "load_s", "wall_s", "warmup_s", "elapsed_s", "duration_wall_s", "digest", "sha256", "pid", "time"}
)
TIMING_COLUMNS = frozenset({"rtfx", "infer s", "load s", "wall s"})


def json_diffs(a: Any, b: Any, path: str = "$", ignore: frozenset[str] = TIMING_KEYS) -> Iterator[str]:
    """Paths where two JSON values differ (floats compared to 1e-12 relative)."""
    if isinstance(a, dict) and isinstance(b, dict):
        order_a = [k for k in a if k in b and k not in ignore]
        order_b = [k for k in b if k in a and k not in ignore]
        if order_a != order_b:
            yield f"{path}: keys in another order ({', '.join(order_a)} vs {', '.join(order_b)})"[:300]
        for key in sorted(set(a) | set(b)):
            if key in ignore:
                continue
            if key not in a:
                yield f"{path}.{key}: only in the second run"
            elif key not in b:
                yield f"{path}.{key}: only in the first run"
            else:
                yield from json_diffs(a[key], b[key], f"{path}.{key}", ignore)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield f"{path}: {len(a)} items vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            yield from json_diffs(x, y, f"{path}[{i}]", ignore)
    elif isinstance(a, float) and isinstance(b, float):
        if not math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15):
            yield f"{path}: {a!r} vs {b!r}"
    elif a != b:
        yield f"{path}: {str(a)[:80]!r} vs {str(b)[:80]!r}"


def row_diffs(a: Path, b: Path) -> Iterator[str]:
    ta = pd.read_parquet(a).sort_values(["model", "utt_id"]).reset_index(drop=True)
    tb = pd.read_parquet(b).sort_values(["model", "utt_id"]).reset_index(drop=True)
    if len(ta) != len(tb):
        yield f"utterances.parquet: {len(ta)} rows vs {len(tb)}"
        return
    cols = sorted((set(ta.columns) | set(tb.columns)) - {"infer_s"})
    for col in cols:
        if col not in ta or col not in tb:
            yield f"utterances.parquet: column {col!r} only in one run"
            continue
        x, y = ta[col], tb[col]
        same = (x == y) | (x.isna() & y.isna())
        if pd.api.types.is_float_dtype(x) and pd.api.types.is_float_dtype(y):
            same = same | ((x - y).abs() <= 1e-9 * y.abs().clip(lower=1.0))
        for i in list(same[~same].index)[:5]:
            yield f"utterances.parquet: {ta.at[i, 'model']}/{ta.at[i, 'utt_id']} {col}: {x[i]!r} vs {y[i]!r}"


def _blank_timing_columns(lines: list[str], drop_columns: frozenset[str] = frozenset()) -> list[str]:
    out: list[str] = []
    blank: set[int] = set()
    drop: set[int] = set()
    for line in lines:
        if line.startswith("|"):
            cells = line.strip().strip("|").split("|")
            names = [c.strip().lower() for c in cells]
            if not set(line) <= set("|-: ") and any(n in TIMING_COLUMNS or n in drop_columns for n in names):
                blank = {i for i, n in enumerate(names) if n in TIMING_COLUMNS} or blank
                drop = {i for i, n in enumerate(names) if n in drop_columns} or drop
            cells = ["" if i in blank else c for i, c in enumerate(cells) if i not in drop]
            line = "|" + "|".join(cells) + "|"
        else:
            blank, drop = set(), set()
        line = re.sub(r"RTFx[ =:]*[0-9.]+", "RTFx", line)
        out.append(line)
    return [ln for ln in out if not ln.startswith("- created:")]


def report_diffs(a: Path, b: Path, drop_columns: frozenset[str] = frozenset()) -> Iterator[str]:
    la = _blank_timing_columns(a.read_text(encoding="utf-8").splitlines(), drop_columns)
    lb = _blank_timing_columns(b.read_text(encoding="utf-8").splitlines(), drop_columns)
    if len(la) != len(lb):
        yield f"report.md: {len(la)} lines vs {len(lb)}"
    for i, (x, y) in enumerate(zip(la, lb), start=1):
        if x != y:
            yield f"report.md line {i}: {x[:100]!r} vs {y[:100]!r}"


def _frame_diffs(name: str, ta: pd.DataFrame, tb: pd.DataFrame, skip: frozenset[str]) -> Iterator[str]:
    cols_a = [c for c in ta.columns if c not in skip]
    cols_b = [c for c in tb.columns if c not in skip]
    if cols_a != cols_b:
        yield f"{name}: columns {cols_a} vs {cols_b}"[:300]
        return
    if len(ta) != len(tb):
        yield f"{name}: {len(ta)} rows vs {len(tb)}"
        return
    for col in cols_a:
        x, y = ta[col].reset_index(drop=True), tb[col].reset_index(drop=True)
        same = (x.astype(str) == y.astype(str)) | (x.isna() & y.isna())
        if pd.api.types.is_float_dtype(x) and pd.api.types.is_float_dtype(y):
            same = same | ((x - y).abs() <= 1e-12 * y.abs().clip(lower=1.0))
        for i in list(same[~same].index)[:5]:
            yield f"{name} row {i} {col}: {x[i]!r} vs {y[i]!r}"


def export_diffs(a: Path, b: Path, ignore: frozenset[str] = TIMING_KEYS) -> Iterator[str]:
    """Differences between two runs' ``exports/`` tables (CSV, JSON lines, DuckDB), less timing and ``ignore`` columns."""
    skip = frozenset(ignore | {c.replace(" ", "_") for c in TIMING_COLUMNS})
    ea, eb = a / "exports", b / "exports"
    files_a = {p.relative_to(ea).as_posix() for p in ea.rglob("*") if p.is_file()} if ea.is_dir() else set()
    files_b = {p.relative_to(eb).as_posix() for p in eb.rglob("*") if p.is_file()} if eb.is_dir() else set()
    for only in sorted(files_a ^ files_b):
        yield f"exports/{only}: only in the {'first' if only in files_a else 'second'} run"
    for rel in sorted(files_a & files_b):
        pa, pb = ea / rel, eb / rel
        if rel.endswith(".csv"):
            yield from _frame_diffs(f"exports/{rel}", pd.read_csv(pa), pd.read_csv(pb), skip)
        elif rel.endswith(".jsonl"):
            yield from _frame_diffs(f"exports/{rel}", pd.read_json(pa, lines=True), pd.read_json(pb, lines=True), skip)
        elif rel.endswith(".json"):
            yield from json_diffs(json.loads(pa.read_text()), json.loads(pb.read_text()), f"exports/{rel}", ignore)
        elif rel.endswith(".duckdb"):
            import duckdb

            with duckdb.connect(str(pa), read_only=True) as ca, duckdb.connect(str(pb), read_only=True) as cb:
                tables_a = sorted(r[0] for r in ca.execute("SHOW TABLES").fetchall())
                tables_b = sorted(r[0] for r in cb.execute("SHOW TABLES").fetchall())
                if tables_a != tables_b:
                    yield f"exports/{rel}: tables {tables_a} vs {tables_b}"
                for t in sorted(set(tables_a) & set(tables_b)):
                    yield from _frame_diffs(
                        f"exports/{rel}:{t}", ca.execute(f'SELECT * FROM "{t}"').df(), cb.execute(f'SELECT * FROM "{t}"').df(), skip
                    )


def compare(a: Path, b: Path, ignore: frozenset[str] = TIMING_KEYS, drop_columns: frozenset[str] = frozenset()) -> list[str]:
    diffs = list(json_diffs(json.loads((a / "summary.json").read_text()), json.loads((b / "summary.json").read_text()), ignore=ignore))
    diffs += list(row_diffs(a / "utterances.parquet", b / "utterances.parquet"))
    diffs += list(report_diffs(a / "report.md", b / "report.md", frozenset(c.lower() for c in drop_columns)))
    diffs += list(export_diffs(a, b, ignore))
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("first", type=Path)
    ap.add_argument("second", type=Path)
    ap.add_argument("--ignore", default="", help="Comma-separated extra summary keys to skip (e.g. schema_version,packages).")
    ap.add_argument("--ignore-columns", default="", help="Comma-separated report.md table headings to drop (e.g. a new figure's).")
    args = ap.parse_args()
    ignore = TIMING_KEYS | {k for k in args.ignore.split(",") if k}
    diffs = compare(args.first, args.second, ignore, frozenset(c.strip() for c in args.ignore_columns.split(",") if c.strip()))
    for d in diffs:
        print(d)
    print(f"{len(diffs)} difference(s) between {args.first} and {args.second} (timings and timestamps ignored)")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
