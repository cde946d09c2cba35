"""``scripts/gpu_check.py --models SELECTION``: the line-up on a GPU machine, one shard per model.

For each selected registry model (``rweq`` for the study's 40), one process pinned to one GPU
(``CUDA_VISIBLE_DEVICES``; models are spread over the visible GPUs, one at a time per GPU) runs
the engine on one shard of the dataset (default: the demo corpus, first ``--limit`` clips) through
the normal audit pipeline, and records load seconds, RTFx (audio seconds / inference seconds),
peak GPU memory (torch ``max_memory_allocated``), WER and CER, the status and, when a model
cannot run, the exact reason. Weights must be reachable (hub or local folders in the registry);
hosted models are skipped unless ``--include-hosted`` (they are billed). The table printed at the
end is the one docs/performance.md holds for the line-up.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def worker(name: str, dataset: str | None, limit: int, out_json: Path) -> int:
    """One model, one shard, in this process; figures to ``out_json``."""
    from audits.pipeline import run_recipe
    from audits.recipes import load_recipe, with_overrides

    res: dict[str, Any] = {"model": name, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    rec = with_overrides(load_recipe("demo"), dataset, [name], limit)
    rec = dataclasses.replace(rec, shard_size=limit, warmup=1)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"lineup-{name}-") as tmp:
        try:
            summary = run_recipe(rec, Path(tmp) / "run")
            m = summary["models"].get(name, {})
            res.update(
                status=m.get("status"),
                error=m.get("error"),
                load_s=m.get("load_s"),
                rtfx=m.get("rtfx"),
                wer=m.get("wer"),
                cer=m.get("cer"),
                n_utts=m.get("n_utts"),
                n_failed=m.get("n_failed"),
                backend_info=m.get("backend_info"),
            )
        except Exception as exc:  # noqa: BLE001 - every failure is this model's row in the table
            res.update(status="failed", error=f"{type(exc).__name__}: {exc}")
    res["wall_s"] = round(time.perf_counter() - t0, 1)
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        res["peak_gpu_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        res["gpu"] = torch.cuda.get_device_name(0)
    out_json.write_text(json.dumps(res, default=str))
    return 0


def _gpus() -> list[str]:
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    except ImportError:
        return []


def lineup(selection: str, dataset: str | None, limit: int, timeout_s: float, include_hosted: bool, device: str) -> dict[str, Any]:
    """Every selected model in its own process, at most one per GPU at a time; returns the figures."""
    from engine.model_registry import load_model_registry
    from engine.sweep import select_models

    reg = load_model_registry()
    names = select_models(reg, selection)
    skipped = {n: "hosted API (billed): pass --include-hosted" for n in names if reg[n].family == "hosted" and not include_hosted}
    todo = [n for n in names if n not in skipped]
    slots = _gpus() if device == "cuda" else ["cpu"]
    if not slots:
        raise SystemExit("no CUDA GPU visible to PyTorch: use --device cpu to check the logic")
    results: dict[str, Any] = {n: {"model": n, "status": "skipped", "error": why} for n, why in skipped.items()}
    running: dict[str, tuple[subprocess.Popen[bytes], str, Path, float]] = {}
    with tempfile.TemporaryDirectory(prefix="lineup-") as tmp:
        while todo or running:
            free = [s for s in slots if s not in {v[1] for v in running.values()}]
            while todo and free:
                name, slot = todo.pop(0), free.pop(0)
                env = dict(os.environ)
                if slot != "cpu":
                    env["CUDA_VISIBLE_DEVICES"] = slot
                out = Path(tmp) / f"{name}.json"
                cmd = [
                    sys.executable,
                    str(REPO / "scripts" / "gpu_check.py"),
                    "--lineup-worker",
                    name,
                    "--out-json",
                    str(out),
                    "--limit",
                    str(limit),
                ]
                if dataset:
                    cmd += ["--dataset", dataset]
                running[name] = (subprocess.Popen(cmd, env=env), slot, out, time.monotonic())
            time.sleep(0.5)
            for name, (proc, slot, out, started) in list(running.items()):
                if proc.poll() is None and time.monotonic() - started > timeout_s:
                    proc.kill()
                    proc.wait()
                if proc.poll() is None:
                    continue
                del running[name]
                if out.exists():
                    results[name] = json.loads(out.read_text())
                else:
                    why = (
                        f"timed out after {timeout_s:g} s"
                        if time.monotonic() - started > timeout_s
                        else f"worker exited with code {proc.returncode}"
                    )
                    results[name] = {"model": name, "status": "failed", "error": why}
    for name in names:
        results[name]["family"] = reg[name].family
    return {n: results[n] for n in names}


def table(results: dict[str, Any]) -> str:
    """The markdown table docs/performance.md holds for the line-up."""
    lines = [
        "| model | family | status | load s | RTFx | peak GPU GiB | WER % | CER % | note |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]

    def num(v: Any, fmt: str) -> str:
        return "—" if v is None else format(float(v), fmt)

    for n, r in results.items():
        note = str(r.get("error") or "").replace("|", "/").replace("\n", " ")[:100]
        lines.append(
            f"| {n} | {r.get('family') or '—'} | {r.get('status')} | {num(r.get('load_s'), '.1f')} | {num(r.get('rtfx'), '.1f')} | "
            f"{num(r.get('peak_gpu_gib'), '.2f')} | {num(None if r.get('wer') is None else 100 * r['wer'], '.1f')} | "
            f"{num(None if r.get('cer') is None else 100 * r['cer'], '.1f')} | {note} |"
        )
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    """Entry from gpu_check.py: ``--models`` (driver) or ``--lineup-worker`` (one model)."""
    if args.lineup_worker:
        return worker(args.lineup_worker, args.dataset, args.limit, args.out_json)
    t0 = time.perf_counter()
    results = lineup(args.models, args.dataset, args.limit, args.model_timeout_s, args.include_hosted, args.device)
    print(table(results))
    report = {
        "selection": args.models,
        "dataset": args.dataset or "builtin:demo",
        "limit": args.limit,
        "device": args.device,
        "models": results,
        "elapsed_s": time.perf_counter() - t0,
    }
    out = args.json or (Path(os.environ["OUT"]) / "gpu_lineup.json" if os.environ.get("OUT") else None)
    if out:
        out.write_text(json.dumps(report, indent=2, default=str))
        print(f"figures written to {out}")
    return 0
