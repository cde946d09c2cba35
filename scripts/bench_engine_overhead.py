#!/usr/bin/env python
"""Engine overhead: RTFx of the Ray engine vs. a bare loop that calls the backend directly.

Both sides see the same clips (real speech from Debian's pocketsphinx-testdata, repeated under
derived ids up to ``--n-utts``, or a manifest given with ``--manifest``), the same shards, the same
decode options and the same batches (longest first, ``batch_size`` clips). Both exclude model
loading and warm-up, as RTFx does everywhere in this project:

* bare loop: ``decode`` every clip of a shard, then ``transcribe_batch`` per batch, shard after
  shard, in this process; RTFx = audio seconds / wall seconds of that loop.
* engine: ``RayRunner`` end to end (decode tasks, object store, actors, Parquet parts and markers
  written by the driver); RTFx = audio seconds / wall seconds from the moment the first actor is
  loaded and warm to the moment the last unit is written. The wall time including actor start
  and model load is printed too.

Target: engine / bare >= 0.9 with one actor. Then the same engine run with ``--actors N`` actors
(default 2) over the 1-actor run. Usage::

    python scripts/bench_engine_overhead.py --n-utts 48 --actors 2 --models whisper-tiny.en
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.logging import RichHandler
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engine.data import DecodedAudio
from engine.datasets import Dataset, open_dataset
from engine.errors import AuditError, ConfigError
from engine.ray_runner import RayRunner, init_ray
from engine.runner import DecodeOptions, ModelSpec, decode_shard, load_model
from engine.store import RunStore

log = logging.getLogger("bench")
TESTDATA = Path("/usr/share/pocketsphinx/test/data")

# Used when the model registry (configs/models) is not available.
FALLBACK_SPECS = {
    "whisper-tiny.en": ModelSpec("whisper-tiny.en", "faster-whisper", {"model": "tiny.en", "compute_type": "int8", "beam_size": 1}, 8),
    "pocketsphinx-en-us": ModelSpec("pocketsphinx-en-us", "pocketsphinx", {}, 1),
}


def resolve_specs(names: list[str]) -> list[ModelSpec]:
    """Registry models by name (configs/models), or the two bundled fallbacks."""
    try:
        from engine.model_registry import load_model_registry, resolve_models

        return [e.spec() for e in resolve_models(names, load_model_registry())]
    except (ImportError, AuditError) as exc:
        missing = [n for n in names if n not in FALLBACK_SPECS]
        if missing:
            raise ConfigError(
                f"unknown model(s) {missing}: the registry could not be used ({exc}); built-in: {sorted(FALLBACK_SPECS)}"
            ) from exc
        return [FALLBACK_SPECS[n] for n in names]


def build_manifest(folder: Path, n_utts: int) -> Path:
    """The ten real-speech test clips, repeated under derived ids until there are ``n_utts``."""
    wavs = sorted(TESTDATA.glob("*/*.wav"))
    if not wavs:
        raise FileNotFoundError(f"no clips under {TESTDATA}: apt-get install pocketsphinx-testdata, or pass --manifest")
    refs: dict[str, str] = {}
    for trans in TESTDATA.glob("*/*transcription"):
        for line in trans.read_text(errors="replace").splitlines():
            if line.rstrip().endswith(")") and "(" in line:
                text, uid = line.rsplit("(", 1)
                refs[uid.strip().rstrip(")")] = " ".join(text.replace("<s>", " ").replace("</s>", " ").split())
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / "manifest.jsonl"
    with open(manifest, "w", encoding="utf-8") as fh:
        for i in range(n_utts):
            w = wavs[i % len(wavs)]
            row = {"utt_id": f"{w.parent.name}-{w.stem}-{i:05d}", "audio_filepath": str(w), "text": refs.get(w.stem, "unknown")}
            fh.write(json.dumps(row) + "\n")
    return manifest


def bare_loop(spec: ModelSpec, ds: Dataset, opts: DecodeOptions, warmup: int) -> dict[str, float]:
    """Decode + ``transcribe_batch`` per shard in this process, with the engine's batches."""
    state = load_model(spec, warmup)
    if state.backend is None:
        raise AuditError(f"{spec.name} cannot load: {state.facts.get('error')}")
    backend = state.backend
    audio_s = 0.0
    t0 = time.perf_counter()
    for sid in ds.shard_ids:
        shard = ds.load_shard(sid)
        decoded: list[DecodedAudio] = [d for d in decode_shard(shard, ds.root, opts) if d.error is None]
        decoded.sort(key=lambda d: d.duration_s, reverse=True)
        bs = max(1, spec.batch_size)
        for i in range(0, len(decoded), bs):
            batch = decoded[i : i + bs]
            backend.transcribe_batch([d.samples for d in batch])
            audio_s += sum(d.duration_s for d in batch)
    wall = time.perf_counter() - t0
    backend.close()
    if audio_s <= 0:
        raise AuditError("the bare loop decoded no audio (every clip had a decode error)")
    return {"audio_s": audio_s, "wall_s": wall, "rtfx": audio_s / wall}


def engine_run(
    spec: ModelSpec, ds: Dataset, opts: DecodeOptions, warmup: int, actors: int, work: Path, total_cpus: float
) -> dict[str, float]:
    """One RayRunner run into a fresh store; RTFx over the span from first actor ready to last unit."""
    out = work / f"engine-{spec.name}-{actors}"
    shutil.rmtree(out, ignore_errors=True)
    reserve = max(0.0, min(1.0, total_cpus - actors))
    t0 = time.perf_counter()
    facts = RayRunner(ds, [spec], RunStore(out), warmup=warmup, decode_options=opts, workers=actors, reserve_cpus=reserve).run()[spec.name]
    total = time.perf_counter() - t0
    if facts.get("status") != "loaded":
        raise AuditError(f"{spec.name} did not run in the engine: {facts.get('error')}")
    table = RunStore(out).consolidate([spec.name])
    rows = table.to_pylist()
    audio_s = sum(r["duration_s"] or 0.0 for r in rows if r["error"] is None)
    eng = facts["engine"]
    span = eng["last_unit_written_s"] - eng["first_actor_ready_s"]
    return {
        "audio_s": audio_s,
        "wall_s": span,
        "rtfx": audio_s / span,
        "total_wall_s": total,
        "actors_started": eng["actors_started"],
        "rows": len(rows),
        "errors": sum(r["error"] is not None for r in rows),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="whisper-tiny.en", help="comma-separated registry model names")
    ap.add_argument("--n-utts", type=int, default=48, help="utterances (test clips repeated with derived ids)")
    ap.add_argument("--manifest", type=Path, default=None, help="use this manifest instead of the test clips")
    ap.add_argument("--shard-size", type=int, default=8)
    ap.add_argument("--actors", type=int, default=2, help="actors for the scaling run (compared with 1)")
    ap.add_argument("--repeats", type=int, default=2, help="alternate bare/engine runs this many times; the median is reported")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--address", default=None, help="an existing Ray cluster (default: a local instance)")
    ap.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray instance")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args(argv)

    console = Console()
    logging.basicConfig(level=logging.INFO, format="%(message)s", handlers=[RichHandler(console=Console(stderr=True), show_path=False)])
    for noisy in ("faster_whisper", "ctranslate2", "engine"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    work = Path(tempfile.mkdtemp(prefix="bench-engine-"))
    try:
        manifest = args.manifest or build_manifest(work / "data", args.n_utts)
        ds = open_dataset(manifest, shard_size=args.shard_size, limit=args.n_utts if args.manifest else None)
        opts = DecodeOptions()
        specs = resolve_specs([m.strip() for m in args.models.split(",") if m.strip()])
        init_ray(args.address, num_cpus=args.num_cpus)
        total_cpus = float(ray.cluster_resources().get("CPU", 1))
        log.info(
            "%d utterances in %d shards; Ray CPUs %g, GPUs %g",
            ds.n_utts,
            len(ds.shard_ids),
            total_cpus,
            ray.cluster_resources().get("GPU", 0),
        )
        results: dict[str, Any] = {}
        for spec in specs:
            runs: dict[str, list[dict[str, float]]] = {"bare": [], "engine1": [], f"engine{args.actors}": []}
            for r in range(args.repeats):
                log.info("%s: repeat %d/%d: bare loop", spec.name, r + 1, args.repeats)
                runs["bare"].append(bare_loop(spec, ds, opts, args.warmup))
                log.info("%s: repeat %d/%d: engine, 1 actor", spec.name, r + 1, args.repeats)
                runs["engine1"].append(engine_run(spec, ds, opts, args.warmup, 1, work, total_cpus))
                if args.actors != 1:
                    log.info("%s: repeat %d/%d: engine, %d actors", spec.name, r + 1, args.repeats, args.actors)
                    runs[f"engine{args.actors}"].append(engine_run(spec, ds, opts, args.warmup, args.actors, work, total_cpus))
            med = {k: statistics.median(x["rtfx"] for x in v) for k, v in runs.items() if v}
            results[spec.name] = {
                "rtfx_bare": med["bare"],
                "rtfx_engine_1_actor": med["engine1"],
                "ratio_engine_over_bare": med["engine1"] / med["bare"],
                f"rtfx_engine_{args.actors}_actors": med.get(f"engine{args.actors}"),
                f"ratio_{args.actors}_actors_over_1": (med[f"engine{args.actors}"] / med["engine1"])
                if f"engine{args.actors}" in med
                else None,
                "engine_total_wall_s_1_actor": statistics.median(x["total_wall_s"] for x in runs["engine1"]),
                "runs": runs,
            }
        ray.shutdown()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    t = Table(title=f"Engine overhead ({ds.n_utts} utts, {len(ds.shard_ids)} shards, median of {args.repeats}, {total_cpus:g} CPUs)")
    for col in (
        "model",
        "RTFx bare loop",
        "RTFx engine (1 actor)",
        "engine / bare",
        f"RTFx engine ({args.actors} actors)",
        f"{args.actors} / 1 actors",
    ):
        t.add_column(col, justify="right" if col != "model" else "left", no_wrap=col == "model")
    for name, r in results.items():
        n_ratio = r[f"ratio_{args.actors}_actors_over_1"]
        t.add_row(
            name,
            f"{r['rtfx_bare']:.2f}",
            f"{r['rtfx_engine_1_actor']:.2f}",
            f"[{'green' if r['ratio_engine_over_bare'] >= 0.9 else 'red'}]{r['ratio_engine_over_bare']:.3f}[/]",
            "—" if r[f"rtfx_engine_{args.actors}_actors"] is None else f"{r[f'rtfx_engine_{args.actors}_actors']:.2f}",
            "—" if n_ratio is None else f"{n_ratio:.3f}",
        )
    console.print(t)
    console.print(
        "engine RTFx: audio / (last unit written - first actor ready); bare: audio / (decode + transcribe loop). Target engine/bare >= 0.9."
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
