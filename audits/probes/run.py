"""Run the benchmark-optimization probes of a recipe end to end, from audio, through the engine.

``run_probes`` derives audio (masked clips, a copy of the dataset with planted reference errors,
generic-voice clips), runs the recipe's models on it with the run's engine (in-process or Ray, whichever the run uses,
into a resumable ``RunStore`` under ``DIR/probes/<probe>/``), scores the stored rows and returns the
``probes`` section of ``summary.json``: ``probes.<probe>.<model>`` with the rate, its 95%
interval and counts, beside probe facts under non-model keys.

The recipe schema and its validation live in ``audits.probes.config``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from audits.probes.config import ERROR_KINDS, BadReferenceConfig, OrthographyConfig, ProbeConfig, ReferenceErrors
from audits.probes.engine_io import failed_models as _failed_models
from audits.probes.engine_io import fresh_workspace as _fresh_workspace
from audits.probes.engine_io import hyp_map as _hyp_map
from audits.probes.engine_io import originals as _originals
from audits.probes.engine_io import run_models as _run_models
from audits.probes.helper_passes import Clip, EngineTimings
from audits.probes.mask_pass import derive_masked_set
from audits.probes.masking import clips_needing_timings, records_from_rows
from audits.probes.state import BadReferenceState, MaskingState, ProbeState
from audits.probes.synthetic_run import run_synthetic_voice
from engine.audio.shards import record_shard_digest, verified_shard, write_shards
from engine.backends import ASR_BACKENDS
from engine.data import ModelSpec, ProgressFn, Utterance
from engine.datasets import Dataset, open_dataset
from engine.engine import KEYED, SHARD_ASR, EngineOptions, PassNeed
from engine.errors import AuditError, ConfigError
from engine.storage import atomic_write_text

log = logging.getLogger(__name__)


# ------------------------------------------------------------------ planted reference errors


def plant_reference_errors(utts: Sequence[Utterance], cfg: ReferenceErrors) -> tuple[list[Utterance], dict[str, dict[str, str]]]:
    """A copy of ``utts`` with known errors in a deterministic ``fraction`` of the references.

    Kinds (cycled over the chosen clips): ``prepend``/``append`` add words nobody said (the panel
    should find a deletion span), ``drop-first``/``drop-last`` remove a spoken boundary word (an
    insertion span). Returns the copy and ``{utt_id: {kind, original, corrupted}}``.
    """
    eligible = [u for u in utts if u.reference and len(u.reference.split()) >= 4 and not u.problem]
    rng = np.random.default_rng(cfg.seed)
    n = round(cfg.fraction * len(eligible))
    chosen = sorted(int(i) for i in rng.permutation(len(eligible))[:n])
    plan: dict[str, dict[str, str]] = {}
    for j, i in enumerate(chosen):
        u = eligible[i]
        kind = cfg.kinds[j % len(cfg.kinds)]
        words = (u.reference or "").split()
        if kind == "prepend":
            head = words[0][0].lower() + words[0][1:] if words[0][:1].isupper() and not words[0].isupper() else words[0]
            new = f"{cfg.prepend} {head} " + " ".join(words[1:])
        elif kind == "append":
            new = f"{u.reference} {cfg.append}"
        elif kind == "drop-first":
            rest = words[1:]
            new = " ".join([rest[0][:1].upper() + rest[0][1:]] + rest[1:])
        else:
            last = words[-1]
            tail = last[len(last.rstrip(".,;:!?\"'")) :]
            new = " ".join(words[:-2] + [words[-2].rstrip(".,;:!?") + tail])
        plan[u.utt_id] = {"kind": kind, "original": u.reference or "", "corrupted": new.strip()}
    out = []
    for u in utts:
        if u.utt_id in plan:
            der = dict(u.derivation or {})
            der["planted_reference_error"] = plan[u.utt_id]
            u = replace(u, reference=plan[u.utt_id]["corrupted"], derivation=der)
        out.append(u)
    return out, plan


def _materialize(utts: Sequence[Utterance], root: Path | None, out_dir: Path) -> None:
    """Write utterances (audio embedded) as Parquet shards; audio files are read, not re-encoded."""
    rows = []
    for u in utts:
        data = u.audio_bytes
        if data is None and u.audio_path:
            p = Path(u.audio_path)
            if not p.is_absolute() and root is not None:
                p = root / p
            data = p.read_bytes() if p.exists() else None
        rows.append(replace(u, audio_bytes=data, audio_path=None if data is not None else u.audio_path))
    for old in [*out_dir.glob("shard-*.parquet"), *out_dir.glob("shard-*.parquet.sha256")]:
        old.unlink()
    for path in write_shards(rows, out_dir, shard_size=64):
        record_shard_digest(path)  # the copy is reused only while every shard matches its digest


# ------------------------------------------------------------------ the probes


def run_probes(
    cfg: ProbeConfig,
    dataset: Dataset,
    specs: Sequence[ModelSpec],
    out_dir: Path,
    base_rows: pd.DataFrame,
    progress: ProgressFn | None = None,
    engine: EngineOptions | None = None,
) -> dict[str, Any]:
    """Run every enabled probe; returns ``summary['probes']`` (``probes.<probe>.<model>``).

    Every re-run of the models on derived audio is submitted to ``engine`` (the run's).
    """
    if not dataset.has_audio:
        raise (
            ConfigError(
                "the masking, bad-reference (with a panel to run) and synthetic-voice probes need audio; this dataset "
                "holds predictions only. For predictions use `audit probe bad-reference --preds DIR --panel a,b,c`"
            )
            if (cfg.masking or cfg.synthetic_voice)
            else ConfigError("probes on a predictions-only dataset: use `audit probe bad-reference`")
        )
    out_dir = Path(out_dir)
    probes_dir = out_dir / "probes"
    probes_dir.mkdir(parents=True, exist_ok=True)
    models = [s.name for s in specs]
    base = base_rows[base_rows["model"].isin(models)] if len(base_rows) else base_rows
    if "parent_id" in base:
        base = base[base["parent_id"].isna()]
    base_hyps = _hyp_map(base)
    result: dict[str, Any] = {}
    masking_state: MaskingState | None = None
    badref_state: BadReferenceState | None = None

    def note(name: str) -> None:
        log.info("probe: %s", name)
        if progress:
            progress("probe", 0, {"probe": name})

    if cfg.orthography is not None:
        note("orthography")
        result["orthography"] = _orthography(cfg.orthography, dataset, base, models)
    timings = EngineTimings(cfg.timing, probes_dir, engine) if (cfg.masking or cfg.synthetic_voice) else None  # on the engine's workers
    if cfg.masking is not None:
        note("masking")
        result["masking"], masking_state = _masking(cfg, dataset, specs, probes_dir, base_hyps, timings, progress, engine)
    if cfg.bad_reference is not None:
        note("bad_reference")
        result["bad_reference"], badref_state = _bad_reference(cfg.bad_reference, dataset, specs, probes_dir, base_hyps, progress, engine)
    if cfg.synthetic_voice is not None and timings is not None:
        note("synthetic_voice")
        state = ProbeState(masking=masking_state, bad_reference=badref_state, engine=engine)
        result["synthetic_voice"] = run_synthetic_voice(cfg, dataset, specs, probes_dir, timings, progress, state)
    return result


def probe_passes(cfg: ProbeConfig, specs: Sequence[ModelSpec], dataset: Dataset) -> list[PassNeed]:
    """The passes the probes submit to the run's engine, named, with their kinds (``AuditSection.engine_passes``).

    Masking and synthetic voice re-run the models (ASR shard passes) on clips their helpers make as
    keyed units (word timings, masked clips, TTS renditions, voice embeddings, judges); bad reference
    re-runs models when a panel member is not among the run's models or a planted copy re-indexes a
    memorizer (as ``_bad_reference`` decides); orthography reads the main pass's rows only.
    """
    out = []
    if cfg.masking is not None:
        out.append(PassNeed("masking re-runs", frozenset({SHARD_ASR, KEYED})))
    br = cfg.bad_reference
    if br is not None and dataset.has_audio:
        names = {s.name for s in specs}
        plant = br.reference_errors
        planted = plant is not None and (plant.datasets is None or dataset.name in plant.datasets)
        rebinds = False
        for s in specs if planted else ():
            backend_cls: Any = ASR_BACKENDS.get(s.backend)
            rebinds = rebinds or backend_cls.rebind_dataset(s.options, str(dataset.source), "planted-copy", "parquet") != dict(s.options)
        if rebinds or any(p not in names for p in br.panel):
            out.append(PassNeed("bad-reference panel re-runs", frozenset({SHARD_ASR})))
    if cfg.synthetic_voice is not None:
        out.append(PassNeed("synthetic-voice re-runs", frozenset({SHARD_ASR, KEYED})))
    return out


def _orthography(cfg: OrthographyConfig, dataset: Dataset, base: pd.DataFrame, models: Sequence[str]) -> dict[str, Any]:
    from audits.probes.orthography import select_families, switch_entries

    refs = {u.utt_id: u.reference or "" for u in _originals(dataset) if u.reference}
    hyps: dict[str, dict[str, str | None]] = {m: {} for m in models}
    for (m, u), h in _hyp_map(base).items():
        if m in hyps and u in refs:
            hyps[m][u] = h
    return switch_entries(refs, hyps, select_families(cfg.families), cfg.min_clips_per_arm, cfg.pool)


def _masking(
    cfg: ProbeConfig,
    dataset: Dataset,
    specs: Sequence[ModelSpec],
    probes_dir: Path,
    base_hyps: Mapping[tuple[str, str], str | None],
    timings: Any,
    progress: ProgressFn | None,
    engine: EngineOptions | None = None,
) -> tuple[dict[str, Any], MaskingState | None]:
    """``probes.masking`` and the masked set with its records (for the synthetic-voice probe)."""
    from audits.probes.masking_score import gated_leak_rate

    settings = cfg.masking
    assert settings is not None  # guaranteed by the caller
    key = {"settings": asdict(settings), "timing": asdict(cfg.timing), "dataset": dataset.fingerprint}
    root = _fresh_workspace(probes_dir, "masking", key)
    need = clips_needing_timings(dataset, settings)
    timings.compute([Clip(u.utt_id, u, dataset.root) for u in need], {u.utt_id: u.reference or "" for u in need}, progress)

    build = derive_masked_set(dataset, timings, settings, root / "derived", root / "derive", engine, progress)  # on the engine's workers
    skipped = build.skip_counts()
    facts: dict[str, Any] = {
        "n_clips": build.n_clips,
        "n_clips_masked": build.n_clips_masked,
        "n_derived": len(build.derivations),
        "skipped": skipped,
        "skipped_examples": [s.to_dict() for s in build.skipped[:20]],
        "skipped_file": str(root / "derived" / "skipped.jsonl"),
        "timing_method": timings.resolved(),
        "settings": {**asdict(settings), "variants": list(settings.variants), "kinds": list(settings.kinds)},
    }
    if not build.derivations:
        reasons = ", ".join(f"{k}: {v}" for k, v in skipped.items()) or "the dataset is empty"
        facts.update(status="no-masked-clips", note=f"no clip could be masked ({reasons}); see {facts['skipped_file']}")
        log.warning("masking: %s", facts["note"])
        return facts, MaskingState(build)
    derived = open_dataset(root / "derived", "parquet")
    rows, run_facts = _run_models(derived, specs, root, progress, engine)
    recs = records_from_rows(build.derivations, build.parents, _hyp_map(rows), base_hyps, [s.name for s in specs])
    leak = gated_leak_rate(recs, settings.primary_variant).to_dict()
    for entry in leak.values():
        entry["k"], entry["n"] = entry["n_leaked"], entry["n_gated"]
    failed = _failed_models(run_facts)
    if failed:
        facts["failed_models"] = failed
    return {**leak, **facts, "status": "ok"}, MaskingState(build, tuple(recs))


def _bad_reference(
    cfg: BadReferenceConfig,
    dataset: Dataset,
    specs: Sequence[ModelSpec],
    probes_dir: Path,
    base_hyps: Mapping[tuple[str, str], str | None],
    progress: ProgressFn | None,
    engine: EngineOptions | None = None,
) -> tuple[dict[str, Any], BadReferenceState]:
    """``probes.bad_reference`` and the report with its references (for the synthetic-voice probe)."""
    from audits.probes.bad_reference import run_bad_reference_probe
    from engine.model_registry import load_model_registry, resolve_models

    plant = cfg.reference_errors
    if plant is not None and plant.datasets is not None and dataset.name not in plant.datasets:
        log.info("bad_reference: dataset '%s' is not in reference_errors.datasets %s; nothing planted", dataset.name, list(plant.datasets))
        plant = None
    key = {"cfg": asdict(cfg), "dataset": dataset.fingerprint, "planted": plant is not None}
    root = _fresh_workspace(probes_dir, "bad_reference", key)
    originals = _originals(dataset)
    plan: dict[str, dict[str, str]] = {}
    work = dataset
    if plant is not None:
        copy_dir = root / "dataset"
        planted, plan = plant_reference_errors(originals, plant)
        shards = sorted(copy_dir.glob("shard-*.parquet"))
        if not (copy_dir / "planted.json").exists() or not shards or not all(verified_shard(p) for p in shards):
            if (copy_dir / "planted.json").exists():
                log.warning("bad_reference: the planted copy in %s does not match its recorded digests; rebuilding it", copy_dir)
                (copy_dir / "planted.json").unlink()
            copy_dir.mkdir(parents=True, exist_ok=True)
            _materialize(planted, dataset.root, copy_dir)
            atomic_write_text(copy_dir / "planted.json", json.dumps(plan, indent=2, sort_keys=True))
        work = open_dataset(copy_dir, "parquet")
    refs = {u.utt_id: u.reference or "" for u in _originals(work) if u.reference and not u.problem}
    if not refs:
        raise AuditError("bad_reference: the dataset has no clip with a reference")
    names = [s.name for s in specs]
    to_run: list[ModelSpec] = []
    # panel members that are not among the run's models run here, on the same audio
    registry = load_model_registry()
    for e in resolve_models([p for p in cfg.panel if p not in names], registry):
        to_run.append(e.spec())
    # a memorizer of the run's dataset re-indexes the planted copy (what a benchmark learner would have seen)
    rerun: set[str] = set()
    for s in specs if plant is not None else ():
        backend_cls: Any = ASR_BACKENDS.get(s.backend)
        options = backend_cls.rebind_dataset(s.options, str(dataset.source), str(root / "dataset"), "parquet")
        if options != dict(s.options):
            to_run.append(ModelSpec(s.name, s.backend, options, s.batch_size, s.meta))
            rerun.add(s.name)
    own_hyps: dict[tuple[str, str], str | None] = {}
    failed: dict[str, str] = {}
    if to_run:
        rows, run_facts = _run_models(work, to_run, root, progress, engine)
        own_hyps = _hyp_map(rows)
        failed = _failed_models(run_facts)

    def hyps_of(model: str) -> dict[str, str]:
        src = own_hyps if (model in rerun or model not in names) else base_hyps
        return {c: (src.get((model, c)) or "") for c in refs}

    panel_hyps = {p: hyps_of(p) for p in cfg.panel if p not in failed}
    models_hyps = {m: hyps_of(m) for m in names if m not in failed}
    corrections = _load_corrections(cfg.corrections) if cfg.corrections else None
    report = run_bad_reference_probe(
        refs,
        panel_hyps,
        models_hyps,
        cfg.settings(),
        corrections=corrections,
        corrections_mode=cfg.corrections_mode,  # type: ignore[arg-type]
    )
    state = BadReferenceState(report=report, refs=refs, plan=plan, work=work, corrections=corrections)
    out: dict[str, Any] = report.to_dict()
    for m in report.results:
        entry: dict[str, Any] = out[m]
        entry["k"], entry["n"] = entry["n_ref"], entry["n_eligible"]
    overlap = sorted(set(cfg.panel) & set(names))
    if overlap:
        out["panel_overlap"] = overlap
    if failed:
        out["failed_models"] = failed
    if plan:
        found = {s.clip_id for s in report.spans}
        out["planted"] = {
            "n_planted": len(plan),
            "n_planted_found": sum(1 for c in plan if c in found),
            "n_spans_on_unplanted_clips": sum(1 for s in report.spans if s.clip_id not in plan),
            "by_kind": {k: sum(1 for p in plan.values() if p["kind"] == k) for k in ERROR_KINDS},
            "file": str(root / "dataset" / "planted.json"),
        }
    out["status"] = "ok" if report.spans else "no-spans"
    return out, state


def _load_corrections(path: str) -> dict[str, str]:
    """Human-verified references: JSON {utt_id: text} or JSONL lines {utt_id|id|audio_filepath, text}.

    Every entry must give its text as a string: a null or a number would silently become the
    reference "None" or "3", so it is refused naming the entry (or line) and the fix.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"bad_reference.corrections: file '{p}' not found; give a JSON or JSONL file of human-verified references")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"bad_reference.corrections: {p}: not valid UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"bad_reference.corrections: {p}: cannot be read ({exc.strerror or exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None  # not one JSON document: read it as JSONL below, which names the bad line
    if isinstance(data, dict):
        bad = [k for k, v in data.items() if not isinstance(v, str)]
        if bad:
            raise ConfigError(f"{p}: entry '{bad[0]}' has {data[bad[0]]!r} as its text; every corrected reference must be a string")
        return {str(k): v for k, v in data.items()}
    out: dict[str, str] = {}
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f'{p}, line {i}: not JSON ({exc.msg}); expected {{"utt_id": ..., "text": ...}}') from None
        uid = row.get("utt_id", row.get("id", row.get("audio_filepath"))) if isinstance(row, dict) else None
        if uid is None or not isinstance(row.get("text"), str):
            raise ConfigError(f"{p}, line {i}: needs 'utt_id' (or 'id'/'audio_filepath') and 'text' (a string)")
        if str(uid) in out:
            raise ConfigError(f"{p}, line {i}: clip '{uid}' is corrected twice; keep one line per clip")
        out[str(uid)] = row["text"]
    if not out:
        raise ConfigError(f"bad_reference.corrections: {p} holds no correction; give {{utt_id: text}} or JSONL lines")
    return out


def check_probe_inputs(cfg: ProbeConfig, dataset: Dataset) -> None:
    """Every input the probes read, checked before any model loads (``ProbesSection.check_inputs``).

    The bad-reference probe needs clips with references, and its corrections file must be
    readable, well formed and name only clips of this dataset that have a reference.
    """
    b = cfg.bad_reference
    if b is None:
        return
    refs = {u.utt_id for u in _originals(dataset) if u.reference and not u.problem}
    if not refs:
        raise ConfigError(
            f"probes.bad_reference: dataset '{dataset.name}' has no clip with a reference; "
            "give a dataset with reference text or remove bad_reference"
        )
    if b.corrections:
        unknown = [c for c in _load_corrections(b.corrections) if c not in refs]
        if unknown:
            raise ConfigError(
                f"bad_reference.corrections: {b.corrections} names {len(unknown)} clip(s) with no reference in dataset "
                f"'{dataset.name}' ({', '.join(unknown[:5])}); check that the corrections file belongs to this dataset"
            )
