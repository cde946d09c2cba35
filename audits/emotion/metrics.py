"""Emotion audit: categorical scores (UA, WA, macro-F1, confusion), CCC, relative comparisons.

Definitions (docs/metrics.md):

* UA (unweighted accuracy) = mean over reference classes of per-class recall; classes that
  never occur in the references are not averaged (same as scikit-learn's balanced accuracy).
* WA (weighted accuracy) = share of clips whose predicted label equals the reference.
* macro-F1 = unweighted mean of per-class F1 over the union of reference and predicted classes
  (a predicted class with no references scores F1 = 0; 0/0 counts as 0; scikit-learn's default).
* CCC = 2 cov(x, y) / (var(x) + var(y) + (mean(x) - mean(y))^2) with population moments.
* Relative comparison accuracy: over pairs of clips whose reference values differ by more than
  ``min_gap``, the share where the prediction orders the pair the same way (prediction ties
  count as wrong and are also counted apart).

Datasets and models name emotions differently ("ang", "angry", "生气/angry"): every label goes
through a mapping table to one canonical set before scoring; unmapped labels are an error (or
are dropped and counted, on request), never silently scored as wrong.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from engine.backends.base import EmotionOutput
from engine.errors import AuditError, ConfigError

log = logging.getLogger(__name__)

# Common spellings -> canonical label. Extend per dataset with ``LabelMap(extra)``.
DEFAULT_LABEL_MAP: dict[str, str] = {
    "ang": "angry",
    "anger": "angry",
    "angry": "angry",
    "mad": "angry",
    "hap": "happy",
    "happy": "happy",
    "happiness": "happy",
    "joy": "happy",
    "exc": "happy",
    "excited": "happy",
    "sad": "sad",
    "sadness": "sad",
    "neu": "neutral",
    "neutral": "neutral",
    "calm": "neutral",
    "fea": "fearful",
    "fear": "fearful",
    "fearful": "fearful",
    "dis": "disgusted",
    "disgust": "disgusted",
    "disgusted": "disgusted",
    "sur": "surprised",
    "surprise": "surprised",
    "surprised": "surprised",
    "fru": "frustrated",
    "frustrated": "frustrated",
    "frustration": "frustrated",
    "con": "contempt",
    "contempt": "contempt",
    "oth": "other",
    "other": "other",
    "xxx": "other",
    "unk": "unknown",
    "<unk>": "unknown",
    "unknown": "unknown",
}


class LabelMap:
    """Maps raw labels (dataset or model) to canonical ones; the table is reported with results.

    Lookup is case-insensitive and, for labels like ``"生气/angry"`` (emotion2vec), uses the part
    after the last ``/`` when the whole label is not in the table.
    """

    def __init__(self, table: Mapping[str, str] | None = None, use_defaults: bool = True) -> None:
        self.table: dict[str, str] = {}
        if use_defaults:
            self.table.update(DEFAULT_LABEL_MAP)
        given: dict[str, str] = {}
        for k, v in (table or {}).items():
            key = str(k).strip().lower()
            if key in given:  # two spellings of one label: the last would win silently
                raise ConfigError(f"label map: '{given[key]}' and '{k}' are one label once lower-cased and stripped; list it once")
            given[key] = str(k)
            self.table[key] = str(v).strip().lower()

    @classmethod
    def from_file(cls, path: str | Path, use_defaults: bool = True) -> "LabelMap":
        """Read ``raw,canonical`` (or tab/space separated) lines; ``#`` starts a comment."""
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"label map {p} does not exist")
        table: dict[str, str] = {}
        first: dict[str, int] = {}
        for lineno, raw in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = [x.strip() for x in (line.split(",") if "," in line else line.split())]
            if len(parts) != 2 or not all(parts):
                raise ConfigError(f"{p}, line {lineno}: expected 'raw,canonical', got {raw!r}")
            key = parts[0].lower()
            if key in first:  # the last line would win silently
                raise ConfigError(f"{p}, line {lineno}: label '{parts[0]}' is mapped twice (first at line {first[key]}); keep one line")
            first[key] = lineno
            table[parts[0]] = parts[1]
        return cls(table, use_defaults=use_defaults)

    def get(self, label: str) -> str | None:
        key = str(label).strip().lower()
        if key in self.table:
            return self.table[key]
        if "/" in key:
            tail = key.rsplit("/", 1)[1].strip()
            if tail in self.table:
                return self.table[tail]
        return None

    def map(self, label: str) -> str:
        out = self.get(label)
        if out is None:
            raise AuditError(f"emotion label {label!r} is not in the label map; add a line '{label},<canonical>' to the map")
        return out

    def used_table(self, labels: Sequence[str]) -> dict[str, str | None]:
        """The rows of the table actually used for these labels (for the report)."""
        return {str(lab): self.get(lab) for lab in sorted({str(x) for x in labels})}


# --------------------------------------------------------------------------------------------
# Categorical metrics
# --------------------------------------------------------------------------------------------


@dataclass
class CategoricalScores:
    """UA, WA, macro-F1, confusion matrix (rows = reference, columns = prediction)."""

    ua: float
    wa: float
    macro_f1: float
    classes: list[str]
    confusion: list[list[int]]
    per_class: dict[str, dict[str, float]]
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "ua": self.ua,
            "wa": self.wa,
            "macro_f1": self.macro_f1,
            "n_utts": self.n,
            "confusion": {"labels": list(self.classes), "matrix": [list(r) for r in self.confusion]},
            "per_class": self.per_class,
        }


def categorical_scores(refs: Sequence[str], hyps: Sequence[str]) -> CategoricalScores:
    """UA/WA/macro-F1 and confusion for already-mapped labels (see module docstring)."""
    if len(refs) != len(hyps):
        raise AuditError(f"{len(refs)} reference labels but {len(hyps)} predictions")
    if not refs:
        raise AuditError("no labelled clips to score")
    ref_classes = sorted(set(refs))
    classes = ref_classes + sorted(set(hyps) - set(refs))
    index = {c: i for i, c in enumerate(classes)}
    cm = np.zeros((len(classes), len(classes)), dtype=np.int64)
    for r, h in zip(refs, hyps, strict=True):
        cm[index[r], index[h]] += 1
    tp = np.diag(cm).astype(np.float64)
    support = cm.sum(axis=1).astype(np.float64)
    predicted = cm.sum(axis=0).astype(np.float64)
    recall = np.divide(tp, support, out=np.zeros_like(tp), where=support > 0)
    precision = np.divide(tp, predicted, out=np.zeros_like(tp), where=predicted > 0)
    denom = precision + recall
    f1 = np.divide(2 * precision * recall, denom, out=np.zeros_like(tp), where=denom > 0)
    ua = float(np.mean([recall[index[c]] for c in ref_classes]))
    wa = float(tp.sum() / cm.sum())
    per_class = {
        c: {"recall": float(recall[i]), "precision": float(precision[i]), "f1": float(f1[i]), "support": int(support[i])}
        for c, i in index.items()
    }
    return CategoricalScores(
        ua=ua, wa=wa, macro_f1=float(f1.mean()), classes=classes, confusion=cm.tolist(), per_class=per_class, n=len(refs)
    )


# --------------------------------------------------------------------------------------------
# Dimensional metrics
# --------------------------------------------------------------------------------------------


def ccc(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Concordance correlation coefficient (population moments); NaN when both are constant."""
    a = np.asarray(x, dtype=np.float64).reshape(-1)
    b = np.asarray(y, dtype=np.float64).reshape(-1)
    if a.shape != b.shape:
        raise AuditError(f"CCC needs equal lengths, got {a.size} and {b.size}")
    if a.size < 2:
        raise AuditError("CCC needs at least 2 values")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise AuditError("CCC inputs contain NaN or infinity")
    ma, mb = a.mean(), b.mean()
    cov = float(np.mean((a - ma) * (b - mb)))
    denom = float(a.var() + b.var() + (ma - mb) ** 2)
    return float("nan") if denom == 0 else 2 * cov / denom


@dataclass
class ComparisonScores:
    """Relative comparison accuracy over clip pairs."""

    accuracy: float
    n_pairs: int
    n_pred_ties: int

    def to_dict(self) -> dict[str, Any]:
        return {"accuracy": _none_if_nan(self.accuracy), "n_pairs": self.n_pairs, "n_pred_ties": self.n_pred_ties}


def relative_comparison_accuracy(
    ref: Sequence[float] | np.ndarray,
    pred: Sequence[float] | np.ndarray,
    pairs: Sequence[tuple[int, int]] | None = None,
    min_gap: float = 0.0,
) -> ComparisonScores:
    """Given two clips, does the prediction say which is higher? All pairs when ``pairs`` is None."""
    r = np.asarray(ref, dtype=np.float64).reshape(-1)
    p = np.asarray(pred, dtype=np.float64).reshape(-1)
    if r.shape != p.shape:
        raise AuditError(f"{r.size} reference values but {p.size} predictions")
    if pairs is None:
        i, j = np.triu_indices(r.size, k=1)
    else:
        arr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        if arr.size and (arr.min() < 0 or arr.max() >= r.size):
            raise AuditError(f"pair index out of range for {r.size} clips")
        i, j = arr[:, 0], arr[:, 1]
    dr = r[i] - r[j]
    dp = p[i] - p[j]
    keep = np.abs(dr) > min_gap
    dr, dp = dr[keep], dp[keep]
    n = int(dr.size)
    if n == 0:
        return ComparisonScores(float("nan"), 0, 0)
    correct = np.sign(dr) == np.sign(dp)
    return ComparisonScores(float(correct.mean()), n, int(np.sum(dp == 0)))


# --------------------------------------------------------------------------------------------
# The audit
# --------------------------------------------------------------------------------------------


def _none_if_nan(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


@dataclass
class EmotionResult:
    """Everything the emotion audit reports for one SER backend."""

    backend: str
    n_utts: int
    n_missing: int
    missing_utts: list[str]
    categorical: CategoricalScores | None = None
    dimensional: dict[str, dict[str, Any]] = field(default_factory=dict)
    slices: dict[str, dict[str, Any]] = field(default_factory=dict)
    label_map: dict[str, str | None] = field(default_factory=dict)
    dropped_unmapped: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able entry for ``summary.json`` under ``emotion.<backend>``."""
        d: dict[str, Any] = {"n_utts": self.n_utts, "n_missing": self.n_missing, "missing_utts": list(self.missing_utts)}
        if self.categorical is not None:
            c = self.categorical.to_dict()
            d.update({"ua": c["ua"], "wa": c["wa"], "macro_f1": c["macro_f1"], "n_scored": c["n_utts"]})
            d["confusion"] = c["confusion"]
            d["per_class"] = c["per_class"]
        d["dimensional"] = self.dimensional
        d["slices"] = self.slices
        d["label_map"] = self.label_map
        d["dropped_unmapped"] = self.dropped_unmapped
        d["warnings"] = list(self.warnings)
        return d


def evaluate_emotion(
    outputs: Mapping[str, EmotionOutput],
    backend: str = "ser",
    ref_labels: Mapping[str, str] | None = None,
    ref_dims: Mapping[str, Mapping[str, float]] | None = None,
    label_map: LabelMap | None = None,
    utt_labels: Mapping[str, Mapping[str, str]] | None = None,
    unmapped: str = "error",
    dim_map: Mapping[str, str] | None = None,
    comparison_min_gap: float = 0.0,
) -> EmotionResult:
    """Score SER outputs against categorical and/or dimensional references.

    Clips with a reference but no output (failed inference) are counted in ``n_missing`` and
    listed. ``unmapped="drop"`` drops clips whose reference or predicted label has no mapping
    and counts them per label; the default raises. ``dim_map`` renames predicted dimensions to
    reference names (e.g. ``{"arousal_proxy": "arousal"}``). Per-slice UA/WA/macro-F1 are given
    for every ``"key=value"`` of ``utt_labels``.
    """
    if unmapped not in ("error", "drop"):
        raise ConfigError(f"unmapped must be 'error' or 'drop', got {unmapped!r}")
    lm = label_map or LabelMap()
    ref_labels = ref_labels or {}
    ref_dims = ref_dims or {}
    wanted = sorted(set(ref_labels) | set(ref_dims))
    missing = [u for u in wanted if u not in outputs]
    if missing:
        log.warning("%d clip(s) with references have no SER output (failed); they are counted as missing", len(missing))
    result = EmotionResult(backend=backend, n_utts=len(wanted), n_missing=len(missing), missing_utts=missing)

    if ref_labels:
        used: list[str] = []
        refs: list[str] = []
        hyps: list[str] = []
        ids: list[str] = []
        dropped: dict[str, int] = {}
        for utt in sorted(ref_labels):
            out = outputs.get(utt)
            if out is None:
                continue
            raw_h = out.label
            if raw_h is None:
                raise AuditError(f"backend {backend!r} gave no categorical posteriors for {utt!r}; it cannot be scored on labels")
            raw_r = ref_labels[utt]
            used.extend([raw_r, raw_h])
            r, h = lm.get(raw_r), lm.get(raw_h)
            if r is None or h is None:
                if unmapped == "error":
                    lm.map(raw_r if r is None else raw_h)  # raises with the fix-it message
                for raw, mapped in ((raw_r, r), (raw_h, h)):
                    if mapped is None:
                        dropped[raw] = dropped.get(raw, 0) + 1
                continue
            refs.append(r)
            hyps.append(h)
            ids.append(utt)
        result.label_map = lm.used_table(used)
        result.dropped_unmapped = dropped
        if dropped:
            result.warnings.append(f"dropped clips with unmapped labels: {dropped}")
        if refs:
            result.categorical = categorical_scores(refs, hyps)
            if utt_labels:
                groups: dict[str, list[int]] = {}
                for k, utt in enumerate(ids):
                    for key, val in utt_labels.get(utt, {}).items():
                        groups.setdefault(f"{key}={val}", []).append(k)
                for name, idx in sorted(groups.items()):
                    cs = categorical_scores([refs[k] for k in idx], [hyps[k] for k in idx])
                    result.slices[name] = {"ua": cs.ua, "wa": cs.wa, "macro_f1": cs.macro_f1, "n_utts": cs.n}
        else:
            result.warnings.append("no clip could be scored on categorical labels")

    if ref_dims:
        rename = dict(dim_map or {})
        series: dict[str, tuple[list[float], list[float]]] = {}
        for utt in sorted(ref_dims):
            out = outputs.get(utt)
            if out is None:
                continue
            pred = {rename.get(k, k): v for k, v in out.dimensions.items()}
            for dim, value in ref_dims[utt].items():
                if dim in pred and np.isfinite(pred[dim]) and np.isfinite(value):
                    series.setdefault(dim, ([], []))
                    series[dim][0].append(float(value))
                    series[dim][1].append(float(pred[dim]))
        for dim, (r_vals, p_vals) in sorted(series.items()):
            entry: dict[str, Any] = {"n_utts": len(r_vals)}
            entry["ccc"] = _none_if_nan(ccc(r_vals, p_vals)) if len(r_vals) >= 2 else None
            entry["comparison"] = relative_comparison_accuracy(r_vals, p_vals, min_gap=comparison_min_gap).to_dict()
            result.dimensional[dim] = entry
        ref_dim_names = {d for v in ref_dims.values() for d in v}
        for dim in sorted(ref_dim_names - set(series)):
            result.warnings.append(f"backend {backend!r} predicts no '{dim}' dimension (use dim_map to rename)")
    return result


MODEL_LABEL_PREFIX = "model_"


def model_derived_labels(
    outputs: Mapping[str, EmotionOutput], backend: str, label_map: LabelMap | None = None, min_confidence: float = 0.0
) -> dict[str, dict[str, str]]:
    """Emotion slice labels for an unlabelled dataset, predicted by an SER backend.

    The label key is ``model_emotion:<backend>`` (prefix ``MODEL_LABEL_PREFIX``) so reports
    can always tell model-derived slices from ground truth. Clips below ``min_confidence`` get
    ``"uncertain"``; labels without a mapping are kept raw.
    """
    lm = label_map or LabelMap()
    key = f"{MODEL_LABEL_PREFIX}emotion:{backend}"
    out: dict[str, dict[str, str]] = {}
    for utt, o in outputs.items():
        if o.label is None:
            continue
        conf = float(o.posteriors[o.label])
        value = "uncertain" if conf < min_confidence else (lm.get(o.label) or str(o.label))
        out[utt] = {key: value}
    return out


def is_model_derived(label_key: str) -> bool:
    """True for slice label keys produced by ``model_derived_labels``."""
    return label_key.startswith(MODEL_LABEL_PREFIX)
