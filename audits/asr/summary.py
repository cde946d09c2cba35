"""``summary.json``: everything needed to know how each number was made, plus the numbers.

The field names and types are in ``audits/schema.py``.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Mapping, MutableMapping
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from audits.asr.hallucination import SCORING_NOTE as HALLUCINATION_NOTE
from audits.asr.paired import METHOD as PAIRED_METHOD
from audits.asr.paired import compare_models
from audits.asr.results import AsrResult
from audits.asr.scoring import ScoredRows, ScoringOptions, score_table, summarize_models
from audits.schema import SCHEMA_VERSION, Summary
from audits.version import version as engine_version
from engine.errors import RegistryError
from engine.storage import atomic_write_text
from normalizers import Normalizer

TRACKED_PACKAGES = (
    "audit-engine",
    "faster-whisper",
    "ctranslate2",
    "pocketsphinx",
    "whisper-normalizer",
    "rapidfuzz",
    "numpy",
    "pyarrow",
    "pandas",
    "soundfile",
    "soxr",
    "torch",
    "transformers",
    "ray",
    "resemblyzer",
)


def package_versions() -> dict[str, str]:
    out = {}
    for p in TRACKED_PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            continue
    return out


def json_safe(value: Any) -> Any:
    """Plain strict-JSON values, recursively: numpy scalars and arrays to Python, NaN and
    infinities to null (JSON has neither), mapping keys to strings."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def build_summary(
    table: pd.DataFrame,
    normalizer: Normalizer,
    recipe: Mapping[str, Any],
    dataset: Mapping[str, Any],
    model_facts: Mapping[str, Mapping[str, Any]],
    hardware: Mapping[str, Any],
    options: ScoringOptions,
    extra: Mapping[str, Any] | None = None,
) -> tuple[Summary, ScoredRows]:
    """Score the result rows once (the ASR section) and assemble the summary (docs/design.md, run-directory contract).

    The scored rows are returned too, so reports and exports reuse them instead of scoring again.
    """
    asr = score_models(table, normalizer, model_facts, int(dataset.get("n_utts", 0)), options)
    return assemble_summary(asr, normalizer, recipe, dataset, hardware, options, extra, run_failures(model_facts)), asr.scored


def score_models(
    table: pd.DataFrame, normalizer: Normalizer, model_facts: Mapping[str, Mapping[str, Any]], n_utts: int, options: ScoringOptions
) -> AsrResult:
    """The ASR section's work: score the rows once, then every model's figures (with its run facts) and the comparisons.

    ``n_utts``: the dataset's clips, counted as failed for a model that made no row.
    """
    scored = score_table(table, normalizer)
    per_model = summarize_models(scored, options) if len(table) else {}
    models: dict[str, Any] = {}
    for name, facts in model_facts.items():
        entry: dict[str, Any] = dict(per_model.get(name, {}))
        if not entry:
            entry = {
                "n_utts": 0,
                "n_failed": n_utts,
                "audio_s": 0.0,
                "infer_s": 0.0,
                "rtfx": None,
                "wer": None,
                "cer": None,
                "slices": {},
                "gaps": [],
            }
        info = dict(facts.get("info", {}))
        entry["status"] = facts.get("status", "unknown")
        if facts.get("error"):
            entry["error"] = facts["error"]
        entry["backend"] = facts.get("backend")
        entry["batch_size"] = facts.get("batch_size")
        entry["warmup_batches"] = facts.get("warmup_batches", 0)
        entry["device"] = info.get("device")
        entry["dtype"] = info.get("dtype")
        entry["load_s"] = facts.get("load_s")
        entry["backend_info"] = info
        entry["params_m"] = facts.get("params_m")
        if facts.get("hub"):  # a --models hf:ORG/NAME[@REVISION] checkpoint: hub id, revision, commit, detected family
            entry["hub"] = dict(facts["hub"])
        if facts.get("failed_units"):
            entry["failed_units"] = facts["failed_units"]
        if facts.get("engine"):
            entry["engine"] = facts["engine"]
        entry["tags"] = facts.get("tags", [])
        models[name] = entry
    for name, m in per_model.items():  # rows for models not in this recipe's facts (merged runs)
        models.setdefault(name, m)
    comparisons = compare_models(scored.frame, options.n_boot, options.seed, options.alpha) if len(table) else {}
    return AsrResult.from_json(json_safe({"models": models, "comparisons": comparisons}), scored=scored)


def run_failures(model_facts: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every unit that failed and every model that could not run, for summary.json's ``failures``."""
    return [{"model": name, **dict(fu)} for name, facts in model_facts.items() for fu in (facts.get("failed_units") or [])] + [
        {"model": name, "shard": None, "reason": facts.get("error"), "kind": facts.get("status")}
        for name, facts in model_facts.items()
        if facts.get("status") in ("unavailable", "failed-to-load")
    ]


def assemble_summary(
    asr: AsrResult,
    normalizer: Normalizer,
    recipe: Mapping[str, Any],
    dataset: Mapping[str, Any],
    hardware: Mapping[str, Any],
    options: ScoringOptions,
    extra: Mapping[str, Any] | None = None,
    failures: list[dict[str, Any]] | None = None,
) -> Summary:
    """``summary.json`` from the ASR section's result and the run's provenance: serialization at the edge.

    ``extra``: the other sections' parts (plain JSON, or records with ``to_json``) and the caller's keys, after the core.
    """
    asr_json = asr.to_json()
    core: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "engine_version": engine_version(),
        "failures": failures if failures is not None else [],
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "recipe": dict(recipe),
        "dataset": dict(dataset),
        "normalizer": {"name": normalizer.name, "version": normalizer.version},
        "scoring": {
            "wer": "corpus-level: total word edits / total reference words; failed rows excluded and counted in n_failed; speech-free "
            "clips (empty normalized reference) excluded and scored under hallucination",
            "cer": "corpus-level over characters of the normalized text, spaces included",
            "ci95": f"percentile bootstrap over speaker blocks, {options.n_boot} replicates, seed {options.seed}",
            "rtfx": "audio seconds / inference seconds (batch wall time, feature extraction to decoded text), warm-up excluded",
            "hallucination": HALLUCINATION_NOTE,
            "comparisons": f"{PAIRED_METHOD}, {options.n_boot} replicates, seed {options.seed}, alpha {options.alpha}",
            "gaps": "unpaired speaker-block bootstrap per gap; shifted-null two-sided p; Holm across all gaps of all models (p_holm, "
            "significant)",
        },
        "packages": package_versions(),
        "hardware": dict(hardware),
        "models": asr_json["models"],
        "comparisons": asr_json.get("comparisons", {}),
    }
    taken = sorted(set(extra or {}) & set(core))
    if taken:  # sections write under their own names only (audits.sections refuses these names at registration)
        raise RegistryError(
            f"the run's sections and extras would replace summary.json's own {', '.join(repr(k) for k in taken)}; "
            "every section writes under its own name"
        )
    summary = {**core, **{k: v.to_json() if hasattr(v, "to_json") else v for k, v in (extra or {}).items()}}
    out: Summary = json_safe(summary)
    return out


def write_summary(out_dir: Path, summary: Mapping[str, Any]) -> Path:
    """Write ``summary.json`` atomically, sealed with the digest of its own content (``audits.run_dir``).

    A mutable summary gets its ``digest`` in place, so the result held in memory equals what a
    reader of the file reads (once per run: the run's reports are made from memory).
    """
    from audits.run_dir import seal

    data = seal(summary) if isinstance(summary, MutableMapping) else seal(dict(summary))
    path = out_dir / "summary.json"
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False))
    return path


def load_summary(out_dir: Path) -> dict[str, Any]:
    """A run directory's ``summary.json`` as a mapping (``ConfigError`` naming the file when it is missing, truncated or
    not an object). Its digests are not checked here: commands read runs through ``audits.run_dir.read_run``."""
    from audits.run_dir import read_summary_file

    return read_summary_file(Path(out_dir))
