"""Recipe orchestration: dataset -> engine -> result rows -> scores -> run directory.

One pass, through memory: the engine's consolidated table is scored, summarized and reported
as one ``RunResult`` (``audits.result``); ``utterances.parquet`` and ``summary.json`` are each
written once and never read back in the same run.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from audits.asr.results import AsrResult
from audits.asr.section import ASR_SECTION, scoring_options
from audits.asr.summary import assemble_summary, json_safe, run_failures, write_summary
from audits.clips import DERIVED, SOURCE, ClipViews, rows_for
from audits.normalizing import get_normalizer
from audits.recipes import Recipe, builtin_dataset_path
from audits.result import RunResult
from audits.runners import check_runner, decode_options
from audits.schema import Summary
from audits.sections import AuditSection, SectionContext, ordered
from engine.backends import ASR_BACKENDS
from engine.config_tree import resolve_relative
from engine.data import PREDICTIONS_BACKEND, DecodeOptions, ModelSpec, ProgressFn
from engine.datasets import Dataset, open_dataset
from engine.engine import JOINT, EngineOptions, shard_pass
from engine.errors import ConfigError, RegistryError
from engine.model_registry import load_model_registry, resolve_models
from engine.run.joint_pass import PassRequest, run_joint
from engine.run.run_log import begin_run_log
from engine.run.runner import hardware_facts
from engine.run.store import RunStore
from engine.storage import atomic_write_text
from normalizers import Normalizer

log = logging.getLogger(__name__)


def ensure_demo_corpus(
    path: Path, progress: Callable[[int, int], None] | None = None, limit: int | None = None, pairs: bool = False
) -> Path:
    """Build the demo corpus (or the demo conversation set) when it is absent (deterministic, offline); only the
    clips a ``limit`` needs; a corpus the user built is refused, never overwritten (audits/demo_data.py)."""
    from audits.demo_data import ensure_demo_corpus as ensure

    return ensure(path, progress, limit=limit, pairs=pairs)


def open_recipe_dataset(
    recipe: Recipe,
    shard_size: int | None = None,
    corpus_progress: Callable[[int, int], None] | None = None,
) -> Dataset:
    """Open (and fingerprint) the recipe's dataset; the built-in demo corpus is built first when absent."""
    path = recipe.dataset.path
    if path.startswith("builtin:"):
        from audits.demo_data import PAIR_SECTIONS

        pairs = any(recipe.section(key) for key in PAIR_SECTIONS)
        path = str(ensure_demo_corpus(builtin_dataset_path(path), corpus_progress, limit=recipe.dataset.limit, pairs=pairs))
    else:
        path = str(resolve_relative(path))  # recipe paths may be relative to the source checkout
    return open_dataset(
        path, recipe.dataset.reader, shard_size=shard_size or recipe.shard_size, limit=recipe.dataset.limit, **dict(recipe.dataset.options)
    )


def model_specs(recipe: Recipe, dataset: Dataset) -> list[ModelSpec]:
    """Registry specs for the recipe's models (checked before anything loads)."""
    if not dataset.has_audio:
        preds = dataset.predictions
        names = [m for m in recipe.models if m in preds] if recipe.models and any(m in preds for m in recipe.models) else sorted(preds)
        return [ModelSpec(n, PREDICTIONS_BACKEND, {}, 0, {}) for n in names]
    registry = load_model_registry()
    specs = []
    for e in resolve_models(list(recipe.models), registry):
        spec = e.spec(recipe.batch_size)
        backend_cls: Any = ASR_BACKENDS.get(spec.backend)
        options = backend_cls.bind_dataset(spec.options, dataset.source, dataset.reader, recipe.dataset.options)
        specs.append(replace(spec, options=options))
    return specs


def check_clip_ids(dataset: Dataset) -> None:
    """Every clip's id once in the whole dataset, whatever reader made it (a plug-in's included), before any model loads.

    The built-in readers refuse duplicates naming the lines; this is the run's own check over the
    shards' indexes, so a duplicate never surfaces as a doubled row after the models ran.
    """
    seen: dict[str, str] = {}
    for sid in dataset.shard_ids:
        for uid in dataset.shard_index(sid).utt_ids:
            if uid in seen:
                raise ConfigError(
                    f"dataset '{dataset.name}' ({dataset.source}): utt_id '{uid}' appears twice (shards {seen[uid]} and "
                    f"{sid}); every clip's id must be unique"
                )
            seen[uid] = sid


def check_output_names(specs: Sequence[ModelSpec]) -> None:
    """Model names that would share a result file (the store's) or an export file, refused before anything loads or is written."""
    from audits.reports.exports import export_file_names
    from engine.storage import check_distinct_paths

    names = [s.name for s in specs]
    check_distinct_paths(names, "model")
    export_file_names(names)


def check_run_dir(out: Path, recipe: Recipe, dataset: Dataset, before_derivation: bool = False) -> None:
    """Refuse to mix a different dataset or normalizer into an existing run directory.

    ``before_derivation``: ``dataset`` is the source dataset of a run whose sections will add
    derived clips, checked before anything is written; the run directory's source fingerprint
    is compared (runs that did not record it are checked once the clips are derived).
    """
    meta_path = out / "run.json"
    if not meta_path.is_file():
        return
    try:
        old = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"{meta_path} cannot be read ({exc}); it is not a run directory of this tool, or it was damaged: use a new --out directory"
        ) from None
    if not isinstance(old, dict):
        raise ConfigError(f"{meta_path} is not a run record (a JSON object); use a new --out directory")
    key = "source_fingerprint" if before_derivation else "dataset_fingerprint"
    if (key in old or not before_derivation) and old.get(key) != dataset.fingerprint:
        raise ConfigError(
            f"{out} holds results for another dataset (fingerprint {old.get(key)} vs {dataset.fingerprint}: "
            "utterance ids, references or audio content differ); use a new --out directory"
        )
    if old.get("normalizer") != recipe.normalizer:
        raise ConfigError(
            f"{out} was scored with normalizer '{old.get('normalizer')}', this recipe uses '{recipe.normalizer}'; use a new --out"
        )


def score_run(
    out: Path,
    recipe: Recipe,
    table: pd.DataFrame,
    dataset_desc: Mapping[str, Any],
    facts: Mapping[str, Mapping[str, Any]],
    extra: Mapping[str, Any] | None = None,
    *,
    rows_sha256: str | None = None,
    normalizer: Normalizer | None = None,
    asr: AsrResult | None = None,
) -> RunResult:
    """Score the result rows once, write ``summary.json`` once, and the reports and exports from the same objects.

    ``table`` holds every row the run made; the ASR figures are computed from the source clips'
    rows (``audits.clips``): derived clips count only in the sections that read them.
    ``rows_sha256`` is ``utterances.parquet``'s digest when the caller took it while writing the
    file (``RunStore.table_sha256``), so the file is not read back; ``normalizer`` is the recipe's,
    when the caller built it already; ``asr`` the ASR section's result when the run scored already
    (else it is scored here). ``summary.json`` is written from the typed results (serialization at the edge).
    """
    in_run = table[table["model"].isin(list(facts))] if facts else table
    if normalizer is None:
        normalizer = get_normalizer(recipe.normalizer)
    if asr is None:  # the headline, slices, gaps, pairs and speed read the source clips (audits.clips)
        asr = ASR_SECTION.score(recipe.scoring, rows_for(SOURCE, in_run), normalizer, facts, int(dataset_desc.get("n_utts", 0)))
    opts = scoring_options(recipe.scoring)
    results = {k: v for k, v in (extra or {}).items() if hasattr(v, "to_json")}  # the sections' typed results, as they returned them
    summary = assemble_summary(asr, normalizer, recipe.as_dict(), dataset_desc, hardware_facts(), opts, extra, run_failures(facts))
    scored = asr.scored
    if rows_sha256 is None:
        from audits.run_dir import rows_fingerprint

        rows_sha256 = rows_fingerprint(out / "utterances.parquet")
    # what was scored: a later reader (audits.run_dir.read_run) refuses rows that changed after this point
    summary["rows"] = {"file": "utterances.parquet", "sha256": rows_sha256, "n_rows": int(len(in_run))}
    if recipe.scoring.semantic_similarity:
        from audits.asr.semantic import add_semantic_similarity

        plain: dict[str, Any] = dict(summary)
        add_semantic_similarity(plain, scored)
        summary = json_safe(plain)  # as summary.json will hold it, so the reports read what a reader of the file reads
        asr = AsrResult.from_json(summary, scored)
    write_summary(out, summary)
    result = RunResult.of(summary, table, scored, out, results={"asr": asr, **results})
    from audits.reports.build import write_report

    # report.md (+ cohort), report.html and exports/ from the same scoring pass
    write_report(result, out, worst=5, exports=True)
    return result


def score_run_dir(
    out: Path,
    recipe: Recipe,
    dataset_desc: Mapping[str, Any],
    facts: Mapping[str, Mapping[str, Any]],
    extra: Mapping[str, Any] | None = None,
) -> Summary:
    """(Re)score a run directory's ``utterances.parquet``: ``summary.json``, reports and exports (its summary)."""
    return score_run(out, recipe, load_rows(out), dataset_desc, facts, extra).summary


def run_recipe(
    recipe: Recipe,
    out: Path,
    progress: ProgressFn | None = None,
    corpus_progress: Callable[[int, int], None] | None = None,
    engine: EngineOptions = EngineOptions(),
) -> Summary:
    """Run (or resume) a recipe into ``out`` and return its summary (``run_audit`` returns the whole result)."""
    return run_audit(recipe, out, progress, corpus_progress, engine).summary


def run_audit(
    recipe: Recipe,
    out: Path,
    progress: ProgressFn | None = None,
    corpus_progress: Callable[[int, int], None] | None = None,
    engine: EngineOptions = EngineOptions(),
    extra: Mapping[str, Any] | None = None,
    dataset: Dataset | None = None,
) -> RunResult:
    """:func:`_run_audit` with the session's log appended to ``out/run.log`` (``engine.run.run_log``)."""
    from engine.run.run_log import run_log

    with run_log(out):
        return _run_audit(recipe, out, progress, corpus_progress, engine, extra, dataset)


def _run_audit(
    recipe: Recipe,
    out: Path,
    progress: ProgressFn | None = None,
    corpus_progress: Callable[[int, int], None] | None = None,
    engine: EngineOptions = EngineOptions(),
    extra: Mapping[str, Any] | None = None,
    dataset: Dataset | None = None,
) -> RunResult:
    """Run (or resume) a recipe into ``out``; finished ``(model, shard)`` units are skipped.

    Everything that can be validated (recipe sections, dataset, model names) is validated before
    any model loads. The audit sections the recipe uses (``audits.sections``) then run in section
    order after the ASR models, each writing its part of the summary under its key; the SV/SER
    passes sections run over the recipe's own dataset (``AuditSection.dataset_passes``) run with
    the ASR pass as one engine run (``engine/run/joint_pass.py``), so each shard is decoded once for
    all of them and the sections find those units finished. ``extra``
    adds top-level summary keys of the caller's (a sweep's selection) before anything is scored,
    so ``summary.json`` is written once. ``dataset`` is the recipe's dataset when the caller has
    opened it already (a sweep checks it first), so it is opened and fingerprinted once.
    """
    t0 = time.perf_counter()
    check_runner(engine.kind)
    engine.check()  # typed flags (memory budget, models loaded, workers), once per run, before the dataset opens
    try:
        normalizer = get_normalizer(recipe.normalizer)  # fail early on a bad name
    except RegistryError as exc:
        raise ConfigError(f"{recipe.source or recipe.name}: normalizer: {exc}") from None
    # every section's config is validated before the dataset opens or any model loads
    used = ordered(key for key, raw in recipe.sections.items() if raw)  # an unknown key raises, naming close matches
    parsed = [(sec, sec.parse(recipe.section(sec.key), recipe.source)) for sec in used]
    if dataset is None:
        dataset = open_recipe_dataset(recipe, corpus_progress=corpus_progress)
    check_clip_ids(dataset)
    specs = model_specs(recipe, dataset)
    if not specs and not any(sec.can_run_without_asr_models for sec, _ in parsed):
        raise ConfigError(f"recipe '{recipe.name}': no models to run (list registry names under 'models' or use --models)")
    for sec, _ in parsed:
        if sec.needs_asr_models and not specs:
            raise ConfigError(f"recipe '{recipe.name}': {sec.key} need ASR models under 'models'")
    check_section_passes(recipe, engine, parsed, specs, dataset)
    for sec, cfg in parsed:  # every section's inputs (references, turns, audio, derived clips' ids) before any model loads
        sec.check_inputs(cfg, dataset)
    check_output_names(specs)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is an existing file, not a directory; give a new or existing run directory")
    source_fingerprint = dataset.fingerprint
    check_run_dir(
        out, recipe, dataset, before_derivation=any(type(sec).prepare_dataset is not AuditSection.prepare_dataset for sec, _ in parsed)
    )
    # everything knowable is checked: only now is anything written under --out
    out.mkdir(parents=True, exist_ok=True)
    begin_run_log(out)  # run.log: this session's lines so far, and every later one
    dec = decode_options(recipe)
    source = dataset
    for sec, cfg in parsed:  # a section may add derived clips (perturbations) before the plan is made
        dataset = sec.prepare_dataset(cfg, dataset, out, dec)
    views = ClipViews(source, dataset)  # what each section reads: source clips, or source and derived (audits.clips)
    check_run_dir(out, recipe, dataset)
    atomic_write_text(
        out / "run.json",
        json.dumps(
            {
                "recipe": recipe.name,
                "dataset_fingerprint": dataset.fingerprint,
                "source_fingerprint": source_fingerprint,
                "normalizer": recipe.normalizer,
                "normalizer_version": normalizer.version,
                "recipe_config": json_safe(recipe.as_dict()),  # what `audit report --partial` scores with before the summary exists
            },
            indent=2,
        ),
    )
    store = RunStore(out)
    facts: dict[str, dict[str, Any]] = {}
    plan = None
    started = engine.start()  # one Ray instance for every pass of the recipe (ASR, sections)
    try:
        sections: dict[str, Any] = {"engine": engine.facts()}  # runner, address, runtime_env; on Ray the cluster joined
        section_passes = joint_passes(engine, parsed, specs, dataset, dec, views)
        if section_passes:  # the sections' SV/SER passes over this dataset run with the ASR pass: one decode per shard
            outcome = run_joint(engine, dataset, specs, section_passes, out, warmup=recipe.warmup, decode_options=dec, progress=progress)
            facts = outcome.facts
            plan = outcome.plan if specs else None
            engine = replace(engine, joint=outcome.records)  # the sections' passes find these units finished
        elif specs:
            runner = engine.runner(dataset, specs, store, warmup=recipe.warmup, decode_options=dec, progress=progress)
            facts = runner.run()
            plan = runner.plan
        # exactly one row per (model, utterance) of the plan, or ResultIntegrityError before anything is scored
        table = store.consolidate([s.name for s in specs], plan=plan).to_pandas()
        rows_sha256 = store.table_sha256  # taken while utterances.parquet was written: never read back to fingerprint it
        in_run = table[table["model"].isin(list(facts))] if facts else table
        asr_ctx = SectionContext(
            dataset=views.dataset(SOURCE),
            asr_models=tuple(specs),
            out_dir=out,
            load_rows=views.loader(SOURCE, in_run),
            progress=progress,
            decode_options=dec,
            recipe_name=recipe.name,
            engine=engine,
            facts=facts,
            normalizer=normalizer,
        )
        asr = ASR_SECTION.run(recipe.scoring, asr_ctx)  # first: every other section runs after the ASR figures exist
        del asr_ctx
        for sec, cfg in parsed:  # in section order; each result is the summary section under the section's key
            ctx = SectionContext(
                dataset=views.dataset(sec.reads),
                asr_models=tuple(specs),
                out_dir=out,
                load_rows=views.loader(sec.reads, table),
                progress=progress,
                decode_options=dec,
                recipe_name=recipe.name,
                engine=engine,
                facts=facts,
                normalizer=normalizer,
            )
            sections[sec.key] = sec.run(cfg, ctx)
            del ctx
    finally:
        engine.stop(started)
    sections["engine"]["wall_s"] = time.perf_counter() - t0
    sections.update(extra or {})
    dataset_desc = views.describe(read_by=[sec.key for sec, _ in parsed if sec.reads == DERIVED])
    del dataset, source, views  # the utterance records are not needed for scoring; keep the driver's peak memory flat
    return score_run(out, recipe, table, dataset_desc, facts, sections, rows_sha256=rows_sha256, normalizer=normalizer, asr=asr)


def joint_passes(
    engine: EngineOptions,
    parsed: Sequence[tuple[AuditSection[Any, Any], Any]],
    specs: Sequence[ModelSpec],
    dataset: Dataset,
    dec: DecodeOptions,
    views: ClipViews | None = None,
) -> list[PassRequest]:
    """The sections' passes over the recipe's dataset that the engine runs together with the ASR pass.

    Only on a runner that declares joint runs of every kind involved, only with at least two
    passes to share the decode, and never a backend whose name another pass of the run uses
    (one plan holds them all): that one runs in its section, as before. Only sections that read
    every clip the ASR pass runs on (``views``: with derived clips, a section that reads source
    clips runs its passes over the source clips in its own section).
    """
    if not dataset.has_audio or not engine.runs(JOINT):
        return []
    views = views or ClipViews(dataset, dataset)
    requests = [r for sec, cfg in parsed if views.dataset(sec.reads) is dataset for r in sec.dataset_passes(cfg, dataset, dec)]
    if engine.missing({shard_pass(k) for k in ["asr", *(r.spec.kind for r in requests)]}):
        return []  # a kind the runner does not run: check_section_passes has refused the recipe already
    names = [s.name for s in specs] + [r.spec.name for r in requests]
    keep = [r for r in requests if names.count(r.spec.name) == 1]
    for r in requests:
        if r not in keep:
            log.info(
                "%s backend '%s' shares its name with another pass of this run; it runs in its own section pass", r.spec.kind, r.spec.name
            )
    return keep if len(specs) + len(keep) >= 2 else []


def check_section_passes(
    recipe: Recipe,
    engine: EngineOptions,
    parsed: Sequence[tuple[AuditSection[Any, Any], Any]],
    specs: Sequence[ModelSpec],
    dataset: Dataset,
) -> None:
    """Refuse, before any model loads, a recipe whose sections submit passes of a kind the run's
    runner does not declare (``AuditSection.engine_passes``), rather than when the first such pass is due;
    the message names the runner, what it runs, each section's passes it cannot run and the runners that can."""
    needs = {
        sec.key: refused
        for sec, cfg in parsed
        if (refused := [n for n in sec.engine_passes(cfg, specs, dataset) if engine.missing(n.kinds)])
    }
    if needs:
        what = "; ".join(f"{key}: {', '.join(n.what for n in passes)}" for key, passes in needs.items())
        kinds = {k for passes in needs.values() for n in passes for k in engine.missing(n.kinds)}
        raise ConfigError(
            f"recipe '{recipe.name}' has sections that run passes its runner does not ({what}): {engine.refusal(kinds)}, or drop "
            f"{'this section' if len(needs) == 1 else 'these sections'} ({', '.join(needs)}) from the recipe"
        )


def load_rows(out: Path) -> pd.DataFrame:
    """A run directory's ``utterances.parquet`` (for tools that start from the files; a truncated file is a ``ConfigError``)."""
    from audits.run_dir import read_rows_file

    return read_rows_file(Path(out))
