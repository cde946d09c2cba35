"""Fault injection through the engine: after every fault, the final result table equals an
uninterrupted run's (same rows, same hypotheses, no duplicates).

In-process runner: disk full (a write error after N units), a crash between a unit's part and its
marker, the driver SIGKILLed mid-run, damaged parts and markers on disk, a backend that raises on a
batch, a model that cannot load. Ray (through ``audits.pipeline.run_recipe``): an actor killed
mid-unit, and a disk-full stop resumed by the in-process runner (both write the same store).
``tests/test_ray_engine.py`` covers the Ray runner's own faults (hang -> timeout -> quarantine, ...).

Each test records what it injected and what it found (``record_property``); the figures printed
by ``scripts/reliability_report.py`` come from those records.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from engine.data import ModelSpec, WorkUnit
from engine.datasets import Dataset, open_dataset
from engine.errors import AuditError
from engine.run.runner import InProcessRunner
from engine.run.store import RunStore
from tests.processes import sigkill_after_markers

REPO = Path(__file__).resolve().parents[1]
CARDS = Path("/usr/share/pocketsphinx/test/data/cards")
CLIPS = ["001", "002", "003"]
PS = ModelSpec("pocketsphinx", "pocketsphinx", {}, batch_size=1)
COLS = ["utt_id", "model", "hyp_raw", "ref_raw", "error", "speaker", "shard"]


def fault_spec(name: str, **opts: Any) -> ModelSpec:
    return ModelSpec(name, "fault-inject", {"inner": "pocketsphinx", "inner_options": {}, **opts}, batch_size=1)


def cards_manifest(folder: Path, clips: list[str] = CLIPS) -> Path:
    refs = {}
    for line in (CARDS / "cards.transcription").read_text().splitlines():
        text, uid = line.rsplit("(", 1)
        refs[uid.strip().rstrip(")")] = " ".join(text.replace("<s>", " ").replace("</s>", " ").split())
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / "manifest.jsonl"
    manifest.write_text(
        "".join(
            json.dumps({"utt_id": f"cards-{c}", "audio_filepath": str(CARDS / f"{c}.wav"), "text": refs[c], "speaker": "cards"}) + "\n"
            for c in clips
        )
    )
    return manifest


def rows(out: Path, model: str | None = None) -> pd.DataFrame:
    """The consolidated table (what a resumed run reports), restricted to one model if asked."""
    t = RunStore(out).consolidate().to_pandas()
    if model is not None:
        t = t[t["model"] == model].assign(model="pocketsphinx")  # compare across model names
    return t[COLS].sort_values(["model", "utt_id"]).reset_index(drop=True)


def compare(baseline: pd.DataFrame, got: pd.DataFrame) -> dict[str, int]:
    """Rows lost, duplicated, changed (hypothesis or error differs) and extra, keyed by (model, utt_id)."""
    key = ["model", "utt_id"]
    dup = int(got.duplicated(key).sum())
    g = got.drop_duplicates(key).set_index(key)
    b = baseline.set_index(key)
    lost = len(b.index.difference(g.index))
    extra = len(g.index.difference(b.index))
    common = b.index.intersection(g.index)
    changed = int(
        sum((b.loc[k, "hyp_raw"] != g.loc[k, "hyp_raw"]) or (pd.isna(b.loc[k, "error"]) != pd.isna(g.loc[k, "error"])) for k in common)
    )
    return {"rows_expected": len(b), "rows_lost": lost, "rows_duplicated": dup, "rows_changed": changed, "rows_extra": extra}


def check_equal(baseline: pd.DataFrame, got: pd.DataFrame, fault: str, record: Callable[[str, Any], None]) -> None:
    figures = compare(baseline, got)
    record("fault", fault)
    for k, v in figures.items():
        record(k, v)
    assert figures["rows_lost"] == figures["rows_duplicated"] == figures["rows_changed"] == figures["rows_extra"] == 0, figures
    pd.testing.assert_frame_equal(got, baseline)
    record("survived", True)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return open_dataset(cards_manifest(tmp_path_factory.mktemp("cards")), shard_size=1)


@pytest.fixture(scope="module")
def baseline(dataset: Dataset, tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    out = tmp_path_factory.mktemp("baseline")
    InProcessRunner(dataset, [PS], RunStore(out)).run()
    t = rows(out)
    assert len(t) == len(CLIPS) and t["error"].isna().all() and (t["hyp_raw"].str.len() > 0).all()
    return t


def test_disk_full_stops_cleanly_and_resumes(
    dataset: Dataset, baseline: pd.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record_property: Callable[[str, Any], None]
) -> None:
    """ENOSPC while writing the 2nd unit (after a partial temporary file): the run stops with an
    AuditError that names the path and says how to resume; the finished unit is kept, no temporary
    file is left, and re-running the same command completes the table."""
    import engine.run.store

    real_write = engine.run.store.pq.write_table
    calls = {"n": 0}

    def full_disk(table: Any, where: Any, *a: Any, **kw: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            Path(where).write_bytes(b"PAR1 partial")  # what a real ENOSPC leaves behind
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(where))
        real_write(table, where, *a, **kw)

    out = tmp_path / "out"
    monkeypatch.setattr(engine.run.store.pq, "write_table", full_disk)
    with pytest.raises(AuditError) as info:
        InProcessRunner(dataset, [PS], RunStore(out)).run()
    msg = str(info.value)
    assert "No space left on device" in msg and str(out) in msg and "re-run the same command to resume" in msg, msg
    monkeypatch.setattr(engine.run.store.pq, "write_table", real_write)
    store = RunStore(out)
    assert [store.is_done(WorkUnit("pocketsphinx", s)) for s in dataset.shard_ids] == [True, False, False]
    assert not list(out.rglob("*.tmp-*")), "a temporary part was left behind"
    runner = InProcessRunner(dataset, [PS], store)
    assert [u.shard_id for u in runner.pending()] == dataset.shard_ids[1:]
    runner.run()
    check_equal(baseline, rows(out), "disk full (ENOSPC) on the 2nd unit, then resume", record_property)


def test_crash_between_part_and_marker(
    dataset: Dataset, baseline: pd.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record_property: Callable[[str, Any], None]
) -> None:
    """The part of unit 2 is on disk but its marker was never written: the unit is redone once."""
    import engine.run.store

    real = engine.run.store.atomic_write_text
    calls = {"n": 0}

    def dies_on_second_marker(path: Path, text: str) -> None:
        if path.parent.parent.name == "markers":
            calls["n"] += 1
            if calls["n"] == 2:
                raise OSError(errno.EIO, "Input/output error", str(path))
        real(path, text)

    out = tmp_path / "out"
    monkeypatch.setattr(engine.run.store, "atomic_write_text", dies_on_second_marker)
    with pytest.raises(AuditError, match="Input/output error"):
        InProcessRunner(dataset, [PS], RunStore(out)).run()
    monkeypatch.setattr(engine.run.store, "atomic_write_text", real)
    store = RunStore(out)
    second = WorkUnit("pocketsphinx", dataset.shard_ids[1])
    assert store.part_path(second).exists() and not store.is_done(second)
    assert len(RunStore(out).consolidate()) == 1  # a part without a marker is never reported
    InProcessRunner(dataset, [PS], store).run()
    check_equal(baseline, rows(out), "crash after a part, before its marker", record_property)


DRIVER = textwrap.dedent(
    """
    import sys
    from engine.datasets import open_dataset
    from engine.run.runner import InProcessRunner
    from engine.data import ModelSpec
    from engine.run.store import RunStore
    manifest, out = sys.argv[1:3]
    spec = ModelSpec("pocketsphinx", "fault-inject", {"inner": "pocketsphinx", "inner_options": {}, "after_batch_sleep_s": 1.5}, """
    """batch_size=1)
    InProcessRunner(open_dataset(manifest, shard_size=1), [spec], RunStore(out)).run()
    """
)


def test_driver_sigkill_then_resume(
    dataset: Dataset, baseline: pd.DataFrame, tmp_path: Path, record_property: Callable[[str, Any], None]
) -> None:
    """SIGKILL the in-process driver after its first unit is written; a new process finishes."""
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, str(script), dataset.source, str(out)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    markers = out / "markers" / "pocketsphinx"
    sigkill_after_markers(proc, markers, 1, 120, pattern="*.json", poll_s=0.05)
    done = {p.stem for p in markers.glob("*.json")}
    assert 1 <= len(done) < len(dataset.shard_ids)
    runner = InProcessRunner(dataset, [PS], RunStore(out))
    assert {u.shard_id for u in runner.pending()} == set(dataset.shard_ids) - done
    runner.run()
    check_equal(baseline, rows(out), "driver SIGKILL mid-run, then resume", record_property)


def test_damaged_store_is_redone(
    dataset: Dataset, baseline: pd.DataFrame, tmp_path: Path, record_property: Callable[[str, Any], None]
) -> None:
    """A truncated part, a part with fewer rows than its marker, a missing part, a corrupt marker and
    a stale temporary file: the damaged units are redone, the intact one is not."""
    out = tmp_path / "out"
    store = RunStore(out)
    InProcessRunner(dataset, [PS], store).run()
    a, b, c = (WorkUnit("pocketsphinx", s) for s in dataset.shard_ids)
    data = store.part_path(a).read_bytes()
    store.part_path(a).write_bytes(data[: len(data) // 2])  # truncated on disk
    store.marker_path(b).write_text(json.dumps({"model": b.model, "shard": b.shard_id, "rows": 2}))  # row count disagrees
    (store.part_path(c).parent / f".{store.part_path(c).name}.tmp-99999").write_bytes(b"junk")  # stale temp file
    runner = InProcessRunner(dataset, [PS], store)
    assert {u.shard_id for u in runner.pending()} == {a.shard_id, b.shard_id}
    units: list[str] = []
    runner.progress = lambda ev, n, info: units.append(info["shard"]) if ev == "unit" else None
    runner.run()
    assert sorted(units) == sorted([a.shard_id, b.shard_id])
    check_equal(baseline, rows(out), "truncated part + marker/part row-count mismatch", record_property)
    store.part_path(c).unlink()  # part lost
    store.marker_path(b).write_text("{not json")  # marker damaged
    runner = InProcessRunner(dataset, [PS], store)
    assert {u.shard_id for u in runner.pending()} == {b.shard_id, c.shard_id}
    runner.run()
    check_equal(baseline, rows(out), "missing part + corrupt marker", record_property)


def test_backend_error_on_a_batch_is_retried_per_clip(
    dataset: Dataset, baseline: pd.DataFrame, tmp_path: Path, record_property: Callable[[str, Any], None]
) -> None:
    """The backend raises once (2nd batch): that batch is retried clip by clip, no row has an error."""
    out = tmp_path / "out"
    spec = fault_spec("ps-raise", raise_on_batch=2, once_file=str(tmp_path / "fired"))
    InProcessRunner(dataset, [spec], RunStore(out)).run()
    assert (tmp_path / "fired").exists()
    check_equal(baseline, rows(out, "ps-raise"), "backend raises on one batch", record_property)


def test_unloadable_model_is_reported_and_others_complete(
    dataset: Dataset, baseline: pd.DataFrame, tmp_path: Path, record_property: Callable[[str, Any], None]
) -> None:
    """A model whose weights are missing gets status 'unavailable'; the other model's rows are whole,
    and its units stay pending so a later run picks them up."""
    out = tmp_path / "out"
    missing = ModelSpec("whisper-missing", "faster-whisper", {"model": str(tmp_path / "no-such-model")}, batch_size=4)
    facts = InProcessRunner(dataset, [missing, PS], RunStore(out)).run()
    assert facts["whisper-missing"]["status"] == "unavailable" and "no-such-model" in facts["whisper-missing"]["error"]
    assert {u.model for u in InProcessRunner(dataset, [missing, PS], RunStore(out)).pending()} == {"whisper-missing"}
    check_equal(baseline, rows(out), "a model that cannot load (others complete)", record_property)


# -- Ray, through the pipeline ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_session(ray_local: str) -> str:
    """The session's local 2-CPU Ray instance (tests/conftest.py); its workers, and this process, register the fault backend."""
    from engine.backends.asr.fault import ensure_registered

    ensure_registered()
    return ray_local


def _config_dir(tmp: Path, models: dict[str, Any]) -> Path:
    import shutil

    cfg = tmp / "configs"
    shutil.copytree(REPO / "audit_configs", cfg)
    (cfg / "models" / "faults.yaml").write_text(json.dumps({"models": models}))  # JSON is YAML
    return cfg


def _recipe(manifest: Path, models: list[str]) -> Any:
    from audits.recipes import parse_recipe

    return parse_recipe(
        {"name": "faults", "dataset": {"path": str(manifest)}, "models": models, "shard_size": 1, "warmup": 0, "scoring": {"n_boot": 20}},
        "faults.yaml",
    )


@pytest.mark.slow
def test_ray_actor_killed_mid_unit_via_pipeline(
    ray_session: Any,
    dataset: Dataset,
    baseline: pd.DataFrame,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    record_property: Callable[[str, Any], None],
) -> None:
    """run_recipe on Ray with a model whose actor process exits on its 2nd batch: the unit is retried
    on a new actor and summary.json counts every row once."""
    from audits.pipeline import run_recipe
    from engine.engine import EngineOptions

    once = tmp_path / "fired"
    cfg = _config_dir(
        tmp_path,
        {
            "ps-crash": {
                "backend": "fault-inject",
                "options": {"inner": "pocketsphinx", "inner_options": {}, "exit_on_batch": 2, "once_file": str(once)},
                "batch_size": 1,
            }
        },
    )
    monkeypatch.setenv("AUDIT_CONFIG_DIR", str(cfg))
    out = tmp_path / "run"
    summary = run_recipe(_recipe(Path(dataset.source), ["ps-crash"]), out, engine=EngineOptions(kind="ray", max_retries=2))
    assert once.exists(), "the fault never fired"
    m = summary["models"]["ps-crash"]
    assert m["n_utts"] == len(CLIPS) and m["n_failed"] == 0
    check_equal(baseline, rows(out, "ps-crash"), "Ray actor process killed mid-unit (pipeline)", record_property)


@pytest.mark.slow
def test_ray_disk_full_then_resume_in_process(
    ray_session: Any,
    dataset: Dataset,
    baseline: pd.DataFrame,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    record_property: Callable[[str, Any], None],
) -> None:
    """A Ray run stopped by ENOSPC is finished by the in-process runner: both write the same store."""
    from engine.run.ray_runner import RayRunner

    real = RunStore.write_unit
    calls = {"n": 0}

    def flaky(self: RunStore, unit: WorkUnit, rows_: Any, label_keys: Any, extra: Any = None) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.part_path(unit)))
        real(self, unit, rows_, label_keys, extra)

    out = tmp_path / "out"
    monkeypatch.setattr(RunStore, "write_unit", flaky)
    with pytest.raises(AuditError, match="No space left on device.*re-run the same command to resume"):
        RayRunner(dataset, [PS], RunStore(out)).run()
    monkeypatch.setattr(RunStore, "write_unit", real)
    InProcessRunner(dataset, [PS], RunStore(out)).run()
    check_equal(baseline, rows(out), "Ray disk full, resumed in-process", record_property)


def test_prefetch_off_gives_the_same_rows(dataset: Dataset, baseline: pd.DataFrame, tmp_path: Path) -> None:
    """The baseline ran with the background decode thread (the default); without it, rows are identical."""
    out = tmp_path / "noprefetch"
    InProcessRunner(dataset, [PS], RunStore(out), prefetch=False).run()
    pd.testing.assert_frame_equal(rows(out), baseline)


def test_shard_read_error_in_prefetch_thread_reaches_the_caller(dataset: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard that cannot be read while the next one is prefetched stops the run with that error;
    units finished before it are kept and a re-run completes."""
    bad = dataset.shard_ids[1]
    real = dataset.load_shard

    def load(shard_id: str) -> Any:
        if shard_id == bad:
            raise AuditError(f"cannot read shard {shard_id}: injected")
        return real(shard_id)

    monkeypatch.setattr(dataset, "load_shard", load)
    out = tmp_path / "err"
    with pytest.raises(AuditError, match="injected"):
        InProcessRunner(dataset, [PS], RunStore(out)).run()
    assert RunStore(out).is_done(WorkUnit("pocketsphinx", dataset.shard_ids[0]))
    monkeypatch.setattr(dataset, "load_shard", real)
    InProcessRunner(dataset, [PS], RunStore(out)).run()
    assert len(rows(out)) == len(CLIPS)
