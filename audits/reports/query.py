"""Ad-hoc SQL over a run directory with DuckDB.

Views:

* ``utterances``: the result rows (``utterances.parquet``, read in place by DuckDB);
* ``models``: one row per model from ``summary.json`` (``params_m``, ``wer``, ``ci_lo``, ``ci_hi``, ``rtfx``, ...);
* ``slices``: one row per model and ``label=value`` slice (``label``, ``value``, ``wer``, ``ci_lo``, ...);
* ``gaps``: fairness gaps per model; ``pairs``: paired comparisons of every two models;
* each audit section's tables (``AuditSection.tables``), whether or not the section ran;
* ``scored`` (built only when the SQL names it): the rows with normalized text and per-row
  ``n_words``/``word_errors``, so corpus WER of any grouping is ``sum(word_errors)/sum(n_words)``.

Example: ``SELECT model, value AS accent, slices.wer FROM slices JOIN models USING (model)
WHERE label = 'accent' AND params_m < 1000``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from audits.reports.tables import summary_frames
from engine.errors import AuditError, ConfigError


def view_names() -> list[str]:
    """Every view a query can read: the rows, the summary's tables (sections' included), ``scored``."""
    return ["utterances", *summary_frames({}), "scored"]


class QueryError(AuditError):
    """The SQL could not run; the message is DuckDB's, plus the views that exist."""


def scored_frame(summary: Mapping[str, Any], table: pd.DataFrame) -> pd.DataFrame:
    """Rows with ``ref_norm``, ``hyp_norm``, ``n_words``, ``word_errors``, ... (normalized with the run's normalizer)."""
    from audits.asr.scoring import score_table
    from normalizers import get_normalizer

    return score_table(table, get_normalizer((summary.get("normalizer") or {}).get("name", "whisper-english"))).frame


def register_views(con: Any, summary: Mapping[str, Any], table: pd.DataFrame | Path, scored: bool = False) -> None:
    """Create the views on a DuckDB connection; ``table`` is a DataFrame or a Parquet path/folder."""
    if isinstance(table, Path):
        src = str(table / "**" / "*.parquet") if table.is_dir() else str(table)
        # a table, not a view: the user's SQL runs with file access switched off (see ``query``)
        con.execute(f"CREATE OR REPLACE TEMP TABLE utterances AS SELECT * FROM read_parquet('{_sql_str(src)}', union_by_name = true)")
    else:
        con.register("_utterances_df", table)
        con.execute("CREATE OR REPLACE TEMP VIEW utterances AS SELECT * FROM _utterances_df")
    for name, df in summary_frames(summary).items():
        con.register(f"_{name}_df", df)
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM _{name}_df")
    if scored:
        rows = table if isinstance(table, pd.DataFrame) else con.execute("SELECT * FROM utterances").df()
        con.register("_scored_df", scored_frame(summary, rows))
        con.execute("CREATE OR REPLACE TEMP VIEW scored AS SELECT * FROM _scored_df")


def lock_down(con: Any) -> None:
    """No file system or network from the user's SQL: the views are all it may read, and it
    cannot write files, attach databases or turn the setting back on."""
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def _sql_str(s: str) -> str:
    return s.replace("'", "''")


def query_frames(summary: Mapping[str, Any], table: pd.DataFrame, sql: str) -> pd.DataFrame:
    """Run ``sql`` against the views of a result held in memory (``RunResult.query``)."""
    import duckdb

    if not sql.strip():
        raise ConfigError("empty SQL; try: SELECT model, wer, ci_lo, ci_hi FROM models ORDER BY wer")
    con = duckdb.connect()
    try:
        register_views(con, summary, table, scored=re.search(r"\bscored\b", sql, flags=re.IGNORECASE) is not None)
        lock_down(con)
        return _execute(con, sql)
    finally:
        con.close()


def _execute(con: Any, sql: str) -> pd.DataFrame:
    import duckdb

    try:
        return con.execute(sql).df()
    except duckdb.Error as exc:
        raise QueryError(f"{exc}\nviews: {', '.join(view_names())} (see `DESCRIBE <view>`)") from None


def query(run_dir: Path | Sequence[Path], sql: str) -> pd.DataFrame:
    """Run ``sql`` against the views of one run directory (or of several, merged) and return the result."""
    import duckdb

    from audits.asr.summary import load_summary
    from audits.reports.merge import merge_runs

    dirs = [Path(run_dir)] if isinstance(run_dir, (str, Path)) else [Path(d) for d in run_dir]
    if not sql.strip():
        raise ConfigError("empty SQL; try: SELECT model, wer, ci_lo, ci_hi FROM models ORDER BY wer")
    wants_scored = re.search(r"\bscored\b", sql, flags=re.IGNORECASE) is not None
    con = duckdb.connect()
    try:
        if len(dirs) == 1:
            summary = load_summary(dirs[0])
            parquet = dirs[0] / "utterances.parquet"
            if not parquet.exists():
                raise ConfigError(f"{dirs[0]}: no utterances.parquet (is this a run directory written by `audit run`?)")
            register_views(con, summary, parquet, scored=wants_scored)
        else:
            summary, table = merge_runs(dirs)
            register_views(con, summary, table, scored=wants_scored)
        lock_down(con)
        return _execute(con, sql)
    finally:
        con.close()
