"""Speaker-verification scoring: EER/minDCF by hand and against independent computations,
trials from files and from labels, score normalization, slices, bad input."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import brentq
from sklearn.metrics import roc_curve

from audits.speaker import metrics as sv
from engine.errors import AuditError, ConfigError, ManifestError


def _scores(targets: list[float], nontargets: list[float]) -> tuple[np.ndarray, np.ndarray]:
    return np.array(targets + nontargets), np.array([1] * len(targets) + [0] * len(nontargets))


# ------------------------------------------------------------------ hand-computed cases


def test_eer_hand_computed_exact_crossing() -> None:
    # thresholds: 0.9 -> (miss 2/3, fa 0), 0.8 -> (1/3, 0), 0.7 -> (1/3, 1/3): EER = 1/3 at 0.7
    s, y = _scores([0.9, 0.8, 0.3], [0.7, 0.2, 0.1])
    value, thr = sv.eer(s, y)
    assert value == pytest.approx(1 / 3)
    assert thr == pytest.approx(0.7)


def test_eer_hand_computed_interpolated() -> None:
    # 0.6 -> (miss 1/2, fa 1/3), 0.5 -> (1/2, 2/3): the crossing is half way, at fa = miss = 1/2
    s, y = _scores([0.9, 0.4], [0.6, 0.5, 0.1])
    value, thr = sv.eer(s, y)
    assert value == pytest.approx(0.5)
    assert 0.5 <= thr <= 0.6


def test_eer_extremes_and_ties() -> None:
    assert sv.eer(*_scores([0.9, 0.8], [0.1, 0.2]))[0] == 0.0
    assert sv.eer(*_scores([0.1, 0.2], [0.8, 0.9]))[0] == 1.0
    # all three 0.5s decided together: (1, 0) -> (0, 1/2); crossing at 2/3 of the way: 1/3
    assert sv.eer(*_scores([0.5, 0.5], [0.5, 0.1]))[0] == pytest.approx(1 / 3)


def test_min_dcf_hand_computed() -> None:
    s, y = _scores([0.9, 0.8, 0.3], [0.7, 0.2, 0.1])
    # p_target 0.01: normalized DCF = P_miss + 99 P_fa; best at threshold 0.8: 1/3 + 0
    value, thr = sv.min_dcf(s, y)
    assert value == pytest.approx(1 / 3)
    assert thr == pytest.approx(0.8)
    # p_target 0.5: DCF = (P_miss + P_fa) / 1 ... normalized by 0.5: P_miss + P_fa; min 1/3
    assert sv.min_dcf(s, y, p_target=0.5)[0] == pytest.approx(1 / 3)
    # perfect separation costs nothing; a hopeless system is capped at 1 (reject everything)
    assert sv.min_dcf(*_scores([0.9, 0.8], [0.1, 0.2]))[0] == 0.0
    assert sv.min_dcf(*_scores([0.1, 0.2], [0.8, 0.9]))[0] == pytest.approx(1.0)


def test_accuracy_at_threshold_hand_computed() -> None:
    s, y = _scores([0.9, 0.8, 0.3], [0.7, 0.2, 0.1])
    assert sv.accuracy_at(s, y, 0.75) == pytest.approx(5 / 6)  # misses only the 0.3 target
    assert sv.accuracy_at(s, y, 0.8) == pytest.approx(5 / 6)  # score >= threshold accepts
    assert sv.accuracy_at(s, y, 0.05) == pytest.approx(3 / 6)


# ------------------------------------------------------------------ independent computations


def _sklearn_eer(s: np.ndarray, y: np.ndarray) -> float:
    fpr, tpr, _ = roc_curve(y, s)
    return float(brentq(lambda x: 1.0 - x - np.interp(x, fpr, tpr), 0.0, 1.0))


def _brute_min_dcf(s: np.ndarray, y: np.ndarray, p: float, c_miss: float = 1.0, c_fa: float = 1.0) -> float:
    best = np.inf
    for t in np.r_[np.unique(s), np.inf, -np.inf]:
        p_miss = np.mean(s[y == 1] < t)
        p_fa = np.mean(s[y == 0] >= t)
        best = min(best, c_miss * p * p_miss + c_fa * (1 - p) * p_fa)
    return float(best / min(c_miss * p, c_fa * (1 - p)))


@pytest.mark.parametrize("seed", range(8))
def test_eer_and_min_dcf_match_independent_implementations(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_tar, n_non = rng.integers(20, 300, size=2)
    s = np.r_[rng.normal(1.0 + seed * 0.2, 1.0, n_tar), rng.normal(0.0, 1.0, n_non)]
    y = np.r_[np.ones(n_tar, int), np.zeros(n_non, int)]
    perm = rng.permutation(len(s))
    s, y = s[perm], y[perm]
    assert sv.eer(s, y)[0] == pytest.approx(_sklearn_eer(s, y), abs=1e-9)
    for p in (0.01, 0.05, 0.5):
        assert sv.min_dcf(s, y, p_target=p)[0] == pytest.approx(_brute_min_dcf(s, y, p), abs=1e-9)
    # the reported minDCF threshold really reaches the reported cost
    value, thr = sv.min_dcf(s, y)
    cost = 0.01 * np.mean(s[y == 1] < thr) + 0.99 * np.mean(s[y == 0] >= thr)
    assert cost / 0.01 == pytest.approx(value)


def test_eer_with_heavy_ties_matches_sklearn() -> None:
    rng = np.random.default_rng(3)
    s = np.round(np.r_[rng.normal(1, 1, 200), rng.normal(0, 1, 300)], 1)
    y = np.r_[np.ones(200, int), np.zeros(300, int)]
    assert sv.eer(s, y)[0] == pytest.approx(_sklearn_eer(s, y), abs=1e-9)


def test_metric_input_errors() -> None:
    with pytest.raises(AuditError, match="both target and non-target"):
        sv.eer([0.1, 0.2], [1, 1])
    with pytest.raises(AuditError, match="NaN"):
        sv.eer([0.1, np.nan], [1, 0])
    with pytest.raises(AuditError, match="0 or 1"):
        sv.eer([0.1, 0.2], [2, 0])
    with pytest.raises(ConfigError, match="p_target"):
        sv.min_dcf([0.1, 0.2], [1, 0], p_target=1.5)


# ------------------------------------------------------------------ trials


def test_trial_file_roundtrip_and_errors(tmp_path: Path) -> None:
    trials = [sv.Trial(1, "a1", "a2"), sv.Trial(0, "a1", "b1")]
    path = tmp_path / "trials.txt"
    sv.write_trials(trials, path)
    assert sv.read_trials(path, known_ids={"a1", "a2", "b1"}) == trials

    bad = tmp_path / "bad.txt"
    bad.write_text("1 a1 a2\n0 a1\n")
    with pytest.raises(ManifestError, match=r"line 2.*3 fields"):
        sv.read_trials(bad)
    bad.write_text("# comment\n1 a1 a2\nyes a1 b1\n")
    with pytest.raises(ManifestError, match=r"line 3, field 'label'"):
        sv.read_trials(bad)
    bad.write_text("1 a1 a2\n\n0 a1 zz9\n")
    with pytest.raises(ManifestError, match=r"line 3, field 'test'.*'zz9'"):
        sv.read_trials(bad, known_ids={"a1", "a2", "b1"})
    with pytest.raises(ConfigError, match="does not exist"):
        sv.read_trials(tmp_path / "nope.txt")


def _toy_speakers() -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    speakers, labels = {}, {}
    for spk in ("s1", "s2", "s3"):
        for k, emo in enumerate(("neutral", "angry", "sad", "neutral")):
            utt = f"{spk}_{k}"
            speakers[utt] = spk
            labels[utt] = {"emotion": emo}
    speakers["lonely_0"] = "lonely"
    labels["lonely_0"] = {"emotion": "angry"}
    return speakers, labels


def test_generate_trials_balanced_deterministic_and_reports_single_clip(caplog: pytest.LogCaptureFixture) -> None:
    speakers, labels = _toy_speakers()
    with caplog.at_level(logging.WARNING):
        tl = sv.generate_trials(speakers, labels, seed=7)
    assert tl.trials == sv.generate_trials(speakers, labels, seed=7).trials
    y = tl.labels
    assert y.sum() == 3 * 6 and (y == 0).sum() == 3 * 6  # all C(4,2) target pairs, as many non-targets
    for t in tl.trials:
        assert (speakers[t.enroll] == speakers[t.test]) == bool(t.label)
    assert tl.single_clip_speakers == ["lonely"]
    assert any("single clip" in w for w in tl.warnings)
    assert "single clip" in caplog.text
    capped = sv.generate_trials(speakers, labels, seed=1, max_per_class=5)
    assert capped.labels.sum() == 5 and len(capped) == 10


def test_generate_trials_crossing_a_slice() -> None:
    speakers, labels = _toy_speakers()
    speakers["mono_0"], speakers["mono_1"] = "mono", "mono"
    labels["mono_0"], labels["mono_1"] = {"emotion": "sad"}, {"emotion": "sad"}
    tl = sv.generate_trials(speakers, labels, cross="emotion", seed=0)
    assert len(tl) > 0
    for t in tl.trials:
        assert labels[t.enroll]["emotion"] != labels[t.test]["emotion"]
    assert tl.labels.sum() == 3 * 5  # 6 pairs per speaker minus the neutral/neutral one
    assert tl.speakers_without_cross_pairs == ["mono"]
    # the lonely and mono speakers still serve as impostors: nothing is lost
    used = {u for t in tl.trials for u in (t.enroll, t.test)}
    assert "lonely_0" in used or "mono_0" in used or "mono_1" in used


def test_unlabelled_utterances_are_listed() -> None:
    tl = sv.generate_trials({"a1": "a", "a2": "a", "b1": "b", "x": None})
    assert tl.unlabelled_utts == ["x"]
    assert len(tl) == 2


def test_split_dev_is_stratified() -> None:
    trials = [sv.Trial(1, f"a{i}", f"b{i}") for i in range(10)] + [sv.Trial(0, f"c{i}", f"d{i}") for i in range(10)]
    dev, ev = sv.split_dev(trials, 0.3, seed=0)
    y = np.array([t.label for t in trials])
    assert dev.sum() == 6 and y[dev].sum() == 3 and (~dev == ev).all()
    with pytest.raises(ConfigError):
        sv.split_dev(trials, 1.0)


# ------------------------------------------------------------------ scoring


def _cluster_embeddings(speakers: dict[str, str], dim: int = 16, spread: float = 0.3, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = {s: rng.normal(size=dim) for s in sorted(set(speakers.values()))}
    return {u: (centres[s] + spread * rng.normal(size=dim)).astype(np.float32) for u, s in speakers.items()}


def test_cosine_scores_and_missing_embedding() -> None:
    emb = {"a": np.array([1.0, 0.0]), "b": np.array([1.0, 1.0]), "c": np.array([0.0, -2.0])}
    s = sv.cosine_scores(emb, [sv.Trial(1, "a", "b"), sv.Trial(0, "a", "c")])
    assert s == pytest.approx([1 / np.sqrt(2), 0.0])
    with pytest.raises(AuditError, match=r"trial 2 \(0 a zz\): test utterance 'zz'"):
        sv.cosine_scores(emb, [sv.Trial(1, "a", "b"), sv.Trial(0, "a", "zz")])
    with pytest.raises(AuditError, match="zero"):
        sv.cosine_scores({"a": np.zeros(2), "b": np.ones(2)}, [sv.Trial(1, "a", "b")])


def test_snorm_and_asnorm_by_hand() -> None:
    emb = {"e": np.array([1.0, 0.0]), "t": np.array([0.0, 1.0])}
    cohort = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    trials = [sv.Trial(0, "e", "t")]
    raw = sv.cosine_scores(emb, trials)
    c = 1 / np.sqrt(2)
    ce = np.array([1.0, 0.0, c])  # both sides see the same cohort score set
    expected = (0.0 - ce.mean()) / ce.std()
    assert sv.normalize_scores(raw, emb, trials, cohort)[0] == pytest.approx(expected)
    top2 = np.array([1.0, c])
    assert sv.normalize_scores(raw, emb, trials, cohort, top_k=2)[0] == pytest.approx((0.0 - top2.mean()) / top2.std())
    assert sv.normalize_scores(raw, emb, trials, cohort, top_k=3)[0] == pytest.approx(expected)
    with pytest.raises(ConfigError, match="top_k"):
        sv.normalize_scores(raw, emb, trials, cohort, top_k=9)


def test_evaluate_speaker_end_to_end_json_and_slices() -> None:
    speakers, labels = _toy_speakers()
    for spk in ("s4", "s5", "s6"):
        for k in range(4):
            speakers[f"{spk}_{k}"] = spk
            labels[f"{spk}_{k}"] = {"emotion": ("neutral", "angry")[k % 2]}
    emb = _cluster_embeddings(speakers)
    tl = sv.generate_trials(speakers, labels, seed=0)
    res = sv.evaluate_speaker(emb, tl, backend="toy", utt_labels=labels)
    assert res.eer < 0.05 and res.min_dcf < 0.5
    assert res.n_trials == len(tl) and res.n_eval_trials < res.n_trials
    assert res.threshold_source.startswith("dev:eer")
    d = res.to_dict()
    text = json.dumps(d, allow_nan=False)
    assert json.loads(text)["n_trials"] == len(tl)
    for key in ("eer", "min_dcf", "accuracy", "threshold", "n_trials", "slices"):
        assert key in d
    assert "emotion=neutral" in d["slices"]
    assert "emotion=angry|emotion=neutral" in d["slice_pairs"]
    assert d["single_clip_speakers"] == ["lonely"]
    total = sum(v["n_trials"] for v in d["slices"].values()) + sum(v["n_trials"] for v in d["slice_pairs"].values())
    assert total == len(tl)  # every trial lands in exactly one slice or slice pair
    assert len(d["det"]["p_fa"]) == len(d["det"]["p_miss"])
    assert sum(d["score_hist"]["target"]) == res.n_target

    given = sv.evaluate_speaker(emb, tl, threshold=0.5)
    assert given.threshold_source == "given" and given.n_eval_trials == len(tl)
    assert given.accuracy == pytest.approx(sv.accuracy_at(given.scores, tl.labels, 0.5))
    normed = sv.evaluate_speaker(emb, tl, cohort=_cluster_embeddings({f"c{i}": f"c{i}" for i in range(20)}, seed=5), top_k=5)
    assert normed.norm == "as-norm(top_k=5)" and normed.eer < 0.1


def test_evaluate_speaker_without_any_target_trial_is_clear() -> None:
    tl = sv.generate_trials({"a": "1", "b": "2", "c": "3"})
    assert len(tl) == 0 and tl.single_clip_speakers == ["1", "2", "3"]
    with pytest.raises(AuditError, match="no trials.*single clip"):
        sv.evaluate_speaker({"a": [1.0], "b": [1.0], "c": [1.0]}, tl)


def test_tiny_trial_set_needs_a_given_threshold() -> None:
    emb = {"a1": [1.0, 0.1], "a2": [1.0, 0.0], "b1": [0.0, 1.0]}
    trials = [sv.Trial(1, "a1", "a2"), sv.Trial(0, "a1", "b1")]
    with pytest.raises(AuditError, match="pass a threshold"):
        sv.evaluate_speaker(emb, trials)
    res = sv.evaluate_speaker(emb, trials, threshold=0.5)
    assert res.eer == 0.0 and res.accuracy == 1.0


def test_select_threshold_criteria() -> None:
    s, y = _scores([0.9, 0.8, 0.3], [0.7, 0.2, 0.1])
    assert sv.select_threshold(s, y, "min_dcf") == pytest.approx(0.8)
    t = sv.select_threshold(s, y, "accuracy")
    assert sv.accuracy_at(s, y, t) == pytest.approx(5 / 6)
    with pytest.raises(ConfigError, match="criterion"):
        sv.select_threshold(s, y, "best")


def test_combined_clip_layout() -> None:
    a = np.ones(1600, dtype=np.float32)
    b = -np.ones(800, dtype=np.float32)
    out = sv.combine_clips(a, b, beep_s=0.3, gap_s=0.25)
    assert len(out) == 1600 + 800 + 2 * 4000 + 4800
    assert np.all(out[:1600] == 1) and np.all(out[-800:] == -1)
    beep = out[1600 + 4000 : 1600 + 4000 + 4800]
    assert 0.2 < np.abs(beep).max() <= 0.3
    t = sv.Trial(1, "a", "b")
    assert sv.combined_trial_id(t) == sv.combined_trial_id(sv.Trial(0, "a", "b"))
    assert sv.combined_trial_derivation(t)["layout"] == "enroll,gap,beep,gap,test"
