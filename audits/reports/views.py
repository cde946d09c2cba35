"""The views of a result in DuckDB: the rows, the summary's tables (every section's included), ``scored``.

``audit query`` (``audits.reports.query``) runs SQL over a run directory's views;
``RunResult.query`` over a result held in memory. Both register the views here and lock the
connection down before the user's SQL runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from audits.reports.tables import summary_frames
from engine.errors import AuditError, ConfigError

if TYPE_CHECKING:
    from audits.result import RunResult


def view_names() -> list[str]:
    """Every view a query can read: the rows, the summary's tables (sections' included), ``scored``."""
    return ["utterances", *summary_frames({}), "scored"]


class QueryError(AuditError):
    """The SQL could not run; the message is DuckDB's, plus the views that exist."""


def scored_frame(summary: Mapping[str, Any], table: pd.DataFrame) -> pd.DataFrame:
    """Rows with ``ref_norm``, ``hyp_norm``, ``n_words``, ``word_errors``, ... (normalized with the run's normalizer)."""
    from audits.asr.scoring import score_table
    from audits.normalizing import get_normalizer

    return score_table(table, get_normalizer((summary.get("normalizer") or {}).get("name", "whisper-english"))).frame


def register_views(con: Any, source: RunResult | Mapping[str, Any], table: pd.DataFrame | Path, scored: bool = False) -> None:
    """Create the views on a DuckDB connection; ``table`` is a DataFrame or a Parquet path/folder."""
    from audits.result import RunResult

    run = RunResult.of_summary(source)
    summary = run.plain_summary
    if isinstance(table, Path):
        # Read with pyarrow, not DuckDB's read_parquet: DuckDB expands glob characters in a path,
        # so a run directory literally named ``run[1]`` would read ``run1``'s rows.
        import pyarrow as pa
        import pyarrow.parquet as pq

        files = sorted(p for p in table.rglob("*.parquet") if p.is_file()) if table.is_dir() else [table]
        parts = [pq.read_table(f) for f in files]
        arrow = pa.concat_tables(parts, promote_options="default") if len(parts) > 1 else parts[0]
        con.register("_utterances_arrow", arrow)
        # a table, not a view: the user's SQL runs with file access switched off (see ``query``)
        con.execute("CREATE OR REPLACE TEMP TABLE utterances AS SELECT * FROM _utterances_arrow")
        con.unregister("_utterances_arrow")
    else:
        con.register("_utterances_df", table)
        con.execute("CREATE OR REPLACE TEMP VIEW utterances AS SELECT * FROM _utterances_df")
    for name, df in summary_frames(run).items():
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


def query_frames(source: RunResult | Mapping[str, Any], table: pd.DataFrame, sql: str) -> pd.DataFrame:
    """Run ``sql`` against the views of a result held in memory (``RunResult.query``)."""
    import duckdb

    if not sql.strip():
        raise ConfigError("empty SQL; try: SELECT model, wer, ci_lo, ci_hi FROM models ORDER BY wer")
    con = duckdb.connect()
    try:
        register_views(con, source, table, scored=re.search(r"\bscored\b", sql, flags=re.IGNORECASE) is not None)
        lock_down(con)
        return execute(con, sql)
    finally:
        con.close()


def execute(con: Any, sql: str) -> pd.DataFrame:
    """The user's SQL on a locked-down connection; DuckDB's error becomes ``QueryError`` listing the views."""
    import duckdb

    try:
        return con.execute(sql).df()
    except duckdb.Error as exc:
        raise QueryError(f"{exc}\nviews: {', '.join(view_names())} (see `DESCRIBE <view>`)") from None
