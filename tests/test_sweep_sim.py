"""The sweep scheduling simulator (scripts/sweep_sim.py): every schedule respects the lower bound,
and the schedule the Ray runner uses (longest first, then split) is the best of those compared."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import sweep_sim


def test_schedules_against_the_lower_bound() -> None:
    models = sweep_sim.study_models(40, seed=0)
    assert len(models) == 40 and min(m.rtfx for m in models) < 60 and max(m.rtfx for m in models) > 3000
    shards = sweep_sim.shard_seconds(20_000, 64, 6.0, seed=0)
    res = {p: sweep_sim.simulate(models, shards, 8, p) for p in ("spread", "registry", "longest-first", "longest-first+split")}
    for r in res.values():
        assert r["makespan_s"] >= r["lower_bound_s"] * (1 - 1e-9)
    assert res["spread"]["loads"] > 8 * 30  # every model loaded on (almost) every GPU
    assert res["longest-first"]["loads"] == 40
    best = max(res.values(), key=lambda r: r["efficiency"])
    assert best["policy"] == "longest-first+split" and best["efficiency"] >= 0.85
    assert res["registry"]["efficiency"] < res["longest-first"]["efficiency"]


def test_one_gpu_runs_models_back_to_back() -> None:
    models = sweep_sim.study_models(5, seed=1)
    shards = [10.0] * 4
    r = sweep_sim.simulate(models, shards, 1, "longest-first+split")
    expected = sum(sweep_sim.model_seconds(m, 40.0) for m in models)
    assert abs(r["makespan_s"] - expected) < 1e-6 and r["efficiency"] > 0.999
