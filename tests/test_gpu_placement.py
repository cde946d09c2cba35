"""GPU placement proven without a GPU: Ray's logical GPUs on one machine and a multi-node
``ray.cluster_utils.Cluster``, with the ``simulated`` backend recording the device it was told and
the GPU ids Ray gave its process. Audio: seeded noise clips written as WAV files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import ray
import soundfile as sf

from engine.data import ModelSpec, WorkUnit
from engine.datasets import Dataset, open_dataset
from engine.model_registry import load_model_registry
from engine.run.ray_runner import RayRunner, init_ray
from engine.run.runner import InProcessRunner
from engine.run.store import RunStore
from tests.processes import sigkill_after_markers

REPO = Path(__file__).resolve().parents[1]


def sim_dataset(folder: Path, n: int, shard_size: int = 1, seconds: float = 1.0) -> Dataset:
    """``n`` distinct noise clips (seeded) in a NeMo manifest, opened through the normal reader."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    lines = []
    for i in range(n):
        wav = folder / f"clip{i:03d}.wav"
        sf.write(wav, (rng.normal(0, 0.1, int(16_000 * seconds))).astype(np.float32), 16_000)
        lines.append(json.dumps({"utt_id": f"u{i:03d}", "audio_filepath": str(wav), "text": "a b c", "accent": "x" if i % 2 else "y"}))
    manifest = folder / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    return open_dataset(manifest, shard_size=shard_size)


def sim(name: str, num_gpus: float | None = None, **opts: Any) -> ModelSpec:
    meta: dict[str, Any] = {"num_cpus": 0.25}
    if num_gpus is not None:
        meta["num_gpus"] = num_gpus
    return ModelSpec(name, "simulated", {"name": name, **opts}, batch_size=4, meta=meta)


def rows(out: Path) -> dict[tuple[str, str], str | None]:
    t: pa.Table = RunStore(out).consolidate()
    d = t.to_pydict()
    keys = list(zip(d["model"], d["utt_id"]))
    assert len(keys) == len(set(keys)), "duplicate (model, utt_id) rows"
    return dict(zip(keys, d["hyp_raw"]))


def baseline(ds: Dataset, specs: list[ModelSpec], out: Path) -> dict[tuple[str, str], str | None]:
    """Rows of an uninterrupted in-process run of the same models (the text does not depend on placement)."""
    plain = [ModelSpec(s.name, s.backend, {**dict(s.options), "load_s": 0.0, "rtfx": 1e6}, s.batch_size) for s in specs]
    InProcessRunner(ds, plain, RunStore(out), warmup=0).run()
    return rows(out)


def traces(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted(folder.glob("*.jsonl")) for line in p.read_text().splitlines()]


@pytest.fixture(scope="module")
def gpus8(ray_gpus8: str) -> str:
    """The session's local Ray instance with 8 logical GPUs and 4 logical CPUs (tests/conftest.py); subprocess drivers join it."""
    return ray_gpus8


def test_registry_num_gpus_reaches_the_spec(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "m.yaml").write_text(
        "models:\n  half: {backend: simulated, num_gpus: 0.5, memory_mb: 100}\n  plain: {backend: simulated}\n"
    )
    reg = load_model_registry(tmp_path)
    assert reg["half"].spec().meta["num_gpus"] == 0.5 and reg["half"].spec().meta["memory_mb"] == 100
    assert "num_gpus" not in reg["plain"].spec().meta  # unset stays unset: the runner decides
    (tmp_path / "models" / "m.yaml").write_text("models:\n  bad: {backend: simulated, num_gpus: 1.5}\n")
    with pytest.raises(Exception, match=r"model 'bad'\.num_gpus"):
        load_model_registry(tmp_path)


def test_each_gpu_actor_gets_its_own_gpu_and_device_cuda(gpus8: str, tmp_path: Path) -> None:
    ds = sim_dataset(tmp_path / "data", 4)
    specs = [sim(f"g{i}", load_s=1.0) for i in range(4)]  # no num_gpus: one GPU each because the cluster has GPUs
    facts = RayRunner(ds, specs, RunStore(tmp_path / "out"), warmup=0, workers=1).run()
    ids = []
    for s in specs:
        f = facts[s.name]
        assert f["status"] == "loaded" and f["engine"]["num_gpus_per_actor"] == 1.0
        assert f["info"]["device"] == "cuda"  # the runner told the backend
        assert len(f["info"]["gpu_ids"]) == 1 and f["info"]["gpu_ids"] == f["actor"]["gpu_ids"]
        assert f["info"]["cuda_visible_devices"] == f["info"]["gpu_ids"][0]  # Ray pinned the process
        ids.append(f["info"]["gpu_ids"][0])
    assert len(set(ids)) == 4, f"actors loaded at the same time shared a GPU: {ids}"
    assert rows(tmp_path / "out") == baseline(ds, specs, tmp_path / "base")


def test_fractional_models_share_one_gpu(gpus8: str, tmp_path: Path) -> None:
    """Two registry entries with num_gpus: 0.5 run at the same time on the same GPU."""
    (tmp_path / "cfg" / "models").mkdir(parents=True)
    trace = tmp_path / "trace"
    trace.mkdir()
    entry = f"{{backend: simulated, num_gpus: 0.5, num_cpus: 0.25, batch_size: 1, options: {{load_s: 1.0, rtfx: 4, trace_dir: '{trace}'}}}}"
    (tmp_path / "cfg" / "models" / "half.yaml").write_text(f"models:\n  half-a: {entry}\n  half-b: {entry}\n")
    reg = load_model_registry(tmp_path / "cfg")
    specs = [reg["half-a"].spec(), reg["half-b"].spec()]
    ds = sim_dataset(tmp_path / "data", 2)
    facts = RayRunner(ds, specs, RunStore(tmp_path / "out"), warmup=0, workers=1).run()
    gpu = {n: (f["actor"]["node_id"], tuple(f["info"]["gpu_ids"])) for n, f in facts.items()}
    assert gpu["half-a"] == gpu["half-b"] and len(gpu["half-a"][1]) == 1, gpu
    assert all(f["engine"]["num_gpus_per_actor"] == 0.5 for f in facts.values())
    spans = {}
    for rec in traces(trace):
        lo, hi = spans.get(rec["pid"], (rec["t"], rec["t"]))
        spans[rec["pid"]] = (min(lo, rec["t"]), max(hi, rec["t"]))
    (a0, a1), (b0, b1) = sorted(spans.values())
    assert b0 < a1, "the two half-GPU actors did not run at the same time"


def test_memory_mb_is_reserved_so_models_that_do_not_fit_together_take_turns(gpus8: str, tmp_path: Path) -> None:
    """Two half-GPU models that would share a GPU run one after the other when their memory_mb
    together exceeds the node's memory: Ray holds the second actor until the first retires."""
    from engine.run.cluster import node_capacity

    node_mb = node_capacity()["memory_mb"]
    trace = tmp_path / "trace"
    trace.mkdir()
    meta = {"num_gpus": 0.5, "num_cpus": 0.25, "memory_mb": 0.6 * node_mb}  # logical reservation; nothing that large is allocated
    specs = [ModelSpec(n, "simulated", {"name": n, "load_s": 0.5, "rtfx": 4, "trace_dir": str(trace)}, 1, meta) for n in ("big-a", "big-b")]
    ds = sim_dataset(tmp_path / "data", 2)
    facts = RayRunner(ds, specs, RunStore(tmp_path / "out"), warmup=0, workers=1).run()
    assert all(f["status"] == "loaded" for f in facts.values()), facts
    spans = {}
    for rec in traces(trace):
        lo, hi = spans.get(rec["pid"], (rec["t"], rec["t"]))
        spans[rec["pid"]] = (min(lo, rec["t"]), max(hi, rec["t"]))
    (a0, a1), (b0, b1) = sorted(spans.values())
    assert a1 <= b0, "the two actors ran at the same time although their memory does not fit together"


def test_model_too_big_for_any_node_or_unloadable_is_skipped_with_a_reason(gpus8: str, tmp_path: Path) -> None:
    ds = sim_dataset(tmp_path / "data", 2)
    big_gpu = sim("needs-9-gpus", num_gpus=9)
    big_mem = ModelSpec("needs-1pb", "simulated", {}, 4, {"num_gpus": 1.0, "num_cpus": 0.25, "memory_mb": 1e9})
    ok = sim("fits", num_gpus=1)
    hub = sim("hub-only", num_gpus=1, unavailable="weights not in this worker's cache")  # only the actor can tell
    facts = RayRunner(ds, [big_gpu, big_mem, ok, hub], RunStore(tmp_path / "out"), warmup=0).run()
    assert facts["hub-only"]["status"] == "unavailable" and "weights not in this worker's cache" in facts["hub-only"]["error"]
    assert facts["needs-9-gpus"]["status"] == "unavailable"
    assert "needs 9 GPU(s) per actor; the largest node of the Ray cluster has 8" in facts["needs-9-gpus"]["error"]
    assert facts["needs-1pb"]["status"] == "unavailable" and "memory_mb" in facts["needs-1pb"]["error"]
    assert facts["fits"]["status"] == "loaded"
    assert {m for m, _ in rows(tmp_path / "out")} == {"fits"}


DRIVER = textwrap.dedent(
    """
    import json, sys
    from engine.data import ModelSpec
    from engine.datasets import open_dataset
    from engine.run.ray_runner import RayRunner
    from engine.run.store import RunStore
    manifest, out, address, specs = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    models = [ModelSpec(s["name"], "simulated", s["options"], 4, s["meta"]) for s in specs]
    RayRunner(open_dataset(manifest, shard_size=1), models, RunStore(out), warmup=0, address=address).run()
    """
)


@pytest.mark.slow
def test_driver_sigkill_mid_gpu_sweep_then_same_command_resumes_exactly(gpus8: str, tmp_path: Path) -> None:
    ds = sim_dataset(tmp_path / "data", 8)
    specs = [sim("slow-a", num_gpus=1, rtfx=2.0), sim("slow-b", num_gpus=0.5, rtfx=2.0)]
    arg = json.dumps([{"name": s.name, "options": dict(s.options), "meta": dict(s.meta)} for s in specs])
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    out = tmp_path / "out"
    cmd = [sys.executable, str(script), ds.source, str(out), gpus8, arg]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    markers = out / "markers"
    sigkill_after_markers(proc, markers, 2, 120, pattern="**/*.json", poll_s=0.05)
    before = {p: p.stat().st_mtime_ns for p in markers.rglob("*.json")}
    assert 2 <= len(before) < 16, "the kill should land mid-sweep"
    again = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 0, again.stderr[-3000:]
    assert all(p.stat().st_mtime_ns == t for p, t in before.items()), "a finished unit was redone"
    assert len(list(markers.rglob("*.json"))) == 16
    assert rows(out) == baseline(ds, specs, tmp_path / "base")


@pytest.mark.slow
def test_node_removed_mid_sweep_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    """Three nodes (a CPU head, two 1-GPU workers); one worker is removed while its actors run."""
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0})
    try:
        doomed = cluster.add_node(num_cpus=2, num_gpus=1)
        cluster.add_node(num_cpus=2, num_gpus=1)
        cluster.wait_for_nodes()
        init_ray(cluster.address)
        ds = sim_dataset(tmp_path / "data", 12)
        specs = [sim("m1", num_gpus=1, rtfx=4.0), sim("m2", num_gpus=1, rtfx=4.0), sim("too-big", num_gpus=2)]
        out = tmp_path / "out"
        removed = threading.Event()

        def remove_when_started() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and len(list((out / "markers").rglob("*.json")) if (out / "markers").is_dir() else []) < 3:
                time.sleep(0.05)
            cluster.remove_node(doomed)
            removed.set()

        killer = threading.Thread(target=remove_when_started, daemon=True)
        killer.start()
        facts = RayRunner(ds, specs, RunStore(out), warmup=0, max_retries=3).run()
        killer.join(timeout=60)
        assert removed.is_set()
        assert facts["too-big"]["status"] == "unavailable" and "largest node of the Ray cluster has 1" in facts["too-big"]["error"]
        restarts = sum(facts[m]["engine"]["actor_restarts"] for m in ("m1", "m2"))
        assert restarts >= 1, "removing a node with running actors should have restarted one"
        assert all(not facts[m]["failed_units"] for m in ("m1", "m2"))
        got = rows(out)
        assert len(got) == 2 * 12
        assert got == baseline(ds, specs[:2], tmp_path / "base")
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_unit_markers_cover_every_shard(tmp_path: Path) -> None:
    """The store's notion of done is what the resume test relies on (one marker per unit)."""
    ds = sim_dataset(tmp_path / "data", 3)
    spec = ModelSpec("cpu-sim", "simulated", {}, 4)
    InProcessRunner(ds, [spec], RunStore(tmp_path / "out"), warmup=0).run()
    store = RunStore(tmp_path / "out")
    assert all(store.is_done(WorkUnit("cpu-sim", s)) for s in ds.shard_ids)
