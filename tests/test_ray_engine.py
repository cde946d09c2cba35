"""The Ray engine on a local 2-CPU Ray instance: same rows as the in-process runner, and no row
lost or duplicated when actors die, the driver is SIGKILLed, parts are truncated, writes fail or a
backend hangs. Audio: real speech from Debian's pocketsphinx-testdata."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.backends.asr.fault import FaultInjectionBackend, InjectedFault, ensure_registered
from engine.data import ModelSpec, WorkUnit
from engine.datasets import Dataset, open_dataset
from engine.errors import AuditError, ConfigError
from engine.run.ray_runner import RayRunner
from engine.run.runner import InProcessRunner
from engine.run.store import RunStore
from tests.processes import sigkill_after_markers

ensure_registered()

REPO = Path(__file__).resolve().parents[1]
TESTDATA = Path("/usr/share/pocketsphinx/test/data")
SETUP_HOOK = "engine.backends.asr.fault.ensure_registered"
PS = ModelSpec("pocketsphinx", "pocketsphinx", {}, batch_size=1)
WHISPER = ModelSpec("whisper-tiny.en", "faster-whisper", {"model": "tiny.en", "compute_type": "int8", "beam_size": 1}, batch_size=8)


def fault_spec(name: str, **opts: Any) -> ModelSpec:
    """pocketsphinx behind the fault-injection wrapper, one clip per batch."""
    return ModelSpec(name, "fault-inject", {"inner": "pocketsphinx", "inner_options": {}, **opts}, batch_size=1)


def _testdata_clips() -> list[tuple[str, Path, str]]:
    if not TESTDATA.is_dir():
        out = subprocess.run(["dpkg", "-L", "pocketsphinx-testdata"], capture_output=True, text=True, check=False).stdout.split()
        raise FileNotFoundError(f"pocketsphinx-testdata not found under {TESTDATA} ({len(out)} files listed by dpkg)")
    clips = []
    for sub, trans_name in (("cards", "cards.transcription"), ("librivox", "transcription")):
        refs = {}
        for line in (TESTDATA / sub / trans_name).read_text().splitlines():
            text, uid = line.rsplit("(", 1)
            refs[uid.strip().rstrip(")")] = " ".join(text.replace("<s>", " ").replace("</s>", " ").split())
        for wav in sorted((TESTDATA / sub).glob("*.wav")):
            clips.append((f"{sub}-{wav.stem[-4:]}", wav, refs[wav.stem]))
    return clips


def make_dataset(folder: Path, names: list[str], shard_size: int = 2) -> Dataset:
    """A NeMo manifest of the chosen test clips, opened through the normal reader."""
    folder.mkdir(parents=True, exist_ok=True)
    by_id = {c[0]: c for c in _testdata_clips()}
    lines = [json.dumps({"utt_id": n, "audio_filepath": str(by_id[n][1]), "text": by_id[n][2], "speaker": n.split("-")[0]}) for n in names]
    manifest = folder / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    return open_dataset(manifest, shard_size=shard_size)


SMALL = ["cards-001", "cards-002", "cards-003", "cards-004", "cards-005"]  # 3 shards: 2, 2, 1


def table(out: Path) -> pa.Table:
    return RunStore(out).consolidate()


def hyps(t: pa.Table, model: str | None = None) -> dict[str, str | None]:
    d = t.to_pydict()
    return {u: h for u, m, h in zip(d["utt_id"], d["model"], d["hyp_raw"]) if model is None or m == model}


def assert_no_duplicates(t: pa.Table) -> None:
    d = t.to_pydict()
    keys = list(zip(d["model"], d["utt_id"]))
    assert len(keys) == len(set(keys)), "duplicate (model, utt_id) rows"


@pytest.fixture(scope="module")
def ray_address(ray_local: str) -> str:
    """The session's local 2-CPU Ray instance (tests/conftest.py), whose workers run SETUP_HOOK; subprocess drivers join it."""
    return ray_local


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("small"), SMALL)


@pytest.fixture(scope="module")
def baseline(small: Dataset, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str | None]:
    """pocketsphinx hypotheses of an uninterrupted in-process run (what every fault run must equal)."""
    out = tmp_path_factory.mktemp("baseline")
    InProcessRunner(small, [PS], RunStore(out)).run()
    h = hyps(table(out))
    assert len(h) == len(SMALL) and all(h[u] for u in SMALL)
    return h


class Events:
    def __init__(self) -> None:
        self.items: list[tuple[str, int, dict[str, Any]]] = []

    def __call__(self, event: str, n: int, info: dict[str, Any]) -> None:
        self.items.append((event, n, info))

    def units(self) -> list[tuple[str, str]]:
        return [(i["model"], i["shard"]) for e, _, i in self.items if e == "unit"]


# -- no Ray needed ------------------------------------------------------------------------------


def test_runner_rejects_bad_settings(small: Dataset, tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    with pytest.raises(ConfigError, match="max_retries"):
        RayRunner(small, [PS], store, max_retries=-1)
    with pytest.raises(ConfigError, match="workers"):
        RayRunner(small, [PS], store, workers=0)
    with pytest.raises(ConfigError, match="unit_timeout_s"):
        RayRunner(small, [PS], store, unit_timeout_s=-3)
    with pytest.raises(ConfigError, match="repeated: pocketsphinx"):
        RayRunner(small, [PS, PS], store)


def test_fault_backend_options_and_once_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="inner"):
        FaultInjectionBackend()
    with pytest.raises(ConfigError, match="exit_on_batch"):
        FaultInjectionBackend(inner="pocketsphinx", exit_on_batch=0)
    with pytest.raises(ConfigError, match="unknown option"):
        FaultInjectionBackend(inner="pocketsphinx", exit_on_bach=1)
    import numpy as np

    once = tmp_path / "fired"
    b = FaultInjectionBackend(inner="pocketsphinx", raise_on_batch=1, once_file=str(once))
    b.load()
    b.warmup()  # not counted
    clip = np.zeros(16000, dtype=np.float32)
    with pytest.raises(InjectedFault, match="batch 1"):
        b.transcribe_batch([clip])
    assert once.exists()
    import soundfile as sf

    from engine.backends.asr.pocketsphinx import PocketsphinxBackend

    speech = sf.read(TESTDATA / "cards" / "001.wav", dtype="float32")[0]
    b2 = FaultInjectionBackend(inner="pocketsphinx", raise_on_batch=1, once_file=str(once))
    b2.load()
    plain = PocketsphinxBackend()
    plain.load()
    assert b2.transcribe_batch([speech]) == plain.transcribe_batch([speech])  # already fired: behaves
    assert b2.info().backend == "fault-inject(pocketsphinx)"


# -- Ray ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_rows_identical_to_in_process_runner(ray_address: str, tmp_path: Path) -> None:
    """(a) real bundled models: same utt_ids, same raw hypotheses, same errors as in-process."""
    ds = make_dataset(tmp_path / "data", ["librivox-0880", "librivox-0930", "cards-005"])
    ev = Events()
    facts = RayRunner(ds, [WHISPER, PS], RunStore(tmp_path / "ray"), progress=ev).run()
    InProcessRunner(ds, [WHISPER, PS], RunStore(tmp_path / "local")).run()
    t_ray, t_local = table(tmp_path / "ray"), table(tmp_path / "local")
    cols = ["utt_id", "model", "hyp_raw", "ref_raw", "error", "speaker", "shard"]
    assert t_ray.select(cols).to_pylist() == t_local.select(cols).to_pylist()
    assert t_ray.num_rows == 6 and all(r["hyp_raw"] for r in t_ray.to_pylist())
    assert_no_duplicates(t_ray)
    for m in ("whisper-tiny.en", "pocketsphinx"):
        assert facts[m]["status"] == "loaded" and facts[m]["engine"]["runner"] == "ray"
        assert facts[m]["info"]["device"] == "cpu" and facts[m]["failed_units"] == []
    # model-major: every whisper unit is written before the first pocketsphinx unit
    order = [m for m, _ in ev.units()]
    assert order == ["whisper-tiny.en"] * 2 + ["pocketsphinx"] * 2
    assert [e for e, _, _ in ev.items if e in ("start", "loading")][:2] == ["start", "loading"]


def test_actor_killed_mid_unit(ray_address: str, small: Dataset, baseline: dict[str, str | None], tmp_path: Path) -> None:
    """(b) the actor's process exits on its 2nd batch (inside the first unit); the unit is redone."""
    once = tmp_path / "fired"
    spec = fault_spec("ps-crash", exit_on_batch=2, once_file=str(once))
    ev = Events()
    facts = RayRunner(small, [spec], RunStore(tmp_path / "out"), progress=ev, max_retries=2).run()
    assert once.exists(), "the fault never fired"
    t = table(tmp_path / "out")
    assert_no_duplicates(t)
    assert hyps(t) == baseline and t.column("error").null_count == t.num_rows
    assert facts["ps-crash"]["engine"]["actor_restarts"] == 1
    assert facts["ps-crash"]["engine"]["actors_started"] == 2
    assert facts["ps-crash"]["failed_units"] == []
    assert sorted(ev.units()) == sorted(("ps-crash", s) for s in small.shard_ids)
    assert any(e == "retry" for e, _, _ in ev.items)


DRIVER = textwrap.dedent(
    """
    import sys
    from engine.datasets import open_dataset
    from engine.run.ray_runner import RayRunner
    from engine.data import ModelSpec
    from engine.run.store import RunStore
    manifest, out, address, hook = sys.argv[1:5]
    spec = ModelSpec("ps-slow", "fault-inject", {"inner": "pocketsphinx", "inner_options": {}, "after_batch_sleep_s": 1.0}, batch_size=1)
    ds = open_dataset(manifest, shard_size=2)
    RayRunner(ds, [spec], RunStore(out), address=address, runtime_env={"worker_process_setup_hook": hook}).run()
    """
)


@pytest.mark.slow
def test_driver_sigkill_then_resume(ray_address: str, small: Dataset, baseline: dict[str, str | None], tmp_path: Path) -> None:
    """(c) SIGKILL the driver after some units are written; a new process resumes the rest."""
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, str(script), small.source, str(out), ray_address, SETUP_HOOK],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    markers = out / "markers" / "ps-slow"
    sigkill_after_markers(proc, markers, 1, 180, pattern="*.json", poll_s=0.1)
    done_before = {p.stem for p in markers.glob("*.json")}
    assert 1 <= len(done_before) < len(small.shard_ids), "the kill should land mid-run"
    spec = ModelSpec("ps-slow", "fault-inject", {"inner": "pocketsphinx", "inner_options": {}}, batch_size=1)
    runner = RayRunner(small, [spec], RunStore(out))
    assert {u.shard_id for u in runner.pending()} == set(small.shard_ids) - done_before
    ev = Events()
    runner.progress = ev
    runner.run()
    assert {s for _, s in ev.units()} == set(small.shard_ids) - done_before  # finished units were not redone
    t = table(out)
    assert_no_duplicates(t)
    assert hyps(t) == baseline


def test_unloadable_model_reported_others_complete(
    ray_address: str, small: Dataset, baseline: dict[str, str | None], tmp_path: Path
) -> None:
    """(d) a faster-whisper model directory that does not exist: status 'unavailable', the rest runs."""
    missing = ModelSpec("whisper-missing", "faster-whisper", {"model": str(tmp_path / "no-such-model")}, batch_size=4)
    ev = Events()
    facts = RayRunner(small, [missing, PS], RunStore(tmp_path / "out"), progress=ev).run()
    assert facts["whisper-missing"]["status"] == "unavailable"
    assert "no-such-model" in facts["whisper-missing"]["error"] and "does not exist" in facts["whisper-missing"]["error"]
    assert facts["pocketsphinx"]["status"] == "loaded"
    t = table(tmp_path / "out")
    assert set(t.column("model").to_pylist()) == {"pocketsphinx"}
    assert hyps(t) == baseline
    assert [(e, n) for e, n, i in ev.items if e == "skip"] == [("skip", len(small.shard_ids))]
    stored = RunStore(tmp_path / "out").read_model_facts()
    assert stored["whisper-missing"]["status"] == "unavailable"
    # it stays pending, so a resume after installing the model picks it up
    assert {u.model for u in RayRunner(small, [missing, PS], RunStore(tmp_path / "out")).pending()} == {"whisper-missing"}


def test_truncated_part_is_redone(ray_address: str, small: Dataset, baseline: dict[str, str | None], tmp_path: Path) -> None:
    """(e) a part cut short on disk, and a part whose row count disagrees with its marker, are redone."""
    out = tmp_path / "out"
    store = RunStore(out)
    RayRunner(small, [PS], store).run()
    first, second = (WorkUnit("pocketsphinx", s) for s in small.shard_ids[:2])
    data = store.part_path(first).read_bytes()
    store.part_path(first).write_bytes(data[: len(data) // 2])
    t2 = pq.read_table(store.part_path(second))
    pq.write_table(t2.slice(0, 1), store.part_path(second))
    runner = RayRunner(small, [PS], store)
    assert {u.shard_id for u in runner.pending()} == {first.shard_id, second.shard_id}
    ev = Events()
    runner.progress = ev
    runner.run()
    assert sorted(s for _, s in ev.units()) == sorted([first.shard_id, second.shard_id])
    t = table(out)
    assert_no_duplicates(t)
    assert hyps(t) == baseline


def test_write_failure_stops_cleanly_and_resumes(
    ray_address: str, small: Dataset, baseline: dict[str, str | None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write error (disk full) stops the run with a message; re-running finishes the table."""
    out = tmp_path / "out"
    store = RunStore(out)
    real = RunStore.write_unit
    calls = {"n": 0}

    def flaky(self: RunStore, unit: WorkUnit, rows: Any, label_keys: Any, extra: Any = None) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        real(self, unit, rows, label_keys, extra)

    monkeypatch.setattr(RunStore, "write_unit", flaky)
    with pytest.raises(AuditError, match="No space left on device.*re-run the same command to resume"):
        RayRunner(small, [PS], store).run()
    monkeypatch.setattr(RunStore, "write_unit", real)
    assert len(list((out / "markers" / "pocketsphinx").glob("*.json"))) == 1
    RayRunner(small, [PS], store).run()
    t = table(out)
    assert_no_duplicates(t)
    assert hyps(t) == baseline


@pytest.mark.slow
def test_hanging_backend_is_timed_out_retried_then_quarantined(ray_address: str, tmp_path: Path) -> None:
    """(f) a hang once: killed after the unit timeout and retried successfully; a hang every time:
    quarantined after max_retries with its reason recorded, rows kept as errors, retried on resume."""
    ds = make_dataset(tmp_path / "data", ["cards-001", "cards-002"])  # one shard
    InProcessRunner(ds, [PS], RunStore(tmp_path / "base")).run()
    base = hyps(table(tmp_path / "base"))
    once = fault_spec("ps-hang-once", hang_on_batch=1, once_file=str(tmp_path / "fired"))
    always = fault_spec("ps-hang-always", hang_on_batch=1)
    out = tmp_path / "out"
    ev = Events()
    facts = RayRunner(ds, [once, always], RunStore(out), progress=ev, unit_timeout_s=6.0, max_retries=1).run()
    t = table(out)
    assert_no_duplicates(t)
    assert hyps(t, "ps-hang-once") == base
    assert facts["ps-hang-once"]["failed_units"] == [] and facts["ps-hang-once"]["engine"]["actor_restarts"] == 1
    (failed,) = facts["ps-hang-always"]["failed_units"]
    assert failed["shard"] == "s00000" and failed["attempts"] == 2 and "timed out after 6 s" in failed["reason"]
    rows = [r for r in t.to_pylist() if r["model"] == "ps-hang-always"]
    assert len(rows) == 2 and all(
        r["hyp_raw"] is None and r["error"].startswith("unit failed after 2 attempts: unit timed out") for r in rows
    )
    marker = json.loads(RunStore(out).marker_path(WorkUnit("ps-hang-always", "s00000")).read_text())
    assert marker["quarantined"] is True and marker["rows"] == 2
    assert [u.model for u in RayRunner(ds, [once, always], RunStore(out)).pending()] == ["ps-hang-always"]
