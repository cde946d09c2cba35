"""Speaker-verification scoring: trials, cosine scores, score normalization, EER and minDCF.

Definitions (docs/metrics.md):

* A trial is ``(label, enroll, test)``; label 1 = same speaker (target), 0 = different.
* A trial is *accepted* when ``score >= threshold``. ``P_miss(t)`` is the share of target
  trials with ``score < t``; ``P_fa(t)`` the share of non-target trials with ``score >= t``.
  Operating points are taken at every distinct score plus "accept nothing".
* EER: where the (P_fa, P_miss) curve crosses P_miss = P_fa, linearly interpolated between
  the two neighbouring operating points (the same number as interpolating the ROC curve).
* minDCF: ``min_t [C_miss * P_miss(t) * p_target + C_fa * P_fa(t) * (1 - p_target)]``
  divided by ``min(C_miss * p_target, C_fa * (1 - p_target))``, with p_target = 0.01 and
  C_miss = C_fa = 1 by default; "accept all" and "reject all" are among the points, so the
  normalized value is at most 1.
* Accuracy at a stated threshold: share of trials decided correctly. When the threshold is
  chosen on a dev split, accuracy is reported on the remaining (eval) trials only.

Embeddings come in as a mapping ``utt_id -> vector`` (the store keeps them as float32 Parquet
columns), so scoring never recomputes them.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from engine.data import SAMPLE_RATE
from engine.errors import AuditError, ConfigError, ManifestError

log = logging.getLogger(__name__)

P_TARGET = 0.01
C_MISS = 1.0
C_FA = 1.0


# --------------------------------------------------------------------------------------------
# Trials
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trial:
    """One verification trial: does ``test`` come from the speaker of ``enroll``?"""

    label: int
    enroll: str
    test: str


@dataclass
class TrialList:
    """Trials plus what could not be turned into trials (reported, never silently dropped)."""

    trials: list[Trial]
    single_clip_speakers: list[str] = field(default_factory=list)
    speakers_without_cross_pairs: list[str] = field(default_factory=list)
    unlabelled_utts: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.trials)

    @property
    def labels(self) -> np.ndarray:
        return np.array([t.label for t in self.trials], dtype=np.int64)


def parse_trials(lines: Iterable[str], source: str = "<trials>", known_ids: Iterable[str] | None = None) -> list[Trial]:
    """Parse VoxCeleb-style ``label enroll test`` lines (label 1/0); blank and ``#`` lines skipped.

    Raises ``ManifestError`` naming the line for a malformed line or an utterance id that is
    not in ``known_ids`` (when given), so a typo never turns into a silently smaller trial set.
    """
    known = None if known_ids is None else set(known_ids)
    trials: list[Trial] = []
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 3:
            raise ManifestError(source, f"expected 'label enroll test' (3 fields), got {len(parts)}: {line!r}", line=lineno)
        label_s, enroll, test = parts
        if label_s not in ("0", "1"):
            raise ManifestError(source, f"label must be 1 (same speaker) or 0 (different), got {label_s!r}", line=lineno, field="label")
        if known is not None:
            for name, utt in (("enroll", enroll), ("test", test)):
                if utt not in known:
                    raise ManifestError(
                        source,
                        f"unknown utterance id {utt!r} (not in the dataset or has no embedding)",
                        line=lineno,
                        field=name,
                    )
        trials.append(Trial(int(label_s), enroll, test))
    if not trials:
        raise ManifestError(source, "no trials found")
    return trials


def read_trials(path: str | Path, known_ids: Iterable[str] | None = None) -> list[Trial]:
    """Read a trial list file (see ``parse_trials``)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"trial list {p} does not exist")
    with p.open(encoding="utf-8") as fh:
        return parse_trials(fh, source=str(p), known_ids=known_ids)


def write_trials(trials: Sequence[Trial], path: str | Path) -> None:
    """Write trials in the VoxCeleb ``label enroll test`` format (round-trips ``read_trials``)."""
    with Path(path).open("w", encoding="utf-8") as fh:
        for t in trials:
            fh.write(f"{t.label} {t.enroll} {t.test}\n")


def generate_trials(
    speakers: Mapping[str, str | None],
    labels: Mapping[str, Mapping[str, str]] | None = None,
    cross: str | None = None,
    max_per_class: int | None = 5000,
    seed: int = 0,
    sources: Mapping[str, str] | None = None,
) -> TrialList:
    """Balanced target/non-target trials from speaker labels, deterministic for a given seed.

    ``speakers`` maps utt_id -> speaker. With ``cross`` (a slice label name, e.g. ``"emotion"``)
    both target and non-target trials pair clips whose ``cross`` values differ, so the only
    difference between the two classes is the speaker. The number of trials per class is the
    number of available target pairs, capped by ``max_per_class``. Speakers with one clip
    cannot form target trials: they are listed and warned about, and their clips still serve
    in non-target trials. Utterances without a speaker label are listed and left out.
    ``sources`` maps a clip derived by the run (``audits.clips``) to its source clip: no trial
    pairs two clips of one source (a clip and its own derivation would be a trivial target trial).
    """
    labels = labels or {}
    sources = sources or {}
    unlabelled = sorted(u for u, s in speakers.items() if s is None or str(s) == "")
    by_spk: dict[str, list[str]] = {}
    for utt in sorted(speakers):
        spk = speakers[utt]
        if spk is None or str(spk) == "":
            continue
        by_spk.setdefault(str(spk), []).append(utt)
    warnings: list[str] = []
    if unlabelled:
        warnings.append(f"{len(unlabelled)} utterance(s) have no speaker label and are not in any trial")

    def cross_value(utt: str) -> str | None:
        return None if cross is None else labels.get(utt, {}).get(cross)

    if cross is not None:
        usable = {u for utts in by_spk.values() for u in utts if cross_value(u) not in (None, "")}
        dropped = sorted({u for utts in by_spk.values() for u in utts} - usable)
        if dropped:
            warnings.append(f"{len(dropped)} utterance(s) lack the '{cross}' label and are not in any trial")
            unlabelled = sorted(set(unlabelled) | set(dropped))
        by_spk = {s: [u for u in utts if u in usable] for s, utts in by_spk.items()}
        by_spk = {s: utts for s, utts in by_spk.items() if utts}

    def compatible(a: str, b: str) -> bool:
        if sources.get(a, a) == sources.get(b, b):
            return False
        return cross is None or cross_value(a) != cross_value(b)

    single = sorted(s for s, utts in by_spk.items() if len(utts) == 1)
    if single:
        msg = (
            f"{len(single)} speaker(s) have a single clip and cannot form target trials: "
            f"{', '.join(single[:10])}{' ...' if len(single) > 10 else ''}"
        )
        warnings.append(msg)
        log.warning(msg)

    targets: list[tuple[str, str]] = []
    no_cross: list[str] = []
    for spk in sorted(by_spk):
        pairs = [(a, b) for a, b in itertools.combinations(by_spk[spk], 2) if compatible(a, b)]
        if len(by_spk[spk]) > 1 and not pairs:
            no_cross.append(spk)
        targets.extend(pairs)
    if no_cross:
        msg = f"{len(no_cross)} speaker(s) have no pair of clips with different '{cross}': {', '.join(no_cross[:10])}"
        warnings.append(msg)
        log.warning(msg)

    rng = np.random.default_rng(seed)
    n = len(targets) if max_per_class is None else min(len(targets), max_per_class)
    if n < len(targets):
        idx = np.sort(rng.choice(len(targets), size=n, replace=False))
        targets = [targets[i] for i in idx]

    spk_of = {u: s for s, utts in by_spk.items() for u in utts}
    utts = sorted(spk_of)
    nontargets = _sample_nontargets(utts, spk_of, compatible, n, rng)
    if len(nontargets) < n:
        msg = f"only {len(nontargets)} non-target pairs exist for {n} target trials; trials are not balanced"
        warnings.append(msg)
        log.warning(msg)
    if n == 0:
        msg = "no target trials could be formed (every speaker has at most one usable clip)"
        warnings.append(msg)
        log.warning(msg)

    trials = [Trial(1, a, b) for a, b in targets] + [Trial(0, a, b) for a, b in nontargets]
    return TrialList(
        trials=trials,
        single_clip_speakers=single,
        speakers_without_cross_pairs=no_cross,
        unlabelled_utts=unlabelled,
        warnings=warnings,
    )


def _sample_nontargets(
    utts: list[str], spk_of: Mapping[str, str], compatible: Callable[[str, str], bool], n: int, rng: np.random.Generator
) -> list[tuple[str, str]]:
    """Draw ``n`` distinct different-speaker pairs (enumerated when small, rejection-sampled when big)."""
    if n == 0 or len(utts) < 2:
        return []
    total = len(utts) * (len(utts) - 1) // 2
    if total <= 200_000:
        cands = [(a, b) for a, b in itertools.combinations(utts, 2) if spk_of[a] != spk_of[b] and compatible(a, b)]
        if len(cands) <= n:
            return cands
        idx = np.sort(rng.choice(len(cands), size=n, replace=False))
        return [cands[i] for i in idx]
    chosen: set[tuple[str, str]] = set()
    attempts = 0
    while len(chosen) < n and attempts < 100 * n:
        attempts += 1
        i, j = rng.integers(0, len(utts), size=2)
        a, b = sorted((utts[int(i)], utts[int(j)]))
        if spk_of[a] != spk_of[b] and compatible(a, b):
            chosen.add((a, b))
    return sorted(chosen)


def split_dev(trials: Sequence[Trial], dev_fraction: float = 0.3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks (dev, eval): a seeded split stratified by label, so both halves hold both classes."""
    if not 0.0 < dev_fraction < 1.0:
        raise ConfigError(f"dev_fraction must lie strictly between 0 and 1, got {dev_fraction}")
    labels = np.array([t.label for t in trials])
    dev = np.zeros(len(trials), dtype=bool)
    rng = np.random.default_rng(seed)
    for lab in (0, 1):
        idx = np.flatnonzero(labels == lab)
        k = int(round(dev_fraction * len(idx)))
        if len(idx) >= 2:
            k = min(max(k, 1), len(idx) - 1)
        else:
            k = 0
        dev[rng.permutation(idx)[:k]] = True
    return dev, ~dev


# --------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------


def _unit_matrix(embeddings: Mapping[str, Any], ids: Sequence[str]) -> dict[str, np.ndarray]:
    """Unit-normalize the embeddings named in ``ids``; zero or non-finite vectors are errors."""
    out: dict[str, np.ndarray] = {}
    dim: int | None = None
    for utt in ids:
        if utt in out:
            continue
        vec = np.asarray(embeddings[utt], dtype=np.float64).reshape(-1)
        if dim is None:
            dim = vec.size
        elif vec.size != dim:
            raise AuditError(f"embedding of {utt!r} has {vec.size} dimensions, others have {dim}")
        norm = float(np.linalg.norm(vec))
        if not np.isfinite(norm) or norm == 0.0:
            raise AuditError(f"embedding of {utt!r} is zero or not finite; re-embed that clip")
        out[utt] = vec / norm
    return out


def _check_trials_embedded(trials: Sequence[Trial], embeddings: Mapping[str, Any]) -> None:
    for i, t in enumerate(trials, start=1):
        for name, utt in (("enroll", t.enroll), ("test", t.test)):
            if utt not in embeddings:
                raise AuditError(
                    f"trial {i} ({t.label} {t.enroll} {t.test}): {name} utterance {utt!r} has no embedding "
                    "(not in the dataset, or embedding failed; see its result row)"
                )


def cosine_scores(embeddings: Mapping[str, Any], trials: Sequence[Trial]) -> np.ndarray:
    """Cosine similarity per trial; an unknown utterance id is an error naming the trial."""
    _check_trials_embedded(trials, embeddings)
    ids = [u for t in trials for u in (t.enroll, t.test)]
    unit = _unit_matrix(embeddings, ids)
    return np.array([float(unit[t.enroll] @ unit[t.test]) for t in trials], dtype=np.float64)


def normalize_scores(
    scores: np.ndarray,
    embeddings: Mapping[str, Any],
    trials: Sequence[Trial],
    cohort: np.ndarray | Mapping[str, Any],
    top_k: int | None = None,
) -> np.ndarray:
    """Symmetric score normalization against a cohort of impostor embeddings.

    s-norm (``top_k=None``): ``0.5 * ((s - mu_e)/sd_e + (s - mu_t)/sd_t)`` where mu/sd are the
    mean and standard deviation of the enroll (test) embedding's cosine scores against the
    whole cohort. AS-norm (``top_k=k``): the same using only each side's k highest cohort
    scores, which adapts the statistics to the closest impostors. The cohort should hold
    speakers that do not appear in the trials.
    """
    if isinstance(cohort, Mapping):
        cohort_ids = sorted(cohort)
        cmat = np.stack([np.asarray(cohort[c], dtype=np.float64).reshape(-1) for c in cohort_ids]) if cohort_ids else None
    else:
        cmat = np.asarray(cohort, dtype=np.float64)
    if cmat is None or cmat.ndim != 2 or cmat.shape[0] < 2:
        raise ConfigError("score normalization needs a cohort of at least 2 embeddings")
    norms = np.linalg.norm(cmat, axis=1, keepdims=True)
    if np.any(norms == 0) or not np.all(np.isfinite(norms)):
        raise ConfigError("cohort holds a zero or non-finite embedding")
    cmat = cmat / norms
    if top_k is not None and not 1 <= top_k <= cmat.shape[0]:
        raise ConfigError(f"top_k must lie in [1, {cmat.shape[0]}] (cohort size), got {top_k}")
    _check_trials_embedded(trials, embeddings)
    unit = _unit_matrix(embeddings, [u for t in trials for u in (t.enroll, t.test)])
    if cmat.shape[1] != len(next(iter(unit.values()))):
        raise ConfigError(f"cohort embeddings have {cmat.shape[1]} dimensions, trial embeddings {len(next(iter(unit.values())))}")
    stats: dict[str, tuple[float, float]] = {}
    for utt, vec in unit.items():
        cs = cmat @ vec
        if top_k is not None:
            cs = np.sort(cs)[-top_k:]
        sd = float(cs.std())
        stats[utt] = (float(cs.mean()), sd if sd > 1e-12 else 1e-12)
    out = np.empty(len(trials), dtype=np.float64)
    for i, (s, t) in enumerate(zip(np.asarray(scores, dtype=np.float64), trials, strict=True)):
        me, se = stats[t.enroll]
        mt, st = stats[t.test]
        out[i] = 0.5 * ((s - me) / se + (s - mt) / st)
    return out


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


def _check_scores(scores: Sequence[float] | np.ndarray, labels: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    y = np.asarray(labels).reshape(-1)
    if s.shape != y.shape:
        raise AuditError(f"{s.size} scores but {y.size} labels")
    if not np.all(np.isfinite(s)):
        raise AuditError("scores contain NaN or infinity")
    if not np.all((y == 0) | (y == 1)):
        raise AuditError("trial labels must be 0 or 1")
    y = y.astype(np.int64)
    if y.sum() == 0 or y.sum() == y.size:
        raise AuditError(f"need both target and non-target trials (got {int(y.sum())} target, {int(y.size - y.sum())} non-target)")
    return s, y


def operating_points(scores: Sequence[float] | np.ndarray, labels: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(thresholds, P_miss, P_fa) at "accept nothing" (+inf) then every distinct score, descending.

    At threshold t a trial is accepted when ``score >= t``; ties are decided together.
    """
    s, y = _check_scores(scores, labels)
    order = np.argsort(-s, kind="mergesort")
    s_sorted = s[order]
    y_sorted = y[order]
    n_tar = int(y.sum())
    n_non = int(y.size - n_tar)
    tp = np.cumsum(y_sorted)
    fp = np.cumsum(1 - y_sorted)
    last_of_tie = np.r_[s_sorted[1:] != s_sorted[:-1], True]
    tp = np.r_[0, tp[last_of_tie]]
    fp = np.r_[0, fp[last_of_tie]]
    thresholds = np.r_[np.inf, s_sorted[last_of_tie]]
    p_miss = 1.0 - tp / n_tar
    p_fa = fp / n_non
    return thresholds, p_miss, p_fa


def eer(scores: Sequence[float] | np.ndarray, labels: Sequence[int] | np.ndarray) -> tuple[float, float]:
    """Equal error rate and a threshold at it (see the module docstring for the definition)."""
    thr, p_miss, p_fa = operating_points(scores, labels)
    diff = p_miss - p_fa  # starts at 1 (accept nothing), ends at -1 (accept all): a crossing exists
    i = int(np.flatnonzero(diff <= 0)[0])
    if diff[i] == 0:
        return float(p_fa[i]), float(thr[i])
    w = diff[i - 1] / (diff[i - 1] - diff[i])
    value = float(p_fa[i - 1] + w * (p_fa[i] - p_fa[i - 1]))
    # the threshold between the two neighbouring scores (the upper one may be +inf)
    upper = thr[i - 1] if np.isfinite(thr[i - 1]) else thr[i]
    threshold = float(upper + w * (thr[i] - upper))
    return value, threshold


def min_dcf(
    scores: Sequence[float] | np.ndarray,
    labels: Sequence[int] | np.ndarray,
    p_target: float = P_TARGET,
    c_miss: float = C_MISS,
    c_fa: float = C_FA,
) -> tuple[float, float]:
    """Normalized minimum detection cost and the threshold that reaches it."""
    if not 0.0 < p_target < 1.0:
        raise ConfigError(f"p_target must lie strictly between 0 and 1, got {p_target}")
    if c_miss <= 0 or c_fa <= 0:
        raise ConfigError("C_miss and C_fa must be positive")
    thr, p_miss, p_fa = operating_points(scores, labels)
    thr = np.r_[thr, -np.inf]  # "accept all" point
    p_miss = np.r_[p_miss, 0.0]
    p_fa = np.r_[p_fa, 1.0]
    dcf = c_miss * p_target * p_miss + c_fa * (1.0 - p_target) * p_fa
    dcf /= min(c_miss * p_target, c_fa * (1.0 - p_target))
    i = int(np.argmin(dcf))
    return float(dcf[i]), float(thr[i])


def accuracy_at(scores: Sequence[float] | np.ndarray, labels: Sequence[int] | np.ndarray, threshold: float) -> float:
    """Share of trials decided correctly when ``score >= threshold`` means "same speaker"."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    y = np.asarray(labels).reshape(-1)
    if s.size == 0:
        return float("nan")
    return float(np.mean((s >= threshold) == (y == 1)))


def select_threshold(scores: Sequence[float] | np.ndarray, labels: Sequence[int] | np.ndarray, criterion: str = "eer") -> float:
    """Choose a decision threshold on dev trials: at the EER, at minDCF, or maximizing accuracy."""
    if criterion == "eer":
        return eer(scores, labels)[1]
    if criterion == "min_dcf":
        return min_dcf(scores, labels)[1]
    if criterion == "accuracy":
        thr, p_miss, p_fa = operating_points(scores, labels)
        y = np.asarray(labels)
        n_tar = int(y.sum())
        n_non = y.size - n_tar
        correct = (1 - p_miss) * n_tar + (1 - p_fa) * n_non
        i = int(np.argmax(correct))
        return float(thr[i]) if np.isfinite(thr[i]) else float(np.max(scores)) + 1e-9
    raise ConfigError(f"unknown threshold criterion {criterion!r}; use 'eer', 'min_dcf' or 'accuracy'")


def det_points(scores: Sequence[float] | np.ndarray, labels: Sequence[int] | np.ndarray, max_points: int = 200) -> dict[str, list[float]]:
    """DET curve data for plotting: P_fa, P_miss, their probits (clipped) and thresholds."""
    from scipy.stats import norm

    thr, p_miss, p_fa = operating_points(scores, labels)
    if len(thr) > max_points:
        keep = np.unique(np.r_[0, np.linspace(0, len(thr) - 1, max_points).round().astype(int), len(thr) - 1])
        thr, p_miss, p_fa = thr[keep], p_miss[keep], p_fa[keep]
    eps = 1e-6
    return {
        "p_fa": [float(x) for x in p_fa],
        "p_miss": [float(x) for x in p_miss],
        "probit_fa": [float(x) for x in norm.ppf(np.clip(p_fa, eps, 1 - eps))],
        "probit_miss": [float(x) for x in norm.ppf(np.clip(p_miss, eps, 1 - eps))],
        "threshold": [float(x) if np.isfinite(x) else None for x in thr],  # type: ignore[misc]
    }


def score_histogram(scores: Sequence[float] | np.ndarray, labels: Sequence[int] | np.ndarray, bins: int = 40) -> dict[str, list[float]]:
    """Target and non-target score histograms on shared bin edges (for the report)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    edges = np.histogram_bin_edges(s, bins=bins)
    return {
        "edges": [float(e) for e in edges],
        "target": [int(c) for c in np.histogram(s[y == 1], bins=edges)[0]],
        "nontarget": [int(c) for c in np.histogram(s[y == 0], bins=edges)[0]],
    }


# --------------------------------------------------------------------------------------------
# The audit
# --------------------------------------------------------------------------------------------


def _nan_to_none(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


@dataclass
class SliceResult:
    """Metrics over a subset of trials; None where a class is missing (reason in ``note``)."""

    n_trials: int
    n_target: int
    n_nontarget: int
    eer: float | None = None
    min_dcf: float | None = None
    accuracy: float | None = None
    n_eval_trials: int = 0
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "eer": _nan_to_none(self.eer),
            "min_dcf": _nan_to_none(self.min_dcf),
            "accuracy": _nan_to_none(self.accuracy),
            "n_trials": self.n_trials,
            "n_target": self.n_target,
            "n_nontarget": self.n_nontarget,
            "n_eval_trials": self.n_eval_trials,
        }
        if self.note:
            d["note"] = self.note
        return d


def _slice_metrics(scores: np.ndarray, labels: np.ndarray, eval_mask: np.ndarray, threshold: float, p_target: float) -> SliceResult:
    n_tar = int(labels.sum())
    n_non = int(labels.size - n_tar)
    res = SliceResult(n_trials=int(labels.size), n_target=n_tar, n_nontarget=n_non, n_eval_trials=int(eval_mask.sum()))
    if eval_mask.any():
        res.accuracy = accuracy_at(scores[eval_mask], labels[eval_mask], threshold)
    if n_tar == 0 or n_non == 0:
        res.note = "EER/minDCF need both target and non-target trials"
        return res
    res.eer = eer(scores, labels)[0]
    res.min_dcf = min_dcf(scores, labels, p_target=p_target)[0]
    return res


@dataclass
class SpeakerResult:
    """Everything the speaker-match audit reports for one SV backend."""

    backend: str
    eer: float
    eer_threshold: float
    min_dcf: float
    min_dcf_threshold: float
    accuracy: float
    threshold: float
    threshold_source: str
    n_trials: int
    n_target: int
    n_nontarget: int
    n_eval_trials: int
    p_target: float
    norm: str | None
    slices: dict[str, SliceResult]
    slice_pairs: dict[str, SliceResult]
    det: dict[str, list[float]]
    score_hist: dict[str, list[float]]
    single_clip_speakers: list[str]
    speakers_without_cross_pairs: list[str]
    unlabelled_utts: list[str]
    warnings: list[str]
    scores: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able entry for ``summary.json`` under ``speaker.<backend>``."""
        return {
            "eer": self.eer,
            "min_dcf": self.min_dcf,
            "accuracy": _nan_to_none(self.accuracy),
            "threshold": self.threshold,
            "threshold_source": self.threshold_source,
            "eer_threshold": self.eer_threshold,
            "min_dcf_threshold": self.min_dcf_threshold,
            "n_trials": self.n_trials,
            "n_target": self.n_target,
            "n_nontarget": self.n_nontarget,
            "n_eval_trials": self.n_eval_trials,
            "p_target": self.p_target,
            "c_miss": C_MISS,
            "c_fa": C_FA,
            "norm": self.norm,
            "slices": {k: v.to_dict() for k, v in sorted(self.slices.items())},
            "slice_pairs": {k: v.to_dict() for k, v in sorted(self.slice_pairs.items())},
            "det": self.det,
            "score_hist": self.score_hist,
            "single_clip_speakers": list(self.single_clip_speakers),
            "speakers_without_cross_pairs": list(self.speakers_without_cross_pairs),
            "unlabelled_utts": list(self.unlabelled_utts),
            "warnings": list(self.warnings),
        }


def evaluate_speaker(
    embeddings: Mapping[str, Any],
    trials: TrialList | Sequence[Trial],
    backend: str = "sv",
    utt_labels: Mapping[str, Mapping[str, str]] | None = None,
    threshold: float | None = None,
    threshold_criterion: str = "eer",
    dev_fraction: float = 0.3,
    seed: int = 0,
    cohort: np.ndarray | Mapping[str, Any] | None = None,
    top_k: int | None = None,
    p_target: float = P_TARGET,
    slice_keys: Sequence[str] | None = None,
) -> SpeakerResult:
    """Score trials and compute EER, minDCF, accuracy, per-slice and per-slice-pair results.

    Threshold: ``threshold`` when given (accuracy on all trials), else chosen by
    ``threshold_criterion`` on a seeded dev split of ``dev_fraction`` and accuracy reported on
    the rest. Slices: for every label key (``slice_keys`` or all keys found), ``"key=v"`` holds
    trials whose two clips both have value v, and ``"key=a|key=b"`` (a < b) those that cross.
    """
    tl = trials if isinstance(trials, TrialList) else TrialList(list(trials))
    if not tl.trials:
        raise AuditError("no trials to score; " + ("; ".join(tl.warnings) or "the trial list is empty"))
    scores = cosine_scores(embeddings, tl.trials)
    norm_name: str | None = None
    if cohort is not None:
        scores = normalize_scores(scores, embeddings, tl.trials, cohort, top_k=top_k)
        norm_name = "s-norm" if top_k is None else f"as-norm(top_k={top_k})"
    y = tl.labels
    value_eer, thr_eer = eer(scores, y)
    value_dcf, thr_dcf = min_dcf(scores, y, p_target=p_target)
    if threshold is not None:
        thr = float(threshold)
        source = "given"
        eval_mask = np.ones(len(y), dtype=bool)
    else:
        dev_mask, eval_mask = split_dev(tl.trials, dev_fraction, seed)
        n_dev_tar = int(y[dev_mask].sum())
        if n_dev_tar == 0 or n_dev_tar == int(dev_mask.sum()):
            raise AuditError(
                f"too few trials to choose a threshold on a dev split ({int(y.sum())} target, {int(len(y) - y.sum())} "
                "non-target; each class needs at least 2); pass a threshold instead"
            )
        thr = select_threshold(scores[dev_mask], y[dev_mask], threshold_criterion)
        source = f"dev:{threshold_criterion}(fraction={dev_fraction},seed={seed})"
    acc = accuracy_at(scores[eval_mask], y[eval_mask], thr)

    slices: dict[str, SliceResult] = {}
    pairs: dict[str, SliceResult] = {}
    if utt_labels:
        keys = sorted(slice_keys) if slice_keys is not None else sorted({k for lab in utt_labels.values() for k in lab})
        for key in keys:
            groups: dict[str, list[int]] = {}
            for i, t in enumerate(tl.trials):
                a = utt_labels.get(t.enroll, {}).get(key)
                b = utt_labels.get(t.test, {}).get(key)
                if a is None or b is None:
                    continue
                name = f"{key}={a}" if a == b else "|".join(sorted((f"{key}={a}", f"{key}={b}")))
                groups.setdefault(name, []).append(i)
            for name, idx_list in groups.items():
                idx = np.array(idx_list)
                res = _slice_metrics(scores[idx], y[idx], eval_mask[idx], thr, p_target)
                (pairs if "|" in name else slices)[name] = res

    return SpeakerResult(
        backend=backend,
        eer=value_eer,
        eer_threshold=thr_eer,
        min_dcf=value_dcf,
        min_dcf_threshold=thr_dcf,
        accuracy=acc,
        threshold=thr,
        threshold_source=source,
        n_trials=len(y),
        n_target=int(y.sum()),
        n_nontarget=int(len(y) - y.sum()),
        n_eval_trials=int(eval_mask.sum()),
        p_target=p_target,
        norm=norm_name,
        slices=slices,
        slice_pairs=pairs,
        det=det_points(scores, y),
        score_hist=score_histogram(scores, y),
        single_clip_speakers=list(tl.single_clip_speakers),
        speakers_without_cross_pairs=list(tl.speakers_without_cross_pairs),
        unlabelled_utts=list(tl.unlabelled_utts),
        warnings=list(tl.warnings),
        scores=scores,
    )


# --------------------------------------------------------------------------------------------
# Combined-clip variant for audio-language-model judges
# --------------------------------------------------------------------------------------------


def combine_clips(
    a: np.ndarray,
    b: np.ndarray,
    sample_rate: int = SAMPLE_RATE,
    beep_hz: float = 1000.0,
    beep_s: float = 0.3,
    gap_s: float = 0.25,
    beep_amplitude: float = 0.3,
) -> np.ndarray:
    """One clip "A, gap, beep, gap, B" so a judge that hears one file can compare two voices."""
    if beep_s <= 0 or gap_s < 0:
        raise ConfigError("beep_s must be positive and gap_s non-negative")
    t = np.arange(int(round(beep_s * sample_rate))) / sample_rate
    ramp = np.minimum(1.0, np.minimum(t, t[::-1]) / 0.01)  # 10 ms fades: no clicks
    beep = (beep_amplitude * ramp * np.sin(2 * np.pi * beep_hz * t)).astype(np.float32)
    gap = np.zeros(int(round(gap_s * sample_rate)), dtype=np.float32)
    parts = [np.asarray(a, dtype=np.float32).reshape(-1), gap, beep, gap, np.asarray(b, dtype=np.float32).reshape(-1)]
    return np.concatenate(parts)


def combined_trial_id(trial: Trial) -> str:
    """Stable utt_id for the combined clip of a trial (derived audio gets its own id)."""
    digest = hashlib.sha1(f"{trial.enroll}\x00{trial.test}".encode()).hexdigest()[:10]
    return f"svpair-{digest}"


def combined_trial_derivation(trial: Trial, beep_hz: float = 1000.0, beep_s: float = 0.3, gap_s: float = 0.25) -> dict[str, Any]:
    """The derivation record stored beside a combined clip (``parent_id`` is the enroll clip)."""
    return {
        "kind": "sv-combined-clip",
        "enroll": trial.enroll,
        "test": trial.test,
        "label": trial.label,
        "layout": "enroll,gap,beep,gap,test",
        "beep_hz": beep_hz,
        "beep_s": beep_s,
        "gap_s": gap_s,
    }
