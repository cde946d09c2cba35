#!/usr/bin/env python
"""The in-process and Ray engines side by side on one recipe, and where Ray placed every pass.

Why: ``--engine ray`` moves every pass of a recipe (ASR, the probes' re-runs, speaker and
emotion embeddings) onto Ray actors. Choosing an engine needs three facts measured on the same
recipe: what Ray costs in wall time, what the driver process still holds in memory once the
workers do the audio work, and that the engine changes no result. A benchmark whose two runs
disagree is not a benchmark, so the rows are compared and a difference fails the command.

    python scripts/bench_engines.py                                 # demo-probes: in-process, then Ray
    python scripts/bench_engines.py --limit 16 --order ray,inprocess --json bench.json
    python scripts/bench_engines.py --placement                     # 8 logical GPUs: the placement table

Timing mode: each engine runs ``audit run RECIPE --engine E`` as a child process (the driver)
in its own fresh output folder. Measured per run:

* **wall s**: from starting the driver to its exit (imports, model loads, every pass, scoring and
  reports: what a user waits for);
* **driver peak RSS**: the driver's own ``getrusage(RUSAGE_SELF).ru_maxrss``, written by the driver
  as it exits (its children and Ray's processes are not counted); ``/proc/PID/status`` VmHWM,
  polled, stands in when the driver dies without exiting normally;
* **workers peak RSS**: the largest sum of the resident memory of the Ray worker processes
  (``ray::...`` processes in the driver's process tree) seen at one time, sampled from ``/proc``
  every fifth poll (0.5 s by default; the driver's own VmHWM every ``--poll-s``). Ray's own
  daemons (raylet, GCS) and other children are reported separately in the JSON output.

Then both run folders are read back with ``audits.api.load`` and compared: the utterance table
(every column but timings) and every table of the summary (``api.frames``: models minus
timings, slices, gaps, pairs, the probes' tables, ...).

Placement mode (``--placement``): starts a local Ray instance with ``--gpus`` logical GPUs, runs
a small recipe on it (two ``simulated`` ASR models asking for GPUs, the speaker section with the
``simulated-sv`` backend, the emotion section with ``simulated-ser`` and ``prosody`` on CPU, and the
conversation section's diarizer and long-form workers on the demo conversation set,
on the first ``--limit`` demo clips) and prints, for every facts file of the run folder that
records actor placements (whatever the pass), the pass, the model or backend, its actors, their
GPU ids and device. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402

log = logging.getLogger("bench_engines")

ENGINES = ("inprocess", "ray")
# Columns and summary keys that legitimately differ between two runs of the same recipe.
TIMING_COLUMNS = frozenset(
    {
        "infer_s",
        "rtfx",
        "load_s",
        "wall_s",
        "warmup_s",
        "elapsed_s",
        "duration_wall_s",
        "created_at",
        "rtfx_ci_lo",
        "rtfx_ci_hi",
    }
)
# The driver writes its own peak RSS (kB, Linux ru_maxrss) to argv[1] as it exits, then runs `audit`.
DRIVER = (
    "import atexit, resource, sys\n"
    "def _peak(path=sys.argv[1]):\n"
    "    with open(path, 'w') as f:\n"
    "        f.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))\n"
    "atexit.register(_peak)\n"
    "sys.argv = ['audit', *sys.argv[2:]]\n"
    "from audits.cli.main import entrypoint\n"
    "entrypoint()\n"
)


class BenchError(Exception):
    """A benchmark that cannot give a valid answer (a run failed, or the two engines disagree)."""


# ----------------------------------------------------------------------------------------------
# /proc: the driver's process tree and its memory
# ----------------------------------------------------------------------------------------------
def proc_status_kb(pid: int, keys: Sequence[str] = ("VmHWM", "VmRSS")) -> dict[str, int]:
    """``VmHWM``/``VmRSS`` (kB) of one process; {} when it is gone."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name in keys:
                    out[name] = int(value.split()[0])
    except (OSError, ValueError, IndexError):
        return {}
    return out


def process_table() -> dict[int, tuple[int, str]]:
    """Every process: pid -> (parent pid, command line or name)."""
    table: dict[int, tuple[int, str]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as fb:
                cmd = fb.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            if not cmd:
                cmd = stat[stat.index("(") + 1 : stat.rindex(")")]
        except (OSError, ValueError):
            continue
        table[pid] = (ppid, cmd)
    return table


def descendants(root: int, table: Mapping[int, tuple[int, str]]) -> dict[int, str]:
    """Processes below ``root`` in ``table`` (not ``root`` itself): pid -> command line."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[int, str] = {}
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        if pid in out:
            continue
        out[pid] = table[pid][1]
        stack.extend(children.get(pid, []))
    return out


def is_ray_worker(cmdline: str) -> bool:
    """A Ray worker process (an actor or a task worker): Ray retitles them ``ray::<name>``."""
    return cmdline.startswith("ray::") or "default_worker.py" in cmdline


@dataclass
class TreeMemory:
    """What the poller saw of the driver's process tree (MB = 2**20 bytes)."""

    driver_hwm_mb: float = 0.0
    workers_peak_mb: float = 0.0  # largest simultaneous sum of the workers' RSS
    workers_hwm_sum_mb: float = 0.0  # sum of every worker process's own peak (an upper bound)
    n_workers: int = 0
    others_peak_mb: float = 0.0  # Ray's daemons and any other child, summed at one time
    samples: int = 0


class TreeWatcher(threading.Thread):
    """Polls the driver's VmHWM often and its process tree every ``tree_every`` polls."""

    def __init__(self, pid: int, poll_s: float = 0.1, tree_every: int = 5) -> None:
        super().__init__(daemon=True, name="tree-watcher")
        self.pid, self.poll_s, self.tree_every = pid, poll_s, tree_every
        self.memory = TreeMemory()
        self._worker_hwm: dict[int, int] = {}
        self._halt = threading.Event()

    def stop(self) -> TreeMemory:
        self._halt.set()
        self.join(timeout=10)
        self.memory.workers_hwm_sum_mb = sum(self._worker_hwm.values()) / 1024
        self.memory.n_workers = len(self._worker_hwm)
        return self.memory

    def run(self) -> None:
        n = 0
        while not self._halt.is_set():
            hwm = proc_status_kb(self.pid, ("VmHWM",)).get("VmHWM")
            if hwm:
                self.memory.driver_hwm_mb = max(self.memory.driver_hwm_mb, hwm / 1024)
            if n % self.tree_every == 0:
                self._sample_tree()
            n += 1
            self._halt.wait(self.poll_s)

    def _sample_tree(self) -> None:
        workers = others = 0
        for pid, cmd in descendants(self.pid, process_table()).items():
            st = proc_status_kb(pid)
            if not st:
                continue
            if is_ray_worker(cmd):
                workers += st.get("VmRSS", 0)
                self._worker_hwm[pid] = max(self._worker_hwm.get(pid, 0), st.get("VmHWM", 0))
            else:
                others += st.get("VmRSS", 0)
        self.memory.workers_peak_mb = max(self.memory.workers_peak_mb, workers / 1024)
        self.memory.others_peak_mb = max(self.memory.others_peak_mb, others / 1024)
        self.memory.samples += 1


# ----------------------------------------------------------------------------------------------
# timing mode
# ----------------------------------------------------------------------------------------------
@dataclass
class EngineRun:
    """One engine's run of the recipe: where it wrote, how long it took, what it held."""

    engine: str
    out: str
    rc: int
    wall_s: float
    driver_peak_mb: float | None
    driver_peak_source: str
    memory: TreeMemory = field(default_factory=TreeMemory)
    log: str = ""


def child_env() -> dict[str, str]:
    """The driver's environment: this checkout's code first, Ray's usage report off."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    return env


def run_driver(audit_args: Sequence[str], engine: str, out: Path, poll_s: float, env: Mapping[str, str] | None = None) -> EngineRun:
    """``audit run ...`` in a child process, its memory watched; ``out`` must not exist yet."""
    out.parent.mkdir(parents=True, exist_ok=True)
    log_path = out.parent / f"{out.name}.log"
    peak_path = out.parent / f"{out.name}.maxrss"
    cmd = [sys.executable, "-c", DRIVER, str(peak_path), *audit_args]
    log.info("%s: %s (log: %s)", engine, " ".join(["audit", *audit_args]), log_path)
    with open(log_path, "w", encoding="utf-8") as lf:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO, env=dict(env or child_env()), stdout=lf, stderr=subprocess.STDOUT)
        watcher = TreeWatcher(proc.pid, poll_s=poll_s)
        watcher.start()
        rc = proc.wait()
        wall = time.perf_counter() - t0
    memory = watcher.stop()
    try:
        peak: float | None = int(peak_path.read_text().strip()) / 1024
        source = "getrusage"
    except (OSError, ValueError):
        peak, source = (memory.driver_hwm_mb or None), "VmHWM (polled)"
    return EngineRun(engine, str(out), rc, wall, peak, source, memory, str(log_path))


def fresh_dir(base: Path, name: str) -> Path:
    """A folder under ``base`` that does not exist yet (runs are never resumed into)."""
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=base)) / "run"


def fmt(x: float | None, digits: int = 1) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def timing_table(runs: Sequence[EngineRun]) -> str:
    """The Markdown table of the engine runs; ratios are to the in-process run (when there is one)."""
    base = next((r for r in runs if r.engine == "inprocess"), None)
    lines = [
        "| engine | wall s | driver peak RSS MB | workers peak RSS MB | wall / in-process | driver RSS / in-process |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in runs:
        wall_ratio = r.wall_s / base.wall_s if base and base.wall_s > 0 else None
        rss_ratio = r.driver_peak_mb / base.driver_peak_mb if base and base.driver_peak_mb and r.driver_peak_mb is not None else None
        workers = r.memory.workers_peak_mb if r.memory.n_workers else None
        lines.append(
            f"| {r.engine} | {fmt(r.wall_s)} | {fmt(r.driver_peak_mb)} | {fmt(workers)} | {fmt(wall_ratio, 2)} | {fmt(rss_ratio, 2)} |"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# are the two runs' results equal?
# ----------------------------------------------------------------------------------------------
def _same(a: Any, b: Any, rel: float) -> bool:
    """Two cells equal: numbers to ``rel``, NaN and None alike, lists and arrays item by item."""
    a = a.tolist() if hasattr(a, "tolist") else a  # numpy scalars and arrays as Python values
    b = b.tolist() if hasattr(b, "tolist") else b
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return (
            isinstance(a, (list, tuple))
            and isinstance(b, (list, tuple))
            and len(a) == len(b)
            and all(_same(x, y, rel) for x, y in zip(a, b))
        )
    a_na = a is None or (isinstance(a, float) and math.isnan(a))
    b_na = b is None or (isinstance(b, float) and math.isnan(b))
    if a_na or b_na:
        return a_na and b_na
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-12)
    return bool(a == b)


def frame_diffs(
    name: str,
    a: pd.DataFrame,
    b: pd.DataFrame,
    keys: Sequence[str] | None = None,
    ignore: frozenset[str] = TIMING_COLUMNS,
    rel: float = 1e-9,
    limit: int = 20,
) -> list[str]:
    """Differences between two tables, as lines naming the table, row and column.

    Timing columns are left out; rows are matched on ``keys`` when both tables have them (else
    sorted by every compared column); floats agree to ``rel``; NaN equals NaN and None.
    """
    cols_a = [c for c in a.columns if c not in ignore]
    cols_b = [c for c in b.columns if c not in ignore]
    out: list[str] = []
    if set(cols_a) != set(cols_b):
        only_a, only_b = sorted(set(cols_a) - set(cols_b)), sorted(set(cols_b) - set(cols_a))
        out.append(f"{name}: columns differ (only in the first: {only_a}; only in the second: {only_b})")
    cols = [c for c in cols_a if c in set(cols_b)]
    if len(a) != len(b):
        return [*out, f"{name}: {len(a)} rows vs {len(b)}"]
    if not cols or not len(a):
        return out
    by = [k for k in (keys or []) if k in cols] or cols

    def ordered(df: pd.DataFrame) -> pd.DataFrame:
        try:
            return df[cols].sort_values(by, kind="stable", na_position="last").reset_index(drop=True)
        except TypeError:  # unorderable cells (lists): compare in stored order
            return df[cols].reset_index(drop=True)

    da, db = ordered(a), ordered(b)
    for i in range(len(da)):
        ra, rb = da.iloc[i], db.iloc[i]
        for c in cols:
            if not _same(ra[c], rb[c], rel):
                where = ", ".join(f"{k}={ra[k]!r}" for k in by[:2]) if by is not cols else f"row {i}"
                out.append(f"{name} [{where}] {c}: {str(ra[c])[:80]!r} vs {str(rb[c])[:80]!r}")
                if len(out) >= limit:
                    return [*out, f"{name}: (more differences not listed)"]
    return out


def result_diffs(first: Path, second: Path) -> list[str]:
    """Every difference between two finished run folders' results (``audits.api.load``), timings aside."""
    from audits import api

    ra, rb = api.load(first), api.load(second)
    diffs = frame_diffs("utterances", ra.table, rb.table, keys=("model", "utt_id"))
    fa, fb = api.frames(ra), api.frames(rb)
    for name in sorted(set(fa) | set(fb)):
        if name not in fa or name not in fb:
            diffs.append(f"table {name}: only in {'the first' if name in fa else 'the second'} run")
            continue
        keys = [k for k in ("probe", "model", "arm", "slice", "label", "value", "a", "b") if k in fa[name].columns]
        diffs += frame_diffs(name, fa[name], fb[name], keys=keys)
    return diffs


def compared_tables(run: Path) -> dict[str, int]:
    """Row counts of the tables the comparison covers (so a report shows what "equal" means)."""
    from audits import api

    r = api.load(run)
    return {"utterances": len(r.table), **{k: len(v) for k, v in api.frames(r).items() if len(v)}}


def timing_mode(args: argparse.Namespace) -> dict[str, Any]:
    """Run the recipe once per engine, in the given order, then compare the results."""
    order = [e.strip() for e in args.order.split(",")]
    if sorted(order) != sorted(ENGINES):
        raise BenchError(f"--order must name inprocess and ray once each (e.g. ray,inprocess), got {args.order!r}")
    base = Path(args.out).resolve()
    runs: list[EngineRun] = []
    for engine in order:
        out = fresh_dir(base, engine)
        audit_args = ["run", args.recipe, "--engine", engine, "--out", str(out), "--no-resume"]
        if args.limit is not None:
            audit_args += ["--limit", str(args.limit)]
        if args.models:
            audit_args += ["--models", args.models]
        run = run_driver(audit_args, engine, out, args.poll_s)
        log.info(
            "%s: rc %d, wall %.1f s, driver peak %s MB (%s), workers peak %s MB",
            engine,
            run.rc,
            run.wall_s,
            fmt(run.driver_peak_mb),
            run.driver_peak_source,
            fmt(run.memory.workers_peak_mb),
        )
        runs.append(run)
        if run.rc != 0:
            raise BenchError(f"audit run --engine {engine} failed (exit {run.rc}); see {run.log}")
    first, second = (Path(r.out) for r in runs)
    diffs = result_diffs(first, second)
    return {
        "recipe": args.recipe,
        "limit": args.limit,
        "order": order,
        "runs": [asdict(r) for r in runs],
        "tables_compared": compared_tables(first),
        "equal": not diffs,
        "differences": diffs,
        "table": timing_table(runs),
    }


# ----------------------------------------------------------------------------------------------
# placement mode
# ----------------------------------------------------------------------------------------------
PLACEMENT_MODELS = """\
# Stand-in ASR models for the placement run: they sleep like a model of the given speed and record
# the device and GPU ids they were given (engine/backends/asr/simulated.py).
models:
  bench-sim-asr-a:
    backend: simulated
    options: {name: bench-sim-asr-a, seed: 1, rtfx: 20, load_s: 1}
    batch_size: 4
    num_gpus: 1
    num_cpus: 0.25
    tags: [bench]
    description: simulated ASR model holding one GPU per actor
  bench-sim-asr-b:
    backend: simulated
    options: {name: bench-sim-asr-b, seed: 2, rtfx: 10, load_s: 1}
    batch_size: 4
    num_gpus: 0.5
    num_cpus: 0.25
    tags: [bench]
    description: simulated ASR model holding half a GPU per actor
"""

PLACEMENT_RECIPE = """\
name: bench-placement
description: Placement of every pass's Ray actors on logical GPUs (scripts/bench_engines.py --placement)
dataset:
  path: {dataset}
  reader: auto
models: [bench-sim-asr-a, bench-sim-asr-b]
normalizer: whisper-english
shard_size: {shard_size}
warmup: 0
scoring:
  n_boot: 100
speaker:
  backends: [simulated-sv]
  backend_options: {{simulated-sv: {{dim: 24, num_cpus: 0.25}}}}
  max_per_class: 200
  seed: 0
  warmup: 0
emotion:
  backends: [simulated-ser, prosody]
  backend_options: {{simulated-ser: {{num_cpus: 0.25}}, prosody: {{num_gpus: 0, num_cpus: 0.25}}}}
  label: emotion
  warmup: 0
conversation:
  dataset: builtin:demo-conversation
  diarization: {{backend: vad-resemblyzer, options: {{num_cpus: 0.5}}}}
  segmentation: {{max_chunk_s: 30}}
"""


def _pass_label(rel: Path) -> str:
    """The pass a facts file belongs to, from its folder: ``models/`` is the main ASR pass,
    ``models-embed/sv/`` the speaker pass, ``probes/masking/<hash>/models/`` a probe's re-run."""
    parts = [p for p in rel.parent.parts if not (len(p) >= 12 and all(ch in "0123456789abcdef" for ch in p))]
    if parts and parts[-1].startswith("models"):
        parts = parts[:-1]
    parts = [p for p in parts if not p.startswith("models")]
    return "/".join(parts) or "asr"


def _node_actors(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The actor placements one facts mapping records: its ``actors`` list (or its ``engine``'s),
    else the single ``actor`` record a first load writes (with the device its backend reported)."""
    engine = node.get("engine")
    for holder in (node, engine if isinstance(engine, Mapping) else {}):
        if isinstance(holder.get("actors"), list) and holder["actors"]:
            device = node.get("device") if isinstance(node.get("device"), str) else None  # a keyed pass's worker facts
            return [{**dict(a), "device": a.get("device") or device} for a in holder["actors"] if isinstance(a, Mapping)]
    if isinstance(node.get("actor"), Mapping):
        info = node.get("info")
        device = info.get("device") if isinstance(info, Mapping) else None
        return [{**dict(node["actor"]), "device": node["actor"].get("device") or device or node.get("device")}]
    return []


def actor_entries(doc: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Mapping[str, Any], list[dict[str, Any]]]]:
    """``(key path, facts mapping, actors)`` for every mapping in ``doc`` that records actor placements."""
    if isinstance(doc, Mapping):
        actors = _node_actors(doc)
        if actors:
            yield path, doc, actors
        for k, v in doc.items():
            if actors and k in ("engine", "actor", "actors"):
                continue
            yield from actor_entries(v, (*path, str(k)))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from actor_entries(v, (*path, str(i)))


def facts_files(run_dir: Path) -> list[Path]:
    """The run folder's JSON files that can hold facts, per-pass facts files (``models*/``) first;
    markers are left out."""
    files = [p for p in sorted(run_dir.rglob("*.json")) if not any(x.startswith("markers") for x in p.relative_to(run_dir).parts)]
    return sorted(files, key=lambda p: (not any(x.startswith("models") for x in p.relative_to(run_dir).parent.parts), str(p)))


def _actor_key(model: str, actors: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
    return (model, tuple(sorted((str(a.get("host")), str(a.get("pid")), str(a.get("gpu_ids"))) for a in actors)))


def placement_rows(run_dir: Path) -> list[dict[str, Any]]:
    """One row per facts entry that records Ray actor placements, whatever the pass that wrote it.

    Per-pass facts files (``models/``, ``models-embed/sv/``, ``probes/<probe>/<key>/models/``, and
    any other ``models*`` folder) are read first; an entry found again in a file that gathers
    facts (``summary.json``) with the same actors is listed once.
    """
    rows: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    for file in facts_files(run_dir):
        try:
            doc = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        rel = file.relative_to(run_dir)
        per_pass = any(x.startswith("models") for x in rel.parent.parts)
        for keys, node, actors in actor_entries(doc):
            keyed = isinstance(node.get("pass"), str) and isinstance(node.get("name"), str)  # a keyed pass (engine/keyed/keyed_pass.py)
            model = str(node["name"] if keyed else node.get("model") or (keys[-1] if keys else file.stem))
            key = _actor_key(model, actors)
            if key in seen:
                continue
            seen.add(key)
            kind = node.get("kind") if isinstance(node.get("kind"), str) else None
            if keyed:  # e.g. "conversation diarization": the section (first key of summary.json) and the keyed pass
                kind = f"{keys[0] if keys and not per_pass else _pass_label(rel)} {node['pass']}"
            where = _pass_label(rel) if per_pass else "/".join([rel.stem, *[k for k in keys[:-1] if k != "models"]])
            rows.append(
                {
                    "pass": kind or where,
                    "model": model,
                    "backend": str(node["backend"]) if node.get("backend") else None,
                    "file": rel.as_posix() + ("#" + "/".join(keys) if keys else ""),
                    "actors": actors,
                }
            )
    return sorted(rows, key=lambda r: (r["pass"], r["model"]))


def placement_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Markdown: pass, model/backend, actors (host:pid), GPU ids per actor, devices."""
    lines = ["| pass | model / backend | actors | GPU ids | device |", "| --- | --- | ---: | --- | --- |"]
    for r in rows:
        actors = list(r["actors"])
        name = r["model"] if not r.get("backend") or r["backend"] == r["model"] else f"{r['model']} / {r['backend']}"
        gpus = "; ".join(",".join(str(g) for g in (a.get("gpu_ids") or [])) or "–" for a in actors)
        devices = ", ".join(sorted({str(a.get("device")) for a in actors if a.get("device")})) or "–"
        lines.append(f"| {r['pass']} | {name} | {len(actors)} | {gpus} | {devices} |")
    return "\n".join(lines)


def placement_mode(args: argparse.Namespace) -> dict[str, Any]:
    """A local Ray instance with logical GPUs, a small recipe of every pass kind on it, the placement table."""
    import ray

    from audits.recipes import builtin_dataset_path
    from engine.run.ray_setup import init_ray

    base = Path(args.out).resolve()
    work = Path(tempfile.mkdtemp(prefix="placement-", dir=_mkdir(base)))
    config = work / "configs"
    shutil.copytree(REPO / "audit_configs", config)
    (config / "models" / "bench-placement.yaml").write_text(PLACEMENT_MODELS, encoding="utf-8")
    recipe = work / "bench-placement.yaml"
    # The demo corpus's own manifest, so that --shard-size cuts it (builtin:demo keeps its stored shards).
    manifest = builtin_dataset_path("builtin:demo") / "manifest.jsonl"
    dataset = json.dumps(str(manifest)) if manifest.is_file() else "builtin:demo"
    if not manifest.is_file():
        log.info("the demo corpus is not built yet: the run builds it, and keeps its stored shards")
    recipe.write_text(PLACEMENT_RECIPE.format(shard_size=args.shard_size, dataset=dataset), encoding="utf-8")
    started = init_ray(num_cpus=args.cpus, num_gpus=args.gpus)
    try:
        address = ray.get_runtime_context().gcs_address
        log.info("local Ray at %s: %s", address, {k: v for k, v in ray.cluster_resources().items() if k in ("CPU", "GPU")})
        env = {**child_env(), "AUDIT_CONFIG_DIR": str(config)}
        out = work / "run"
        audit_args = ["run", str(recipe), "--address", address, "--out", str(out), "--no-resume", "--limit", str(args.limit)]
        run = run_driver(audit_args, "ray", out, args.poll_s, env)
    finally:
        if started:
            ray.shutdown()
    if run.rc != 0:
        raise BenchError(f"the placement run failed (exit {run.rc}); see {run.log}")
    rows = placement_rows(out)
    if not rows:
        raise BenchError(f"no facts file under {out} records an actor placement; was the run on Ray?")
    return {
        "command": "audit " + " ".join(audit_args),
        "gpus": args.gpus,
        "cpus": args.cpus,
        "limit": args.limit,
        "run": asdict(run),
        "placements": rows,
        "table": placement_table(rows),
    }


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


# ----------------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipe", default="demo-probes", help="recipe name or YAML path (default: demo-probes)")
    ap.add_argument("--limit", type=int, default=None, help="audit run --limit N: only the first N utterances")
    ap.add_argument("--models", default=None, help="audit run --models: comma-separated models replacing the recipe's")
    ap.add_argument("--order", default="inprocess,ray", help="which engine runs first: inprocess,ray or ray,inprocess")
    ap.add_argument("--out", default="runs/bench-engines", help="folder for the runs (a fresh sub-folder per run)")
    ap.add_argument("--json", default=None, help="also write every figure to this JSON file")
    ap.add_argument("--poll-s", type=float, default=0.1, help="memory polling interval (the process tree: every 5th poll)")
    ap.add_argument("--placement", action="store_true", help="the placement run on logical GPUs instead of the timing")
    ap.add_argument("--gpus", type=int, default=8, help="--placement: logical GPUs of the local Ray instance")
    ap.add_argument("--cpus", type=int, default=4, help="--placement: logical CPUs of the local Ray instance")
    ap.add_argument("--shard-size", type=int, default=4, help="--placement: utterances per shard")
    args = ap.parse_args(argv)
    if args.placement and args.limit is None:
        args.limit = 24
    for name in ("limit", "gpus", "cpus", "shard_size"):
        value = getattr(args, name)
        if value is not None and value < 1:
            ap.error(f"--{name.replace('_', '-')} must be a positive integer, got {value}")
    if not args.poll_s > 0:
        ap.error(f"--poll-s must be a positive number, got {args.poll_s}")
    return args


def verdict(result: Mapping[str, Any]) -> tuple[str, int]:
    """The line printed under a timing table and the exit status: 0 when both engines' results are
    equal, 3 (with every difference listed) when they are not."""
    n = dict(result.get("tables_compared") or {})
    if result.get("equal"):
        return f"results equal: utterances ({n.get('utterances', 0)} rows) and {max(0, len(n) - 1)} summary tables, timings aside", 0
    diffs = list(result.get("differences") or [])
    banner = "!" * 78
    text = "\n".join(
        [banner, f"RESULTS DIFFER between the engines ({len(diffs)} difference(s)): these timings compare different work", *diffs, banner]
    )
    return text, 3


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    args = parse_args(argv)
    if not Path("/proc/self/status").exists():
        log.error("bench_engines measures memory through /proc: run it on Linux")
        return 2
    try:
        result = placement_mode(args) if args.placement else timing_mode(args)
    except BenchError as exc:
        log.error("%s", exc)
        return 1
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    sys.stdout.write(result["table"] + "\n")
    if args.placement:
        return 0
    text, rc = verdict(result)
    sys.stdout.write("\n" + text + "\n")
    if rc:
        log.error("the two engines' results differ; see the list above (the timings are not valid)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
