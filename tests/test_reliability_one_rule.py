"""Reliability class 18: one rule per thing on every surface.

* File names: two model names that map to one export file (``sim x`` and ``sim_x`` both become
  ``exports/oasr/sim_x.jsonl``) are refused before any model loads, by the function the exporter
  names its files with; a merged report of runs with such models is refused before anything is
  written. (It was a traceback after summary.json and report.md were written.)
* Audio: one header check (``engine.audio.decoding.read_header``) decides for every section what audio is
  acceptable. The conversation section read and scored a 64-channel recording the ASR section
  refuses; it now refuses it (and any other recording the clip decoder refuses) when it reads
  the set, before any model loads, with the decoder's own words.
* Speech-free: the explicit ``content:`` label decides, never what the reference suggests. A clip
  labelled speech whose reference normalizes to nothing is no speech-free clip, and a clip labelled
  speech-free whose reference has words is not scored as speech.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from audits.asr.hallucination import add_row_flags
from audits.conversation.run import load_conversation_data
from engine.audio.decoding import decode
from engine.data import Utterance
from engine.errors import AudioError, ManifestError
from engine.keyed.keyed_workers import load_recording
from tests.reliability_env import Env, audit, noise, refused_before_work, speech_clips, write_conversation_set, write_dataset

SR = 16_000


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    return Env(tmp_path, monkeypatch)


def _two_names(env: Env) -> None:
    (env.tmp / "configs" / "models" / "x.yaml").write_text(
        "models:\n"
        "  'sim x': {backend: simulated, options: {rtfx: 1000}, batch_size: 4}\n"
        "  sim_x: {backend: simulated, options: {rtfx: 1000, seed: 3}, batch_size: 4}\n"
        "  Sim-A: {backend: simulated, options: {rtfx: 1000, seed: 4}, batch_size: 4}\n"
    )


@pytest.mark.parametrize(("models", "file"), [("['sim x', sim_x]", "sim_x.jsonl"), ("[sim-a, Sim-A]", "Sim-A.jsonl")])
def test_models_sharing_an_export_file_are_refused_before_any_model_loads(env: Env, models: str, file: str) -> None:
    _two_names(env)
    data = write_dataset(env.tmp / "d", speech_clips(3))
    out = env.tmp / "out"
    res = audit("run", env.recipe(data, models=models), "--out", out)
    refused_before_work(res, env, out, "would share one export file", file)
    assert not out.exists(), "nothing is written under --out when the run is refused"


def test_a_merged_report_of_models_sharing_an_export_file_is_refused_before_writing(env: Env) -> None:
    _two_names(env)
    data = write_dataset(env.tmp / "d", speech_clips(3))
    for name, model in (("a", "['sim x']"), ("b", "[sim_x]")):
        assert audit("run", env.recipe(data, name=name, models=model), "--out", env.tmp / name).exit_code == 0
    merged = env.tmp / "merged"
    res = audit("report", env.tmp / "a", env.tmp / "b", "--out", merged)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and "would share one export file" in " ".join(res.output.split())
    assert not merged.exists(), "the refused report wrote files"


def _bad_recordings(folder: Path) -> dict[str, Path]:
    """Recordings the clip decoder refuses: 64 channels, a 400 kHz rate, NaN samples."""
    folder.mkdir(parents=True, exist_ok=True)
    x = noise(4.0, 5)
    many = folder / "64ch.wav"
    sf.write(many, np.repeat(x[:, None], 64, axis=1), SR, subtype="PCM_16")
    fast = folder / "400k.wav"
    sf.write(fast, noise(0.5, 6), 400_000, subtype="PCM_16")
    nan = folder / "nan.wav"
    y = x.copy()
    y[100] = np.nan
    sf.write(nan, y, SR, subtype="FLOAT")
    return {"64 channels": many, "400000 Hz": fast, "NaN/Inf samples": nan}


def test_every_recording_the_asr_decoder_refuses_the_conversation_section_refuses_in_its_words(tmp_path: Path) -> None:
    for what, path in _bad_recordings(tmp_path / "bad").items():
        asr = decode(Utterance("c", "a", audio_path=str(path))).error
        assert asr is not None and what in asr
        with pytest.raises(AudioError) as conv:  # the diarization and long-form workers' reader
            load_recording(str(path))
        assert asr in str(conv.value)


def test_a_64_channel_recording_is_refused_when_the_conversation_set_is_read(env: Env) -> None:
    conv = write_conversation_set(env.tmp / "conv")
    x, _ = sf.read(conv / "rec1.wav", dtype="float32")
    sf.write(conv / "rec1.wav", np.repeat(x[:, None], 64, axis=1), SR, subtype="PCM_16")
    with pytest.raises(ManifestError) as err:
        load_conversation_data(conv)
    assert "manifest.jsonl, line 2, field 'audio_filepath'" in str(err.value)
    assert decode(Utterance("rec1", "a", audio_path=str(conv / "rec1.wav"))).error in str(err.value)
    data = write_dataset(env.tmp / "asr", speech_clips(2))
    out = env.tmp / "out"
    res = audit("run", env.recipe(data, f"conversation:\n  dataset: '{conv}'\n"), "--out", out)
    refused_before_work(res, env, out, "64 channels", "line 2")


def test_the_content_label_decides_speech_free_not_the_reference() -> None:
    df = pd.DataFrame(
        {
            "ok": True,
            "n_words": [0, 0, 2],
            "ref_norm": ["", "", "a b"],
            "hyp_norm": ["x y", "x y", "a b"],
            "content": ["speech", "speech-free", "speech"],
        }
    )
    add_row_flags(df)
    assert df["speech_free"].tolist() == [False, True, False], "a clip labelled speech is never a speech-free clip"


def test_a_run_scores_by_the_content_label_on_a_predictions_dataset(env: Env) -> None:
    preds = env.tmp / "preds"
    preds.mkdir()
    rows = [
        {"audio_filepath": "u0", "text": "a b c", "pred_text": "a b c", "content": "speech"},
        {"audio_filepath": "u1", "text": "uh", "pred_text": "thank you", "content": "speech"},  # speech, reference normalizes to nothing
        {"audio_filepath": "u2", "text": "hello there", "pred_text": "hello there", "content": "speech-free"},  # speech-free, with words
        {"audio_filepath": "u3", "text": "", "pred_text": "thank you", "content": "speech-free"},
    ]
    (preds / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = env.tmp / "out"
    res = audit("run", env.recipe(preds, models="[m]"), "--out", out)
    assert res.exit_code == 0, res.output
    m = json.loads((out / "summary.json").read_text())["models"]["m"]
    h = m["hallucination"]
    assert h["n_speech_free"] == 1 and h["n_hallucinated"] == 1, "only the clip labelled speech-free with an empty reference is speech-free"
    assert m["n_failed"] == 2 and m["n_words"] == 3, "the labelled speech-free clip with words is not scored as speech"
    reasons = " ".join(m["failures"])
    assert "reference normalizes to no words" in reasons and "labelled 'content: speech-free' but its reference has words" in reasons
