"""Recipe orchestration: dataset -> engine -> result rows -> scores -> run directory."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pyarrow.parquet as pq

from audits.asr.scoring import ScoringOptions
from audits.asr.summary import build_summary, write_summary
from audits.recipes import Recipe, builtin_dataset_path
from audits.sections import SectionContext, ordered
from engine.backends import ASR_BACKENDS
from engine.data import DecodeOptions, ModelSpec, ProgressFn
from engine.datasets import Dataset, open_dataset
from engine.errors import ConfigError
from engine.model_registry import REPO_ROOT, load_model_registry, resolve_models
from engine.runner import InProcessRunner, hardware_facts
from engine.store import RunStore, atomic_write_text
from normalizers import get_normalizer

log = logging.getLogger(__name__)



def ensure_demo_corpus(path: Path, progress: Callable[[int, int], None] | None = None) -> Path:
    """Build the demo corpus (or the demo conversation set) when it is absent (deterministic, offline)."""
    if path.name == "conversation":
        from engine.corpus.conversation import build_conversation_set

        return build_conversation_set(path).root
    subset = "small" if path.name == "demo-small" else "full"
    if (path / "corpus.json").exists() and (path / "shards").is_dir() and _corpus_subset(path) == subset:
        return path
    from engine.corpus.demo import build_demo_corpus

    log.info("building the demo corpus (%s) in %s (first run only)", subset, path)
    build_demo_corpus(path, progress=progress, subset=subset)
    return path


def _corpus_subset(path: Path) -> str | None:
    """The subset a built demo corpus records (``full`` for corpora built before subsets existed)."""
    try:
        return str(json.loads((path / "corpus.json").read_text(encoding="utf-8")).get("subset", "full"))
    except (OSError, ValueError, AttributeError):
        return None


def open_recipe_dataset(recipe: Recipe, shard_size: int | None = None) -> Dataset:
    path = recipe.dataset.path
    if path.startswith("builtin:"):
        path = str(ensure_demo_corpus(builtin_dataset_path(path)))
    elif not Path(path).is_absolute() and not Path(path).exists() and (REPO_ROOT / path).exists():
        path = str(REPO_ROOT / path)  # recipe paths may be relative to the repository root
    return open_dataset(path, recipe.dataset.reader, shard_size=shard_size or recipe.shard_size, limit=recipe.dataset.limit, **dict(recipe.dataset.options))


def model_specs(recipe: Recipe, dataset: Dataset) -> list[ModelSpec]:
    """Registry specs for the recipe's models (checked before anything loads)."""
    if not dataset.has_audio:
        preds = dataset.predictions
        names = [m for m in recipe.models if m in preds] if recipe.models and any(m in preds for m in recipe.models) else sorted(preds)
        return [ModelSpec(n, "predictions", {}, 0, {}) for n in names]
    registry = load_model_registry()
    specs = []
    for e in resolve_models(list(recipe.models), registry):
        spec = e.spec(recipe.batch_size)
        backend_cls: Any = ASR_BACKENDS.get(spec.backend)
        options = backend_cls.bind_dataset(spec.options, dataset.source, dataset.reader)
        specs.append(replace(spec, options=options))
    return specs


def check_run_dir(out: Path, recipe: Recipe, dataset: Dataset) -> None:
    """Refuse to mix a different dataset or normalizer into an existing run directory."""
    meta_path = out / "run.json"
    if not meta_path.exists():
        return
    old = json.loads(meta_path.read_text())
    if old.get("dataset_fingerprint") != dataset.fingerprint:
        raise ConfigError(
            f"{out} holds results for another dataset (fingerprint {old.get('dataset_fingerprint')} vs {dataset.fingerprint}: "
            "utterance ids, references or audio content differ); use a new --out directory"
        )
    if old.get("normalizer") != recipe.normalizer:
        raise ConfigError(f"{out} was scored with normalizer '{old.get('normalizer')}', this recipe uses '{recipe.normalizer}'; use a new --out")


def score_run_dir(out: Path, recipe: Recipe, dataset_desc: dict[str, Any], facts: dict[str, dict[str, Any]], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """(Re)score ``utterances.parquet`` and write ``summary.json`` and ``report.md``."""
    table = pq.read_table(out / "utterances.parquet").to_pandas()
    if facts:
        table = table[table["model"].isin(list(facts))]
    normalizer = get_normalizer(recipe.normalizer)
    sc = recipe.scoring
    opts = ScoringOptions(n_boot=sc.n_boot, seed=sc.seed, slice_columns=list(sc.slices) if sc.slices else None, gaps=list(sc.gaps))
    summary, scored = build_summary(table, normalizer, recipe.as_dict(), dataset_desc, facts, hardware_facts(), opts, extra)
    summary_dict: dict[str, Any] = dict(summary)
    if sc.semantic_similarity:
        from audits.asr.semantic import add_semantic_similarity

        add_semantic_similarity(summary_dict, scored)
    write_summary(out, summary_dict)
    from audits.reports.build import build_report

    # report.md (+ cohort), report.html and exports/ from the same scoring pass
    build_report([out], None, worst=5, exports=True, scored=scored.frame)
    return summary_dict


@dataclass(frozen=True)
class EngineOptions:
    """Which runner moves the audio: ``inprocess`` (default on one machine) or ``ray``."""

    kind: str = "inprocess"
    address: str | None = None
    workers: int | None = None
    max_retries: int = 2
    unit_timeout_s: float | None = None
    max_models_loaded: int | None = None  # in-process: models resident at once (engine/memory_plan.py)
    memory_budget_mb: float | None = None  # in-process: memory the loaded models may take


def make_runner(engine: EngineOptions, dataset: Dataset, specs: list[ModelSpec], store: RunStore, recipe: Recipe, progress: ProgressFn | None) -> Any:
    dec = DecodeOptions(max_duration_s=recipe.dataset.max_duration_s, allow_outside_root=recipe.dataset.allow_outside_root)
    if engine.kind == "inprocess":
        return InProcessRunner(
            dataset, specs, store, warmup=recipe.warmup, decode_options=dec, progress=progress,
            max_models_loaded=engine.max_models_loaded, memory_budget_mb=engine.memory_budget_mb,
        )
    if engine.kind == "ray":
        from engine.ray_runner import RayRunner

        return RayRunner(
            dataset, specs, store, warmup=recipe.warmup, decode_options=dec, progress=progress,
            address=engine.address, workers=engine.workers, max_retries=engine.max_retries, unit_timeout_s=engine.unit_timeout_s,
        )
    raise ConfigError(f"unknown engine '{engine.kind}' (known: inprocess, ray)")


def run_recipe(
    recipe: Recipe,
    out: Path,
    progress: ProgressFn | None = None,
    corpus_progress: Callable[[int, int], None] | None = None,
    engine: EngineOptions = EngineOptions(),
) -> dict[str, Any]:
    """Run (or resume) a recipe into ``out``; finished ``(model, shard)`` units are skipped.

    Everything that can be validated (recipe sections, dataset, model names) is validated before
    any model loads. The audit sections the recipe uses (``audits.sections``) then run in section
    order after the ASR models, each writing its part of the summary under its key.
    """
    t0 = time.perf_counter()
    try:
        normalizer = get_normalizer(recipe.normalizer)  # fail early on a bad name
    except ValueError as exc:
        raise ConfigError(f"{recipe.source or recipe.name}: normalizer: {exc}") from None
    # every section's config is validated before the dataset opens or any model loads
    used = ordered(key for key, raw in recipe.sections.items() if raw)  # an unknown key raises, naming close matches
    parsed = [(sec, sec.parse(recipe.section(sec.key), recipe.source)) for sec in used]
    if recipe.dataset.path.startswith("builtin:"):
        ensure_demo_corpus(builtin_dataset_path(recipe.dataset.path), corpus_progress)
    dataset = open_recipe_dataset(recipe)
    specs = model_specs(recipe, dataset)
    if not specs and not any(sec.can_run_without_asr_models for sec, _ in parsed):
        raise ConfigError(f"recipe '{recipe.name}': no models to run (list registry names under 'models' or use --models)")
    for sec, _ in parsed:
        if sec.needs_asr_models and not specs:
            raise ConfigError(f"recipe '{recipe.name}': {sec.key} need ASR models under 'models'")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is an existing file, not a directory; give a new or existing run directory")
    out.mkdir(parents=True, exist_ok=True)
    check_run_dir(out, recipe, dataset)
    atomic_write_text(
        out / "run.json",
        json.dumps({"recipe": recipe.name, "dataset_fingerprint": dataset.fingerprint, "normalizer": recipe.normalizer, "normalizer_version": normalizer.version}, indent=2),
    )
    store = RunStore(out)
    facts: dict[str, dict[str, Any]] = {}
    plan = None
    if specs:
        runner = make_runner(engine, dataset, specs, store, recipe, progress)
        facts = runner.run()
        plan = runner.plan
    # exactly one row per (model, utterance) of the plan, or ResultIntegrityError before anything is scored
    store.consolidate([s.name for s in specs], plan=plan)
    extra: dict[str, Any] = {"engine": {"runner": engine.kind, "address": engine.address, "workers": engine.workers}}
    dec = DecodeOptions(max_duration_s=recipe.dataset.max_duration_s, allow_outside_root=recipe.dataset.allow_outside_root)
    ctx = SectionContext(dataset=dataset, asr_models=tuple(specs), out_dir=out, load_rows=lambda: load_rows(out), progress=progress, decode_options=dec, recipe_name=recipe.name)
    for sec, cfg in parsed:  # in section order; each result is the summary section under the section's key
        extra[sec.key] = sec.run(cfg, ctx)
    del ctx
    extra["engine"]["wall_s"] = time.perf_counter() - t0
    dataset_desc = dataset.describe()
    del dataset  # the utterance records are not needed for scoring; keep the driver's peak memory flat
    return score_run_dir(out, recipe, dataset_desc, facts, extra)


def load_rows(out: Path) -> pd.DataFrame:
    return pq.read_table(Path(out) / "utterances.parquet").to_pandas()
