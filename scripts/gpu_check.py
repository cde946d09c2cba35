#!/usr/bin/env python
"""GPU check: the engine vs a bare PyTorch loop on the same batches, one worker pinned per GPU.

Self-contained for a machine with NVIDIA GPUs, Python, PyTorch and transformers and nothing else
(no network, no soundfile, no Ray needed): it builds a randomly initialised wav2vec2-large CTC
model from its config (weights do not change the speed of a CTC forward pass), saves it with a
tokenizer vocabulary it writes, synthesizes audio in numpy, and then, in one process per GPU
(``CUDA_VISIBLE_DEVICES=i``), alternates

* bare loop: feature extractor -> model -> argmax -> tokenizer decode, batch after batch, and
* engine: ``InProcessRunner`` with our ``transformers`` ASR backend (decode WAV bytes, batch
  longest-first, transcribe, write Parquet parts and markers),

on the same shards and batches. With Ray importable (and ``--runner auto|ray``) the engine side
is instead one ``RayRunner`` with one actor per GPU. It prints RTFx of both, the ratio, GPU
memory, and every setting needed to judge the numbers. ``--device cpu --quick`` runs the same
logic on a tiny model on CPU (the smoke test does this).

``--models SELECTION`` (e.g. ``rweq``, the study's line-up) instead runs each registry model on one
shard of the demo corpus in its own process per GPU and prints load seconds, RTFx, peak GPU memory
and WER per model (scripts/gpu_lineup.py).
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import types
import wave
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

log = logging.getLogger("gpu_check")
SR = 16_000

# wav2vec2-large (LV-60 layout): 24 layers, 1024 hidden, 16 heads, layer-norm feature encoder
LARGE = {
    "hidden_size": 1024,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "feat_extract_norm": "layer",
    "do_stable_layer_norm": True,
    "conv_bias": True,
    "feat_proj_dropout": 0.0,
}
TINY = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 128,
    "conv_dim": (32, 32, 32, 32, 32, 32, 32),
    "num_conv_pos_embeddings": 16,
    "num_conv_pos_embedding_groups": 4,
    "feat_extract_norm": "layer",
    "do_stable_layer_norm": True,
    "conv_bias": True,
}
VOCAB = ["<pad>", "<s>", "</s>", "<unk>", "|", *"ETAONISRHDLUMCWFGYPBVK'XJQZ"]


# ----------------------------------------------------------------------------------------------
# environment
# ----------------------------------------------------------------------------------------------
def install_wav_reader_if_missing() -> str:
    """The engine decodes clips with soundfile; where it is not installed (the GPU image has no
    libsndfile binding) register a stand-in with the two calls the engine uses, for 16-bit PCM WAV
    only, so the engine's own decode path still runs. Returns which reader is in use."""
    import importlib.machinery

    try:
        import soundfile
    except ImportError:  # the GPU image: fall through to the stand-in below
        soundfile = None
    if soundfile is not None:
        return f"soundfile {soundfile.__version__}"

    mod = types.ModuleType("soundfile")
    mod.__spec__ = importlib.machinery.ModuleSpec("soundfile", None)  # importlib.util.find_spec needs one

    class _Info:
        def __init__(self, frames: int, samplerate: int, channels: int) -> None:
            self.frames, self.samplerate, self.channels = frames, samplerate, channels

    def _open(src: Any) -> wave.Wave_read:
        if isinstance(src, io.BytesIO):
            src.seek(0)
        return wave.open(src if isinstance(src, io.BytesIO) else str(src), "rb")

    def info(src: Any) -> _Info:
        with _open(src) as w:
            return _Info(w.getnframes(), w.getframerate(), w.getnchannels())

    def read(src: Any, dtype: str = "float32", always_2d: bool = False, start: int = 0, frames: int = -1) -> tuple[np.ndarray, int]:
        # start/frames as soundfile has them: the engine reads a manifest segment's frames only
        with _open(src) as w:
            if w.getsampwidth() != 2:
                raise RuntimeError("the stand-in WAV reader handles 16-bit PCM only")
            w.setpos(min(max(0, int(start)), w.getnframes()))
            n = w.getnframes() - w.tell() if frames is None or frames < 0 else int(frames)
            data = np.frombuffer(w.readframes(n), dtype="<i2").astype(dtype) / 32768.0
            data = data.reshape(-1, w.getnchannels())
            return (data if always_2d else data[:, 0]).astype(dtype), w.getframerate()

    mod.info, mod.read, mod.__version__ = info, read, "stdlib-wave-standin"  # type: ignore[attr-defined]
    sys.modules["soundfile"] = mod
    return "stdlib wave stand-in (soundfile not installed): 16-bit PCM WAV"


def _importable(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def environment() -> dict[str, Any]:
    """What the numbers were measured on."""
    import torch
    import transformers

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda_available": torch.cuda.is_available(),
        "cuda": torch.version.cuda,
        "gpus": [],
        "missing_optional": [m for m in ("soundfile", "soxr", "rapidfuzz", "whisper_normalizer", "ray", "pyarrow") if not _importable(m)],
    }
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            env["gpus"].append({"index": i, "name": p.name, "memory_gib": round(p.total_memory / 2**30, 1)})
    return env


# ----------------------------------------------------------------------------------------------
# model and audio
# ----------------------------------------------------------------------------------------------
def build_model(folder: Path, quick: bool, seed: int = 0) -> dict[str, Any]:
    """A randomly initialised wav2vec2 CTC model + processor saved under ``folder``."""
    import torch
    from transformers import Wav2Vec2Config, Wav2Vec2CTCTokenizer, Wav2Vec2FeatureExtractor, Wav2Vec2ForCTC, Wav2Vec2Processor

    torch.manual_seed(seed)
    folder.mkdir(parents=True, exist_ok=True)
    vocab_file = folder / "vocab.json"
    vocab_file.write_text(json.dumps({t: i for i, t in enumerate(VOCAB)}))
    tokenizer = Wav2Vec2CTCTokenizer(str(vocab_file), unk_token="<unk>", pad_token="<pad>", word_delimiter_token="|")
    extractor = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=SR, padding_value=0.0, do_normalize=True, return_attention_mask=True)
    Wav2Vec2Processor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(folder)
    cfg = Wav2Vec2Config(vocab_size=len(VOCAB), pad_token_id=0, ctc_loss_reduction="mean", **(TINY if quick else LARGE))
    t0 = time.perf_counter()
    model = Wav2Vec2ForCTC(cfg).eval()
    n_params = sum(p.numel() for p in model.parameters())
    model.save_pretrained(folder, safe_serialization=True)
    return {
        "params_m": round(n_params / 1e6, 1),
        "layers": cfg.num_hidden_layers,
        "hidden": cfg.hidden_size,
        "build_s": round(time.perf_counter() - t0, 1),
    }


def synth_clips(n: int, min_s: float, max_s: float, seed: int) -> list[np.ndarray]:
    """Speech-like noise: harmonic tones with a syllable-rate envelope over pink-ish noise."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        dur = float(np.clip(rng.gamma(4.0, (min_s + max_s) / 8.0), min_s, max_s))
        t = np.arange(int(dur * SR), dtype=np.float32) / SR
        f0 = rng.uniform(90, 220)
        voiced = sum(np.sin(2 * np.pi * f0 * k * t + rng.uniform(0, 6.28)) / k for k in range(1, 6))
        env = 0.5 * (1 + np.sin(2 * np.pi * rng.uniform(3, 6) * t))
        noise = np.cumsum(rng.standard_normal(t.size).astype(np.float32)) * 0.002
        x = (0.2 * env * voiced + 0.05 * rng.standard_normal(t.size) + noise - noise.mean()).astype(np.float32)
        out.append(np.clip(x / (np.abs(x).max() + 1e-6) * 0.8, -1, 1).astype(np.float32))
    return out


def wav_bytes(x: np.ndarray) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes((x * 32767).astype("<i2").tobytes())
    return buf.getvalue()


def make_dataset(clips: list[np.ndarray], shard_size: int, prefix: str) -> Any:
    from engine.data import Utterance
    from engine.datasets.base import in_memory_dataset

    utts = [
        Utterance(f"{prefix}{i:06d}", "synthetic", audio_bytes=wav_bytes(c), duration_s=len(c) / SR, speaker="synth")
        for i, c in enumerate(clips)
    ]
    return in_memory_dataset("gpu-check", "synthetic", "memory", utts, shard_size, None)


def engine_batches(ds: Any, batch_size: int) -> list[list[np.ndarray]]:
    """The engine's batches: per shard, decoded clips longest-first, ``batch_size`` at a time."""
    from engine.data import DecodeOptions
    from engine.run.runner import decode_shard

    batches = []
    for sid in ds.shard_ids:
        clips = decode_shard(ds.load_shard(sid), None, DecodeOptions())
        failed = [d.error for d in clips if d.error is not None]
        if failed:
            raise RuntimeError(f"{len(failed)} of {len(clips)} clips of shard {sid} did not decode through the engine reader: {failed[0]}")
        decoded = sorted(clips, key=lambda d: d.duration_s, reverse=True)
        batches += [[d.samples for d in decoded[i : i + batch_size]] for i in range(0, len(decoded), batch_size)]
    return batches


# ----------------------------------------------------------------------------------------------
# the two sides
# ----------------------------------------------------------------------------------------------
class BareLoop:
    """Plain transformers + PyTorch: processor, forward, argmax, decode; nothing else."""

    def __init__(self, model_dir: Path, device: str, dtype: str) -> None:
        import torch
        from transformers import AutoProcessor, Wav2Vec2ForCTC

        self.torch = torch
        self.device = device
        self.processor = AutoProcessor.from_pretrained(model_dir)
        # cast after loading: older transformers ignore the 'dtype' keyword (they used 'torch_dtype')
        self.model = (
            Wav2Vec2ForCTC.from_pretrained(model_dir, dtype=getattr(torch, dtype)).to(device=device, dtype=getattr(torch, dtype)).eval()
        )

    def run(self, batches: list[list[np.ndarray]]) -> dict[str, float]:
        torch = self.torch
        audio = infer = 0.0
        t0 = time.perf_counter()
        with torch.inference_mode():
            for audios in batches:
                tb = time.perf_counter()
                inputs = self.processor(audios, sampling_rate=SR, padding=True, return_attention_mask=True, return_tensors="pt")
                values = inputs.input_values.to(self.device, self.model.dtype)
                mask = inputs.attention_mask.to(self.device)
                ids = self.model(values, attention_mask=mask).logits.argmax(-1).cpu()
                lengths = self.model._get_feat_extract_output_lengths(inputs.attention_mask.sum(-1)).tolist()
                self.processor.batch_decode([row[: int(n)].tolist() for row, n in zip(ids, lengths)])
                infer += time.perf_counter() - tb
                audio += sum(len(a) for a in audios) / SR
        wall = time.perf_counter() - t0
        return {"audio_s": audio, "rtfx_wall": audio / wall, "rtfx_infer": audio / infer, "wall_s": wall}


def engine_inprocess(ds: Any, spec: Any, out: Path) -> dict[str, float]:
    """Our in-process runner end to end; wall = models loaded -> last unit written."""
    import shutil

    from engine.run.runner import InProcessRunner
    from engine.run.store import RunStore

    shutil.rmtree(out, ignore_errors=True)
    marks: dict[str, float] = {}

    def progress(event: str, n: int, info: dict[str, Any]) -> None:
        if event == "start":
            marks["start"] = time.perf_counter()
        elif event == "unit":
            marks["last"] = time.perf_counter()

    facts = InProcessRunner(ds, [spec], RunStore(out), warmup=1, progress=progress).run()[spec.name]
    if facts.get("status") != "loaded":
        raise RuntimeError(f"engine could not load the model: {facts.get('error')}")
    return _engine_figures(RunStore(out), spec.name, marks["last"] - marks["start"], facts)


def _engine_figures(store: Any, model: str, wall: float, facts: dict[str, Any]) -> dict[str, Any]:
    rows = store.consolidate([model]).to_pylist()
    ok = [r for r in rows if r["error"] is None]
    audio = sum(r["duration_s"] for r in ok)
    infer = sum(r["infer_s"] for r in ok)
    return {
        "audio_s": audio,
        "rtfx_wall": audio / wall,
        "rtfx_infer": audio / infer,
        "wall_s": wall,
        "rows": len(rows),
        "failed": len(rows) - len(ok),
        "info": facts.get("info", {}),
        "actor": facts.get("actor"),
    }


def model_spec(model_dir: Path, device: str, batch_size: int) -> Any:
    from engine.data import ModelSpec

    return ModelSpec("w2v2-large-random", "transformers", {"model": str(model_dir), "device": device, "local_files_only": True}, batch_size)


def gpu_memory() -> dict[str, float]:
    import torch

    if not torch.cuda.is_available():
        return {}
    free, total = torch.cuda.mem_get_info()
    return {
        "max_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "max_reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 2),
        "in_use_gib": round((total - free) / 2**30, 2),
    }


# ----------------------------------------------------------------------------------------------
# worker (one per GPU) and driver
# ----------------------------------------------------------------------------------------------
def worker(args: argparse.Namespace) -> dict[str, Any]:
    """Runs in its own process, pinned to one GPU (or on CPU): bare and engine, alternating."""
    import torch

    reader = install_wav_reader_if_missing()
    if args.device == "cpu":
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, args.n_parts)))
    dtype = "float16" if args.device == "cuda" else "float32"
    clips = synth_clips(args.n_clips, args.min_s, args.max_s, seed=1000 + args.part)
    ds = make_dataset(clips, args.shard_size, prefix=f"g{args.part}-")
    batches = engine_batches(ds, args.batch_size)
    bare = BareLoop(Path(args.model_dir), args.device, dtype)
    bare.run(batches[: max(2, len(batches) // 10)])  # untimed warm-up of the kernels for real shapes
    spec = model_spec(Path(args.model_dir), args.device, args.batch_size)
    res: dict[str, Any] = {
        "part": args.part,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "decode_reader": reader,
        "bare": [],
        "engine": [],
    }
    res["bare_model"] = {"dtype": str(bare.model.dtype).replace("torch.", ""), "device": str(next(bare.model.parameters()).device)}
    if torch.cuda.is_available():
        res["gpu"] = torch.cuda.get_device_name(0)
    mem: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="gpu-check-run-") as tmp:
        # untimed: one shard through the engine, as the bare loop had its warm-up batches above
        engine_inprocess(make_dataset(clips[: args.shard_size], args.shard_size, prefix=f"w{args.part}-"), spec, Path(tmp) / "warm")
        for r in range(args.repeats):
            for side in ("bare", "engine") if r % 2 == 0 else ("engine", "bare"):
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                if side == "bare":
                    res["bare"].append(bare.run(batches))
                else:
                    res["engine"].append(engine_inprocess(ds, spec, Path(tmp) / "engine"))  # loads its own copy
                mem[side] = gpu_memory()
    res["gpu_memory"] = mem
    res["n_clips"] = len(clips)
    res["n_batches"] = len(batches)
    return res


def run_workers(args: argparse.Namespace, model_dir: Path, n_parts: int) -> list[dict[str, Any]]:
    """One process per GPU (CUDA_VISIBLE_DEVICES=i), all started together."""
    procs = []
    with tempfile.TemporaryDirectory(prefix="gpu-check-out-") as tmp:
        for i in range(n_parts):
            env = dict(os.environ)
            if args.device == "cuda":
                env["CUDA_VISIBLE_DEVICES"] = str(i)
            out = Path(tmp) / f"part{i}.json"
            cmd = [
                sys.executable,
                str(Path(__file__).resolve()),
                "--worker",
                "--part",
                str(i),
                "--n-parts",
                str(n_parts),
                "--model-dir",
                str(model_dir),
                "--out-json",
                str(out),
                "--device",
                args.device,
                "--n-clips",
                str(args.n_clips),
                "--min-s",
                str(args.min_s),
                "--max-s",
                str(args.max_s),
                "--batch-size",
                str(args.batch_size),
                "--shard-size",
                str(args.shard_size),
                "--repeats",
                str(args.repeats),
            ]
            procs.append((subprocess.Popen(cmd, env=env), out))
        results = []
        for p, out in procs:
            if p.wait() != 0:
                raise RuntimeError(f"worker {out.stem} failed with exit code {p.returncode} (its log is above)")
            results.append(json.loads(out.read_text()))
    return results


def ray_engine(args: argparse.Namespace, model_dir: Path, n_gpus: int) -> dict[str, Any]:
    """The Ray engine with one actor per GPU over every part's clips (bare loop runs per worker)."""
    import shutil

    from engine.run.ray_runner import RayRunner, init_ray
    from engine.run.store import RunStore

    install_wav_reader_if_missing()
    clips = [c for part in range(n_gpus) for c in synth_clips(args.n_clips, args.min_s, args.max_s, seed=1000 + part)]
    ds = make_dataset(clips, args.shard_size, prefix="ray-")
    spec = model_spec(model_dir, args.device, args.batch_size)
    init_ray(None, num_gpus=n_gpus if args.device == "cuda" else 0)
    runs = []
    with tempfile.TemporaryDirectory(prefix="gpu-check-ray-") as tmp:
        for _ in range(args.repeats):
            out = Path(tmp) / "ray"
            shutil.rmtree(out, ignore_errors=True)
            facts = RayRunner(ds, [spec], RunStore(out), warmup=1, workers=max(1, n_gpus)).run()[spec.name]
            if facts.get("status") != "loaded":
                raise RuntimeError(f"Ray engine could not load the model: {facts.get('error')}")
            eng = facts["engine"]
            runs.append(_engine_figures(RunStore(out), spec.name, eng["last_unit_written_s"] - eng["first_actor_ready_s"], facts))
    import ray

    ray.shutdown()
    return {
        "runs": runs,
        "rtfx_wall": statistics.median(r["rtfx_wall"] for r in runs),
        "rtfx_infer": statistics.median(r["rtfx_infer"] for r in runs),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--quick", action="store_true", help="tiny model and few clips (logic check, e.g. on CPU)")
    ap.add_argument("--runner", choices=["auto", "inprocess", "ray"], default="inprocess", help="auto: Ray when importable")
    ap.add_argument("--n-clips", type=int, default=None, help="clips per GPU")
    ap.add_argument("--min-s", type=float, default=2.0)
    ap.add_argument("--max-s", type=float, default=20.0)
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--shard-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--json", type=Path, default=None, help="also write every figure here")
    ap.add_argument("--models", default=None, help="registry models (a tag such as rweq, or names): one shard per model, real weights")
    ap.add_argument("--dataset", default=None, help="with --models: dataset (default: the demo corpus)")
    ap.add_argument("--limit", type=int, default=64, help="with --models: clips in the one shard each model runs")
    ap.add_argument("--model-timeout-s", type=float, default=1800.0, help="with --models: give up on one model after this long")
    ap.add_argument("--include-hosted", action="store_true", help="with --models: also call hosted APIs (billed)")
    ap.add_argument("--lineup-worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--part", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--n-parts", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--model-dir", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out-json", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    for noisy in ("engine", "transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.models or args.lineup_worker:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import gpu_lineup

        return gpu_lineup.main(args)
    args.n_clips = args.n_clips or (12 if args.quick else 800)
    args.batch_size = args.batch_size or (4 if args.quick else 16)
    args.repeats = args.repeats or (1 if args.quick else 3)
    if args.quick:
        args.min_s, args.max_s, args.shard_size = 1.0, 3.0, min(args.shard_size, 8)

    if args.worker:
        res = worker(args)
        args.out_json.write_text(json.dumps(res, default=str))
        return 0

    t_start = time.perf_counter()
    env = environment()
    if args.device == "cuda" and not env["gpus"]:
        print("no CUDA GPU visible to PyTorch: run with --device cpu --quick to check the logic", file=sys.stderr)
        return 2
    n_gpus = len(env["gpus"]) if args.device == "cuda" else 1
    runner = args.runner
    if runner == "auto":
        runner = "ray" if "ray" not in env["missing_optional"] else "inprocess"
    print(f"gpu_check: {env['python']} torch {env['torch']} (CUDA {env['cuda']}) transformers {env['transformers']} on {env['platform']}")
    for g in env["gpus"]:
        print(f"  GPU {g['index']}: {g['name']}, {g['memory_gib']} GiB")
    print(f"  missing optional packages: {', '.join(env['missing_optional']) or 'none'}")
    print(
        f"  engine path: "
        f"{'RayRunner, one actor per GPU' if runner == 'ray' else 'in-process runner, one process per GPU (CUDA_VISIBLE_DEVICES), no Ray'}"
    )
    with tempfile.TemporaryDirectory(prefix="gpu-check-model-") as tmp:
        model_dir = Path(tmp) / "w2v2"
        model = build_model(model_dir, args.quick)
        print(
            f"  model: randomly initialised wav2vec2 CTC ({'tiny' if args.quick else 'large'} config), {model['params_m']} M parameters, "
            f"{model['layers']} layers x {model['hidden']}; dtype {'float16' if args.device == 'cuda' else 'float32'}, greedy CTC"
        )
        print(
            f"  data per worker: {args.n_clips} synthetic clips of {args.min_s:g}-{args.max_s:g} s, shards of {args.shard_size}, "
            f"batch {args.batch_size} (longest first), {args.repeats} alternating repeats, medians"
        )
        parts = run_workers(args, model_dir, n_gpus)
        ray_res = ray_engine(args, model_dir, n_gpus) if runner == "ray" else None

    report: dict[str, Any] = {
        "environment": env,
        "model": model,
        "runner": runner,
        "settings": {k: getattr(args, k) for k in ("device", "quick", "n_clips", "min_s", "max_s", "batch_size", "shard_size", "repeats")},
        "workers": parts,
    }
    print("\n== per worker (medians) ==")
    print(
        "worker  device                 audio s  bare RTFx(wall)  engine RTFx(wall)  ratio   bare RTFx(infer)  engine RTFx(infer)  ratio "
        "  GPU mem bare/engine (max alloc GiB)  decode"
    )
    tot_audio = tot_bare = tot_eng = 0.0
    for p in parts:
        b_w = statistics.median(x["rtfx_wall"] for x in p["bare"])
        e_w = statistics.median(x["rtfx_wall"] for x in p["engine"])
        b_i = statistics.median(x["rtfx_infer"] for x in p["bare"])
        e_i = statistics.median(x["rtfx_infer"] for x in p["engine"])
        p["median"] = {
            "bare_rtfx_wall": b_w,
            "engine_rtfx_wall": e_w,
            "ratio_wall": e_w / b_w,
            "bare_rtfx_infer": b_i,
            "engine_rtfx_infer": e_i,
            "ratio_infer": e_i / b_i,
        }
        audio = p["bare"][0]["audio_s"]
        tot_audio += audio
        tot_bare += b_w
        tot_eng += e_w
        mem = p.get("gpu_memory", {})
        mem_s = f"{mem.get('bare', {}).get('max_allocated_gib', '-')}/{mem.get('engine', {}).get('max_allocated_gib', '-')}"
        failed = sum(x["failed"] for x in p["engine"])
        print(
            f"{p['part']:<7} {(p.get('gpu') or 'cpu')[:22]:<22} {audio:8.0f}  {b_w:15.1f}  {e_w:17.1f}  {e_w / b_w:5.3f}   {b_i:16.1f}  "
            f"{e_i:18.1f}  {e_i / b_i:5.3f}   "
            f"{mem_s:<35}  {p['decode_reader'][:40]}" + (f"  FAILED ROWS: {failed}" if failed else "")
        )
    for p in parts:
        info = p["engine"][-1].get("info", {}) if p["engine"] else {}
        print(
            f"worker {p['part']}: bare model {p['bare_model']['dtype']} on {p['bare_model']['device']}; "
            f"engine model {info.get('dtype', '?')} on {info.get('device', '?')}; "
            f"{p['n_clips']} clips, {p['n_batches']} batches"
        )
    report["total"] = {
        "audio_s_per_repeat": tot_audio,
        "bare_rtfx_wall_sum": tot_bare,
        "engine_rtfx_wall_sum": tot_eng,
        "ratio_wall": tot_eng / tot_bare,
    }
    print(
        f"\nall workers: bare RTFx {tot_bare:.1f}, engine RTFx {tot_eng:.1f} (sums over GPUs), engine / bare = {tot_eng / tot_bare:.3f} "
        f"(target >= 0.95)"
    )
    if ray_res is not None:
        report["ray"] = ray_res
        print(
            f"Ray engine, {n_gpus} actor(s): RTFx wall {ray_res['rtfx_wall']:.1f}, infer {ray_res['rtfx_infer']:.1f}; over summed bare "
            f"RTFx: {ray_res['rtfx_wall'] / tot_bare:.3f}"
        )
    print(
        "wall RTFx: audio / wall time of the loop after load and warm-up (the engine's includes decoding WAV bytes, batching and "
        "writing Parquet parts); infer RTFx: audio / summed per-batch time (features -> text), as the Open ASR Leaderboard times it."
    )
    elapsed = time.perf_counter() - t_start
    report["elapsed_s"] = elapsed
    print(f"gpu_check finished in {elapsed:.0f} s")
    out = args.json or (Path(os.environ["OUT"]) / "gpu_check.json" if os.environ.get("OUT") else None)
    if out:
        out.write_text(json.dumps(report, indent=2, default=str))
        print(f"figures written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
