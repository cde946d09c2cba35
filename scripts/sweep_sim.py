"""Scheduling efficiency of a 40-model sweep on 8 GPUs: makespan / lower bound.

Models: 40 simulated models whose speeds span the Open ASR Leaderboard's published range (RTFx
on one A100: parakeet-tdt-0.6b-v3 3,333, canary-1b-flash 1,046, whisper-large-v3 146, down to
about 50 for the slowest speech-LLMs), with load times that grow with size (5 s + 12 s per
billion parameters). Dataset: tens of thousands of utterances (log-normal durations, mean 6 s)
in equal shards; a unit is one (model, shard).

Lower bound = max(total model-seconds / GPUs, longest single model), where a model's seconds
are one load plus its whole decode. Schedules compared (the same event-driven rules the Ray
runner follows: an actor loads once, then takes shards one by one from its model's queue):

registry             models in registry order; each GPU that frees up takes the next model.
spread               the Ray runner's original rule: every free GPU goes to the first model
                     with queued shards (a model is spread over all GPUs and loaded 8 times).
longest-first        like registry, models sorted by estimated seconds, longest first.
longest-first+split  longest-first; a GPU with no unstarted model left loads one more copy of
                     the model with the most remaining work, when that work per copy exceeds
                     the copy's load time (the tail is split over idle GPUs).

``--real`` also runs the sweep for real: the simulated backend on a local Ray instance with 8
logical GPUs, time scaled down, with the runner's default schedule.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: (name, RTFx on one A100, parameters in billions); anchors from the Open ASR Leaderboard.
ANCHORS = [("parakeet-tdt-0.6b-v3", 3333.0, 0.6), ("canary-1b-flash", 1046.0, 0.9), ("whisper-large-v3", 146.0, 1.55)]


@dataclass(frozen=True)
class SimModel:
    name: str
    rtfx: float
    load_s: float
    params_b: float


def study_models(n: int = 40, seed: int = 0) -> list[SimModel]:
    """Anchors plus ``n - 3`` models with RTFx log-spaced over 50..3,300 (order shuffled, seeded)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = [SimModel(name, rtfx, 5.0 + 12.0 * p, p) for name, rtfx, p in ANCHORS]
    rtfxs = np.exp(np.linspace(math.log(50.0), math.log(3300.0), n - len(ANCHORS)))
    for i, r in enumerate(rtfxs):
        p = float(np.clip(2.5 * (50.0 / r) ** 0.35 + rng.normal(0, 0.1), 0.04, 3.0))  # slower models tend to be bigger
        out.append(SimModel(f"sim-{i:02d}", float(r), 5.0 + 12.0 * p, p))
    order = rng.permutation(len(out))
    return [out[i] for i in order]


def shard_seconds(n_utts: int, n_shards: int, mean_s: float, seed: int = 0) -> list[float]:
    """Audio seconds per shard (log-normal clip durations with the given mean)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    sigma = 0.6
    d = rng.lognormal(math.log(mean_s) - sigma**2 / 2, sigma, n_utts)
    return [float(x.sum()) for x in np.array_split(d, n_shards)]


def model_seconds(m: SimModel, audio_s: float) -> float:
    return m.load_s + audio_s / m.rtfx


def lower_bound(models: list[SimModel], audio_s: float, gpus: int) -> float:
    secs = [model_seconds(m, audio_s) for m in models]
    return max(sum(secs) / gpus, max(secs))


def simulate(models: list[SimModel], shards: list[float], gpus: int, policy: str) -> dict[str, Any]:
    """Event-driven schedule of (model, shard) units on ``gpus`` GPUs; returns makespan and loads."""
    audio = sum(shards)
    if policy.startswith("longest-first"):
        order = sorted(models, key=lambda m: -model_seconds(m, audio))
    else:
        order = list(models)
    queues = {m.name: list(range(len(shards))) for m in order}
    remaining = {m.name: audio / m.rtfx for m in order}  # decode seconds still queued
    actors = {m.name: 0 for m in order}
    started = {m.name: False for m in order}
    by_name = {m.name: m for m in order}
    loads = 0
    events: list[tuple[float, int, str]] = []  # (time, gpu, model): the GPU finishes its current unit or load
    free = list(range(gpus))
    now = 0.0
    seq = 0

    def pick() -> str | None:
        if policy == "spread":
            return next((m.name for m in order if queues[m.name] and actors[m.name] < len(queues[m.name])), None)
        for m in order:
            if not started[m.name]:
                return m.name
        if policy == "longest-first+split":
            cands = [(remaining[n] / (actors[n] + 1), n) for n in queues if queues[n] and actors[n] < len(queues[n])]
            if cands:
                per_copy, name = max(cands)
                if per_copy > by_name[name].load_s:
                    return name
        return None

    def take(gpu: int, name: str, t: float) -> None:
        nonlocal seq
        sid = queues[name].pop(0)
        dt = shards[sid] / by_name[name].rtfx
        remaining[name] -= dt
        seq += 1
        heapq.heappush(events, (t + dt, gpu, name))

    while True:
        while free:
            name = pick()
            if name is None:
                break
            gpu = free.pop()
            started[name] = True
            actors[name] += 1
            loads += 1
            t_ready = now + by_name[name].load_s
            take(gpu, name, t_ready)
        if not events:
            break
        now, gpu, name = heapq.heappop(events)
        if queues[name]:
            take(gpu, name, now)
        else:
            actors[name] -= 1
            free.append(gpu)
    lb = lower_bound(models, audio, gpus)
    return {"policy": policy, "makespan_s": now, "lower_bound_s": lb, "efficiency": lb / now, "loads": loads}


def real_run(models: list[SimModel], args: argparse.Namespace, shards: list[float]) -> dict[str, Any]:
    """The sweep on a local Ray instance with logical GPUs; returns the measured makespan (scaled back)."""
    import numpy as np
    import ray
    import soundfile as sf

    from engine.data import ModelSpec
    from engine.datasets import open_dataset
    from engine.run.ray_runner import RayRunner, init_ray
    from engine.run.store import RunStore

    clip_s = 0.05  # real clips are this short; RTFx is scaled so each stands for a mean_s clip
    stretch = args.mean_s / clip_s
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        wav = folder / "clip.wav"
        sf.write(wav, np.random.default_rng(0).normal(0, 0.05, int(16_000 * clip_s)).astype(np.float32), 16_000)
        lines = [json.dumps({"utt_id": f"u{i:06d}", "audio_filepath": str(wav), "text": "a"}) for i in range(args.utts)]
        (folder / "m.jsonl").write_text("\n".join(lines) + "\n")
        ds = open_dataset(folder / "m.jsonl", shard_size=math.ceil(args.utts / args.shards))
        specs = [
            # no rtfx: ordered by size, as a registry without rtfx is
            ModelSpec(
                m.name,
                "simulated",
                {"name": m.name, "rtfx": m.rtfx / stretch, "load_s": m.load_s, "time_scale": args.time_scale},
                64,
                {"num_gpus": 1.0, "num_cpus": 0.01, "params_m": m.params_b * 1000},
            )
            for m in models
        ]
        init_ray(num_cpus=2, num_gpus=args.gpus)
        try:
            t0 = time.perf_counter()
            facts = RayRunner(ds, specs, RunStore(folder / "out"), warmup=0).run()
            wall = time.perf_counter() - t0
        finally:
            ray.shutdown()
        table = RunStore(folder / "out").consolidate().to_pandas()
        bad = [n for n, f in facts.items() if f.get("status") != "loaded"]
        if bad or len(table) != len(models) * args.utts or table["error"].notna().any():
            raise SystemExit(
                f"the real sweep is incomplete: models not loaded {bad}, {len(table)} rows, {int(table['error'].notna().sum())} errors"
            )
        loads = sum(int(f["engine"]["actors_started"]) for f in facts.values())
    span = wall / args.time_scale
    lb = lower_bound(models, args.utts * args.mean_s, args.gpus)
    return {
        "policy": "ray (real, scaled back)",
        "makespan_s": span,
        "lower_bound_s": lb,
        "efficiency": lb / span,
        "wall_s": wall,
        "loads": loads,
    }


def run_sim(args: argparse.Namespace) -> list[dict[str, Any]]:
    models = study_models(40, args.seed)
    shards = shard_seconds(args.utts, args.shards, args.mean_s, args.seed)
    audio = sum(shards)
    print(
        f"40 models (RTFx {min(m.rtfx for m in models):.0f}..{max(m.rtfx for m in models):.0f}), {args.utts} utterances "
        f"({audio / 3600:.1f} h) in {args.shards} shards, {args.gpus} GPUs; lower bound {lower_bound(models, audio, args.gpus):.0f} s"
    )
    results = [simulate(models, shards, args.gpus, p) for p in args.schedules]
    if args.real:
        results.append(real_run(models, args, shards))
    print(f"{'schedule':>28} {'makespan s':>11} {'makespan/LB':>12} {'LB/makespan':>12} {'loads':>6}")
    for r in results:
        print(
            f"{r['policy']:>28} {r['makespan_s']:>11.0f} {r['makespan_s'] / r['lower_bound_s']:>12.3f} {r['efficiency']:>12.3f} "
            f"{r.get('loads', ''):>6}"
        )
    return results


def add_sim_args(s: Any) -> None:
    s.add_argument("--utts", type=int, default=20_000)
    s.add_argument("--mean-s", type=float, default=6.0, help="mean utterance duration (s)")
    s.add_argument("--gpus", type=int, default=8)
    s.add_argument("--time-scale", type=float, default=0.002)
    s.add_argument("--shards", type=int, default=64)
    s.add_argument("--schedules", nargs="+", default=["spread", "registry", "longest-first", "longest-first+split"])
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--real", action="store_true", help="also run the sweep on Ray with real sleeps (minutes)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_sim_args(p)
    run_sim(p.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
