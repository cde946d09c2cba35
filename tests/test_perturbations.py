"""Perturbation ladders: deterministic derived clips, options, and a real model's WER along the ladder."""

from __future__ import annotations

import json
from pathlib import Path

import jiwer
import numpy as np
import pandas as pd
import pytest
import soundfile as sf
import yaml

from audits.normalizing import get_normalizer
from audits.pipeline import run_recipe
from audits.profiles.perturbations import parse_perturbations
from audits.recipes import load_recipe
from engine.audio.shards import encode_audio
from engine.corpus import transforms as tf
from engine.data import Utterance
from engine.datasets.base import in_memory_dataset
from engine.errors import ConfigError
from engine.perturb import ops
from engine.perturb.derive import Family, derive_dataset
from tests.conftest import write_manifest

SR = 16000


def _voiced(i: int, seconds: float = 1.0) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    f0 = 110 + 20 * i
    x = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 8)) * (0.5 + 0.5 * np.sin(2 * np.pi * 4 * t))
    return (0.2 * x / np.max(np.abs(x))).astype(np.float32)


def _dataset(n: int = 3):
    utts = [
        Utterance(f"u{i}", "a b c", audio_bytes=encode_audio(_voiced(i), SR), duration_s=1.0, speaker=f"s{i}", labels={"accent": "en-us"})
        for i in range(n)
    ]
    return in_memory_dataset("t", "mem", "mem", utts, n, None)


FAMILIES = (
    Family("white-noise", "noise", (20.0, 0.0), "white"),
    Family("babble-noise", "noise", (5.0,), "babble"),
    Family("telephone", "telephone", (8.0,)),
    Family("reverb", "reverb", (0.5,)),
    Family("speed", "speed", (1.1,)),
    Family("gain", "gain", (-20.0,)),
)


def _bytes(ds) -> dict[str, bytes]:
    return {u.utt_id: u.audio_bytes for sid in ds.shard_ids for u in ds.load_shard(sid).utterances}


def test_same_seed_same_bytes_other_seed_other_noise(tmp_path: Path) -> None:
    src = _dataset()
    a = derive_dataset(src, FAMILIES, 7, tmp_path / "a")
    b = derive_dataset(src, FAMILIES, 7, tmp_path / "b")
    c = derive_dataset(src, FAMILIES, 8, tmp_path / "c")
    ba, bb, bc = _bytes(a), _bytes(b), _bytes(c)
    assert ba == bb and a.fingerprint == b.fingerprint
    assert len(ba) == 3 * (1 + 7)  # the clean clips and 7 derived ones each
    assert ba["u0~white-noise:20"] != bc["u0~white-noise:20"] and a.fingerprint != c.fingerprint
    assert ba["u0~telephone:8"] == bc["u0~telephone:8"]  # no randomness in the telephone channel
    derived = [u for u in a.load_shard("perturbed-s00000").utterances]
    u = next(x for x in derived if x.utt_id == "u1~white-noise:0")
    assert u.parent_id == "u1" and u.labels["perturbation"] == "white-noise:0" and u.labels["accent"] == "en-us"
    assert u.derivation["perturbation"]["kind"] == "noise" and u.derivation["perturbation"]["snr_db"] == 0.0
    # the SNR is what was asked for, under the corpus's own rule
    clean, _ = sf.read(__import__("io").BytesIO(_bytes(a)["u1"]), dtype="float32")
    noisy, _ = sf.read(__import__("io").BytesIO(ba["u1~white-noise:20"]), dtype="float32")
    assert tf.measured_snr_db(clean, noisy, SR) == pytest.approx(20.0, abs=0.3)  # FLAC 16-bit rounding and peak protection only


@pytest.mark.parametrize("name, kbps", [("mp3", 16), ("opus", 8)])
def test_codecs_are_deterministic_and_lossy(name: str, kbps: int) -> None:
    x = _voiced(1)
    y1, info = ops.codec(x, SR, name, kbps)
    y2, _ = ops.codec(x, SR, name, kbps)
    assert np.array_equal(y1, y2) and len(y1) == len(x) and info["kbps"] == kbps
    assert 0 < info["encoded_bytes"] < len(x) * 2 / 8  # well under the 16-bit PCM size
    assert not np.allclose(y1, x, atol=1e-3)


def test_a_finished_shard_is_reused_not_rebuilt(tmp_path: Path) -> None:
    src = _dataset()
    fams = FAMILIES[:1]
    derive_dataset(src, fams, 0, tmp_path)
    files = sorted(tmp_path.rglob("derived-*.parquet"))
    stamp = [p.stat().st_mtime_ns for p in files]
    again = derive_dataset(src, fams, 0, tmp_path)
    assert [p.stat().st_mtime_ns for p in sorted(tmp_path.rglob("derived-*.parquet"))] == stamp and again.n_utts == 9


def test_ops_measure_what_they_say() -> None:
    x = _voiced(0, 2.0)
    y, info = ops.gain(x, -20)
    assert np.allclose(y, x * 0.1, atol=1e-7) and info["clipped_samples"] == 0
    y, _ = ops.speed(x, SR, 1.25)
    assert len(y) == pytest.approx(len(x) / 1.25, abs=2)
    y, _ = ops.telephone(x, SR)
    spec = np.abs(np.fft.rfft(y)) ** 2
    freqs = np.fft.rfftfreq(len(y), 1 / SR)
    assert spec[freqs > 4000].sum() < 1e-4 * spec.sum()  # nothing above the 8 kHz channel's Nyquist
    h = ops.synthetic_rir(SR, 0.6, np.random.default_rng(0))
    edc = np.cumsum((h[1:] ** 2)[::-1])[::-1]  # Schroeder backward integral of the tail
    edc_db = 10 * np.log10(edc / edc[0])
    t = np.arange(len(edc_db)) / SR
    fit = (edc_db > -35) & (edc_db < -5)
    rt60 = -60 / np.polyfit(t[fit], edc_db[fit], 1)[0]
    assert rt60 == pytest.approx(0.6, rel=0.1)


@pytest.mark.parametrize(
    "raw, match",
    [
        ({}, r"r\.yaml: perturbations: missing required key 'families'"),
        ({"families": [{"kind": "noise", "noise": "brown", "levels": [10]}]}, r"families\[0\]\.noise: unknown noise 'brown'"),
        ({"families": [{"kind": "reverb", "levels": [9]}]}, r"families\[0\]\.levels\[0\]: 9 is outside \[0\.05, 5\]"),
        ({"families": [{"kind": "mp3"}]}, r"families\[0\]: missing required key 'levels'"),
        ({"families": [{"kind": "noise", "noise": "white", "levels": ["10"]}]}, r"families\[0\]\.levels\[0\]: expected a number"),
        (
            {"families": [{"kind": "gain", "levels": [-10]}, {"kind": "gain", "levels": [-20]}]},
            r"families\[1\]\.name: 'gain' is used twice",
        ),
        ({"families": [{"kind": "speed", "levels": [1.1]}], "seed": True}, r"perturbations\.seed: expected an integer"),
    ],
)
def test_bad_options_name_file_and_key(raw: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_perturbations(raw, "r.yaml")


@pytest.mark.slow
def test_real_model_wer_along_the_ladder_and_exact_resume(librivox: list[tuple[Path, str]], tmp_path: Path) -> None:
    """pocketsphinx on two LibriVox clips: per-level WER equals jiwer on that level's rows; resume redoes nothing."""
    rows = [
        {"audio_filepath": str(p), "text": t, "utt_id": p.stem, "speaker": p.stem.split("-")[0], "accent": acc}
        for (p, t), acc in zip(librivox[:2], ["en-us", "Japanese"])
    ]
    manifest = write_manifest(tmp_path / "m.jsonl", rows)
    recipe_path = tmp_path / "r.yaml"
    recipe_path.write_text(
        yaml.safe_dump(
            {
                "name": "ladder-test",
                "dataset": {"path": str(manifest), "reader": "nemo"},
                "models": ["pocketsphinx-en-us"],
                "shard_size": 2,
                "warmup": 0,
                "perturbations": {
                    "families": [{"kind": "noise", "noise": "white", "levels": [10, -5]}],
                    "n_boot": 100,
                    "breaking_margin": 0.05,
                },
                "profiles": {"condition_maps": [{"map": "kachru", "column": "accent"}], "n_boot": 100},
            }
        )
    )
    out = tmp_path / "run"
    summary = run_recipe(load_recipe(str(recipe_path)), out)
    lad = summary["perturbations"]["ladders"][0]
    assert lad["name"] == "white-noise" and lad["unit"] == "dB SNR"
    res = lad["models"]["pocketsphinx-en-us"]
    table = pd.read_parquet(out / "utterances.parquet")
    norm = get_normalizer("whisper-english")

    def wer(value: str) -> float:
        sub = table[table["perturbation"] == value]
        return jiwer.wer([norm(r) for r in sub["ref_raw"]], [norm(h) for h in sub["hyp_raw"]])

    assert res["baseline"]["wer"] == pytest.approx(wer("clean"), abs=1e-9)
    assert [x["wer"] for x in res["levels"]] == pytest.approx([wer("white-noise:10"), wer("white-noise:-5")], abs=1e-9)
    assert res["levels"][1]["wer"] > res["baseline"]["wer"]  # a real model gets worse in loud white noise
    assert res["slope"] == pytest.approx((res["levels"][0]["wer"] - res["levels"][1]["wer"]) / 15, abs=1e-9)
    derived = table[table["perturbation"] != "clean"]
    assert len(derived) == 4 and set(derived["parent_id"]) == {r["utt_id"] for r in rows}
    # the profiles section ran on the same rows: the source clips only, the accent gap as jiwer computes it
    prof = summary["profiles"]
    assert prof["rows"] == "source clips"
    gap = {g["label"]: g for g in prof["gap_table"]["models"]["pocketsphinx-en-us"]}["nativeness"]
    clean = table[table["perturbation"] == "clean"]

    def clip_wer(accent: str) -> float:
        sub = clean[clean["accent"] == accent]
        return jiwer.wer([norm(r) for r in sub["ref_raw"]], [norm(h) for h in sub["hyp_raw"]])

    assert gap["gap"] == pytest.approx(clip_wer("Japanese") - clip_wer("en-us"), abs=1e-9)
    assert "Robustness profiles" in (out / "report.md").read_text()
    assert "Perturbation ladders" in (out / "report.md").read_text() and "white-noise" in (out / "report.html").read_text()
    events: list[str] = []
    again = run_recipe(load_recipe(str(recipe_path)), out, progress=lambda e, n, info: events.append(e))
    assert "unit" not in events and again["perturbations"]["ladders"] == summary["perturbations"]["ladders"]
    json.dumps(summary, allow_nan=False)
