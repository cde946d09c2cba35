"""Speed and WER of PocketSphinx search settings on the demo corpus, side by side.

Each preset decodes the same clips in this process; the time is this process's CPU time (user +
system), so other jobs on the machine do not inflate it. RTFx = audio seconds / CPU seconds.

    python scripts/pocketsphinx_speed.py --corpus data/demo --every 8
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import time
from pathlib import Path
from typing import Any

import soundfile as sf

from audits.asr.align import error_count
from audits.normalizing import get_normalizer
from engine.backends.asr.pocketsphinx import FAST_SEARCH, PocketsphinxBackend
from engine.datasets.base import open_dataset

log = logging.getLogger("pocketsphinx_speed")

PRESETS: dict[str, dict[str, Any]] = {
    "library defaults": {"search": "accurate"},
    "no fwdflat/bestpath passes": {"search": "accurate", "fwdflat": False, "bestpath": False},
    "fast (the engine's preset)": {"search": "fast"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", default="data/demo")
    parser.add_argument("--every", type=int, default=8, help="use every N-th clip")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    dataset = open_dataset(args.corpus)  # an existing corpus (data/demo: `audit corpus demo`)
    utts = [u for sid in dataset.shard_ids for u in dataset.load_shard(sid).utterances][:: args.every]
    norm = get_normalizer("whisper-english")
    clips = [sf.read(io.BytesIO(u.audio_bytes or b""), dtype="float32")[0] for u in utts]
    audio_s = sum(len(c) for c in clips) / 16000
    out: dict[str, Any] = {"clips": len(clips), "audio_s": audio_s, "fast_search": FAST_SEARCH, "presets": {}}
    for name, options in PRESETS.items():
        backend = PocketsphinxBackend(**options)
        backend.load()
        by_bg: dict[str, list[float]] = {}
        errors = words = 0
        t_all = 0.0
        for u, clip in zip(utts, clips):
            t0 = time.process_time()
            (hyp,) = backend.transcribe_batch([clip])
            dt = time.process_time() - t0
            t_all += dt
            bg = u.labels.get("background", "?")
            acc = by_bg.setdefault(bg, [0.0, 0.0])
            acc[0] += len(clip) / 16000
            acc[1] += dt
            if u.reference:
                errors += error_count(norm(u.reference).split(), norm(hyp).split())
                words += len(norm(u.reference).split())
        row = {
            "options": options,
            "cpu_s": round(t_all, 2),
            "rtfx": round(audio_s / t_all, 2),
            "wer": round(100 * errors / max(1, words), 1),
            "rtfx_by_background": {k: round(a / t, 2) for k, (a, t) in sorted(by_bg.items())},
        }
        out["presets"][name] = row
        log.info("%-30s WER %5.1f %%  RTFx %5.2f (CPU)  by background %s", name, row["wer"], row["rtfx"], row["rtfx_by_background"])
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
