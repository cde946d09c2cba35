"""The ASR section's typed result: frozen records that write summary.json's ``models`` and ``comparisons`` unchanged."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pandas as pd
import pytest

from audits.asr.results import AsrResult, GapFigures, ModelFigures, SliceFigures
from audits.asr.scoring import ScoringOptions
from audits.asr.section import ASR_SECTION, AsrSection
from audits.asr.summary import build_summary
from audits.recipes import ScoringConfig
from normalizers import EnglishNormalizer


def _rows(model: str, hyps: list[str]) -> list[dict[str, object]]:
    refs = ["the cat sat", "a dog ran home", "hello there", "", "one two three four"]
    out = []
    for i, (r, h) in enumerate(zip(refs, hyps)):
        out.append(
            {
                "utt_id": f"u{i}",
                "model": model,
                "ref_raw": r,
                "hyp_raw": h,
                "duration_s": 1.0 + i,
                "infer_s": 0.1,
                "error": None,
                "speaker": f"s{i % 3}",
                "shard": "s0",
                "parent_id": None,
                "content": "speech-free" if r == "" else "speech",
                "accent_group": "native" if i % 2 else "non-native",
            }
        )
    return out


def _table() -> pd.DataFrame:
    return pd.DataFrame(
        _rows("m1", ["the cat sat", "a dog ran", "hello there", "", "one two tree four"])
        + _rows("m2", ["the cat sat", "a dog ran home", "hello", "thank you", "one two three four"])
    )


FACTS: dict[str, dict[str, Any]] = {
    "m1": {"status": "loaded", "backend": "synthetic", "batch_size": 4, "info": {"device": "cpu", "dtype": "float32"}, "tags": ["t"]},
    "m2": {"status": "loaded", "backend": "synthetic", "batch_size": 4, "info": {"device": "cpu", "dtype": "float32"}},
    "m3": {"status": "failed-to-load", "error": "no weights", "backend": "synthetic"},
}


def _summary() -> dict[str, Any]:
    opts = ScoringOptions(n_boot=50, seed=0)
    summary, _ = build_summary(_table(), EnglishNormalizer(), {"name": "t"}, {"n_utts": 5}, FACTS, {}, opts)
    return json.loads(json.dumps(summary))


def test_round_trip_is_the_same_json_text() -> None:
    summary = _summary()
    asr = AsrResult.from_json(summary)
    assert json.dumps(asr.to_json()) == json.dumps({"models": summary["models"], "comparisons": summary["comparisons"]})
    # the records are typed: figures as attributes, nested records for slices, gaps and hallucinations
    m1 = asr.model("m1")
    assert isinstance(m1, ModelFigures) and m1.wer == summary["models"]["m1"]["wer"] and m1.n_speakers == 3
    assert isinstance(m1.slices["accent_group=native"], SliceFigures)
    assert all(isinstance(g, GapFigures) for g in m1.gaps) and m1.gaps[0].b == "native"
    assert m1.hallucination is not None and m1.hallucination.n_speech_free == 1
    assert asr.model("m2").hallucination.n_hallucinated == 1  # type: ignore[union-attr]
    assert asr.model("m3").wer is None and asr.model("m3").n_failed == 5 and asr.model("m3").error == "no weights"
    assert asr.comparisons is not None and {(p.a, p.b) for p in asr.comparisons.pairs} == {("m1", "m2")}
    with pytest.raises(KeyError, match="m1, m2, m3"):
        asr.model("m4")


def test_records_are_frozen_and_keep_unknown_keys_in_place() -> None:
    summary = _summary()
    entry = dict(summary["models"]["m1"])
    entry = {"future_figure": 1, **entry}
    rec = ModelFigures.from_json(entry)
    assert rec.extra["future_figure"] == 1 and list(rec.to_json()) == list(entry)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.wer = 0.0  # type: ignore[misc]
    changed = dataclasses.replace(rec, error="late")  # a field set afterwards is written after the keys as read
    assert list(changed.to_json())[-1] == "error"
    built = GapFigures(label="accent", a="x", b="y", gap=0.1)  # built in code: declared order, optional Nones left out
    assert list(built.to_json()) == ["label", "a", "b", "gap", "ci95", "excludes_zero", "p_value", "n_a", "n_b", "p_holm", "significant"]


def test_section_parses_scoring_and_scores_as_build_summary() -> None:
    assert isinstance(ASR_SECTION, AsrSection) and ASR_SECTION.order < 100
    config = ASR_SECTION.parse({"n_boot": 50, "gaps": [["accent_group", "non-native", "native"]]}, "r.yaml")
    assert config == ScoringConfig(n_boot=50, gaps=(("accent_group", "non-native", "native"),))
    with pytest.raises(Exception, match=r"r.yaml: scoring"):
        ASR_SECTION.parse({"n_boot": 0}, "r.yaml")
    asr = ASR_SECTION.score(ScoringConfig(n_boot=50), _table(), EnglishNormalizer(), FACTS, 5)
    assert asr.scored is not None and json.dumps(asr.to_json()) == json.dumps(AsrResult.from_json(_summary()).to_json())


def test_exact_match_rate_in_summary_and_report_table() -> None:
    from audits.reports.markdown import model_overview

    summary = _summary()
    # m1: u0 and u2 exact, u1 and u4 with errors, u3 speech-free (left out); m2: u0, u1 and u4 exact
    assert summary["models"]["m1"]["exact_match_rate"] == 0.5
    assert summary["models"]["m2"]["exact_match_rate"] == 0.75
    slices = summary["models"]["m1"]["slices"]
    assert slices["accent_group=native"]["exact_match_rate"] == 0.0  # u1 (u3 is speech-free)
    assert slices["accent_group=non-native"]["exact_match_rate"] == pytest.approx(2 / 3)  # u0, u2 of u0, u2, u4
    assert "exact_match_rate" not in summary["models"]["m3"]  # a model without rows has no figures at all
    assert AsrResult.from_json(summary).model("m2").exact_match_rate == 0.75
    table = model_overview(summary)
    assert table[0].split(" | ")[5] == "exact %" and table[1].count("|") == table[0].count("|")
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in table[2:]}
    assert rows["m1"][5] == "50.0" and rows["m2"][5] == "75.0" and rows["m3"][5] == "—"
