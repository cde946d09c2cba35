"""scripts/bench_engines.py on synthetic inputs (no Ray, no model): the equality check between two
runs' tables, the timing table, the placement table from facts files of any pass, and the memory
watcher's split between the driver and Ray-titled worker processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_engines as be  # noqa: E402


def _rows() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model": ["a", "a", "b", "b"],
            "utt_id": ["u1", "u2", "u1", "u2"],
            "hyp_raw": ["one", "two", "three", None],
            "wer": [0.25, 0.5, float("nan"), 1.0],
            "infer_s": [0.1, 0.2, 0.3, 0.4],
            "words": [[1, 2], [3], [], [4]],
        }
    )


def test_equal_tables_in_another_order_with_other_timings_agree() -> None:
    a = _rows()
    b = a.iloc[::-1].copy()
    b["infer_s"] = [9.0, 8.0, 7.0, 6.0]  # timings differ between runs: not a difference
    b["wer"] = b["wer"] * (1 + 1e-12)
    b["words"] = [np.array(w) for w in b["words"]]  # a list read back as an array is the same value
    assert be.frame_diffs("utterances", a, b, keys=("model", "utt_id")) == []


def test_a_changed_word_a_missing_row_and_a_missing_column_are_named() -> None:
    a = _rows()
    b = a.copy()
    b.loc[1, "hyp_raw"] = "too"
    diffs = be.frame_diffs("utterances", a, b, keys=("model", "utt_id"))
    assert diffs == ["utterances [model='a', utt_id='u2'] hyp_raw: 'two' vs 'too'"]
    b = a.copy()
    b.loc[2, "wer"] = 0.0  # NaN vs a number
    assert len(be.frame_diffs("utterances", a, b, keys=("model", "utt_id"))) == 1
    assert be.frame_diffs("utterances", a, a.iloc[:3]) == ["utterances: 4 rows vs 3"]
    only = be.frame_diffs("probes", a, a.drop(columns=["hyp_raw"]), keys=("model", "utt_id"))
    assert only and "only in the first: ['hyp_raw']" in only[0]
    # a float beyond the tolerance is a difference; the limit keeps the list short
    b = a.copy()
    b["wer"] = b["wer"] + 1e-6
    assert len(be.frame_diffs("slices", a, b, keys=("model",))) == 3
    many = pd.DataFrame({"k": range(50), "v": range(50)})
    assert len(be.frame_diffs("t", many, many.assign(v=many["v"] + 1), keys=("k",), limit=5)) == 6


def test_verdict_is_loud_and_non_zero_when_the_runs_disagree() -> None:
    text, rc = be.verdict({"equal": True, "tables_compared": {"utterances": 48, "probes": 12, "slices": 30}})
    assert rc == 0 and "utterances (48 rows) and 2 summary tables" in text
    text, rc = be.verdict({"equal": False, "differences": ["utterances [model='a', utt_id='u2'] hyp_raw: 'two' vs 'too'"]})
    assert rc == 3 and "RESULTS DIFFER" in text and "'two' vs 'too'" in text


def test_timing_table_ratios_are_to_the_in_process_run() -> None:
    runs = [
        be.EngineRun("ray", "r", 0, 150.0, 300.0, "getrusage", be.TreeMemory(workers_peak_mb=900.0, n_workers=3)),
        be.EngineRun("inprocess", "i", 0, 100.0, 1200.0, "getrusage", be.TreeMemory()),
    ]
    lines = be.timing_table(runs).splitlines()
    assert lines[0].startswith("| engine | wall s | driver peak RSS MB | workers peak RSS MB |")
    assert lines[2] == "| ray | 150.0 | 300.0 | 900.0 | 1.50 | 0.25 |"
    assert lines[3] == "| inprocess | 100.0 | 1,200.0 | – | 1.00 | 1.00 |"


def _write(path: Path, doc: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def test_placement_rows_list_every_pass_that_records_actors(tmp_path: Path) -> None:
    actor = {"host": "n1", "pid": 11, "node_id": "x", "gpu_ids": ["0"]}
    asr = {
        "model": "asr-a",
        "backend": "simulated",
        "status": "loaded",
        "actor": actor,
        "info": {"device": "cuda"},
        "engine": {"runner": "ray", "actors": [{**actor, "device": "cuda"}, {**actor, "pid": 12, "gpu_ids": ["3"], "device": "cuda"}]},
    }
    _write(tmp_path / "models" / "asr-a.json", asr)
    _write(tmp_path / "models" / "local.json", {"model": "local", "engine": {"runner": "inprocess", "pid": 5, "gpu_ids": []}})
    _write(
        tmp_path / "models-embed" / "sv" / "sim-sv.json",
        {
            "model": "sim-sv",
            "backend": "simulated-sv",
            "engine": {"runner": "ray", "actors": [{**actor, "pid": 13, "gpu_ids": ["1"], "device": "cuda"}]},
        },
    )
    # a pass this script does not know (diarization under the conversation section): listed all the same
    _write(
        tmp_path / "conversation" / "0123456789abcdef" / "models-diar" / "diar.json",
        {
            "model": "diar",
            "backend": "pyannote",
            "engine": {"runner": "ray", "actors": [{**actor, "pid": 14, "gpu_ids": [], "device": "cpu"}]},
        },
    )
    # a facts file written at first load only: the single actor record, device from the backend's info
    _write(
        tmp_path / "probes" / "masking" / "fedcba9876543210" / "models" / "m.json",
        {"model": "m", "actor": {**actor, "pid": 15, "gpu_ids": ["2"]}, "info": {"device": "cuda"}},
    )
    # summary.json repeats the ASR facts (listed once) and holds one entry found nowhere else
    _write(tmp_path / "summary.json", {"models": {"asr-a": asr}, "judges": {"j1": {"engine": {"actors": [{**actor, "pid": 16}]}}}})
    _write(tmp_path / "markers" / "asr-a" / "s0.json", {"actor": actor})  # markers are not facts
    rows = be.placement_rows(tmp_path)
    got = {(r["pass"], r["model"]): r for r in rows}
    assert set(got) == {("asr", "asr-a"), ("sv", "sim-sv"), ("conversation", "diar"), ("probes/masking", "m"), ("summary/judges", "j1")}
    assert [a["pid"] for a in got[("asr", "asr-a")]["actors"]] == [11, 12]
    table = be.placement_table(rows).splitlines()
    assert table[0] == "| pass | model / backend | actors | GPU ids | device |"
    assert "| asr | asr-a / simulated | 2 | 0; 3 | cuda |" in table
    assert "| conversation | diar / pyannote | 1 | – | cpu |" in table
    assert "| probes/masking | m | 1 | 2 | cuda |" in table
    assert "| summary/judges | j1 | 1 | 0 | – |" in table


def test_process_tree_and_ray_worker_titles() -> None:
    table = {
        1: (0, "init"),
        10: (1, "python audit run"),
        11: (10, "raylet"),
        12: (11, "ray::ModelActor.run"),
        13: (11, "python .../default_worker.py --x"),
        14: (1, "ray::Other"),
    }
    assert be.descendants(10, table) == {11: "raylet", 12: "ray::ModelActor.run", 13: "python .../default_worker.py --x"}
    assert [be.is_ray_worker(c) for c in ("ray::IDLE", "raylet", "/x/default_worker.py", "gcs_server")] == [True, False, True, False]


CHILD = textwrap.dedent(
    """
    import subprocess, sys, time
    held = bytearray(40 << 20)  # the driver holds 40 MB
    worker = subprocess.Popen(["bash", "-c", 'exec -a ray::FakeActor "$0" -c "b = bytearray(160 << 20); import time; time.sleep(2.5)"',
                               sys.executable])
    worker.wait()
    """
)


def test_watcher_measures_the_driver_apart_from_its_ray_workers() -> None:
    """A real process tree: the driver's peak excludes its 160 MB worker, which is counted as a worker."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD])
    watcher = be.TreeWatcher(proc.pid, poll_s=0.05, tree_every=2)
    watcher.start()
    t0 = time.monotonic()
    assert proc.wait(timeout=60) == 0
    mem = watcher.stop()
    assert time.monotonic() - t0 < 60
    assert 40 <= mem.driver_hwm_mb < 140, mem
    assert mem.n_workers == 1 and 160 <= mem.workers_peak_mb < 260, mem
    assert 160 <= mem.workers_hwm_sum_mb < 260, mem


@pytest.mark.parametrize("argv", [["--order", "ray"], ["--limit", "0"], ["--poll-s", "0"]])
def test_bad_options_are_refused(argv: list[str]) -> None:
    if argv[0] == "--order":
        with pytest.raises(be.BenchError, match="--order must name inprocess and ray"):
            be.timing_mode(be.parse_args(argv))
    else:
        with pytest.raises(SystemExit):
            be.parse_args(argv)
