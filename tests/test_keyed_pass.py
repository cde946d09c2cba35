"""Keyed passes (engine/keyed/keyed_pass.py) on both runners: results stored through the keyed unit
contract as they arrive, exact resume, retries then failed units that are never stored, a refused
key stopping a worker at once, longest units first, and on Ray the same results with placement
facts (GPU ids on logical GPUs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.engine import EngineOptions
from engine.errors import ConfigError
from engine.keyed.keyed_pass import KeyedPass, KeyedPassError, KeyedUnit, WorkerSpec, load_worker, run_inprocess
from engine.keyed.unit_store import KeyedUnitStore
from tests.keyed_fixture import calls

WORKER = "tests.keyed_fixture:CountingWorker"


def _pass(root: Path, log: Path, units: dict[str, dict[str, Any]], names: tuple[str, ...] = ("w",), **spec: Any) -> KeyedPass:
    workers = tuple(WorkerSpec(n, WORKER, {"calls": str(log), "name": n}, **spec) for n in names)
    return KeyedPass(
        KeyedUnitStore(root, "test"),
        workers,
        tuple(
            KeyedUnit(n, u, {"audio": p.get("stamp", "s0")}, {"opt": 1}, {"unit": u, **p}, float(p.get("cost", 1.0)))
            for n in names
            for u, p in units.items()
        ),
    )


def test_inprocess_stores_resumes_exactly_and_orders_longest_first(tmp_path: Path) -> None:
    log = tmp_path / "calls"
    units = {"a": {"cost": 1, "value": 1}, "b": {"cost": 9, "value": 2}, "c": {"cost": 5, "value": 3}}
    out = EngineOptions().run_keyed([_pass(tmp_path / "run", log, units)])
    assert not out.failed and calls(log) == ["w--b", "w--c", "w--a"]  # longest first
    assert out.results[("test", "w", "c")] == {"unit": "c", "value": 3, "by": "w"}
    assert out.facts[("test", "w")]["runner"] == "inprocess" and out.facts[("test", "w")]["pid"] > 0
    assert out.facts[("test", "w")]["closing"] is True  # the worker's closing facts are kept
    # The same pass again: nothing is run, every result comes from the store.
    again = EngineOptions().run_keyed([_pass(tmp_path / "run", log, units)])
    assert len(calls(log)) == 3 and again.results == out.results and not again.facts
    # A changed input (the audio of b) recomputes b only.
    units["b"]["stamp"] = "s1"
    EngineOptions().run_keyed([_pass(tmp_path / "run", log, units)])
    assert calls(log)[3:] == ["w--b"]


def test_retries_then_failed_units_are_not_stored_and_the_next_run_retries_only_them(tmp_path: Path) -> None:
    log = tmp_path / "calls"
    units = {"ok": {"value": 1}, "flaky": {"fail_times": 2}, "bad": {"fail_times": 99}}
    out = run_inprocess([_pass(tmp_path / "run", log, units)], max_retries=2)
    assert set(out.failed) == {("test", "w", "bad")} and "flaky call 2" in out.failed[("test", "w", "bad")]
    assert len(calls(log, unit="flaky")) == 3 and len(calls(log, unit="bad")) == 3  # 1 try + 2 retries each
    store = KeyedUnitStore(tmp_path / "run", "test")
    assert store.get("w", "bad", {"audio": "s0"}, {"opt": 1}) is None
    with pytest.raises(KeyedPassError, match=r"1 unit\(s\) failed.*test w / bad.*re-run the same command"):
        out.raise_failed("test pass")
    before = len(calls(log))
    run_inprocess([_pass(tmp_path / "run", log, units)], max_retries=0)
    assert calls(log)[before:] == ["w--bad"]  # ok and flaky were stored: only bad is asked again


def test_a_refused_key_stops_the_worker_without_another_call(tmp_path: Path) -> None:
    log = tmp_path / "calls"
    units = {"first": {"cost": 3, "fatal": True}, "second": {"cost": 2}, "third": {"cost": 1}}
    out = run_inprocess([_pass(tmp_path / "run", log, units)], max_retries=3)
    assert calls(log) == ["w--first"]  # no retry, no further unit
    assert set(out.failed) == {("test", "w", u) for u in units} and all("key refused" in e for e in out.failed.values())


def test_a_worker_that_cannot_load_fails_its_units_with_the_load_error(tmp_path: Path) -> None:
    p = KeyedPass(
        KeyedUnitStore(tmp_path, "test"),
        (WorkerSpec("w", WORKER, {"calls": str(tmp_path), "fail_load": True}),),
        (KeyedUnit("w", "u", {}, {}, {"unit": "u"}),),
    )
    out = run_inprocess([p])
    assert "weights missing" in out.failed[("test", "w", "u")] and out.facts[("test", "w")]["status"] == "load_failed"


def test_pass_definitions_are_checked() -> None:
    store = KeyedUnitStore("/nonexistent", "test")
    with pytest.raises(ConfigError, match="not given: x"):
        KeyedPass(store, (WorkerSpec("w", WORKER),), (KeyedUnit("x", "u", {}, {}, {}),))
    with pytest.raises(ConfigError, match="share a name"):
        KeyedPass(store, (WorkerSpec("w", WORKER), WorkerSpec("w", WORKER)), ())
    with pytest.raises(ConfigError, match="cannot import worker"):
        load_worker("tests.keyed_fixture:Nope")
    with pytest.raises(ConfigError, match="module:attr"):
        load_worker("tests.keyed_fixture")
    with pytest.raises(ConfigError, match="unknown runner 'my-runner'"):
        EngineOptions(kind="my-runner").run_keyed([])


@pytest.mark.slow
def test_ray_gives_the_same_results_with_placement_facts_on_logical_gpus(ray_gpus8: str, tmp_path: Path) -> None:
    units = {"a": {"cost": 1, "value": 1}, "b": {"cost": 9, "value": 2, "fail_times": 1}, "c": {"cost": 5, "value": 3}}
    local = run_inprocess([_pass(tmp_path / "local", tmp_path / "calls-local", units, names=("x", "y"))])
    log = tmp_path / "calls-ray"  # on the session's instance with 8 logical GPUs (tests/conftest.py)
    gpu = _pass(tmp_path / "ray", log, units, names=("x", "y"), gpu_capable=True, placement={"num_cpus": 0.5})
    cpu = _pass(tmp_path / "ray-cpu", log, {"d": {"value": 4}}, names=("z",), gpu_capable=True, placement={"num_gpus": 0, "num_cpus": 0.5})
    out = EngineOptions(kind="ray").run_keyed([gpu, cpu])
    assert not out.failed
    assert {k: v for k, v in out.results.items() if k[0] == "test" and k[1] in "xy"} == local.results
    ids = {}
    for name in ("x", "y"):
        f = out.facts[("test", name)]
        assert f["runner"] == "ray" and len(f["actors"]) == 1 and f["actors"][0]["pid"] > 0
        ids[name] = f["actors"][0]["gpu_ids"]
        assert len(ids[name]) == 1 and f["cuda_visible_devices"] == ids[name][0]
    assert ids["x"] != ids["y"]  # two actors, two GPUs
    assert out.facts[("test", "z")]["actors"][0]["gpu_ids"] == []  # num_gpus: 0 keeps a worker off the GPUs
    assert len(calls(log, "x", "b")) == 2  # the flaky unit was retried on Ray too
