"""Build a run directory's reports (report.html, report.md) and exports, from one run or several merged."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from engine.errors import ConfigError

log = logging.getLogger(__name__)


def build_report(run_dirs: list[Path], out: Path | None = None, worst: int = 5, exports: bool = True, scored: pd.DataFrame | None = None) -> dict[str, Path]:
    """Merge the runs and write ``report.html``, ``report.md`` and the exports; returns what was written.

    One run directory: everything goes into it (or ``out``). Several: ``out`` is required, and
    also receives the merged ``summary.json`` and ``utterances.parquet`` so it is a run
    directory of its own (``audit query OUT`` works on it). ``scored`` is the scoring pass the
    summary was built from (one run only); given, the report reuses it instead of scoring again.
    """
    from audits.asr.cohort import cohort_markdown
    from audits.asr.summary import write_summary
    from audits.reports.exports import write_exports
    from audits.reports.html import render_html
    from audits.reports.markdown import render_markdown
    from audits.reports.merge import merge_runs
    from engine.store import atomic_write_text

    dirs = [Path(d) for d in run_dirs]
    if not dirs:
        raise ConfigError("give at least one run directory")
    if len(dirs) > 1:
        if out is None:
            raise ConfigError("several run directories make a merged report: give --out DIR for it (a new directory, not one of the runs)")
        if Path(out).resolve() in {d.resolve() for d in dirs}:
            raise ConfigError(f"--out {out} is one of the runs being merged; choose a new directory so the run keeps its own summary.json")
    out_dir = Path(out) if out is not None else dirs[0]
    summary, table = merge_runs(dirs)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    if len(dirs) > 1:
        written["summary"] = write_summary(out_dir, summary)
        tmp = out_dir / ".utterances.parquet.tmp"
        table.to_parquet(tmp, index=False)
        tmp.replace(out_dir / "utterances.parquet")
        written["utterances"] = out_dir / "utterances.parquet"
    md = render_markdown(summary)
    extra = cohort_markdown(summary)
    atomic_write_text(out_dir / "report.md", md + ("\n" + extra if extra else ""))
    written["report_md"] = out_dir / "report.md"
    atomic_write_text(out_dir / "report.html", render_html(summary, table, worst, scored=scored if len(dirs) == 1 else None))
    written["report_html"] = out_dir / "report.html"
    if exports:
        for kind, path in write_exports(summary, table, out_dir).items():
            written[kind] = path
    return written


