"""Readers for the layouts speech toolkits write: Lhotse cut manifests, Kaldi data folders, WebDataset tar shards.

Each sample is written here byte for byte as its tool writes it (Lhotse's ``CutSet.to_file`` JSONL
lines, Kaldi's whitespace tables, WebDataset's ``TarWriter`` members grouped by key).
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from engine.audio.decoding import decode
from engine.datasets import detect_reader, open_dataset
from engine.errors import ManifestError

SR = 16000


def _wav(path: Path, seconds: float, freq: float = 220.0, fmt: str = "WAV") -> Path:
    t = np.arange(int(seconds * SR)) / SR
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32), SR, format=fmt)
    return path


def _all(ds):
    return [u for s in ds.iter_shards() for u in s.utterances]


# -- Lhotse ---------------------------------------------------------------------------------


def _recording(rid: str, path: Path, seconds: float, channels: int = 1) -> dict:
    """``Recording.to_dict()``: None fields left out, one file source covering every channel."""
    return {
        "id": rid,
        "sources": [{"type": "file", "channels": list(range(channels)), "source": str(path)}],
        "sampling_rate": SR,
        "num_samples": int(seconds * SR),
        "duration": seconds,
        "channel_ids": list(range(channels)),
    }


def _cut(cid: str, start: float, duration: float, rec: dict, sups: list[dict], channel=0) -> dict:
    """``MonoCut.to_dict()``: the dataclass fields without the None ones, the recording inline, then ``type``."""
    return {"id": cid, "start": start, "duration": duration, "channel": channel, "supervisions": sups, "recording": rec, "type": "MonoCut"}


def _sup(sid: str, rid: str, start: float, duration: float, text: str, speaker: str, **extra) -> dict:
    return {"id": sid, "recording_id": rid, "start": start, "duration": duration, "channel": 0, "text": text, "speaker": speaker, **extra}


def _write_cuts(path: Path, cuts: list[dict]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as fh:  # lhotse's save_to_jsonl: one json.dumps(ensure_ascii=False) per line
        for c in cuts:
            fh.write(json.dumps(c, ensure_ascii=False) + "\n")
    return path


def test_lhotse_cuts_whole_recordings_and_spans(tmp_path):
    a = _wav(tmp_path / "audio" / "a.wav", 1.0)
    long = _wav(tmp_path / "audio" / "long.wav", 3.0, 330.0)
    ra, rl = _recording("a", a, 1.0), _recording("long", long, 3.0)
    cuts = [
        _cut("a-0", 0.0, 1.0, ra, [_sup("a-s", "a", 0.0, 1.0, "HELLO WORLD", "spk1", language="English", gender="m")]),
        _cut(
            "long-1",
            1.0,
            1.5,
            rl,
            [_sup("l-2", "long", 0.8, 0.7, "SECOND PART", "spk2"), _sup("l-1", "long", 0.0, 0.7, "FIRST PART", "spk2")],
        ),
    ]
    path = _write_cuts(tmp_path / "cuts_test.jsonl.gz", cuts)
    assert detect_reader(path) == "lhotse" and detect_reader(tmp_path) == "lhotse"
    ds = open_dataset(path)
    u1, u2 = _all(ds)
    assert (u1.utt_id, u1.reference, u1.speaker, u1.labels, u1.segment) == (
        "a-0",
        "HELLO WORLD",
        "spk1",
        {"language": "English", "gender": "m"},
        None,
    )
    assert (u2.reference, u2.speaker, u2.segment) == ("FIRST PART SECOND PART", "spk2", (1.0, 1.5))  # supervisions in time order
    d = decode(u2, root=ds.root)
    assert d.error is None and len(d.samples) == int(1.5 * SR)  # the cut's span, not the whole recording
    assert np.allclose(d.samples, sf.read(long, dtype="float32")[0][SR : SR + len(d.samples)], atol=1e-4)


def test_lhotse_recordings_and_supervisions_as_lhotse_prepare_writes_them(tmp_path):
    """``lhotse prepare`` output (<corpus>_recordings_<part> beside <corpus>_supervisions_<part>, .jsonl.gz): a clip per supervision."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for part, seconds in (("test-clean", 3.0), ("dev-clean", 1.0)):
        wav = _wav(tmp_path / part / "1089-134686.wav", seconds)
        _write_cuts(manifests / f"librispeech_recordings_{part}.jsonl.gz", [_recording(f"{part}-rec", wav, seconds)])
        sups = [_sup(f"{part}-0", f"{part}-rec", 0.0, 1.0, "HE HOPED", "1089", language="English")]
        if seconds > 1:
            sups.append(_sup(f"{part}-1", f"{part}-rec", 1.0, 2.0, "THERE WOULD BE STEW", "1089", language="English"))
        _write_cuts(manifests / f"librispeech_supervisions_{part}.jsonl.gz", sups)
    assert detect_reader(manifests) == "lhotse"
    assert open_dataset(manifests).n_utts == 3
    ds = open_dataset(manifests, split="test-clean")
    u0, u1 = _all(ds)
    assert (u0.utt_id, u0.reference, u0.speaker, u0.segment) == ("test-clean-0", "HE HOPED", "1089", (0.0, 1.0))
    assert (u1.reference, u1.segment) == ("THERE WOULD BE STEW", (1.0, 2.0))
    assert len(decode(u1, root=ds.root).samples) == 2 * SR
    with pytest.raises(ManifestError, match="of split 'test-other'"):
        open_dataset(manifests, split="test-other")


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c.update(type="MixedCut"), "is a MixedCut; only MonoCut"),
        (lambda c: c["recording"]["sources"][0].update(type="url", source="https://x/a.wav"), "source of type 'url'"),
        (lambda c: c["recording"]["sources"][0].update(type="command", source="sox a.sph -t wav -"), "only 'file' sources"),
        (lambda c: c.update(recording={**c["recording"], "channel_ids": [0, 1]}, channel=1), "takes channel 1 of a 2-channel"),
    ],
)
def test_lhotse_refuses_what_it_would_guess_at(tmp_path, change, message):
    a = _wav(tmp_path / "a.wav", 1.0)
    good = _cut("ok", 0.0, 1.0, _recording("ok", a, 1.0), [_sup("s", "ok", 0.0, 1.0, "HI", "x")])
    bad = json.loads(json.dumps(good))
    bad["id"] = "bad"
    change(bad)
    path = _write_cuts(tmp_path / "cuts.jsonl.gz", [good, bad])
    with pytest.raises(ManifestError, match=rf"cuts.jsonl.gz, line 2.*{message}"):
        open_dataset(path)


# -- Kaldi ----------------------------------------------------------------------------------


def _kaldi_dir(s5: Path) -> Path:
    """``data/test`` of a recipe run from ``s5``: paths relative to s5, as Kaldi's data preparation writes them."""
    _wav(s5 / "wav" / "rec1.wav", 4.0)
    _wav(s5 / "wav" / "rec2.flac", 2.0, 440.0, fmt="FLAC")
    d = s5 / "data" / "test"
    d.mkdir(parents=True)
    (d / "wav.scp").write_text("rec1 wav/rec1.wav\nrec2 flac -c -d -s wav/rec2.flac |\n")
    (d / "segments").write_text("spkA-rec1-0000 rec1 0.00 1.50\nspkA-rec1-0001 rec1 1.50 4.00\nspkB-rec2-0000 rec2 0.25 -1\n")
    (d / "text").write_text("spkA-rec1-0000 THE CAT SAT\nspkA-rec1-0001 ON THE MAT\nspkB-rec2-0000 HELLO\n")
    (d / "utt2spk").write_text("spkA-rec1-0000 spkA\nspkA-rec1-0001 spkA\nspkB-rec2-0000 spkB\n")
    (d / "spk2gender").write_text("spkA f\nspkB m\n")
    return d


def test_kaldi_data_folder_with_segments(tmp_path):
    d = _kaldi_dir(tmp_path / "s5")
    assert detect_reader(d) == "kaldi"
    ds = open_dataset(d)
    utts = _all(ds)
    assert [u.utt_id for u in utts] == ["spkA-rec1-0000", "spkA-rec1-0001", "spkB-rec2-0000"]
    assert [u.reference for u in utts] == ["THE CAT SAT", "ON THE MAT", "HELLO"]
    assert [u.speaker for u in utts] == ["spkA", "spkA", "spkB"] and utts[2].labels == {"gender": "m"}
    assert utts[0].segment == (0.0, 1.5) and utts[2].segment == pytest.approx((0.25, 1.75))  # end -1: to the end of the file
    for u, n in zip(utts, (1.5, 2.5, 1.75)):
        got = decode(u, root=ds.root)
        assert got.error is None and len(got.samples) == int(n * SR)
    assert utts[2].audio_path.endswith("rec2.flac")  # the decode-only flac command read as its file


def test_kaldi_refuses_commands_and_inconsistent_tables(tmp_path):
    d = _kaldi_dir(tmp_path / "s5")
    (d / "wav.scp").write_text("rec1 wav/rec1.wav\nrec2 sph2pipe -f wav -p -c 1 wav/rec2.sph |\n")
    with pytest.raises(ManifestError, match=r"wav.scp, line 2: the entry is a shell command.*runs no commands"):
        open_dataset(d)
    (d / "wav.scp").write_text("rec1 wav/rec1.wav\nrec2 flac -c -d -s wav/rec2.flac; rm -rf x |\n")
    with pytest.raises(ManifestError, match="shell command"):
        open_dataset(d)
    (d / "wav.scp").write_text("rec1 wav/rec1.wav\n")
    with pytest.raises(ManifestError, match=r"segments, line 3.*recording 'rec2' is not in wav.scp"):
        open_dataset(d)
    (d / "segments").unlink()
    with pytest.raises(ManifestError, match=r"text, line 1.*'spkA-rec1-0000' has a transcript but no audio"):
        open_dataset(d)


def test_kaldi_without_segments_and_missing_transcript(tmp_path):
    s5 = tmp_path / "s5"
    _wav(s5 / "a.wav", 1.0)
    _wav(s5 / "b.wav", 1.0)
    d = s5 / "data" / "dev"
    d.mkdir(parents=True)
    (d / "wav.scp").write_text(f"u1 {s5 / 'a.wav'}\nu2 {s5 / 'b.wav'}\n")
    (d / "text").write_text("u1 GOOD MORNING\n")
    u1, u2 = _all(open_dataset(d))
    assert (u1.reference, u1.problem) == ("GOOD MORNING", None)
    assert u2.reference is None and "no reference text" in (u2.problem or "")  # that clip's error row; the others run


# -- WebDataset -----------------------------------------------------------------------------


def _tar(path: Path, samples: list[dict[str, bytes]]) -> Path:
    """As webdataset's TarWriter writes a shard: per sample, one member per extension, named KEY.EXT, in order."""
    with tarfile.open(path, "w") as tar:
        for sample in samples:
            key = sample["__key__"].decode()
            for ext, data in sample.items():
                if ext == "__key__":
                    continue
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size, info.mode, info.mtime, info.uname, info.gname = len(data), 0o444, 1700000000, "bigdata", "bigdata"
                tar.addfile(info, io.BytesIO(data))
    return path


def _audio_bytes(seconds: float, fmt: str) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, (0.3 * np.sin(np.arange(int(seconds * SR)) / 7)).astype(np.float32), SR, format=fmt)
    return buf.getvalue()


def test_webdataset_shards(tmp_path):
    shards = tmp_path / "wds"
    shards.mkdir()
    _tar(
        shards / "shard-000000.tar",
        [
            {"__key__": b"utt-0001", "flac": _audio_bytes(1.0, "FLAC"), "txt": "the cat sat\n".encode()},
            {
                "__key__": b"utt-0002",
                "wav": _audio_bytes(0.5, "WAV"),
                "json": json.dumps({"sentence": "on the mat", "client_id": "c9", "accent": "scottish"}).encode(),
            },
        ],
    )
    _tar(shards / "shard-000001.tar", [{"__key__": b"utt-0003", "wav": _audio_bytes(0.75, "WAV"), "txt": b"hello"}])
    assert detect_reader(shards) == "webdataset" and detect_reader(shards / "shard-000000.tar") == "webdataset"
    ds = open_dataset(shards)
    assert ds.reader == "webdataset" and ds.shard_ids == ["shard-000000", "shard-000001"] and ds.n_utts == 3
    utts = _all(ds)
    assert [(u.utt_id, u.reference, u.speaker) for u in utts] == [
        ("utt-0001", "the cat sat", None),
        ("utt-0002", "on the mat", "c9"),
        ("utt-0003", "hello", None),
    ]
    assert utts[1].labels == {"accent": "scottish"}
    assert [len(decode(u).samples) for u in utts] == [SR, SR // 2, int(0.75 * SR)]
    assert open_dataset(shards, limit=2).n_utts == 2
    _tar(shards / "shard-000002.tar", [{"__key__": b"x", "wav": _audio_bytes(0.1, "WAV"), "flac": _audio_bytes(0.1, "FLAC")}])
    with pytest.raises(ManifestError, match=r"shard-000002.tar.*sample 'x' has 2 audio members"):
        open_dataset(shards)


def test_runs_over_toolkit_layouts_and_resume(tmp_path, monkeypatch):
    """``audit run`` over a Kaldi folder and WebDataset shards: every clip scored once, and a second run resumes with nothing to redo."""
    import pandas as pd
    from typer.testing import CliRunner

    from audits.cli.main import app

    cfg = tmp_path / "cfg"
    (cfg / "models").mkdir(parents=True)
    (cfg / "models" / "m.yaml").write_text("models:\n  stand-in:\n    backend: simulated\n")
    monkeypatch.setenv("AUDIT_CONFIG_DIR", str(cfg))
    kaldi = _kaldi_dir(tmp_path / "s5")
    shards = tmp_path / "wds"
    shards.mkdir()
    _tar(shards / "a.tar", [{"__key__": b"k1", "wav": _audio_bytes(0.5, "WAV"), "txt": b"the cat"}])
    _tar(shards / "b.tar", [{"__key__": b"k2", "flac": _audio_bytes(0.5, "FLAC"), "json": b'{"text": "a dog", "spk": "s2"}'}])
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: r\ndataset: {path: x.jsonl}\nmodels: [stand-in]\nshard_size: 2\nwarmup: 0\nscoring: {n_boot: 10}\n")
    for data, n, runs in ((kaldi, 3, 1), (shards, 2, 2)):
        out = tmp_path / f"run-{data.name}"
        for _ in range(runs):  # WebDataset twice: the second run resumes from the tar shards' unit markers
            res = CliRunner().invoke(app, ["run", str(recipe), "--dataset", str(data), "--out", str(out)], catch_exceptions=False)
            assert res.exit_code == 0, res.output
        rows = pd.read_parquet(out / "utterances.parquet")
        assert len(rows) == n and rows["utt_id"].is_unique and rows["error"].isna().all(), rows
        summary = json.loads((out / "summary.json").read_text())
        assert summary["dataset"]["reader"] == ("kaldi" if data == kaldi else "webdataset")


def test_layout_readers_take_no_options(tmp_path):
    from engine.errors import ConfigError

    d = _kaldi_dir(tmp_path / "s5")
    with pytest.raises(ConfigError, match=r"dataset reader 'kaldi' takes no options \(got split\)"):
        open_dataset(d, split="test")
