"""What a clip's own sampler costs: Whisper's temperature fallback before and after it, side by side.

Before, every sampled decode drew from the loaded CTranslate2 model's one generator (so a clip's
fallback words depended on everything sampled before it in the process) and a clip that fell back
was encoded a second time. Now each clip that falls back gets a fresh CTranslate2 instance seeded
from the clip (``engine/backends/asr/faster_whisper.py``) and reuses its row of the batch's
encoder output. This script puts the previous design back for the "before" passes only, and
decodes the corpus through the engine's own path (``engine.run.runner.process_unit``: same shards,
batches and order) with both designs, alternating, on one loaded model per Whisper entry.

It prints, per model and design, the median over rounds of CPU RTFx (audio seconds over this
process's user + system seconds, which other jobs on the machine do not inflate), wall RTFx,
the clips that fell back, and after/before ratios.

    python scripts/fallback_cost.py --corpus data/demo-small --models whisper-tiny.en,whisper-base --rounds 2
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from engine.backends import build_backend
from engine.backends.asr import faster_whisper as fw
from engine.data import DecodeOptions
from engine.datasets.base import open_dataset
from engine.model_registry import load_model_registry
from engine.run.runner import decode_shard, process_unit

log = logging.getLogger("fallback_cost")


@contextmanager
def previous_design() -> Iterator[None]:
    """Sampled decodes on the loaded model (one generator for the process), fallback clips encoded again."""
    generate, row = fw._ClipSampler.generate, fw.FasterWhisperBackend._encoder_row

    def shared_generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self._model.generate(*args, **kwargs)

    def encode_again(self: Any, encoder_output: Any, features: Any, i: int) -> Any:
        return self._require_model().encode(features[i][None])

    fw._ClipSampler.generate = shared_generate  # type: ignore[method-assign]
    fw.FasterWhisperBackend._encoder_row = encode_again  # type: ignore[method-assign]
    try:
        yield
    finally:
        fw._ClipSampler.generate = generate  # type: ignore[method-assign]
        fw.FasterWhisperBackend._encoder_row = row  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="data/demo-small")
    parser.add_argument("--models", default="whisper-tiny.en,whisper-base")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    dataset = open_dataset(args.corpus)
    shards = [dataset.load_shard(sid) for sid in dataset.shard_ids]
    decoded = [decode_shard(s, dataset.root, DecodeOptions()) for s in shards]
    audio_s = sum(d.duration_s for ds in decoded for d in ds if d.error is None)
    registry = load_model_registry()
    out: dict[str, Any] = {"corpus": args.corpus, "audio_s": audio_s, "rounds": args.rounds, "models": {}}
    for model in args.models.split(","):
        spec = registry[model].spec()
        backend = build_backend(spec)
        backend.load()
        backend.warmup()
        runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
        for r in range(args.rounds):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for design in order:
                built = backend.sampler_instances  # type: ignore[attr-defined]
                fell_back = {"n": 0}
                needs = backend._needs_fallback  # type: ignore[attr-defined]

                def counting(cand: Any, needs: Any = needs, fell_back: dict[str, int] = fell_back) -> bool:
                    result = bool(needs(cand))
                    fell_back["n"] += result and cand.temperature == 0.0
                    return result

                backend._needs_fallback = counting  # type: ignore[attr-defined]
                cpu, wall = time.process_time(), time.perf_counter()
                with previous_design() if design == "before" else _nothing():
                    for s, d in zip(shards, decoded):
                        process_unit(backend, model, s, d, spec.batch_size)
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                del backend._needs_fallback  # type: ignore[attr-defined]
                run = {
                    "cpu_s": cpu,
                    "wall_s": wall,
                    "cpu_rtfx": audio_s / cpu,
                    "wall_rtfx": audio_s / wall,
                    "clips_fell_back": fell_back["n"],
                    "sampler_instances": backend.sampler_instances - built,  # type: ignore[attr-defined]
                }
                runs[design].append(run)
                log.info(
                    "%s round %d %s: CPU RTFx %.2f, wall RTFx %.2f, %d clips fell back",
                    model,
                    r + 1,
                    design,
                    run["cpu_rtfx"],
                    run["wall_rtfx"],
                    run["clips_fell_back"],
                )
        backend.close()
        med = {d: {k: statistics.median(x[k] for x in v) for k in v[0]} for d, v in runs.items()}
        med["ratio"] = {k: med["after"][k] / med["before"][k] for k in ("cpu_rtfx", "wall_rtfx")}
        out["models"][model] = {"median": med, "runs": runs}
    print(f"{'model':18} {'design':7} {'CPU RTFx':>9} {'wall RTFx':>10} {'fell back':>10}")
    for model, res in out["models"].items():
        for design in ("before", "after"):
            m = res["median"][design]
            print(f"{model:18} {design:7} {m['cpu_rtfx']:9.2f} {m['wall_rtfx']:10.2f} {int(m['clips_fell_back']):10d}")
        print(f"{model:18} {'ratio':7} {res['median']['ratio']['cpu_rtfx']:9.3f} {res['median']['ratio']['wall_rtfx']:10.3f}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


@contextmanager
def _nothing() -> Iterator[None]:
    yield


if __name__ == "__main__":
    main()
