"""Decoding stays bounded whatever a header declares: bombs are refused, long clips are streamed.

A 343 KB FLAC can declare 60 s of 8-channel audio at 655 kHz (1.2 GB of float32 once decoded);
a FIFO or /dev/zero is not an audio file. Peak memory is measured in a fresh process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from engine.audio import decoding
from engine.data import Utterance

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys
from engine.audio.decoding import decode
from engine.data import Utterance
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
d = decode(Utterance("u", "r", audio_path=sys.argv[1]))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"error": d.error, "n": 0 if d.samples is None else len(d.samples), "before_mb": before / 1024, "peak_mb": after / 1024}))
"""


def _decode_in_child(path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, env=env, check=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _write_blocks(path: Path, sr: int, channels: int, seconds: float, fmt: str, noise: bool) -> None:
    n = int(seconds * sr)
    rng = np.random.default_rng(0)
    with sf.SoundFile(path, "w", samplerate=sr, channels=channels, format=fmt, subtype="PCM_16") as fh:
        written = 0
        while written < n:
            k = min(1 << 17, n - written)
            block = (rng.normal(0, 2000, (k, channels)) if noise else np.zeros((k, channels))).astype(np.int16)
            fh.write(block)
            written += k


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bomb") / "bomb.flac"
    _write_blocks(path, 655_350, 8, 60, "FLAC", noise=False)
    return path


def test_decompression_bomb_is_refused_from_its_header(bomb: Path) -> None:
    assert bomb.stat().st_size < 400_000
    r = _decode_in_child(bomb)
    assert r["error"] and "655350 Hz, over the limit" in r["error"]
    assert r["peak_mb"] - r["before_mb"] < 50, r  # nothing was decoded


def test_long_multichannel_clip_is_decoded_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "long.wav"
    _write_blocks(path, 48_000, 8, 60, "WAV", noise=True)  # 23 M samples: 92 MB as float32 at once
    r = _decode_in_child(path)
    assert r["error"] is None and r["n"] == 60 * 16_000
    assert r["peak_mb"] - r["before_mb"] < 60, r


def test_streamed_and_one_shot_decoding_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "clip.wav"
    _write_blocks(path, 44_100, 2, 7.3, "WAV", noise=True)
    u = Utterance("u", "r", audio_path=str(path))
    whole = decoding.decode(u).samples
    monkeypatch.setattr(decoding, "STREAM_SAMPLES", 10)
    streamed = decoding.decode(u).samples
    assert whole is not None and streamed is not None and len(whole) == len(streamed)
    assert float(np.max(np.abs(whole - streamed))) < 1e-4


def test_fifo_and_devices_are_not_audio_files(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.wav"
    os.mkfifo(fifo)
    for p in (fifo, Path("/dev/zero")):
        d = decoding.decode(Utterance("u", "r", audio_path=str(p)))
        assert d.error and "not a regular file" in d.error, d.error


def test_too_many_channels_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "many.wav"
    _write_blocks(path, 16_000, 40, 0.5, "WAV", noise=True)
    d = decoding.decode(Utterance("u", "r", audio_path=str(path)))
    assert d.error and "40 channels" in d.error
