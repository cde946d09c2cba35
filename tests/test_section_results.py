"""Every section's typed result reads and writes its part of summary.json unchanged, key order and unknown keys included."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from audits.conversation.results import ConversationResult
from audits.emotion.results import EmotionBackendResult, EmotionResult
from audits.probes.results import ProbesResult
from audits.profiles.results import PerturbationsResult, ProfilesResult
from audits.records import Record
from audits.sections import section_json
from audits.speaker.results import SpeakerBackendResult, SpeakerResult

SPEAKER: dict[str, Any] = {
    "ecapa": {"status": "ok", "eer": 0.125, "min_dcf": 0.4, "slices": {"accent=x": {"eer": None}}, "notes": ["a", "b"], "model_id": "m"},
    "resemblyzer": {"status": "unavailable", "error": "no package", "facts": {"backend": "resemblyzer"}},
    "judges": {"j": {"kind": "judge", "n_items": 3, "unparseable_examples": []}},
}
EMOTION: dict[str, Any] = {
    "ser": {"warnings": ["few clips"], "status": "ok", "ua": 0.5, "confusion": {"labels": ["a", "b"], "matrix": [[1, 0], [0, 1]]}}
}
CONVERSATION: dict[str, Any] = {
    "dataset": {"root": "r", "n_recordings": 2},
    "models": {"m": {"wer": 0.2, "cpwer": {"wer": 0.25}, "slices": {}}},
    "problems": {"count": 0, "examples": []},
    "normalizer": {"name": "basic", "version": "1"},
}
PROBES: dict[str, Any] = {"bad_reference": {"m": {"n_flagged": 2}}, "masking": {"levels": [0.1, 0.2]}}
PROFILES: dict[str, Any] = {"conditions": ["a"], "n_boot": 100, "profiles": {"p": {"wer": 0.1}}, "rows": [], "normalizer": "basic"}
PERTURBATIONS: dict[str, Any] = {
    "families": [{"name": "noise", "level": 1}],
    "seed": 0,
    "derived": {"n_utts": 4},
    "ladders": [{"model": "m", "slope": None}],
}


@pytest.mark.parametrize(
    ("cls", "data"),
    [
        (SpeakerResult, SPEAKER),
        (EmotionResult, EMOTION),
        (ConversationResult, CONVERSATION),
        (ProbesResult, PROBES),
        (ProfilesResult, PROFILES),
        (PerturbationsResult, PERTURBATIONS),
    ],
)
def test_round_trip_is_the_same_json_text(cls: Any, data: dict[str, Any]) -> None:
    result = cls.from_json(data)
    assert json.dumps(section_json(result)) == json.dumps(data)
    assert cls.from_json(result.to_json()) == result  # a record read back equals the one written


def test_records_are_typed_and_frozen() -> None:
    speaker = SpeakerResult.from_json(SPEAKER)
    ecapa = speaker.entry("ecapa")
    assert isinstance(ecapa, SpeakerBackendResult) and ecapa.status == "ok" and ecapa.notes == ("a", "b")
    assert ecapa.eer == 0.125 and ecapa.slices is not None and ecapa.slices["accent=x"].eer is None
    assert speaker.judges is not None and speaker.judges["j"].n_items == 3
    assert speaker.entry("resemblyzer").status == "unavailable"
    with pytest.raises(KeyError, match="ecapa, resemblyzer"):
        speaker.entry("wavlm")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ecapa.status = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ecapa.slices["accent=x"] = ecapa.slices["accent=x"]  # type: ignore[index]
    ser = EmotionResult.from_json(EMOTION).entry("ser")
    assert isinstance(ser, EmotionBackendResult) and ser.warnings == ("few clips",) and ser.confusion is not None
    assert ser.confusion.matrix == ((1, 0), (0, 1)) and not ser.extra
    conv = ConversationResult.from_json(CONVERSATION)
    assert conv.models is not None and conv.model("m").cpwer is not None and conv.model("m").cpwer.wer == 0.25 and conv.segmentation is None
    assert "segmentation" not in conv.to_json()  # absent when read, absent when written
    assert section_json({"plain": 1}) == {"plain": 1} and isinstance(ProbesResult.from_json(PROBES).entry("masking"), Record)
