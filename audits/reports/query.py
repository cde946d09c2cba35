"""Ad-hoc SQL over a run directory with DuckDB.

Views:

* ``utterances``: the result rows (``utterances.parquet``, read with pyarrow so no glob character in the path is expanded);
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
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from audits.reports.views import QueryError, execute, lock_down, register_views, scored_frame, view_names
from engine.errors import ConfigError

__all__ = ["QueryError", "execute", "lock_down", "query", "register_views", "scored_frame", "view_names"]


def query(run_dir: Path | Sequence[Path], sql: str, warn: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Run ``sql`` against the views of one run directory (or of several, merged) and return the result.

    The runs are read through their digests (``audits.run_dir``); a query only shows what the files
    hold, so a run whose summary or rows changed after scoring is read anyway, each problem passed
    to ``warn`` (and logged).
    """
    import duckdb

    from audits.reports.merge import merge_runs

    dirs = [Path(run_dir)] if isinstance(run_dir, (str, Path)) else [Path(d) for d in run_dir]
    if not sql.strip():
        raise ConfigError("empty SQL; try: SELECT model, wer, ci_lo, ci_hi FROM models ORDER BY wer")
    wants_scored = re.search(r"\bscored\b", sql, flags=re.IGNORECASE) is not None
    summary, table = merge_runs(dirs, strict=False, warn=warn)
    con = duckdb.connect()
    try:
        register_views(con, summary, table, scored=wants_scored)
        lock_down(con)
        return execute(con, sql)
    finally:
        con.close()
