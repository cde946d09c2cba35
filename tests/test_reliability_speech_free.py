"""Reliability class 8: speech-free clips and literal paths.

* Digital silence (all-zero samples) labelled ``content: speech-free`` is a valid clip: the
  classic test of a model transcribing silence. Silence *not* so labelled is still an error row.
* Only clips labelled speech-free may have no reference words. A clip said to hold speech whose
  reference normalizes to nothing ("uh" under the Whisper normalizer) is a failed row naming the
  fix, never a speech-free clip whose every word counts as a hallucination.
* ``audit query "run[1]"`` reads the folder literally named ``run[1]``, not ``run1``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audits.asr.scoring import score_table
from audits.normalizing import get_normalizer
from engine.audio.decoding import decode
from engine.data import Utterance
from tests.reliability_env import Env, audit, noise, speech_clips, write_dataset


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    return Env(tmp_path, monkeypatch)


def test_digital_silence_decodes_when_labelled_speech_free(tmp_path: Path) -> None:
    import soundfile as sf

    wav = tmp_path / "zeros.wav"
    sf.write(wav, np.zeros(16_000, dtype=np.float32), 16_000)
    free = decode(Utterance("z", "", audio_path=str(wav), labels={"content": "speech-free"}))
    assert free.error is None and free.samples is not None and not free.samples.any()
    said_speech = decode(Utterance("s", "hello", audio_path=str(wav), labels={"content": "speech"}))
    assert said_speech.error is not None and "audio is silent" in said_speech.error


def test_a_run_scores_digital_silence_as_a_speech_free_clip(env: Env) -> None:
    clips = [
        *speech_clips(3),
        {"audio": np.zeros(16_000, dtype=np.float32), "text": "", "content": "speech-free", "background": "digital-silence"},
        {"audio": noise(1.0, 77), "text": "uh", "content": "speech"},
        {"audio": noise(1.0, 78), "text": "um", "speaker": "s9"},  # no label: a speech clip too
        {"audio": np.zeros(16_000, dtype=np.float32), "text": "hello there"},  # silence said to be speech
    ]
    data = write_dataset(env.tmp / "data", clips)
    out = env.tmp / "out"
    res = audit("run", env.recipe(data), "--out", out)
    assert res.exit_code == 0, res.output
    rows = pd.read_parquet(out / "utterances.parquet").set_index("utt_id")
    assert pd.isna(rows.loc["u003", "error"]) and isinstance(rows.loc["u003", "hyp_raw"], str)  # transcribed, not an error
    assert "audio is silent" in rows.loc["u006", "error"]
    m = json.loads((out / "summary.json").read_text())["models"]["sim-a"]
    h = m["hallucination"]
    assert h["n_speech_free"] == 1, "digital silence labelled speech-free must be scored as a speech-free clip"
    # "uh" and "um" normalize to nothing: failed rows that say what to do, not speech-free clips
    assert m["n_failed"] == 3 and m["n_utts"] == 7
    reasons = " ".join(m["failures"])
    assert "reference normalizes to no words" in reasons and "content: speech-free" in reasons
    assert m["n_words"] == 9  # the three speech clips' "a b c"


def test_scoring_fails_labelled_speech_with_an_empty_normalized_reference() -> None:
    rows = pd.DataFrame(
        [
            {"utt_id": "a", "model": "m", "ref_raw": "uh", "hyp_raw": "oh no no", "error": None, "content": "speech"},
            {"utt_id": "b", "model": "m", "ref_raw": "", "hyp_raw": "thank you", "error": None, "content": "speech-free"},
            {"utt_id": "c", "model": "m", "ref_raw": "hello", "hyp_raw": "hello", "error": None, "content": "speech"},
        ]
    )
    f = score_table(rows, get_normalizer("whisper-english")).frame.set_index("utt_id")
    assert not f.loc["a", "ok"] and "reference normalizes to no words" in f.loc["a", "error"]
    assert f.loc["a", "word_errors"] == 0 and not f.loc["a", "speech_free"]
    assert f.loc["b", "ok"] and f.loc["b", "speech_free"] and f.loc["b", "hyp_words"] == 2
    assert f.loc["c", "ok"] and not f.loc["c", "speech_free"]


def test_query_reads_a_folder_named_with_glob_characters_literally(env: Env) -> None:
    a = write_dataset(env.tmp / "a", speech_clips(2))
    b = write_dataset(env.tmp / "b", speech_clips(3, 5))
    assert audit("run", env.recipe(a), "--out", env.tmp / "run1").exit_code == 0
    assert audit("run", env.recipe(b, name="other"), "--out", env.tmp / "run[1]").exit_code == 0
    for folder, n in (("run[1]", 3), ("run1", 2)):
        res = audit("query", env.tmp / folder, "SELECT count(*) AS n FROM utterances", "--format", "json")
        assert res.exit_code == 0, res.output
        assert json.loads(res.output)[0]["n"] == n, f"{folder} read the wrong run"
    star = env.tmp / "run*"
    assert audit("query", star, "SELECT 1").exit_code == 2  # no folder named 'run*': refused, not globbed


def test_query_keeps_file_access_off(env: Env) -> None:
    a = write_dataset(env.tmp / "a", speech_clips(2))
    assert audit("run", env.recipe(a), "--out", env.tmp / "r").exit_code == 0
    res = audit("query", env.tmp / "r", f"SELECT * FROM read_parquet('{env.tmp / 'r' / 'utterances.parquet'}')")
    assert res.exit_code == 2
