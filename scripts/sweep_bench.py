"""Sweep benchmarks with simulated models (engine/backends/asr/simulated.py).

memory   peak RSS of the in-process runner for 1, 4 and 16 simulated models of a given size,
         with load groups (``--max-models-loaded``) and without; each run in a fresh process.
sim      a 40-model sweep on 8 logical GPUs of a local Ray instance, scheduled three ways
         (see sweep_sim.py); prints makespan / lower bound.

    python scripts/sweep_bench.py memory --memory-mb 150 --models 1 4 16
    python scripts/sweep_bench.py sim --utts 20000 --time-scale 0.002
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def make_clips(folder: Path, n: int, seconds: float = 1.0, shard_size: int = 4) -> Path:
    """A NeMo manifest of ``n`` seeded noise clips (WAV)."""
    import numpy as np
    import soundfile as sf

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    lines = []
    for i in range(n):
        wav = folder / f"c{i:05d}.wav"
        sf.write(wav, rng.normal(0, 0.1, int(16_000 * seconds)).astype(np.float32), 16_000)
        lines.append(json.dumps({"utt_id": f"u{i:05d}", "audio_filepath": str(wav), "text": "a b", "duration": seconds}))
    manifest = folder / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


def memory_child(args: argparse.Namespace) -> None:
    """One measured run in this (fresh) process; prints a JSON line."""
    from engine.data import ModelSpec
    from engine.datasets import open_dataset
    from engine.run.runner import InProcessRunner
    from engine.run.store import RunStore

    ds = open_dataset(args.manifest, shard_size=4)
    specs = [
        ModelSpec(
            f"sim{i:02d}",
            "simulated",
            {"name": f"sim{i:02d}", "seed": i, "memory_mb": args.memory_mb, "rtfx": 2000.0},
            4,
            {"memory_mb": args.memory_mb},
        )
        for i in range(args.models)
    ]
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        facts = InProcessRunner(ds, specs, RunStore(Path(out)), warmup=0, max_models_loaded=args.cap, memory_budget_mb=args.budget_mb).run()
        wall = time.perf_counter() - t0
    groups = max((f.get("load_group", {}).get("of", 1) for f in facts.values()), default=1)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(
        json.dumps({"models": args.models, "cap": args.cap, "groups": groups, "peak_rss_mb": round(peak_mb, 1), "wall_s": round(wall, 2)})
    )


def memory(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        manifest = make_clips(Path(tmp), args.utts)
        print(f"simulated models of {args.memory_mb:g} MB each, {args.utts} clips of 1 s, shard size 4")
        print(f"{'models':>6} {'mode':>24} {'groups':>6} {'peak RSS MB':>12} {'wall s':>7}")
        for cap in (1, None):
            for n in args.models:
                cmd = [
                    sys.executable,
                    __file__,
                    "memory-child",
                    "--manifest",
                    str(manifest),
                    "--models",
                    str(n),
                    "--memory-mb",
                    str(args.memory_mb),
                ]
                if cap is not None:
                    cmd += ["--cap", str(cap)]
                env = dict(os.environ, PYTHONPATH=str(REPO))
                res = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
                r = json.loads(res.stdout.strip().splitlines()[-1])
                mode = "--max-models-loaded 1" if cap else "default (all fit budget)"
                print(f"{n:>6} {mode:>24} {r['groups']:>6} {r['peak_rss_mb']:>12.0f} {r['wall_s']:>7.2f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("memory", help="peak RSS vs number of simulated models")
    m.add_argument("--models", type=int, nargs="+", default=[1, 4, 16])
    m.add_argument("--memory-mb", type=float, default=150.0)
    m.add_argument("--utts", type=int, default=32)
    c = sub.add_parser("memory-child")
    c.add_argument("--manifest", required=True)
    c.add_argument("--models", type=int, required=True)
    c.add_argument("--memory-mb", type=float, required=True)
    c.add_argument("--cap", type=int, default=None)
    c.add_argument("--budget-mb", type=float, default=None)
    s = sub.add_parser("sim", help="40 simulated models on 8 logical GPUs: makespan / lower bound")
    sys.path.insert(0, str(Path(__file__).parent))
    from sweep_sim import add_sim_args, run_sim

    add_sim_args(s)
    args = p.parse_args(argv)
    if args.cmd == "memory":
        memory(args)
    elif args.cmd == "memory-child":
        memory_child(args)
    else:
        run_sim(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
