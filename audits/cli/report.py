"""The ``audit report`` and ``audit query`` commands: thin wrappers that print what audits/reports builds."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional

import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from audits.cli.output import check_format, render, stdout_console
from audits.reports.build import build_report
from engine.errors import AuditError, ConfigError

_err = Console(stderr=True)
_out = stdout_console()  # full-width tables when piped


def _warn_untrusted(problem: str) -> None:
    """Report-only commands read a run whose digests do not hold, and say so loudly on stderr."""
    from rich.markup import escape

    _err.print(f"[bold red]WARNING: the figures below may not be the run's own:[/] {escape(problem)}", soft_wrap=True)


def report_command(
    run_dirs: list[Path] = typer.Argument(
        ..., help="One run directory, or several runs of the same dataset to merge (a sweep split across machines)."
    ),
    out: Path | None = typer.Option(None, "--out", help="Where to write (default: the run directory; required when merging)."),
    worst: int = typer.Option(5, "--worst", help="Worst utterances shown per model."),
    exports: bool = typer.Option(
        True, "--exports/--no-exports", help="Also write exports/ (OASR JSONL per model, slices.csv, results.duckdb)."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="Do not print the per-slice WER tables."),
    partial: bool = typer.Option(
        False,
        "--partial",
        help="A run still going (or stopped): its finished ASR units, written as summary.partial.json, report.partial.md/html.",
    ),
    fmt: str = typer.Option("table", "--format", help="table (report.md's tables), json or csv (one row per model: the models view)."),
) -> None:
    """Write report.html (self-contained, with plots), report.md and exports for one run or several merged runs."""
    try:
        from engine.options import check_number

        check_format(fmt)
        check_number(worst, "--worst", integer=True, ge=0, le=10_000)
        if partial:
            from audits.reports.partial import write_partial_report

            if len(run_dirs) != 1:
                raise ConfigError("--partial reads one run directory (the run still going); merge runs once they have finished")
            written = write_partial_report(run_dirs[0], out, worst)
            _err.print("[bold yellow]PARTIAL:[/] the ASR units finished so far; not a final summary")
        else:
            written = build_report(run_dirs, out, worst, exports, warn=_warn_untrusted)
    except AuditError as exc:
        from rich.markup import escape

        _err.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(code=2)
    if fmt != "table":  # the per-model figures for a program; the files written go to stderr
        from audits.reports.tables import summary_frames

        summary_file = written.get("summary_partial") or written.get("summary") or run_dirs[0] / "summary.json"
        frame = summary_frames(json.loads(Path(summary_file).read_text(encoding="utf-8")))["models"]
        records = json.loads(frame.to_json(orient="records"))
        _out.print(render(records, [str(c) for c in frame.columns], fmt), end="", markup=False, highlight=False, soft_wrap=True)
        for kind, path in written.items():
            _err.print(f"{kind}: {path}", soft_wrap=True, markup=False, highlight=False)
        return
    if not quiet:
        _out.print(written["report_md"].read_text(), markup=False, highlight=False, soft_wrap=True)
    for kind, path in written.items():
        _out.print(f"{kind}: {path}", soft_wrap=True)


def _print_frame(df: pd.DataFrame, fmt: str, max_rows: int) -> None:
    if fmt == "csv":
        _out.print(df.to_csv(index=False), end="", markup=False, highlight=False, soft_wrap=True)
        return
    if fmt == "json":
        _out.print(json.dumps(json.loads(df.to_json(orient="records")), indent=1), markup=False, highlight=False, soft_wrap=True)
        return
    t = Table(show_lines=False)
    for c in df.columns:
        t.add_column(str(c), justify="right" if pd.api.types.is_numeric_dtype(df[c]) else "left")

    def cell(v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "—"
        if isinstance(v, float):
            return f"{v:.6g}"
        return str(v)

    for row in df.head(max_rows).itertuples(index=False):
        t.add_row(*(cell(v) for v in row))
    _out.print(t)
    if len(df) > max_rows:
        _err.print(f"{len(df) - max_rows} more row(s); use --max-rows or --format csv")


def query_command(
    run_dir: Path = typer.Argument(..., help="A run directory (or a merged report directory)."),
    sql: str = typer.Argument(..., help="SQL over the views utterances, models, slices, gaps, probes, scored."),
    also: list[Path] | None = typer.Option(None, "--with", help="More run directories of the same dataset to merge in."),
    fmt: str = typer.Option("table", "--format", help="table, json or csv."),
    max_rows: int = typer.Option(200, "--max-rows", help="Rows shown in table format."),
    partial: bool = typer.Option(False, "--partial", help="Query a run still going: its finished ASR units (views marked partial)."),
) -> None:
    """Ad-hoc SQL with DuckDB, e.g. WER by accent for models under 1 B parameters:

    audit query runs/sweep "SELECT model, value AS accent, slices.wer FROM slices JOIN models USING (model) WHERE label='accent' AND params_m < 1000"
    """  # noqa: E501 (a command line to copy whole)
    from audits.reports.query import query

    if fmt not in ("table", "csv", "json"):
        _err.print(f"[bold red]error:[/] --format must be table, csv or json, not {fmt!r}")
        raise typer.Exit(code=2)
    try:
        from engine.options import check_number

        check_number(max_rows, "--max-rows", integer=True, ge=1)
        if partial:
            from audits.reports.partial import partial_result

            if also:
                raise ConfigError("--partial reads one run directory; drop --with")
            from audits.reports.views import query_frames

            partial_run = partial_result(run_dir)
            df = query_frames(partial_run, partial_run.table, sql)
            _err.print("[bold yellow]PARTIAL:[/] over the ASR units finished so far")
        else:
            df = query([run_dir, *(also or [])] if also else run_dir, sql, warn=_warn_untrusted)
    except AuditError as exc:
        from rich.markup import escape

        _err.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(code=2)
    _print_frame(df, fmt, max_rows)


def tracks_command(
    tracks: list[str] = typer.Argument(
        ..., help="NAME=RUN_DIR for each track (one run directory per dataset), e.g. accent=runs/sweep/accent."
    ),
    out: Path = typer.Option(..., "--out", help="Folder for tracks.json and tracks.md."),
    n_boot: int = typer.Option(1000, "--n-boot", help="Bootstrap replicates per track."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    gpu_hour_usd: Optional[float] = typer.Option(
        None,
        "--gpu-hour-usd",
        help="USD per hour of the machine the local models ran on: their cost per audio hour is this / RTFx (default: unknown).",
    ),
) -> None:
    """Average WER over tracks (different datasets, combined on purpose): per-track corpus WER with CIs, the unweighted
    mean with a CI, ranking, per-track winners."""
    from audits.asr.tracks import parse_tracks, write_tracks

    try:
        from audits.recipes import SCORING_FIELDS

        SCORING_FIELDS["n_boot"].check(n_boot, "--n-boot")  # before any run is read
        SCORING_FIELDS["seed"].check(seed, "--seed")
        from audits.asr.tracks import GPU_HOUR_FIELD

        gpu_hour_usd = GPU_HOUR_FIELD.check(gpu_hour_usd, "--gpu-hour-usd")
        written = write_tracks(parse_tracks(tracks), out, n_boot, seed, gpu_hour_usd)
    except AuditError as exc:
        from rich.markup import escape

        _err.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(code=2)
    _out.print(written.with_suffix(".md").read_text(), markup=False, highlight=False, soft_wrap=True)
    _out.print(f"tracks: {written}", soft_wrap=True)
