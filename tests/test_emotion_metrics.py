"""Emotion scoring: UA/WA/macro-F1 and CCC by hand and against scikit-learn, label mapping,
relative comparisons, the audit's handling of missing and unmapped outputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score, confusion_matrix, f1_score

from audits.emotion import metrics as em
from engine.backends.base import EmotionOutput
from engine.errors import AuditError, ConfigError

REFS = ["a", "a", "a", "b", "b", "c"]
HYPS = ["a", "a", "b", "b", "c", "c"]


def test_categorical_hand_computed() -> None:
    cs = em.categorical_scores(REFS, HYPS)
    assert cs.ua == pytest.approx((2 / 3 + 1 / 2 + 1) / 3)  # recalls a, b, c
    assert cs.wa == pytest.approx(4 / 6)
    # F1: a = 2*1*(2/3)/(1+2/3) = 0.8, b = 0.5, c = 2*(1/2)*1/(3/2) = 2/3
    assert cs.macro_f1 == pytest.approx((0.8 + 0.5 + 2 / 3) / 3)
    assert cs.classes == ["a", "b", "c"]
    assert cs.confusion == [[2, 1, 0], [0, 1, 1], [0, 0, 1]]
    assert cs.per_class["c"]["support"] == 1


@pytest.mark.filterwarnings("ignore:y_pred contains classes not in y_true")
@pytest.mark.parametrize("seed", range(6))
def test_categorical_matches_sklearn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    classes = ["angry", "happy", "neutral", "sad", "surprised"]
    refs = list(rng.choice(classes[:4], size=120))
    hyps = [r if rng.random() < 0.5 else str(rng.choice(classes)) for r in refs]  # 'surprised' only predicted
    cs = em.categorical_scores(refs, hyps)
    assert cs.ua == pytest.approx(balanced_accuracy_score(refs, hyps))
    assert cs.wa == pytest.approx(np.mean(np.array(refs) == np.array(hyps)))
    assert cs.macro_f1 == pytest.approx(f1_score(refs, hyps, average="macro", zero_division=0))
    assert np.array_equal(np.array(cs.confusion), confusion_matrix(refs, hyps, labels=cs.classes))


def test_ccc_hand_computed() -> None:
    assert em.ccc([1, 2, 3], [2, 3, 4]) == pytest.approx(4 / 7)  # 2*(2/3) / (2/3 + 2/3 + 1)
    assert em.ccc([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)
    assert em.ccc([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert em.ccc([1, 2, 3], [2, 4, 6]) == pytest.approx(2 * (4 / 3) / (2 / 3 + 8 / 3 + 4))
    assert np.isnan(em.ccc([1, 1], [1, 1]))
    with pytest.raises(AuditError, match="equal lengths"):
        em.ccc([1, 2], [1, 2, 3])


def test_ccc_matches_formula_on_random_data() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=500)
    y = 0.6 * x + rng.normal(0.3, 0.7, size=500)
    r = np.corrcoef(x, y)[0, 1]
    expected = 2 * r * x.std() * y.std() / (x.var() + y.var() + (x.mean() - y.mean()) ** 2)
    assert em.ccc(x, y) == pytest.approx(expected)


def test_relative_comparison_accuracy() -> None:
    res = em.relative_comparison_accuracy([1, 2, 3], [1, 3, 2])
    assert res.accuracy == pytest.approx(2 / 3) and res.n_pairs == 3
    tie = em.relative_comparison_accuracy([1, 2, 3], [1, 1, 2])
    assert tie.accuracy == pytest.approx(2 / 3) and tie.n_pred_ties == 1
    gap = em.relative_comparison_accuracy([1.0, 1.05, 3.0], [0, 1, 2], min_gap=0.1)
    assert gap.n_pairs == 2 and gap.accuracy == 1.0
    explicit = em.relative_comparison_accuracy([1, 2, 3], [3, 2, 1], pairs=[(0, 2)])
    assert explicit.accuracy == 0.0 and explicit.n_pairs == 1
    with pytest.raises(AuditError, match="out of range"):
        em.relative_comparison_accuracy([1, 2], [1, 2], pairs=[(0, 5)])


def test_label_map(tmp_path: Path) -> None:
    lm = em.LabelMap()
    assert lm.map("ANG") == "angry" and lm.map("生气/angry") == "angry" and lm.map("exc") == "happy"
    with pytest.raises(AuditError, match="'bored' is not in the label map"):
        lm.map("bored")
    f = tmp_path / "map.csv"
    f.write_text("# dataset labels\nbored,neutral\nW, angry\n")
    custom = em.LabelMap.from_file(f)
    assert custom.map("bored") == "neutral" and custom.map("w") == "angry"
    f.write_text("bored\n")
    with pytest.raises(ConfigError, match="line 1"):
        em.LabelMap.from_file(f)


def _out(label: str, p: float = 0.9, **dims: float) -> EmotionOutput:
    return EmotionOutput(posteriors={label: p, "other": 1 - p}, dimensions=dims)


def test_evaluate_emotion_counts_missing_and_maps_labels() -> None:
    ref = {"u1": "ang", "u2": "ang", "u3": "neu", "u4": "sad", "u5": "sad"}
    outputs = {"u1": _out("angry"), "u2": _out("生气/angry"), "u3": _out("sad"), "u4": _out("sad")}
    labels = {u: {"speaker": "s1" if u in ("u1", "u3") else "s2"} for u in ref}
    res = em.evaluate_emotion(outputs, backend="toy", ref_labels=ref, utt_labels=labels)
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["n_utts"] == 5 and d["n_missing"] == 1 and d["missing_utts"] == ["u5"]
    assert d["n_scored"] == 4
    assert d["ua"] == pytest.approx((1 + 0 + 1) / 3) and d["wa"] == pytest.approx(3 / 4)
    assert d["label_map"]["生气/angry"] == "angry" and d["label_map"]["neu"] == "neutral"
    assert d["slices"]["speaker=s1"]["wa"] == pytest.approx(0.5)
    assert d["confusion"]["labels"] == ["angry", "neutral", "sad"]


def test_evaluate_emotion_unmapped_labels() -> None:
    ref = {"u1": "ang", "u2": "bored"}
    outputs = {"u1": _out("angry"), "u2": _out("angry")}
    with pytest.raises(AuditError, match="'bored'"):
        em.evaluate_emotion(outputs, ref_labels=ref)
    res = em.evaluate_emotion(outputs, ref_labels=ref, unmapped="drop")
    assert res.dropped_unmapped == {"bored": 1} and res.categorical is not None and res.categorical.n == 1


def test_evaluate_emotion_dimensional() -> None:
    ref_dims = {f"u{i}": {"arousal": float(i)} for i in range(5)}
    outputs = {f"u{i}": EmotionOutput(dimensions={"arousal_proxy": float(i) * 2}) for i in range(5)}
    res = em.evaluate_emotion(outputs, ref_dims=ref_dims, dim_map={"arousal_proxy": "arousal"})
    entry = res.to_dict()["dimensional"]["arousal"]
    x = np.arange(5.0)
    assert entry["ccc"] == pytest.approx(em.ccc(x, 2 * x))
    assert entry["comparison"]["accuracy"] == 1.0 and entry["comparison"]["n_pairs"] == 10
    res2 = em.evaluate_emotion(outputs, ref_dims=ref_dims)
    assert any("no 'arousal' dimension" in w for w in res2.warnings)


def test_model_derived_labels_are_marked() -> None:
    unsure = EmotionOutput(posteriors={"neu": 0.4, "ang": 0.35, "sad": 0.25})
    outputs = {"u1": _out("ang", 0.9), "u2": unsure, "u3": EmotionOutput(dimensions={"x": 1.0})}
    lab = em.model_derived_labels(outputs, backend="emotion2vec", min_confidence=0.5)
    key = "model_emotion:emotion2vec"
    assert lab == {"u1": {key: "angry"}, "u2": {key: "uncertain"}}
    assert em.is_model_derived(key) and not em.is_model_derived("emotion")
