"""The speaker and emotion sections' typed records on real summaries: the same JSON text back, every key a declared figure."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from audits.emotion.results import (
    ArousalOrdering,
    ComparisonFigures,
    ContrastPair,
    EmotionBackendResult,
    EmotionJudgeResult,
    EmotionResult,
    JudgeDimension,
)
from audits.records import Record
from audits.speaker.results import (
    SliceFigures,
    SpeakerBackendResult,
    SpeakerJudgeResult,
    SpeakerPair,
    SpeakerResult,
    SubsetFigures,
    VerificationFigures,
)

FIXTURES = Path(__file__).parent / "fixtures" / "section-results"


def fixture_text(name: str) -> str:
    return (FIXTURES / f"{name}.json").read_text(encoding="utf-8")


def undeclared(value: Any, path: str = "$") -> Iterator[str]:
    """Paths of keys that landed in a record's ``extra`` (not declared as a figure), anywhere below ``value``."""
    if isinstance(value, Record):
        yield from (f"{path}.{k}" for k in value.extra)
        for f in value.declared():
            yield from undeclared(getattr(value, f.name), f"{path}.{f.name}")
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from undeclared(v, f"{path}[{k}]")
    elif isinstance(value, tuple):
        for i, v in enumerate(value):
            yield from undeclared(v, f"{path}[{i}]")


@pytest.mark.parametrize(("name", "cls"), [("demo-speaker", SpeakerResult), ("demo-emotion", EmotionResult)])
def test_real_section_reads_back_to_the_same_text(name: str, cls: Any) -> None:
    text = fixture_text(name)
    result = cls.from_json(json.loads(text))
    assert json.dumps(result.to_json(), indent=2) + "\n" == text
    assert cls.from_json(result.to_json()) == result
    assert list(undeclared(dict(result.entries))) == []


def test_speaker_figures_are_typed() -> None:
    result = SpeakerResult.from_json(json.loads(fixture_text("demo-speaker")))
    entry = result.entry("resemblyzer")
    assert isinstance(entry, SpeakerBackendResult) and entry.status == "ok" and result.judges is None
    assert entry.eer == pytest.approx(0.2) and entry.n_trials == entry.n_target + entry.n_nontarget == 10  # type: ignore[operator]
    assert entry.slices is not None and entry.slice_pairs is not None
    native = entry.slices["accent_group=native"]
    assert isinstance(native, SliceFigures) and (native.eer, native.n_trials, native.note) == (0.0, 6, None)
    lone = entry.slices["tts_engine=kokoro"]
    assert lone.eer is None and lone.note == "EER/minDCF need both target and non-target trials"
    assert "note" not in native.to_json() and lone.to_json()["note"] == lone.note  # absent when read, absent when written
    assert entry.det is not None and entry.det.threshold[0] is None and len(entry.det.p_fa) == len(entry.det.probit_miss)
    assert entry.score_hist is not None and sum(entry.score_hist.target) == entry.n_target
    assert entry.subsets is not None
    subset = entry.subsets["clean-neutral"]
    assert isinstance(subset, SubsetFigures) and subset.error and subset.eer is None and subset.filter["emotion"] == ("neutral",)
    assert "eer" not in subset.to_json()
    assert entry.speakers is not None and entry.speakers.n_speaker_pairs == len(entry.speakers.confusable_pairs) == 5
    assert isinstance(entry.speakers.confusable_pairs[0], SpeakerPair) and entry.speakers.per_speaker["flite:slt"].miss_rate == 1.0
    assert entry.combined_clips is not None and entry.combined_clips.manifest.endswith("manifest.jsonl")
    assert entry.facts is not None and entry.facts["backend"] == "resemblyzer"


def test_emotion_figures_are_typed() -> None:
    result = EmotionResult.from_json(json.loads(fixture_text("demo-emotion")))
    entry = result.entry("prosody")
    assert isinstance(entry, EmotionBackendResult) and entry.categorical is None and entry.ua is None
    assert "categorical" in entry.to_json() and "ua" not in entry.to_json()  # null when read as null, absent when absent
    ao = entry.arousal_ordering
    assert isinstance(ao, ArousalOrdering) and ao.dimension == "arousal_proxy" and ao.skipped is None
    assert ao.within_speaker == ComparisonFigures(0.75, 4, 0) and ao.label_means is not None
    assert ao.label_means["neutral"].n_utts == 5 and ao.expected_arousal == {
        "negative-high-arousal": 1.0,
        "neutral": 0.0,
        "positive-high-arousal": 1.0,
    }
    pc = entry.prosody_contrast
    assert pc is not None and pc.pairs is not None and pc.by_label_pair is not None
    assert pc.n_pairs == len(pc.pairs) == 2 and isinstance(pc.pairs[0], ContrastPair) and pc.pairs[0].points["pitch"] == 2
    assert pc.skipped == () and pc.by_label_pair["neutral|positive-high-arousal"].mean_score == 4.5
    assert entry.notes == ("0 of 2 rendition pairs score below 4 of 8 on prosody contrast",)


def test_skipped_prosody_contrast_and_judges_are_typed() -> None:
    """What the demo does not show: a skipped audit (a reason), categorical figures, and the judges' entries of both sections."""
    emotion = {
        "ser": {
            "status": "ok",
            "ua": 0.5,
            "confusion": {"labels": ["a", "b"], "matrix": [[1, 1], [0, 2]]},
            "per_class": {"a": {"recall": 0.5, "precision": 1.0, "f1": 0.667, "support": 2}},
            "prosody_contrast": {"skipped": "backend gives no acoustic descriptors"},
        },
        "judges": {
            "j": {
                "kind": "judge",
                "judge": "j",
                "task": "emotion_compare",
                "status": "ok",
                "n_items": 4,
                "dimensions": {"aroused": {"n_pairs": 4, "accuracy": 0.5}},
            },
            "k": {"kind": "judge", "judge": "k", "task": "emotion_compare", "status": "no-pairs", "n_pairs_available": 0, "error": "none"},
        },
    }
    res = EmotionResult.from_json(emotion)
    assert json.dumps(res.to_json()) == json.dumps(emotion) and list(undeclared(res.judges)) == []
    ser = res.entry("ser")
    assert ser.prosody_contrast is not None and ser.prosody_contrast.skipped == "backend gives no acoustic descriptors"
    assert ser.confusion is not None and ser.confusion.matrix[1] == (0, 2) and ser.per_class is not None and ser.per_class["a"].support == 2
    assert res.judges is not None and isinstance(res.judges["j"], EmotionJudgeResult) and res.judges["k"].status == "no-pairs"
    assert res.judges["j"].dimensions is not None and isinstance(res.judges["j"].dimensions["aroused"], JudgeDimension)
    speaker = {
        "sv": {"status": "unavailable", "facts": {}, "trial_source": "generated", "error": "no package"},
        "judges": {
            "g": {
                "kind": "judge",
                "judge": "g",
                "task": "same_speaker",
                "status": "ok",
                "accuracy": 0.9,
                "on_judged_trials": {"sv": {"n_trials": 2, "accuracy": 1.0, "threshold": 0.5}},
            }
        },
    }
    sres = SpeakerResult.from_json(speaker)
    assert json.dumps(sres.to_json()) == json.dumps(speaker) and list(undeclared(sres.judges)) == []
    assert sres.judges is not None and isinstance(sres.judges["g"], SpeakerJudgeResult) and sres.judges["g"].on_judged_trials is not None
    assert sres.judges["g"].on_judged_trials["sv"] == VerificationFigures(n_trials=2, accuracy=1.0, threshold=0.5)
    assert sres.entry("sv").eer is None and sres.entry("sv").error == "no package"


def test_run_code_writes_strict_json_figures() -> None:
    """The run code's records hold strict JSON: a NaN figure becomes None (summary.json has no NaN)."""
    from audits.emotion.run import backend_record as emotion_record
    from audits.speaker.run import backend_record as speaker_record

    sv = speaker_record({"eer": float("nan"), "slices": {"x=1": {"eer": math.inf, "n_trials": 3}}, "status": "ok"})
    assert sv.eer is None and sv.slices is not None and sv.slices["x=1"].eer is None and list(sv.to_json()) == ["eer", "slices", "status"]
    ser = emotion_record({"status": "ok", "dimensional": {"arousal": {"n_utts": 1, "ccc": float("nan"), "comparison": None}}})
    assert ser.dimensional is not None and ser.dimensional["arousal"].ccc is None and ser.dimensional["arousal"].comparison is None
