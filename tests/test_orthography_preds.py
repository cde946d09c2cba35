"""Orthographic switch from prediction files alone: the published table, the in-run probe, the command."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from audits.asr.stats import wilson_interval
from audits.cli.main import app
from audits.probes.orthography import switch_from_arm_counts
from audits.probes.predictions import orthography_from_prediction_dir
from audits.probes.run import OrthographyConfig, _orthography
from engine.datasets.base import open_dataset
from engine.errors import ConfigError
from engine.run.runner import prediction_rows

PUBLISHED = Path(__file__).resolve().parent / "fixtures" / "hume-ortho-switch" / "ortho_switch.json"


def test_reproduces_the_published_switch_table() -> None:
    """Every model of HumeAI/asr-benchmark-optimization's repro/data/ortho_switch.json, from its arm counts."""
    table = json.loads(PUBLISHED.read_text())
    n = 0
    for family, spec in table.items():
        for model, pub in spec["results"].items():
            arms = {a: (h, c) for a, (h, c) in pub["arms"].items()}
            ours = switch_from_arm_counts(arms, spec["min_per_arm"])
            assert ours["status"] == "ok", (family, model)
            assert ours["switch"] == pytest.approx(pub["switch"], abs=1e-12), (family, model)
            rates = {a: h / c for a, (h, c) in arms.items()}
            if list(rates.values()).count(min(rates.values())) == 1:
                assert ours["limiting_arm"] == pub["limiting_arm"], (family, model)
                lo, hi = ours["ci95"]
            else:  # a tie: we name the arm with more clips, the published code the first arm; same switch
                lo, hi = wilson_interval(*arms[pub["limiting_arm"]])
            # the published code uses z = 1.96, we use the exact 97.5% normal quantile (1.959964)
            assert lo == pytest.approx(pub["lo"], abs=2e-5) and hi == pytest.approx(pub["hi"], abs=2e-5), (family, model)
            n += 1
    assert n == 89


def test_switch_needs_two_arms_at_the_minimum() -> None:
    assert switch_from_arm_counts({"a": (4, 4), "b": (1, 2)}, 3)["status"] == "single-arm"
    assert switch_from_arm_counts({"a": (1, 2), "b": (1, 2)}, 3)["status"] == "insufficient-data"
    r = switch_from_arm_counts({"a": (3, 4), "b": (1, 4)}, 3)
    assert r["switch"] == 0.25 and r["limiting_arm"] == "b"


@pytest.mark.parametrize("families,pool,min_per_arm", [(None, False, 3), (["digits-words", "honorific-mr", "percent"], True, 2)])
def test_agrees_with_the_in_run_probe(voxpopuli_preds: Path, families: list[str] | None, pool: bool, min_per_arm: int) -> None:
    from_files = orthography_from_prediction_dir(voxpopuli_preds, families=families, pool=pool, min_clips_per_arm=min_per_arm)
    ds = open_dataset(voxpopuli_preds)
    models = sorted(ds.predictions)
    base = pd.DataFrame([r for m in models for shard in ds.iter_shards() for r in prediction_rows(ds, m, shard)])
    in_run = _orthography(OrthographyConfig(min_per_arm, pool, tuple(families) if families else None), ds, base, models)
    assert from_files == in_run
    assert {m for m in from_files if m != "settings"} == set(models)
    assert from_files["whisper-small.en"]["switch"] == 1.0 and from_files["whisper-small.en"]["n"] == 9


def test_command_writes_json_and_names_bad_input(voxpopuli_preds: Path, tmp_path: Path) -> None:
    out = tmp_path / "ortho.json"
    res = CliRunner().invoke(
        app,
        [
            "probe",
            "orthography",
            "--preds",
            str(voxpopuli_preds),
            "--min-per-arm",
            "3",
            "--models",
            "whisper-tiny.en,wav2vec2-base-960h",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert set(data) == {"whisper-tiny.en", "wav2vec2-base-960h", "settings"}
    assert data["wav2vec2-base-960h"]["limiting_arm"] == "digits" and data["wav2vec2-base-960h"]["switch"] == 0.0
    lo, hi = data["whisper-tiny.en"]["ci95"]
    assert (lo, hi) == pytest.approx(wilson_interval(8, 8))
    bad = CliRunner().invoke(app, ["probe", "orthography", "--preds", str(voxpopuli_preds), "--families", "nope"])
    assert bad.exit_code != 0 and "unknown orthographic family" in bad.output
    with pytest.raises(ConfigError, match="no prediction file"):
        orthography_from_prediction_dir(voxpopuli_preds, models=["missing"])
