"""Reliability class 11: segments read as whole files.

A NeMo manifest row with ``offset``/``duration`` (or the same columns in a CSV or Parquet table)
is a span of a longer recording. It was read as the whole file: every segment scored against the
whole recording's audio, hundreds of per cent WER, no warning. Now:

* every decode path (the runners' shard decode, the judges' and probes' workers, derived clips)
  reads exactly the span: its samples equal those of the same span cut to a file of its own with
  sox or soundfile, and a real model (PocketSphinx) gives the same hypothesis for both;
* a segment outside its file (past its end, negative offset, zero, missing or NaN duration) is
  refused when the dataset opens, naming the manifest, line and field: no model loads and nothing
  is written;
* a segment's span is part of its clip digest and the dataset fingerprint, so moving a segment
  is a change of the clip (its unit is redone, another run directory refuses it).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

import engine.audio.decoding
from engine.audio.decoding import decode
from engine.data import Utterance
from engine.datasets import open_dataset
from engine.errors import ManifestError
from tests.reliability_env import Env, audit, refused_before_work

SR = 16_000
GAP_S = 0.5


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    return Env(tmp_path, monkeypatch)


def _recording(librivox: list[tuple[Path, str]], folder: Path, n: int = 3) -> tuple[Path, list[dict[str, Any]]]:
    """The ``n`` shortest LibriVox clips in one 16 kHz recording, half a second of silence between them; their spans and transcripts."""
    folder.mkdir(parents=True, exist_ok=True)
    parts: list[np.ndarray] = []
    spans: list[dict[str, Any]] = []
    at = GAP_S
    parts.append(np.zeros(int(GAP_S * SR), dtype=np.int16))
    for k, (wav, text) in enumerate(sorted(librivox, key=lambda c: sf.info(c[0]).frames)[:n]):
        x, sr = sf.read(wav, dtype="int16")
        assert sr == SR
        spans.append(
            {"utt_id": f"seg{k}", "offset": at, "duration": len(x) / SR, "text": text, "start": int(round(at * SR)), "frames": len(x)}
        )
        parts += [x, np.zeros(int(GAP_S * SR), dtype=np.int16)]
        at += len(x) / SR + GAP_S
    long = folder / "recording.wav"
    sf.write(long, np.concatenate(parts), SR, subtype="PCM_16")
    return long, spans


def _nemo(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_segment_decodes_to_the_samples_of_its_span_cut_with_sox_and_soundfile(librivox: list[tuple[Path, str]], tmp_path: Path) -> None:
    long, spans = _recording(librivox, tmp_path)
    # the same recording at 44.1 kHz in stereo (two different channels): cut before down-mix and resampling
    x16, _ = sf.read(long, dtype="float32")
    import soxr

    x44 = soxr.resample(x16, SR, 44_100).astype(np.float32)
    stereo = tmp_path / "stereo44.wav"
    sf.write(stereo, np.stack([x44, 0.5 * x44[::-1]], axis=1), 44_100, subtype="PCM_16")
    for src, rate in ((long, SR), (stereo, 44_100)):
        info = sf.info(src)
        for s in spans:
            seg = Utterance(s["utt_id"], s["text"], audio_path=str(src), offset_s=s["offset"], duration_s=s["duration"])
            got = decode(seg)
            assert got.error is None
            start, frames = int(s["offset"] * rate + 1e-6), int(s["duration"] * rate + 1e-6)
            by_sox = tmp_path / f"{src.stem}-{s['utt_id']}-sox.wav"
            subprocess.run(["sox", str(src), str(by_sox), "trim", f"{start}s", f"{frames}s"], check=True, capture_output=True)
            by_sf = tmp_path / f"{src.stem}-{s['utt_id']}-sf.wav"
            data, _ = sf.read(src, dtype="int16", start=start, frames=frames, always_2d=True)
            sf.write(by_sf, data, rate, subtype=info.subtype)
            for cut in (by_sox, by_sf):
                whole = decode(Utterance("cut", s["text"], audio_path=str(cut)))
                assert whole.error is None
                assert np.array_equal(got.samples, whole.samples), f"{src.name} {s['utt_id']}: the segment differs from {cut.name}"
            assert abs(got.duration_s - s["duration"]) < 1e-3


def test_long_segments_read_block_by_block_equal_the_cut_span(
    librivox: list[tuple[Path, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long, spans = _recording(librivox, tmp_path)
    monkeypatch.setattr(engine.audio.decoding, "STREAM_SAMPLES", 1000)  # every clip takes the streaming path
    x, _ = sf.read(long, dtype="int16")
    for s in spans:
        cut = tmp_path / f"{s['utt_id']}.wav"
        sf.write(cut, x[s["start"] : s["start"] + s["frames"]], SR, subtype="PCM_16")
        seg = decode(Utterance(s["utt_id"], "", audio_path=str(long), offset_s=s["offset"], duration_s=s["duration"]))
        whole = decode(Utterance("cut", "", audio_path=str(cut)))
        assert seg.error is None and np.array_equal(seg.samples, whole.samples)


def _registry(env: Env) -> None:
    (env.tmp / "configs" / "models" / "ps.yaml").write_text(
        "models:\n  sphinx: {backend: pocketsphinx, options: {search: fast}, batch_size: 1, params_m: null, tags: [local]}\n"
    )


def test_a_run_transcribes_each_segment_as_the_span_cut_to_its_own_file(librivox: list[tuple[Path, str]], env: Env) -> None:
    _registry(env)
    long, spans = _recording(librivox, env.tmp / "data", n=2)
    x, _ = sf.read(long, dtype="int16")
    rows = []
    spans = spans[1:]  # the second clip (a span in the middle of the recording), as a segment and cut to its own file: one run
    for s in spans:
        cut = env.tmp / "data" / f"{s['utt_id']}.wav"
        sf.write(cut, x[s["start"] : s["start"] + s["frames"]], SR, subtype="PCM_16")
        rows.append(
            {"utt_id": s["utt_id"], "audio_filepath": long.name, "offset": s["offset"], "duration": s["duration"], "text": s["text"]}
        )
        rows.append({"utt_id": f"cut-{s['utt_id']}", "audio_filepath": cut.name, "duration": s["duration"], "text": s["text"]})
    manifest = _nemo(env.tmp / "data" / "manifest.jsonl", rows)
    out = env.tmp / "out"
    res = audit("run", env.recipe(manifest, models="[sphinx]"), "--out", out)
    assert res.exit_code == 0, res.output
    table = pd.read_parquet(out / "utterances.parquet").set_index("utt_id")
    assert table["error"].isna().all()
    seg = table.loc[[s["utt_id"] for s in spans]]
    cut = table.loc[[f"cut-{s['utt_id']}" for s in spans]]
    assert seg["hyp_raw"].tolist() == cut["hyp_raw"].tolist(), "a segment must be transcribed as its span, not the whole recording"
    assert np.allclose(seg["duration_s"].to_numpy(), cut["duration_s"].to_numpy())
    for (uid, row), s in zip(seg.iterrows(), spans):  # each hypothesis is about as long as its own reference, not the recording
        assert len(str(row["hyp_raw"]).split()) <= 2 * len(s["text"].split()), uid


@pytest.mark.parametrize(
    ("offset", "duration", "field", "says"),
    [
        (20.0, 1.0, "offset", "at or past the end"),
        (1.0, 30.0, "duration", "past the end of its audio"),
        (-0.5, 1.0, "offset", "negative"),
        (1.0, 0.0, "duration", "must be > 0"),
        (1.0, None, "duration", "needs its duration"),
        (1.0, float("nan"), "duration", "finite"),
        ("soon", 1.0, "offset", "number of seconds"),
    ],
)
def test_a_segment_outside_its_file_is_refused_before_any_model_loads(env: Env, offset: Any, duration: Any, field: str, says: str) -> None:
    data = env.tmp / "data"
    data.mkdir()
    sf.write(data / "rec.wav", np.random.default_rng(0).normal(0, 0.1, 10 * SR).astype(np.float32), SR)
    bad: dict[str, Any] = {"utt_id": "b", "audio_filepath": "rec.wav", "offset": offset, "text": "a b"}
    if duration is not None:
        bad["duration"] = duration
    good = {"utt_id": "a", "audio_filepath": "rec.wav", "offset": 0.0, "duration": 2.0, "text": "a b"}
    manifest = _nemo(data / "manifest.jsonl", [good, bad])
    out = env.tmp / "out"
    res = audit("run", env.recipe(manifest), "--out", out)
    refused_before_work(res, env, out, str(manifest), "line 2", f"field '{field}'", says)
    assert not out.exists(), "nothing is written under --out when the run is refused"


def test_csv_and_parquet_segments_select_their_span_and_are_checked_too(tmp_path: Path) -> None:
    x = np.random.default_rng(1).normal(0, 0.1, 6 * SR).astype(np.float32)
    sf.write(tmp_path / "rec.wav", x, SR, subtype="FLOAT")
    want = decode(Utterance("w", "", audio_path=str(tmp_path / "rec.wav"), offset_s=1.5, duration_s=2.0)).samples
    assert np.array_equal(want, x[int(1.5 * SR) : int(3.5 * SR)])
    (tmp_path / "m.csv").write_text("utt_id,audio_filepath,offset,duration,text\nc1,rec.wav,1.5,2.0,a b\n")
    import pyarrow as pa
    import pyarrow.parquet as pq

    audio = (tmp_path / "rec.wav").read_bytes()
    table = pa.table(
        {"utt_id": ["p1"], "audio": [{"bytes": audio, "path": "rec.wav"}], "offset": [1.5], "duration_s": [2.0], "text": ["a b"]}
    )
    pq.write_table(table, tmp_path / "m.parquet")
    for path in (tmp_path / "m.csv", tmp_path / "m.parquet"):
        ds = open_dataset(path)
        (u,) = ds.load_shard(ds.shard_ids[0]).utterances
        got = decode(u, root=ds.root)
        assert got.error is None and np.array_equal(got.samples, want), path.name
    (tmp_path / "bad.csv").write_text("utt_id,audio_filepath,offset,duration,text\nc1,rec.wav,5.0,2.0,a b\n")
    with pytest.raises(ManifestError, match=r"bad\.csv, line 2, field 'duration'"):
        open_dataset(tmp_path / "bad.csv")
    pq.write_table(table.set_column(2, "offset", pa.array([7.0])), tmp_path / "bad.parquet")
    with pytest.raises(ManifestError, match=r"bad\.parquet, line 0, field 'offset'"):
        open_dataset(tmp_path / "bad.parquet")


def test_hugging_face_segments_select_their_span_and_are_checked_too(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    import io

    x = np.random.default_rng(5).normal(0, 0.1, 6 * SR).astype(np.float32)
    buf = io.BytesIO()
    sf.write(buf, x, SR, format="WAV", subtype="FLOAT")
    for name, offset in (("good", 1.5), ("bad", 5.0)):
        ds = datasets.Dataset.from_dict(
            {"audio": [{"bytes": buf.getvalue(), "path": "rec.wav"}], "text": ["a b"], "offset": [offset], "duration": [2.0]}
        ).cast_column("audio", datasets.Audio(decode=False))
        ds.save_to_disk(str(tmp_path / name))
    opened = open_dataset(tmp_path / "good", "hf", split="train")
    got = decode(opened.load_shard(opened.shard_ids[0]).utterances[0])
    assert got.error is None and np.array_equal(got.samples, x[int(1.5 * SR) : int(3.5 * SR)])
    with pytest.raises(ManifestError, match="field 'duration'.*past the end"):
        open_dataset(tmp_path / "bad", "hf", split="train")


def test_every_worker_payload_and_derived_clip_keeps_the_span(tmp_path: Path) -> None:
    import pickle

    from engine.audio.shards import write_shards
    from engine.data import DecodeOptions
    from engine.keyed.judge_worker import clip_location, decode_location
    from engine.keyed.probe_workers import clip_payload, read_clip
    from engine.perturb.derive import Family, derive_shard

    x = np.random.default_rng(2).normal(0, 0.1, 8 * SR).astype(np.float32)
    sf.write(tmp_path / "rec.wav", x, SR, subtype="FLOAT")
    u = Utterance("s", "a b", audio_path="rec.wav", offset_s=2.0, duration_s=1.25)
    want = decode(u, root=tmp_path).samples
    assert len(want) == int(1.25 * SR)
    judged, err = decode_location(clip_location(u, tmp_path), 60.0, True)  # judges' workers
    assert err is None and np.array_equal(judged, want)
    probed, err = read_clip(clip_payload(u, tmp_path))  # probes' helper and masking workers
    assert err is None and np.array_equal(probed, want)
    shipped = pickle.loads(pickle.dumps(u))  # Ray ships shards of utterances to decode_shard
    assert np.array_equal(decode(shipped, root=tmp_path).samples, want)
    # the planted copy of the bad-reference probe: audio embedded, the span kept
    (path,) = write_shards(
        [Utterance("s", "a b", audio_bytes=(tmp_path / "rec.wav").read_bytes(), offset_s=2.0, duration_s=1.25)], tmp_path / "copy"
    )
    ds = open_dataset(path.parent, "parquet")
    assert np.array_equal(decode(ds.load_shard(ds.shard_ids[0]).utterances[0]).samples, want)
    # a perturbation derives from the span
    row = {"utt_id": "s", "audio_filepath": "rec.wav", "offset": 2.0, "duration": 1.25, "text": "a b"}
    ds2 = open_dataset(_nemo(tmp_path / "m.jsonl", [row]))
    derived = derive_shard(ds2.load_shard(ds2.shard_ids[0]), ds2, [Family("gain", "gain", (-6.0,))], 0, DecodeOptions())
    assert [round(d.duration_s or 0, 6) for d in derived] == [1.25]


def test_moving_a_segment_changes_the_clip_digest_and_the_fingerprint(tmp_path: Path) -> None:
    sf.write(tmp_path / "rec.wav", np.random.default_rng(3).normal(0, 0.1, 5 * SR).astype(np.float32), SR)
    prints, digests = [], []
    for offset in (1.0, 2.0):
        ds = open_dataset(
            _nemo(
                tmp_path / f"m{offset}.jsonl",
                [{"utt_id": "s", "audio_filepath": "rec.wav", "offset": offset, "duration": 1.0, "text": "a b"}],
            )
        )
        prints.append(ds.fingerprint)
        digests.append(ds.shard_index(ds.shard_ids[0]).clips)
    assert prints[0] != prints[1] and digests[0] != digests[1]


@pytest.mark.slow
def test_both_runners_read_the_span(ray_local: str, tmp_path: Path) -> None:
    """In-process and on Ray (a local 2-CPU instance), each segment gives the hypothesis of its span cut to a file
    (the simulated model's text is a hash of the samples it is given)."""
    from engine.data import ModelSpec
    from engine.run.ray_runner import RayRunner
    from engine.run.runner import InProcessRunner
    from engine.run.store import RunStore

    x = np.random.default_rng(4).normal(0, 0.1, 9 * SR).astype(np.float32)
    sf.write(tmp_path / "rec.wav", x, SR, subtype="FLOAT")
    rows = []
    for k, (offset, duration) in enumerate(((0.25, 2.0), (3.0, 2.5), (6.0, 3.0))):
        sf.write(tmp_path / f"cut{k}.wav", x[int(offset * SR) : int(offset * SR) + int(duration * SR)], SR, subtype="FLOAT")
        rows.append({"utt_id": f"seg{k}", "audio_filepath": "rec.wav", "offset": offset, "duration": duration, "text": "a b"})
        rows.append({"utt_id": f"cut{k}", "audio_filepath": f"cut{k}.wav", "text": "a b"})
    ds = open_dataset(_nemo(tmp_path / "m.jsonl", rows), shard_size=2)
    spec = ModelSpec("sim", "simulated", {"rtfx": 1000}, 4)
    hyps: dict[str, dict[str, str]] = {}
    plans = {}
    runner: Any = InProcessRunner(ds, [spec], RunStore(tmp_path / "inproc"))
    runner.run()
    plans["inproc"] = runner.plan
    runner = RayRunner(ds, [spec], RunStore(tmp_path / "ray"))  # on the session's local 2-CPU instance (tests/conftest.py)
    runner.run()
    plans["ray"] = runner.plan
    for name in ("inproc", "ray"):
        t = RunStore(tmp_path / name).consolidate(["sim"], plan=plans[name]).to_pandas().set_index("utt_id")
        assert t["error"].isna().all()
        hyps[name] = t["hyp_raw"].to_dict()
    for k in range(3):
        assert hyps["inproc"][f"seg{k}"] == hyps["inproc"][f"cut{k}"] == hyps["ray"][f"seg{k}"] == hyps["ray"][f"cut{k}"]
