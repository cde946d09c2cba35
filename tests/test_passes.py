"""Every pass kind on both runners: SV and SER passes run in-process and on Ray actors give the
same rows (embeddings to float tolerance, emotion outputs to float tolerance), and on 8 logical
GPUs the SV and SER actors each get their own GPU and ``device=cuda``.

Audio: six Flite clips (two voices), so the real backends (resemblyzer, prosody) embed speech.
One Ray instance with 8 logical GPUs and 4 logical CPUs serves the module.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from engine.data import ModelSpec, WorkUnit
from engine.datasets import open_dataset
from engine.engine import EngineOptions
from engine.errors import ConfigError
from engine.run.embed_runner import EmbedSpec, run_embed_backends
from engine.run.passes import split_placement
from engine.run.store import RunStore
from tests.flite_corpus import build_flite_corpus
from tests.processes import sigkill_after_markers

REPO = Path(__file__).resolve().parents[1]

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # ids with a slash: file names come from the shard, never the id
    return build_flite_corpus(tmp_path_factory.mktemp("passes-corpus"), lambda v, k: f"{v}/{k}")


@pytest.fixture(scope="module")
def gpus8(ray_gpus8: str) -> str:
    """The session's local Ray instance with 8 logical GPUs and 4 logical CPUs (tests/conftest.py); subprocess drivers join it."""
    return ray_gpus8


SPECS = [
    EmbedSpec("resemblyzer", "resemblyzer", "sv", {"device": "cpu", "num_threads": 1}, batch_size=2),
    EmbedSpec("sim-sv", "simulated-sv", "sv", {"dim": 24}, batch_size=2, meta={"num_cpus": 0.25}),
    EmbedSpec("sim-sv-b", "simulated-sv", "sv", {"dim": 24, "name": "b"}, batch_size=2, meta={"num_cpus": 0.25}),
    EmbedSpec("prosody", "prosody", "ser", {}, batch_size=2, meta={"num_gpus": 0.0}),
    EmbedSpec("sim-ser", "simulated-ser", "ser", {}, batch_size=2, meta={"num_cpus": 0.25}),
]


def _table(out: Path, kind: str) -> dict[tuple[str, str], dict[str, Any]]:
    t = pq.read_table(out / ("embeddings.parquet" if kind == "sv" else "emotion.parquet")).to_pylist()
    return {(r["model"], r["utt_id"]): r for r in t}


@pytest.mark.slow
def test_sv_ser_rows_equal_inprocess_and_ray_and_gpu_actors_are_distinct(corpus: Path, gpus8: Any, tmp_path: Path) -> None:
    ds = open_dataset(corpus, shard_size=2)
    local = run_embed_backends(ds, SPECS, tmp_path / "local", warmup=0)
    remote = run_embed_backends(open_dataset(corpus, shard_size=2), SPECS, tmp_path / "ray", warmup=0, engine=EngineOptions(kind="ray"))
    # the same rows, whichever runner ran the pass
    for kind in ("sv", "ser"):
        a, b = _table(tmp_path / "local", kind), _table(tmp_path / "ray", kind)
        assert a.keys() == b.keys() and len(a) == 6 * (3 if kind == "sv" else 2)
        for key in a:
            assert a[key]["error"] == b[key]["error"], key
            if kind == "sv":
                assert a[key]["embedding"] is not None, key
                np.testing.assert_allclose(a[key]["embedding"], b[key]["embedding"], atol=1e-5)
            else:
                for col in ("posteriors", "dimensions", "descriptors"):
                    x, y = json.loads(a[key][col] or "{}"), json.loads(b[key][col] or "{}")
                    assert x.keys() == y.keys()
                    np.testing.assert_allclose([x[k] for k in x], [y[k] for k in x], rtol=1e-6, atol=1e-9)
    # facts say which runner ran each pass, and where
    for name in ("resemblyzer", "sim-sv", "sim-sv-b", "prosody", "sim-ser"):
        assert local[name]["engine"]["runner"] == "inprocess" and local[name]["engine"]["pid"] > 0
        assert remote[name]["engine"]["runner"] == "ray"
        assert remote[name]["n_utts"] == 6 and remote[name]["n_units_run"] == 3
    actors = {n: remote[n]["engine"]["actors"] for n in ("sim-sv", "sim-sv-b", "sim-ser", "resemblyzer", "prosody")}
    assert all(len(a) >= 1 and a[0]["host"] and a[0]["pid"] for a in actors.values())
    # 8 logical GPUs: every SV and SER stand-in actor holds a GPU and was told cuda; the two SV
    # backends, whose actors live at the same time, hold different GPUs (the SER pass runs after
    # the SV pass, so it may reuse a GPU the SV pass gave back)
    gpu = {n: [g for a in actors[n] for g in a["gpu_ids"]] for n in ("sim-sv", "sim-sv-b", "sim-ser")}
    assert all(len(ids) == len(actors[n]) >= 1 for n, ids in gpu.items()), actors
    assert not set(gpu["sim-sv"]) & set(gpu["sim-sv-b"]), actors
    assert all(a["device"] == "cuda" for n in gpu for a in actors[n])
    assert remote["sim-sv"]["device"] == "cuda" and local["sim-sv"]["device"] == "cpu"
    # an explicit device: cpu (and num_gpus: 0) keeps a backend off the GPUs
    assert all(a["gpu_ids"] == [] for a in actors["resemblyzer"] + actors["prosody"])
    assert remote["resemblyzer"]["device"] == "cpu"


def test_sv_pass_unit_contract_resume_and_changed_audio(corpus: Path, tmp_path: Path) -> None:
    """Markers carry ids digest, clip digests and settings; resume runs nothing; a changed clip is redone, alone."""
    spec = [EmbedSpec("sim-sv", "simulated-sv", "sv", {"dim": 8}, batch_size=2)]
    out = tmp_path / "out"
    first = run_embed_backends(open_dataset(corpus, shard_size=2), spec, out, warmup=0)
    assert first["sim-sv"]["n_units_run"] == 3 and first["sim-sv"]["engine"]["runner"] == "inprocess"
    store = RunStore(out, kind="sv")
    marker = json.loads(store.marker_path(WorkUnit("sim-sv", "s00000")).read_text())
    assert marker["settings"]["kind"] == "sv" and marker["settings"]["options"] == {"dim": 8} and len(marker["clips"]) == 2
    again = run_embed_backends(open_dataset(corpus, shard_size=2), spec, out, warmup=0)
    assert again["sim-sv"]["status"] == "done" and again["sim-sv"]["n_units_run"] == 0
    # other settings: every unit is stale and recomputed
    other = run_embed_backends(
        open_dataset(corpus, shard_size=2), [EmbedSpec("sim-sv", "simulated-sv", "sv", {"dim": 12}, batch_size=2)], out, warmup=0
    )
    assert other["sim-sv"]["n_units_run"] == 3
    assert len(pq.read_table(out / "embeddings.parquet").column("embedding")[0].as_py()) == 12
    # one clip's audio changes: only its unit is recomputed, and its embedding is the new audio's
    wav = corpus.parent / "kal-2.wav"
    x, sr = sf.read(wav, dtype="float32")
    before = {r["utt_id"]: r["embedding"] for r in pq.read_table(out / "embeddings.parquet").to_pylist()}
    try:
        sf.write(wav, x * np.linspace(0.2, 1.0, len(x), dtype=np.float32), sr)
        changed = run_embed_backends(
            open_dataset(corpus, shard_size=2), [EmbedSpec("sim-sv", "simulated-sv", "sv", {"dim": 12}, batch_size=2)], out, warmup=0
        )
    finally:
        sf.write(wav, x, sr)
    assert changed["sim-sv"]["n_units_run"] == 1
    after = {r["utt_id"]: r["embedding"] for r in pq.read_table(out / "embeddings.parquet").to_pylist()}
    assert after["kal/2"] != before["kal/2"] and all(after[u] == before[u] for u in before if u != "kal/2")


def test_placement_options_are_checked_and_kept_out_of_backend_options() -> None:
    opts, meta = split_placement({"num_gpus": 0.5, "memory_mb": 900, "dim": 8}, "speaker.backend_options.x")
    assert opts == {"dim": 8} and meta == {"num_gpus": 0.5, "memory_mb": 900.0}
    for bad in ({"num_gpus": float("nan")}, {"num_cpus": 0}, {"memory_mb": -1}, {"num_gpus": True}, {"num_gpus": "1"}):
        with pytest.raises(ConfigError, match="speaker.backend_options.x: option"):
            split_placement(bad, "speaker.backend_options.x")
    assert ModelSpec("a", "b").kind == "asr"


def test_cpu_only_backend_takes_no_gpu_on_ray_and_refuses_one(corpus: Path, gpus8: Any, tmp_path: Path) -> None:
    """``prosody`` declares ``cpu_only``: on 8 logical GPUs its actors hold none (no ``num_gpus: 0`` or
    ``device: cpu`` needed), and a GPU asked of it is refused up front, naming the backend and the option."""
    from audits.emotion.run import parse_emotion_config
    from engine.backends.ser.prosody import ProsodyBackend

    spec = [EmbedSpec("prosody", "prosody", "ser", {}, batch_size=2)]
    facts = run_embed_backends(open_dataset(corpus, shard_size=2), spec, tmp_path / "ray", warmup=0, engine=EngineOptions(kind="ray"))
    f = facts["prosody"]
    assert f["engine"]["runner"] == "ray" and f["n_utts"] == 6 and f["n_failed"] == 0, f
    assert f["engine"]["actors"] and all(a["gpu_ids"] == [] and a["device"] == "cpu" for a in f["engine"]["actors"]), f["engine"]
    assert f["device"] == "cpu"
    with pytest.raises(ConfigError, match=r"backend 'prosody' computes on the CPU only: option 'device' must be cpu or auto .*'cuda'"):
        ProsodyBackend(device="cuda")
    for opts, meta, option in (({"device": "cuda:1"}, {}, "device"), ({}, {"num_gpus": 1.0}, "num_gpus")):
        with pytest.raises(ConfigError, match=rf"ser pass 'prosody': backend 'prosody' computes on the CPU only: option '{option}'"):
            run_embed_backends(open_dataset(corpus, shard_size=2), [EmbedSpec("prosody", "prosody", "ser", opts, 2, meta)], tmp_path / "no")
        with pytest.raises(ConfigError, match=rf"r.yaml: emotion.backend_options.prosody: backend 'prosody' .* option '{option}'"):
            parse_emotion_config({"backends": ["prosody"], "backend_options": {"prosody": {**opts, **meta}}}, "r.yaml")
    assert not (tmp_path / "no").exists()


@pytest.mark.slow
def test_probe_reruns_go_to_the_runs_engine(corpus: Path, gpus8: Any, tmp_path: Path) -> None:
    """The probes' re-runs on derived audio (``audits.probes.engine_io.run_models``) run on the engine
    they are given: on Ray the rows equal the in-process rows exactly and the facts say ``ray``."""
    from audits.probes.engine_io import run_models

    specs = [ModelSpec("sim-a", "simulated", {"seed": 1}, batch_size=2, meta={"num_cpus": 0.25})]
    local, lfacts = run_models(open_dataset(corpus, shard_size=2), specs, tmp_path / "local", None)
    remote, rfacts = run_models(open_dataset(corpus, shard_size=2), specs, tmp_path / "ray", None, EngineOptions(kind="ray"))
    cols = ["model", "utt_id", "hyp_raw", "error"]
    assert local[cols].sort_values(["model", "utt_id"]).values.tolist() == remote[cols].sort_values(["model", "utt_id"]).values.tolist()
    assert lfacts["sim-a"]["engine"]["runner"] == "inprocess" and rfacts["sim-a"]["engine"]["runner"] == "ray"
    assert rfacts["sim-a"]["engine"]["actors"][0]["gpu_ids"] and rfacts["sim-a"]["engine"]["actors"][0]["device"] == "cuda"


PROBE_DRIVER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from audits.probes.engine_io import run_models
    from engine.data import ModelSpec
    from engine.datasets import open_dataset
    from engine.engine import EngineOptions
    manifest, out, address = sys.argv[1], sys.argv[2], sys.argv[3]
    specs = [ModelSpec("slow", "simulated", {"seed": 3, "rtfx": 2.0}, 2, {"num_cpus": 0.25, "num_gpus": 1})]
    run_models(open_dataset(manifest, shard_size=1), specs, Path(out), None, EngineOptions(kind="ray", address=address))
    """
)


@pytest.mark.slow
def test_driver_sigkill_mid_probe_pass_on_ray_then_same_command_resumes_exactly(corpus: Path, gpus8: Any, tmp_path: Path) -> None:
    """kill -9 of the driver while a probe re-run pass runs on Ray actors; the same command finishes
    it without redoing a finished unit, and the rows equal an uninterrupted in-process run's."""
    from audits.probes.engine_io import run_models

    script = tmp_path / "driver.py"
    script.write_text(PROBE_DRIVER)
    out = tmp_path / "out"
    cmd = [sys.executable, str(script), str(corpus), str(out), str(gpus8)]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    markers = out / "markers" / "slow"
    sigkill_after_markers(proc, markers, 2, 240)
    before = {p: p.stat().st_mtime_ns for p in markers.glob("*.json")}
    assert 2 <= len(before) < 6, "the kill should land mid-pass"
    again = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 0, again.stderr[-3000:]
    assert all(p.stat().st_mtime_ns == t for p, t in before.items()), "a finished unit was redone"
    assert len(list(markers.glob("*.json"))) == 6
    spec = [ModelSpec("slow", "simulated", {"seed": 3, "rtfx": 2.0}, 2)]
    base, _ = run_models(open_dataset(corpus, shard_size=1), spec, tmp_path / "base", None)
    got = RunStore(out).consolidate(["slow"]).to_pandas()
    cols = ["utt_id", "hyp_raw", "error"]
    assert got[cols].sort_values("utt_id").values.tolist() == base[cols].sort_values("utt_id").values.tolist()


HOSTED_DRIVER = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from audits.probes.engine_io import run_models
    from engine.data import ModelSpec
    from engine.datasets import open_dataset
    from engine.engine import EngineOptions
    from engine.run.ray_setup import init_ray
    manifest, out, address, options = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    # the key reaches this job's actors as it would on a cluster: through the job's runtime_env
    init_ray(address, runtime_env={"env_vars": {"DEEPGRAM_API_KEY": os.environ["DEEPGRAM_API_KEY"]}})
    specs = [ModelSpec("fake-deepgram", "deepgram", options, 2, {"num_cpus": 1})]
    run_models(open_dataset(manifest, shard_size=2), specs, Path(out), None, EngineOptions(kind="ray", address=address, workers=1))
    """
)


def _listen_digests(fake: Any, start: int = 0) -> list[str]:
    """Body digests of the billable Deepgram requests (POST /v1/listen) from index ``start`` on."""
    return [
        d
        for (method, path, _), d in zip(fake.requests[start:], fake.body_sha256[start:])
        if method == "POST" and path.startswith("/v1/listen")
    ]


def _wait_quiet(fake: Any, quiet_s: float, timeout_s: float) -> None:
    """Until the fake has taken no request for ``quiet_s``: the killed job's actors are gone or idle."""
    import time

    deadline = time.monotonic() + timeout_s
    seen, since = len(fake.requests), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        if len(fake.requests) != seen:
            seen, since = len(fake.requests), time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return


@pytest.mark.slow
def test_driver_sigkill_mid_probe_pass_with_hosted_model_bills_no_finished_clip_twice(
    corpus: Path, gpus8: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -9 of the driver while a probe re-run pass of a hosted model (Deepgram's documented API on a
    local fake that counts requests per clip) runs on Ray; the same command then finishes the pass.

    Asserted, with N[c] the billable requests for clip c over both sessions (one model):
    * every clip of a unit finished (marker written) before the kill was requested exactly once;
    * the second session requested exactly the clips with no answer in the response cache when it
      started, each once: a clip answered before the kill, in a finished unit or not, is never
      paid for again (the kill lands after a clip of the unfinished unit was answered, so that
      case is exercised);
    * every request beyond one per clip is a clip of a unit unfinished at the kill whose request was
      in flight when its actor died (billed, never answered into the cache): with one actor and one
      request at a time, at most one;
    * rows equal an uninterrupted in-process run's, and every unit has its marker.
    """
    import hashlib

    from audits.probes.engine_io import run_models
    from tests.fake_vendors import KEY_ENV, FakeVendor, options_for

    key = "sk-probe-kill-test-key-3"
    monkeypatch.setenv(KEY_ENV["deepgram"], key)
    fake = FakeVendor("deepgram", key)
    fake.transcript_fn = lambda body: f"clip {hashlib.sha256(body).hexdigest()[:12]}"
    try:
        base_opts = options_for(fake, cache_dir=str(tmp_path / "cache-base"), max_concurrency=1)
        spec = [ModelSpec("fake-deepgram", "deepgram", base_opts, 2)]
        base, _ = run_models(open_dataset(corpus, shard_size=2), spec, tmp_path / "base", None)
        digests = _listen_digests(fake)
        assert len(digests) == len(set(digests)) == 6
        by_prefix = {d[:12]: d for d in digests}
        clip_of = {by_prefix[h.split()[1]]: u for u, h in zip(base["utt_id"], base["hyp_raw"])}  # digest -> utt_id
        assert len(clip_of) == 6
        start = len(fake.requests)

        fake.latency_s = 0.4  # each request is billed on arrival and answered 0.4 s later
        cache = tmp_path / "cache"
        opts = options_for(fake, cache_dir=str(cache), max_concurrency=1)
        script = tmp_path / "driver.py"
        script.write_text(HOSTED_DRIVER)
        out = tmp_path / "out"
        cmd = [sys.executable, str(script), str(corpus), str(out), str(gpus8), json.dumps(opts)]
        env = dict(os.environ, PYTHONPATH=str(REPO))
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        markers = out / "markers" / "fake-deepgram"
        # the kill lands once the first clip of the second unit is answered (the third answer in the
        # response cache, <namespace>/<xx>/<key>.json): the first unit is finished, the second's
        # other clip is being requested
        sigkill_after_markers(proc, cache, 3, 240, pattern="*/*/*.json", poll_s=0.02)
        finished = {p: p.stat().st_mtime_ns for p in markers.glob("*.json")}
        assert 1 <= len(finished) < 3, "the kill should land mid-pass"
        shards = open_dataset(corpus, shard_size=2).index
        finished_clips = {u for p in finished for u in shards[json.loads(p.read_text())["shard"]].utt_ids}
        _wait_quiet(fake, quiet_s=2.0, timeout_s=60)  # the dead driver's actors are stopped by Ray
        first = _listen_digests(fake, start)
        cached = {json.loads(p.read_text())["audio_sha256"] for p in cache.rglob("*.json")}
        middle = len(fake.requests)
        again = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert again.returncode == 0, again.stderr[-3000:]
        second = _listen_digests(fake, middle)
    finally:
        fake.close()
    assert all(p.stat().st_mtime_ns == t for p, t in finished.items()), "a finished unit was redone"
    assert len(list(markers.glob("*.json"))) == 3
    n = {c: 0 for c in clip_of.values()}
    for d in first + second:
        n[clip_of[d]] += 1
    assert all(n[c] == 1 for c in finished_clips), (n, finished_clips)
    answered_unfinished = {clip_of[d] for d in cached} - finished_clips
    assert answered_unfinished and all(n[c] == 1 for c in answered_unfinished), (n, answered_unfinished)  # cache hits on resume
    assert sorted(second) == sorted(set(clip_of) - cached), "the second session paid again for an answer it had, or skipped one"
    repeated = {c for c, k in n.items() if k > 1}
    assert not repeated & finished_clips and all(n[c] == 2 for c in repeated) and len(repeated) <= 1, n
    assert all(n[c] >= 1 for c in n)
    got = RunStore(out).consolidate(["fake-deepgram"]).to_pandas()
    cols = ["utt_id", "hyp_raw", "error"]
    assert got[cols].sort_values("utt_id").values.tolist() == base[cols].sort_values("utt_id").values.tolist()
    logging.getLogger(__name__).info(
        "hosted probe kill -9: %d/3 units finished at the kill; requests %d + %d for 6 clips; repeated %s",
        len(finished),
        len(first),
        len(second),
        sorted(repeated),
    )
