"""Cohort scores: the SEQ-style formula against hand-computed values."""

from __future__ import annotations

import pytest

from audits.asr.cohort import COHORT_LABEL, cohort_markdown, cohort_scores, robust_scores


def test_hand_computed_with_cap() -> None:
    # WER 0.1 0.2 0.3 0.4 1.0 -> x = -WER; median -0.3; |x - med| = .2 .1 0 .1 .7 -> MAD 0.1
    wer = {"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.4, "e": 1.0}
    s = robust_scores(wer, higher_is_better=False)
    scale = 1.4826 * 0.1
    assert s["c"] == pytest.approx(100.0)
    assert s["a"] == pytest.approx(100 + 15 * 0.2 / scale)  # 120.235...
    assert s["a"] == pytest.approx(120.2347, abs=1e-3)
    assert s["b"] == pytest.approx(100 + 15 * 0.1 / scale)  # 110.117...
    assert s["d"] == pytest.approx(100 - 15 * 0.1 / scale)  # 89.88...
    # e: z = -0.7 / 0.14826 = -4.72 -> capped at -4 -> 40
    assert s["e"] == pytest.approx(40.0)


def test_cap_on_the_high_side_and_orientation() -> None:
    # accuracy-like (higher is better): 0.5 0.5 0.6 0.5 3.0 -> median .5, MAD 0: not testable (never e = 100 like the others)
    assert set(robust_scores({"a": 0.5, "b": 0.5, "c": 0.6, "d": 0.5, "e": 3.0}).values()) == {None}
    # 1 2 3 4 100 -> median 3, deviations 2 1 0 1 97 -> MAD 1; z(100) = 97/1.4826 -> capped +4 -> 160
    s = robust_scores({"a": 1, "b": 2, "c": 3, "d": 4, "e": 100})
    assert s["e"] == pytest.approx(160.0)
    assert s["a"] == pytest.approx(100 - 15 * 2 / 1.4826)
    # flipping the orientation mirrors the scores around 100
    f = robust_scores({"a": 1, "b": 2, "c": 3, "d": 4, "e": 100}, higher_is_better=False)
    assert f["e"] == pytest.approx(40.0) and f["a"] == pytest.approx(100 + 15 * 2 / 1.4826)


def test_mad_zero_or_too_few_models_is_not_testable() -> None:
    """A MAD of 0 or fewer than three models leave no standing to score: every score None, with the reason."""
    from audits.asr.cohort import robust_scores_checked

    scores, why = robust_scores_checked({"a": 0.2, "b": 0.2, "c": 0.2}, higher_is_better=False)
    assert scores == {"a": None, "b": None, "c": None} and why is not None and "no spread" in why
    scores, why = robust_scores_checked({"only": 0.37}, higher_is_better=False)
    assert scores == {"only": None} and why is not None and "at least 3" in why
    # two models would always score 100 +- 10.1, whatever their WERs: too few items
    assert robust_scores({"a": 0.1, "b": 0.9}) == {"a": None, "b": None}
    # MAD can be 0 without all values equal: the majority share the median, and d (WER 0.9) would have scored 100
    scores, why = robust_scores_checked({"a": 0.1, "b": 0.1, "c": 0.1, "d": 0.9})
    assert scores == {"a": None, "b": None, "c": None, "d": None} and why is not None and "median absolute deviation is 0" in why


def test_missing_values_stay_missing_and_do_not_shift_the_median() -> None:
    s = robust_scores({"a": 0.1, "b": None, "c": 0.3, "d": float("nan"), "e": 0.2}, higher_is_better=False)
    assert s["b"] is None and s["d"] is None
    # median of .1 .2 .3 is .2, MAD .1
    assert s["e"] == pytest.approx(100.0)
    assert s["a"] == pytest.approx(100 + 15 * 0.1 / (1.4826 * 0.1))
    assert robust_scores({}) == {}


def _summary() -> dict:
    def m(wer: float | None, slices: dict[str, float]) -> dict:
        return {"wer": wer, "slices": {k: {"wer": v} for k, v in slices.items()}}

    return {
        "models": {
            "a": m(0.10, {"accent=x": 0.08, "accent=y": 0.12, "noise=on": 0.20}),
            "b": m(0.20, {"accent=x": 0.18, "accent=y": 0.30, "noise=on": 0.20}),
            "c": m(0.30, {"accent=x": 0.28, "accent=y": 0.40, "noise=on": 0.20}),
            "d": m(0.40, {"accent=x": 0.30}),  # no accent=y rows: no accent family score
            "dead": m(None, {}),
        }
    }


def test_cohort_from_summary_per_family() -> None:
    cs = cohort_scores(_summary())
    assert cs.models == ["a", "b", "c", "d"]  # the model without a WER is not in the cohort
    # overall: -WER .1 .2 .3 .4 -> median -.25, MAD .1
    assert cs.overall["a"] == pytest.approx(100 + 15 * 0.15 / 0.14826)
    assert cs.overall["d"] == pytest.approx(100 - 15 * 0.15 / 0.14826)
    # accent family macro WER: a .10, b .24, c .34, d missing -> median .24, MAD .10
    assert cs.family_wer["accent"] == pytest.approx({"a": 0.10, "b": 0.24, "c": 0.34, "d": None})
    assert cs.families["accent"]["d"] is None
    assert cs.families["accent"]["b"] == pytest.approx(100.0)
    assert cs.families["accent"]["a"] == pytest.approx(100 + 15 * 0.14 / 0.14826)
    assert cs.families["accent"]["c"] == pytest.approx(100 - 15 * 0.10 / 0.14826)
    # every model equal on noise -> MAD 0 -> not testable (d has no noise slice)
    assert cs.families["noise"] == {"a": None, "b": None, "c": None, "d": None}
    assert "no spread" in cs.not_testable["noise"] and "noise" in cs.to_dict()["not_testable"]
    assert any("d: no family score for 'accent'" in n for n in cs.notes)
    d = cs.to_dict()
    assert d["label"] == COHORT_LABEL and d["n_models"] == 4


def test_markdown_is_labelled_relative_to_the_cohort() -> None:
    md = cohort_markdown(_summary())
    assert "relative to the evaluated cohort" in md
    assert "| a | 115 | 114 | — |" in md  # overall 115.18, accent 114.16, noise not testable
    assert "- noise: not testable (no spread" in md
