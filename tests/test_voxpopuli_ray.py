"""``voxpopuli-masking`` end to end on the Ray engine, on a tiny dataset built here in the Hugging
Face ``save_to_disk`` layout with VoxPopuli's own features (audio, raw_text, normalized_text,
speaker_id, gender, accent): the main pass and the masking probe's re-runs both run on Ray actors,
and the memorizer control leaks the masked words while Whisper does not recover all of them."""

from __future__ import annotations

import io
import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

datasets = pytest.importorskip("datasets")
pytest.importorskip("ray")

SENTENCES = (
    ("Mister Johnson arrived in Paris on the fourth of July.", "mister johnson arrived in paris on the fourth of july"),
    ("The committee approved twelve proposals from Germany.", "the committee approved twelve proposals from germany"),
    ("We met Maria Schmidt in Brussels last year.", "we met maria schmidt in brussels last year"),
    ("Seventy five members voted for the report by Anderson.", "seventy five members voted for the report by anderson"),
)


@pytest.fixture(scope="module")
def voxpopuli_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("espeak-ng") is None:
        pytest.skip("needs espeak-ng")
    from engine.backends.tts.espeak import EspeakTTS, resample

    tts = EspeakTTS()
    tts.load()
    audio, raw, norm, spk, gender, accent, ids = [], [], [], [], [], [], []
    for i, (text, normalized) in enumerate(SENTENCES):
        x, sr = tts.synthesize(text, "en-us")
        buf = io.BytesIO()
        sf.write(buf, resample(np.asarray(x, np.float32), sr, 16_000), 16_000, format="WAV")
        audio.append({"bytes": buf.getvalue(), "path": f"{i}.wav"})  # encoded as VoxPopuli ships it
        raw.append(text)
        norm.append(normalized)
        spk.append(f"spk{i % 2}")
        gender.append("female" if i % 2 else "male")
        accent.append("None")
        ids.append(f"20180101-0900-PLENARY-{i}")
    ds = datasets.Dataset.from_dict(
        {"audio_id": ids, "audio": audio, "raw_text": raw, "normalized_text": norm, "speaker_id": spk, "gender": gender, "accent": accent}
    ).cast_column("audio", datasets.Audio(sampling_rate=16_000, decode=False))
    out = tmp_path_factory.mktemp("voxpopuli") / "en-test"
    ds.save_to_disk(str(out))
    return out


@pytest.mark.slow
def test_voxpopuli_masking_recipe_on_ray_end_to_end(voxpopuli_dir: Path, tmp_path: Path) -> None:
    from audits.pipeline import run_recipe
    from audits.recipes import load_recipe, with_overrides
    from engine.engine import EngineOptions

    recipe = load_recipe("voxpopuli-masking")
    recipe = with_overrides(recipe, None, ["whisper-tiny.en", "memorizer"])
    recipe = replace(recipe, dataset=replace(recipe.dataset, path=str(voxpopuli_dir)))  # keeps reader hf and text_column raw_text
    out = tmp_path / "run"
    summary = run_recipe(recipe, out, engine=EngineOptions(kind="ray"))
    assert summary["models"]["whisper-tiny.en"]["n_utts"] == 4
    for name in ("whisper-tiny.en", "memorizer"):
        facts = json.loads((out / "models" / f"{name}.json").read_text())
        assert facts["engine"]["runner"] == "ray", facts.get("engine")
    masking = summary["probes"]["masking"]
    assert masking["n_clips_masked"] >= 1, masking
    probe_models = sorted((out / "probes" / "masking").glob("*/models/*.json"))
    assert probe_models and all(json.loads(p.read_text())["engine"]["runner"] == "ray" for p in probe_models)
    assert masking["memorizer"]["n_leaked"] >= 1 and masking["memorizer"]["n_leaked"] >= masking["whisper-tiny.en"]["n_leaked"]


def test_dataset_flag_keeps_the_recipes_reader_options(voxpopuli_dir: Path, tmp_path: Path) -> None:
    """``--dataset DIR`` replaces the hub id with a local copy read by the same reader: the recipe's
    reader options stay (VoxPopuli's text is ``raw_text``); another format, or ``--reader`` naming
    another reader, starts from that reader's defaults."""
    from audits.recipes import load_recipe, with_overrides

    recipe = load_recipe("voxpopuli-masking")
    local = with_overrides(recipe, str(voxpopuli_dir)).dataset
    assert (local.path, local.reader, dict(local.options)) == (str(voxpopuli_dir), "hf", dict(recipe.dataset.options))
    assert local.options["text_column"] == "raw_text"
    csv = tmp_path / "clips.csv"
    csv.write_text("audio_filepath,text\na.wav,hello\n")
    assert with_overrides(recipe, str(csv)).dataset.options == {}
    assert with_overrides(recipe, str(voxpopuli_dir), reader="parquet").dataset.options == {}


def test_voxpopuli_masking_through_the_cli_dataset_flag_reads_raw_text(voxpopuli_dir: Path, tmp_path: Path) -> None:
    """``audit run voxpopuli-masking --dataset DIR`` (the recipe's documented offline use): every row's
    reference is the clip's ``raw_text`` (cased, punctuated), not ``normalized_text``, and no row is an
    error; the masking probe ran on those references."""
    from typer.testing import CliRunner

    from audits.cli.main import app

    out = tmp_path / "run"
    res = CliRunner().invoke(
        app,
        ["run", "voxpopuli-masking", "--dataset", str(voxpopuli_dir), "--models", "pocketsphinx-en-us", "--limit", "2", "--out", str(out)],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    rows = pd.read_parquet(out / "utterances.parquet")
    rows = rows[rows["parent_id"].isna()] if "parent_id" in rows else rows
    assert rows["error"].isna().all(), rows["error"].tolist()
    assert sorted(rows["ref_raw"]) == sorted(text for text, _ in SENTENCES[:2])
    masking = json.loads((out / "summary.json").read_text())["probes"]["masking"]
    assert masking["status"] == "ok" and masking["n_clips_masked"] >= 1, masking
