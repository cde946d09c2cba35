"""Dataset readers and bad input: structural problems stop early, per-clip problems become rows."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from engine.audio.decoding import decode
from engine.audio.shards import encode_audio, write_shards
from engine.data import DecodeOptions, Utterance
from engine.datasets import DATASET_READERS, detect_reader, open_dataset
from engine.errors import ConfigError, ManifestError, RegistryError
from engine.run.runner import decode_shard
from tests.conftest import write_manifest


def test_registry_did_you_mean_and_duplicates():
    with pytest.raises(RegistryError, match="did you mean 'nemo'"):
        DATASET_READERS.get("nemoo")
    with pytest.raises(RegistryError, match="duplicate"):
        DATASET_READERS.register_lazy("csv", "x:y")


def test_nemo_manifest_labels_ids_relative_paths(tmp_path, tone_wav):
    tone_wav("a.wav")
    m = write_manifest(
        tmp_path / "m.jsonl",
        [
            {
                "audio_filepath": "a.wav",
                "duration": 1.0,
                "text": "Hello there",
                "utt_id": "x1",
                "speaker": "spk1",
                "accent": "scottish",
                "age": 30,
            },
            {"audio_filepath": "a.wav", "text": "Second", "id": "x2"},
        ],
    )
    ds = open_dataset(m, shard_size=1)
    assert ds.reader == "nemo" and ds.n_utts == 2 and len(ds.shard_ids) == 2
    u = ds.load_shard(ds.shard_ids[0]).utterances[0]
    assert u.utt_id == "x1" and u.speaker == "spk1" and u.labels == {"accent": "scottish", "age": "30"}
    d = decode(u, root=ds.root)
    assert d.error is None and d.sample_rate == 16000 and abs(d.duration_s - 1.0) < 1e-3


def test_malformed_manifest_names_file_and_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"audio_filepath": "a.wav", "text": "x"}\n{"audio_filepath": "b.wav", "text": \n')
    with pytest.raises(ManifestError, match=r"bad.jsonl, line 2: invalid JSON"):
        open_dataset(p)


def test_missing_audio_column_and_duplicates(tmp_path):
    p = write_manifest(tmp_path / "m.jsonl", [{"text": "x"}])
    with pytest.raises(ManifestError, match="line 1, field 'audio_filepath'"):
        open_dataset(p)
    p2 = write_manifest(
        tmp_path / "d.jsonl",
        [{"audio_filepath": "a.wav", "text": "x", "utt_id": "same"}, {"audio_filepath": "b.wav", "text": "y", "utt_id": "same"}],
    )
    with pytest.raises(ManifestError, match="duplicate utt_id 'same'"):
        open_dataset(p2)


def test_csv_tsv_readers(tmp_path, tone_wav):
    tone_wav("a.wav")
    (tmp_path / "d.csv").write_text("audio_filepath,text,accent\na.wav,hello world,us\na.wav,,gb\n")
    ds = open_dataset(tmp_path / "d.csv")
    utts = ds.load_shard(ds.shard_ids[0]).utterances
    assert utts[0].labels == {"accent": "us"} and utts[0].reference == "hello world"
    assert utts[1].problem and "empty" in utts[1].problem
    (tmp_path / "d.tsv").write_text("path\tsentence\nz.wav\thi\n")
    assert open_dataset(tmp_path / "d.tsv").reader == "tsv"
    (tmp_path / "nocol.csv").write_text("audio_filepath,accent\na.wav,us\n")
    with pytest.raises(ManifestError, match="field 'text'"):
        open_dataset(tmp_path / "nocol.csv")


def test_empty_reference_needs_the_speech_free_label(tmp_path, tone_wav):
    tone_wav("a.wav")
    m = write_manifest(
        tmp_path / "m.jsonl",
        [
            {"audio_filepath": "a.wav", "text": "", "utt_id": "lost"},
            {"audio_filepath": "a.wav", "text": "", "utt_id": "quiet", "content": "speech-free", "background": "silence"},
            {"audio_filepath": "a.wav", "text": "some words", "utt_id": "contradiction", "content": "speech-free"},
            {"audio_filepath": "a.wav", "text": "some words", "utt_id": "speech", "content": "speech"},
        ],
    )
    ds = open_dataset(m)
    utts = {u.utt_id: u for u in ds.load_shard(ds.shard_ids[0]).utterances}
    assert utts["lost"].problem and "reference is empty" in utts["lost"].problem and "content: speech-free" in utts["lost"].problem
    assert (
        utts["quiet"].problem is None
        and utts["quiet"].reference == ""
        and utts["quiet"].labels == {"content": "speech-free", "background": "silence"}
    )
    assert utts["contradiction"].problem and "not empty" in utts["contradiction"].problem
    assert utts["speech"].problem is None


def test_derivation_is_read_back(tmp_path, tone_wav):
    """Derived audio keeps how it was made through a manifest and through Parquet shards."""
    tone_wav("a.wav")
    der = {"tts": {"engine": "flite", "text_spoken": "Missus Smith"}}
    m = write_manifest(
        tmp_path / "m.jsonl",
        [
            {"audio_filepath": "a.wav", "text": "Mrs. Smith", "utt_id": "d1", "parent_id": "p1", "derivation": der},
            {"audio_filepath": "a.wav", "text": "Mrs. Smith", "utt_id": "d2", "derivation": json.dumps(der)},
            {"audio_filepath": "a.wav", "text": "plain", "utt_id": "d3"},
        ],
    )
    ds = open_dataset(m)
    utts = {u.utt_id: u for u in ds.load_shard(ds.shard_ids[0]).utterances}
    assert utts["d1"].derivation == der and utts["d2"].derivation == der and utts["d3"].derivation is None
    assert utts["d1"].parent_id == "p1" and "derivation" not in utts["d1"].labels
    write_shards(list(utts.values()), tmp_path / "shards", shard_size=8)
    pds = open_dataset(tmp_path / "shards", "parquet")
    back = {u.utt_id: u for sid in pds.shard_ids for u in pds.load_shard(sid).utterances}
    assert back["d1"].derivation == der and back["d3"].derivation is None
    bad = write_manifest(tmp_path / "bad.jsonl", [{"audio_filepath": "a.wav", "text": "x", "derivation": "not json"}])
    with pytest.raises(ManifestError, match="field 'derivation'"):
        open_dataset(bad).load_shard(open_dataset(bad).shard_ids[0])


def test_parquet_hf_style_audio_column(tmp_path):
    x = (0.2 * np.sin(np.arange(16000) / 5)).astype(np.float32)
    table = pa.table(
        {"id": ["p1"], "audio": [{"bytes": encode_audio(x, 16000, "WAV"), "path": "p1.wav"}], "sentence": ["hi"], "gender": ["f"]}
    )
    pq.write_table(table, tmp_path / "data.parquet")
    ds = open_dataset(tmp_path / "data.parquet")
    u = ds.load_shard(ds.shard_ids[0]).utterances[0]
    assert u.utt_id == "p1" and u.reference == "hi" and u.labels == {"gender": "f"}
    assert decode(u).error is None


def test_shard_roundtrip(tmp_path):
    x = (0.2 * np.sin(np.arange(8000) / 3)).astype(np.float32)
    utts = [
        Utterance(f"u{i}", f"text {i}", audio_bytes=encode_audio(x, 16000), duration_s=0.5, speaker="s", labels={"k": str(i % 2)})
        for i in range(5)
    ]
    write_shards(utts, tmp_path / "shards", shard_size=2)
    ds = open_dataset(tmp_path)
    assert ds.reader == "parquet" and ds.n_utts == 5 and len(ds.shard_ids) == 3
    back = [u for s in ds.iter_shards() for u in s.utterances]
    assert [u.utt_id for u in back] == [u.utt_id for u in utts]
    assert [u.labels for u in back] == [u.labels for u in utts]
    assert open_dataset(tmp_path, limit=3).n_utts == 3


def test_predictions_reader(voxpopuli_preds):
    ds = open_dataset(voxpopuli_preds)
    assert ds.reader == "oasr-predictions" and not ds.has_audio and ds.n_utts == 150
    assert "predictions" not in ds.describe() and set(ds.predictions) == {
        "distil-small.en",
        "wav2vec2-base-960h",
        "whisper-base.en",
        "whisper-small.en",
        "whisper-tiny.en",
    }


def test_hf_reader_offline_message(tmp_path):
    # either 'datasets' is missing (install hint) or the hub is unreachable (local-copy hint)
    with pytest.raises(ConfigError, match=r"datasets|save_to_disk|--dataset"):
        open_dataset("nonexistent-org/nonexistent-dataset", reader="hf")


@pytest.mark.parametrize(
    "case,expect",
    [
        ("missing", "not found"),
        ("zero", "0 bytes"),
        ("corrupt", "unreadable"),
        ("truncated", "0 samples|truncated|corrupt|unreadable"),
        ("silent", "silent"),
        ("nan", "NaN"),
        ("outside", "outside the dataset root"),
    ],
)
def test_bad_audio_becomes_error(tmp_path, tone_wav, case, expect):
    root = tmp_path / "root"
    root.mkdir()
    path = root / "x.wav"
    if case == "zero":
        path.write_bytes(b"")
    elif case == "corrupt":
        path.write_bytes(b"RIFF\x00\x00garbage" * 10)
    elif case == "truncated":
        good = tone_wav("good.wav")
        path.write_bytes(good.read_bytes()[:60])
    elif case == "silent":
        sf.write(path, np.zeros(16000), 16000)
    elif case == "nan":
        sf.write(path, np.full(16000, np.nan, dtype=np.float32), 16000, subtype="FLOAT")
    elif case == "outside":
        path = tone_wav("outside.wav")
    u = Utterance("u", "ref", audio_path=str(path))
    d = decode(u, root=root, allow_outside_root=case != "outside")
    assert d.error is not None and d.samples is None
    import re

    assert re.search(expect, d.error), d.error


def test_resample_and_downmix(tone_wav):
    p = tone_wav("st.wav", seconds=1.0, sr=44100, channels=2)
    d = decode(Utterance("u", "r", audio_path=str(p)))
    assert d.error is None and d.samples.ndim == 1 and abs(len(d.samples) - 16000) <= 2
    p6 = tone_wav("six.wav", seconds=0.5, sr=48000, channels=6)
    assert decode(Utterance("v", "r", audio_path=str(p6))).samples.shape[0] == 8000


def test_too_long_rejected_without_reading(tmp_path):
    p = tmp_path / "long.wav"
    with sf.SoundFile(p, "w", 8000, 1) as fh:
        block = np.zeros(8000 * 60, dtype=np.float32)
        for _ in range(31):
            fh.write(block)
    d = decode(Utterance("u", "r", audio_path=str(p)), max_duration_s=1800)
    assert d.error and "over the limit" in d.error


def test_problem_rows_do_not_affect_others(tmp_path, tone_wav):
    tone_wav("a.wav")
    m = write_manifest(
        tmp_path / "m.jsonl",
        [
            {"audio_filepath": "a.wav", "text": "ok"},
            {"audio_filepath": "missing.wav", "text": "gone"},
            {"audio_filepath": "a.wav"},
        ],
    )
    ds = open_dataset(m, shard_size=10)
    decoded = decode_shard(ds.load_shard(ds.shard_ids[0]), ds.root, DecodeOptions())
    assert decoded[0].error is None
    assert "not found" in decoded[1].error
    assert "no reference" in decoded[2].error


def test_detect_reader(tmp_path, voxpopuli_preds):
    assert detect_reader(tmp_path / "x.csv") == "csv"
    assert detect_reader(tmp_path / "x.jsonl") == "nemo"
    assert detect_reader("org/name") == "hf"
    with pytest.raises(ManifestError, match=r"pass --reader \(csv, hf, kaldi, lhotse, nemo, oasr-predictions, parquet, tsv, webdataset\)"):
        detect_reader(tmp_path / "x.bin")


class ToyReader:
    """A plug-in's reader: ``.toy`` files by name, and (to make a tie) a file called both.jsonl by content."""

    @classmethod
    def sniff(cls, path):
        from engine.datasets.base import SNIFF_CONTENT, SNIFF_NAME

        return SNIFF_NAME if path.suffix == ".toy" else SNIFF_CONTENT if path.name == "both.jsonl" else 0


def test_readers_sniff_their_own_formats_through_the_registry(tmp_path, monkeypatch):
    """detect_reader asks every registered reader (a plug-in's too); the surest wins, a tie asks for --reader."""
    import engine.datasets
    from engine.registry import Registry

    folder = tmp_path / "preds"
    folder.mkdir()
    (folder / "m.jsonl").write_text(json.dumps({"audio_filepath": "a.wav", "text": "x", "pred_text": "y"}) + "\n")
    (tmp_path / "both.jsonl").write_text((folder / "m.jsonl").read_text())
    assert detect_reader(folder) == "oasr-predictions" and detect_reader(tmp_path / "both.jsonl") == "oasr-predictions"
    (folder / "shards").mkdir()  # our own shard layout beats a prediction file beside it
    assert detect_reader(folder) == "parquet"
    reg = Registry("dataset reader", "audit_engine.dataset_readers")
    reg.register("toy")(ToyReader)
    monkeypatch.setattr(engine.datasets, "DATASET_READERS", reg)
    assert detect_reader(tmp_path / "x.toy") == "toy" and detect_reader(tmp_path / "x.csv") == "csv"
    with pytest.raises(ManifestError, match="readers oasr-predictions, toy all recognize it; pass --reader"):
        detect_reader(tmp_path / "both.jsonl")
