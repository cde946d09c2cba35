"""Reader options from the command line (``--reader-opt``) and speaker columns by convention."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from audits.recipes import load_recipe, with_overrides, with_reader_options
from engine.datasets import open_dataset
from engine.datasets.base import DatasetReader
from engine.errors import ConfigError, ManifestError
from engine.options import Options, option
from tests.conftest import write_manifest


def _csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


@pytest.mark.parametrize("column", ["client_id", "speaker_id", "spk", "speaker"])
def test_speaker_columns_by_convention(tmp_path, tone_wav, column):
    tone_wav("a.wav")
    m = write_manifest(tmp_path / "m.jsonl", [{"audio_filepath": "a.wav", "text": "hi", column: "s1", "accent": "x"}])
    u = open_dataset(m).load_shard("s00000").utterances[0]
    assert u.speaker == "s1" and u.labels == {"accent": "x"}  # the speaker column is not also a slice label


def test_column_options_name_the_columns(tmp_path, tone_wav):
    tone_wav("a.wav")
    p = _csv(tmp_path / "cv.csv", ["wav", "sentence_raw", "who", "sentence"], [["a.wav", "hello there", "w1", "other text"]])
    ds = open_dataset(p, "csv", text_column="sentence_raw", audio_column="wav", speaker_column="who")
    u = ds.load_shard("s00000").utterances[0]
    assert (u.reference, u.audio_path, u.speaker) == ("hello there", "a.wav", "w1")
    assert "wav" not in u.labels and "who" not in u.labels and "sentence_raw" not in u.labels
    with pytest.raises(ManifestError, match=r"cv.csv, line 1.*no reference text column \(expected nope\)"):
        open_dataset(p, "csv", text_column="nope", audio_column="wav")


def test_unknown_reader_option_names_the_key_with_a_close_match(tmp_path, tone_wav):
    tone_wav("a.wav")
    m = write_manifest(tmp_path / "m.jsonl", [{"audio_filepath": "a.wav", "text": "hi"}])
    with pytest.raises(ConfigError, match=r"dataset reader 'nemo' options: unknown key 'txt_column' \(did you mean 'text_column'\?\)"):
        open_dataset(m, txt_column="x")
    with pytest.raises(ConfigError, match=r"text_column: expected a string"):
        open_dataset(m, text_column=3)


def test_reader_opt_pairs_are_typed_by_the_reader(tmp_path, tone_wav):
    tone_wav("a.wav")
    m = write_manifest(tmp_path / "m.jsonl", [{"audio_filepath": "a.wav", "text": "hi"}])
    rec = with_overrides(load_recipe("demo"), str(m), None, None, "hf")
    rec = with_reader_options(rec, ["split=validation", "config=2020", "text_column=raw_text"])
    assert dict(rec.dataset.options) == {"split": "validation", "config": "2020", "text_column": "raw_text"}  # text stays text
    with pytest.raises(ConfigError, match=r"unknown key 'splitt' \(did you mean 'split'\?\)"):
        with_reader_options(rec, ["splitt=test"])
    with pytest.raises(ConfigError, match="expected key=value"):
        with_reader_options(rec, ["split"])


def test_cli_reader_opt_reaches_the_reader(tmp_path, tone_wav):
    from typer.testing import CliRunner

    from audits.cli.main import app

    tone_wav("a.wav")
    p = _csv(tmp_path / "d.csv", ["wav", "txt"], [["a.wav", "x"]])
    res = CliRunner().invoke(app, ["run", "demo", "--dataset", str(p), "--reader-opt", "audio_colum=wav", "--out", str(tmp_path / "r")])
    assert res.exit_code != 0 and "unknown key 'audio_colum'" in res.output and "did you mean 'audio_column'" in res.output
    assert not (tmp_path / "r").exists()


def test_reader_option_table_in_the_docs_matches_the_code():
    from engine.datasets.readers import ColumnOptions, CsvReader, HuggingFaceReader, NemoManifestReader, ParquetReader, TsvReader

    doc = (Path(__file__).resolve().parents[1] / "docs" / "datasets.md").read_text(encoding="utf-8")
    assert not [row for row in HuggingFaceReader.OPTIONS.doc_rows() if row not in doc]
    assert all(cls.OPTIONS is ColumnOptions for cls in (NemoManifestReader, CsvReader, TsvReader, ParquetReader))
    assert issubclass(HuggingFaceReader.OPTIONS, ColumnOptions)


def test_common_voice_layout_in_a_hf_folder(tmp_path):
    """Common Voice's columns: ``client_id`` is the speaker, ``sentence`` the reference, and its ``path`` (the
    file's name inside the release archive) does not shadow the ``audio`` column that holds the bytes."""
    import io

    import numpy as np
    import soundfile as sf

    datasets = pytest.importorskip("datasets")
    from engine.audio.decoding import decode

    buf = io.BytesIO()
    sf.write(buf, (0.1 * np.sin(np.arange(16000) / 5)).astype(np.float32), 16000, format="WAV")
    data = {
        "client_id": ["a3f9"],
        "path": ["common_voice_en_1.mp3"],
        "audio": [{"bytes": buf.getvalue(), "path": "common_voice_en_1.mp3"}],
        "sentence": ["hello there"],
        "accent": ["scottish"],
    }
    out = tmp_path / "cv"
    datasets.Dataset.from_dict(data).cast_column("audio", datasets.Audio(decode=False)).save_to_disk(str(out))
    ds = open_dataset(out, "hf", split="test")
    u = ds.load_shard(ds.shard_ids[0]).utterances[0]
    assert (u.reference, u.speaker, u.labels.get("accent")) == ("hello there", "a3f9", "scottish")
    assert u.audio_bytes and decode(u).error is None


def test_a_reader_receives_its_frozen_record(tmp_path, tone_wav):
    from dataclasses import FrozenInstanceError

    from engine.datasets import DATASET_READERS
    from engine.datasets.base import reader_options
    from engine.datasets.readers import HuggingFaceOptions

    checked = reader_options(DATASET_READERS.get("hf"), "hf", {"config": "2020"})
    assert isinstance(checked, HuggingFaceOptions) and (checked.split, checked.config, checked.text_column) == ("test", "2020", None)
    with pytest.raises(FrozenInstanceError):
        checked.split = "train"  # type: ignore[misc]
    assert DATASET_READERS.get("hf")(checked).options is checked


@pytest.mark.parametrize(
    ("reader", "options", "message"),
    [
        ("hf", {"split": 3}, "dataset reader 'hf' options.split: expected a string, got int 3"),
        ("hf", {"split": None}, "dataset reader 'hf' options.split: expected a string, got null"),
        ("csv", {"speaker_column": True}, "dataset reader 'csv' options.speaker_column: expected a string, got bool True"),
        ("nemo", {"text_column": math.nan}, "dataset reader 'nemo' options.text_column: expected a string, got float nan"),
        ("lhotse", {"splt": "dev"}, "dataset reader 'lhotse' options: unknown key 'splt' (did you mean 'split'?); allowed: split"),
        ("kaldi", {"split": "dev"}, "dataset reader 'kaldi' takes no options (got split): its layout names every field"),
        ("oasr-predictions", {"text_column": "x"}, "dataset reader 'oasr-predictions' takes no options (got text_column)"),
    ],
)
def test_a_bad_reader_option_is_refused_before_the_dataset_opens(tmp_path, reader, options, message):
    with pytest.raises(ConfigError) as info:
        open_dataset(tmp_path / "does-not-exist", reader, **options)
    assert message in str(info.value)


@dataclass(frozen=True)
class _Windowed(Options):
    """A plug-in reader's options, with numbers."""

    window_s: float = option(10.0, "window length", gt=0, le=600)
    channels: int = option(1, "channels kept", ge=1)


class _PluginReader(DatasetReader):
    OPTIONS = _Windowed


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"window_s": 0}, "dataset reader 'windowed' options.window_s: 0 is out of range; it must be > 0 and <= 600"),
        ({"window_s": math.inf}, "dataset reader 'windowed' options.window_s: expected a finite number, got inf"),
        ({"window_s": math.nan}, "dataset reader 'windowed' options.window_s: expected a finite number, got nan"),
        ({"window_s": "10"}, "dataset reader 'windowed' options.window_s: expected a number, got str '10'"),
        ({"channels": 1.0}, "dataset reader 'windowed' options.channels: expected an integer, got float 1.0"),
        ({"channels": 0}, "dataset reader 'windowed' options.channels: 0 is out of range; it must be >= 1"),
        ({"chanels": 2}, "dataset reader 'windowed' options: unknown key 'chanels' (did you mean 'channels'?)"),
    ],
)
def test_a_plugin_readers_record_bounds_its_numbers(options, message):
    from engine.datasets.base import reader_options

    with pytest.raises(ConfigError) as info:
        reader_options(_PluginReader, "windowed", options)
    assert message in str(info.value)
    good = reader_options(_PluginReader, "windowed", {"window_s": 30})
    assert isinstance(good, _Windowed) and good.window_s == 30.0 and isinstance(good.window_s, float) and good.channels == 1


def test_a_plugin_reader_without_a_record_gets_its_options_as_given_and_an_old_mapping_is_refused():
    from engine.datasets.base import reader_options

    class Own:
        pass

    class OldStyle:
        OPTIONS = {"split": None}

    assert reader_options(Own, "own", {"split": 3}) == {"split": 3}
    with pytest.raises(ConfigError, match=r"dataset reader 'old' declares OPTIONS as a dict, not an options record: declare a frozen"):
        reader_options(OldStyle, "old", {})
