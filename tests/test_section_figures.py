"""The conversation, probes, profiles and perturbations results are typed down to their figures.

The fixtures under ``fixtures/section-results/`` are those sections' parts of real ``summary.json``
files (the demo-conversation, demo-probes and demo-profiles recipes with ``--limit``; folders made
relative). Each must read into records that declare every key it holds (nothing left under
``extra``) and write back the same JSON text, key order included.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from audits.conversation.results import ConversationModelFigures, ConversationResult, DiarizationScores, SpeakerWerFigures
from audits.probes.results import (
    AcceptRefFigures,
    BadReferenceProbe,
    MaskingModel,
    MaskingProbe,
    OrthographyModel,
    OrthographyProbe,
    ProbeRecord,
    ProbesResult,
    SyntheticModel,
    SyntheticVoiceProbe,
)
from audits.profiles.results import GapTable, Ladder, LadderModel, PerturbationsResult, ProfilesResult, WerFigures
from audits.records import Record

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "section-results"
SECTIONS: dict[str, Any] = {
    "conversation": ConversationResult,
    "probes": ProbesResult,
    "profiles": ProfilesResult,
    "perturbations": PerturbationsResult,
}


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def undeclared(value: Any, path: str = "$") -> list[str]:
    """Paths of keys some record of ``value`` does not declare (kept under its ``extra``)."""
    out: list[str] = []
    if isinstance(value, Record):
        out += [f"{path}.{k}" for k in value.extra]
        for f in value.declared():
            out += undeclared(getattr(value, f.name), f"{path}.{f.name}")
        for name, entry in getattr(value, "models", {}).items() if isinstance(value, ProbeRecord) else ():
            out += undeclared(entry, f"{path}.{name}")
    elif isinstance(value, tuple):
        for i, v in enumerate(value):
            out += undeclared(v, f"{path}[{i}]")
    elif isinstance(value, Mapping):
        for k, v in value.items():
            out += undeclared(v, f"{path}.{k}")
    elif hasattr(value, "entries"):  # ProbesResult
        for k, v in value.entries.items():
            out += undeclared(v, f"{path}.{k}")
    return out


def built_in_code(value: Any) -> Any:
    """The same record as if built in code (no ``layout`` read from a file, at any depth)."""
    if isinstance(value, Record):
        return dataclasses.replace(value, layout=None, **{f.name: built_in_code(getattr(value, f.name)) for f in value.declared()})
    if isinstance(value, tuple):
        return tuple(built_in_code(v) for v in value)
    if isinstance(value, MappingProxyType):
        return MappingProxyType({k: built_in_code(v) for k, v in value.items()})
    return value


@pytest.mark.parametrize("name", list(SECTIONS))
def test_real_section_json_round_trips_as_the_same_text(name: str) -> None:
    data = load(name)
    result = SECTIONS[name].from_json(data)
    assert json.dumps(result.to_json(), ensure_ascii=False) == json.dumps(data, ensure_ascii=False)
    assert SECTIONS[name].from_json(result.to_json()) == result


@pytest.mark.parametrize("name", list(SECTIONS))
def test_every_key_of_a_real_section_is_a_declared_figure(name: str) -> None:
    assert undeclared(SECTIONS[name].from_json(load(name))) == []


@pytest.mark.parametrize("name", list(SECTIONS))
def test_an_empty_section_reads_and_writes_nothing(name: str) -> None:
    assert SECTIONS[name].from_json({}).to_json() == {}


def test_conversation_figures_are_typed_and_built_in_the_files_order() -> None:
    data = load("conversation")
    conv = ConversationResult.from_json(data)
    model = conv.model("whisper-tiny.en")
    assert isinstance(model, ConversationModelFigures) and isinstance(model.cpwer, SpeakerWerFigures)
    assert model.wer == data["models"]["whisper-tiny.en"]["wer"] and model.cpwer.n_words == model.n_words
    assert model.whole_recording is not None and model.whole_recording.n_recordings == conv.dataset.n_recordings  # type: ignore[union-attr]
    assert conv.diarization is not None and all(isinstance(s, DiarizationScores) for s in conv.diarization.slices.values())
    assert conv.problems is not None and conv.problems.count == len(conv.problems.examples) == 0
    # what conversation_summary builds in code writes the keys in the order the file has them
    assert json.dumps(built_in_code(conv).to_json()) == json.dumps(data)
    with pytest.raises(KeyError, match="whisper-tiny.en, pocketsphinx-en-us"):
        conv.model("whisper-base")


def test_probe_results_are_typed_per_probe_and_model() -> None:
    data = load("probes")
    probes = ProbesResult.from_json(data)
    masking = probes.probe("masking")
    assert isinstance(masking, MaskingProbe) and list(masking.models) == ["memorizer", "whisper-base", "whisper-tiny.en"]
    memo = masking.model("memorizer")
    assert isinstance(memo, MaskingModel) and memo.rate == 1.0 and memo.k == memo.n_leaked and memo.n == memo.n_gated
    assert memo.by_variant["silence"].n_gated == data["masking"]["memorizer"]["by_variant"]["silence"]["n_gated"]
    assert masking.settings is not None and masking.settings["primary_variant"] == memo.variant == "silence"
    ortho = probes.probe("orthography")
    assert isinstance(ortho, OrthographyProbe) and "settings" not in ortho.models
    digits = ortho.model("whisper-base")
    assert isinstance(digits, OrthographyModel) and digits.families["digits-words"].arms["digits"].hits == 6
    bad = probes.probe("bad_reference")
    assert isinstance(bad, BadReferenceProbe) and isinstance(bad.model("memorizer"), AcceptRefFigures)
    assert bad.spans is not None and bad.n_spans == len(bad.spans) and bad.spans[0].verdicts["memorizer"] == "ref"
    assert bad.planted is not None and sum(bad.planted.by_kind.values()) == bad.planted.n_planted
    voice = probes.probe("synthetic_voice")
    assert isinstance(voice, SyntheticVoiceProbe) and voice.matched is not None and voice.matched.encoder == "resemblyzer"
    sv = voice.model("memorizer")
    assert isinstance(sv, SyntheticModel) and sv.arms is not None and sv.real_minus_matched is not None
    assert sv.arms["matched"].rate == sv.real_minus_matched.rate and sv.arms["generic"].by_source is not None
    with pytest.raises(KeyError, match="orthography, masking, bad_reference, synthetic_voice"):
        probes.probe("memorization")
    with pytest.raises(dataclasses.FrozenInstanceError):
        memo.rate = 0.0  # type: ignore[misc]


def test_a_probe_built_in_code_writes_its_models_first_then_its_facts() -> None:
    built = MaskingProbe(n_clips=3, status="ok", models=MappingProxyType({"m": MaskingModel(rate=0.5, n_gated=2, n_leaked=1, k=1, n=2)}))
    out = built.to_json()
    assert list(out) == ["m", "n_clips", "status"] and out["m"]["rate"] == 0.5 and out["m"]["by_kind"] == {}
    assert MaskingProbe.from_json(out).to_json() == out and MaskingProbe.from_json(out).model("m") == built.model("m")


def test_profile_figures_are_typed() -> None:
    data = load("profiles")
    prof = ProfilesResult.from_json(data)
    model = next(iter(data["profiles"]))
    overall = prof.profile(model).overall
    assert isinstance(overall, WerFigures) and overall.wer == data["profiles"][model]["overall"]["wer"]
    assert set(prof.profile(model).conditions) == set(prof.conditions or ())
    assert isinstance(prof.gap_table, GapTable) and prof.gap_table.paired is not None
    assert prof.rank_stability is not None and prof.rank_stability.n_models == len(data["profiles"])
    assert prof.trade_offs is not None and set(prof.trade_offs.models) == set(data["profiles"])
    ladder = (prof.ladders or ())[0]
    assert isinstance(ladder, Ladder) and isinstance(ladder.models[model], LadderModel)
    steps = ladder.models[model].levels
    assert [s.value for s in steps] == [s.value for s in ladder.levels] and [s.level for s in steps] == [s.level for s in ladder.levels]


def test_perturbation_ladders_are_typed() -> None:
    data = load("perturbations")
    pert = PerturbationsResult.from_json(data)
    assert pert.families is not None and [f.kind for f in pert.families] == [f["kind"] for f in data["families"]]
    for ladder in pert.ladders or ():
        for name, m in ladder.models.items():
            assert m.baseline is not None and m.baseline.value == ladder.baseline
            assert m.slope == data["ladders"][(pert.ladders or ()).index(ladder)]["models"][name]["slope"]
