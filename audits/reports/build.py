"""Build a run directory's reports (report.html, report.md) and exports, from one run or several merged."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from engine.errors import ConfigError

if TYPE_CHECKING:
    from audits.result import RunResult
    from audits.schema import Summary

log = logging.getLogger(__name__)


def build_report(
    run_dirs: list[Path], out: Path | None = None, worst: int = 5, exports: bool = True, warn: Callable[[str], None] | None = None
) -> dict[str, Path]:
    """Merge the runs and write ``report.html``, ``report.md`` and the exports; returns what was written.

    One run directory: everything goes into it (or ``out``). Several: ``out`` is required, and
    also receives the merged ``summary.json`` and ``utterances.parquet`` so it is a run
    directory of its own (``audit query OUT`` works on it). A run writes its own reports from
    memory (``write_report``); this reads the files, for ``audit report``.

    The runs are read through their digests (``audits.run_dir``): one run whose summary or rows
    changed after scoring is reported anyway, each problem passed to ``warn`` (a report only shows
    what the files hold); a merge, which writes a new sealed summary.json, refuses such a run.
    """
    from audits.reports.merge import merge_results

    dirs = [Path(d) for d in run_dirs]
    if not dirs:
        raise ConfigError("give at least one run directory")
    if len(dirs) > 1:
        if out is None:
            raise ConfigError("several run directories make a merged report: give --out DIR for it (a new directory, not one of the runs)")
        if Path(out).resolve() in {d.resolve() for d in dirs}:
            raise ConfigError(f"--out {out} is one of the runs being merged; choose a new directory so the run keeps its own summary.json")
    out_dir = Path(out) if out is not None else dirs[0]
    result = merge_results(dirs, strict=len(dirs) > 1, warn=warn)
    return write_report(result, out_dir, worst, exports, merged=len(dirs) > 1)


def write_report(result: RunResult, out_dir: Path, worst: int = 5, exports: bool = True, merged: bool = False) -> dict[str, Path]:
    """Write ``report.md``, ``report.html`` and the exports of ``result`` into ``out_dir``, from memory.

    ``merged``: the result merges several runs, so ``out_dir`` also receives its ``summary.json``
    and ``utterances.parquet`` (a run directory of its own). The result's scoring pass, when it
    holds one, is reused instead of scoring the rows again.
    """
    from dataclasses import replace

    from audits.asr.cohort import cohort_markdown
    from audits.asr.summary import write_summary
    from audits.clips import source_rows
    from audits.reports.exports import write_exports
    from audits.reports.html import render_html
    from audits.reports.markdown import render_markdown
    from engine.storage import atomic_write_text, write_hashed

    summary, table = result.plain_summary, result.table
    if exports and len(table):  # two models that would share an export file: refused before anything is written
        from audits.reports.exports import export_file_names

        export_file_names(table["model"].astype(str).unique())
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    if merged:
        written["utterances"] = out_dir / "utterances.parquet"
        # the merged rows' digest (taken while writing), then the summary sealed with its own: the merged folder reads as a run
        sha256 = write_hashed(written["utterances"], lambda fh: table.to_parquet(fh, index=False))
        summary = {**summary, "rows": {"file": "utterances.parquet", "sha256": sha256, "n_rows": int(len(table))}}
        written["summary"] = write_summary(out_dir, summary)
        result = replace(result, summary=cast("Summary", summary))
    md = render_markdown(result)
    extra = cohort_markdown(summary)
    atomic_write_text(out_dir / "report.md", md + ("\n" + extra if extra else ""))
    written["report_md"] = out_dir / "report.md"
    # the page's rows (worst utterances, failures) are the source clips', as its figures are (audits.clips)
    atomic_write_text(out_dir / "report.html", render_html(result, source_rows(table), worst, scored=result.scored_frame))
    written["report_html"] = out_dir / "report.html"
    if exports:
        for kind, path in write_exports(result, table, out_dir, scored=result.scored_frame).items():
            written[kind] = path
    return written
