"""The audit engine from Python: ``from audits import api``.

Three calls, the same engine as the ``audit`` command (docs/api.md), and two views of a result:

* ``api.run(recipe, dataset=..., models=..., out=...)`` runs (or resumes) a recipe and returns
  its ``RunResult``, as ``audit run`` does;
* ``api.load(run_dir)`` reads a finished run directory into a ``RunResult``;
* ``api.compare(run_dirs, out=...)`` merges runs of one dataset (a sweep split across machines)
  into one ``RunResult``, with the paired comparisons of every model pair over all of them, and
  writes the merged reports when ``out`` is given, as ``audit report RUN... --out`` does;
* ``api.frames(result)`` and ``api.query(result, sql)``: its figures as flat tables and SQL over
  them, as ``audit query`` gives them.

Errors are the engine's (``engine.errors.AuditError`` and subclasses), raised before any model
loads when the recipe, the dataset or a model name is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

from audits.pipeline import run_audit
from audits.recipes import Recipe, load_recipe, with_normalizer, with_overrides
from audits.result import RunResult
from audits.version import version
from engine.data import ProgressFn
from engine.engine import EngineOptions
from engine.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

StrPath = str | PathLike[str]

__all__ = ["EngineOptions", "RunResult", "compare", "frames", "load", "query", "run", "version"]


def _recipe(recipe: str | Recipe) -> Recipe:
    return recipe if isinstance(recipe, Recipe) else load_recipe(str(recipe))


def run(
    recipe: str | Recipe,
    *,
    dataset: StrPath | None = None,
    models: Sequence[str] | None = None,
    out: StrPath | None = None,
    limit: int | None = None,
    reader: str | None = None,
    normalizer: str | None = None,
    engine: str = "inprocess",
    progress: ProgressFn | None = None,
) -> RunResult:
    """Run a recipe (a name under ``recipes/`` of the configuration tree, a YAML path or a parsed ``Recipe``) and return its result.

    ``dataset``, ``models``, ``limit``, ``reader`` and ``normalizer`` replace the recipe's, as ``--dataset``,
    ``--models``, ``--limit``, ``--reader`` and ``--normalizer`` do; ``out`` is the run directory (default
    ``runs/<recipe name>``), and running into an existing one resumes it. ``progress`` receives
    the engine's events ``(event, n, info)``. ``engine`` is a runner's registry name (``inprocess``, ``ray``
    or a plug-in's), as ``--engine``.
    """
    if isinstance(models, str):
        raise ConfigError(f"models: give a list of registry names, not the string {models!r} (e.g. models=[{models!r}])")
    if models is not None and not list(models):
        raise ConfigError(
            "models: an empty list names no model to run; leave models out (None) to run the recipe's own models, or name "
            "registry models, e.g. models=['whisper-tiny.en']"
        )
    rec = with_overrides(
        _recipe(recipe), None if dataset is None else str(dataset), list(models) if models is not None else None, limit, reader
    )
    if normalizer is not None:
        rec = with_normalizer(rec, normalizer, "normalizer")
    out_dir = Path(out) if out is not None else Path("runs") / rec.name
    return run_audit(rec, out_dir, progress=progress, engine=EngineOptions(kind=engine))


def load(run_dir: StrPath) -> RunResult:
    """A finished run directory (``summary.json`` and ``utterances.parquet``) as a ``RunResult``.

    Read through the run's digests (``audits.run_dir``): a summary edited after the run, rows
    changed after scoring, or a run without those digests is refused (``RunIntegrityError``), and a
    truncated or corrupt file is a ``ConfigError`` naming it.
    """
    from audits.reports.merge import load_result

    return load_result(Path(run_dir))


def compare(run_dirs: Sequence[StrPath], *, out: StrPath | None = None, worst: int = 5, exports: bool = True) -> RunResult:
    """Merge runs of one dataset and normalizer into one result; with ``out``, also write it there.

    Models are compared pairwise over all the runs' rows (paired speaker-block bootstrap,
    Holm-corrected: ``result.summary['comparisons']``). Runs of different datasets or
    normalizers are refused with the reason. ``out`` receives the merged ``summary.json``,
    ``utterances.parquet``, reports and exports, so it is a run directory of its own (sealed with
    its own digests, and returned as ``load(out)`` reads it). Every run is read through its digests
    as ``load`` reads it: a run whose summary or rows changed after scoring is refused.
    """
    from audits.reports.build import write_report
    from audits.reports.merge import merge_results

    if isinstance(run_dirs, (str, PathLike)):
        raise ConfigError("run_dirs: give a list of run directories, e.g. compare(['runs/a', 'runs/b'])")
    dirs = [Path(d) for d in run_dirs]
    if len(dirs) < 2:
        raise ConfigError(f"compare needs at least two run directories, got {len(dirs)}; use api.load for one")
    if out is not None and Path(out).resolve() in {d.resolve() for d in dirs}:
        raise ConfigError(f"out {out} is one of the runs being compared; choose a new directory so the run keeps its own summary.json")
    result = merge_results(dirs)
    if out is None:
        return result
    write_report(result, Path(out), worst, exports, merged=True)
    return load(out)


def frames(result: RunResult) -> dict[str, pd.DataFrame]:
    """The result's figures as flat tables (``models``, ``slices``, ``gaps``, ``pairs`` and each section's), as the
    exports' DuckDB file and ``audit query`` hold them."""
    from audits.reports.tables import summary_frames

    return summary_frames(result)


def query(result: RunResult, sql: str) -> pd.DataFrame:
    """SQL over the result's views, as ``audit query`` gives them (DuckDB, in memory; ``scored`` included)."""
    from audits.reports.views import query_frames

    return query_frames(result, result.table, sql)
