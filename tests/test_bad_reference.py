"""Bad-reference acceptance probe: the published VoxPopuli-150 result, hand-built clips, bad inputs."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from audits.probes.bad_reference import (
    BadReferenceReport,
    BadRefSettings,
    BadSpan,
    accept_ref,
    find_bad_spans,
    find_spans_from_corrections,
    run_bad_reference_probe,
    span_cer,
)
from audits.probes.predictions import load_prediction_dir, load_prediction_file, run_from_prediction_dir, split_predictions
from engine.errors import ConfigError, ManifestError

PANEL = ["wav2vec2-base-960h", "whisper-tiny.en", "whisper-base.en", "whisper-small.en"]


FIXTURE = Path(__file__).resolve().parent / "fixtures" / "voxpopuli-150-predictions"


# ------------------------------------------------------------------------------------------
# the published result


def _published_rows() -> dict[str, tuple[float, float, float, int, int]]:
    """Parse the result table out of the fixture's README (the peer tool's published output)."""
    rows = {}
    pat = re.compile(r"^\s*(\S+)\s+([\d.]+)\s+\[([\d.]+), ([\d.]+)\]\s+(\d+)\s+(\d+)\s*$")
    for line in (FIXTURE / "README.md").read_text(encoding="utf-8").splitlines():
        m = pat.match(line)
        if m:
            rows[m[1]] = (float(m[2]), float(m[3]), float(m[4]), int(m[5]), int(m[6]))
    return rows


@pytest.fixture(scope="module")
def vox() -> tuple[dict[str, str], dict[str, dict[str, str]], BadReferenceReport]:
    if not (FIXTURE / "README.md").is_file():
        pytest.fail(f"fixture folder {FIXTURE} is missing from the repository")
    refs, hyps = split_predictions(load_prediction_dir(FIXTURE))
    report = run_bad_reference_probe(refs, {m: hyps[m] for m in PANEL}, hyps, BadRefSettings())
    return refs, hyps, report


def test_voxpopuli_reproduces_published_counts(vox) -> None:
    refs, hyps, report = vox
    assert len(refs) == 150 and sorted(hyps) == sorted([*PANEL, "distil-small.en"])
    assert len(report.spans) == 31
    published = _published_rows()
    assert set(published) == set(report.results)
    for model, (rate, lo, hi, n_ref, n_elig) in published.items():
        r = report.results[model]
        assert (r.n_ref, r.n_eligible) == (n_ref, n_elig), model
        assert r.rate is not None and round(r.rate, 3) == rate
        assert r.ci95 is not None
        assert (round(r.ci95[0], 3), round(r.ci95[1], 3)) == (lo, hi), model
    assert report.results["wav2vec2-base-960h"].n_eligible == 27


def test_voxpopuli_example_spans_present(vox) -> None:
    _, _, report = vox
    found = {(s.kind, s.position, s.text) for s in report.spans}
    for example in [
        ("delete", "start", "madam president"),
        ("insert", "start", "thank you"),
        ("delete", "start", "mister"),
        ("delete", "end", "eu neighborhood"),
    ]:
        assert example in found
    for s in report.spans:
        assert s.position in ("start", "end")  # boundary-only defaults
        assert s.n_panel_eligible >= 3 and s.n_panel_agree >= 3
        if s.kind == "delete":
            assert s.median_cer is not None and s.median_cer >= 0.30


def test_voxpopuli_table_matches_readme_layout(vox) -> None:
    _, _, report = vox
    readme = (FIXTURE / "README.md").read_text(encoding="utf-8")
    for line in report.format_table().splitlines():
        if line.strip():
            assert line.rstrip() in readme, line


def test_run_from_prediction_dir(vox) -> None:
    _, _, report = vox
    again = run_from_prediction_dir(FIXTURE, PANEL, models=["distil-small.en"])
    assert again.spans == report.spans and list(again.results) == ["distil-small.en"]
    with pytest.raises(ConfigError, match="no prediction file.*available: distil-small.en"):
        run_from_prediction_dir(FIXTURE, [*PANEL[:3], "whisper-large-v3"])


def test_voxpopuli_summary_dict_is_json(vox) -> None:
    _, _, report = vox
    d = json.loads(json.dumps(report.to_dict()))
    assert d["n_spans"] == 31 and len(d["spans"]) == 31
    assert d["whisper-small.en"] == {
        "rate": 0.0,
        "ci95": list(report.results["whisper-small.en"].ci95),  # type: ignore[arg-type]
        "n_ref": 0,
        "n_eligible": 31,
    }
    assert d["panel"] == PANEL
    assert d["normalizer"]["name"] == "whisper-english"
    # every span carries every model's verdict; wav2vec2 is ineligible on 4 of them
    verdicts = [s["verdicts"]["wav2vec2-base-960h"] for s in d["spans"]]
    assert verdicts.count("ineligible") == 4 and verdicts.count("ref") == 0


def test_voxpopuli_levenshtein_aligner_differs(vox) -> None:
    """The aligner is part of the method: minimum-edit alignment finds a different span set."""
    refs, hyps, report = vox
    other = find_bad_spans(refs, {m: hyps[m] for m in PANEL}, BadRefSettings(aligner="levenshtein"))
    assert len(other) != len(report.spans)
    # spelled-number canonicalization (text2num) does not change the published result
    plain = find_bad_spans(refs, {m: hyps[m] for m in PANEL}, BadRefSettings(canonicalize_numbers=False))
    assert [s.describe() for s in plain] == [s.describe() for s in report.spans]


# ------------------------------------------------------------------------------------------
# hand-built clips

SPOKEN = "the report is adopted today by a wide margin"


def _panel(*texts: str, clip: str = "c1") -> dict[str, dict[str, str]]:
    return {f"p{i}": {clip: t} for i, t in enumerate(texts)}


def test_planted_wrong_reference_words_are_found_and_scored() -> None:
    refs = {"c1": "Madam President, the report is adopted today by a wide margin."}
    panel = _panel(SPOKEN, SPOKEN, SPOKEN, SPOKEN)
    spans = find_bad_spans(refs, panel)
    assert len(spans) == 1
    s = spans[0]
    assert (s.kind, s.position, s.ref_span, s.replacement) == ("delete", "start", "madam president", "")
    assert s.token_indices == (0, 1) and s.n_panel_agree == 4 and s.n_panel_eligible == 4

    follower = accept_ref(spans, {"c1": "Madam President, the report is adopted today by a wide margin"}, refs)
    assert (follower.n_ref, follower.n_eligible, follower.rate) == (1, 1, 1.0)
    listener = accept_ref(spans, {"c1": SPOKEN}, refs)
    assert (listener.n_ref, listener.n_eligible, listener.rate) == (0, 1, 0.0)
    assert listener.decisions[0].verdict == "consensus"


def test_model_reproducing_reference_on_every_span_scores_one() -> None:
    refs = {
        "a": "madam president the report is adopted today by a wide margin",
        "b": "i therefore support the proposal of the commission",
        "c": "mister the council has not yet decided on the budget",
    }
    heard = {
        "a": SPOKEN,
        "b": "i therefore support the proposal of the commission thank you",
        "c": "the council has not yet decided on the budget",
    }
    panel = {f"p{i}": dict(heard) for i in range(4)}
    models = {"memorizer": dict(refs), "honest": dict(heard)}
    report = run_bad_reference_probe(refs, panel, models)
    assert [s.describe() for s in report.spans] == [
        "delete at start 'madam president'",
        "insert at end 'thank you'",
        "delete at start 'mister'",
    ]
    mem, hon = report.results["memorizer"], report.results["honest"]
    assert (mem.rate, mem.n_ref, mem.n_eligible) == (1.0, 3, 3)
    assert (hon.rate, hon.n_ref, hon.n_eligible) == (0.0, 0, 3)
    assert mem.ci95 is not None and mem.ci95[1] == 1.0 and 0.4 < mem.ci95[0] < 0.5
    assert "memorizer" in report.format_table().splitlines()[3]  # highest accept-ref first


def test_insertions_only_at_reference_boundaries() -> None:
    refs = {"c1": "we support the report of the committee on budgets"}
    heard = "thank you we support the report really of the committee on budgets thank you"
    panel = _panel(heard, heard, heard, heard)
    spans = find_bad_spans(refs, panel)
    assert sorted((s.kind, s.position, s.replacement, s.token_indices) for s in spans) == [
        ("insert", "end", "thank you", (9,)),
        ("insert", "start", "thank you", (0,)),
    ]
    everywhere = find_bad_spans(refs, panel, BadRefSettings(boundary_insertions_only=False))
    middle = [s for s in everywhere if s.position == "middle"]
    assert [(s.replacement, s.token_indices) for s in middle] == [("really", (4,))]


def test_interior_deletions_only_when_asked() -> None:
    refs = {"c1": "the report on fisheries policy is adopted today by parliament"}
    heard = "the report on policy is adopted today by parliament"
    panel = _panel(heard, heard, heard, heard)
    assert find_bad_spans(refs, panel) == []
    spans = find_bad_spans(refs, panel, BadRefSettings(boundary_deletions_only=False))
    assert [(s.position, s.ref_span) for s in spans] == [("middle", "fisheries")]


def test_start_insertion_takes_words_nearest_the_reference() -> None:
    # one verbose member says more; the consensus is the words everybody put against the reference
    refs = {"c1": "we support the report of the committee on budgets"}
    base = "we support the report of the committee on budgets"
    panel = _panel(f"thank you {base}", f"thank you {base}", f"yes indeed thank you {base}", f"thank you {base}")
    spans = find_bad_spans(refs, panel)
    assert [(s.replacement, s.n_panel_agree) for s in spans] == [("thank you", 4)]


def test_no_span_without_supermajority() -> None:
    refs = {"c1": "madam president the report is adopted today"}
    spoken = "the report is adopted today"
    ref_text = refs["c1"]
    assert find_bad_spans(refs, _panel(spoken, spoken, ref_text, ref_text)) == []
    # 3 of 4 is below ceil(0.8 * 4) = 4
    assert find_bad_spans(refs, _panel(spoken, spoken, spoken, ref_text)) == []
    # 4 of 5 meets ceil(0.8 * 5) = 4
    assert len(find_bad_spans(refs, _panel(spoken, spoken, spoken, spoken, ref_text))) == 1


def test_agree_threshold_keeps_at_least_min_agree() -> None:
    s = BadRefSettings()
    assert [s.agree_threshold(n) for n in (3, 4, 5, 10)] == [3, 4, 4, 8]
    loose = BadRefSettings(supermajority=0.2, min_eligible_panel=1)
    assert loose.agree_threshold(3) == 2  # ceil(0.6) = 1, but never fewer than min_agree
    refs = {"c1": "madam president the report is adopted today"}
    spoken = "the report is adopted today"
    ref_text = refs["c1"]
    assert find_bad_spans(refs, _panel(spoken, ref_text, ref_text), loose) == []
    assert len(find_bad_spans(refs, _panel(spoken, spoken, ref_text), loose)) == 1


def test_normalization_artifact_is_dropped() -> None:
    refs = {"c1": "everyone agrees that the report is adopted today"}
    heard = "every one agrees that the report is adopted today"
    assert span_cer("everyone", "every one") == 0.0
    assert find_bad_spans(refs, _panel(heard, heard, heard, heard)) == []
    assert len(find_bad_spans(refs, _panel(heard, heard, heard, heard), BadRefSettings(min_deletion_cer=0.0))) == 1


def test_incompetent_outputs_are_ineligible() -> None:
    refs = {"c1": "madam president the report is adopted today"}
    spoken = "the report is adopted today"
    spans = find_bad_spans(refs, _panel(spoken, spoken, spoken, spoken))
    assert len(spans) == 1
    silent = accept_ref(spans, {"c1": ""}, refs, model="silent")
    assert silent.decisions[0].verdict == "ineligible"
    assert (silent.n_eligible, silent.rate, silent.ci95) == (0, None, None)
    report = run_bad_reference_probe(refs, _panel(spoken, spoken, spoken, spoken), {"silent": {"c1": ""}})
    assert "n/a" in report.format_table()
    assert report.results["silent"].to_dict()["rate"] is None
    assert json.loads(json.dumps(report.to_dict()))["silent"]["rate"] is None


def test_clip_skipped_when_too_few_panel_members_are_eligible() -> None:
    refs = {"c1": "madam president the report is adopted today"}
    spoken = "the report is adopted today"
    assert find_bad_spans(refs, _panel(spoken, spoken, "", "")) == []
    # eligible panel of 3 (one empty output): threshold is 3 and all three agree
    assert len(find_bad_spans(refs, _panel(spoken, spoken, spoken, ""))) == 1


def test_span_cer_is_whitespace_blind_coverage() -> None:
    assert span_cer("madam president", "") == 1.0
    assert span_cer("", "") == 0.0
    assert math.isclose(span_cer("abcd", "abxy"), 0.5)


# ------------------------------------------------------------------------------------------
# human-verified corrections


def test_spans_from_corrections() -> None:
    refs = {
        "a": "Madam President, the report is adopted today.",
        "b": "I therefore support the proposal.",
        "c": "The council has decided.",
    }
    corrected = {
        "a": "The report is adopted today.",
        "b": "I therefore support the proposal. Thank you.",
        "c": "The council has decided.",  # reviewed, nothing wrong
    }
    spans = find_spans_from_corrections(refs, corrected)
    assert [(s.clip_id, s.kind, s.position, s.text, s.source) for s in spans] == [
        ("a", "delete", "start", "madam president", "corrections"),
        ("b", "insert", "end", "thank you", "corrections"),
    ]
    models = {"memorizer": dict(refs), "honest": dict(corrected)}
    report = run_bad_reference_probe(refs, {}, models, corrections=corrected)
    assert report.source == "corrections" and len(report.spans) == 2
    assert report.results["memorizer"].rate == 1.0 and report.results["honest"].rate == 0.0


def test_corrections_confirm_panel_spans() -> None:
    refs = {
        "a": "madam president the report is adopted today by a wide margin",
        "b": "mister the council has not yet decided on the budget",
    }
    heard = {"a": SPOKEN, "b": "the council has not yet decided on the budget"}
    panel = {f"p{i}": dict(heard) for i in range(4)}
    # the reviewer agrees on clip a and finds clip b's reference right after all
    corrected = {"a": SPOKEN, "b": refs["b"]}
    report = run_bad_reference_probe(refs, panel, {"m": dict(refs)}, corrections=corrected, corrections_mode="confirm")
    assert report.source == "panel+corrections"
    assert [(s.clip_id, s.source) for s in report.spans] == [("a", "panel+corrections")]


def test_corrections_for_unknown_clip_raise() -> None:
    with pytest.raises(ConfigError, match="no reference"):
        find_spans_from_corrections({"a": "x"}, {"zzz": "y"})


# ------------------------------------------------------------------------------------------
# bad inputs


def test_empty_panel_raises() -> None:
    with pytest.raises(ConfigError, match="panel is empty"):
        find_bad_spans({"c1": "a b c"}, {})
    with pytest.raises(ConfigError, match="panel is empty"):
        run_bad_reference_probe({"c1": "a b c"}, {}, {"m": {"c1": "a b c"}})


def test_panel_below_minimum_raises() -> None:
    with pytest.raises(ConfigError, match="min_eligible_panel is 3"):
        find_bad_spans({"c1": "a b c"}, _panel("a b c", "a b c"))


def test_missing_clips_raise() -> None:
    refs = {"c1": "madam president the report", "c2": "the report is adopted"}
    panel = {f"p{i}": {"c1": "the report", "c2": "the report is adopted"} for i in range(3)}
    panel["p2"] = {"c1": "the report"}
    with pytest.raises(ConfigError, match="panel model 'p2' has no hypothesis for 1 of 2 clips \\(c2\\)"):
        find_bad_spans(refs, panel)
    panel["p2"] = dict(panel["p0"])
    with pytest.raises(ConfigError, match="model 'm' has no hypothesis"):
        run_bad_reference_probe(refs, panel, {"m": {"c2": "x"}})
    spans = find_bad_spans(refs, panel)
    with pytest.raises(ConfigError, match="model 'm' has no hypothesis"):
        accept_ref(spans, {"c2": "x"}, refs, model="m")


def test_bad_settings_and_names_raise() -> None:
    with pytest.raises(ConfigError, match="supermajority"):
        BadRefSettings(supermajority=0.0)
    with pytest.raises(ConfigError, match="aligner"):
        BadRefSettings(aligner="dtw")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown normalizer"):
        find_bad_spans({"c1": "a"}, _panel("a", "a", "a"), BadRefSettings(normalizer="klingon"))
    with pytest.raises(ConfigError, match="collide"):
        run_bad_reference_probe({"c1": "a"}, _panel("a", "a", "a"), {"spans": {"c1": "a"}})


def test_prediction_file_errors(tmp_path: Path) -> None:
    good = {"audio_filepath": "c1", "text": "Hello there.", "pred_text": " hello there"}
    (tmp_path / "m1.jsonl").write_text(json.dumps(good) + "\n\n", encoding="utf-8")
    (tmp_path / "m2.jsonl").write_text(
        json.dumps(good) + "\n" + json.dumps({"audio_filepath": "c2", "text": "x", "pred_text": None}) + "\n",
        encoding="utf-8",
    )
    preds = load_prediction_dir(tmp_path)
    assert preds == {"m1": {"c1": ("Hello there.", " hello there")}, "m2": {"c1": ("Hello there.", " hello there")}}

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(good) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(ManifestError, match="line 2"):
        load_prediction_file(bad)
    bad.write_text(json.dumps({"audio_filepath": "c1", "pred_text": "x"}) + "\n", encoding="utf-8")
    with pytest.raises(ManifestError, match="field 'text'"):
        load_prediction_file(bad)
    with pytest.raises(ConfigError, match="no files matching"):
        load_prediction_dir(tmp_path, pattern="*.csv")

    with pytest.raises(ConfigError, match="different references"):
        split_predictions({"a": {"c1": ("one", "x")}, "b": {"c1": ("two", "x")}})


def test_bad_span_is_frozen() -> None:
    s = BadSpan("c", "delete", "start", "x", "", (0,), 4, 4)
    with pytest.raises(AttributeError):
        s.kind = "insert"  # type: ignore[misc]
