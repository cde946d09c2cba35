"""``--tracker`` on ``audit run`` / ``audit sweep``, and ``audit track RUN``: a finished run logged to experiment trackers."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

import typer
from rich.console import Console
from rich.markup import escape

from engine.errors import AuditError

_err = Console(stderr=True)
_out = Console()

TRACKER_HELP = "Log the finished run to this experiment tracker (mlflow, wandb, or a plug-in's); repeatable. See docs/trackers.md."
TRACKER_OPT_HELP = "A tracker's option as TRACKER.KEY=VALUE (e.g. mlflow.tracking_uri=http://host:5000, wandb.mode=offline); repeatable."


def chosen_trackers(names: Optional[Sequence[str]], options: Optional[Sequence[str]]) -> list[Any]:
    """The trackers the flags choose, checked before the run starts (unknown names, options, a missing package)."""
    if not names:
        if options:
            from engine.errors import ConfigError

            raise ConfigError("--tracker-opt needs --tracker (e.g. --tracker mlflow --tracker-opt mlflow.experiment=asr)")
        return []
    from audits.trackers import make_trackers

    return make_trackers(list(names), list(options or ()))


def log_to_trackers(trackers: Sequence[Any], run_dirs: Sequence[Path]) -> bool:
    """Log each finished run directory to every tracker; print where each went or why not. True when every one worked."""
    if not trackers:
        return True
    from audits.trackers import log_run_to_trackers

    ok = True
    for run_dir in run_dirs:
        for o in log_run_to_trackers(trackers, run_dir):
            if o.ok:
                where = ", ".join(f"{k} {v}" for k, v in o.where.items())
                _out.print(f"tracker {o.tracker}: {where}", markup=False, highlight=False, soft_wrap=True)
            else:
                ok = False
                _err.print(
                    f"[bold red]tracker {escape(o.tracker)} failed:[/] {escape(o.error)}; the results stay in {escape(str(run_dir))}; "
                    f"log them again with: audit track {escape(str(run_dir))} --tracker {escape(o.tracker)}",
                    soft_wrap=True,
                )
    return ok


def track_command(
    run_dirs: list[Path] = typer.Argument(..., help="Finished run directories (each with summary.json) to log."),
    tracker: list[str] = typer.Option(..., "--tracker", metavar="NAME", help=TRACKER_HELP),
    tracker_opt: Optional[list[str]] = typer.Option(None, "--tracker-opt", metavar="TRACKER.KEY=VALUE", help=TRACKER_OPT_HELP),
) -> None:
    """Log finished runs to experiment trackers (what `--tracker` on `run` and `sweep` does when the run ends)."""
    from engine.backends.hosted.scrub import scrub

    try:
        trackers = chosen_trackers(tracker, tracker_opt)
    except AuditError as exc:
        _err.print(f"[bold red]error:[/] {escape(scrub(str(exc)))}", soft_wrap=True)
        raise typer.Exit(code=2) from None
    if not log_to_trackers(trackers, run_dirs):
        raise typer.Exit(code=1)
