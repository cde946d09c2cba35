"""Load test: does the driver's memory stay flat as the number of utterances grows?

Method (why it measures the right thing):

* The corpus is the demo corpus (``data/demo``, 208 synthetic clips) repeated with derived ids
  (``demo-0001~r000123``) to N utterances, written as a NeMo manifest whose rows point at the demo
  audio files, so disk use does not grow with N.
* Each size runs in a fresh Python process that calls ``audits.pipeline.run_recipe`` exactly as
  ``audit run`` does: open the dataset, stream ``(model, shard)`` units through the engine, write a
  part and a marker per unit, consolidate ``utterances.parquet``, score every slice and write
  ``summary.json``, ``report.md`` and ``report.html``. The process's peak resident set
  (``ru_maxrss``) is the figure; a sampler thread also records the peak during the engine phase
  alone (until the last unit is written).
* The model is the registry's real ``memorizer`` backend (the positive control), indexed on the
  208 demo clips and with no fallback: it decodes, fingerprints and matches every clip, so the
  whole audio path (decode, resample check, batch, rows) runs per utterance, but at a few ms per
  clip instead of a neural ASR model's seconds. Model cost is constant in N either way; what must
  not grow is what the driver keeps per utterance.
* ``--engine ray`` runs the same thing on the Ray engine: the driver then only streams shards
  and writes parts (decoding and the model live in other processes), which is the driver the
  issue asks about; ``inprocess`` (default) is the stricter test, since there the one process also
  decodes audio and holds the model.

Pass: peak RSS at the largest size within ``--tolerance`` (20 %) of the smallest size's. Results go
to ``OUT/load_test.json`` (read by ``scripts/reliability_report.py``).

    python scripts/load_test.py                      # 5,000 and 20,000 utterances
    python scripts/load_test.py --sizes 1000 4000    # quicker
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

REPO = Path(__file__).resolve().parents[1]
log = logging.getLogger("load_test")


def rss_bytes() -> int:
    """Current resident set of this process (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


class PeakSampler:
    """Polls this process's RSS in a thread; ``peak`` is the largest value seen while running."""

    def __init__(self, interval_s: float = 0.05) -> None:
        self.interval_s = interval_s
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes())
            self._stop.wait(self.interval_s)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())


def write_repeated_manifest(demo: Path, n: int, path: Path) -> int:
    """N rows cycling through the demo manifest with derived ids; streamed, not held in memory."""
    base = [json.loads(line) for line in (demo / "manifest.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    if not base:
        raise SystemExit(f"{demo}/manifest.jsonl is empty; build it with: audit corpus demo --out {demo}")
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            rec = dict(base[i % len(base)])
            audio = Path(rec["audio_filepath"])
            rec["audio_filepath"] = str(audio if audio.is_absolute() else (demo / audio).resolve())
            rec["parent_id"] = rec["utt_id"]
            rec["utt_id"] = f"{rec['utt_id']}~r{i:06d}"
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return len(base)


def _config_dir(work: Path, demo: Path) -> Path:
    """A copy of the shipped configuration tree (audit_configs/) with a memorizer entry indexed on the demo corpus (no fallback)."""
    import shutil

    cfg = work / "configs"
    if cfg.exists():
        shutil.rmtree(cfg)
    shutil.copytree(REPO / "audit_configs", cfg)
    entry = {"backend": "memorizer", "options": {"index": str(demo), "threshold": 0.85}, "batch_size": 16, "tags": ["load-test"]}
    (cfg / "models" / "load-test.yaml").write_text(json.dumps({"models": {"load-memorizer": entry}}))
    return cfg


def child(n: int, work: Path, demo: Path, engine: str, shard_size: int) -> dict[str, Any]:
    """One measured run (called in a fresh process, after AUDIT_CONFIG_DIR is set)."""
    from audits.pipeline import run_recipe
    from audits.recipes import parse_recipe
    from engine.engine import EngineOptions

    manifest = work / "manifest.jsonl"
    write_repeated_manifest(demo, n, manifest)
    out = work / "run"
    recipe = parse_recipe(
        {
            "name": f"load-{n}",
            "dataset": {"path": str(manifest)},
            "models": ["load-memorizer"],
            "shard_size": shard_size,
            "warmup": 0,
            "scoring": {"n_boot": 100},
        },
        "load-test.yaml",
    )
    state = {"units": 0, "engine_peak": 0}
    sampler = PeakSampler()

    def progress(event: str, k: int, info: dict[str, Any]) -> None:
        if event == "unit":
            state["units"] += 1
            state["engine_peak"] = sampler.peak

    baseline_rss = rss_bytes()
    t0 = time.perf_counter()
    with sampler:
        opts = EngineOptions(kind=engine, workers=1) if engine == "ray" else EngineOptions()
        summary = run_recipe(recipe, out, progress=progress, engine=opts)
    wall = time.perf_counter() - t0
    import pyarrow.parquet as pq

    table = pq.read_table(out / "utterances.parquet", columns=["model", "utt_id", "hyp_raw", "error"]).to_pandas()
    m = summary["models"]["load-memorizer"]
    return {
        "n_utts": n,
        "engine": engine,
        "shard_size": shard_size,
        "units": state["units"],
        "rows": len(table),
        "rows_unique": len(table.drop_duplicates(["model", "utt_id"])),
        "rows_failed": int(table["error"].notna().sum()),
        "wer": m["wer"],
        "wall_s": round(wall, 1),
        "rss_after_imports_mb": round(baseline_rss / 2**20, 1),
        "engine_peak_rss_mb": round(state["engine_peak"] / 2**20, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def run_size(n: int, out_dir: Path, demo: Path, engine: str, shard_size: int) -> dict[str, Any]:
    work = out_dir / f"n{n}"
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, AUDIT_CONFIG_DIR=str(_config_dir(work, demo)), PYTHONPATH=str(REPO))
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        str(n),
        "--work",
        str(work),
        "--demo",
        str(demo),
        "--engine",
        engine,
        "--shard-size",
        str(shard_size),
    ]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"load run of {n} utterances failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Driver peak-RSS check at growing utterance counts.")
    p.add_argument("--sizes", type=int, nargs="+", default=[5000, 20000])
    p.add_argument("--engine", choices=["inprocess", "ray"], default="inprocess")
    p.add_argument("--demo", type=Path, default=REPO / "data" / "demo")
    p.add_argument("--out", type=Path, default=None, help="work folder (default: a temporary one); load_test.json is written here")
    p.add_argument("--shard-size", type=int, default=64)
    p.add_argument("--tolerance", type=float, default=0.20)
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--work", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child is not None:
        logging.basicConfig(level=logging.WARNING)
        print(json.dumps(child(args.child, args.work, args.demo.resolve(), args.engine, args.shard_size)))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    demo = args.demo.resolve()
    if not (demo / "manifest.jsonl").exists():
        from audits.pipeline import ensure_demo_corpus

        log.info("building the demo corpus in %s", demo)
        ensure_demo_corpus(demo)
    out = args.out or Path(tempfile.mkdtemp(prefix="load-test-"))
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for n in sorted(args.sizes):
        log.info("running %d utterances (%s engine) ...", n, args.engine)
        r = run_size(n, out, demo, args.engine, args.shard_size)
        log.info(
            "  %6d utts: peak RSS %.1f MB (engine phase %.1f MB, after imports %.1f MB), %d rows, %d unique, %d failed, %.0f s",
            n,
            r["peak_rss_mb"],
            r["engine_peak_rss_mb"],
            r["rss_after_imports_mb"],
            r["rows"],
            r["rows_unique"],
            r["rows_failed"],
            r["wall_s"],
        )
        results.append(r)
    small, large = results[0], results[-1]
    growth = large["peak_rss_mb"] / small["peak_rss_mb"] - 1.0
    engine_growth = large["engine_peak_rss_mb"] / small["engine_peak_rss_mb"] - 1.0 if small["engine_peak_rss_mb"] else None
    per_utt = (large["peak_rss_mb"] - small["peak_rss_mb"]) * 2**20 / max(1, large["n_utts"] - small["n_utts"])
    complete = all(r["rows"] == r["rows_unique"] == r["n_utts"] for r in results)
    ok = growth <= args.tolerance and complete
    report = {
        "engine": args.engine,
        "results": results,
        "growth": growth,
        "engine_phase_growth": engine_growth,
        "bytes_per_extra_utt": per_utt,
        "tolerance": args.tolerance,
        "rows_complete": complete,
        "pass": ok,
    }
    (out / "load_test.json").write_text(json.dumps(report, indent=2))
    log.info(
        "peak RSS %d -> %d utts: %.1f MB -> %.1f MB (%+.1f %%, %.0f bytes per extra utterance); target within %.0f %%: %s",
        small["n_utts"],
        large["n_utts"],
        small["peak_rss_mb"],
        large["peak_rss_mb"],
        100 * growth,
        per_utt,
        100 * args.tolerance,
        "PASS" if ok else "FAIL",
    )
    log.info("results: %s", out / "load_test.json")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
