"""Run the benchmark-optimization probes of a recipe end to end, from audio, through the engine.

``parse_probe_config`` validates a recipe's ``probes:`` mapping before any model loads;
``run_probes`` derives audio (masked clips, a copy of the dataset with planted reference errors,
generic-voice clips), runs the recipe's models on it with the engine (``InProcessRunner`` and a
resumable ``RunStore`` under ``DIR/probes/<probe>/``), scores the stored rows and returns the
``probes`` section of ``summary.json``: ``probes.<probe>.<model>`` with the rate, its 95%
interval and counts, beside probe facts under non-model keys.

Recipe schema (every key optional; a probe runs when its key is present and ``enabled`` is not false)::

    probes:
      word_timings: {method: auto|ctc|whisper, model: whisper-tiny.en}
      masking: {variants: [silence, noise, attenuate], primary_variant: silence, max_targets: 1,
                pad_s: 0.05, min_clip_s: 1.0, kinds: [number, proper-noun], ner: null,
                attenuate_db: -30, noise: pink, max_span_fraction: 0.5, seed: 0}
      orthography: {min_clips_per_arm: 5, pool: false, families: null}
      bad_reference: {panel: [a, b, c], supermajority: 0.8, min_agree: 2, min_eligible_panel: 3,
                      min_ref_match: 0.5, corrections: null, corrections_mode: replace,
                      reference_errors: {fraction: 0.5, kinds: [...], seed: 0, datasets: [demo]}}
      synthetic_voice: {tts: espeak-ng, voice: null, sources: [masking, bad_reference],
                        max_clips: 200, n_boot: 1000, seed: 0}

``reference_errors`` (for corpora whose references are right, like the demo corpus) plants known,
recorded reference errors in a copy of the dataset: the bad-reference probe then runs on that copy,
a memorizer that indexes the run's dataset indexes the *corrupted* copy (as a model that learned
the published benchmark would), honest models transcribe the same audio, and the summary says how
many planted errors the panel found. ``datasets`` limits planting to datasets of those names, so
``--dataset OTHER`` audits OTHER as it is.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from audits.probes.masking import MaskSettings, build_masked_set, mask_clip, records_from_rows
from audits.probes.synthetic_voice import (
    Pair,
    SyntheticSettings,
    corrected_from_spans,
    make_tts,
    masking_pairs,
    summarize_pairs,
    synthesize,
)
from audits.probes.word_timings import METHODS, TimingCache, make_timer
from engine.config import check_keys, expect_type
from engine.data import ModelSpec, ProgressFn, Utterance
from engine.datasets import Dataset, open_dataset
from engine.errors import AuditError, ConfigError
from engine.runner import InProcessRunner
from engine.shards import encode_audio, write_shards
from engine.store import RunStore, atomic_write_text

log = logging.getLogger(__name__)


PROBE_KEYS = {"word_timings", "masking", "orthography", "bad_reference", "synthetic_voice"}
TIMING_KEYS = {"method", "model"}
MASKING_KEYS = {"enabled", "variants", "primary_variant", "max_targets", "pad_s", "min_clip_s", "kinds", "ner",
                "attenuate_db", "noise", "max_span_fraction", "seed"}
ORTHO_KEYS = {"enabled", "min_clips_per_arm", "pool", "families"}
BADREF_KEYS = {"enabled", "panel", "supermajority", "min_agree", "min_eligible_panel", "min_ref_match",
               "min_deletion_cer", "corrections", "corrections_mode", "reference_errors"}
REFERR_KEYS = {"enabled", "fraction", "kinds", "seed", "prepend", "append", "datasets"}
SYNTH_KEYS = {"enabled", "tts", "voice", "sources", "max_clips", "n_boot", "seed"}
ERROR_KINDS = ("prepend", "append", "drop-first", "drop-last")


# ------------------------------------------------------------------ configuration


@dataclass(frozen=True)
class TimingConfig:
    method: str = "auto"
    model: str = "whisper-tiny.en"


@dataclass(frozen=True)
class OrthographyConfig:
    min_clips_per_arm: int = 5
    pool: bool = False
    families: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ReferenceErrors:
    """Known reference errors planted in a copy of the dataset (see the module docstring)."""

    fraction: float = 0.5
    kinds: tuple[str, ...] = ERROR_KINDS
    seed: int = 0
    prepend: str = "Madam President,"
    append: str = "Thank you very much."
    datasets: tuple[str, ...] | None = None


@dataclass(frozen=True)
class BadReferenceConfig:
    panel: tuple[str, ...]
    supermajority: float = 0.8
    min_agree: int = 2
    min_eligible_panel: int = 3
    min_ref_match: float = 0.5
    min_deletion_cer: float = 0.30
    corrections: str | None = None
    corrections_mode: str = "replace"
    reference_errors: ReferenceErrors | None = None

    def settings(self) -> Any:
        from audits.probes.bad_reference import BadRefSettings

        return BadRefSettings(
            supermajority=self.supermajority, min_agree=self.min_agree, min_ref_match=self.min_ref_match,
            min_eligible_panel=self.min_eligible_panel, min_deletion_cer=self.min_deletion_cer,
        )


@dataclass(frozen=True)
class ProbeConfig:
    """Validated ``probes:`` section of a recipe; a probe is None when it does not run."""

    timing: TimingConfig = TimingConfig()
    masking: MaskSettings | None = None
    orthography: OrthographyConfig | None = None
    bad_reference: BadReferenceConfig | None = None
    synthetic_voice: SyntheticSettings | None = None
    source: str = ""

    @property
    def enabled(self) -> list[str]:
        return [n for n in ("masking", "orthography", "bad_reference", "synthetic_voice") if getattr(self, n) is not None]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _section(raw: Mapping[str, Any], key: str, allowed: set[str], where: str) -> dict[str, Any] | None:
    if key not in raw:
        return None
    sec = raw[key]
    if sec is None or sec is True:
        sec = {}
    if sec is False:
        return None
    check_keys(sec, allowed, f"{where}.{key}")
    if sec.get("enabled", True) is False:
        return None
    return {k: v for k, v in sec.items() if k != "enabled"}


def _num(sec: Mapping[str, Any], key: str, default: Any, where: str, types: Any = (int, float)) -> Any:
    return expect_type(sec.get(key, default), types, f"{where}.{key}") if key in sec else default


def _str_list(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    expect_type(value, list, where)
    for i, v in enumerate(value):
        expect_type(v, str, f"{where}[{i}]")
    return tuple(value)


def parse_probe_config(mapping: Mapping[str, Any] | None, source: str = "", registry: Mapping[str, Any] | None = None) -> ProbeConfig:
    """Validate a recipe's ``probes:`` mapping; every error names the recipe and the key.

    Pure apart from reading the model registry (to check panel names); called before any model loads.
    """
    where = f"{source}: probes" if source else "probes"
    raw = mapping or {}
    check_keys(raw, PROBE_KEYS, where)

    t = _section(raw, "word_timings", TIMING_KEYS, where) or {}
    timing = TimingConfig(method=str(t.get("method", "auto")), model=str(t.get("model", "whisper-tiny.en")))
    if timing.method not in METHODS:
        raise ConfigError(f"{where}.word_timings.method must be one of {list(METHODS)}, got '{timing.method}'")

    masking = None
    m = _section(raw, "masking", MASKING_KEYS, where)
    if m is not None:
        w = f"{where}.masking"
        variants = _str_list(m.get("variants", ["silence"]), f"{w}.variants")
        masking = MaskSettings(
            variants=variants,
            primary_variant=str(m.get("primary_variant", "silence" if "silence" in variants else variants[0] if variants else "silence")),
            max_targets=int(_num(m, "max_targets", 1, w, int)),
            pad_s=float(_num(m, "pad_s", 0.05, w)),
            min_clip_s=float(_num(m, "min_clip_s", 1.0, w)),
            kinds=_str_list(m.get("kinds", ["number", "proper-noun"]), f"{w}.kinds"),
            ner=m.get("ner"),
            attenuate_db=float(_num(m, "attenuate_db", -30.0, w)),
            noise_color=str(m.get("noise", "pink")),
            max_span_fraction=float(_num(m, "max_span_fraction", 0.5, w)),
            seed=int(_num(m, "seed", 0, w, int)),
        )

    ortho = None
    o = _section(raw, "orthography", ORTHO_KEYS, where)
    if o is not None:
        w = f"{where}.orthography"
        fams = _str_list(o["families"], f"{w}.families") if o.get("families") is not None else None
        ortho = OrthographyConfig(int(_num(o, "min_clips_per_arm", 5, w, int)), bool(o.get("pool", False)), fams)
        if ortho.min_clips_per_arm < 1:
            raise ConfigError(f"{w}.min_clips_per_arm must be >= 1, got {ortho.min_clips_per_arm}")
        if fams is not None:
            from audits.probes.orthography import default_families

            known = [f.name for f in default_families(include_optional_compounds=True)]
            unknown = [f for f in fams if f not in known]
            if unknown:
                raise ConfigError(f"{w}.families: unknown family {unknown}; known: {', '.join(known)}")

    badref = None
    b = _section(raw, "bad_reference", BADREF_KEYS, where)
    if b is not None:
        badref = _parse_badref(b, f"{where}.bad_reference", registry)

    synth = None
    s = _section(raw, "synthetic_voice", SYNTH_KEYS, where)
    if s is not None:
        w = f"{where}.synthetic_voice"
        sources = _str_list(s.get("sources", ["masking", "bad_reference"]), f"{w}.sources")
        synth = SyntheticSettings(
            tts=str(s.get("tts", "espeak-ng")), voice=s.get("voice"), sources=sources,
            max_clips=int(_num(s, "max_clips", 200, w, int)), n_boot=int(_num(s, "n_boot", 1000, w, int)),
            seed=int(_num(s, "seed", 0, w, int)),
        )
        from engine.backends import TTS_BACKENDS
        from engine.errors import RegistryError

        try:
            TTS_BACKENDS.get(synth.tts)
        except RegistryError as exc:
            raise ConfigError(f"{w}.tts: {exc}") from None
        usable = [src for src in synth.sources if (src == "masking" and masking) or (src == "bad_reference" and badref)]
        if not usable:
            raise ConfigError(
                f"{w}: its sources {list(synth.sources)} need the masking or bad_reference probe; enable one of them"
            )
    return ProbeConfig(timing, masking, ortho, badref, synth, source)


def _parse_badref(b: Mapping[str, Any], w: str, registry: Mapping[str, Any] | None) -> BadReferenceConfig:
    panel = _str_list(b.get("panel", []) or [], f"{w}.panel")
    corrections = b.get("corrections")
    mode = str(b.get("corrections_mode", "replace"))
    if mode not in ("replace", "confirm"):
        raise ConfigError(f"{w}.corrections_mode must be 'replace' or 'confirm', got '{mode}'")
    cfg = BadReferenceConfig(
        panel=panel,
        supermajority=float(_num(b, "supermajority", 0.8, w)),
        min_agree=int(_num(b, "min_agree", 2, w, int)),
        min_eligible_panel=int(_num(b, "min_eligible_panel", 3, w, int)),
        min_ref_match=float(_num(b, "min_ref_match", 0.5, w)),
        min_deletion_cer=float(_num(b, "min_deletion_cer", 0.30, w)),
        corrections=None if corrections is None else str(expect_type(corrections, str, f"{w}.corrections")),
        corrections_mode=mode,
    )
    cfg.settings()  # range checks of the thresholds
    needs_panel = not (cfg.corrections and cfg.corrections_mode == "replace")
    if needs_panel and not panel:
        raise ConfigError(
            f"{w}.panel is empty: name at least {cfg.min_eligible_panel} registry ASR models, chosen independently of "
            "the models under test, whose consensus decides which reference words were not spoken "
            "(or give corrections: a file of human-verified references)"
        )
    if needs_panel and len(panel) < cfg.min_eligible_panel:
        raise ConfigError(
            f"{w}.panel has {len(panel)} model(s) ({', '.join(panel)}) but min_eligible_panel is {cfg.min_eligible_panel}: "
            "no clip could ever reach a consensus; add panel models or lower min_eligible_panel"
        )
    dupes = sorted({p for p in panel if panel.count(p) > 1})
    if dupes:
        raise ConfigError(f"{w}.panel names {dupes} more than once; a panel member votes once")
    if panel:
        from engine.model_registry import load_model_registry, resolve_models

        reg = registry if registry is not None else load_model_registry()
        try:
            entries = resolve_models(list(panel), reg)  # type: ignore[arg-type]
        except ConfigError as exc:
            raise ConfigError(f"{w}.panel: {exc}") from None
        ctrl = [e.name for e in entries if e.backend == "memorizer"]
        if ctrl:
            raise ConfigError(f"{w}.panel: {ctrl} is a memorizer (a positive control), not an independent listener")
    re_raw = b.get("reference_errors")
    if re_raw not in (None, False):
        rw = f"{w}.reference_errors"
        re_raw = {} if re_raw is True else re_raw
        check_keys(re_raw, REFERR_KEYS, rw)
        if re_raw.get("enabled", True) is not False:
            kinds = _str_list(re_raw.get("kinds", list(ERROR_KINDS)), f"{rw}.kinds")
            bad = [k for k in kinds if k not in ERROR_KINDS]
            if bad or not kinds:
                raise ConfigError(f"{rw}.kinds: {bad or 'empty'}; choose from {list(ERROR_KINDS)}")
            frac = float(_num(re_raw, "fraction", 0.5, rw))
            if not 0.0 < frac <= 1.0:
                raise ConfigError(f"{rw}.fraction must be in (0, 1], got {frac}")
            ds = re_raw.get("datasets")
            cfg = replace(cfg, reference_errors=ReferenceErrors(
                fraction=frac, kinds=kinds, seed=int(_num(re_raw, "seed", 0, rw, int)),
                prepend=str(re_raw.get("prepend", "Madam President,")), append=str(re_raw.get("append", "Thank you very much.")),
                datasets=None if ds is None else _str_list(ds, f"{rw}.datasets"),
            ))
    return cfg


# ------------------------------------------------------------------ helpers


def _fingerprint(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _fresh_dir(path: Path, key: Mapping[str, Any]) -> Path:
    """``path`` for this configuration: emptied when it holds results of another configuration."""
    stamp = path / "probe.json"
    fp = _fingerprint(key)
    if stamp.exists():
        try:
            old = json.loads(stamp.read_text()).get("fingerprint")
        except (OSError, json.JSONDecodeError):
            old = None
        if old != fp:
            log.info("%s holds results of another probe configuration; starting it afresh", path)
            shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    atomic_write_text(stamp, json.dumps({"fingerprint": fp, "key": key}, indent=2, sort_keys=True, default=str))
    return path


def _run_models(dataset: Dataset, specs: Sequence[ModelSpec], root: Path, progress: ProgressFn | None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Run ``specs`` on ``dataset`` with the engine into ``root`` (resumable); rows and model facts."""
    store = RunStore(root)
    facts = InProcessRunner(dataset, list(specs), store, warmup=0, progress=progress).run()
    table = store.consolidate([s.name for s in specs]).to_pandas()
    return table, facts


def _hyp_map(rows: pd.DataFrame) -> dict[tuple[str, str], str | None]:
    """(model, utt_id) -> raw hypothesis, None for failed rows."""
    out: dict[tuple[str, str], str | None] = {}
    if rows is None or len(rows) == 0:
        return out
    err = rows["error"] if "error" in rows else pd.Series([None] * len(rows))
    for m, u, h, e in zip(rows["model"], rows["utt_id"], rows["hyp_raw"], err):
        out[(str(m), str(u))] = None if (e is not None and not pd.isna(e)) or h is None else str(h)
    return out


def _originals(dataset: Dataset) -> list[Utterance]:
    return [u for shard in dataset.iter_shards() for u in shard.utterances if not u.parent_id]


def _failed_models(facts: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    return {m: str(f.get("error", f.get("status"))) for m, f in facts.items() if f.get("status") not in (None, "loaded")}


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
            new = f"{cfg.prepend} {words[0][0].lower() + words[0][1:] if words[0][:1].isupper() and not words[0].isupper() else words[0]} " + " ".join(words[1:])
        elif kind == "append":
            new = f"{u.reference} {cfg.append}"
        elif kind == "drop-first":
            rest = words[1:]
            new = " ".join([rest[0][:1].upper() + rest[0][1:]] + rest[1:])
        else:
            last = words[-1]
            tail = last[len(last.rstrip(".,;:!?\"'")):]
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
    for old in out_dir.glob("shard-*.parquet"):
        old.unlink()
    write_shards(rows, out_dir, shard_size=64)


# ------------------------------------------------------------------ the probes


def run_probes(
    cfg: ProbeConfig,
    dataset: Dataset,
    specs: Sequence[ModelSpec],
    out_dir: Path,
    base_rows: pd.DataFrame,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Run every enabled probe; returns ``summary['probes']`` (``probes.<probe>.<model>``)."""
    if not dataset.has_audio:
        raise ConfigError(
            "the masking, bad-reference (with a panel to run) and synthetic-voice probes need audio; this dataset "
            "holds predictions only. For predictions use `audit probe bad-reference --preds DIR --panel a,b,c`"
        ) if (cfg.masking or cfg.synthetic_voice) else ConfigError("probes on a predictions-only dataset: use `audit probe bad-reference`")
    out_dir = Path(out_dir)
    probes_dir = out_dir / "probes"
    probes_dir.mkdir(parents=True, exist_ok=True)
    models = [s.name for s in specs]
    base = base_rows[base_rows["model"].isin(models)] if len(base_rows) else base_rows
    if "parent_id" in base:
        base = base[base["parent_id"].isna()]
    base_hyps = _hyp_map(base)
    result: dict[str, Any] = {}
    timer = None
    state: dict[str, Any] = {}

    def note(name: str) -> None:
        log.info("probe: %s", name)
        if progress:
            progress("probe", 0, {"probe": name})

    try:
        if cfg.orthography is not None:
            note("orthography")
            result["orthography"] = _orthography(cfg.orthography, dataset, base, models)
        if cfg.masking is not None or cfg.synthetic_voice is not None:
            timer = make_timer(cfg.timing.method, cfg.timing.model)
        if cfg.masking is not None:
            note("masking")
            result["masking"] = _masking(cfg, dataset, specs, probes_dir, base_hyps, timer, progress, state)
        if cfg.bad_reference is not None:
            note("bad_reference")
            result["bad_reference"] = _bad_reference(cfg.bad_reference, dataset, specs, probes_dir, base_hyps, progress, state)
        if cfg.synthetic_voice is not None:
            note("synthetic_voice")
            result["synthetic_voice"] = _synthetic(cfg, dataset, specs, probes_dir, timer, progress, state)
    finally:
        if timer is not None and hasattr(timer, "close"):
            timer.close()
    return result


def _orthography(cfg: OrthographyConfig, dataset: Dataset, base: pd.DataFrame, models: Sequence[str]) -> dict[str, Any]:
    from audits.probes.orthography import select_families, switch_entries

    refs = {u.utt_id: u.reference or "" for u in _originals(dataset) if u.reference}
    hyps: dict[str, dict[str, str | None]] = {m: {} for m in models}
    for (m, u), h in _hyp_map(base).items():
        if m in hyps and u in refs:
            hyps[m][u] = h
    return switch_entries(refs, hyps, select_families(cfg.families), cfg.min_clips_per_arm, cfg.pool)


def _masking(cfg: ProbeConfig, dataset: Dataset, specs: Sequence[ModelSpec], probes_dir: Path, base_hyps: Mapping[tuple[str, str], str | None],
             timer: Any, progress: ProgressFn | None, state: dict[str, Any]) -> dict[str, Any]:
    from audits.probes.masking_score import gated_leak_rate

    settings = cfg.masking
    assert settings is not None  # guaranteed by the caller
    root = _fresh_dir(probes_dir / "masking", {"settings": asdict(settings), "timing": asdict(cfg.timing), "dataset": dataset.fingerprint})
    cache = TimingCache(probes_dir / "timings" / f"{dataset.fingerprint}-{timer.key}.jsonl")
    build = build_masked_set(dataset, timer, settings, root / "derived", cache)
    state["mask_build"] = build
    state["timing_cache"] = cache
    skipped = build.skip_counts()
    facts: dict[str, Any] = {
        "n_clips": build.n_clips,
        "n_clips_masked": build.n_clips_masked,
        "n_derived": len(build.derivations),
        "skipped": skipped,
        "skipped_examples": [s.to_dict() for s in build.skipped[:20]],
        "skipped_file": str(root / "derived" / "skipped.jsonl"),
        "timing_method": timer.method,
        "settings": {**asdict(settings), "variants": list(settings.variants), "kinds": list(settings.kinds)},
    }
    if not build.derivations:
        reasons = ", ".join(f"{k}: {v}" for k, v in skipped.items()) or "the dataset is empty"
        facts.update(status="no-masked-clips", note=f"no clip could be masked ({reasons}); see {facts['skipped_file']}")
        log.warning("masking: %s", facts["note"])
        return facts
    derived = open_dataset(root / "derived", "parquet")
    rows, run_facts = _run_models(derived, specs, root, progress)
    recs = records_from_rows(build.derivations, build.parents, _hyp_map(rows), base_hyps, [s.name for s in specs])
    state["mask_records"] = recs
    leak = gated_leak_rate(recs, settings.primary_variant).to_dict()
    for entry in leak.values():
        entry["k"], entry["n"] = entry["n_leaked"], entry["n_gated"]
    failed = _failed_models(run_facts)
    if failed:
        facts["failed_models"] = failed
    return {**leak, **facts, "status": "ok"}


def _bad_reference(cfg: BadReferenceConfig, dataset: Dataset, specs: Sequence[ModelSpec], probes_dir: Path,
                   base_hyps: Mapping[tuple[str, str], str | None], progress: ProgressFn | None, state: dict[str, Any]) -> dict[str, Any]:
    from audits.probes.bad_reference import run_bad_reference_probe
    from engine.model_registry import load_model_registry, resolve_models

    plant = cfg.reference_errors
    if plant is not None and plant.datasets is not None and dataset.name not in plant.datasets:
        log.info("bad_reference: dataset '%s' is not in reference_errors.datasets %s; nothing planted", dataset.name, list(plant.datasets))
        plant = None
    key = {"cfg": asdict(cfg), "dataset": dataset.fingerprint, "planted": plant is not None}
    root = _fresh_dir(probes_dir / "bad_reference", key)
    originals = _originals(dataset)
    plan: dict[str, dict[str, str]] = {}
    work = dataset
    if plant is not None:
        copy_dir = root / "dataset"
        planted, plan = plant_reference_errors(originals, plant)
        if not (copy_dir / "planted.json").exists():
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
    for s in specs:
        if plant is not None and s.backend == "memorizer" and str(s.options.get("index")) == str(dataset.source):
            to_run.append(ModelSpec(s.name, s.backend, {**s.options, "index": str(root / "dataset"), "index_reader": "parquet"}, s.batch_size, s.meta))
            rerun.add(s.name)
    own_hyps: dict[tuple[str, str], str | None] = {}
    failed: dict[str, str] = {}
    if to_run:
        rows, run_facts = _run_models(work, to_run, root, progress)
        own_hyps = _hyp_map(rows)
        failed = _failed_models(run_facts)

    def hyps_of(model: str) -> dict[str, str]:
        src = own_hyps if (model in rerun or model not in names) else base_hyps
        return {c: (src.get((model, c)) or "") for c in refs}

    panel_hyps = {p: hyps_of(p) for p in cfg.panel if p not in failed}
    models_hyps = {m: hyps_of(m) for m in names if m not in failed}
    corrections = _load_corrections(cfg.corrections) if cfg.corrections else None
    report = run_bad_reference_probe(refs, panel_hyps, models_hyps, cfg.settings(), corrections=corrections, corrections_mode=cfg.corrections_mode)  # type: ignore[arg-type]
    state["badref"] = {"report": report, "refs": refs, "plan": plan, "work": work, "corrections": corrections}
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
    return out


def _load_corrections(path: str) -> dict[str, str]:
    """Human-verified references: JSON {utt_id: text} or JSONL lines {utt_id|id|audio_filepath, text}."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"bad_reference.corrections: file '{p}' not found")
    text = p.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
        if isinstance(data, dict):
            return {str(k): str(v) for k, v in data.items()}
    except json.JSONDecodeError:
        pass
    out: dict[str, str] = {}
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{p}, line {i}: not JSON ({exc.msg}); expected {{\"utt_id\": ..., \"text\": ...}}") from None
        uid = row.get("utt_id", row.get("id", row.get("audio_filepath")))
        if uid is None or not isinstance(row.get("text"), str):
            raise ConfigError(f"{p}, line {i}: needs 'utt_id' (or 'id'/'audio_filepath') and 'text'")
        out[str(uid)] = row["text"]
    return out


def _synthetic(cfg: ProbeConfig, dataset: Dataset, specs: Sequence[ModelSpec], probes_dir: Path, timer: Any,
               progress: ProgressFn | None, state: dict[str, Any]) -> dict[str, Any]:
    from audits.probes.bad_reference import Tokenizer, accept_ref, resolve_normalizer

    sv = cfg.synthetic_voice
    assert sv is not None  # guaranteed by the caller
    root = _fresh_dir(probes_dir / "synthetic_voice", {"settings": asdict(sv), "masking": asdict(cfg.masking) if cfg.masking else None,
                                                        "badref": asdict(cfg.bad_reference) if cfg.bad_reference else None, "dataset": dataset.fingerprint})
    tts = make_tts(sv)
    names = [s.name for s in specs]
    by_id = {u.utt_id: u for u in _originals(dataset)}
    generic: list[Utterance] = []
    facts: dict[str, Any] = {"tts": {"engine": sv.tts, "voice": sv.voice or getattr(tts, "voice", None)}}
    skipped: dict[str, int] = {}

    # masking source: clips where some model recovered a masked word
    mask_ids: dict[tuple[str, int], tuple[str, str]] = {}
    mask_recs: list[tuple[Any, int]] = []
    if "masking" in sv.sources and state.get("mask_records"):
        build = state["mask_build"]
        primary = cfg.masking.primary_variant if cfg.masking else "silence"
        idx = {(build.parents[uid], _target_key(d)): int(d["target_index"]) for uid, d in build.derivations.items() if d["variant"] == primary}
        recs = [r for r in state["mask_records"] if r.variant == primary]
        from audits.probes.masking_score import target_in_text

        leaked = sorted({r.parent_id for r in recs if r.hyp_original and r.hyp_masked and target_in_text(r.target, r.hyp_original) and target_in_text(r.target, r.hyp_masked)})
        leaked = leaked[: sv.max_clips]
        for r in recs:
            k = idx.get((r.parent_id, (r.target.char_start, r.target.char_end)))
            if k is not None:
                mask_recs.append((r, k))
        msettings = replace(cfg.masking, variants=(primary,), primary_variant=primary) if cfg.masking else None
        for parent in leaked:
            u = by_id.get(parent)
            if u is None or msettings is None:
                continue
            spoken = ((u.derivation or {}).get("tts") or {}).get("text_spoken") or u.reference or ""
            x = synthesize(tts, spoken, sv.voice)
            clean = Utterance(f"{parent}~tts", u.reference, audio_bytes=encode_audio(x, 16000, "FLAC"), duration_s=len(x) / 16000,
                              speaker=f"tts:{sv.tts}", labels={}, parent_id=parent,
                              derivation={"probe": "synthetic_voice", "source": "masking", "tts": facts["tts"], "text_spoken": spoken})
            ref_text = u.reference or ""

            def generic_timings(x: np.ndarray = x, ref_text: str = ref_text) -> Sequence[Any]:
                return list(timer.timings(x, ref_text))

            masked, skips = mask_clip(replace(clean, parent_id=None), x, generic_timings, msettings)
            for s in skips:
                skipped[f"masking:{s.reason}"] = skipped.get(f"masking:{s.reason}", 0) + 1
            generic.append(clean)
            for mu in masked:
                k = int((mu.derivation or {})["target_index"])
                mu = replace(mu, parent_id=parent, derivation={**dict(mu.derivation or {}), "probe": "synthetic_voice", "source": "masking"})
                generic.append(mu)
                mask_ids[(parent, k)] = (clean.utt_id, mu.utt_id)

    # bad-reference source: clips where some model wrote a span of the (wrong) reference
    br = state.get("badref")
    br_clips: list[str] = []
    if "bad_reference" in sv.sources and br is not None:
        report = br["report"]
        ref_clips = sorted({d.clip_id for m, r in report.results.items() for d in r.decisions if d.verdict == "ref"})
        br_clips = ref_clips[: sv.max_clips]
        settings = cfg.bad_reference.settings() if cfg.bad_reference else None
        tok = Tokenizer(resolve_normalizer(settings, None), settings.canonicalize_numbers) if settings else None
        for clip in br_clips:
            if clip in br["plan"]:
                text, how = br["plan"][clip]["original"], "planted-original"
            elif br["corrections"] and clip in br["corrections"]:
                text, how = br["corrections"][clip], "corrections"
            else:
                assert tok is not None
                text, how = corrected_from_spans(tok(br["refs"][clip]), [s for s in report.spans if s.clip_id == clip]), "panel-spans"
            if not text.strip():
                skipped["bad_reference:empty-corrected-text"] = skipped.get("bad_reference:empty-corrected-text", 0) + 1
                continue
            x = synthesize(tts, text, sv.voice)
            generic.append(Utterance(f"{clip}~tts-corrected", br["refs"][clip], audio_bytes=encode_audio(x, 16000, "FLAC"),
                                     duration_s=len(x) / 16000, speaker=f"tts:{sv.tts}", labels={}, parent_id=clip,
                                     derivation={"probe": "synthetic_voice", "source": "bad_reference", "text_spoken": text, "corrected_from": how, "tts": facts["tts"]}))
    facts.update(n_generic_clips=len(generic), n_masking_clips=len({p for p, _ in mask_ids}), n_bad_reference_clips=len(br_clips), skipped=skipped)
    if not generic:
        facts.update(status="no-clips", note="no model wrote a bad reference or recovered a masked word, so there is nothing to re-synthesize")
        return facts
    (root / "derived").mkdir(parents=True, exist_ok=True)
    for old in (root / "derived").glob("shard-*.parquet"):
        old.unlink()
    write_shards(generic, root / "derived", shard_size=64)
    rows, run_facts = _run_models(open_dataset(root / "derived", "parquet"), specs, root, progress)
    ghyps = _hyp_map(rows)
    pairs: list[Pair] = masking_pairs(mask_recs, ghyps, mask_ids)
    if br is not None and br_clips:
        report = br["report"]
        gen_ids = {c: f"{c}~tts-corrected" for c in br_clips}
        sel = [(i, s) for i, s in enumerate(report.spans) if s.clip_id in gen_ids]
        spans_sel = [s for _, s in sel]
        settings = cfg.bad_reference.settings() if cfg.bad_reference else None
        for m in names:
            if m not in report.results:
                continue
            real = {d.span_index: d.verdict for d in report.results[m].decisions}
            gh = {c: ghyps.get((m, gen_ids[c])) or "" for c in {s.clip_id for s in spans_sel}}
            gres = accept_ref(spans_sel, gh, br["refs"], settings, model=m)
            for (orig_i, span), gd in zip(sel, gres.decisions):
                rv = real.get(orig_i)
                if rv in (None, "ineligible") or gd.verdict == "ineligible":
                    continue
                pairs.append(Pair(m, "bad_reference", span.clip_id, f"span-{orig_i}", int(rv == "ref"), int(gd.verdict == "ref")))
    out: dict[str, Any] = summarize_pairs(pairs, names, sv.n_boot, sv.seed)
    failed = _failed_models(run_facts)
    if failed:
        facts["failed_models"] = failed
    return {**out, **facts, "status": "ok"}


def _target_key(derivation: Mapping[str, Any]) -> tuple[int, int]:
    t = derivation["target"]
    return int(t["char_start"]), int(t["char_end"])
