"""Reliability class 17: inputs found only after the models ran.

What is knowable before any model loads is checked before any model loads, and a refused run
writes nothing under ``--out`` (a new folder is not even created; an existing one is left as it
was): the identities of every source and derived clip (an id twice in a dataset from any reader,
a derived id equal to a source id, two levels of a family that format to one id), option combinations (a condition map writing a column
the rows already have, babble noise over a one-clip shard, perturbations of a predictions-only
dataset), and a run directory of another dataset (refused before any clip is derived into it).
Before this, each of these ran the models and then failed (a doubled row, a refused map) or wrote
derived shards into the refused folder.

Cached derived data is reused only while its recorded digest holds: a truncated or edited
derived shard of a ``perturbations`` block, or of the bad-reference probe's planted copy, is
rebuilt on resume (a truncated one gave a raw pyarrow traceback, or an error with no way out).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.reliability_env import Env, audit, refused_before_work, speech_clips, write_dataset

GAIN = "perturbations: {families: [{kind: gain, levels: [-6]}]}\n"


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    return Env(tmp_path, monkeypatch)


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` with its size and modification time."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


def _refused_cleanly(res: object, env: Env, out: Path, *needles: str) -> None:
    refused_before_work(res, env, out, *needles)
    assert not out.exists(), f"the refused run wrote under --out: {sorted(_tree(out)) if out.exists() else ''}"


def test_a_derived_id_equal_to_a_source_id_is_refused_before_any_model_loads(env: Env) -> None:
    data = write_dataset(env.tmp / "d", speech_clips(3))
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    rows[2]["utt_id"] = "u000~gain:-6"  # what clip u000 becomes at gain -6
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = env.tmp / "out"
    _refused_cleanly(audit("run", env.recipe(data, GAIN), "--out", out), env, out, "'u000~gain:-6'", "the id of a clip of the dataset")


def test_two_levels_that_format_to_one_id_are_refused_before_any_model_loads(env: Env) -> None:
    data = write_dataset(env.tmp / "d", speech_clips(3))
    out = env.tmp / "out"
    res = audit("run", env.recipe(data, "perturbations: {families: [{kind: gain, levels: [-6, -6.0000001]}]}\n"), "--out", out)
    _refused_cleanly(res, env, out, "perturbations.families[0]", "both become 'gain:-6'")


def test_babble_over_a_shard_of_one_clip_is_refused_before_anything_is_derived(env: Env) -> None:
    data = write_dataset(env.tmp / "d", speech_clips(5))  # shard_size 4: the second shard holds one clip
    out = env.tmp / "out"
    res = audit("run", env.recipe(data, "perturbations: {families: [{kind: noise, noise: babble, levels: [10]}]}\n"), "--out", out)
    _refused_cleanly(res, env, out, "shard s00001 holds one clip", "shard_size")


def test_perturbations_of_a_predictions_only_dataset_are_refused(env: Env) -> None:
    preds = env.tmp / "preds"
    preds.mkdir()
    (preds / "m.jsonl").write_text(
        "".join(json.dumps({"audio_filepath": f"u{i}", "text": "a b", "pred_text": "a b"}) + "\n" for i in range(3))
    )
    out = env.tmp / "out"
    _refused_cleanly(audit("run", env.recipe(preds, GAIN, models="[m]"), "--out", out), env, out, "predictions only")


def test_a_condition_map_writing_a_column_the_rows_have_is_refused_before_any_model_loads(env: Env) -> None:
    clips = [dict(c, background="clean", background_type="studio") for c in speech_clips(3)]
    data = write_dataset(env.tmp / "d", clips)
    out = env.tmp / "out"
    res = audit("run", env.recipe(data, "profiles: {condition_maps: [{map: background, column: background}], n_boot: 20}\n"), "--out", out)
    _refused_cleanly(res, env, out, "profiles.condition_maps[0]", "background_type")


def test_a_run_directory_of_another_dataset_gets_no_derived_clips_written_into_it(env: Env) -> None:
    a = write_dataset(env.tmp / "a", speech_clips(3))
    b = write_dataset(env.tmp / "b", speech_clips(3, seed=10))
    out = env.tmp / "out"
    assert audit("run", env.recipe(a), "--out", out).exit_code == 0
    before, loads = _tree(out), env.loads()
    res = audit("run", env.recipe(b, GAIN, name="other"), "--out", out)
    assert res.exit_code == 2 and "holds results for another dataset" in " ".join(res.output.split()), res.output
    assert env.loads() == loads
    assert _tree(out) == before, "the refused run wrote into the other run's directory"


def _derived_shard(out: Path) -> Path:
    (shard,) = sorted((out / "derived").rglob("derived-*.parquet"))
    return shard


@pytest.mark.parametrize("damage", ["truncate", "edit"])
def test_a_damaged_cached_derived_shard_is_rebuilt_on_resume(env: Env, damage: str) -> None:
    data = write_dataset(env.tmp / "d", speech_clips(3))
    out = env.tmp / "out"
    recipe = env.recipe(data, GAIN)
    assert audit("run", recipe, "--out", out).exit_code == 0
    shard = _derived_shard(out)
    good = shard.read_bytes()
    rows = pd.read_parquet(out / "utterances.parquet").sort_values("utt_id").reset_index(drop=True)
    if damage == "truncate":
        shard.write_bytes(good[: len(good) // 2])
    else:  # same size, one audio byte changed: readable, silently other audio
        mid = len(good) // 2
        shard.write_bytes(good[:mid] + bytes([good[mid] ^ 0xFF]) + good[mid + 1 :])
    res = audit("run", recipe, "--out", out)
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output
    assert shard.read_bytes() == good, "the damaged shard must be rebuilt (deterministically: the same bytes)"
    again = pd.read_parquet(out / "utterances.parquet").sort_values("utt_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(rows.drop(columns=["infer_s"]), again.drop(columns=["infer_s"]))


def test_a_truncated_planted_copy_of_the_bad_reference_probe_is_rebuilt(env: Env) -> None:
    data = write_dataset(env.tmp / "d", speech_clips(6))
    out = env.tmp / "out"
    probes = "probes: {bad_reference: {panel: [sim-a, sim-b], min_eligible_panel: 2, reference_errors: {fraction: 0.5}}}\n"
    recipe = env.recipe(data, probes, models="[sim-a, sim-b]")
    assert audit("run", recipe, "--out", out).exit_code == 0
    first = json.loads((out / "summary.json").read_text())["probes"]["bad_reference"]
    (shard,) = sorted((out / "probes").rglob("dataset/shard-*.parquet"))
    good = shard.read_bytes()
    shard.write_bytes(good[: len(good) // 2])
    res = audit("run", recipe, "--out", out)
    assert res.exit_code == 0, res.output
    assert shard.read_bytes() == good
    assert json.loads((out / "summary.json").read_text())["probes"]["bad_reference"] == first


def test_a_duplicate_id_from_any_reader_is_refused_before_any_model_loads(env: Env) -> None:
    """A plug-in reader's dataset (here built by hand) holding one id in two shards: refused by the run itself."""
    from audits.pipeline import run_audit
    from audits.recipes import load_recipe
    from engine.data import Shard, Utterance
    from engine.datasets import Dataset
    from engine.errors import ConfigError

    data = write_dataset(env.tmp / "d", speech_clips(2))
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    utts = [Utterance(str(r["utt_id"]), r["text"], audio_path=r["audio_filepath"]) for r in rows]
    shards = {"s0": Shard("s0", (utts[0],)), "s1": Shard("s1", (utts[1], Utterance("u000", "a b", audio_path=rows[1]["audio_filepath"])))}
    ds = Dataset(name="plug", source="plugin://x", reader="plug", shard_ids=list(shards), _loader=shards.__getitem__, n_utts=3)
    out = env.tmp / "out"
    with pytest.raises(ConfigError, match="utt_id 'u000' appears twice"):
        run_audit(load_recipe(str(env.recipe(data))), out, dataset=ds)
    assert env.loads() == 0 and not out.exists()
