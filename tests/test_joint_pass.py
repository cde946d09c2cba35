"""A recipe's ASR pass and its sections' SV and SER passes over the same dataset run as one engine run.

* one decode per shard: every clip is decoded once for all three passes (in-process);
* the rows of every kind, and the speaker and emotion sections of ``summary.json`` (timings
  aside), equal a run that hands each pass to the engine separately;
* resume: with one SV part deleted, a re-run computes that unit only;
* the store facade sends each call to the store of the unit's kind;
* on Ray (8 logical GPUs): one runner run holds the ASR, SV and SER actors together, and the
  sections compute nothing afterwards.

Audio: six Flite clips (two voices). The ASR model is the ``simulated`` backend (a temporary
registry); the SV and SER backends are the real resemblyzer and prosody in-process, and the
``simulated-sv``/``simulated-ser`` stand-ins (GPU-capable) on Ray.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import audits.pipeline
import engine.model_registry
import engine.run.runner
from audits.pipeline import run_audit
from audits.recipes import parse_recipe
from engine.data import ModelSpec, WorkUnit
from engine.engine import EngineOptions
from engine.errors import ConfigError
from engine.run.joint_pass import PassStores
from tests.flite_corpus import build_flite_corpus

TIMING = {"infer_s", "rtfx", "load_s", "wall_s", "first_actor_ready_s", "last_unit_written_s", "generated_at", "elapsed_s"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # ids
    return build_flite_corpus(tmp_path_factory.mktemp("joint-corpus"), lambda v, k: f"{v}-{k}", emotion="neutral")


@pytest.fixture()
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry with one simulated ASR model (deterministic text from the samples, no weights)."""
    cfg = tmp_path / "configs" / "models"
    cfg.mkdir(parents=True)
    (cfg / "sim.yaml").write_text("models:\n  sim-a: {backend: simulated, options: {rtfx: 1000}, batch_size: 2, params_m: 10}\n")
    monkeypatch.setenv("AUDIT_CONFIG_DIR", str(tmp_path / "configs"))


def _recipe(corpus: Path, sv: str = "resemblyzer", ser: str = "prosody") -> Any:
    sv_opts = {"resemblyzer": {"device": "cpu", "num_threads": 1}} if sv == "resemblyzer" else {}
    return parse_recipe(
        {
            "name": "joint",
            "dataset": str(corpus),
            "models": ["sim-a"],
            "shard_size": 2,
            "scoring": {"n_boot": 10},
            "speaker": {"backends": [sv], "batch_size": 2, "max_per_class": None, "backend_options": sv_opts},
            "emotion": {"backends": [ser], "batch_size": 2},
        },
        "joint.yaml",
    )


def _counting_decode(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count the runners' decodes per clip (``decode_shard`` calls ``engine.run.runner.decode`` for every clip)."""
    seen: Counter[str] = Counter()
    real = engine.run.runner.decode

    def decode(u: Any, *args: Any, **kwargs: Any) -> Any:
        seen[u.utt_id] += 1
        return real(u, *args, **kwargs)

    monkeypatch.setattr(engine.run.runner, "decode", decode)
    return seen


def _drop_timing(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _drop_timing(v) for k, v in obj.items() if k not in TIMING}
    if isinstance(obj, list):
        return [_drop_timing(v) for v in obj]
    return obj


def _rows(out: Path, table: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["model"], r["utt_id"]): {k: v for k, v in r.items() if k not in TIMING} for r in pq.read_table(out / table).to_pylist()}


@pytest.mark.slow
def test_one_decode_per_shard_same_rows_and_summary_then_exact_resume(
    corpus: Path, registry: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the passes one after another (each decodes every clip), as before the joint run
    with monkeypatch.context() as m:
        m.setattr(audits.pipeline, "joint_passes", lambda *a, **k: [])
        apart = _counting_decode(m)
        run_audit(_recipe(corpus), tmp_path / "apart")
    assert set(apart.values()) == {3}, apart  # ASR, SV and SER each decoded every clip

    # one engine run: each clip decoded once for the three passes
    seen = _counting_decode(monkeypatch)
    starts: list[int] = []
    units: list[tuple[str, str]] = []

    def progress(event: str, n: int, info: dict[str, Any]) -> None:
        if event == "start":
            starts.append(n)
        if event == "unit":
            units.append((str(info["model"]), str(info["shard"])))

    joint = run_audit(_recipe(corpus), tmp_path / "joint", progress=progress).summary
    assert len(seen) == 6 and set(seen.values()) == {1}, seen
    assert starts == [9, 0, 0]  # 3 shards x 3 backends in one run; the sections' passes find everything finished
    assert Counter(m for m, _ in units) == {"sim-a": 3, "resemblyzer": 3, "prosody": 3}

    # rows of every kind equal the separate passes' (embeddings to float tolerance)
    a, b = tmp_path / "apart", tmp_path / "joint"
    assert _rows(a, "utterances.parquet") == _rows(b, "utterances.parquet")
    ea, eb = _rows(a, "embeddings.parquet"), _rows(b, "embeddings.parquet")
    assert ea.keys() == eb.keys() and len(ea) == 6
    for key in ea:
        np.testing.assert_allclose(ea[key].pop("embedding"), eb[key].pop("embedding"), atol=1e-6)
        assert ea[key] == eb[key]
    assert _rows(a, "emotion.parquet") == _rows(b, "emotion.parquet")
    # the sections' summaries, timings aside, are the same: status 'loaded', device, info, units run, figures
    before = json.loads((a / "summary.json").read_text().replace(str(a), str(b)))  # paths name the run folder
    assert _drop_timing(before["speaker"]) == _drop_timing(joint["speaker"])
    assert _drop_timing(before["emotion"]) == _drop_timing(joint["emotion"])
    assert joint["speaker"]["resemblyzer"]["facts"]["status"] == "loaded" and joint["speaker"]["resemblyzer"]["facts"]["n_units_run"] == 3
    assert joint["emotion"]["prosody"]["facts"]["n_units_run"] == 3
    assert _drop_timing(before["models"]) == _drop_timing(joint["models"])

    # resume: one SV part deleted; only that unit is computed, from its shard's clips only
    shard = sorted((b / "embeddings" / "resemblyzer").glob("*.parquet"))[1]
    shard.unlink()
    seen.clear()
    units.clear()
    starts.clear()
    again = run_audit(_recipe(corpus), b, progress=progress).summary
    assert units == [("resemblyzer", units[0][1])] and starts == [1, 0, 0]
    assert sum(seen.values()) == 2 and set(seen.values()) == {1}  # the two clips of that shard
    assert again["speaker"]["resemblyzer"]["facts"]["n_units_run"] == 1
    assert again["emotion"]["prosody"]["facts"]["status"] == "done" and again["emotion"]["prosody"]["facts"]["n_units_run"] == 0
    assert _rows(b, "embeddings.parquet").keys() == eb.keys()


def test_speaker_and_emotion_without_asr_share_one_run(corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A recipe with no ASR model: the SV and SER passes still run as one engine run, each clip decoded once."""
    seen = _counting_decode(monkeypatch)
    starts: list[int] = []
    recipe = parse_recipe(
        {
            "name": "sv-ser",
            "dataset": str(corpus),
            "models": [],
            "shard_size": 3,
            "speaker": {"backends": ["simulated-sv"], "max_per_class": None},
            "emotion": {"backends": ["simulated-ser"]},
        },
        "sv-ser.yaml",
    )
    summary = run_audit(recipe, tmp_path / "run", progress=lambda e, n, i: starts.append(n) if e == "start" else None).summary
    assert starts == [4, 0, 0] and len(seen) == 6 and set(seen.values()) == {1}, (starts, seen)
    assert summary["speaker"]["simulated-sv"]["facts"]["status"] == "loaded"
    assert summary["emotion"]["simulated-ser"]["facts"]["n_units_run"] == 2 and summary["emotion"]["simulated-ser"]["n_utts"] == 6


def test_pass_stores_dispatch_by_kind(tmp_path: Path) -> None:
    """Each unit's part, marker and facts sit where a pass of its kind alone puts them; names must be distinct."""
    specs = [
        ModelSpec("a", "simulated", {}, 1, {}),
        ModelSpec("v", "simulated-sv", {}, 1, {}, kind="sv"),
        ModelSpec("e", "simulated-ser", {}, 1, {}, kind="ser"),
    ]
    stores = PassStores.of(tmp_path, specs)
    assert stores.part_path(WorkUnit("a", "s0")) == tmp_path / "parts" / "a" / "s0.parquet"
    assert stores.part_path(WorkUnit("v", "s0")) == tmp_path / "embeddings" / "v" / "s0.parquet"
    assert stores.marker_path(WorkUnit("e", "s0")) == tmp_path / "markers-embed" / "ser" / "e" / "s0.json"
    stores.write_model_facts("v", {"model": "v", "status": "loaded"})
    assert (tmp_path / "models-embed" / "sv" / "v.json").exists()
    assert set(stores.read_model_facts()) == {"v"}
    with pytest.raises(ConfigError, match="not part of this joint run"):
        stores.marker_path(WorkUnit("x", "s0"))
    with pytest.raises(ConfigError, match="distinct backend names across pass kinds; repeated: a"):
        PassStores.of(tmp_path, [*specs, ModelSpec("a", "simulated-sv", {}, 1, {}, kind="sv")])


@pytest.fixture(scope="module")
def gpus8(ray_gpus8: str) -> str:
    """The session's local Ray instance with 8 logical GPUs and 4 logical CPUs (tests/conftest.py)."""
    return ray_gpus8


@pytest.mark.slow
def test_ray_one_run_holds_asr_sv_and_ser_actors(corpus: Path, registry: None, gpus8: Any, tmp_path: Path) -> None:
    starts: list[int] = []

    def progress(event: str, n: int, info: dict[str, Any]) -> None:
        if event == "start":
            starts.append(n)

    result = run_audit(
        _recipe(corpus, "simulated-sv", "simulated-ser"), tmp_path / "run", progress=progress, engine=EngineOptions(kind="ray")
    )
    assert starts == [9, 0, 0]  # one runner run for the three passes; the sections computed nothing afterwards
    facts = {
        "sim-a": result.summary["models"]["sim-a"],
        "simulated-sv": result.summary["speaker"]["simulated-sv"]["facts"],
        "simulated-ser": result.summary["emotion"]["simulated-ser"]["facts"],
    }
    for name, f in facts.items():
        assert f["engine"]["runner"] == "ray" and f["engine"]["units_written"] == 3, name
    # the first actors of the three models were started together (every model gets an actor before
    # any gets a second) and each holds its own logical GPU, told cuda
    first = {name: f["engine"]["actors"][0] for name, f in facts.items()}
    gpus = [tuple(a["gpu_ids"]) for a in first.values()]
    assert all(len(g) == 1 for g in gpus) and len(set(gpus)) == 3, first
    assert {a["device"] for a in first.values()} == {"cuda"}
    assert result.summary["speaker"]["simulated-sv"]["facts"]["n_units_run"] == 3
