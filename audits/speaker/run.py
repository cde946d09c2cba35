"""Speaker-match audit over a dataset: run SV backends through the engine, score stored embeddings.

Recipe section (every key optional except ``backends``; unknown keys are errors)::

    speaker:
      backends: [resemblyzer]        # SV_BACKENDS names
      trials: path/to/trials.txt     # VoxCeleb 'label enroll test' list; default: generated
      cross: emotion                 # generated trials pair clips whose 'emotion' differs
      max_per_class: 5000            # generated trials per class (target / non-target)
      seed: 0
      threshold: null                # a given decision threshold; default: chosen on a dev split
      threshold_criterion: eer       # eer | min_dcf | accuracy (dev-split choice)
      dev_fraction: 0.3
      p_target: 0.01
      cohort: false                  # false | s-norm | as-norm (true = s-norm)
      cohort_speakers: []            # speakers held out of the trials to serve as the cohort
      top_k: 100                     # AS-norm: closest cohort scores used
      slice_keys: null               # label keys for per-slice results (default: all labels)
      batch_size: 16
      warmup: 1
      combined_clips: 0              # write this many 'A, beep, B' trial clips for audio judges
      backend_options: {resemblyzer: {num_threads: 1}}
      judges: null                   # audio-LM judges deciding same/different on sampled trials (audits/judging.py)

``parse_speaker_config`` is pure (no model loads, no dataset reads), so a recipe can be
validated before anything heavy happens. ``run_speaker_audit`` returns the section's typed result
(``audits.speaker.results.SpeakerResult``; its ``to_json()`` is the ``speaker`` section of ``summary.json``):
one record per backend (the metrics' figures plus subsets, speakers, facts and notes), then the judges'.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import typing
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import numpy as np

from audits.asr.summary import json_safe
from audits.clips import clip_source
from audits.judging import JudgeConfig, parse_judge_config
from audits.section_config import backend_names, check_backend_options, options_map, resolve_path
from audits.speaker.metrics import (
    Trial,
    TrialList,
    combine_clips,
    combined_trial_derivation,
    combined_trial_id,
    evaluate_speaker,
    generate_trials,
    read_trials,
)
from audits.speaker.results import CombinedClips, SpeakerBackendResult, SpeakerJudgeResult, SpeakerResult
from audits.utterance_meta import UttMeta, collect_meta
from engine.audio.decoding import decode
from engine.backends import SV_BACKENDS
from engine.data import SAMPLE_RATE, DecodeOptions, ProgressFn
from engine.datasets.base import Dataset
from engine.engine import EngineOptions
from engine.errors import AuditError, ConfigError
from engine.options import Options, check_value, option
from engine.run.embed_runner import EmbedSpec, read_embeddings, read_errors, run_embed_backends, split_placement
from engine.storage import atomic_write_text, safe_name

log = logging.getLogger(__name__)


Criterion = Literal["eer", "min_dcf", "accuracy"]
CRITERIA: tuple[str, ...] = typing.get_args(Criterion)
COHORT_MODES = (None, "s-norm", "as-norm")
MIN_NOTE_TRIALS = 20  # slices with fewer target or non-target trials are too noisy for a note


def _subsets(raw: Mapping[Any, Any], where: str) -> dict[str, dict[str, tuple[str, ...]]]:
    """``subsets``: name -> {label (or 'speaker'): value or [values]}; clips must match every filter."""
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for name, flt in raw.items():
        flt = check_value(dict[str, Any], flt, f"{where}.{name}")
        if not flt:
            raise ConfigError(f"{where}.{name}: give at least one 'label: value' filter")
        out[str(name)] = {}
        for key, val in flt.items():
            vals = val if isinstance(val, list) else [val]
            for v in vals:
                if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                    raise ConfigError(f"{where}.{name}.{key}: expected a string or a number, got {type(v).__name__} {v!r}")
            out[str(name)][str(key)] = tuple(str(v) for v in vals)
    return out


def _cohort(value: Any, where: str) -> str | None:
    if value is True:
        return "s-norm"
    if value in (False, None):
        return None
    if isinstance(value, str) and value.lower() in ("s-norm", "as-norm"):
        return value.lower()
    raise ConfigError(f"{where}: expected false, true, 's-norm' or 'as-norm', got {value!r}")


@dataclass(frozen=True)
class SpeakerConfig(Options):
    """The ``speaker`` section of a recipe (speaker-verification backends scored on trials of the dataset's clips)."""

    backends: tuple[str, ...] = option(doc="SV backends to run, e.g. [resemblyzer]", parse=backend_names(SV_BACKENDS))
    trials: str | None = option(None, "trial list file ('label enroll test' lines; default: trials generated from speaker labels)")
    cross: str | None = option(None, "label whose values generated impostor trials cross (e.g. gender)")
    max_per_class: int | None = option(5000, "most target and most non-target trials generated (null: all)", ge=1)
    seed: int = option(0, "seed of the trial sample", ge=0, null_default=True)
    threshold: float | None = option(None, "fixed decision threshold (default: chosen on a dev split)")
    threshold_criterion: Criterion = option("eer", "what the dev split's threshold optimises")
    dev_fraction: float = option(0.3, "share of speakers in the dev split", gt=0, lt=1)
    p_target: float = option(0.01, "target prior of minDCF", gt=0, lt=1)
    cohort: str | None = option(
        None, "score normalisation: false, true (s-norm), s-norm or as-norm", kind_doc="boolean or text", accepts=Any, parse=_cohort
    )
    cohort_speakers: tuple[str, ...] = option((), "speakers held out of generated trials as the cohort", null_default=True)
    top_k: int | None = option(100, "cohort scores kept per side by as-norm (null: all)", ge=1)
    slice_keys: tuple[str, ...] | None = option(None, "labels to slice trials by (default: every label)")
    batch_size: int = option(16, "clips per SV batch", ge=1, null_default=True)
    warmup: int = option(1, "warm-up batches per backend (not timed)", ge=0, null_default=True)
    combined_clips: int = option(0, "clips joined per enrolment (0: single clips)", ge=0, null_default=True)
    backend_options: Mapping[str, Mapping[str, Any]] = option(
        {}, "backend name -> its options", accepts=dict[str, Any], parse=options_map, null_default=True
    )
    subsets: Mapping[str, Mapping[str, tuple[str, ...]]] = option(
        {},
        "name -> {label: value or [values]}: trials among clips matching every filter",
        accepts=dict[str, Any],
        parse=_subsets,
        null_default=True,
    )
    judges: JudgeConfig | None = option(
        None, "audio-LM judges asked whether two clips share a speaker", accepts=dict[str, Any] | None, parse=parse_judge_config
    )

    def validate(self, where: str) -> None:
        check_backend_options(self.backend_options, self.backends, f"{where}.backend_options", SV_BACKENDS)
        if self.cohort_speakers and self.cohort is None:
            raise ConfigError(f"{where}.cohort_speakers is set but cohort is off; set cohort: s-norm or as-norm")
        if self.cohort_speakers and self.trials is not None:
            raise ConfigError(f"{where}: cohort_speakers hold speakers out of generated trials; with a trial list, leave it out")

    def as_dict(self) -> dict[str, Any]:
        return {
            "judges": None if self.judges is None else self.judges.as_dict(),
            "backends": list(self.backends),
            "trials": self.trials,
            "cross": self.cross,
            "max_per_class": self.max_per_class,
            "seed": self.seed,
            "threshold": self.threshold,
            "threshold_criterion": self.threshold_criterion,
            "dev_fraction": self.dev_fraction,
            "p_target": self.p_target,
            "cohort": self.cohort,
            "cohort_speakers": list(self.cohort_speakers),
            "top_k": self.top_k,
            "slice_keys": None if self.slice_keys is None else list(self.slice_keys),
            "batch_size": self.batch_size,
            "warmup": self.warmup,
            "combined_clips": self.combined_clips,
            "backend_options": {k: dict(v) for k, v in self.backend_options.items()},
            "subsets": {k: {f: list(v) for f, v in flt.items()} for k, flt in self.subsets.items()},
        }


def parse_speaker_config(mapping: Mapping[str, Any], source: str = "") -> SpeakerConfig:
    """Validate a recipe's ``speaker`` section (pure: no model, dataset or trial file is read)."""
    where = f"{source}: speaker" if source else "speaker"
    cfg = SpeakerConfig.parse(mapping, where)
    if cfg.trials is None:
        return cfg
    trials = resolve_path(cfg.trials, source)
    if not Path(trials).is_file():
        raise ConfigError(f"{where}.trials: trial list {trials} does not exist")
    return cfg.replace(trials=trials)


def run_options(recipe_decode: DecodeOptions | None) -> DecodeOptions:
    return recipe_decode or DecodeOptions()


# --------------------------------------------------------------------------------------------
# The audit
# --------------------------------------------------------------------------------------------


def sources_of(meta: Mapping[str, UttMeta]) -> dict[str, str]:
    """Each clip's source clip (``audits.clips``): a clip the run derived is its source's, never a speaker's new clip."""
    return {u: clip_source(u, m.parent_id, m.labels) for u, m in meta.items()}


def build_trials(cfg: SpeakerConfig, meta: Mapping[str, UttMeta]) -> tuple[TrialList, list[str]]:
    """Trials from the list file or generated from speaker labels; returns (trials, cohort utts).

    Raises before any model loads: a trial naming an utterance that is not in the dataset, or a
    dataset whose clips carry no speaker labels (and no trial list was given).
    """
    if cfg.trials is not None:
        return TrialList(read_trials(cfg.trials, known_ids=meta.keys())), []
    held = set(cfg.cohort_speakers)
    unknown = sorted(held - {m.speaker for m in meta.values() if m.speaker})
    if unknown:
        raise ConfigError(f"speaker.cohort_speakers: no clips of speaker(s) {', '.join(unknown)} in the dataset")
    speakers = {u: m.speaker for u, m in meta.items() if m.speaker not in held}
    if not any(s for s in speakers.values()):
        raise ConfigError(
            "the dataset has no speaker labels (manifest field 'speaker' or 'speaker_id'), so trials cannot be "
            "generated; add speaker labels or pass speaker.trials (a 'label enroll test' list)"
        )
    if cfg.cross is not None and not any(cfg.cross in m.labels for m in meta.values()):
        raise ConfigError(f"speaker.cross: no clip carries the label '{cfg.cross}'")
    labels = {u: m.labels for u, m in meta.items()}
    tl = generate_trials(speakers, labels, cross=cfg.cross, max_per_class=cfg.max_per_class, seed=cfg.seed, sources=sources_of(meta))
    check_trials_formed(tl, speakers, cfg.cross)
    cohort = sorted(u for u, m in meta.items() if m.speaker in held)
    return tl, cohort


def check_trials_formed(tl: TrialList, speakers: Mapping[str, str | None], cross: str | None) -> None:
    """Refuse, before any model loads, a speaker audit whose generated trials lack a class: its tables would be empty.

    Verification needs same-speaker (target) and different-speaker (non-target) trials; the
    message says which is missing and why (one clip per speaker, one speaker, no cross pairs).
    """
    n_target = sum(1 for t in tl.trials if t.label == 1)
    n_nontarget = len(tl.trials) - n_target
    if n_target and n_nontarget:
        return
    labelled = [s for s in speakers.values() if s]
    n_spk = len(set(labelled))
    if not n_target:
        why = (
            f"no same-speaker pair: each of the {n_spk} speaker(s) of the {len(labelled)} labelled clips has one clip"
            if not tl.speakers_without_cross_pairs
            else f"no same-speaker pair whose '{cross}' labels differ (without one: {', '.join(tl.speakers_without_cross_pairs[:10])})"
        )
    else:
        why = f"no different-speaker pair: all {len(labelled)} labelled clips are of one speaker"
    raise ConfigError(
        f"speaker: the section would be empty: {why}. Verification needs clips of at least two speakers, two or more of "
        "one speaker; use more clips (a larger --limit: the demo recipes take clips in pairs per speaker) or a trial list "
        "(speaker.trials)"
    )


def speaker_pair_stats(
    trials: Sequence[Trial], scores: np.ndarray, meta: Mapping[str, UttMeta], threshold: float, top: int = 10
) -> dict[str, Any]:
    """Which speakers the backend keeps apart and which it confuses, from the trial scores.

    Per speaker: mean target score and miss rate at the threshold. Per unordered speaker pair:
    mean non-target score and false-accept rate; the ``top`` most confusable pairs are listed.
    """
    tar: dict[str, list[float]] = defaultdict(list)
    non: dict[tuple[str, str], list[float]] = defaultdict(list)
    for t, s in zip(trials, scores):
        a, b = meta[t.enroll].speaker, meta[t.test].speaker
        if a is None or b is None:
            continue
        if t.label == 1:
            tar[a].append(float(s))
        else:
            x, y = sorted((a, b))
            non[(x, y)].append(float(s))
    per_speaker = {
        spk: {"n_target": len(v), "mean_target_score": float(np.mean(v)), "miss_rate": float(np.mean(np.asarray(v) < threshold))}
        for spk, v in sorted(tar.items())
    }
    pairs: list[dict[str, Any]] = [
        {
            "a": a,
            "b": b,
            "n_nontarget": len(v),
            "mean_score": float(np.mean(v)),
            "false_accept_rate": float(np.mean(np.asarray(v) >= threshold)),
        }
        for (a, b), v in non.items()
    ]
    pairs.sort(key=lambda p: (-p["mean_score"], p["a"], p["b"]))
    confused = [p for p in pairs if p["false_accept_rate"] >= 0.5]
    return {
        "per_speaker": per_speaker,
        "confusable_pairs": pairs[:top],
        "n_speaker_pairs": len(pairs),
        "n_pairs_mostly_accepted": len(confused),
        "pairs_mostly_accepted": [[p["a"], p["b"]] for p in confused],
    }


def derive_notes(result: Mapping[str, Any], pair_stats: Mapping[str, Any]) -> list[str]:
    """Observations read off the numbers (no fixed text about any corpus)."""
    notes: list[str] = []
    by_key: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for name, s in result.get("slices", {}).items():
        if s.get("eer") is not None and "=" in name and min(s["n_target"], s["n_nontarget"]) >= MIN_NOTE_TRIALS:
            key, value = name.split("=", 1)
            by_key[key].append((value, float(s["eer"])))
    for key, vals in sorted(by_key.items()):
        if len(vals) < 2:
            continue
        lo = min(vals, key=lambda v: v[1])
        hi = max(vals, key=lambda v: v[1])
        if hi[1] - lo[1] >= 0.05:
            notes.append(
                f"EER among clips with {key}={hi[0]} is {hi[1]:.1%} against {lo[1]:.1%} with {key}={lo[0]}: "
                f"this backend separates the speakers of {key}={hi[0]} worse"
            )
    confused = [p for p in pair_stats.get("confusable_pairs", []) if p["false_accept_rate"] >= 0.5]
    n_confused = int(pair_stats.get("n_pairs_mostly_accepted", len(confused)))
    if confused:
        listed = "; ".join(
            f"{p['a']} vs {p['b']} ({p['false_accept_rate']:.0%} of {p['n_nontarget']} trials, mean cosine {p['mean_score']:.3f})"
            for p in confused[:5]
        )
        notes.append(
            f"{n_confused} of {pair_stats.get('n_speaker_pairs')} speaker pairs are accepted as the same speaker in at least half of their "
            f"non-target "
            f"trials at the threshold {result.get('threshold', float('nan')):.3f}, e.g. {listed}; to this backend these "
            "labelled speakers sound like one voice"
        )
    missed = [(s, v) for s, v in pair_stats.get("per_speaker", {}).items() if v["miss_rate"] >= 0.5]
    if missed:
        notes.append(
            "speaker(s) whose own clips are rejected in at least half of their target trials: "
            + ", ".join(f"{s} ({v['miss_rate']:.0%})" for s, v in missed[:5])
        )
    subsets = [(k, v) for k, v in result.get("subsets", {}).items() if v.get("eer") is not None]
    if len(subsets) >= 2:
        notes.append(
            "EER on matched subsets: " + ", ".join(f"{k} {v['eer']:.1%} ({v['n_target']}+{v['n_nontarget']} trials)" for k, v in subsets)
        )
    return notes


def score_subset(
    cfg: SpeakerConfig, flt: Mapping[str, Sequence[str]], embeddings: Mapping[str, Any], meta: Mapping[str, UttMeta], threshold: float
) -> dict[str, Any]:
    """EER/minDCF on trials generated only among clips matching ``flt`` (a condition-matched view).

    Accuracy is at the main result's threshold, so subsets are compared at one operating point.
    """

    def match(m: UttMeta) -> bool:
        return all((m.speaker if k == "speaker" else m.labels.get(k)) in vals for k, vals in flt.items())

    speakers = {u: m.speaker for u, m in meta.items() if u in embeddings and match(m)}
    entry: dict[str, Any] = {"filter": {k: list(v) for k, v in flt.items()}, "n_utts": len(speakers)}
    tl = generate_trials(speakers, max_per_class=cfg.max_per_class, seed=cfg.seed, sources=sources_of(meta))
    try:
        res = evaluate_speaker(embeddings, tl, threshold=threshold, p_target=cfg.p_target)
    except AuditError as exc:
        entry["error"] = f"cannot score this subset: {exc}"
        return entry
    full = res.to_dict()
    for key in ("eer", "min_dcf", "accuracy", "threshold", "n_trials", "n_target", "n_nontarget", "warnings"):
        entry[key] = full[key]
    return entry


def _write_scores(out_dir: Path, backend: str, trials: Sequence[Trial], scores: np.ndarray) -> Path:
    """Per-trial scores (for DET plots, score queries and re-thresholding) next to the embeddings."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = out_dir / "speaker" / safe_name(backend) / "scores.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        {
            "label": pa.array([t.label for t in trials], pa.int8()),
            "enroll": pa.array([t.enroll for t in trials], pa.string()),
            "test": pa.array([t.test for t in trials], pa.string()),
            "score": pa.array(np.asarray(scores, dtype=np.float64)),
        }
    )
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)
    return path


def write_combined_clips(
    dataset: Dataset, trials: Sequence[Trial], n: int, out_dir: Path, decode_options: DecodeOptions, seed: int = 0
) -> dict[str, Any]:
    """Derived audio for audio-language-model judges: 'enroll, gap, beep, gap, test' per trial.

    ``n`` trials are drawn with the seed, balanced over labels; each clip gets its own utt_id
    (``combined_trial_id``), ``parent_id`` = the enroll clip and a derivation record, listed in
    ``DIR/speaker/combined/manifest.jsonl`` (with the trial's label as ``same_speaker``).
    """
    from engine.audio.shards import encode_audio

    rng = np.random.default_rng(seed)
    by_label = {lab: [i for i, t in enumerate(trials) if t.label == lab] for lab in (1, 0)}
    n_tar = min(len(by_label[1]), (n + 1) // 2)
    n_non = min(len(by_label[0]), n - n_tar)
    chosen: list[Trial] = []
    for lab, k in ((1, n_tar), (0, n_non)):
        if k > 0:
            chosen.extend(trials[int(i)] for i in sorted(rng.choice(by_label[lab], size=k, replace=False)))
    needed = {u for t in chosen for u in (t.enroll, t.test)}
    audio: dict[str, np.ndarray] = {}
    errors: dict[str, str] = {}
    for sid in dataset.shard_ids:
        for u in dataset.load_shard(sid).utterances:
            if u.utt_id in needed:
                d = decode(
                    u, root=dataset.root, max_duration_s=decode_options.max_duration_s, allow_outside_root=decode_options.allow_outside_root
                )
                if d.error is None:
                    audio[u.utt_id] = d.samples
                else:
                    errors[u.utt_id] = d.error
    folder = out_dir / "speaker" / "combined"
    folder.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    skipped: list[dict[str, str]] = []
    for t in chosen:
        if t.enroll not in audio or t.test not in audio:
            bad = t.enroll if t.enroll not in audio else t.test
            skipped.append({"enroll": t.enroll, "test": t.test, "reason": errors.get(bad, "not decoded")})
            continue
        cid = combined_trial_id(t)
        x = combine_clips(audio[t.enroll], audio[t.test], SAMPLE_RATE)
        path = folder / f"{cid}.flac"
        path.write_bytes(encode_audio(x, SAMPLE_RATE, "FLAC"))
        rec = {
            "utt_id": cid,
            "audio_filepath": str(path),
            "duration": round(len(x) / SAMPLE_RATE, 6),
            "text": "",
            "parent_id": t.enroll,
            "same_speaker": str(t.label),
            "derivation": combined_trial_derivation(t),
        }
        lines.append(json.dumps(rec, sort_keys=True))
    atomic_write_text(folder / "manifest.jsonl", "\n".join(lines) + ("\n" if lines else ""))
    return {"n_clips": len(lines), "manifest": str(folder / "manifest.jsonl"), "skipped": skipped}


def _dropped_trials(
    trials: Sequence[Trial], failed: Mapping[str, str], embedded: Mapping[str, Any]
) -> tuple[list[Trial], list[dict[str, Any]]]:
    keep: list[Trial] = []
    dropped: list[dict[str, Any]] = []
    for t in trials:
        bad = [u for u in (t.enroll, t.test) if u not in embedded]
        if bad:
            dropped.append(
                {
                    "label": t.label,
                    "enroll": t.enroll,
                    "test": t.test,
                    "reason": "; ".join(f"{u}: {failed.get(u, 'no embedding')}" for u in bad),
                }
            )
        else:
            keep.append(t)
    return keep, dropped


def score_speaker_backend(
    cfg: SpeakerConfig,
    name: str,
    facts: Mapping[str, Any],
    trials: TrialList,
    cohort_utts: Sequence[str],
    meta: Mapping[str, UttMeta],
    out_dir: Path,
) -> SpeakerBackendResult:
    """The ``speaker.<backend>`` record from stored embeddings (never recomputed)."""
    base: dict[str, Any] = {
        "status": facts.get("status"),
        "facts": {k: v for k, v in facts.items() if k not in ("traceback",)},
        "trial_source": cfg.trials or ("generated" + (f" (cross={cfg.cross})" if cfg.cross else "")),
    }
    if facts.get("status") not in ("loaded", "done"):
        base["error"] = facts.get("error", "backend did not run")
        return backend_record(base)
    embeddings = read_embeddings(out_dir, name)
    failed = read_errors(out_dir, "sv", name)
    keep, dropped = _dropped_trials(trials.trials, failed, embeddings)
    base["n_failed_clips"] = len(failed)
    base["failed_clips"] = dict(sorted(failed.items())[:50])
    base["n_dropped_trials"] = len(dropped)
    base["dropped_trials"] = dropped[:50]
    kept = TrialList(keep, trials.single_clip_speakers, trials.speakers_without_cross_pairs, trials.unlabelled_utts, list(trials.warnings))
    if dropped:
        kept.warnings.append(f"{len(dropped)} trial(s) left out because a clip has no embedding (see dropped_trials)")
    cohort = None
    top_k = None
    if cfg.cohort is not None:
        if cohort_utts:
            cohort = {u: embeddings[u] for u in cohort_utts if u in embeddings}
        else:
            in_trials = {u for t in keep for u in (t.enroll, t.test)}
            cohort = {u: v for u, v in embeddings.items() if u not in in_trials} or dict(embeddings)
            kept.warnings.append(
                "cohort: no cohort_speakers given; the cohort holds "
                + ("clips outside the trials" if len(cohort) < len(embeddings) else "all embedded clips, including trial speakers")
            )
        top_k = None if cfg.cohort == "s-norm" else min(int(cfg.top_k or 100), len(cohort))
    try:
        res = evaluate_speaker(
            embeddings,
            kept,
            backend=name,
            utt_labels={u: m.labels for u, m in meta.items()},
            threshold=cfg.threshold,
            threshold_criterion=cfg.threshold_criterion,
            dev_fraction=cfg.dev_fraction,
            seed=cfg.seed,
            cohort=cohort,
            top_k=top_k,
            p_target=cfg.p_target,
            slice_keys=None if cfg.slice_keys is None else list(cfg.slice_keys),
        )
    except AuditError as exc:
        base["status"] = "error"
        base["error"] = str(exc)
        return backend_record(base)
    entry = res.to_dict()
    entry["subsets"] = {sname: score_subset(cfg, flt, embeddings, meta, res.threshold) for sname, flt in cfg.subsets.items()}
    pairs = speaker_pair_stats(kept.trials, res.scores, meta, res.threshold)
    entry["speakers"] = pairs
    entry["notes"] = derive_notes(entry, pairs)
    entry["scores_path"] = str(_write_scores(out_dir, name, kept.trials, res.scores))
    entry.update(base)
    entry["status"] = "ok"
    for key in ("device", "batch_size", "n_utts", "n_failed", "audio_s", "infer_s", "rtfx", "warmup_batches"):
        if key in facts:
            entry[key] = facts[key]
    entry["model_id"] = facts.get("info", {}).get("model_id")
    return backend_record(entry)


def backend_record(entry: Mapping[str, Any]) -> SpeakerBackendResult:
    """The record of an entry assembled as ``summary.json`` holds it (strict JSON values: NaN and infinities become None)."""
    return SpeakerBackendResult.from_json(json_safe(entry))


def sv_specs(cfg: SpeakerConfig) -> list[EmbedSpec]:
    """The SV pass's backends, as ``run_speaker_audit`` submits them (and the pipeline's joint run, ahead of it)."""
    specs = []
    for b in cfg.backends:  # num_gpus/num_cpus/memory_mb place the backend's actors, like an ASR registry entry
        options, placement = split_placement(cfg.backend_options.get(b, {}), f"speaker.backend_options.{b}")
        specs.append(EmbedSpec(name=b, backend=b, kind="sv", options=options, batch_size=cfg.batch_size, meta=placement))
    return specs


def run_speaker_audit(
    cfg: SpeakerConfig,
    dataset: Dataset,
    out_dir: Path | str,
    progress: ProgressFn | None = None,
    decode_options: DecodeOptions | None = None,
    engine: EngineOptions | None = None,
) -> SpeakerResult:
    """Embed the dataset with every SV backend (resumable), then score trials per backend.

    Returns every backend's record (and the judges'): ``to_json()`` is ``summary['speaker']``. Trials are built (and a trial list
    naming an unknown utterance rejected) before any model loads. A backend that cannot load
    gets ``status: unavailable`` and its message; the others go on.
    """
    out = Path(out_dir)
    meta = collect_meta(dataset)
    trials, cohort_utts = build_trials(cfg, meta)
    specs = sv_specs(cfg)
    opts = run_options(decode_options)
    facts = run_embed_backends(dataset, specs, out, decode_options=opts, progress=progress, warmup=cfg.warmup, engine=engine)
    results: dict[str, SpeakerBackendResult] = {}
    for spec in specs:
        results[spec.name] = score_speaker_backend(cfg, spec.name, facts[spec.name], trials, cohort_utts, meta, out)
    if cfg.combined_clips > 0:
        combined = CombinedClips.from_json(json_safe(write_combined_clips(dataset, trials.trials, cfg.combined_clips, out, opts, cfg.seed)))
        results = {name: dataclasses.replace(entry, combined_clips=combined) for name, entry in results.items()}
    judges: dict[str, SpeakerJudgeResult] | None = None
    if cfg.judges is not None:
        from audits.speaker.judge_verify import judge_speaker_trials

        judges = judge_speaker_trials(cfg.judges, dataset, trials.trials, results, out, opts, engine)
    atomic_write_text(out / "speaker" / "config.json", json.dumps(cfg.as_dict(), indent=2, sort_keys=True))
    return SpeakerResult(MappingProxyType(results), None if judges is None else MappingProxyType(judges))


__all__ = [
    "SpeakerConfig",
    "build_trials",
    "parse_speaker_config",
    "run_speaker_audit",
    "score_speaker_backend",
    "speaker_pair_stats",
    "sv_specs",
    "write_combined_clips",
]
