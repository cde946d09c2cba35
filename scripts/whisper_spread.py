"""How much CPU kernels change Whisper's words: the demo run at 1 and 2 threads, int8 and float32.

Each setting loads the model afresh and transcribes every shard through the engine's own path
(``engine.run.runner.process_unit``: same batches, same order); WER is corpus WER of the speech clips
with the demo's normalizer. CPU seconds are this process's user + system time, so other jobs on
the machine do not inflate them (wall-clock RTFx would be).

    python scripts/whisper_spread.py --corpus data/demo-small --models whisper-tiny.en,whisper-base
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from audits.asr.align import error_count
from audits.normalizing import get_normalizer
from engine.backends import build_backend
from engine.data import DecodeOptions
from engine.datasets.base import open_dataset
from engine.model_registry import load_model_registry
from engine.run.runner import decode_shard, process_unit

log = logging.getLogger("whisper_spread")
SETTINGS = ((2, "int8"), (1, "int8"), (2, "float32"), (1, "float32"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", default="data/demo-small")
    parser.add_argument("--models", default="whisper-tiny.en,whisper-base")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    dataset = open_dataset(args.corpus)
    shards = [dataset.load_shard(sid) for sid in dataset.shard_ids]
    decoded = [decode_shard(s, dataset.root, DecodeOptions()) for s in shards]
    norm = get_normalizer("whisper-english")
    registry = load_model_registry()
    out: dict[str, Any] = {}
    for model in args.models.split(","):
        base_spec = registry[model].spec()
        texts: dict[str, dict[str, str]] = {}
        for threads, compute in SETTINGS:
            spec = replace(base_spec, options={**dict(base_spec.options), "cpu_threads": threads, "compute_type": compute})
            backend = build_backend(spec)
            backend.load()
            backend.warmup()
            t0 = time.process_time()
            rows = [r for s, d in zip(shards, decoded) for r in process_unit(backend, model, s, d, spec.batch_size)]
            cpu = time.process_time() - t0
            backend.close()
            audio = sum(float(r.get("duration_s") or 0.0) for r in rows)
            speech = [r for r in rows if r.get("ref_raw")]
            errors = sum(error_count(norm(r["ref_raw"]).split(), norm(r.get("hyp_raw") or "").split()) for r in speech)
            words = sum(len(norm(r["ref_raw"]).split()) for r in speech)
            key = f"{threads} thread{'s' if threads > 1 else ''}, {compute}"
            texts[key] = {r["utt_id"]: r.get("hyp_raw") or "" for r in rows}
            first = next(iter(texts.values()))
            differ = sum(texts[key][u] != first[u] for u in first)
            out.setdefault(model, {})[key] = {
                "wer": round(100 * errors / words, 2),
                "cpu_s": round(cpu, 1),
                "cpu_rtfx": round(audio / cpu, 2),
                "clips_differing_from_first": differ,
            }
            log.info(
                "%-16s %-20s WER %6.2f %%  CPU %6.1f s  CPU-RTFx %5.2f  clips whose text differs from the first setting: %d",
                model,
                key,
                100 * errors / words,
                cpu,
                audio / cpu,
                differ,
            )
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
