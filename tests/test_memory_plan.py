"""Bounded memory in one process: models packed into load groups under a budget or a count, one
group resident at a time, rows identical to loading everything at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.data import ModelSpec
from engine.errors import ConfigError
from engine.run.memory_plan import estimate_mb, plan_groups
from engine.run.runner import InProcessRunner
from engine.run.store import RunStore
from tests.test_gpu_placement import rows, sim_dataset


def spec(name: str, **meta: float | None) -> ModelSpec:
    return ModelSpec(name, "simulated", {}, 4, dict(meta))


def test_estimates_follow_params_and_dtype() -> None:
    assert estimate_mb(spec("a", memory_mb=123)) == 123
    fp16 = ModelSpec("b", "transformers", {"dtype": "float16"}, 4, {"params_m": 1000})
    int8 = ModelSpec("c", "faster-whisper", {"compute_type": "int8"}, 4, {"params_m": 1000})
    fp32 = ModelSpec("d", "nemo", {}, 4, {"params_m": 1000})
    assert estimate_mb(fp32) == 2 * estimate_mb(fp16) == 4 * estimate_mb(int8)


def test_groups_respect_budget_count_and_order() -> None:
    specs = [spec(f"m{i}", memory_mb=100) for i in range(5)]
    assert [g.models for g in plan_groups(specs, budget_mb=250)] == [("m0", "m1"), ("m2", "m3"), ("m4",)]
    assert [len(g.models) for g in plan_groups(specs, max_models=3, budget_mb=1e6)] == [3, 2]
    assert len(plan_groups(specs, budget_mb=1e6)) == 1  # everything fits: the old behaviour
    big = [spec("small", memory_mb=10), spec("huge", memory_mb=5000), spec("small2", memory_mb=10)]
    assert [g.models for g in plan_groups(big, budget_mb=1000)] == [("small",), ("huge",), ("small2",)]
    with pytest.raises(ConfigError, match="max_models_loaded"):
        plan_groups(specs, max_models=0)
    with pytest.raises(ConfigError, match="memory_budget_mb"):
        plan_groups(specs, budget_mb=-1)


def _peak_resident(trace: Path) -> int:
    events = sorted((json.loads(line) for p in trace.glob("*.jsonl") for line in p.read_text().splitlines()), key=lambda r: r["t"])
    resident = peak = 0
    for e in events:
        resident += {"load": 1, "close": -1}.get(e["event"], 0)
        peak = max(peak, resident)
    return peak


def _specs(trace: Path) -> list[ModelSpec]:
    trace.mkdir()
    return [
        ModelSpec(f"s{i}", "simulated", {"name": f"s{i}", "seed": i, "memory_mb": 20, "trace_dir": str(trace)}, 2, {"memory_mb": 20})
        for i in range(3)
    ]


def test_one_model_at_a_time_gives_identical_rows(tmp_path: Path) -> None:
    ds = sim_dataset(tmp_path / "data", 6, shard_size=2)
    facts = InProcessRunner(ds, _specs(tmp_path / "t1"), RunStore(tmp_path / "one"), warmup=0, max_models_loaded=1).run()
    InProcessRunner(ds, _specs(tmp_path / "t3"), RunStore(tmp_path / "all"), warmup=0).run()
    assert rows(tmp_path / "one") == rows(tmp_path / "all")
    assert [facts[f"s{i}"]["load_group"]["index"] for i in range(3)] == [0, 1, 2]
    assert _peak_resident(tmp_path / "t1") == 1
    assert _peak_resident(tmp_path / "t3") == 3  # the default, when everything fits: all loaded at once


def test_budget_splits_groups_and_resume_skips_done_models(tmp_path: Path) -> None:
    ds = sim_dataset(tmp_path / "data", 4, shard_size=2)
    specs = _specs(tmp_path / "t")
    facts = InProcessRunner(ds, specs, RunStore(tmp_path / "out"), warmup=0, memory_budget_mb=45).run()
    assert [facts[f"s{i}"]["load_group"]["index"] for i in range(3)] == [0, 0, 1]
    assert _peak_resident(tmp_path / "t") == 2
    again = InProcessRunner(ds, specs, RunStore(tmp_path / "out"), warmup=0, memory_budget_mb=45)
    assert again.pending() == []
