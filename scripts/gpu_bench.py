#!/usr/bin/env python
"""GPU benchmark of the line-up's full-size stand-ins: RTFx over a batch ladder, peak GPU memory, engine/bare.

On one GPU with no network, for every checkpoint with a stand-in (scripts/standin_data/checkpoints.yaml;
smallest first) it builds the full-size stand-in (scripts/standins.py) and, per batch size of the
ladder, runs the engine (in-process runner, real ``transformers`` backend, ``dtype: auto``: each
family's reference precision) and a bare loop of the same folder (scripts/bench_fullsize.py:
processor -> generate -> decode; speech-LLMs: the family loader without the runner), alternating
which goes first. Autoregressive stand-ins are forced to the reference transcript's token count per
clip; CTC and Kyutai decode normally. It prints, per model, RTFx per batch size, the best batch,
engine/bare there, peak GPU memory (torch ``max_memory_allocated`` and ``nvidia-smi``) and, beside
them, the Open ASR Leaderboard's published RTFx where scripts/standin_data/open_asr_leaderboard.yaml
has it (the leaderboard runs the real weights on its own data: same order of magnitude is the test).

The whole run keeps to ``--budget-s`` (default 480 s: 8 minutes): a model whose estimated cost
(building and loading its weights) no longer fits is skipped with a note, and each model runs in
its own process with the time that is left as its limit. NeMo and qwen-asr families have no
stand-in builder here (they need their own packages) and are listed as such.

    python scripts/gpu_bench.py                       # the GPU run
    python scripts/gpu_bench.py --device cpu --tiny --models whisper-large-v3,mms-1b-all --clips 2 --in-process   # dry run
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_fullsize  # noqa: E402
import standins  # noqa: E402

log = logging.getLogger("gpu_bench")
SR = 16_000
LEADERBOARD_FILE = REPO / "scripts" / "standin_data" / "open_asr_leaderboard.yaml"
#: sentences for synthetic clips' references when no demo corpus is at hand (their token counts drive the forced decode)
SENTENCES = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Around a quarter of the budget goes to schools in the northern counties.",
    "She asked whether the train to Boston would leave on time this evening.",
    "Please call the office before noon if you cannot attend the meeting tomorrow.",
]


def leaderboard() -> dict[str, dict[str, Any]]:
    from engine.config import load_yaml

    data = load_yaml(LEADERBOARD_FILE) or {}
    return {str(k): dict(v) for k, v in (data.get("rtfx") or {}).items()}


def clips_for_run(n: int, tmp: Path) -> list[dict[str, Any]]:
    """The demo corpus's first ``n`` speech clips when it is here, else synthetic speech-like clips
    (scripts/gpu_check.py, 16-bit WAV) with references of about 2.5 words per second."""
    from gpu_check import install_wav_reader_if_missing, synth_clips, wav_bytes

    reader = install_wav_reader_if_missing()  # a GPU image without soundfile: 16-bit WAV through the stdlib
    corpus = REPO / "data" / "demo-small"
    if (corpus / "manifest.jsonl").is_file() and reader.startswith("soundfile"):
        rows = bench_fullsize.corpus_clips(corpus, n)
        out = []
        for c in rows:
            path = tmp / f"{c['utt_id']}.flac"
            path.write_bytes(c["bytes"])
            out.append({"utt_id": c["utt_id"], "text": c["text"], "path": str(path), "duration_s": len(c["audio"]) / SR})
        return out
    out = []
    for i, audio in enumerate(synth_clips(n, 2.0, 12.0, seed=7)):
        words = " ".join(" ".join(SENTENCES).split()[: max(3, int(len(audio) / SR * 2.5))])
        path = tmp / f"synth-{i:03d}.wav"
        path.write_bytes(wav_bytes(audio))
        out.append({"utt_id": f"synth-{i:03d}", "text": words, "path": str(path), "duration_s": len(audio) / SR})
    return out


def measure_model(name: str, size: str, device: str, clip_rows: list[dict[str, Any]], ladder: Sequence[int], tmp: Path) -> dict[str, Any]:
    """Build one stand-in and run engine and bare at every batch size (in this process)."""
    from engine.model_registry import load_model_registry

    ckpts = standins.load_checkpoints()
    ckpt = ckpts[name]
    entry = load_model_registry()[name]
    built = standins.build(name, tmp / name, size, ckpts)
    counts, counter = standins.reference_token_counts([c["text"] for c in clip_rows])
    options = {k: v for k, v in entry.options.items() if k not in ("model", "revision")}
    options.update(model=str(built.folder), device=device, local_files_only=True, family=entry.family)
    if entry.trust_remote_code:
        options["trust_remote_code"] = True
    if options.get("processor"):
        options["processor"] = str(built.folder.parent / f"{built.folder.name}-base")
    durations = [c["duration_s"] for c in clip_rows]
    eos = bench_fullsize.eos_ids(built.folder) if ckpt.autoregressive else []
    allowed = bench_fullsize.decodable_ids(built.folder) if ckpt.autoregressive else None
    res: dict[str, Any] = {
        "model": name,
        "family": entry.family,
        "status": "measured",
        "size": size,
        "params": built.params,
        "build_s": built.build_s,
        "token_counter": counter,
        "forced": ckpt.autoregressive,
        "ladder": {},
    }
    for k, batch in enumerate(ladder):
        batches = bench_fullsize.batches_in_engine_order(durations, batch)
        plan = [[bench_fullsize.WARMUP_TOKENS]] + [[counts[i] for i in idx] for idx in batches] if ckpt.autoregressive else []
        job = {
            "name": name,
            "builder": ckpt.builder,
            "folder": str(built.folder),
            "options": options,
            "batch": batch,
            "clips": clip_rows,
            "batches": batches,
            "plan": plan,
            "eos_ids": eos,
            "allowed": allowed,
            "device": device,
        }
        sides: dict[str, Any] = {}
        for side in ("bare", "engine") if k % 2 == 0 else ("engine", "bare"):
            run = bench_fullsize.run_engine if side == "engine" else bench_fullsize.run_bare
            sides[side] = run({**job, "side": side})
            _free()
        e, b = sides["engine"], sides["bare"]
        res["ladder"][str(batch)] = {
            "engine_rtfx": e["audio_s"] / e["wall_s"],
            "bare_rtfx": b["audio_s"] / b["wall_s"],
            "ratio": (e["audio_s"] / e["wall_s"]) / (b["audio_s"] / b["wall_s"]),
            "engine": e,
            "bare": b,
        }
    res["best_batch"] = max(res["ladder"], key=lambda bb: res["ladder"][bb]["engine_rtfx"])
    return res


def _free() -> None:
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def _estimate_s(params: int, storage_dtype: str, device: str) -> float:
    """Seconds a model needs at least: writing and reading its weights a few times, and start-up."""
    stored = {"float32": 4, "float16": 2, "bfloat16": 2}[storage_dtype]
    return params * stored / 1.0e9 * 4 + (20.0 if device == "cuda" else 5.0)


def environment(device: str) -> dict[str, Any]:
    import torch
    import transformers

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cpus": os.cpu_count(),
        "device": device,
    }
    if device == "cuda" and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
        try:
            smi = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=10,
            )
            env["nvidia_smi"] = smi.stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            env["nvidia_smi"] = None
    return env


def table(results: list[dict[str, Any]], facts: Mapping[str, Mapping[str, Any]]) -> str:
    lines = [
        "| model | family | parameters | RTFx per batch (engine) | best batch | engine / bare there | peak GPU MB (torch / "
        "nvidia-smi) | "
        "leaderboard RTFx | note |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        lb = facts.get(r["model"], {}).get("rtfx")
        lb_s = f"{lb:g}" if lb is not None else "not found"
        if r["status"] != "measured":
            params = f"{r['params']:,}" if r.get("params") else "—"
            lines.append(
                f"| {r['model']} | {r.get('family') or '—'} | {params} | — | — | — | — | {lb_s} | {r['status']}: {r.get('note', '')} |"
            )
            continue
        ladder = ", ".join(f"{b}: {s['engine_rtfx']:.1f}" for b, s in r["ladder"].items())
        best = r["ladder"][r["best_batch"]]
        e = best["engine"]
        mem = f"{e['gpu_max_allocated_mb']:,.0f} / {e.get('nvidia_smi_used_mb') or '—'}" if "gpu_max_allocated_mb" in e else "— (no GPU)"
        decode = "forced to reference token counts" if r["forced"] else "normal decoding"
        lines.append(
            f"| {r['model']} | {r['family']} | {r['params']:,} | {ladder} | {r['best_batch']} | {best['ratio']:.3f} | {mem} | "
            f"{lb_s} | "
            f"{r['size']} stand-in, {decode}, {e['dtype']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--models", default="all", help="comma-separated line-up names, or all")
    ap.add_argument("--tiny", action="store_true", help="the tiny layouts (a dry run of the logic)")
    ap.add_argument("--clips", type=int, default=16)
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--budget-s", type=float, default=480.0, help="the whole run's time limit")
    ap.add_argument("--in-process", action="store_true", help="every model in this process (the dry run; GPU runs isolate each model)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--model-worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--job", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    for noisy in ("engine", "transformers"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    size = "tiny" if args.tiny else "full"
    ladder = [int(b) for b in args.batches.split(",")]
    if args.model_worker:  # one model in its own process: figures to --json
        from gpu_check import install_wav_reader_if_missing

        install_wav_reader_if_missing()
        job = json.loads(args.job.read_text()) if args.job else {}
        with tempfile.TemporaryDirectory(prefix="gpu-bench-model-") as scratch:
            res = measure_model(args.model_worker, size, args.device, job["clips"], ladder, Path(scratch))
        assert args.json is not None
        args.json.write_text(json.dumps(res, default=str))
        return 0
    t0 = time.monotonic()
    env = environment(args.device)
    print(f"gpu_bench: {env}")
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA GPU visible to PyTorch: use --device cpu --tiny to check the logic", file=sys.stderr)
        return 2
    ckpts = standins.load_checkpoints()
    from engine.model_registry import load_model_registry

    registry = load_model_registry()
    line_up = [n for n, e in registry.items() if "rweq" in e.tags and e.family != "hosted"]
    names = line_up if args.models == "all" else [m.strip() for m in args.models.split(",") if m.strip()]
    results: list[dict[str, Any]] = []
    facts = leaderboard()
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="gpu-bench-") as tmp_name:
        tmp = Path(tmp_name)
        for n in names:
            if n in ckpts and size == "full":
                sizes[n] = standins.count_params(ckpts[n], tmp / "count")
        todo = sorted((n for n in names if n in ckpts), key=lambda n: sizes.get(n, 0))
        for n in names:
            if n not in ckpts:
                fam = registry[n].family if n in registry else None
                results.append(
                    {
                        "model": n,
                        "family": fam,
                        "status": "not built",
                        "note": f"no stand-in builder: {standins.OTHER_ENVIRONMENTS.get(str(fam), 'unknown family')} family",
                    }
                )
        clip_rows = clips_for_run(args.clips, tmp)
        log.info("%d clips, %.0f s of audio; budget %.0f s", len(clip_rows), sum(c["duration_s"] for c in clip_rows), args.budget_s)
        for n in todo:
            left = args.budget_s - (time.monotonic() - t0)
            need = _estimate_s(sizes.get(n, 0), ckpts[n].storage_dtype, args.device)
            if need > left:
                results.append(
                    {
                        "model": n,
                        "family": registry[n].family,
                        "status": "skipped",
                        "params": sizes.get(n),
                        "note": f"over the time budget: needs about {need:.0f} s, {max(0.0, left):.0f} s left",
                    }
                )
                continue
            try:
                if args.in_process:
                    res = measure_model(n, size, args.device, clip_rows, ladder, tmp / "models")
                    _free()
                else:
                    res = _model_subprocess(n, args, clip_rows, tmp, left)
            except Exception as exc:  # noqa: BLE001 - one model's failure is its row
                res = {"model": n, "family": registry[n].family, "status": "failed", "params": sizes.get(n), "note": str(exc)[-300:]}
            results.append(res)
            log.info("%s: %s (%.0f s elapsed)", n, res["status"], time.monotonic() - t0)
    order = {n: i for i, n in enumerate(names)}
    results.sort(key=lambda r: order.get(r["model"], 0))
    elapsed = time.monotonic() - t0
    out = args.json or (Path(os.environ["OUT"]) / "gpu_bench.json" if os.environ.get("OUT") else None)
    if out:  # the figures first: a table that fails to print loses nothing
        out.write_text(json.dumps({"environment": env, "results": results, "elapsed_s": elapsed}, indent=2, default=str))
    print(table(results, facts))
    print(
        "RTFx: audio seconds / wall seconds of the loop after load and one warm-up batch (the engine's includes decoding the clips, "
        "batching and writing Parquet); stand-ins have random weights: autoregressive ones emit exactly the reference token count."
    )
    print(f"gpu_bench finished in {elapsed:.0f} s (budget {args.budget_s:.0f} s)")
    return 0


def _model_subprocess(name: str, args: argparse.Namespace, clip_rows: list[dict[str, Any]], tmp: Path, left: float) -> dict[str, Any]:
    job, out = tmp / f"{name}-job.json", tmp / f"{name}-out.json"
    job.write_text(json.dumps({"clips": clip_rows}))
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--model-worker",
        name,
        "--job",
        str(job),
        "--json",
        str(out),
        "--device",
        args.device,
        "--batches",
        args.batches,
    ] + (["--tiny"] if args.tiny else [])
    try:
        proc = subprocess.run(cmd, timeout=max(1.0, left), capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        return {"model": name, "status": "skipped", "note": f"stopped at the time budget ({left:.0f} s left when it started)"}
    if proc.returncode != 0 or not out.is_file():
        return {"model": name, "status": "failed", "note": proc.stderr[-300:]}
    result: dict[str, Any] = json.loads(out.read_text())
    return result


if __name__ == "__main__":
    sys.exit(main())
