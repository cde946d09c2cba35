"""The ``hf`` reader on a local ``save_to_disk`` folder: rows as any reader gives them, and audio
left in the memory-mapped Arrow files until its shard runs (driver memory flat in dataset size)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from engine.audio.decoding import decode
from engine.datasets import open_dataset

datasets = pytest.importorskip("datasets")


def _wav(seconds: float, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    sf.write(buf, (0.1 * rng.normal(size=int(16_000 * seconds))).astype(np.float32), 16_000, format="WAV", subtype="PCM_16")
    return buf.getvalue()


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    n = 10
    data = {
        "audio": [{"bytes": _wav(2.0, i), "path": f"clip{i}.wav"} for i in range(n)],
        "text": [f"sentence number {i}" for i in range(n)],
        "speaker_id": [f"spk{i % 3}" for i in range(n)],
        "accent": ["a" if i % 2 else "b" for i in range(n)],
    }
    ds = datasets.Dataset.from_dict(data).cast_column("audio", datasets.Audio(decode=False))
    out = tmp_path_factory.mktemp("hf") / "local"
    ds.save_to_disk(str(out))
    return out


def test_hf_reader_streams_audio_per_shard(hf_dir: Path) -> None:
    ds = open_dataset(hf_dir, reader="hf", shard_size=4)
    assert ds.reader == "hf" and ds.n_utts == 10 and ds.shard_ids == ["s00000", "s00001", "s00002"]
    assert ds.fingerprint and set(ds.index) == set(ds.shard_ids)
    shard = ds.load_shard("s00001")
    assert [u.utt_id for u in shard.utterances] == list(ds.index["s00001"].utt_ids)
    u = shard.utterances[0]
    assert u.reference == "sentence number 4" and u.speaker == "spk1" and u.labels.get("accent") == "b"
    assert u.audio_bytes and decode(u).error is None and abs(decode(u).duration_s - 2.0) < 1e-3


def test_opening_reads_no_audio(hf_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The light records built at open time hold no audio bytes: audio is read per shard only."""
    from engine.datasets import readers

    seen: list[bool] = []
    original = readers.record_to_utterance

    def spy(row, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(isinstance(row.get("audio"), dict) and bool(row["audio"].get("bytes")))
        return original(row, *args, **kwargs)

    monkeypatch.setattr(readers, "record_to_utterance", spy)
    ds = open_dataset(hf_dir, reader="hf", shard_size=4)
    assert len(seen) == 10 and not any(seen)
    seen.clear()
    ds.load_shard("s00000")
    assert seen == [True] * 4


def test_hf_fingerprint_changes_with_the_audio(hf_dir: Path, tmp_path: Path) -> None:
    a = open_dataset(hf_dir, reader="hf").fingerprint
    ds = datasets.load_from_disk(str(hf_dir)).cast_column("audio", datasets.Audio(decode=False))
    rows = ds.to_dict()
    rows["audio"][0] = {"bytes": _wav(2.0, 99), "path": "clip0.wav"}
    other = tmp_path / "other"
    datasets.Dataset.from_dict(rows).cast_column("audio", datasets.Audio(decode=False)).save_to_disk(str(other))
    assert open_dataset(other, reader="hf").fingerprint != a
