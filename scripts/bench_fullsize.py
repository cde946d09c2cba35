#!/usr/bin/env python
"""Full-size stand-ins on this machine: the engine against a bare loop of the same model, side by side.

For each selected line-up checkpoint that fits this machine's memory (estimated from the exact
parameter count before anything is built; the others are listed with the memory they would need),
``scripts/standins.py`` builds the full-size stand-in and then, for every batch size of the ladder
and every repeat, runs two sides in fresh processes (so load seconds and peak RSS are each side's
own), in alternating order:

* **engine**: the in-process runner with the real ``transformers`` backend (registry entry's
  options, ``options.model`` = the stand-in folder): it decodes the FLAC clips, batches them
  longest first, transcribes, writes Parquet parts and markers;
* **bare**: the same folder loaded with plain transformers and driven by a minimal loop on the
  already-decoded clips in the same batches: processor -> ``generate`` (or the CTC forward) ->
  decode. Speech-LLMs have no such loop here: their bare side calls the engine's family loader
  directly on the same batches (no runner), so their ratio prices the runner only.

Autoregressive stand-ins emit exactly the reference transcript's token count per clip (forced
through the loaders' ``generate_kwargs``: scripts/standins.py ``ForcedLengths``), both sides alike;
CTC and Kyutai (one text step per audio frame) decode normally. Every figure is printed with the
machine, threads, dtype, batch size and load average; medians over the repeats.

    python scripts/bench_fullsize.py --models moonshine-streaming-medium --clips 20 --repeats 3
    python scripts/bench_fullsize.py --quick        # tiny layouts, 4 clips: checks the logic in a minute
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import standins  # noqa: E402

log = logging.getLogger("bench_fullsize")
SR = 16_000
WARMUP_TOKENS = 8  # new tokens the warm-up call (1 s of noise) is forced to
DEFAULT_MODELS = "moonshine-streaming-medium"


# -- inputs ----------------------------------------------------------------------------------------


def corpus_clips(corpus: Path, n: int) -> list[dict[str, Any]]:
    """The first ``n`` speech clips of the corpus manifest (id order), with their audio and reference."""
    import soundfile as sf

    manifest = corpus / "manifest.jsonl"
    if not manifest.is_file():
        raise SystemExit(f"{manifest} not found: build the demo corpus first (audit corpus demo --subset small --out {corpus})")
    rows = []
    for line in manifest.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("content", "speech") != "speech" or not str(row.get("text") or "").strip():
            continue
        path = Path(row["audio_filepath"])
        path = path if path.is_absolute() else corpus / path
        audio, rate = sf.read(str(path), dtype="float32")
        if rate != SR:
            raise SystemExit(f"{path}: {rate} Hz, expected {SR}")
        rows.append({"utt_id": row["utt_id"], "text": row["text"], "bytes": path.read_bytes(), "audio": audio})
        if len(rows) == n:
            break
    if len(rows) < n:
        raise SystemExit(f"{manifest}: only {len(rows)} speech clips, {n} asked for")
    return rows


def batches_in_engine_order(durations: Sequence[float], batch: int) -> list[list[int]]:
    """Clip indices per batch as the engine's runner forms them for one shard: longest first."""
    order = sorted(range(len(durations)), key=lambda i: durations[i], reverse=True)
    return [order[i : i + batch] for i in range(0, len(order), batch)]


def decodable_ids(folder: Path) -> list[int] | None:
    """Ids the stand-in's tokenizer decodes to text (not special); None: every id."""
    try:
        import transformers

        tok = transformers.AutoTokenizer.from_pretrained(folder)
        special = set(getattr(tok, "all_special_ids", []) or [])
        return [i for i in range(len(tok)) if i not in special]
    except Exception:  # noqa: BLE001 - a tokenizer transformers cannot open as such: allow every id
        return None


def eos_ids(folder: Path) -> list[int]:
    gen = folder / "generation_config.json"
    eos = json.loads(gen.read_text()).get("eos_token_id") if gen.is_file() else None
    if eos is None:
        eos = json.loads((folder / "config.json").read_text()).get("eos_token_id")
    return [int(e) for e in (eos if isinstance(eos, list) else [eos]) if e is not None]


def load_average() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def machine() -> dict[str, Any]:
    import torch

    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


# -- the two sides (each in its own process) ----------------------------------------------------------


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: kilobytes


def _forced(job: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    if not job["plan"]:
        return {}, None
    kwargs, forced = standins.forced_generate_kwargs(job["plan"], job["eos_ids"], job["allowed"])
    kwargs.pop("min_new_tokens", None)
    kwargs.pop("max_new_tokens", None)  # the family's own cap stays in force
    return kwargs, forced


def run_engine(job: Mapping[str, Any]) -> dict[str, Any]:
    """The in-process runner with the transformers backend on the clips (FLAC bytes)."""
    from engine.data import ModelSpec, Utterance
    from engine.datasets.base import in_memory_dataset
    from engine.run.runner import InProcessRunner
    from engine.run.store import RunStore

    clips = job["clips"]
    utts = [Utterance(c["utt_id"], c["text"], audio_bytes=Path(c["path"]).read_bytes(), duration_s=c["duration_s"]) for c in clips]
    ds = in_memory_dataset("fullsize", "demo", "memory", utts, len(utts), None)
    extra, forced = _forced(job)
    options = {**dict(job["options"]), "device": job.get("device", "cpu")}
    if extra:
        options["generate_kwargs"] = {**dict(options.get("generate_kwargs") or {}), **extra}
    _reset_gpu_peak()
    spec = ModelSpec(job["name"], "transformers", options, int(job["batch"]))
    marks: dict[str, float] = {}

    def progress(event: str, n: int, info: dict[str, Any]) -> None:
        if event == "start":
            marks["start"] = time.perf_counter()
        elif event == "unit":
            marks["last"] = time.perf_counter()

    with tempfile.TemporaryDirectory(prefix="fullsize-engine-") as tmp:
        store = RunStore(Path(tmp) / "run")
        t0 = time.perf_counter()
        facts = InProcessRunner(ds, [spec], store, warmup=1, progress=progress).run()[spec.name]
        if facts.get("status") != "loaded":
            raise RuntimeError(f"engine could not load the stand-in: {facts.get('error')}")
        rows = store.consolidate([spec.name]).to_pylist()
    failed = [r for r in rows if r["error"] is not None]
    if failed:
        raise RuntimeError(f"engine: {len(failed)} clips failed, first: {failed[0]['error']}")
    if forced is not None:
        forced.check()
    audio = sum(r["duration_s"] for r in rows)
    info = facts.get("info") or {}
    return {
        "load_s": float(facts.get("load_s") or 0.0),
        "wall_s": marks["last"] - marks["start"],
        "audio_s": audio,
        "infer_s": sum(r["infer_s"] for r in rows),
        "total_s": time.perf_counter() - t0,
        "peak_rss_mb": _rss_mb(),
        "dtype": info.get("dtype"),
        "device": info.get("device"),
        "calls": None if forced is None else forced.calls,
        **_gpu_peak(),
    }


def _reset_gpu_peak() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def _gpu_peak() -> dict[str, Any]:
    """Peak GPU memory of this side (torch's allocator) and what nvidia-smi sees in use now."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return {}
    out: dict[str, Any] = {
        "gpu_max_allocated_mb": torch.cuda.max_memory_allocated() / 2**20,
        "gpu_max_reserved_mb": torch.cuda.max_memory_reserved() / 2**20,
    }
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10
        )
        out["nvidia_smi_used_mb"] = float(smi.stdout.split()[0]) if smi.returncode == 0 and smi.stdout.strip() else None
    except (OSError, subprocess.SubprocessError, ValueError):
        out["nvidia_smi_used_mb"] = None
    return out


def bare_dtype(job: Mapping[str, Any], model_type: str) -> Any:
    """float32 on the CPU; on CUDA the precision the engine's family loader picks under dtype auto."""
    import torch

    if job.get("device", "cpu") == "cpu":
        return torch.float32
    from engine.backends.asr.families import family_loader

    return getattr(torch, family_loader(job["options"]["family"]).cuda_dtype_for(model_type))


def _bare_model(folder: Path, builder: standins.Builder, dtype: Any) -> Any:
    import transformers

    cls = getattr(transformers, builder.model_class)
    return cls.from_pretrained(folder, dtype=dtype, trust_remote_code=builder.remote_code).to(dtype=dtype).eval()


def run_bare(job: Mapping[str, Any]) -> dict[str, Any]:
    """Plain transformers on the decoded clips in the engine's batches (see the module docstring)."""
    import torch
    import transformers

    folder = Path(job["folder"])
    builder = standins.BUILDERS[job["builder"]]
    import soundfile as sf

    clips = [np.asarray(sf.read(c["path"], dtype="float32")[0]) for c in job["clips"]]
    extra, forced = _forced(job)
    device = job.get("device", "cpu")
    _reset_gpu_peak()
    t0 = time.perf_counter()
    step: Any
    if builder.family == "speech-llm":
        from engine.backends.asr.transformers import TransformersBackend

        options = {**dict(job["options"]), "device": device}
        if extra:
            options["generate_kwargs"] = {**dict(options.get("generate_kwargs") or {}), **extra}
        backend = TransformersBackend(**options)
        backend.load()
        dtype_name = str(backend.info().dtype)

        def step(batch: list[np.ndarray]) -> list[str]:
            return list(backend._family.transcribe(batch))
    else:
        model_type = str(json.loads((folder / "config.json").read_text())["model_type"])
        dtype = bare_dtype(job, model_type)
        model = _bare_model(folder, builder, dtype).to(device)
        dtype_name = str(dtype)
        if builder.model_class == "AutoModel":  # lite-whisper: the base Whisper's processor
            processor = transformers.AutoProcessor.from_pretrained(job["options"].get("processor") or folder)
        else:
            processor = transformers.AutoProcessor.from_pretrained(folder)

        def step(batch: list[np.ndarray]) -> list[str]:
            return _bare_step(model, model_type, processor, batch, extra, job["options"], device)

    load_s = time.perf_counter() - t0
    warm = [np.random.default_rng(0).normal(0, 0.01, SR).astype(np.float32)]
    audio = infer = 0.0
    with torch.inference_mode():
        step(warm)
        t1 = time.perf_counter()
        for idx in job["batches"]:
            batch = [clips[i] for i in idx]
            tb = time.perf_counter()
            step(batch)
            infer += time.perf_counter() - tb
            audio += sum(len(a) for a in batch) / SR
        wall = time.perf_counter() - t1
    if forced is not None:
        forced.check()
    return {
        "load_s": load_s,
        "wall_s": wall,
        "audio_s": audio,
        "infer_s": infer,
        "total_s": time.perf_counter() - t0,
        "peak_rss_mb": _rss_mb(),
        "dtype": dtype_name.replace("torch.", ""),
        "device": device,
        "calls": None if forced is None else forced.calls,
        **_gpu_peak(),
    }


def _on(inputs: Mapping[str, Any], model: Any, device: str) -> dict[str, Any]:
    """Tensors to the model's device; floating ones to its dtype."""
    out = {}
    for key, value in inputs.items():
        if hasattr(value, "to"):
            value = value.to(device)
            if value.is_floating_point():
                value = value.to(model.dtype)
        out[key] = value
    return out


def _bare_step(
    model: Any,
    model_type: str,
    processor: Any,
    batch: list[np.ndarray],
    extra: Mapping[str, Any],
    options: Mapping[str, Any],
    device: str = "cpu",
) -> list[str]:
    """One batch, the way the checkpoint's reference script feeds it (batch-padded features)."""
    if model_type in ("whisper", "lite-whisper"):
        feats = processor.feature_extractor(batch, sampling_rate=SR, return_tensors="pt").input_features.to(device, model.dtype)
        kwargs: dict[str, Any] = {"num_beams": 1, **extra}
        if getattr(model.generation_config, "is_multilingual", False):
            kwargs.update(language=options.get("language") or "en", task=options.get("task") or "transcribe")
        if model_type == "lite-whisper":
            kwargs["max_new_tokens"] = 224
        out = model.generate(feats, **kwargs)
        return list(processor.batch_decode(out.cpu(), skip_special_tokens=True))
    if model_type == "moonshine_streaming":
        inputs = processor(audio=batch, sampling_rate=SR, padding="longest", return_attention_mask=True, return_tensors="pt")
        cap = max(int(len(c) * 6.5 // SR + 2) for c in batch)
        out = model.generate(**_on(inputs, model, device), max_new_tokens=cap, num_beams=1, do_sample=False, **extra)
        return list(processor.batch_decode(out.cpu(), skip_special_tokens=True))
    if model_type == "cohere_asr":
        inputs = processor(audio=batch, sampling_rate=SR, language="en", punctuation=False, return_tensors="pt")
        inputs.pop("audio_chunk_index", None)
        out = model.generate(**_on(inputs, model, device), max_new_tokens=500, num_beams=1, do_sample=False, **extra)
        return list(processor.batch_decode(out.cpu(), skip_special_tokens=True))
    if model_type == "kyutai_speech_to_text":
        import soxr

        rate = int(processor.feature_extractor.sampling_rate)
        inputs = processor(audio=[soxr.resample(c, SR, rate) for c in batch], sampling_rate=rate, padding=True, return_tensors="pt")
        return list(processor.batch_decode(model.generate(**_on(inputs, model, device)).cpu(), skip_special_tokens=True))
    # CTC (MMS): the padded batch, argmax, decode
    inputs = processor.feature_extractor(batch, sampling_rate=SR, padding=True, return_attention_mask=True, return_tensors="pt")
    ids = model(**_on(inputs, model, device)).logits.argmax(-1).cpu()
    return list(processor.batch_decode(ids))


def worker(job_file: Path, out_file: Path) -> int:
    import torch

    job = json.loads(job_file.read_text())
    torch.set_num_threads(int(job["threads"]))
    logging.getLogger("transformers").setLevel(logging.ERROR)
    result = run_engine(job) if job["side"] == "engine" else run_bare(job)
    out_file.write_text(json.dumps(result, default=str))
    return 0


# -- driver ----------------------------------------------------------------------------------------


def _side(job: dict[str, Any], tmp: Path, timeout_s: float) -> dict[str, Any]:
    job_file, out_file = tmp / f"job-{job['side']}.json", tmp / f"out-{job['side']}.json"
    out_file.unlink(missing_ok=True)
    job_file.write_text(json.dumps(job))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(job_file), "--out-json", str(out_file)]
    proc = subprocess.run(cmd, timeout=timeout_s, capture_output=True, text=True)
    if proc.returncode != 0 or not out_file.is_file():
        raise RuntimeError(f"{job['side']} side of {job['name']} (batch {job['batch']}) failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out_file.read_text())
    result["load_average"] = load_average()
    return result


def _plan(batches: list[list[int]], targets: list[int], autoregressive: bool) -> list[list[int]]:
    if not autoregressive:
        return []
    return [[WARMUP_TOKENS]] + [[targets[i] for i in idx] for idx in batches]


def bench_model(
    name: str, ckpts: Mapping[str, standins.Checkpoint], clips: list[dict[str, Any]], args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    """Build one stand-in and measure both sides over the batch ladder; the figures."""
    from engine.model_registry import load_model_registry

    ckpt = ckpts[name]
    entry = load_model_registry()[name]
    size = "tiny" if args.quick else "full"
    params = standins.count_params(ckpt, tmp / "count") if size == "full" else None
    need = standins.cpu_memory_mb(params, ckpt.storage_dtype) if params else None
    budget = args.memory_budget_mb
    if need is not None and need > budget:
        return {"model": name, "status": "does not fit", "params": params, "needs_mb": round(need), "budget_mb": budget}
    built = standins.build(name, tmp / name, size, ckpts)
    log.info("%s: built %s (%s parameters, stored %s) in %.0f s", name, size, f"{built.params:,}", built.storage_dtype, built.build_s)
    counts, counter = standins.reference_token_counts([c["text"] for c in clips])
    options = {k: v for k, v in entry.options.items() if k not in ("model", "revision")}
    options.update(model=str(built.folder), device="cpu", local_files_only=True, family=entry.family)
    if entry.trust_remote_code:
        options["trust_remote_code"] = True
    if options.get("processor"):  # lite-whisper: its base Whisper's processor, here the tiny base layout built beside it
        options["processor"] = str(built.folder.parent / f"{built.folder.name}-base")
    clip_rows = [{"utt_id": c["utt_id"], "text": c["text"], "path": c["path"], "duration_s": len(c["audio"]) / SR} for c in clips]
    durations = [r["duration_s"] for r in clip_rows]
    folder = built.folder
    eos = eos_ids(folder) if ckpt.autoregressive else []
    allowed = decodable_ids(folder) if ckpt.autoregressive else None
    out: dict[str, Any] = {
        "model": name,
        "status": "measured",
        "size": size,
        "params": built.params,
        "card_params_m": ckpt.card_params_m,
        "storage_dtype": ckpt.storage_dtype,
        "build_s": built.build_s,
        "token_counter": counter,
        "reference_tokens": counts,
        "forced": ckpt.autoregressive,
        "ladder": {},
    }
    if args.memory_only:  # one engine run at batch 1: load seconds and peak RSS, no speed figure
        batches = batches_in_engine_order(durations, 1)
        job = {
            "name": name,
            "builder": ckpt.builder,
            "folder": str(folder),
            "options": options,
            "batch": 1,
            "clips": clip_rows,
            "batches": batches,
            "plan": _plan(batches, counts, ckpt.autoregressive),
            "eos_ids": eos,
            "allowed": allowed,
            "threads": args.threads,
            "side": "engine",
        }
        res = _side(job, tmp, args.side_timeout_s)
        log.info("%s memory: load %.1f s, peak RSS %.0f MB, load average %s", name, res["load_s"], res["peak_rss_mb"], res["load_average"])
        out.update(status="memory only", memory=res)
        _remove(folder)
        return out
    for batch in args.batches:
        batches = batches_in_engine_order(durations, batch)
        job = {
            "name": name,
            "builder": ckpt.builder,
            "folder": str(folder),
            "options": options,
            "batch": batch,
            "clips": clip_rows,
            "batches": batches,
            "plan": _plan(batches, counts, ckpt.autoregressive),
            "eos_ids": eos,
            "allowed": allowed,
            "threads": args.threads,
        }
        runs: dict[str, list[dict[str, Any]]] = {"engine": [], "bare": []}
        for r in range(args.repeats):
            for side in ("bare", "engine") if r % 2 == 0 else ("engine", "bare"):
                res = _side({**job, "side": side}, tmp, args.side_timeout_s)
                runs[side].append(res)
                log.info(
                    "%s batch %d repeat %d %s: RTFx %.2f (wall), load %.1f s, peak RSS %.0f MB, load average %s",
                    name,
                    batch,
                    r + 1,
                    side,
                    res["audio_s"] / res["wall_s"],
                    res["load_s"],
                    res["peak_rss_mb"],
                    res["load_average"],
                )
        out["ladder"][batch] = _summarise(runs)
    best = max(out["ladder"], key=lambda b: out["ladder"][b]["engine"]["rtfx_wall"])
    out["best_batch"] = best
    _remove(folder)
    return out


def _remove(folder: Path) -> None:
    """Drop a built stand-in (gigabytes) once measured."""
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


def _summarise(runs: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for side, rs in runs.items():
        out[side] = {
            "rtfx_wall": statistics.median(r["audio_s"] / r["wall_s"] for r in rs),
            "rtfx_infer": statistics.median(r["audio_s"] / r["infer_s"] for r in rs),
            "load_s": statistics.median(r["load_s"] for r in rs),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in rs),
            "audio_s": rs[0]["audio_s"],
            "dtype": rs[0]["dtype"],
            "load_averages": [r["load_average"] for r in rs],
            "runs": rs,
        }
    paired = [e["audio_s"] / e["wall_s"] / (b["audio_s"] / b["wall_s"]) for e, b in zip(runs["engine"], runs["bare"])]
    out["ratio_wall"] = out["engine"]["rtfx_wall"] / out["bare"]["rtfx_wall"]
    out["ratio_paired"] = statistics.median(paired)
    out["ratio_infer"] = out["engine"]["rtfx_infer"] / out["bare"]["rtfx_infer"]
    return out


def print_table(results: list[dict[str, Any]], args: argparse.Namespace, env: Mapping[str, Any]) -> None:
    print(
        f"\nmachine: {env['platform']}, {env['cpus']} CPUs, torch {env['torch']} with {args.threads} threads per side, float32, device "
        f"cpu; "
        f"{args.clips} demo clips, {args.repeats} repeats per side and batch (alternating order, medians)"
    )
    print(
        "| model | parameters | batch | engine RTFx | bare RTFx | engine / bare (paired) | load s (engine) | peak RSS MB (engine / bare) "
        "| decode | load average |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for r in results:
        if r["status"] == "memory only":
            m = r["memory"]
            print(
                f"| {r['model']} | {r['params']:,} | 1 | — | — | — | {m['load_s']:.1f} | {m['peak_rss_mb']:,.0f} / — | "
                f"memory only ({args.clips} clips, engine) | {m['load_average']} |"
            )
            continue
        if r["status"] != "measured":
            print(
                f"| {r['model']} | {r['params']:,} | — | — | — | — | — | needs {r['needs_mb']:,} MB (budget {r['budget_mb']:,}) | "
                f"not run | — |"
            )
            continue
        decode = "forced to the reference token count" if r["forced"] else "normal (CTC / one step per frame)"
        for batch, s in r["ladder"].items():
            loads = ", ".join(s["engine"]["load_averages"] + s["bare"]["load_averages"])
            print(
                f"| {r['model']} | {r['params']:,} | {batch}{' (best)' if batch == r['best_batch'] else ''} | "
                f"{s['engine']['rtfx_wall']:.2f} | {s['bare']['rtfx_wall']:.2f} | {s['ratio_wall']:.3f} ({s['ratio_paired']:.3f}) | "
                f"{s['engine']['load_s']:.1f} | {s['engine']['peak_rss_mb']:,.0f} / {s['bare']['peak_rss_mb']:,.0f} | {decode} | {loads} "
                f"|"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated line-up names, or 'all' (every stand-in)")
    ap.add_argument("--corpus", type=Path, default=REPO / "data" / "demo-small", help="demo corpus folder (audit corpus demo)")
    ap.add_argument("--clips", type=int, default=20)
    ap.add_argument("--batches", default="1,4", help="batch-size ladder")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=max(1, os.cpu_count() or 1))
    ap.add_argument("--memory-budget-mb", type=float, default=None, help="default: 80%% of MemAvailable, at most 24 GiB")
    ap.add_argument("--side-timeout-s", type=float, default=3600.0)
    ap.add_argument("--memory-only", action="store_true", help="one engine run per model at batch 1: load seconds and peak RSS only")
    ap.add_argument("--quick", action="store_true", help="tiny layouts, 4 clips, batches 1 and 2, one repeat (a logic check)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out-json", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.out_json)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    for noisy in ("engine", "transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.quick:
        args.clips, args.batches, args.repeats = 4, "1,2", 1
    args.batches = [int(b) for b in str(args.batches).split(",")]
    if args.memory_budget_mb is None:
        avail = next(
            (int(line.split()[1]) / 1024 for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemAvailable")),
            24 * 1024.0,
        )
        args.memory_budget_mb = round(min(24 * 1024.0, 0.8 * avail))
    ckpts = standins.load_checkpoints()
    names = sorted(ckpts) if args.models == "all" else [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [n for n in names if n not in ckpts]
    if unknown:
        raise SystemExit(f"no stand-in for {unknown} (known: {', '.join(sorted(ckpts))})")
    env = machine()
    log.info("bench_fullsize: %s, load average %s, memory budget %.0f MB", env["platform"], load_average(), args.memory_budget_mb)
    with tempfile.TemporaryDirectory(prefix="fullsize-") as tmp_name:
        tmp = Path(tmp_name)
        raw = corpus_clips(args.corpus, args.clips)
        clips = []
        for c in raw:
            path = tmp / f"{c['utt_id']}.flac"
            path.write_bytes(c["bytes"])
            clips.append({**c, "path": str(path)})
        results = [bench_model(n, ckpts, clips, args, tmp) for n in names]
    print_table(results, args, env)
    report = {"machine": env, "settings": {k: str(v) for k, v in vars(args).items()}, "results": results}
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
