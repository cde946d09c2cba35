"""Reliability class 3: section inputs checked before any model loads.

The emotion and probes sections read files and label columns of their own (a label map, the
label and dimension columns, a corrections file of human-verified references). Each is read and
checked by the section's ``check_inputs`` once the dataset is open: a missing or malformed file,
an absent column, a label the map cannot place, a correction naming a clip the dataset lacks stop
the command with exit status 2 naming the file, line or field and the fix; no model has loaded
and no run.json is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audits.probes.config import parse_probe_config
from audits.probes.run import check_probe_inputs
from engine.datasets import open_dataset
from tests.reliability_env import Env, audit, noise, refused_before_work, write_dataset


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    return Env(tmp_path, monkeypatch)


def _clips(emotions: list[str]) -> list[dict[str, Any]]:
    return [
        {"audio": noise(1.0, i), "text": "a b c", "speaker": f"s{i % 2}", "emotion": e, "arousal_score": 0.5}
        for i, e in enumerate(emotions)
    ]


# ------------------------------------------------------------------------------------- emotion


def _emotion_case(env: Env, what: str) -> tuple[str, list[str]]:
    """The emotion block of the recipe for one damaged input, and what the refusal must say."""
    base = "emotion:\n  backends: [prosody]\n  warmup: 0\n  pairs: none\n"
    lm = env.tmp / "labels.csv"
    if what == "label-map-bad-line":
        lm.write_text("# raw,canonical\nhappy,happy\nangry\n")
        return base + f"  label_map: '{lm}'\n", ["labels.csv, line 3: expected 'raw,canonical'"]
    if what == "label-map-not-utf8":
        lm.write_bytes(b"happy,happy\n\xff\xfe,sad\n")
        return base + f"  label_map: '{lm}'\n", ["labels.csv", "not valid UTF-8", "save the map as UTF-8"]
    if what == "label-column-absent":
        return base + "  label: mood\n", ["emotion.label: no clip carries the emotion label 'mood'"]
    if what == "dimension-column-absent":
        needles = ["emotion.dimensions.arousal:", "no clip carries the label column 'arousal_level'"]
        return base + "  dimensions: {arousal: arousal_level}\n", needles
    raise AssertionError(what)


EMOTION_CASES = ["label-map-bad-line", "label-map-not-utf8", "label-column-absent", "dimension-column-absent"]


@pytest.mark.parametrize("what", EMOTION_CASES)
def test_a_bad_emotion_input_stops_the_run_before_the_first_model_loads(env: Env, what: str) -> None:
    data = write_dataset(env.tmp / "asr", _clips(["happy", "grumpy-ish", "sad"]))
    block, needles = _emotion_case(env, what)
    out = env.tmp / "out"
    res = audit("run", env.recipe(data, block), "--out", out)
    refused_before_work(res, env, out, *needles)


def test_an_emotion_section_with_nothing_to_score_stops_the_run(env: Env) -> None:
    """No clip has an emotion label, no dimension column, pairing off: every emotion table would be empty, so the
    run stops before any model loads, saying why (exit 2); the same clips with labels are accepted."""
    from audits.emotion.run import parse_emotion_config
    from audits.emotion.section import EmotionSection

    clips = [{k: v for k, v in c.items() if k != "emotion"} for c in _clips(["x", "y", "z"])]
    data = write_dataset(env.tmp / "asr", clips)
    out = env.tmp / "out"
    res = audit("run", env.recipe(data, "emotion:\n  backends: [prosody]\n  warmup: 0\n  pairs: none\n"), "--out", out)
    refused_before_work(res, env, out, "emotion: the section would be empty: no clip carries the emotion label 'emotion'")
    labelled = write_dataset(env.tmp / "labelled", _clips(["neutral", "sad"]))
    cfg = parse_emotion_config({"backends": ["prosody"], "pairs": "none"}, "r.yaml")
    EmotionSection().check_inputs(cfg, open_dataset(labelled, shard_size=100))


def test_labels_outside_the_map_are_not_refused_before_the_backends_are_known(env: Env) -> None:
    """Label values the map cannot place matter only to backends that give categories (the demo's
    ``positive-high-arousal`` with the prosody backend is fine): the input check does not refuse them."""
    from audits.emotion.run import parse_emotion_config
    from audits.emotion.section import EmotionSection

    data = write_dataset(env.tmp / "asr", _clips(["neutral", "positive-high-arousal"]))
    ds = open_dataset(data, shard_size=100)
    EmotionSection().check_inputs(parse_emotion_config({"backends": ["prosody"], "label": "emotion", "unmapped": "error"}, "r.yaml"), ds)


# ------------------------------------------------------------------------------------- probes


def _corrections(env: Env, what: str) -> tuple[Path, list[str]]:
    """A damaged corrections file and what the refusal must say."""
    p = env.tmp / "corrections.jsonl"
    good = json.dumps({"utt_id": "u000", "text": "a b d"})
    if what == "missing":
        return env.tmp / "nowhere.jsonl", ["bad_reference.corrections: file", "nowhere.jsonl' not found"]
    if what == "not-json-line":
        p.write_text(good + "\n{oops\n")
        return p, ["corrections.jsonl, line 2: not JSON"]
    if what == "row-is-a-list":
        p.write_text(good + '\n["u001", "a b"]\n')
        return p, ["corrections.jsonl, line 2: needs 'utt_id'"]
    if what == "text-null":
        p.write_text(good + "\n" + json.dumps({"utt_id": "u001", "text": None}) + "\n")
        return p, ["corrections.jsonl, line 2: needs 'utt_id' (or 'id'/'audio_filepath') and 'text' (a string)"]
    if what == "json-text-number":
        p = env.tmp / "corrections.json"
        p.write_text(json.dumps({"u000": "a b d", "u001": 3}))
        return p, ["corrections.json: entry 'u001' has 3 as its text"]
    if what == "duplicate-clip":
        p.write_text(good + "\n" + good + "\n")
        return p, ["corrections.jsonl, line 2: clip 'u000' is corrected twice"]
    if what == "unknown-clip":
        p.write_text(good + "\n" + json.dumps({"utt_id": "nope", "text": "x"}) + "\n")
        return p, ["names 1 clip(s) with no reference", "(nope)", "belongs to this dataset"]
    if what == "not-utf8":
        p.write_bytes(good.encode() + b"\n\xff\xfe\n")
        return p, ["corrections.jsonl: not valid UTF-8"]
    if what == "empty":
        p.write_text("\n")
        return p, ["holds no correction"]
    raise AssertionError(what)


PROBE_CASES = [
    "missing",
    "not-json-line",
    "row-is-a-list",
    "text-null",
    "json-text-number",
    "duplicate-clip",
    "unknown-clip",
    "not-utf8",
    "empty",
]


def _probe_block(corrections: Path) -> str:
    return f"probes:\n  bad_reference: {{corrections: '{corrections}', corrections_mode: replace}}\n"


@pytest.mark.parametrize("what", PROBE_CASES)
def test_a_bad_corrections_file_stops_the_run_before_the_first_model_loads(env: Env, what: str) -> None:
    data = write_dataset(env.tmp / "asr", _clips(["happy", "sad"]))
    path, needles = _corrections(env, what)
    out = env.tmp / "out"
    res = audit("run", env.recipe(data, _probe_block(path)), "--out", out)
    refused_before_work(res, env, out, *needles)


def test_bad_reference_on_a_dataset_without_references_is_refused_before_any_work(env: Env) -> None:
    clips = [{"audio": noise(1.0, i), "text": "", "speaker": "s0"} for i in range(2)]
    data = write_dataset(env.tmp / "asr", clips)
    good = env.tmp / "c.json"
    good.write_text(json.dumps({"u000": "a b"}))
    out = env.tmp / "out"
    res = audit("run", env.recipe(data, _probe_block(good)), "--out", out)
    refused_before_work(res, env, out, "probes.bad_reference: dataset", "has no clip with a reference")


def test_a_good_corrections_file_passes_the_check(env: Env) -> None:
    data = write_dataset(env.tmp / "asr", _clips(["happy", "sad"]))
    good = env.tmp / "c.json"
    good.write_text(json.dumps({"u000": "a b d", "u001": "a c"}))
    cfg = parse_probe_config({"bad_reference": {"corrections": str(good), "corrections_mode": "replace"}}, "r.yaml")
    check_probe_inputs(cfg, open_dataset(data, shard_size=100))
