"""Reliability class 12: degenerate statistics declared significant.

Every interval and test goes through one rule (``audits.asr.stats.check_testable``): a group with
fewer than two speakers (clips, when speakers are unknown), groups whose WER is the same in every
speaker, or too few models make the interval ``null`` with ``not_testable`` saying why, and the
test has no p-value: never a zero-width interval that "excludes zero", never p_holm = 0.002. Each
case is built so its figures can be computed by hand, and the point estimates are checked
against that hand computation; the reports print "not testable (reason)".
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audits.asr.cohort import cohort_scores
from audits.asr.paired import compare_models, paired_difference
from audits.asr.scoring import ScoringOptions, score_table, summarize_models
from audits.asr.stats import BlockGroup, Interval, NotTestable, check_testable, percentile_interval
from audits.profiles.ladder import LadderSpec, ladder_for_model
from audits.profiles.stats import paired_gap_tests, rank_stability
from audits.reports.markdown import render_markdown
from normalizers import IdentityNormalizer
from tests.reliability_env import Env, audit, noise, speech_clips, write_dataset

REF = "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9"  # ten words: e errors on a clip = WER e / 10


def _raw(model: str, utt: str, errors: int, speaker: str | None, **labels: str) -> dict:
    hyp = " ".join(["x"] * errors + REF.split()[errors:])
    return {
        "utt_id": utt,
        "model": model,
        "ref_raw": REF,
        "hyp_raw": hyp,
        "duration_s": 1.0,
        "infer_s": 0.1,
        "error": None,
        "speaker": speaker,
        "shard": "s0",
        "parent_id": None,
        **labels,
    }


def _scored(rows: list[dict]) -> pd.DataFrame:
    return score_table(pd.DataFrame(rows), IdentityNormalizer()).frame


def _summary(rows: list[dict], n_boot: int = 200) -> dict:
    return summarize_models(score_table(pd.DataFrame(rows), IdentityNormalizer()), ScoringOptions(n_boot=n_boot))


# ---- the rule itself, by hand --------------------------------------------------------------


def test_the_rule_by_hand() -> None:
    """Per-block sums by hand: one block, no words, equal ratios everywhere, and a group that varies."""
    one = BlockGroup("background=clean", np.array([3.0]), np.array([10.0]))
    assert check_testable([one]) == NotTestable("only 1 speaker in background=clean")
    empty = BlockGroup("background=noise", np.array([0.0, 0.0]), np.array([0.0, 0.0]))
    assert check_testable([empty]) == NotTestable("no reference words in background=noise")
    flat_a = BlockGroup("a", np.array([2.0, 4.0]), np.array([10.0, 20.0]))  # 20 % and 20 %
    flat_b = BlockGroup("b", np.array([0.0, 0.0, 0.0]), np.array([10.0, 10.0, 5.0]))  # 0 % everywhere
    verdict = check_testable([flat_a, flat_b])
    assert verdict is not None and verdict.reason.startswith("no variance") and "20.0%" in verdict.reason and "0.0%" in verdict.reason
    varies = BlockGroup("b", np.array([0.0, 1.0]), np.array([10.0, 10.0]))
    assert check_testable([flat_a, varies]) is None  # one side varies: the difference has a spread
    # the last guard: replicates that all agree are never an interval
    assert isinstance(percentile_interval(np.full(100, 0.139), 0.05, "gap"), NotTestable)
    assert percentile_interval(np.linspace(0, 1, 101), 0.05, "gap") == Interval(0.025, 0.975)


# ---- gaps -------------------------------------------------------------------------------------


def test_one_clip_per_side_gap_is_not_significant() -> None:
    """The README tour's case: one clip per side. Gap by hand: 3/10 - 1/10 = 20 points; nothing to resample."""
    rows = [_raw("m", "u0", 1, None, background="clean"), _raw("m", "u1", 3, None, background="noise-5db")]
    s = _summary(rows)["m"]
    (gap,) = s["gaps"]
    assert gap["gap"] == pytest.approx(0.3 - 0.1) and gap["wer_a"] == pytest.approx(0.3) and gap["wer_b"] == pytest.approx(0.1)
    assert gap["ci95"] is None and gap["p_value"] is None and gap["p_holm"] is None
    assert gap["significant"] is None and gap["excludes_zero"] is None
    assert gap["not_testable"] == "only 1 clip in background=noise-5db"
    md = render_markdown({"models": {"m": s}})
    assert "not testable (only 1 clip in background=noise-5db" in md
    assert "[20.0, 20.0]" not in md and "**yes**" not in md
    json.dumps(s, allow_nan=False)  # summary.json holds it as it is: null and the reason


def test_one_speaker_per_side_gap_is_not_testable() -> None:
    """Three clips of one speaker each side (WERs 10/20/30 % vs 0/10/0 %): one block per side."""
    rows = [_raw("m", f"n{i}", e, "spk-noise", background="noise") for i, e in enumerate((1, 2, 3))]
    rows += [_raw("m", f"c{i}", e, "spk-clean", background="clean") for i, e in enumerate((0, 1, 0))]
    s = _summary(rows)["m"]
    (gap,) = s["gaps"]
    assert gap["gap"] == pytest.approx(6 / 30 - 1 / 30)
    assert gap["ci95"] is None and gap["p_value"] is None and gap["significant"] is None
    assert gap["not_testable"].startswith("only 1 speaker in background=noise")
    # each slice holds one speaker too: no interval (no longer an utterance bootstrap that ignores the speaker)
    for key in ("background=noise", "background=clean"):
        assert s["slices"][key]["ci95"] is None and s["slices"][key]["not_testable"].startswith("only 1 speaker in " + key)
    assert s["ci95"] is not None  # the model overall has two speakers whose WERs differ


def test_gap_without_variance_is_not_testable() -> None:
    """Four speakers a side; every noise speaker 2/10 wrong, every clean speaker 0: gap 20 points by hand, spread 0."""
    rows = [_raw("m", f"n{i}", 2, f"s{i}", background="noise") for i in range(4)]
    rows += [_raw("m", f"c{i}", 0, f"t{i}", background="clean") for i in range(4)]
    (gap,) = _summary(rows)["m"]["gaps"]
    assert gap["gap"] == pytest.approx(0.2)
    assert gap["ci95"] is None and gap["p_value"] is None and gap["significant"] is None
    assert gap["not_testable"] == ("no variance: every speaker of background=noise, background=clean has the same WER (0.0%, 20.0%)")


def test_a_testable_gap_keeps_its_interval_and_holm_family() -> None:
    """Beside an untestable gap, a testable one keeps its interval; the Holm family holds only testable gaps."""
    rows = []
    for model, shift in (("good", 0), ("flat", None)):
        for i in range(6):
            e_noise = (2 + i % 3) if shift is not None else 0
            rows.append(_raw(model, f"n{i}", e_noise, f"s{i}", background="noise"))
            rows.append(_raw(model, f"c{i}", 0 if shift is None else i % 2, f"t{i}", background="clean"))
    out = _summary(rows, n_boot=300)
    good, flat = out["good"]["gaps"][0], out["flat"]["gaps"][0]
    assert flat["not_testable"].startswith("no variance") and flat["p_holm"] is None
    lo, hi = good["ci95"]
    assert lo < good["gap"] < hi and lo < hi
    assert good["p_holm"] == pytest.approx(good["p_value"])  # a family of one


# ---- paired model comparisons -----------------------------------------------------------------


def test_two_models_on_one_clip_are_not_ranked() -> None:
    """One shared clip: a makes 0 errors, b 5. diff = -0.5 by hand; one block, so no model is better."""
    comp = compare_models(_scored([_raw("a", "u0", 0, "s0"), _raw("b", "u0", 5, "s0")]), n_boot=200)
    (p,) = comp["pairs"]
    assert p["diff"] == pytest.approx(-0.5)
    assert p["ci95"] is None and p["p_value"] is None and p["p_holm"] is None and p["better"] is None
    assert p["not_testable"].startswith("only 1 ")
    assert comp["tiers"] == [["a", "b"]]
    md = render_markdown({"models": {}, "comparisons": comp})
    assert "not testable (only 1 " in md and "a is better than b" not in md


def test_identical_models_are_not_testable_and_leave_the_holm_family() -> None:
    """a and its twin make the same errors on every clip (difference 0 in every speaker): not testable,
    and the two testable pairs against c form a Holm family of two."""
    errs = [1, 2, 0, 3, 1, 2, 2, 0]
    rows = []
    for i, e in enumerate(errs):
        rows += [
            _raw("a", f"u{i}", e, f"s{i % 4}"),
            _raw("a-twin", f"u{i}", e, f"s{i % 4}"),
            _raw("c", f"u{i}", e + 2 + i % 3, f"s{i % 4}"),
        ]
    comp = compare_models(_scored(rows), n_boot=300)
    pairs = {(p["a"], p["b"]): p for p in comp["pairs"]}
    twin = pairs[("a", "a-twin")]
    assert twin["diff"] == 0 and twin["ci95"] is None and twin["p_value"] is None
    assert twin["not_testable"].startswith("no variance") and "WER difference" in twin["not_testable"]
    ac, tc = pairs[("a", "c")], pairs[("a-twin", "c")]
    assert ac["p_value"] == tc["p_value"] and ac["p_holm"] == pytest.approx(min(1.0, 2 * ac["p_value"]))
    # the definition function says the same
    single = paired_difference(np.array([0.0]), np.array([5.0]), np.array([10.0]), ["s0"])
    assert single["ci95"] is None and single["p_value"] is None and single["diff"] == pytest.approx(-0.5)


# ---- the profiles' statistics -----------------------------------------------------------------


def test_paired_gap_test_with_one_speaker_on_a_side() -> None:
    """clean: one speaker; noise: three. Is A's gap smaller than B's? Not testable, no p-value, no winner."""
    rows = []
    for model, k in (("a", 1), ("b", 3)):
        rows += [_raw(model, f"c{i}", i % 2, "only", background="clean") for i in range(3)]
        rows += [_raw(model, f"n{i}", k + i % 2, f"s{i}", background="noise") for i in range(3)]
    out = paired_gap_tests(_scored(rows), [("background", "noise", "clean")], n_boot=200, seed=0, alpha=0.05)
    (e,) = out["pairs"]
    # gap(a) - gap(b) on the shared clips, by hand: a noise 4/30, b noise 10/30; clean the same for both
    assert e["diff"] == pytest.approx(4 / 30 - 10 / 30)
    assert e["ci95"] is None and e["p_value"] is None and e["p_holm"] is None and e["smaller_gap"] is None
    assert e["not_testable"].startswith("only 1 speaker in background=clean")


def test_rank_stability_in_a_one_speaker_condition() -> None:
    """Overall a < b < c; in the one-speaker condition a < c < b: tau = (2 - 1) / 3 by hand, no interval."""
    rows = []
    for model, overall_err, cond_err in (("a", 1, 1), ("b", 2, 6), ("c", 4, 3)):
        rows += [_raw(model, f"o{i}", overall_err + i % 2, f"s{i}", cond="other") for i in range(4)]
        rows += [_raw(model, f"k{i}", cond_err, "lonely", cond="rare") for i in range(2)]
    out = rank_stability(_scored(rows), [("cond", "rare")], n_boot=200, seed=0, alpha=0.05)
    e = out["conditions"]["cond=rare"]
    assert e["tau"] == pytest.approx(1 / 3)
    assert e["ci95"] is None and e["not_testable"].startswith("only 1 speaker in cond=rare")


def test_ladder_level_with_one_speaker() -> None:
    """A level whose clips come from one speaker: slope by hand, but neither it nor the breaking point gets an interval."""
    rows = []
    for s in range(4):
        rows.append(
            {
                "model": "m",
                "utt_id": f"c{s}",
                "speaker": f"s{s}",
                "ok": True,
                "speech_free": False,
                "n_words": 10,
                "word_errors": s % 2,
                "bg": "clean",
            }
        )
        rows.append(
            {
                "model": "m",
                "utt_id": f"a{s}",
                "speaker": f"s{s}",
                "ok": True,
                "speech_free": False,
                "n_words": 10,
                "word_errors": 2 + s % 2,
                "bg": "n20",
            }
        )
    rows += [
        {"model": "m", "utt_id": f"b{k}", "speaker": "s0", "ok": True, "speech_free": False, "n_words": 10, "word_errors": 6, "bg": "n10"}
        for k in range(3)
    ]
    spec = LadderSpec("bg", "clean", (("n20", 20.0), ("n10", 10.0)), "dB SNR")
    r = ladder_for_model(pd.DataFrame(rows), spec, margin=0.05, n_boot=200, seed=0, alpha=0.05)
    assert r["slope"] == pytest.approx((0.25 - 0.6) / (20 - 10))  # WER 25 % at 20 dB, 60 % at 10 dB
    assert r["slope_ci95"] is None and r["slope_not_testable"].startswith("only 1 speaker in bg=n10")
    assert r["breaking_ci95"] is None and r["breaking_not_testable"].startswith("only 1 speaker in bg=n10")
    assert r["levels"][1]["ci95"] is None and r["levels"][1]["not_testable"].startswith("only 1 speaker in bg=n10")


# ---- cohort scores ----------------------------------------------------------------------------


def test_cohort_scores_with_no_spread() -> None:
    """WER 10, 10, 10, 90 %: median 10, MAD 0. The 90 % model must not score 100 like the others."""
    summary = {"models": {m: {"wer": w, "slices": {}} for m, w in (("a", 0.1), ("b", 0.1), ("c", 0.1), ("d", 0.9))}}
    cs = cohort_scores(summary)
    assert cs.overall == {"a": None, "b": None, "c": None, "d": None}
    assert "median absolute deviation is 0" in cs.not_testable["overall"]


# ---- end to end: a run's summary.json and `audit report` --------------------------------------


def test_run_and_report_say_not_testable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README tour in small: one clip per background. summary.json holds null and the reason; `audit report`
    prints "not testable (...)", never a zero-width interval or a significant gap."""
    env = Env(tmp_path, monkeypatch)
    clips = [{"audio": noise(1.0, i), "text": "a b c d", "background": bg, "speaker": f"v{i}"} for i, bg in enumerate(("clean", "music"))]
    data = write_dataset(tmp_path / "data", clips)
    out = tmp_path / "run"
    res = audit("run", env.recipe(data), "--out", out)
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    (gap,) = summary["models"]["sim-a"]["gaps"]
    assert gap["ci95"] is None and gap["significant"] is None and gap["p_holm"] is None
    assert gap["not_testable"].startswith("only 1 speaker in background=music")
    res = audit("report", out)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "not testable (only 1 speaker in background=music" in text
    assert "significant after Holm" not in text or "0 stay significant" in text or "0 remain significant" in text


def test_a_one_speaker_track_has_no_interval_and_neither_has_the_average(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Track b's clips all come from one speaker: its WER has no interval, and the Average WER cannot borrow its zero spread."""
    env = Env(tmp_path, monkeypatch)
    a = write_dataset(tmp_path / "a", speech_clips(4, 0))  # two speakers
    b = write_dataset(tmp_path / "b", [{**c, "speaker": "solo"} for c in speech_clips(3, 10)])
    runs = {}
    for name, data in (("a", a), ("b", b)):
        runs[name] = tmp_path / f"run-{name}"
        res = audit("run", env.recipe(data, name=name), "--out", runs[name])
        assert res.exit_code == 0, res.output
    out = tmp_path / "tracks"
    res = audit("tracks", f"a={runs['a']}", f"b={runs['b']}", "--out", out, "--n-boot", "50")
    assert res.exit_code == 0, res.output
    t = json.loads((out / "tracks.json").read_text())["models"]["sim-a"]
    own_b = json.loads((runs["b"] / "summary.json").read_text())["models"]["sim-a"]
    assert t["tracks"]["b"]["wer"] == own_b["wer"]  # the point estimate is the run's own WER
    assert t["tracks"]["b"]["ci95"] is None and t["tracks"]["b"]["not_testable"] == "only 1 speaker in track 'b'"
    # (the simulated model misses every word, so track a has no variance either: the average names the first reason)
    assert t["average_ci95"] is None and t["average_not_testable"] in {t["tracks"][n].get("not_testable") for n in ("a", "b")}
    assert "not testable (only 1 speaker in track 'b')" in (out / "tracks.md").read_text()
