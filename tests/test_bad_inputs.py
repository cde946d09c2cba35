"""Bad inputs: every kind gets its documented outcome, and the other rows of the run are unaffected.

The corpus comes from ``scripts/make_bad_inputs.py`` (real LibriVox speech from Debian's
pocketsphinx-testdata plus one bad row per case). Row-level problems must become a result row
with a clear ``error``; structural manifest problems must stop the run before any model loads,
naming file, line and field.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from audits.pipeline import run_recipe
from audits.recipes import parse_recipe
from engine.audio.decoding import decode
from engine.data import DecodeOptions, Utterance
from engine.datasets import open_dataset
from engine.errors import ManifestError
from engine.run.runner import decode_shard
from normalizers import EnglishNormalizer

REPO = Path(__file__).resolve().parents[1]


def _load_builder() -> Any:
    spec = importlib.util.spec_from_file_location("make_bad_inputs", REPO / "scripts" / "make_bad_inputs.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_bad_inputs"] = mod
    spec.loader.exec_module(mod)
    return mod


mbi = _load_builder()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    return mbi.build_bad_input_corpus(tmp_path_factory.mktemp("bad"))


@pytest.fixture(scope="module")
def decoded(corpus: tuple[Path, dict[str, Any]]) -> dict[str, Any]:
    manifest, _ = corpus
    ds = open_dataset(manifest, shard_size=1000)
    (sid,) = ds.shard_ids
    shard = ds.load_shard(sid)
    return {u.utt_id: d for u, d in zip(shard.utterances, decode_shard(shard, ds.root, DecodeOptions(allow_outside_root=False)))}


CASE_IDS = [
    "good-0",
    "sr8000",
    "sr44100",
    "sr48000",
    "stereo",
    "six-channel",
    "clipped",
    "missing-file",
    "zero-byte",
    "directory",
    "no-audio-path",
    "truncated-wav",
    "header-only-wav",
    "corrupt-wav",
    "truncated-flac",
    "corrupt-flac",
    "streamed-flac",
    "text-as-wav",
    "mp4-container",
    "zero-frames",
    "all-silent",
    "nan-samples",
    "inf-samples",
    "long-30min",
    "outside-relative",
    "outside-absolute",
    "outside-symlink",
    "empty-reference",
    "blank-reference",
    "list-reference",
    "no-reference",
    "latin1-reference",
]


def test_corpus_has_every_case(corpus: tuple[Path, dict[str, Any]], decoded: dict[str, Any]) -> None:
    _, expected = corpus
    assert set(CASE_IDS) <= set(expected), set(CASE_IDS) - set(expected)
    assert set(decoded) == set(expected), "the reader dropped or invented rows"


@pytest.mark.parametrize("uid", CASE_IDS)
def test_row_gets_documented_outcome(
    uid: str, corpus: tuple[Path, dict[str, Any]], decoded: dict[str, Any], record_property: Callable[[str, Any], None]
) -> None:
    """Decode-level outcome of each case: samples, or an error that says what is wrong."""
    _, expected = corpus
    e = expected[uid]
    d = decoded[uid]
    if e.outcome == "ok":
        assert d.error is None, f"{uid} ({e.case}): unexpected error {d.error}"
        assert d.samples is not None and d.samples.ndim == 1 and d.sample_rate == 16000
        if e.same_as:
            ref = decoded[e.same_as].samples
            assert abs(len(d.samples) - len(ref)) <= 16, (len(d.samples), len(ref))  # resampling keeps duration
    else:
        assert d.samples is None and d.error, f"{uid} ({e.case}): expected an error"
        assert re.search(e.pattern, d.error), f"{uid}: error {d.error!r} does not match {e.pattern!r}"
    record_property("bad_input", uid)
    record_property("handled", True)


def test_mixed_type_labels_kept_as_strings(corpus: tuple[Path, dict[str, Any]]) -> None:
    """Mixed types in one label column: each value becomes a string label, JSON for lists/dicts."""
    manifest, _ = corpus
    ds = open_dataset(manifest, shard_size=1000)
    labels = {u.utt_id: u.labels.get("accent") for u in ds.load_shard(ds.shard_ids[0]).utterances}
    assert labels["sr8000"] == "3" and labels["sr44100"] == "True" and labels["sr48000"] == '[1, "two"]'
    assert labels["stereo"] == '{"k": "v"}' and labels["six-channel"] == "2.5" and labels["clipped"] == "en-gb"


def test_outside_root_allowed_when_recipe_permits(corpus: tuple[Path, dict[str, Any]]) -> None:
    manifest, _ = corpus
    ds = open_dataset(manifest, shard_size=1000)
    shard = ds.load_shard(ds.shard_ids[0])
    allowed = {u.utt_id: d for u, d in zip(shard.utterances, decode_shard(shard, ds.root, DecodeOptions(allow_outside_root=True)))}
    for uid in ("outside-relative", "outside-absolute", "outside-symlink"):
        assert allowed[uid].error is None and allowed[uid].samples is not None


def test_long_file_rejected_before_reading_samples(tmp_path: Path) -> None:
    """A 30-minute (+1 s) clip is refused from its header: decoding it allocates almost nothing."""
    p = mbi.write_long_sparse_wav(tmp_path / "long.wav")
    assert p.stat().st_size > 50_000_000
    tracemalloc.start()
    try:
        d = decode(Utterance("long", "r", audio_path=str(p)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert d.error is not None and "1801 s long, over the limit of 1800 s" in d.error and "split it" in d.error
    assert peak < 2_000_000, f"decoding a rejected clip allocated {peak} bytes"


def test_duration_limit_is_inclusive(tmp_path: Path) -> None:
    """``max_duration_s`` is the longest clip accepted: equal passes, one sample more is refused."""
    import numpy as np
    import soundfile as sf

    x = (0.1 * np.sin(np.arange(16000 * 2) / 5.0)).astype(np.float32)
    sf.write(tmp_path / "two.wav", x, 16000)
    sf.write(tmp_path / "two-plus.wav", np.concatenate([x, x[:1]]), 16000)
    assert decode(Utterance("a", "r", audio_path=str(tmp_path / "two.wav")), max_duration_s=2.0).error is None
    err = decode(Utterance("b", "r", audio_path=str(tmp_path / "two-plus.wav")), max_duration_s=2.0).error
    assert err is not None and "over the limit of 2 s" in err


def _recipe(manifest: Path, **dataset: Any) -> Any:
    return parse_recipe(
        {
            "name": "bad-inputs",
            "dataset": {"path": str(manifest), **dataset},
            "models": ["whisper-tiny.en"],
            "shard_size": 8,
            "scoring": {"n_boot": 50},
        },
        "bad-inputs.yaml",
    )


@pytest.fixture(scope="module")
def stop_cases(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    return mbi.build_stop_manifests(tmp_path_factory.mktemp("stop"))


STOP_NAMES = [
    "duplicate utt_id",
    "ids 1 and '1' collide",
    "missing audio column (JSONL)",
    "mixed types in duration",
    "invalid JSON line",
    "line is not a JSON object",
    "missing text column (CSV)",
    "CSV row with more fields than the header",
    "manifest without records",
]


@pytest.mark.parametrize("name", STOP_NAMES)
def test_structural_problems_stop_before_models_load(
    name: str, stop_cases: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record_property: Callable[[str, Any], None]
) -> None:
    case = next(c for c in stop_cases if c.name == name)
    loaded: list[str] = []
    import engine.run.runner

    real = engine.run.runner.load_model
    monkeypatch.setattr(engine.run.runner, "load_model", lambda spec, warmup: loaded.append(spec.name) or real(spec, warmup))
    out = tmp_path / "run"
    with pytest.raises(ManifestError) as info:
        run_recipe(_recipe(case.path), out)
    exc = info.value
    assert str(case.path) in str(exc), str(exc)
    assert re.search(case.pattern, str(exc)), str(exc)
    assert exc.line == case.line and exc.field == case.field, (exc.line, exc.field, str(exc))
    assert loaded == [] and not (out / "models").exists() and not (out / "parts").exists()
    record_property("bad_input", f"stop: {name}")
    record_property("handled", True)


@pytest.mark.slow
def test_run_with_bad_inputs_leaves_good_rows_unaffected(
    corpus: tuple[Path, dict[str, Any]], tmp_path: Path, record_property: Callable[[str, Any], None]
) -> None:
    """whisper-tiny.en over good + bad rows: every row present once, errors as documented, and the
    good clips' hypotheses identical to a run over the good clips alone."""
    manifest, expected = corpus
    good_manifest = tmp_path / "good" / "manifest.jsonl"
    good_manifest.parent.mkdir()
    lines = [ln for ln in manifest.read_bytes().splitlines() if b'"utt_id": "good-' in ln]
    good_manifest.write_bytes(b"\n".join(lines) + b"\n")
    (good_manifest.parent / "audio").mkdir()
    for wav in (manifest.parent / "audio").glob("good-*.wav"):
        (good_manifest.parent / "audio" / wav.name).write_bytes(wav.read_bytes())
    summary = run_recipe(_recipe(manifest, allow_outside_root=False), tmp_path / "mixed")
    run_recipe(_recipe(good_manifest, allow_outside_root=False), tmp_path / "good-run")
    mixed = pd.read_parquet(tmp_path / "mixed" / "utterances.parquet")
    alone = pd.read_parquet(tmp_path / "good-run" / "utterances.parquet").set_index("utt_id")
    assert sorted(mixed["utt_id"]) == sorted(expected), "rows lost or invented"
    assert not mixed.duplicated(["model", "utt_id"]).any()
    rows = mixed.set_index("utt_id")
    norm = EnglishNormalizer()
    import jiwer

    for uid, e in expected.items():
        err = rows.loc[uid, "error"]
        if e.outcome == "error":
            assert isinstance(err, str) and re.search(e.pattern, err), (uid, err)
            assert pd.isna(rows.loc[uid, "hyp_raw"])
        else:
            assert pd.isna(err), (uid, err)
            assert isinstance(rows.loc[uid, "hyp_raw"], str) and rows.loc[uid, "hyp_raw"].strip(), uid
    for uid in alone.index:
        assert rows.loc[uid, "hyp_raw"] == alone.loc[uid, "hyp_raw"], uid
    good_ids = list(alone.index)
    good_wer = jiwer.wer([norm(rows.loc[u, "ref_raw"]) for u in good_ids], [norm(rows.loc[u, "hyp_raw"]) for u in good_ids])
    assert good_wer < 0.2, good_wer  # sanity: real speech is really transcribed
    base = norm(rows.loc["good-0", "hyp_raw"])
    for uid, e in expected.items():
        if e.same_as:
            assert jiwer.wer(base, norm(rows.loc[uid, "hyp_raw"])) <= 0.2, (uid, rows.loc[uid, "hyp_raw"], base)
    m = summary["models"]["whisper-tiny.en"]
    assert m["n_utts"] == len(expected) and m["n_failed"] == sum(e.outcome == "error" for e in expected.values())
    record_property("run_rows_expected", len(expected))
    record_property("rows_lost", len(set(expected) - set(mixed["utt_id"])))
    record_property("rows_duplicated", int(mixed.duplicated(["model", "utt_id"]).sum()))
