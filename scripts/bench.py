#!/usr/bin/env python
"""Performance benchmarks: engine overhead, batching, scaling, scoring throughput, driver memory.

Every speed claim is a ratio of two runs made side by side in this process, alternating and
taking medians, so that a busy or shared machine slows both sides alike. Subcommands::

    python scripts/bench.py all [--quick]      # everything below, in this order
    python scripts/bench.py overhead           # engine RTFx / bare backend loop RTFx (in-process and Ray, 1 actor)
    python scripts/bench.py batching           # faster-whisper: unbatched vs cross-utterance batches 1/4/8/16
    python scripts/bench.py scaling --workers 2  # Ray actors 1..N: RTFx and scaling efficiency
    python scripts/bench.py scoring            # pairs/s (>= 1,000,000 pairs) and a 40 x 15,000 sweep
    python scripts/bench.py memory             # driver peak RSS per 10,000 utterances
    python scripts/bench.py oasr               # Open ASR Leaderboard method vs ours (scripts/oasr_compare.py)

RTFx definitions (docs/metrics.md): audio seconds / inference seconds, model loading and warm-up
excluded. "wall" RTFx divides by the wall time of the whole loop (decoding, batching, writing
results included); "infer" RTFx divides by the summed per-batch ``transcribe_batch`` times that
the engine records in ``infer_s``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchlib import DEFAULT_DECODE, bench_dataset, decoded_clips, print_table, resolve_specs

from engine.audio.shards import encode_audio
from engine.backends import ASR_BACKENDS
from engine.backends.base import ASRBackend, BackendInfo
from engine.data import SAMPLE_RATE, DecodeOptions, ModelSpec, Shard, Utterance
from engine.datasets import Dataset
from engine.errors import AuditError, ConfigError
from engine.run.runner import InProcessRunner, decode_shard, load_model
from engine.run.store import RunStore

log = logging.getLogger("bench")


def with_options(spec: ModelSpec, batch_size: int | None = None, **options: Any) -> ModelSpec:
    """The same model with other engine batch size / backend options."""
    return replace(spec, options={**dict(spec.options), **options}, batch_size=spec.batch_size if batch_size is None else batch_size)


def median_of(runs: Sequence[dict[str, float]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


# ----------------------------------------------------------------------------------------------
# 1. engine overhead: bare loop vs in-process runner vs Ray runner (1 actor)
# ----------------------------------------------------------------------------------------------
def bare_loop(spec: ModelSpec, ds: Dataset, warmup: int = 1, opts: DecodeOptions = DEFAULT_DECODE) -> dict[str, float]:
    """What a person would write without the engine: decode each shard, then the engine's batches
    (longest first, ``spec.batch_size`` clips) straight into ``transcribe_batch``."""
    state = load_model(spec, warmup)
    if state.backend is None:
        raise AuditError(f"{spec.name} cannot load: {state.facts.get('error')}")
    backend = state.backend
    audio_s = infer_s = 0.0
    t0 = time.perf_counter()
    for sid in ds.shard_ids:
        decoded = [d for d in decode_shard(ds.load_shard(sid), ds.root, opts) if d.error is None]
        decoded.sort(key=lambda d: d.duration_s, reverse=True)
        bs = max(1, spec.batch_size)
        for i in range(0, len(decoded), bs):
            batch = decoded[i : i + bs]
            tb = time.perf_counter()
            backend.transcribe_batch([d.samples for d in batch])
            infer_s += time.perf_counter() - tb
            audio_s += sum(d.duration_s for d in batch)
    wall = time.perf_counter() - t0
    backend.close()
    if audio_s <= 0:
        raise AuditError("the bare loop decoded no audio (every clip had a decode error)")
    return {"audio_s": audio_s, "wall_s": wall, "rtfx_wall": audio_s / wall, "rtfx_infer": audio_s / infer_s}


def _rows_rtfx(store: RunStore, model: str) -> tuple[float, float, int]:
    rows = store.consolidate([model]).to_pylist()
    ok = [r for r in rows if r["error"] is None and r["infer_s"] is not None]
    audio = sum(r["duration_s"] or 0.0 for r in ok)
    infer = sum(r["infer_s"] for r in ok)
    return audio, (audio / infer if infer > 0 else float("nan")), len(rows) - len(ok)


def inprocess_run(spec: ModelSpec, ds: Dataset, work: Path, warmup: int = 1, opts: DecodeOptions = DEFAULT_DECODE) -> dict[str, float]:
    """The in-process engine end to end; wall = from 'start' (models loaded, warm) to the last unit written."""
    out = work / f"inproc-{spec.name}"
    shutil.rmtree(out, ignore_errors=True)
    marks: dict[str, float] = {}

    def progress(event: str, n: int, info: dict[str, Any]) -> None:
        now = time.perf_counter()
        if event == "start":
            marks["start"] = now
        elif event == "unit":
            marks["last"] = now

    facts = InProcessRunner(ds, [spec], RunStore(out), warmup=warmup, decode_options=opts, progress=progress).run()[spec.name]
    if facts.get("status") != "loaded":
        raise AuditError(f"{spec.name} did not run in the engine: {facts.get('error')}")
    audio, rtfx_infer, failed = _rows_rtfx(RunStore(out), spec.name)
    wall = marks["last"] - marks["start"]
    return {"audio_s": audio, "wall_s": wall, "rtfx_wall": audio / wall, "rtfx_infer": rtfx_infer, "failed": failed}


def ray_run(
    spec: ModelSpec, ds: Dataset, work: Path, actors: int = 1, warmup: int = 1, reserve_cpus: float | None = None
) -> dict[str, float]:
    """The Ray engine end to end; wall = first actor loaded and warm -> last unit written."""
    from engine.run.ray_runner import RayRunner

    out = work / f"ray-{spec.name}-{actors}"
    shutil.rmtree(out, ignore_errors=True)
    runner = RayRunner(ds, [spec], RunStore(out), warmup=warmup, workers=actors, reserve_cpus=reserve_cpus)
    facts = runner.run()[spec.name]
    if facts.get("status") != "loaded":
        raise AuditError(f"{spec.name} did not run in the Ray engine: {facts.get('error')}")
    audio, rtfx_infer, failed = _rows_rtfx(RunStore(out), spec.name)
    eng = facts["engine"]
    wall = eng["last_unit_written_s"] - eng["first_actor_ready_s"]
    return {
        "audio_s": audio,
        "wall_s": wall,
        "rtfx_wall": audio / wall,
        "rtfx_infer": rtfx_infer,
        "failed": failed,
        "actors_started": eng.get("actors_started", actors),
    }


def start_ray(num_cpus: int | None = None) -> bool:
    """A local Ray instance for the runs below (False when Ray is not installed)."""
    try:
        from engine.run.ray_runner import init_ray

        init_ray(None, num_cpus=num_cpus)
        return True
    except ImportError:
        log.warning("ray is not installed: Ray rows are skipped (pip install ray)")
        return False


def bench_overhead(models: Sequence[str], n_utts: int, shard_size: int, repeats: int, work: Path, use_ray: bool = True) -> dict[str, Any]:
    """Bare loop vs in-process engine vs Ray engine (1 actor), alternating; medians."""
    ds = bench_dataset(n_utts, shard_size, work)
    have_ray = use_ray and start_ray(os.cpu_count())
    results: dict[str, Any] = {"n_utts": ds.n_utts, "n_shards": len(ds.shard_ids), "repeats": repeats}
    total_cpus = float(os.cpu_count() or 1)
    for spec in resolve_specs(models):
        runs: dict[str, list[dict[str, float]]] = {"bare": [], "inprocess": [], "ray1": []}
        for r in range(repeats):
            log.info("overhead %s: repeat %d/%d", spec.name, r + 1, repeats)
            order = ["bare", "inprocess", "ray1"] if r % 2 == 0 else ["ray1", "inprocess", "bare"]
            for kind in order:
                if kind == "bare":
                    runs["bare"].append(bare_loop(spec, ds))
                elif kind == "inprocess":
                    runs["inprocess"].append(inprocess_run(spec, ds, work))
                elif have_ray:
                    runs["ray1"].append(ray_run(spec, ds, work, actors=1, reserve_cpus=max(0.0, min(1.0, total_cpus - 1))))
        res: dict[str, Any] = {"batch_size": spec.batch_size, "runs": runs}
        for kind, rr in runs.items():
            if rr:
                res[f"{kind}_rtfx_wall"] = median_of(rr, "rtfx_wall")
                res[f"{kind}_rtfx_infer"] = median_of(rr, "rtfx_infer")
        for kind in ("inprocess", "ray1"):
            if runs[kind]:
                res[f"{kind}_over_bare_wall"] = res[f"{kind}_rtfx_wall"] / res["bare_rtfx_wall"]
                res[f"{kind}_over_bare_infer"] = res[f"{kind}_rtfx_infer"] / res["bare_rtfx_infer"]
                # each repeat runs bare and engine back to back: the median of those pairwise ratios
                # cancels slow drifts of a shared machine better than a ratio of medians
                res[f"{kind}_paired_wall"] = statistics.median(e["rtfx_wall"] / b["rtfx_wall"] for e, b in zip(runs[kind], runs["bare"]))
        results[spec.name] = res
        # one line per model as soon as it is measured, so a later failure loses nothing
        log.info(
            "overhead %s: wall ratio in-process %.3f, Ray %s (runs: %s)",
            spec.name,
            res.get("inprocess_over_bare_wall", float("nan")),
            f"{res['ray1_over_bare_wall']:.3f}" if "ray1_over_bare_wall" in res else "-",
            json.dumps({k: [round(x["rtfx_wall"], 3) for x in v] for k, v in runs.items()}),
        )
    rows = []
    for name in models:
        r = results[name]
        for kind, label in (("inprocess", "in-process"), ("ray1", "Ray, 1 actor")):
            if f"{kind}_rtfx_wall" not in r:
                continue
            rows.append(
                [
                    name,
                    label,
                    r["batch_size"],
                    r["bare_rtfx_wall"],
                    r[f"{kind}_rtfx_wall"],
                    r[f"{kind}_over_bare_wall"],
                    r[f"{kind}_paired_wall"],
                    r["bare_rtfx_infer"],
                    r[f"{kind}_rtfx_infer"],
                    r[f"{kind}_over_bare_infer"],
                ]
            )
    print_table(
        f"Engine overhead ({ds.n_utts} utts, {len(ds.shard_ids)} shards, median of {repeats}, {os.cpu_count()} CPUs)",
        [
            "model",
            "engine",
            "batch",
            "bare wall RTFx",
            "engine wall RTFx",
            "wall ratio",
            "paired wall ratio",
            "bare infer RTFx",
            "engine infer RTFx",
            "infer ratio",
        ],
        rows,
        "wall: audio / (decode + batches + result writing) after load and warm-up; infer: audio / summed batch times; "
        "paired: median over repeats of engine/bare measured back to back. Target ratio >= 0.95.",
    )
    return results


# ----------------------------------------------------------------------------------------------
# 2. cross-utterance batching (faster-whisper)
# ----------------------------------------------------------------------------------------------
def bench_batching(model: str, n_utts: int, batch_sizes: Sequence[int], repeats: int, work: Path) -> dict[str, Any]:
    """``WhisperModel.transcribe`` clip by clip vs our duration-sorted cross-utterance batches."""
    ds = bench_dataset(n_utts, 64, work)
    clips = sorted(decoded_clips(ds), key=lambda d: d.duration_s, reverse=True)
    audio = sum(d.duration_s for d in clips)
    spec = resolve_specs([model])[0]
    state = load_model(spec, 1)
    if state.backend is None:
        raise AuditError(f"{spec.name} cannot load: {state.facts.get('error')}")
    backend = state.backend
    if not hasattr(backend, "transcribe_unbatched"):
        raise ConfigError(f"{spec.name}: batching benchmark needs the faster-whisper backend")
    timings: dict[str, list[float]] = {"unbatched": [], **{f"bs{b}": [] for b in batch_sizes}}
    texts: dict[str, list[str]] = {}
    for r in range(repeats):
        keys = list(timings) if r % 2 == 0 else list(reversed(timings))
        for key in keys:
            log.info("batching: repeat %d/%d: %s", r + 1, repeats, key)
            t0 = time.perf_counter()
            if key == "unbatched":
                out = [backend.transcribe_unbatched(d.samples) for d in clips]
            else:
                b = int(key[2:])
                out = []
                for i in range(0, len(clips), b):
                    out.extend(backend.transcribe_batch([d.samples for d in clips[i : i + b]]))
            timings[key].append(time.perf_counter() - t0)
            texts[key] = out
    backend.close()
    base = audio / statistics.median(timings["unbatched"])
    res: dict[str, Any] = {"n_utts": len(clips), "audio_s": audio, "rtfx": {}, "speedup_vs_unbatched": {}, "same_text_as_unbatched": {}}
    rows = [["unbatched (WhisperModel.transcribe per clip)", base, 1.0, "-"]]
    for b in batch_sizes:
        key = f"bs{b}"
        rtfx = audio / statistics.median(timings[key])
        same = sum(a == c for a, c in zip(texts[key], texts["unbatched"])) / max(1, len(clips))
        res["rtfx"][b] = rtfx
        res["speedup_vs_unbatched"][b] = rtfx / base
        res["same_text_as_unbatched"][b] = same
        rows.append([f"batched, batch size {b}", rtfx, rtfx / base, f"{same:.0%}"])
    res["rtfx_unbatched"] = base
    print_table(
        f"Cross-utterance batching, {spec.name} ({len(clips)} clips, {audio:.0f} s audio, duration-sorted, median of {repeats})",
        ["decoding", "RTFx", "speed-up", "same text as unbatched"],
        rows,
    )
    return res


# ----------------------------------------------------------------------------------------------
# 3. scaling with Ray actors
# ----------------------------------------------------------------------------------------------
def bench_scaling(models: Sequence[str], n_utts: int, shard_size: int, workers: int, repeats: int, work: Path) -> dict[str, Any]:
    """RTFx with 1..N Ray actors of one model (one CPU thread each); efficiency = RTFx_k / (k * RTFx_1)."""
    if not start_ray(workers):
        return {"skipped": "ray is not installed"}
    ds = bench_dataset(n_utts, shard_size, work)
    results: dict[str, Any] = {"n_utts": ds.n_utts, "n_shards": len(ds.shard_ids)}
    rows = []
    for spec in resolve_specs(models):
        if "cpu_threads" in _option_names(spec):
            spec = with_options(spec, cpu_threads=1)
        runs: dict[int, list[dict[str, float]]] = {k: [] for k in range(1, workers + 1)}
        for r in range(repeats):
            for k in range(1, workers + 1) if r % 2 == 0 else range(workers, 0, -1):
                log.info("scaling %s: repeat %d/%d, %d actor(s)", spec.name, r + 1, repeats, k)
                runs[k].append(ray_run(spec, ds, work, actors=k, reserve_cpus=0.0))
        one = median_of(runs[1], "rtfx_wall")
        res = {}
        for k, rr in runs.items():
            rtfx = median_of(rr, "rtfx_wall")
            res[k] = {
                "rtfx_wall": rtfx,
                "speedup": rtfx / one,
                "efficiency": rtfx / (k * one),
                "actors_started": rr[-1].get("actors_started"),
            }
            rows.append([spec.name, k, rtfx, rtfx / one, rtfx / (k * one)])
        results[spec.name] = res
    print_table(
        f"Scaling with Ray actors ({ds.n_utts} utts, {len(ds.shard_ids)} shards, 1 thread per actor, {os.cpu_count()} CPUs, median of "
        f"{repeats})",
        ["model", "actors", "wall RTFx", "speed-up", "efficiency"],
        rows,
        "efficiency = RTFx(k actors) / (k x RTFx(1 actor)); 1.0 is perfect scaling.",
    )
    return results


def _option_names(spec: ModelSpec) -> set[str]:
    try:
        cls: Any = ASR_BACKENDS.get(spec.backend)
        return set(cls.OPTIONS.declared()) if cls.OPTIONS is not None else set()  # declared options (engine/options.py)
    except Exception:  # noqa: BLE001 - unknown: do not touch options
        return set()


# ----------------------------------------------------------------------------------------------
# 4. scoring throughput
# ----------------------------------------------------------------------------------------------
_FUNCTION_WORDS = (
    "the of and to a in that is was he for it with as his on be at by i had not are but from or have an they which one you were her all "
    "she there would their we him been has when who will more no if out so said what up its about into than them can only other new some "
    "could time these two may then do first any my now such like our over man me even most made after also did many before must through "
    "back years where much your way well down should because each just"
).split()
_NUMBER_WORDS = [
    "three",
    "four",
    "five",
    "six",
    "ten",
    "twenty",
    "thirty",
    "hundred",
    "thousand",
    "million",
    "second",
    "third",
    "percent",
    "dollars",
]


def _content_words() -> list[str]:
    """Content words from the pocketsphinx dictionary (deterministic), or a built-in fallback."""
    try:
        from engine.backends.bundled import pocketsphinx_model_dir

        folder = pocketsphinx_model_dir()
        if folder is not None:
            words = []
            with open(folder / "cmudict-en-us.dict", encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    w = line.split(" ", 1)[0]
                    if w.isalpha() and w.islower() and 3 <= len(w) <= 12:
                        words.append(w)
            return words[::25]
    except Exception as exc:  # noqa: BLE001 - the fallback is fine for timing
        log.info("pocketsphinx dictionary unavailable (%s); synthetic words instead", exc)
    return [f"word{i}" for i in range(4000)]


def synthetic_sweep(n_models: int, n_utts: int, n_speakers: int = 500, seed: int = 0) -> Any:
    """Result rows shaped like a real sweep: mixed-case punctuated references, some digits and
    number words, Zipf word frequencies, 4 slice columns, per-model error rates 2-30 % and three
    output styles (cased+punctuated, lower-case, upper-case) as different model families write."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    content = np.array(_content_words())
    zipf = 1.0 / np.arange(1, len(content) + 1)
    zipf /= zipf.sum()
    refs = []
    for _ in range(n_utts):
        n = int(rng.integers(6, 30))
        words = []
        for _ in range(n):
            u = rng.random()
            if u < 0.45:
                words.append(_FUNCTION_WORDS[int(rng.integers(0, len(_FUNCTION_WORDS)))])
            elif u < 0.46:
                words.append(_NUMBER_WORDS[int(rng.integers(0, len(_NUMBER_WORDS)))])
            else:
                words.append(str(content[int(rng.choice(len(content), p=zipf))]))
        if rng.random() < 0.08:
            words.insert(int(rng.integers(0, n)), str(int(rng.integers(1, 3000))))
        if rng.random() < 0.3:
            words[int(rng.integers(0, n))] += ","
        text = " ".join(words)
        refs.append(text[0].upper() + text[1:] + (". " if rng.random() < 0.85 else "?").strip())
    speaker = np.array([f"spk{j:04d}" for j in rng.integers(0, n_speakers, n_utts)], dtype=object)
    labels = {
        "accent": np.array(["us", "uk", "in", "au", "ng", "ie"], dtype=object)[rng.integers(0, 6, n_utts)],
        "background": np.array(["clean", "noise-10db", "noise-0db", "music-10db"], dtype=object)[rng.integers(0, 4, n_utts)],
        "emotion": np.array(["neutral", "happy", "sad", "angry"], dtype=object)[rng.integers(0, 4, n_utts)],
        "conversation": np.array(["single", "overlap"], dtype=object)[rng.integers(0, 2, n_utts)],
    }
    duration = np.array([0.35 * len(r.split()) for r in refs])
    ids = [f"u{i:06d}" for i in range(n_utts)]
    vocab = list(content[:2000]) + _FUNCTION_WORDS
    frames = []
    for m in range(n_models):
        wer = 0.02 + 0.28 * m / max(1, n_models - 1)
        style = m % 3
        hyps = []
        for ref in refs:
            out = []
            draws = rng.random(len(ref.split()) + 1)
            for w, u in zip(ref.split(), draws):
                if u < wer * 0.6:
                    out.append(vocab[int(u * 1e9) % len(vocab)])
                elif u < wer * 0.8:
                    continue
                elif u < wer:
                    out += [w, vocab[int(u * 1e9) % len(vocab)]]
                else:
                    out.append(w)
            h = " ".join(out)
            hyps.append(h.lower().replace(".", "").replace(",", "").replace("?", "") if style == 1 else h.upper() if style == 2 else h)
        frames.append(
            pd.DataFrame(
                {
                    "utt_id": ids,
                    "model": f"model-{m:02d}",
                    "hyp_raw": hyps,
                    "ref_raw": refs,
                    "duration_s": duration,
                    "infer_s": duration / (20 + m),
                    "error": None,
                    "speaker": speaker,
                    "shard": "s00000",
                    "parent_id": None,
                    **labels,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def score_once(table: Any, n_boot: int = 1000, workers: int | None = None) -> dict[str, float]:
    """Normalize + align + corpus WER/CER with speaker-block bootstrap intervals per model and slice."""
    from audits.asr.scoring import ScoringOptions, score_table, summarize_models
    from audits.normalizing import get_normalizer

    norm = get_normalizer("whisper-english")
    t0 = time.perf_counter()
    scored = score_table(table, norm, workers=workers)
    t1 = time.perf_counter()
    summary = summarize_models(scored, ScoringOptions(n_boot=n_boot), workers=workers)
    t2 = time.perf_counter()
    n_slices = sum(len(m["slices"]) for m in summary.values())
    return {
        "rows": float(len(table)),
        "score_table_s": t1 - t0,
        "summarize_s": t2 - t1,
        "total_s": t2 - t0,
        "pairs_per_s": len(table) / (t2 - t0),
        "models": float(len(summary)),
        "slices": float(n_slices),
    }


def bench_scoring(sweep: tuple[int, int], throughput: tuple[int, int], n_boot: int, workers: int | None) -> dict[str, Any]:
    """Time the 40 x 15,000 sweep and the >= 1,000,000-pair throughput run (fresh caches each)."""
    res: dict[str, Any] = {}
    rows = []
    for label, (n_models, n_utts) in (("sweep", sweep), ("throughput", throughput)):
        if label == "throughput" and throughput == sweep:
            continue
        t0 = time.perf_counter()
        table = synthetic_sweep(n_models, n_utts)
        gen_s = time.perf_counter() - t0
        log.info("scoring %s: %d models x %d utts generated in %.1f s; scoring", label, n_models, n_utts, gen_s)
        r = score_once(table, n_boot, workers)
        r["distinct_strings"] = float(len(set(table["hyp_raw"]) | set(table["ref_raw"])))
        res[label] = r
        rows.append(
            [
                f"{n_models} models x {n_utts} utts",
                int(r["rows"]),
                int(r["distinct_strings"]),
                r["score_table_s"],
                r["summarize_s"],
                r["total_s"],
                f"{r['pairs_per_s']:,.0f}",
            ]
        )
        del table
        gc.collect()
    print_table(
        f"Scoring: Whisper English normalizer, word+char alignment, corpus WER/CER, {n_boot}-replicate speaker-block bootstrap per model "
        f"and slice ({os.cpu_count()} CPUs)",
        ["table", "pairs", "distinct strings", "normalize+align s", "intervals s", "total s", "pairs/s"],
        rows,
        "Target: a 40-model x 15,000-utterance sweep in under 60 s.",
    )
    return res


# ----------------------------------------------------------------------------------------------
# 5. driver memory
# ----------------------------------------------------------------------------------------------
class NullASR(ASRBackend):
    """Costs nothing: answers a fixed word per clip (memory benchmark only)."""

    name = "bench-null"

    def load(self) -> None:
        return None

    def transcribe_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[str]:
        return ["hello" for _ in audios]

    def info(self) -> BackendInfo:
        return BackendInfo(backend=self.name, model_id="null")


def register_null_backend() -> str:
    """Register the null backend in this process (idempotent); returns its registry name."""
    if NullASR.name not in ASR_BACKENDS:
        ASR_BACKENDS.register(NullASR.name)(NullASR)
    return NullASR.name


def streaming_dataset(n_utts: int, shard_size: int = 64, clip_s: float = 1.0) -> Dataset:
    """A dataset that makes each shard when asked (the driver never holds more than one)."""
    from engine.datasets.base import Dataset as DS

    rng = np.random.default_rng(0)
    clip = encode_audio((0.1 * rng.standard_normal(int(clip_s * SAMPLE_RATE))).astype(np.float32), SAMPLE_RATE, "WAV")
    shard_ids = [f"s{i:05d}" for i in range(-(-n_utts // shard_size))]

    def load(sid: str) -> Shard:
        i0 = int(sid[1:]) * shard_size
        utts = tuple(
            Utterance(
                f"u{i:07d}",
                f"reference text number {i}",
                audio_bytes=clip,
                duration_s=clip_s,
                speaker=f"spk{i % 97}",
                labels={"accent": "us"},
            )
            for i in range(i0, min(n_utts, i0 + shard_size))
        )
        return Shard(sid, utts)

    return DS("stream", "memory", "memory", shard_ids, load, None, True, n_utts, "stream")


def _proc_status_mib(field: str) -> float:
    """VmHWM / VmRSS of this process in MiB (VmHWM is per address space, so unlike ru_maxrss it
    does not inherit the peak of the parent that forked us)."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise AuditError(f"/proc/self/status has no {field} (Linux only)")


def memory_child(n_utts: int, out: Path) -> dict[str, float]:
    """Stream ``n_utts`` utterances through the in-process runner with the null backend; peak RSS."""
    register_null_backend()
    base = _proc_status_mib("VmRSS")
    t0 = time.perf_counter()
    if n_utts > 0:
        InProcessRunner(streaming_dataset(n_utts), [ModelSpec("null", "bench-null", {}, 16)], RunStore(out), warmup=0).run()
    return {"n_utts": float(n_utts), "rss_before_mib": base, "peak_rss_mib": _proc_status_mib("VmHWM"), "wall_s": time.perf_counter() - t0}


def bench_memory(sizes: Sequence[int], work: Path, base_n: int = 64) -> dict[str, Any]:
    """Each size in a fresh process (peak RSS is per process). The baseline streams one shard
    (``base_n`` utterances), so one-off costs (imports, Parquet writer) are not charged per utterance."""
    res: dict[str, Any] = {}
    for n in [base_n, *sizes]:
        out = work / f"mem-{n}"
        cmd = [sys.executable, str(Path(__file__).resolve()), "_memory_child", "--n", str(n), "--out", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise AuditError(f"memory child for {n} utterances failed: {proc.stderr[-2000:]}")
        res[n] = json.loads(proc.stdout.strip().splitlines()[-1])
        shutil.rmtree(out, ignore_errors=True)
    base = res[base_n]["peak_rss_mib"]
    rows = [[base_n, base, 0.0, "-", res[base_n]["wall_s"]]]
    for n in sizes:
        grow = res[n]["peak_rss_mib"] - base
        res[n]["per_10k_mib"] = grow / ((n - base_n) / 10_000)
        rows.append([n, res[n]["peak_rss_mib"], grow, res[n]["per_10k_mib"], res[n]["wall_s"]])
    print_table(
        "Driver memory: in-process runner streaming N utterances (null backend, 1 s clips, shards of 64), peak RSS (VmHWM)",
        ["utterances", "peak RSS MiB", f"over {base_n} utts MiB", "MiB per 10,000 utts", "wall s"],
        rows,
        f"process with imports only: {res[base_n]['rss_before_mib']:.1f} MiB",
    )
    return res


# ----------------------------------------------------------------------------------------------
# command line
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sizes:
    n_utts: int
    shard_size: int
    repeats: int
    batch_utts: int
    scaling_utts: int
    sweep: tuple[int, int]
    throughput: tuple[int, int]
    n_boot: int
    memory: tuple[int, ...]


FULL = Sizes(
    n_utts=48,
    shard_size=8,
    repeats=3,
    batch_utts=32,
    scaling_utts=32,
    sweep=(40, 15_000),
    throughput=(40, 25_000),
    n_boot=1000,
    memory=(10_000, 20_000),
)
QUICK = Sizes(
    n_utts=12, shard_size=4, repeats=1, batch_utts=8, scaling_utts=8, sweep=(4, 500), throughput=(4, 500), n_boot=100, memory=(1000,)
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "what", nargs="?", default="all", choices=["all", "overhead", "batching", "scaling", "scoring", "memory", "oasr", "_memory_child"]
    )
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run of every piece (seconds, not minutes)")
    ap.add_argument("--models", default="whisper-tiny.en,pocketsphinx-en-us", help="registry models for overhead and scaling")
    ap.add_argument("--n-utts", type=int, default=None, help="utterances for the engine runs")
    ap.add_argument("--repeats", type=int, default=None, help="alternating repeats; medians are reported")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="scaling: up to this many Ray actors")
    ap.add_argument("--batch-sizes", default="1,4,8,16")
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray rows")
    ap.add_argument("--scoring-workers", type=int, default=None, help="processes for scoring (default: automatic)")
    ap.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--json", type=Path, default=None, help="also write every figure here")
    args = ap.parse_args(argv)
    if args.what == "_memory_child":
        print(json.dumps(memory_child(args.n, args.out)))
        return 0

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    for noisy in ("faster_whisper", "ctranslate2", "engine", "audits"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    sizes = QUICK if args.quick else FULL
    n_utts = args.n_utts or sizes.n_utts
    repeats = args.repeats or sizes.repeats
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    results: dict[str, Any] = {"quick": args.quick, "cpus": os.cpu_count(), "load_avg": os.getloadavg()}
    work = Path(tempfile.mkdtemp(prefix="bench-"))
    steps: dict[str, Callable[[], Any]] = {
        "overhead": lambda: bench_overhead(models, n_utts, sizes.shard_size, repeats, work, use_ray=not args.no_ray),
        "batching": lambda: bench_batching(
            models[0] if models[0].startswith("whisper") else "whisper-tiny.en",
            args.n_utts or sizes.batch_utts,
            [int(b) for b in args.batch_sizes.split(",")],
            repeats,
            work,
        ),
        "scaling": lambda: (
            {"skipped": "--no-ray"}
            if args.no_ray
            else bench_scaling(models, args.n_utts or sizes.scaling_utts, sizes.shard_size, max(1, args.workers), repeats, work)
        ),
        "scoring": lambda: bench_scoring(sizes.sweep, sizes.throughput, sizes.n_boot, args.scoring_workers),
        "memory": lambda: bench_memory(sizes.memory, work),
        "oasr": lambda: _oasr(args.quick, args.n_utts),
    }
    try:
        for name, step in steps.items():
            if args.what in ("all", name):
                t0 = time.perf_counter()
                results[name] = step()
                log.info("%s done in %.0f s", name, time.perf_counter() - t0)
    finally:
        with contextlib.suppress(ImportError):  # Ray is optional: nothing to shut down without it
            import ray

            if ray.is_initialized():
                ray.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    results["load_avg_after"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))
    return 0


def _oasr(quick: bool, n_utts: int | None) -> Any:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import oasr_compare

    return oasr_compare.compare(n_utts=n_utts or (8 if quick else 64), repeats=1 if quick else 3)


if __name__ == "__main__":
    sys.exit(main())
