"""The ``audit`` command line."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any, Literal, Optional

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from audits.cli.output import stdout_console
from audits.cli.progress_log import UnitEta, eta_column
from audits.cli.track import TRACKER_HELP, TRACKER_OPT_HELP, chosen_trackers, log_to_trackers, track_command
from engine.backends.hosted.scrub import install_log_scrubber, scrub
from engine.errors import AuditError, ConfigError

app = typer.Typer(help="Batch ASR robustness and acoustic audit engine.", no_args_is_help=True, add_completion=False)
corpus_app = typer.Typer(help="Build corpora (the embedded demo corpus and the demo conversation set).", no_args_is_help=True)
list_app = typer.Typer(help="List models, recipes and backends.", no_args_is_help=True)
probe_app = typer.Typer(help="Benchmark-optimization probes that run from stored predictions.", no_args_is_help=True)
app.add_typer(corpus_app, name="corpus")
app.add_typer(list_app, name="list")
app.add_typer(probe_app, name="probe")

console = Console(stderr=True)
out_console = stdout_console()  # full-width tables when piped
log = logging.getLogger("audit")


def _print_version(value: bool) -> None:
    """``audit --version``: the version summary.json records, then exit."""
    if value:
        from audits.version import version

        out_console.print(f"audit-engine {version()}", markup=False, highlight=False)
        raise typer.Exit()


@app.callback()
def main(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging."),
    show_version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Set up logging once for every command."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(message)s",
        handlers=[RichHandler(console=console, show_path=False, rich_tracebacks=False)],
        force=True,
    )
    install_log_scrubber()
    for noisy in ("faster_whisper", "ctranslate2", "urllib3", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _fail(exc: Exception) -> None:
    from rich.markup import escape

    console.print(f"[bold red]error:[/] {escape(scrub(str(exc)))}", soft_wrap=True)
    raise typer.Exit(code=2)


def _plain_output() -> bool:
    """True when stdout is not a terminal (a log, a pipe, CI): progress then goes out as lines."""
    return not (sys.stdout.isatty() and console.is_terminal)


def _line_progress() -> Any:
    """Plain progress lines on stdout when it is not a terminal, else None (the bar is drawn)."""
    from audits.cli.progress_log import LineProgress

    if not _plain_output():
        return None
    return LineProgress(lambda line: out_console.print(line, markup=False, highlight=False, soft_wrap=True))


def _progress() -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        eta_column(),
        console=console,
        transient=False,
        disable=_plain_output(),
    )


@app.command("run")
def run_cmd(
    recipe: str = typer.Argument(..., help="Recipe name (audit list recipes; e.g. demo) or a YAML path."),
    dataset: Optional[str] = typer.Option(
        None, "--dataset", help="Replace the recipe's dataset (manifest, CSV/TSV, Parquet dir, HF dir/id, predictions dir)."
    ),
    reader: Optional[str] = typer.Option(
        None, "--reader", help="Dataset reader (nemo, csv, tsv, parquet, hf, oasr-predictions, or a plug-in's); default: detected."
    ),
    models: Optional[str] = typer.Option(
        None, "--models", help="Comma-separated registry names or hf:ORG/NAME[@REVISION] hub checkpoints replacing the recipe's models."
    ),
    reader_opt: Optional[list[str]] = typer.Option(
        None,
        "--reader-opt",
        help="Reader option key=value (repeatable): split, config, text_column, audio_column, speaker_column, ...; see docs/datasets.md.",
    ),
    out: Optional[Path] = typer.Option(None, "--out", help="Run directory (default: runs/<recipe>). Re-running into it resumes."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Use only the first N utterances."),
    normalizer: Optional[str] = typer.Option(
        None,
        "--normalizer",
        help="Score with this normalizer instead of the recipe's (whisper-english, open-asr-leaderboard, basic, identity, ...).",
    ),
    engine: str = typer.Option(
        "inprocess",
        "--engine",
        help="inprocess (one process), ray (actors; local or --address), or a plug-in runner (audit list backends).",
    ),
    address: Optional[str] = typer.Option(
        None,
        "--address",
        help="Ray cluster address (with the default engine: ray; a runner that takes an address keeps it), e.g. 10.0.0.1:6379 or auto.",
    ),
    workers: Optional[int] = typer.Option(None, "--workers", help="Cap on Ray actors per model on CPU."),
    runtime_env: Optional[str] = typer.Option(
        None,
        "--runtime-env",
        help="Ray: the job's runtime environment, inline JSON or a YAML/JSON file (env_vars, working_dir, pip, ...); see docs/cluster.md.",
    ),
    resume: bool = typer.Option(
        True, "--resume/--no-resume", help="Skip finished (model, shard) units in --out (default). --no-resume refuses a non-empty --out."
    ),
    tracker: Optional[list[str]] = typer.Option(None, "--tracker", metavar="NAME", help=TRACKER_HELP),
    tracker_opt: Optional[list[str]] = typer.Option(None, "--tracker-opt", metavar="TRACKER.KEY=VALUE", help=TRACKER_OPT_HELP),
) -> None:
    """Run a recipe: transcribe, store raw rows, score per slice, write summary.json, report.md and report.html."""
    from audits.recipes import load_recipe, with_normalizer, with_overrides, with_reader_options

    try:
        rec = load_recipe(recipe)
        rec = with_overrides(rec, dataset, [m.strip() for m in models.split(",") if m.strip()] if models else None, limit, reader)
        rec = with_reader_options(rec, reader_opt)
        _check_hub_models(rec.models)
        if normalizer is not None:
            rec = with_normalizer(rec, normalizer)
        out_dir = out or Path("runs") / rec.name
        trackers = chosen_trackers(tracker, tracker_opt)  # checked before any work
        _run_with_progress(rec, out_dir, engine, address, workers, resume, runtime_env=_runtime_env(runtime_env))
    except AuditError as exc:
        _fail(exc)
    if not log_to_trackers(trackers, [out_dir]):
        raise typer.Exit(code=1)


def _check_hub_models(names: Any) -> None:
    """``hf:ORG/NAME[@REVISION]`` models resolved (config read, family detected, refusals made) before the dataset opens."""
    from engine.model_registry import resolve_models

    hub = [n for n in names if str(n).startswith("hf:")]
    if hub:
        resolve_models(hub, {})


def _run_with_progress(
    rec: Any,
    out_dir: Path,
    engine: str,
    address: Optional[str],
    workers: Optional[int],
    resume: bool,
    extra: Optional[dict[str, Any]] = None,
    memory: Optional[dict[str, Any]] = None,
    dataset: Any = None,
    runtime_env: Optional[dict[str, Any]] = None,
) -> dict[str, Any]:
    """Run with a progress bar; ``extra`` (a sweep's selection) goes into the summary before it is scored,
    ``dataset`` is the recipe's dataset when the caller opened it already."""
    from audits.pipeline import run_audit
    from engine.engine import EngineOptions, runner_for_address
    from engine.errors import ConfigError

    if not resume and (out_dir / "markers").exists():
        raise ConfigError(f"{out_dir} already holds results and --no-resume was given; choose a new --out or drop --no-resume")
    # typed flags are checked once, by run_audit, before the dataset opens or the run directory is touched
    eng = EngineOptions(
        kind=runner_for_address(engine, address), address=address, workers=workers, runtime_env=runtime_env, **(memory or {})
    )
    lines = _line_progress()
    with _progress() as prog:
        corpus_task = None
        task = prog.add_task("units", total=None, status="")
        stats: dict[str, Any] = {"audio": {}, "infer": {}, "total": 0}
        eta = UnitEta()

        def corpus_progress(done: int, total: int) -> None:
            nonlocal corpus_task
            if lines is not None:
                lines.corpus(done, total)
            if corpus_task is None:
                corpus_task = prog.add_task("demo corpus", total=total, status="synthesizing")
            prog.update(corpus_task, completed=done)

        def on_progress(event: str, n: int, info: dict[str, Any]) -> None:
            if lines is not None:
                lines(event, n, info)
            if event == "loading":
                eta.loading()
                prog.update(task, status=f"loading {info['model']}")
            elif event == "start":
                eta.start(info.get("units"))
                stats["total"] = n
                prog.update(
                    task, total=n, completed=0, description=str(info.get("pass") or info.get("kind") or "units"), status="", eta=None
                )
            elif event in ("unit", "skip"):
                if event == "skip":
                    eta.skipped(info)
                if event == "unit":
                    m = info["model"]
                    eta.finished(m, str(info.get("shard")), info["rows"])
                    for r in info["rows"]:
                        if r.get("infer_s") is not None:
                            stats["audio"][m] = stats["audio"].get(m, 0.0) + (r.get("duration_s") or 0.0)
                            stats["infer"][m] = stats["infer"].get(m, 0.0) + r["infer_s"]
                    rt = stats["audio"].get(m, 0) / stats["infer"][m] if stats["infer"].get(m) else 0.0
                    prog.update(task, status=f"{m} RTFx {rt:.1f}")
                prog.advance(task, n)
                prog.update(task, eta=eta.eta_every(stats["total"]))

        result = run_audit(rec, out_dir, progress=on_progress, corpus_progress=corpus_progress, engine=eng, extra=extra, dataset=dataset)
    summary: dict[str, Any] = dict(result.plain_summary)
    _print_overview(summary)
    failed = {m: v.get("n_failed", 0) for m, v in summary["models"].items() if v.get("n_failed")}
    if failed:
        console.print(f"[yellow]failed rows:[/] {failed} (reasons in summary.json → models.<name>.failures)")
    unavailable = {m: v.get("error") for m, v in summary["models"].items() if v.get("status") not in ("loaded", None)}
    for m, why in unavailable.items():
        console.print(f"[yellow]{m} did not run:[/] {scrub(str(why))}", soft_wrap=True)
    out_console.print(
        f"Results: {out_dir / 'summary.json'}, {out_dir / 'utterances.parquet'}, {out_dir / 'report.md'}, {out_dir / 'report.html'}",
        soft_wrap=True,
    )
    return summary


@app.command("sweep")
def sweep_cmd(
    recipe: str = typer.Argument(..., help="Recipe name or YAML path whose dataset and scoring are used."),
    models: str = typer.Option(
        "all",
        "--models",
        help="all | a comma-separated list (registry names, hf:ORG/NAME[@REVISION]) | a registry tag (e.g. local, study, whisper).",
    ),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Replace the recipe's dataset."),
    reader_opt: Optional[list[str]] = typer.Option(
        None,
        "--reader-opt",
        help="Reader option key=value (repeatable): split, config, text_column, audio_column, speaker_column, ...; see docs/datasets.md.",
    ),
    out: Optional[Path] = typer.Option(None, "--out", help="Run directory (default: runs/sweep-<recipe>); re-running resumes."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Use only the first N utterances."),
    normalizer: Optional[str] = typer.Option(
        None,
        "--normalizer",
        help="Score with this normalizer (default: the recipe's; for --models rweq, open-asr-leaderboard, the study's).",
    ),
    engine: str = typer.Option("inprocess", "--engine", help="A runner: inprocess, ray, or a plug-in's (audit list backends)."),
    address: Optional[str] = typer.Option(
        None, "--address", help="Ray cluster address (with the default engine: ray; a runner that takes an address keeps it)."
    ),
    workers: Optional[int] = typer.Option(None, "--workers", help="Cap on Ray actors per model on CPU."),
    runtime_env: Optional[str] = typer.Option(
        None,
        "--runtime-env",
        help="Ray: the job's runtime environment, inline JSON or a YAML/JSON file (env_vars, working_dir, pip, ...); see docs/cluster.md.",
    ),
    max_models_loaded: Optional[int] = typer.Option(
        None, "--max-models-loaded", help="In-process: at most N models loaded at once (default: as many as fit the memory budget)."
    ),
    memory_budget_mb: Optional[float] = typer.Option(
        None, "--memory-budget-mb", help="In-process: memory loaded models may take (default: 60% of the RAM available at start)."
    ),
    tracks: Optional[str] = typer.Option(
        None, "--tracks", help="Several datasets, one run each: NAME=PATH,NAME=PATH; then tracks.json/tracks.md with the Average WER."
    ),
    gpu_hour_usd: Optional[float] = typer.Option(
        None,
        "--gpu-hour-usd",
        help="With --tracks: USD per hour of the machine local models run on, for their cost per audio hour (default: the recipe's "
        "profiles.gpu_hour_usd, else unknown).",
    ),
    check: bool = typer.Option(
        False,
        "--check",
        help="Only ask the Ray workers whether each model can run there (one task per model, with its resources): family, extra, weights; "
        "run nothing.",
    ),
    smoke: bool = typer.Option(
        False,
        "--smoke",
        help="With --check: load each runnable model in a fresh worker and transcribe one clip (load seconds, peak memory).",
    ),
    tracker: Optional[list[str]] = typer.Option(None, "--tracker", metavar="NAME", help=TRACKER_HELP),
    tracker_opt: Optional[list[str]] = typer.Option(None, "--tracker-opt", metavar="TRACKER.KEY=VALUE", help=TRACKER_OPT_HELP),
) -> None:
    """Run every selected registry model into one run directory; only models that definitely cannot run are skipped
    (listed with the reason)."""
    from audits.recipes import load_recipe, sweep_normalizer, with_normalizer, with_overrides, with_reader_options
    from engine.model_registry import load_model_registry, resolve_models
    from engine.sweep import plan_sweep, select_models

    try:
        from engine.engine import EngineOptions, runner_for_address

        trackers = chosen_trackers(tracker, tracker_opt)  # checked before any work
        memory: dict[str, Any] = {"max_models_loaded": max_models_loaded, "memory_budget_mb": memory_budget_mb}
        env = _runtime_env(runtime_env)
        EngineOptions(
            kind=runner_for_address(engine, address), address=address, workers=workers, runtime_env=env, **memory
        ).check()  # flags before the sweep's own work (datasets, model plan); each run checks its own once
        reg = load_model_registry()
        chosen = select_models(reg, models)
        hub = [n for n in chosen if n.startswith("hf:") and n not in reg]  # hub checkpoints: entries from their config.json
        reg = {**reg, **{e.name: e for e in resolve_models(hub, reg)}}
        rec = with_reader_options(with_overrides(load_recipe(recipe), dataset, chosen, limit), reader_opt)
        norm_name, why = sweep_normalizer(rec, models, normalizer)
        rec = with_normalizer(rec, norm_name)
        if address:
            from engine.run.cluster import check_address

            check_address(address)  # nothing listening there: stop in seconds, before any work
        if smoke and not check:
            raise ConfigError("--smoke goes with --check (audit sweep RECIPE --models ... --check --smoke)")
        if why and not check:
            console.print(f"[yellow]normalizer:[/] {escape(why)}", soft_wrap=True)
        if check:
            from audits.cli.sweep_check import run_check

            run_check(reg, chosen, address, rec, smoke, console, out_console, runtime_env=env)
            return
        track_paths = _parse_track_datasets(tracks) if tracks else {}
        from audits.asr.tracks import GPU_HOUR_FIELD

        where = "--gpu-hour-usd" if gpu_hour_usd is not None else f"recipe '{rec.name}': profiles.gpu_hour_usd"
        if gpu_hour_usd is None:
            gpu_hour_usd = rec.section("profiles").get("gpu_hour_usd")
        gpu_hour_usd = GPU_HOUR_FIELD.check(gpu_hour_usd, where)  # before any track runs
        opened = {
            name: _check_dataset(with_reader_options(with_overrides(rec, path, None, limit), reader_opt), name)
            for name, path in track_paths.items()
        }
        if not track_paths:
            opened[""] = _check_dataset(rec)
        plan = plan_sweep(reg, chosen, explicit=models.strip() != "all")
        t = Table(title=f"sweep: {len(plan.run)} to run, {len(plan.skipped)} skipped")
        t.add_column("model")
        t.add_column("skipped because")
        for n, why in plan.skipped.items():
            t.add_row(n, escape(why))
        out_console.print(t)
        for n, why in plan.advisory.items():
            console.print(f"[yellow]{n}:[/] {escape(why)}; the process that loads it decides", soft_wrap=True)
        if not plan.run:
            raise ConfigError("no selected model can run: every one was skipped for the reason listed above")
        rec = with_overrides(rec, None, plan.run, None)
        out_dir = out or Path("runs") / f"sweep-{rec.name}"
        extra = {"sweep": {"selection": models, "run": plan.run, "skipped": plan.skipped, "not_checked_by_driver": plan.advisory}}
        if not track_paths:
            _run_with_progress(rec, out_dir, engine, address, workers, True, extra, memory, opened.pop(""), runtime_env=env)
            tracked = [out_dir]
        else:
            from audits.asr.tracks import tracks_markdown, write_tracks

            for name, path in track_paths.items():
                console.print(f"[bold]track {escape(name)}:[/] {escape(path)}", soft_wrap=True)
                track_rec = with_reader_options(with_overrides(rec, path, None, limit), reader_opt)
                _run_with_progress(
                    track_rec, out_dir / name, engine, address, workers, True, extra, memory, opened.pop(name), runtime_env=env
                )
            written = write_tracks({n: out_dir / n for n in track_paths}, out_dir, rec.scoring.n_boot, rec.scoring.seed, gpu_hour_usd)
            out_console.print(tracks_markdown(json.loads(written.read_text())), markup=False, highlight=False, soft_wrap=True)
            tracked = [out_dir / n for n in track_paths]
    except AuditError as exc:
        _fail(exc)
    if not log_to_trackers(trackers, tracked):
        raise typer.Exit(code=1)


def _runtime_env(text: Optional[str]) -> Optional[dict[str, Any]]:
    """``--runtime-env`` read and checked (inline JSON or a YAML/JSON file) before anything runs."""
    if text is None:
        return None
    from engine.run.ray_setup import load_runtime_env

    return load_runtime_env(text)


def _parse_track_datasets(text: str) -> dict[str, str]:
    """``NAME=PATH,NAME=PATH`` -> {name: dataset path}; names are run-directory names, checked
    (and duplicates refused) before any track runs."""
    from audits.asr.tracks import check_track_name

    out: dict[str, str] = {}
    for item in [t.strip() for t in text.split(",") if t.strip()]:
        name, sep, path = item.partition("=")
        name, path = name.strip(), path.strip()
        if not sep or not name or not path:
            raise ConfigError(f"--tracks entry '{item}': write NAME=PATH (e.g. accent=data/accent/manifest.jsonl)")
        if name in out:
            raise ConfigError(f"--tracks: track '{name}' is named twice")
        if path in out.values():
            raise ConfigError(f"--tracks: dataset '{path}' is given twice; each track is its own dataset")
        check_track_name(name, "--tracks")
        out[name] = path
    if len(out) < 2:
        raise ConfigError("--tracks needs at least two NAME=PATH entries (one dataset per track)")
    return out


def _check_dataset(rec: Any, track: Optional[str] = None) -> Any:
    """Open the sweep's dataset once before any model is checked or loaded: a dataset that does not
    exist (or cannot be read) stops the sweep here, naming it. The run then uses the opened dataset
    (opened and fingerprinted once); the built-in demo corpus is built and opened by the run (None)."""
    from audits.pipeline import open_recipe_dataset

    if rec.dataset.path.startswith("builtin:"):
        return None
    try:
        return open_recipe_dataset(rec)
    except AuditError as exc:
        where = f"track '{track}': " if track else ""
        raise ConfigError(f"sweep '{rec.name}': {where}dataset '{rec.dataset.path}': {exc}") from exc


def _print_overview(summary: dict[str, Any]) -> None:
    from audits.reports.formatting import interval_text

    if not summary.get("models"):
        return  # a recipe without ASR models (speaker, emotion): no empty WER table
    t = Table(
        title=f"{summary.get('recipe', {}).get('name', '')} on {summary.get('dataset', {}).get('name', '')} "
        f"({summary.get('normalizer', {}).get('name')})"
    )
    for col in ("model", "status", "WER %", "95% CI", "CER %", "RTFx", "utts", "failed"):
        t.add_column(col, justify="right" if col not in ("model", "status") else "left")
    for name, m in sorted(summary.get("models", {}).items()):
        t.add_row(
            name,
            str(m.get("status", "")),
            "—" if m.get("wer") is None else f"{100 * m['wer']:.1f}",
            escape(interval_text(m)),
            "—" if m.get("cer") is None else f"{100 * m['cer']:.1f}",
            "—" if m.get("rtfx") is None else f"{m['rtfx']:.1f}",
            str(m.get("n_utts", 0)),
            str(m.get("n_failed", 0)),
        )
    out_console.print(t)


def _register_report_commands() -> None:
    from audits.cli.report import query_command, report_command, tracks_command

    app.command(
        "report", help="Write report.html, report.md and exports for one run (or a merged report over several); print the slice table."
    )(report_command)
    app.command(
        "tracks",
        help="Average WER over tracks (one run per dataset): per-track WER with CIs, the unweighted mean with a CI, ranking, winners.",
    )(tracks_command)
    app.command("query", help="Ad-hoc SQL (DuckDB) over a run's results: views utterances, models, slices, gaps, probes.")(query_command)
    app.command("track", help="Log finished runs to experiment trackers (MLflow, Weights & Biases, plug-ins).")(track_command)


_register_report_commands()


@app.command("schema")
def schema_cmd(name: str = typer.Argument(..., help="recipe or summary.")) -> None:
    """Print the JSON Schema of a recipe file or of summary.json, generated from the code's declarations (docs/schemas/)."""
    from audits.json_schemas import schema_text

    try:
        text = schema_text(name)
    except AuditError as exc:
        _fail(exc)
        return
    out_console.print(text, end="", markup=False, highlight=False, soft_wrap=True)


@corpus_app.command("demo")
def corpus_demo_cmd(
    out: Optional[Path] = typer.Option(
        None, "--out", help="Folder for shards, audio and manifest (default: data/demo, or data/demo-small with --subset small)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed: the same seed gives the same corpus."),
    n: Optional[int] = typer.Option(None, "--n", help="Number of utterances (default: the full design)."),
    force: bool = typer.Option(False, "--force", help="Rebuild even if a matching corpus exists."),
    subset: str = typer.Option("full", "--subset", help="full (every clip of the design) or small (the quick demo's balanced subset)."),
) -> None:
    """Build the deterministic synthetic demo corpus with espeak-ng, Flite and Kokoro voices."""
    from engine.corpus.demo import build_demo_corpus
    from engine.options import check_number

    try:
        check_number(seed, "--seed", integer=True, ge=0, le=2**32 - 1)
        if n is not None:
            check_number(n, "--n", integer=True, ge=1, le=1_000_000)
        lines = _line_progress()
        with _progress() as prog:
            task = prog.add_task("demo corpus", total=None, status="synthesizing")

            def cb(done: int, total: int) -> None:
                if lines is not None:
                    lines.corpus(done, total)
                prog.update(task, completed=done, total=total)

            target = out or Path("data/demo-small" if subset == "small" else "data/demo")
            corpus = build_demo_corpus(target, seed=seed, n_utts=n, progress=cb, force=force, subset=subset)
    except AuditError as exc:
        _fail(exc)
        return
    out_console.print(f"Demo corpus: {corpus.n_utts} utterances in {corpus.root} (manifest {corpus.manifest})")


@corpus_app.command("conversation")
def corpus_conversation_cmd(
    out: Path = typer.Option(
        Path("data/conversation"), "--out", help="Folder for audio, manifest.jsonl, reference.rttm and reference.json."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed: the same seed gives the same set."),
    n: int = typer.Option(20, "--n", help="Number of recordings."),
    min_s: float = typer.Option(60.0, "--min-s", help="Shortest recording, seconds."),
    max_s: float = typer.Option(120.0, "--max-s", help="Longest recording, seconds."),
    force: bool = typer.Option(False, "--force", help="Rebuild even if a matching set exists."),
) -> None:
    """Build the deterministic demo conversation set (2-3 TTS voices taking turns, overlaps, backchannels)."""
    from engine.corpus.conversation import build_conversation_set
    from engine.options import check_number

    try:
        check_number(seed, "--seed", integer=True, ge=0, le=2**32 - 1)
        check_number(n, "--n", integer=True, ge=1, le=10_000)
        check_number(min_s, "--min-s", gt=0, le=86_400)
        check_number(max_s, "--max-s", ge=min_s, le=86_400)
        with _progress() as prog:
            task = prog.add_task("conversation set", total=n, status="synthesizing")

            def cb(done: int, total: int) -> None:
                prog.update(task, completed=done, total=total)

            cs = build_conversation_set(out, seed=seed, n_recordings=n, min_s=min_s, max_s=max_s, force=force, progress=cb)
    except AuditError as exc:
        _fail(exc)
        return
    out_console.print(f"Conversation set: {cs.n_recordings} recordings, {cs.info()['total_s'] / 60:.1f} min in {cs.root}")


@list_app.command("models")
def list_models_cmd(
    tag: Optional[str] = typer.Option(None, "--tag", help="Only models with this tag."),
    fmt: str = typer.Option("table", "--format", help="table, json or csv."),
) -> None:
    """Registry models, whether each can run here, and why not."""
    from audits.cli.output import check_format, emit
    from engine.config_tree import config_folder
    from engine.model_registry import load_model_registry

    try:
        check_format(fmt)
        reg = load_model_registry()
        folder = config_folder("models")
    except AuditError as exc:
        _fail(exc)
        return
    rows: list[dict[str, Any]] = []
    for name, e in sorted(reg.items()):
        if tag and tag not in e.tags:
            continue
        avail = e.availability()
        runnable = avail.runnable if avail.checked else None
        rows.append(
            {"name": name, "backend": e.backend, "family": e.family, "params_m": e.params_m, "tags": list(e.tags)}
            | {"runnable": runnable, "why": avail.reason}
        )
    verdict = {True: "[green]yes[/]", False: "[red]no[/]", None: "[yellow]not checked here[/]"}
    emit(
        out_console,
        rows,
        ["name", "backend", "family", "params_m", "tags", "runnable", "why"],
        fmt,
        title=f"Model registry ({folder})",
        styles={"runnable": lambda v: verdict[v]},
    )


@list_app.command("recipes")
def list_recipes_cmd(fmt: str = typer.Option("table", "--format", help="table, json or csv.")) -> None:
    """Recipes of the configuration tree in use (the shipped one, or $AUDIT_CONFIG_DIR), and where they are."""
    from audits.cli.output import check_format, emit
    from audits.recipes import list_recipes, load_recipe, recipe_dir

    try:
        check_format(fmt)
        names, folder = list_recipes(), recipe_dir()
    except AuditError as exc:
        _fail(exc)
        return
    rows: list[dict[str, Any]] = []
    for name in names:
        try:
            r = load_recipe(name)
            rows.append({"name": name, "valid": True, "description": r.description, "error": None})
        except AuditError as exc:
            rows.append({"name": name, "valid": False, "description": None, "error": str(exc)})
    title = f"Recipes in {folder} (set AUDIT_CONFIG_DIR to use a folder of your own)"
    emit(out_console, rows, ["name", "valid", "description", "error"], fmt, title=title)


@list_app.command("backends")
def list_backends_cmd(fmt: str = typer.Option("table", "--format", help="table, json or csv.")) -> None:
    """Every registered name per kind (backends, sections, normalizers, readers, runners) and where it comes from."""
    from audits.cli.output import check_format, emit
    from audits.registries import all_registries

    try:
        check_format(fmt)
        # reads entry-point metadata only: no backend is imported
        rows = [
            {"kind": reg.kind, "group": reg.group, "name": e.name, "origin": e.origin, "target": e.target}
            for reg in all_registries()
            for e in reg.entries()
        ]
    except AuditError as exc:
        _fail(exc)
        return
    emit(out_console, rows, ["kind", "name", "origin", "target", "group"], fmt, title="Registered names")


@probe_app.command("bad-reference")
def probe_bad_reference_cmd(
    preds: Path = typer.Option(
        ..., "--preds", help="Folder of Open ASR Leaderboard JSONL files, one per model (audio_filepath, text, pred_text)."
    ),
    panel: str = typer.Option(
        ..., "--panel", help="Comma-separated panel models (file stems), chosen independently of the models under test."
    ),
    models: Optional[str] = typer.Option(None, "--models", help="Models to score (default: every file)."),
    corrections: Optional[Path] = typer.Option(
        None, "--corrections", help="JSONL of human-verified corrected references (audio_filepath, text)."
    ),
    corrections_mode: str = typer.Option(
        "replace",
        "--corrections-mode",
        help="replace: corrections define the bad spans; confirm: keep panel spans the corrections agree with.",
    ),
    supermajority: float = typer.Option(0.8, "--supermajority", help="Share of the eligible panel that must agree."),
    min_agree: int = typer.Option(2, "--min-agree", help="At least this many panel members must agree."),
    min_eligible_panel: int = typer.Option(3, "--min-eligible-panel", help="Skip clips with fewer eligible panel members."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the JSON result here."),
) -> None:
    """Bad-reference acceptance from predictions alone: which models reproduce reference errors."""
    import json

    from audits.probes.bad_reference import BadRefSettings
    from audits.probes.predictions import run_from_prediction_dir

    try:
        from engine.options import check_number

        check_number(supermajority, "--supermajority", gt=0, le=1)
        check_number(min_agree, "--min-agree", integer=True, ge=1)
        check_number(min_eligible_panel, "--min-eligible-panel", integer=True, ge=1)
        settings = BadRefSettings(supermajority=supermajority, min_agree=min_agree, min_eligible_panel=min_eligible_panel)
        panel_list = [p.strip() for p in panel.split(",") if p.strip()]
        model_list = [m.strip() for m in models.split(",") if m.strip()] if models else None
        corr = _read_corrections(corrections) if corrections is not None else None
        if corrections_mode not in ("replace", "confirm"):
            raise ConfigError(f"--corrections-mode must be 'replace' or 'confirm', got {corrections_mode!r}")
        mode: Literal["replace", "confirm"] = "replace" if corrections_mode == "replace" else "confirm"
        report = run_from_prediction_dir(preds, panel_list, models=model_list, settings=settings, corrections=corr, corrections_mode=mode)
    except AuditError as exc:
        _fail(exc)
        return
    out_console.print(report.format_table())
    if out is not None:
        from engine.storage import atomic_write_text

        atomic_write_text(out, json.dumps(report.to_dict(), indent=2))
        out_console.print(f"Written: {out}")


@probe_app.command("orthography")
def probe_orthography_cmd(
    preds: Path = typer.Option(
        ..., "--preds", help="Folder of Open ASR Leaderboard JSONL files, one per model (audio_filepath, text, pred_text)."
    ),
    models: Optional[str] = typer.Option(None, "--models", help="Models to score (default: every file)."),
    families: Optional[str] = typer.Option(
        None, "--families", help="Comma-separated spelling families (default: all; see docs/probes.md)."
    ),
    pool: bool = typer.Option(False, "--pool", help="Pool arms across the chosen families (arm 0 together, arm 1 together, ...)."),
    min_per_arm: int = typer.Option(5, "--min-per-arm", help="Clips an arm needs before it counts; the switch needs two such arms."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the JSON result here."),
) -> None:
    """Orthographic switch from predictions alone: does a model write the benchmark's spelling?"""
    import json

    from audits.probes.predictions import format_orthography_table, orthography_from_prediction_dir

    try:
        from engine.options import check_number

        check_number(min_per_arm, "--min-per-arm", integer=True, ge=1)
        model_list = [m.strip() for m in models.split(",") if m.strip()] if models else None
        family_list = [f.strip() for f in families.split(",") if f.strip()] if families else None
        result = orthography_from_prediction_dir(preds, model_list, family_list, pool, min_per_arm)
    except AuditError as exc:
        _fail(exc)
        return
    out_console.print(format_orthography_table(result), markup=False, highlight=False, soft_wrap=True)
    if out is not None:
        from engine.storage import atomic_write_text

        atomic_write_text(out, json.dumps(result, indent=2))
        out_console.print(f"Written: {out}")


def _read_corrections(path: Path) -> dict[str, str]:
    """Corrections JSONL: one object per line with the clip id and the corrected text."""
    import json

    from engine.errors import ManifestError

    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ManifestError(path, f"invalid JSON ({exc.msg})", line=lineno) from None
            cid = row.get("audio_filepath", row.get("utt_id", row.get("id")))
            text = row.get("text", row.get("corrected"))
            if cid is None:
                raise ManifestError(path, "missing the clip id", line=lineno, field="audio_filepath")
            if text is None:
                raise ManifestError(path, "missing the corrected text", line=lineno, field="text")
            out[str(cid)] = str(text)
    return out


def entrypoint() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: finished units are kept; re-run the same command to resume[/]")
        sys.exit(130)
    except Exception:  # an unexpected error: its traceback, with every configured secret removed
        import traceback

        console.print(scrub(traceback.format_exc()), markup=False, highlight=False, soft_wrap=True)
        sys.exit(1)


if __name__ == "__main__":
    entrypoint()
