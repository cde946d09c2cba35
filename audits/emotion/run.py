"""Emotion audit over a dataset: run SER backends through the engine, score the stored outputs.

Recipe section (``backends`` required; unknown keys are errors)::

    emotion:
      backends: [prosody]            # SER_BACKENDS names
      label: emotion                 # categorical reference label column (null: none)
      label_map: {positive-high-arousal: happy}   # or a path to 'raw,canonical' lines
      unmapped: error                # error | drop (clips whose label has no mapping)
      expected_arousal: null         # label -> high | neutral | low | number; default: from label names
      arousal_dimension: null        # predicted dimension to order clips by (default arousal, else arousal_proxy)
      dimensions: {}                 # reference dimension -> numeric label column, for CCC
      dim_map: {}                    # predicted dimension -> reference dimension name
      comparison_min_gap: 0.0
      max_comparison_pairs: 200000
      pairs: auto                    # auto | parent | text-speaker | text | none (prosody contrast)
      contrast_threshold: 4
      contrast_definition: speecheq  # speecheq (the paper's, default) | semitone-syllable (earlier variant)
      derive_labels: false           # label clips with the backend's top category (model-derived)
      min_confidence: 0.0
      batch_size: 16
      warmup: 1
      backend_options: {}
      judges: null                   # audio-LM judges comparing rendition pairs (audits/emotion/judge_compare.py)

What is scored, per backend:

* categorical (UA, WA, macro-F1, confusion) when the backend gives posteriors and clips carry
  ``label``; labels of both sides go through the label map first;
* CCC and relative comparison accuracy for numeric reference dimensions (``dimensions``);
* arousal ordering: each reference label is mapped to an expected arousal level (high > neutral
  > low) and the backend's arousal dimension must order clip pairs the same way -- over all
  pairs, within each speaker (voice is a confound for acoustic measures), and per label pair;
* prosody contrast (``audits.emotion.prosody_contrast``) of paired renditions (same text, different
  delivery), from the acoustic descriptors of backends that give them (``prosody``);
* optionally, model-derived emotion labels, always marked ``model_derived: true``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import math
import re
import typing
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import numpy as np

from audits.asr.summary import json_safe
from audits.emotion.metrics import LabelMap, evaluate_emotion, model_derived_labels, relative_comparison_accuracy
from audits.emotion.prosody_contrast import DEFAULT_DEFINITION, DEFINITIONS, audit_pairs, pairs_from_parents
from audits.emotion.results import EmotionBackendResult, EmotionJudgeResult, EmotionResult
from audits.judging import JudgeConfig, parse_judge_config
from audits.section_config import backend_names, check_backend_options, options_map, resolve_path
from audits.utterance_meta import UttMeta, collect_meta
from engine.backends import SER_BACKENDS
from engine.backends.base import EmotionOutput
from engine.data import DecodeOptions, ProgressFn
from engine.datasets.base import Dataset
from engine.engine import EngineOptions
from engine.errors import AuditError, ConfigError
from engine.options import Options, check_value, option
from engine.run.embed_runner import EmbedSpec, read_emotion_outputs, read_errors, run_embed_backends, split_placement
from engine.storage import atomic_write_text, safe_name

log = logging.getLogger(__name__)


Pairing = Literal["auto", "parent", "text-speaker", "text", "none"]
PAIRINGS: tuple[str, ...] = typing.get_args(Pairing)
AROUSAL_LEVELS = {"high": 1.0, "neutral": 0.0, "mid": 0.0, "medium": 0.0, "low": -1.0}
# Expected arousal of canonical categories (after the label map), used when the recipe gives none.
CANONICAL_AROUSAL = {"angry": 1.0, "happy": 1.0, "fearful": 1.0, "surprised": 1.0, "neutral": 0.0, "sad": -1.0}
SHOWN_PAIRS = 100


def _str_map(value: Mapping[Any, Any], where: str) -> dict[str, str]:
    """A mapping of text to text (keys as text: a YAML key ``1`` names the column ``"1"``)."""
    return {str(k): check_value(str, v, f"{where}.{k}") for k, v in value.items()}


def _label_map(value: Any, where: str) -> Mapping[str, str] | str:
    """``label_map``: a mapping raw -> canonical label, or the path of a file of 'raw,canonical' lines."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return _str_map(value, where)
    raise ConfigError(f"{where}: expected a mapping or a file path, got {type(value).__name__} {value!r}")


def _arousal_value(value: Any, where: str) -> float:
    if isinstance(value, str) and value.strip().lower() in AROUSAL_LEVELS:
        return AROUSAL_LEVELS[value.strip().lower()]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise ConfigError(f"{where}: expected high, neutral, low or a number, got {value!r}")


def _arousal_map(value: Mapping[Any, Any], where: str) -> dict[str, float]:
    return {str(k): _arousal_value(v, f"{where}.{k}") for k, v in value.items()}


def _judges(raw: Mapping[str, Any], where: str) -> JudgeConfig | None:
    from audits.emotion.judge_compare import check_dimensions

    cfg = parse_judge_config(raw, where, extra_keys=("dimensions",))
    if cfg is not None:
        check_dimensions(cfg.extra.get("dimensions"), f"{where}.dimensions")
    return cfg


@dataclass(frozen=True)
class EmotionConfig(Options):
    """The ``emotion`` section of a recipe (SER backends run over the dataset and scored against its labels)."""

    backends: tuple[str, ...] = option(doc="SER backends to run, e.g. [prosody]", parse=backend_names(SER_BACKENDS))
    label: str | None = option("emotion", "categorical reference label column (null: none)")
    label_map: Mapping[str, str] | str | None = option(
        None, "raw label -> canonical label, or a path to 'raw,canonical' lines", kind_doc="mapping or path", parse=_label_map
    )
    unmapped: Literal["error", "drop"] = option("error", "what to do with clips whose label has no mapping")
    expected_arousal: Mapping[str, float] | None = option(
        None,
        "label -> high, neutral, low or a number (default: read off the label names)",
        accepts=dict[str, Any] | None,
        parse=_arousal_map,
    )
    arousal_dimension: str | None = option(None, "predicted dimension to order clips by (default arousal, else arousal_proxy)")
    dimensions: Mapping[str, str] = option(
        {}, "reference dimension -> numeric label column, for CCC", accepts=dict[str, Any], parse=_str_map, null_default=True
    )
    dim_map: Mapping[str, str] = option(
        {}, "predicted dimension -> reference dimension name", accepts=dict[str, Any], parse=_str_map, null_default=True
    )
    comparison_min_gap: float = option(0.0, "smallest reference gap a compared pair needs", ge=0)
    max_comparison_pairs: int = option(200_000, "most clip pairs compared per dimension", ge=1)
    pairs: Pairing = option("auto", "how renditions are paired for the prosody contrast")
    contrast_threshold: float = option(4.0, "prosody-contrast score a pair needs to count as contrasted", ge=0, le=8)
    contrast_definition: str = option(DEFAULT_DEFINITION, "prosody-contrast definition", choices=DEFINITIONS)
    derive_labels: bool = option(False, "label clips with each backend's top category (marked model-derived)")
    min_confidence: float = option(0.0, "smallest top-category confidence a derived label needs", ge=0, le=1)
    batch_size: int = option(16, "clips per SER batch", ge=1)
    warmup: int = option(1, "warm-up batches per backend (not timed)", ge=0)
    backend_options: Mapping[str, Mapping[str, Any]] = option(
        {}, "backend name -> its options", accepts=dict[str, Any], parse=options_map, null_default=True
    )
    judges: JudgeConfig | None = option(
        None, "audio-LM judges comparing rendition pairs (a judges block and dimensions)", accepts=dict[str, Any] | None, parse=_judges
    )
    label_given: bool = False
    """Whether the recipe named ``label`` (a derived fact, not an option)."""

    def validate(self, where: str) -> None:
        check_backend_options(self.backend_options, self.backends, f"{where}.backend_options", SER_BACKENDS)

    def as_dict(self) -> dict[str, Any]:
        return {
            "judges": None if self.judges is None else self.judges.as_dict(),
            "backends": list(self.backends),
            "label": self.label,
            "label_map": self.label_map if isinstance(self.label_map, (str, type(None))) else dict(self.label_map),
            "unmapped": self.unmapped,
            "expected_arousal": None if self.expected_arousal is None else dict(self.expected_arousal),
            "arousal_dimension": self.arousal_dimension,
            "dimensions": dict(self.dimensions),
            "dim_map": dict(self.dim_map),
            "comparison_min_gap": self.comparison_min_gap,
            "max_comparison_pairs": self.max_comparison_pairs,
            "pairs": self.pairs,
            "contrast_threshold": self.contrast_threshold,
            "contrast_definition": self.contrast_definition,
            "derive_labels": self.derive_labels,
            "min_confidence": self.min_confidence,
            "batch_size": self.batch_size,
            "warmup": self.warmup,
            "backend_options": {k: dict(v) for k, v in self.backend_options.items()},
        }

    def make_label_map(self) -> LabelMap:
        if isinstance(self.label_map, str):
            return LabelMap.from_file(self.label_map)
        return LabelMap(self.label_map or {})


def parse_emotion_config(mapping: Mapping[str, Any], source: str = "") -> EmotionConfig:
    """Validate a recipe's ``emotion`` section (pure: nothing is loaded or decoded)."""
    where = f"{source}: emotion" if source else "emotion"
    cfg = EmotionConfig.parse(mapping, where)
    label_map = cfg.label_map
    if isinstance(label_map, str):
        label_map = resolve_path(label_map, source)
        if not Path(label_map).is_file():
            raise ConfigError(f"{where}.label_map: file {label_map} does not exist")
    return cfg.replace(label_map=label_map, label_given="label" in mapping)


# --------------------------------------------------------------------------------------------
# Arousal ordering
# --------------------------------------------------------------------------------------------


def expected_arousal_table(labels: Sequence[str], cfg: EmotionConfig, lm: LabelMap) -> tuple[dict[str, float | None], str]:
    """Expected arousal level per raw label: the recipe's table, else read off the label names.

    Names with ``high-arousal`` / ``low-arousal`` / ``neutral`` give high / low / neutral; other
    names go through the label map to a canonical category (angry, happy, fearful, surprised:
    high; neutral: neutral; sad: low); anything else has no expected level and is left out.
    """
    if cfg.expected_arousal is not None:
        return {lab: cfg.expected_arousal.get(lab) for lab in sorted(set(labels))}, "recipe"
    table: dict[str, float | None] = {}
    for lab in sorted(set(labels)):
        low = lab.lower()
        if re.search(r"high[-_ ]?arousal", low):
            table[lab] = 1.0
        elif re.search(r"low[-_ ]?arousal", low):
            table[lab] = -1.0
        else:
            canon = lm.get(lab)
            table[lab] = CANONICAL_AROUSAL.get(canon) if canon else None
    return table, "derived from label names"


def _pick_dimension(outputs: Mapping[str, EmotionOutput], wanted: str | None) -> str | None:
    dims = {d for o in outputs.values() for d in o.dimensions}
    if wanted is not None:
        return wanted if wanted in dims else None
    for cand in ("arousal", "arousal_proxy"):
        if cand in dims:
            return cand
    return None


def arousal_ordering(
    outputs: Mapping[str, EmotionOutput],
    meta: Mapping[str, UttMeta],
    cfg: EmotionConfig,
    lm: LabelMap,
) -> dict[str, Any]:
    """Relative comparison accuracy of the backend's arousal against the labels' expected order."""
    if cfg.label is None:
        return {"skipped": "no label column configured"}
    dim = _pick_dimension(outputs, cfg.arousal_dimension)
    if dim is None:
        want = cfg.arousal_dimension or "arousal or arousal_proxy"
        return {"skipped": f"backend gives no '{want}' dimension"}
    labelled = {u: m.labels[cfg.label] for u, m in meta.items() if cfg.label in m.labels and u in outputs}
    table, source = expected_arousal_table(list(labelled.values()), cfg, lm)
    ids = [
        u for u in sorted(labelled) if table.get(labelled[u]) is not None and math.isfinite(outputs[u].dimensions.get(dim, float("nan")))
    ]
    result: dict[str, Any] = {"dimension": dim, "expected_arousal": table, "expected_arousal_source": source, "n_utts": len(ids)}
    if len(ids) < 2:
        result["skipped"] = "fewer than 2 clips with both an expected arousal level and a predicted value"
        return result
    ref = np.array([table[labelled[u]] for u in ids], dtype=np.float64)
    pred = np.array([outputs[u].dimensions[dim] for u in ids], dtype=np.float64)
    n = len(ids)
    rng = np.random.default_rng(0)
    if n * (n - 1) // 2 <= cfg.max_comparison_pairs:
        all_pairs = None
    else:
        i = rng.integers(0, n, size=cfg.max_comparison_pairs)
        j = rng.integers(0, n, size=cfg.max_comparison_pairs)
        all_pairs = [(int(a), int(b)) for a, b in zip(i, j) if a != b]
        result["all_pairs_sampled"] = True
    result["all"] = relative_comparison_accuracy(ref, pred, all_pairs, cfg.comparison_min_gap).to_dict()
    by_spk: dict[str | None, list[int]] = defaultdict(list)
    for k, u in enumerate(ids):
        by_spk[meta[u].speaker].append(k)
    within = [(a, b) for spk, idx in by_spk.items() if spk is not None for a, b in itertools.combinations(idx, 2)]
    result["within_speaker"] = relative_comparison_accuracy(ref, pred, within, cfg.comparison_min_gap).to_dict() if within else None
    per_pair: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for a, b in within:
        if ref[a] == ref[b]:
            continue
        hi, lo = (a, b) if ref[a] > ref[b] else (b, a)
        per_pair[f"{labelled[ids[hi]]}>{labelled[ids[lo]]}"].append((hi, lo))
    result["by_label_pair_within_speaker"] = {
        k: relative_comparison_accuracy(ref, pred, v, cfg.comparison_min_gap).to_dict() for k, v in sorted(per_pair.items())
    }
    means: dict[str, dict[str, float]] = {}
    for lab in sorted({labelled[u] for u in ids}):
        vals = pred[[k for k, u in enumerate(ids) if labelled[u] == lab]]
        means[lab] = {"mean": float(vals.mean()), "sd": float(vals.std()), "n_utts": int(vals.size)}
    result["label_means"] = means
    return result


# --------------------------------------------------------------------------------------------
# Rendition pairs and prosody contrast
# --------------------------------------------------------------------------------------------


def _norm_text(text: str | None) -> str | None:
    if not text:
        return None
    return " ".join(re.sub(r"[^\w\s']", " ", text.lower()).split()) or None


def _label_of(meta: Mapping[str, UttMeta], u: str, label: str | None) -> str | None:
    return meta[u].labels.get(label) if label else None


def _group_pairs(
    groups: Mapping[Any, list[str]], meta: Mapping[str, UttMeta], label: str | None
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(pairs with different labels, anchored on neutral clips where a group has one; same-label pairs)."""
    diff: list[tuple[str, str]] = []
    same: list[tuple[str, str]] = []
    for _, utts in sorted(groups.items(), key=lambda kv: str(kv[0])):
        utts = sorted(utts)
        neutral = [u for u in utts if (_label_of(meta, u, label) or "").lower() == "neutral"]
        for a, b in itertools.combinations(utts, 2):
            la, lb = _label_of(meta, a, label), _label_of(meta, b, label)
            if la is None or lb is None:
                continue
            if la == lb:
                same.append((a, b))
            elif not neutral or a in neutral or b in neutral:
                diff.append((b, a) if b in neutral else (a, b))
    return diff, same


def rendition_pairs(meta: Mapping[str, UttMeta], cfg: EmotionConfig) -> dict[str, Any]:
    """Pairs of renditions of one text with different delivery, and how they were found.

    ``parent``: a derived clip and its source (``parent_id``). ``text-speaker``: same reference
    text and speaker, different label. ``text``: same text, different label, any speaker --
    voice differences then add to the contrast, so same-label pairs of the same text are scored
    as a control. ``auto`` takes the first of these that finds pairs.
    """
    order = ["parent", "text-speaker", "text"] if cfg.pairs == "auto" else [cfg.pairs]
    for mode in order:
        control: list[tuple[str, str]] = []
        if mode == "none":
            return {"pairing": "none", "pairs": [], "control": []}
        if mode == "parent":
            pairs = [
                (a, b)
                for a, b in pairs_from_parents({u: m.parent_id for u, m in meta.items()})
                if _label_of(meta, a, cfg.label) != _label_of(meta, b, cfg.label) or cfg.label is None
            ]
        elif mode == "text-speaker":
            groups: dict[Any, list[str]] = defaultdict(list)
            for u, m in meta.items():
                t = _norm_text(m.reference)
                if t and m.speaker:
                    groups[(t, m.speaker)].append(u)
            pairs, control = _group_pairs(groups, meta, cfg.label)
        else:
            groups = defaultdict(list)
            for u, m in meta.items():
                t = _norm_text(m.reference)
                if t:
                    groups[t].append(u)
            pairs, control = _group_pairs(groups, meta, cfg.label)
            control = [(a, b) for a, b in control if meta[a].speaker != meta[b].speaker]
        if pairs:
            return {"pairing": mode, "pairs": pairs, "control": control}
    return {"pairing": order[-1], "pairs": [], "control": []}


def prosody_contrast(
    outputs: Mapping[str, EmotionOutput], meta: Mapping[str, UttMeta], cfg: EmotionConfig, found: Mapping[str, Any], out_path: Path
) -> dict[str, Any]:
    """The contrast audit on the found pairs (plus a same-label control), from stored descriptors."""
    if not any(o.descriptors for o in outputs.values()):
        return {"skipped": "backend gives no acoustic descriptors (use the 'prosody' backend for this audit)"}
    if not found["pairs"]:
        return {
            "pairing": found["pairing"],
            "n_pairs": 0,
            "skipped": "no rendition pairs: no clip has a parent_id in the dataset and no text is read twice "
            + ("with different labels" if cfg.label else ""),
        }
    descriptors = {u: o.descriptors for u, o in outputs.items() if o.descriptors}
    res = audit_pairs(found["pairs"], descriptors, threshold=cfg.contrast_threshold, definition=cfg.contrast_definition)
    d = res.to_dict()
    rows = d.pop("pairs")
    for r in rows:
        r["label_a"] = _label_of(meta, r["a"], cfg.label)
        r["label_b"] = _label_of(meta, r["b"], cfg.label)
        r["speaker_a"], r["speaker_b"] = meta[r["a"]].speaker, meta[r["b"]].speaker
    out_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    d["pairs"] = rows[:SHOWN_PAIRS]
    d["pairs_path"] = str(out_path)
    d["pairing"] = found["pairing"]
    d["confounded_by_voice"] = found["pairing"] == "text"
    by_pair: dict[str, list[int]] = defaultdict(list)
    for r in rows:
        by_pair["|".join(sorted((str(r["label_a"]), str(r["label_b"]))))].append(int(r["score"]))
    d["by_label_pair"] = {k: {"mean_score": float(np.mean(v)), "n_pairs": len(v)} for k, v in sorted(by_pair.items())}
    if found["control"]:
        ctrl = audit_pairs(found["control"], descriptors, threshold=cfg.contrast_threshold, definition=cfg.contrast_definition)
        scores = [p.score for p in ctrl.pairs]
        d["control_same_label"] = {
            "n_pairs": len(scores),
            "mean_score": float(np.mean(scores)) if scores else None,
            "what": "pairs of the same text with the same label"
            + (" read by different speakers" if found["pairing"] == "text" else "")
            + ": the contrast that is not delivery",
        }
    return d


# --------------------------------------------------------------------------------------------
# The audit
# --------------------------------------------------------------------------------------------


def _derived_labels(outputs: Mapping[str, EmotionOutput], name: str, cfg: EmotionConfig, lm: LabelMap, path: Path) -> dict[str, Any]:
    if not any(o.posteriors for o in outputs.values()):
        return {"model_derived": True, "skipped": "backend gives no emotion categories; nothing to label with"}
    labels = model_derived_labels(outputs, name, lm, cfg.min_confidence)
    key = next(iter(next(iter(labels.values())).keys())) if labels else None
    counts: dict[str, int] = defaultdict(int)
    for lab in labels.values():
        for v in lab.values():
            counts[v] += 1
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "".join(json.dumps({"utt_id": u, **lab, "model_derived": True}) + "\n" for u, lab in sorted(labels.items())))
    return {
        "model_derived": True,
        "label_key": key,
        "counts": dict(sorted(counts.items())),
        "min_confidence": cfg.min_confidence,
        "path": str(path),
        "note": "predicted by the backend, not ground truth",
    }


def _notes(entry: Mapping[str, Any]) -> list[str]:
    """Observations read off the numbers."""
    notes: list[str] = []
    ao = entry.get("arousal_ordering") or {}
    for pair, s in (ao.get("by_label_pair_within_speaker") or {}).items():
        if s.get("accuracy") is not None and s["n_pairs"] >= 3 and s["accuracy"] < 0.6:
            hi, lo = pair.split(">", 1)
            notes.append(f"{ao['dimension']} ranks '{hi}' above '{lo}' in only {s['accuracy']:.0%} of {s['n_pairs']} same-speaker pairs")
    ws = ao.get("within_speaker") or {}
    al = ao.get("all") or {}
    if ws.get("accuracy") is not None and al.get("accuracy") is not None and ws["accuracy"] - al["accuracy"] >= 0.1:
        notes.append(
            f"{ao['dimension']} orders clips by expected arousal in {ws['accuracy']:.0%} of same-speaker pairs but "
            f"{al['accuracy']:.0%} of all pairs: differences between voices mask the delivery"
        )
    pc = entry.get("prosody_contrast") or {}
    if pc.get("n_pairs"):
        notes.append(
            f"{pc['n_below_threshold']} of {pc['n_pairs']} rendition pairs score below {pc['threshold']:g} of 8 on prosody contrast"
        )
        ctrl = pc.get("control_same_label") or {}
        if ctrl.get("mean_score") is not None and pc.get("mean_score") is not None and ctrl["mean_score"] >= pc["mean_score"] - 0.5:
            notes.append(
                f"same-label control pairs score {ctrl['mean_score']:.1f} against {pc['mean_score']:.1f} for different labels: "
                "the contrast here comes mostly from something other than delivery"
            )
    return notes


def score_emotion_backend(
    cfg: EmotionConfig, name: str, facts: Mapping[str, Any], meta: Mapping[str, UttMeta], found: Mapping[str, Any], out_dir: Path
) -> EmotionBackendResult:
    """The ``emotion.<backend>`` record from stored outputs (never recomputed)."""
    entry: dict[str, Any] = {"status": facts.get("status"), "facts": {k: v for k, v in facts.items() if k != "traceback"}}
    if facts.get("status") not in ("loaded", "done"):
        entry["error"] = facts.get("error", "backend did not run")
        return backend_record(entry)
    outputs = read_emotion_outputs(out_dir, name)
    failed = read_errors(out_dir, "ser", name)
    entry["n_failed_clips"] = len(failed)
    entry["failed_clips"] = dict(sorted(failed.items())[:50])
    lm = cfg.make_label_map()
    has_posteriors = any(o.posteriors for o in outputs.values())
    ref_labels = {u: m.labels[cfg.label] for u, m in meta.items() if cfg.label and cfg.label in m.labels} if has_posteriors else {}
    ref_dims: dict[str, dict[str, float]] = {}
    for dim, col in cfg.dimensions.items():
        for u, m in meta.items():
            try:
                v = float(m.labels[col])
            except (KeyError, ValueError):
                continue
            if math.isfinite(v):
                ref_dims.setdefault(u, {})[dim] = v
    slice_labels = {u: {k: v for k, v in m.labels.items() if k != cfg.label} for u, m in meta.items()}
    try:
        res = evaluate_emotion(
            outputs,
            backend=name,
            ref_labels=ref_labels or None,
            ref_dims=ref_dims or None,
            label_map=lm,
            utt_labels=slice_labels,
            unmapped=cfg.unmapped,
            dim_map=cfg.dim_map,
            comparison_min_gap=cfg.comparison_min_gap,
        )
        entry.update(res.to_dict())
    except AuditError as exc:
        entry["status"] = "error"
        entry["error"] = str(exc)
        return backend_record(entry)
    entry["n_utts"] = len(meta)
    entry["n_scored_outputs"] = len(outputs)
    if not has_posteriors:
        entry["categorical"] = None
        entry.setdefault("warnings", []).append("backend gives no emotion categories: UA/WA/macro-F1 are not defined for it")
    entry["arousal_ordering"] = arousal_ordering(outputs, meta, cfg, lm)
    entry["prosody_contrast"] = prosody_contrast(outputs, meta, cfg, found, out_dir / "emotion" / safe_name(name) / "contrast_pairs.jsonl")
    if cfg.derive_labels:
        entry["model_derived_labels"] = _derived_labels(
            outputs, name, cfg, lm, out_dir / "emotion" / safe_name(name) / "model_labels.jsonl"
        )
    entry["notes"] = _notes(entry)
    entry["status"] = "ok"
    for key in ("device", "batch_size", "n_failed", "audio_s", "infer_s", "rtfx", "warmup_batches"):
        if key in facts:
            entry[key] = facts[key]
    entry["model_id"] = facts.get("info", {}).get("model_id")
    return backend_record(entry)


def backend_record(entry: Mapping[str, Any]) -> EmotionBackendResult:
    """The record of an entry assembled as ``summary.json`` holds it (strict JSON values: NaN and infinities become None)."""
    return EmotionBackendResult.from_json(json_safe(entry))


def check_emotion_inputs(cfg: EmotionConfig, meta: Mapping[str, UttMeta]) -> list[str]:
    """Problems found before any model loads: an explicit label or dimension column no clip has."""
    warnings: list[str] = []
    if cfg.label is not None and not any(cfg.label in m.labels for m in meta.values()):
        msg = f"no clip carries the emotion label '{cfg.label}'"
        if cfg.label_given:
            raise ConfigError(
                f"emotion.label: {msg} (labels present: {', '.join(sorted({k for m in meta.values() for k in m.labels})) or 'none'})"
            )
        warnings.append(msg)
    for dim, col in cfg.dimensions.items():
        if not any(col in m.labels for m in meta.values()):
            raise ConfigError(f"emotion.dimensions.{dim}: no clip carries the label column '{col}'")
    return warnings


def check_not_empty(cfg: EmotionConfig, meta: Mapping[str, UttMeta]) -> None:
    """Refuse, before any model loads, a dataset on which the section could score nothing: no clip
    carries the label (so no accuracy and no arousal ordering), no dimension column is named (no
    CCC), no two renditions of one text with different labels exist (no prosody contrast), and
    neither model-derived labels nor judges are asked for. Otherwise every table would be empty."""
    if cfg.dimensions or cfg.derive_labels or cfg.judges is not None:
        return
    if cfg.label is not None and any(cfg.label in m.labels for m in meta.values()):
        return
    found = rendition_pairs(meta, cfg)
    if found["pairs"]:
        return
    what = f"no clip carries the emotion label '{cfg.label}'" if cfg.label is not None else "no emotion label column is set"
    pairing = (
        "pairing is off (pairs: none)"
        if cfg.pairs == "none"
        else f"no two renditions of one text with different labels (pairs: {cfg.pairs})"
    )
    raise ConfigError(
        f"emotion: the section would be empty: {what}, no dimension column is named, and {pairing}, "
        f"over {len(meta)} clip(s). Give the clips an emotion label column (emotion.label), a dimension column "
        "(emotion.dimensions), or renditions of the same text; or leave the emotion section out of the recipe."
    )


def ser_specs(cfg: EmotionConfig) -> list[EmbedSpec]:
    """The SER pass's backends, as ``run_emotion_audit`` submits them (and the pipeline's joint run, ahead of it)."""
    specs = []
    for b in cfg.backends:  # num_gpus/num_cpus/memory_mb place the backend's actors, like an ASR registry entry
        options, placement = split_placement(cfg.backend_options.get(b, {}), f"emotion.backend_options.{b}")
        specs.append(EmbedSpec(name=b, backend=b, kind="ser", options=options, batch_size=cfg.batch_size, meta=placement))
    return specs


def run_emotion_audit(
    cfg: EmotionConfig,
    dataset: Dataset,
    out_dir: Path | str,
    progress: ProgressFn | None = None,
    decode_options: DecodeOptions | None = None,
    engine: EngineOptions | None = None,
) -> EmotionResult:
    """Run every SER backend over the dataset (resumable), then score per backend.

    Returns every backend's record (and the judges'): ``to_json()`` is ``summary['emotion']``. A backend that cannot load gets
    ``status: unavailable`` and its message; the others go on.
    """
    out = Path(out_dir)
    meta = collect_meta(dataset)
    warnings = check_emotion_inputs(cfg, meta)
    cfg.make_label_map()  # a bad label-map file fails here, before models load
    found = rendition_pairs(meta, cfg)
    specs = ser_specs(cfg)
    facts = run_embed_backends(
        dataset, specs, out, decode_options=decode_options or DecodeOptions(), progress=progress, warmup=cfg.warmup, engine=engine
    )
    results: dict[str, EmotionBackendResult] = {}
    for spec in specs:
        entry = score_emotion_backend(cfg, spec.name, facts[spec.name], meta, found, out)
        if warnings:  # after the entry's own (a backend that did not run gets the key last)
            entry = dataclasses.replace(entry, warnings=(*(entry.warnings or ()), *warnings))
        results[spec.name] = entry
    judges: dict[str, EmotionJudgeResult] | None = None
    if cfg.judges is not None:
        from audits.emotion.judge_compare import judge_emotion_pairs

        lm = cfg.make_label_map()
        arousal, _ = expected_arousal_table(
            [str(m.labels[cfg.label]) for m in meta.values() if cfg.label and cfg.label in m.labels], cfg, lm
        )
        judges = judge_emotion_pairs(
            cfg.judges, dataset, meta, found["pairs"], cfg.label, arousal, lm, out, decode_options or DecodeOptions(), engine
        )
    atomic_write_text(out / "emotion" / "config.json", json.dumps(cfg.as_dict(), indent=2, sort_keys=True))
    return EmotionResult(MappingProxyType(results), None if judges is None else MappingProxyType(judges))


__all__ = [
    "EmotionConfig",
    "arousal_ordering",
    "expected_arousal_table",
    "parse_emotion_config",
    "prosody_contrast",
    "rendition_pairs",
    "run_emotion_audit",
    "score_emotion_backend",
    "ser_specs",
]
