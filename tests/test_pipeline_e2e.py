"""End to end: real bundled models through `audit run` on the demo corpus, real speech, bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import jiwer
import numpy as np
import pandas as pd
import pytest
import soundfile as sf
from typer.testing import CliRunner

from audits.cli.main import app
from audits.pipeline import run_recipe
from audits.recipes import load_recipe, with_overrides
from normalizers import EnglishNormalizer
from tests.conftest import write_manifest

runner = CliRunner()


def independent_wer(df: pd.DataFrame) -> float:
    norm = EnglishNormalizer()
    ok = df[df["error"].isna()]
    return jiwer.wer([norm(r) for r in ok["ref_raw"]], [norm(h) for h in ok["hyp_raw"]])


DEMO_LIMIT = 36


@pytest.fixture(scope="module")
def demo_run(demo_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`audit run demo` on the first 36 clips with the recipe's three models: its folder, and its summary, rows and
    report as the run wrote them (the resume test runs the same recipe again in the folder)."""
    out = tmp_path_factory.mktemp("demo-run") / "run"
    res = runner.invoke(app, ["run", "demo", "--dataset", str(demo_corpus), "--limit", str(DEMO_LIMIT), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return {
        "out": out,
        "summary": json.loads((out / "summary.json").read_text()),
        "rows": pd.read_parquet(out / "utterances.parquet"),
        "report": (out / "report.md").read_text(),
    }


@pytest.mark.slow
def test_demo_recipe_all_slices_all_models(demo_run: dict[str, Any]):
    out, summary, rows = demo_run["out"], demo_run["summary"], demo_run["rows"]
    assert summary["normalizer"]["name"] == "whisper-english" and "whisper-normalizer" in summary["normalizer"]["version"]
    assert set(summary["models"]) == {"whisper-tiny.en", "whisper-base", "pocketsphinx-en-us"}
    assert set(rows["model"]) == set(summary["models"])
    for name, m in summary["models"].items():
        assert m["n_utts"] == DEMO_LIMIT and m["n_failed"] == 0, (name, m.get("failures"))
        assert m["rtfx"] is not None and m["rtfx"] > 0 and math.isfinite(m["rtfx"])
        assert m["batch_size"] and m["device"] == "cpu" and m["warmup_batches"] == 1
        for fam in ("accent", "emotion", "background", "conversation"):
            keys = [k for k in m["slices"] if k.startswith(fam + "=")]
            assert keys, (name, fam)
            for k in keys:
                s = m["slices"][k]
                assert math.isfinite(s["wer"]) and s["rtfx"] > 0
                # an interval, or (one voice in the slice, or one WER for all its voices) the reason there is none
                assert (s["ci95"] is not None and s["ci95"][0] <= s["wer"] <= s["ci95"][1]) or (s["ci95"] is None and s["not_testable"])
                sub = rows[(rows["model"] == name) & (rows[k.split("=")[0]] == k.split("=", 1)[1])]
                assert abs(s["wer"] - independent_wer(sub)) < 1e-6
        assert abs(m["wer"] - independent_wer(rows[rows["model"] == name])) < 1e-6
    # whisper-base is the stronger model on this corpus
    assert summary["models"]["whisper-base"]["wer"] < summary["models"]["pocketsphinx-en-us"]["wer"]
    assert "## WER per slice" in demo_run["report"]
    # `audit report` prints the table
    res = runner.invoke(app, ["report", str(out)])
    assert res.exit_code == 0 and "background=noise-5db" in res.output


@pytest.mark.slow
def test_resume_skips_finished_units(demo_corpus: Path, demo_run: dict[str, Any]):
    """The same recipe run again in the demo run's folder (through the API, as the CLI built it) loads no model and redoes no unit."""
    rec = with_overrides(load_recipe("demo"), dataset=str(demo_corpus), limit=DEMO_LIMIT)
    out = demo_run["out"]
    before = pd.read_parquet(out / "utterances.parquet")
    pd.testing.assert_frame_equal(before, demo_run["rows"])
    marker_times = {p: p.stat().st_mtime_ns for p in (out / "markers").rglob("*.json")}
    assert len(marker_times) >= 3
    events: list[str] = []
    second = run_recipe(rec, out, progress=lambda e, n, info: events.append(e))
    after = pd.read_parquet(out / "utterances.parquet")
    assert "unit" not in events and "loading" not in events
    assert {p: p.stat().st_mtime_ns for p in (out / "markers").rglob("*.json")} == marker_times
    pd.testing.assert_frame_equal(before, after)
    assert set(second["models"]) == set(demo_run["summary"]["models"])
    for name, m in demo_run["summary"]["models"].items():
        assert second["models"][name]["wer"] == m["wer"], name
    # a different dataset into the same directory is refused
    other = with_overrides(rec, limit=6)
    with pytest.raises(Exception, match="another dataset"):
        run_recipe(other, out)


def test_librivox_whisper_tiny_under_10_percent(librivox, tmp_path: Path):
    m = write_manifest(tmp_path / "m.jsonl", [{"audio_filepath": str(w), "text": t, "speaker": "austen-reader"} for w, t in librivox])
    rec = with_overrides(load_recipe("demo"), dataset=str(m), models=["whisper-tiny.en"])
    summary = run_recipe(rec, tmp_path / "run")
    wer = summary["models"]["whisper-tiny.en"]["wer"]
    assert wer < 0.10, wer


def test_bad_inputs_become_rows_and_run_completes(librivox, tmp_path: Path, tone_wav):
    good = librivox[1]
    d = tmp_path
    (d / "empty.wav").write_bytes(b"")
    sf.write(d / "silent.wav", np.zeros(16000, dtype=np.float32), 16000)
    sf.write(d / "nan.wav", np.full(16000, np.nan, dtype=np.float32), 16000, subtype="FLOAT")
    x, sr = sf.read(good[0], dtype="float32")
    import soxr

    sf.write(d / "stereo44k.wav", np.stack([soxr.resample(x, sr, 44100)] * 2, axis=1), 44100)
    rows = [
        {"audio_filepath": str(good[0]), "text": good[1], "utt_id": "good"},
        {"audio_filepath": "missing.wav", "text": "gone", "utt_id": "missing"},
        {"audio_filepath": "empty.wav", "text": "empty", "utt_id": "empty"},
        {"audio_filepath": "silent.wav", "text": "silence", "utt_id": "silent"},
        {"audio_filepath": "nan.wav", "text": "nan", "utt_id": "nan"},
        {"audio_filepath": "stereo44k.wav", "text": good[1], "utt_id": "stereo"},
        {"audio_filepath": str(good[0]), "utt_id": "notext"},
    ]
    m = write_manifest(d / "m.jsonl", rows)
    out = d / "run"
    res = runner.invoke(app, ["run", "demo", "--dataset", str(m), "--models", "whisper-tiny.en", "--out", str(out)])
    assert res.exit_code == 0, res.output
    s = json.loads((out / "summary.json").read_text())["models"]["whisper-tiny.en"]
    assert s["n_utts"] == 7 and s["n_failed"] == 5
    got = pd.read_parquet(out / "utterances.parquet").set_index("utt_id")
    assert pd.isna(got.loc["good", "error"]) and pd.isna(got.loc["stereo", "error"])
    assert (
        got.loc["good", "hyp_raw"] == got.loc["stereo", "hyp_raw"]
        or jiwer.wer(got.loc["good", "hyp_raw"], got.loc["stereo", "hyp_raw"]) < 0.2
    )
    for uid, frag in [("missing", "not found"), ("empty", "0 bytes"), ("silent", "silent"), ("nan", "NaN"), ("notext", "no reference")]:
        assert frag in got.loc[uid, "error"], (uid, got.loc[uid, "error"])
    assert sum(s["failures"].values()) == 5


def test_malformed_manifest_stops_before_models_load(tmp_path: Path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"audio_filepath": "a.wav", "text": "ok"}\nnot json\n')
    res = runner.invoke(app, ["run", "demo", "--dataset", str(p), "--out", str(tmp_path / "run")])
    assert res.exit_code == 2
    assert "bad.jsonl, line 2" in res.output
    assert not (tmp_path / "run" / "models").exists()


def test_unknown_model_and_recipe_key(tmp_path: Path):
    res = runner.invoke(app, ["run", "demo", "--models", "whisper-tiny", "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "did you mean 'whisper-tiny.en'" in res.output
    bad = tmp_path / "r.yaml"
    bad.write_text("dataset: x.jsonl\nmodels: [whisper-tiny.en]\nshard_sise: 3\n")
    res = runner.invoke(app, ["run", str(bad)])
    assert res.exit_code == 2 and "unknown key 'shard_sise'" in res.output


def test_every_command_has_help():
    for cmd in (
        ["--help"],
        ["run", "--help"],
        ["report", "--help"],
        ["corpus", "demo", "--help"],
        ["list", "models", "--help"],
        ["probe", "bad-reference", "--help"],
    ):
        res = runner.invoke(app, cmd)
        assert res.exit_code == 0, (cmd, res.output)


def test_list_models_shows_runnable(tmp_path: Path):
    res = runner.invoke(app, ["list", "models"], env={"COLUMNS": "250"})
    assert res.exit_code == 0
    assert "whisper-tiny.en" in res.output and "parakeet" in res.output
