"""Merge several run directories of one dataset into one summary and one result table.

A 40-model sweep is often split across machines, each writing its own run directory. A
merged report is only meaningful when every run scored the same utterances with the same
text normalizer, so those are checked first and a mismatch is refused with the reason.

Per-model numbers are taken from each run's ``summary.json`` as they are (re-scoring would
change bootstrap seeds and so the intervals). Only a model whose rows are spread over several
runs (a sweep split by shards instead of by models) is re-scored from the merged rows with
the recipe's scoring options. The audit sections (probes, speaker, emotion, ...) are merged by
each section's own ``merge`` (``audits.sections``).
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import pandas as pd

from audits.asr.scoring import ScoringOptions, score_table, summarize_models
from audits.clips import source_rows
from audits.normalizing import get_normalizer
from audits.result import RunResult
from audits.run_dir import read_rows_file, read_run
from audits.schema import Summary
from audits.sections import ordered, present_in, section_json
from audits.version import version as engine_version
from engine.errors import ConfigError

log = logging.getLogger(__name__)

# Fields of a model entry that describe how it ran (kept when a split model is re-scored).
_RUN_FACTS = ("status", "error", "backend", "batch_size", "warmup_batches", "device", "dtype", "load_s", "backend_info", "params_m", "tags")


def load_table(run_dir: Path) -> pd.DataFrame:
    """``utterances.parquet`` (a file or a folder of Parquet parts) as a DataFrame; not its digest (see ``load_result``)."""
    return read_rows_file(Path(run_dir))


def load_run(run_dir: Path, strict: bool = True, warn: Callable[[str], None] | None = None) -> tuple[dict[str, Any], pd.DataFrame]:
    """``summary.json`` and the result rows of one run directory, through their digests (``audits.run_dir.read_run``)."""
    result = load_result(Path(run_dir), strict, warn)
    return dict(result.plain_summary), result.table


def load_result(run_dir: Path, strict: bool = True, warn: Callable[[str], None] | None = None) -> RunResult:
    """One run directory as a ``RunResult`` (no scoring pass: reports score the rows when they need them).

    Read by the one trusted reader: ``strict`` refuses a run whose summary or rows no longer match
    their digests; otherwise each problem goes to ``warn`` (report-only commands).
    """
    loaded = read_run(Path(run_dir), strict=strict, warn=warn)
    return RunResult.of(cast(Summary, loaded.summary), loaded.table, None, Path(run_dir))


def check_compatible(summaries: Sequence[Mapping[str, Any]], names: Sequence[str]) -> None:
    """Raise ``ConfigError`` naming the first run whose dataset or normalizer differs from the first run's."""
    first = summaries[0]
    fp0 = (first.get("dataset") or {}).get("fingerprint")
    norm0 = first.get("normalizer") or {}
    if not fp0:
        raise ConfigError(
            f"{names[0]}: summary.json has no dataset fingerprint, so it cannot be checked against other runs; re-run it with this version"
        )
    for s, name in zip(summaries[1:], names[1:]):
        ds = s.get("dataset") or {}
        fp = ds.get("fingerprint")
        if not fp:
            raise ConfigError(
                f"{name}: summary.json has no dataset fingerprint, so it cannot be checked against {names[0]}; re-run it with this version"
            )
        if fp != fp0:
            raise ConfigError(
                f"cannot merge {name} into {names[0]}: different datasets "
                f"('{ds.get('name')}' fingerprint {fp} vs '{(first.get('dataset') or {}).get('name')}' fingerprint {fp0}); "
                "a merged report needs every run to score the same utterances"
            )
        norm = s.get("normalizer") or {}
        if norm.get("name") != norm0.get("name"):
            raise ConfigError(
                f"cannot merge {name} into {names[0]}: different normalizers ('{norm.get('name')}' vs '{norm0.get('name')}'); "
                "WERs under different normalizers are not comparable, re-score one run with the other's normalizer"
            )
        if norm.get("version") != norm0.get("version"):
            raise ConfigError(
                f"cannot merge {name} into {names[0]}: normalizer '{norm0.get('name')}' has version {norm.get('version')} there "
                f"and {norm0.get('version')} here; re-score both runs with one version"
            )


def _dedupe_rows(table: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """Drop rows repeated verbatim across runs; refuse a (model, utt_id) with two different results."""
    key = ["model", "utt_id"]
    dup = table.duplicated(key, keep=False)
    if not dup.any():
        return table
    d = table[dup]
    conflicting = d.groupby(key, sort=False)["hyp_raw"].nunique(dropna=False)
    conflicting = conflicting[conflicting > 1]
    if len(conflicting):
        (model, utt), _ = next(iter(conflicting.items()))
        runs = sorted(set(d.loc[(d["model"] == model) & (d["utt_id"] == utt), "_run"]))
        raise ConfigError(
            f"model '{model}' transcribed utterance '{utt}' differently in {', '.join(names[i] for i in runs)} "
            f"({len(conflicting)} such rows); merge runs that split the sweep, not repeated runs of one model"
        )
    return table.drop_duplicates(key, keep="first")


def _options_from(summary: Mapping[str, Any]) -> ScoringOptions:
    sc = (summary.get("recipe") or {}).get("scoring") or {}
    return ScoringOptions(
        n_boot=int(sc.get("n_boot", 1000)),
        seed=int(sc.get("seed", 0)),
        slice_columns=list(sc["slices"]) if sc.get("slices") else None,
        gaps=[tuple(g) for g in sc.get("gaps") or []],  # type: ignore[misc]
    )


def merge_runs(dirs: Sequence[Path], strict: bool = True, warn: Callable[[str], None] | None = None) -> tuple[dict[str, Any], pd.DataFrame]:
    """One summary and one result table over several runs of the same dataset and normalizer (see ``merge``)."""
    result = merge_results(dirs, strict, warn)
    return dict(result.plain_summary), result.table


def merge_results(dirs: Sequence[Path], strict: bool = True, warn: Callable[[str], None] | None = None) -> RunResult:
    """Read the run directories through their digests and merge them (``merge``); one directory is returned as it is."""
    if not dirs:
        raise ConfigError("no run directories given")
    paths = [Path(d) for d in dirs]
    if len({p.resolve() for p in paths}) != len(paths):
        raise ConfigError(f"a run directory is listed twice: {', '.join(map(str, paths))}")
    return merge([load_result(p, strict, warn) for p in paths], [str(p) for p in paths])


def merge(results: Sequence[RunResult], names: Sequence[str]) -> RunResult:
    """One result over several runs of the same dataset and normalizer, in memory.

    A single result is returned unchanged. Raises ``ConfigError`` with the reason when the
    dataset fingerprint, the normalizer name or its version differ, or when two runs disagree
    on the same (model, utterance). ``names`` name the runs in messages and in ``merged_from``.
    """
    if not results:
        raise ConfigError("no run directories given")
    if len(results) == 1:
        return results[0]
    summaries = [r.plain_summary for r in results]
    check_compatible(summaries, names)

    tables = []
    for i, r in enumerate(results):
        t = r.table.copy()
        t["_run"] = i
        tables.append(t)
    table = _dedupe_rows(pd.concat(tables, ignore_index=True, sort=False), names)
    run_of_model = table.groupby("model")["_run"].agg(lambda r: sorted(set(r)))
    table = table.drop(columns=["_run"]).reset_index(drop=True)

    first = summaries[0]
    models: dict[str, Any] = {}
    split: list[str] = []
    for m, runs in run_of_model.items():
        if len(runs) == 1:
            entry = dict(summaries[runs[0]]["models"].get(m) or {})
            entry["run"] = names[runs[0]]
            models[str(m)] = entry
        else:
            split.append(str(m))
    for i, s in enumerate(summaries):  # models that produced no rows at all (could not load)
        for m, entry in (s.get("models") or {}).items():
            if m not in models and m not in split:
                models[m] = dict(entry, run=names[i])
    if split:
        log.info("re-scoring %d model(s) whose rows are spread over several runs: %s", len(split), ", ".join(split))
        normalizer = get_normalizer(first["normalizer"]["name"])
        scored = score_table(source_rows(table[table["model"].isin(split)]), normalizer)
        fresh = summarize_models(scored, _options_from(first))
        for m in split:
            facts: dict[str, Any] = {}
            for s in summaries:
                old = (s.get("models") or {}).get(m)
                if old:
                    facts = {k: old[k] for k in _RUN_FACTS if k in old}
                    break
            models[m] = dict(fresh.get(m, {}), **facts, run=[names[i] for i in run_of_model[m]], rescored_on_merge=True)

    summary: dict[str, Any] = {
        "schema_version": first.get("schema_version"),
        "engine_version": engine_version(),
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "recipe": dict(
            first.get("recipe") or {}, name=" + ".join(dict.fromkeys(str((s.get("recipe") or {}).get("name", "")) for s in summaries))
        ),
        "dataset": first.get("dataset"),
        "normalizer": first.get("normalizer"),
        "scoring": first.get("scoring"),
        "packages": first.get("packages"),
        "hardware": first.get("hardware"),
        "models": dict(sorted(models.items())),
        "merged_from": [
            {
                "dir": names[i],
                "recipe": (s.get("recipe") or {}).get("name"),
                "created_at": s.get("created_at"),
                "engine_version": s.get("engine_version"),
                "hardware": s.get("hardware"),
                "packages": s.get("packages"),
                "models": sorted((s.get("models") or {}).keys()),
            }
            for i, s in enumerate(summaries)
        ],
    }
    for sec in ordered({p.key for s in summaries for p in present_in(s)}):  # each section merges its own typed results
        merged = section_json(sec.merge([r.result(sec.key) for r in results], names))
        if merged:
            summary[sec.key] = merged
    _merged_comparisons(summary, table, first)
    return RunResult.of(cast(Summary, summary), table)


def _merged_comparisons(summary: dict[str, Any], table: pd.DataFrame, first: Mapping[str, Any]) -> None:
    """Across the merged runs: paired comparisons of every model pair, and Holm over every gap again."""
    from audits.asr.paired import compare_models
    from audits.asr.scoring import correct_gaps

    opts = _options_from(first)
    for entry in summary["models"].values():  # copies: the runs' own summaries keep their figures
        entry["gaps"] = [dict(g) for g in entry.get("gaps") or []]
    correct_gaps(summary["models"], opts.alpha)
    if len(table):
        scored = score_table(source_rows(table), get_normalizer(first["normalizer"]["name"]))
        summary["comparisons"] = compare_models(scored.frame, opts.n_boot, opts.seed, opts.alpha)
