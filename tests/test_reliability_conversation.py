"""Reliability class 3: conversation configuration and inputs.

Every option goes through the typed option layer (engine.options.Field): a quoted "false", NaN,
a negative collar, a segmentation that could never advance, or diarizer options of the wrong
shape are refused naming the recipe file and the key. Every input the section reads (manifest,
audio headers, RTTM turns, SegLST transcript) is read and checked before the first model loads:
the command stops with exit status 2, no model has loaded and no run.json is written.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from audits.conversation.run import load_conversation_data, parse_conversation_config
from engine.audio.segmentation import SegmentationConfig, plan_chunks
from engine.errors import ConfigError, ManifestError
from tests.reliability_env import Env, audit, refused_before_work, speech_clips, write_conversation_set, write_dataset


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    return Env(tmp_path, monkeypatch)


BAD_CONFIG = [
    ("skip_overlap: 'false'", "conversation.skip_overlap: expected a boolean"),
    ("oracle_speakers: 'false'", "conversation.oracle_speakers: expected a boolean"),
    ("oracle_speakers: 1", "conversation.oracle_speakers: expected a boolean"),
    ("collar: .nan", "conversation.collar: expected a finite number"),
    ("collar: -0.25", "conversation.collar: -0.25 is out of range"),
    ("collar: '0.25'", "conversation.collar: expected a number"),
    ("tcp_collar: .inf", "conversation.tcp_collar: expected a finite number"),
    ("segmentation: {max_chunk_s: 1, pad_s: 0.5}", "pad_s (0.5) must be less than max_chunk_s / 2"),
    ("segmentation: {max_chunk_s: 1, pad_s: 0.3}", "pad_s (0.3) must be less than max_chunk_s / 2"),
    ("segmentation: {max_chunk_s: .nan}", "segmentation.max_chunk_s: expected a finite number"),
    ("segmentation: {batch_size: 2.5}", "segmentation.batch_size: expected an integer"),
    ("segmentation: {threshold: 'high'}", "segmentation.threshold: expected a number"),
    ("segmentation: {pad: 0.1}", "unknown key 'pad'"),
    ("segmentation: [1, 2]", "conversation.segmentation: expected a mapping"),
    ("diarization: {backend: vad-resemblyzer, options: [threshold, 0.3]}", "conversation.diarization.options: expected a mapping"),
    ("diarization: {backend: vad-resemblyzer, options: {threshold: '0.3'}}", "diarization.options.threshold: expected a number"),
    ("diarization: {backend: vad-resemblyzer, options: {threshold: .nan}}", "diarization.options.threshold: expected a finite number"),
    ("diarization: {backend: vad-resemblyzer, options: {treshold: 0.3}}", "did you mean 'threshold'"),
    ("diarization: {backend: vad-resemblyzer, extra: 1}", "conversation.diarization: unknown key 'extra'"),
    ("diarization: {options: {}}", "missing required key 'backend'"),
    ("diarization: 3", "conversation.diarization: expected a string"),
    ("slices: [n_speakers, 3]", "conversation.slices[1]: expected a string"),
    ("dataset: 5", "conversation.dataset: expected a string"),
]


@pytest.mark.parametrize(("line", "message"), BAD_CONFIG, ids=[b[0] for b in BAD_CONFIG])
def test_a_bad_conversation_option_is_refused_before_any_work(env: Env, line: str, message: str) -> None:
    data = write_dataset(env.tmp / "asr", speech_clips(2))
    conv = write_conversation_set(env.tmp / "conv")
    key, _, value = line.partition(": ")
    block = f"conversation:\n  dataset: '{conv}'\n  {key}: {value}\n" if key != "dataset" else f"conversation:\n  dataset: {value}\n"
    out = env.tmp / "out"
    res = audit("run", env.recipe(data, block), "--out", out)
    refused_before_work(res, env, out, "r.yaml", message)


def test_false_means_false_and_the_parsed_config_keeps_types() -> None:
    cfg = parse_conversation_config(
        {"skip_overlap": False, "oracle_speakers": False, "collar": 0, "segmentation": {"max_chunk_s": 20}}, "r.yaml"
    )
    assert cfg.skip_overlap is False and cfg.oracle_speakers is False
    assert isinstance(cfg.collar, float) and cfg.segmentation.max_chunk_s == 20.0
    # 20 and 20.0 are one setting: the stored-results fingerprint must not tell them apart
    same = parse_conversation_config({"segmentation": {"max_chunk_s": 20.0}, "collar": 0.0}, "r.yaml")
    assert json.dumps(cfg.segmentation.as_dict()) == json.dumps(same.segmentation.as_dict()) and json.dumps(cfg.collar) == json.dumps(
        same.collar
    )


def test_diarizer_placement_is_kept_apart_from_its_options() -> None:
    """num_gpus/num_cpus/memory_mb size the diarizer's Ray actor; they are not diarizer settings
    (changing them recomputes nothing) and are typed like every other option."""
    cfg = parse_conversation_config(
        {"diarization": {"backend": "vad-resemblyzer", "options": {"num_gpus": 1, "num_cpus": 2, "threshold": 0.5}}}, "r.yaml"
    )
    assert cfg.diarization_options == {"threshold": 0.5} and cfg.diarization_placement == {"num_gpus": 1.0, "num_cpus": 2.0}
    for bad in ({"num_gpus": "1"}, {"num_cpus": 0}, {"memory_mb": float("nan")}, {"num_gpus": True}):
        with pytest.raises(ConfigError, match=r"conversation\.diarization\.options.*" + next(iter(bad))):
            parse_conversation_config({"diarization": {"backend": "vad-resemblyzer", "options": bad}}, "r.yaml")


def test_the_tightest_allowed_segmentation_finishes_at_once() -> None:
    """pad_s just inside the limit used to spin forever; the split always advances now."""
    cfg = SegmentationConfig(max_chunk_s=1.0, pad_s=0.25)
    t0 = time.perf_counter()
    chunks = plan_chunks([(0.0, 600.0)], 600.0, cfg)
    assert time.perf_counter() - t0 < 5.0
    assert chunks and all(e - s <= cfg.max_chunk_s + 1e-9 for s, e in chunks)


def _break(conv: Path, what: str) -> str:
    """Damage one input of a valid conversation set; returns what the error must name."""
    if what == "seglst-nan":
        segs = json.loads((conv / "reference.json").read_text())
        segs[1]["start_time"] = float("nan")
        (conv / "reference.json").write_text(json.dumps(segs))  # json writes NaN, and reads it back
        return "reference.json, field 'start_time': segment 1: start_time nan is not a finite number"
    if what == "seglst-inf":
        (conv / "reference.json").write_text((conv / "reference.json").read_text().replace('"end_time": 1.5', '"end_time": Infinity', 1))
        return "reference.json, field 'end_time': segment 0: end_time inf is not a finite number"
    if what == "seglst-bool":
        segs = json.loads((conv / "reference.json").read_text())
        segs[0]["start_time"] = True
        (conv / "reference.json").write_text(json.dumps(segs))
        return "start_time must be a number of seconds, got bool"
    if what == "rttm-short-line":
        (conv / "reference.rttm").write_text((conv / "reference.rttm").read_text() + "SPEAKER rec0 1 0.5\n")
        return "reference.rttm, line 5: RTTM SPEAKER line needs at least 8 fields"
    if what == "rttm-nan":
        (conv / "reference.rttm").write_text((conv / "reference.rttm").read_text().replace("0.00 1.50", "nan 1.50", 1))
        return "reference.rttm, line 1, field 'start': start 'nan' is not a finite number"
    if what == "rttm-not-utf8":
        (conv / "reference.rttm").write_bytes(
            (conv / "reference.rttm").read_bytes() + b"SPEAKER rec0 1 0.1 0.2 <NA> <NA> \xff\xfe <NA> <NA>\n"
        )
        return "reference.rttm: not valid UTF-8"
    if what == "rttm-past-audio":
        (conv / "reference.rttm").write_text((conv / "reference.rttm").read_text() + "SPEAKER rec1 1 3.00 9.00 <NA> <NA> A <NA> <NA>\n")
        return "rec1"
    if what == "audio-not-audio":
        (conv / "rec1.wav").write_text("this is not audio\n")
        return "manifest.jsonl, line 2, field 'audio_filepath'"
    if what == "audio-missing":
        (conv / "rec1.wav").unlink()
        return "manifest.jsonl, line 2, field 'audio_filepath'"
    if what == "manifest-not-json":
        (conv / "manifest.jsonl").write_text((conv / "manifest.jsonl").read_text() + "{oops\n")
        return "manifest.jsonl, line 3: not valid JSON"
    if what == "unknown-speaker":
        segs = json.loads((conv / "reference.json").read_text())
        segs[0]["speaker"] = "Z"
        (conv / "reference.json").write_text(json.dumps(segs))
        return "Z"
    raise AssertionError(what)


BAD_INPUTS = [
    "seglst-nan",
    "seglst-inf",
    "seglst-bool",
    "rttm-short-line",
    "rttm-nan",
    "rttm-not-utf8",
    "rttm-past-audio",
    "audio-not-audio",
    "audio-missing",
    "manifest-not-json",
    "unknown-speaker",
]


@pytest.mark.parametrize("what", BAD_INPUTS)
def test_a_bad_conversation_input_stops_the_run_before_the_first_model_loads(env: Env, what: str) -> None:
    data = write_dataset(env.tmp / "asr", speech_clips(2))
    conv = write_conversation_set(env.tmp / "conv")
    needle = _break(conv, what)
    out = env.tmp / "out"
    res = audit("run", env.recipe(data, f"conversation:\n  dataset: '{conv}'\n"), "--out", out)
    refused_before_work(res, env, out, needle)


@pytest.mark.parametrize("what", ["seglst-nan", "audio-not-audio", "rttm-short-line"])
def test_the_reader_raises_a_manifest_error_naming_the_file(tmp_path: Path, what: str) -> None:
    conv = write_conversation_set(tmp_path / "conv")
    load_conversation_data(conv)  # the untouched set reads cleanly
    _break(conv, what)
    with pytest.raises(ManifestError):
        load_conversation_data(conv)


def test_parse_is_the_only_gate_for_options_given_in_python() -> None:
    """Sections called from Python get the same refusals as recipes."""
    with pytest.raises(ConfigError, match="api.yaml: conversation.skip_overlap"):
        parse_conversation_config({"skip_overlap": "no"}, "api.yaml")


def test_a_diarizer_missing_a_required_option_is_refused_at_parse() -> None:
    with pytest.raises(ConfigError, match="diarization.options: missing required option 'checkpoint'"):
        parse_conversation_config({"diarization": {"backend": "pyannote", "options": {"device": "cpu"}}}, "r.yaml")
    with pytest.raises(ConfigError, match="min_speakers: 0 is out of range"):
        parse_conversation_config({"diarization": {"backend": "pyannote", "options": {"checkpoint": "x", "min_speakers": 0}}}, "r.yaml")


@pytest.mark.parametrize(
    ("trials", "needle"),
    [
        ("1 u000 u001\n0 u000 nope\n", "line 2"),
        ("1 u000\n", "line 1"),
        (b"1 u000 u001\n\xff\xfe\n", "not valid UTF-8"),
    ],
)
def test_another_sections_input_is_read_before_any_model_loads(env: Env, trials: str | bytes, needle: str) -> None:
    """The speaker section's trial list is read against the dataset's ids when the run starts."""
    data = write_dataset(env.tmp / "asr", speech_clips(2))
    path = env.tmp / "trials.txt"
    if isinstance(trials, bytes):
        path.write_bytes(trials)
    else:
        path.write_text(trials)
    out = env.tmp / "out"
    res = audit("run", env.recipe(data, f"speaker:\n  backends: [resemblyzer]\n  trials: '{path}'\n"), "--out", out)
    refused_before_work(res, env, out, "trials.txt", needle)
