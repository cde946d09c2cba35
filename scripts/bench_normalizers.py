"""Normalizer speed, side by side in one run: per-text cost on real and generated texts, and growth on adversarial text.

Why: scoring a sweep normalizes hundreds of thousands of distinct strings, and a normalizer
that is quadratic on some text turns one bad reference into minutes. This prints, for
``whisper-english`` (the fast path and the ``whisper-normalizer`` package's original) and
``open-asr-leaderboard``: microseconds per text on the texts of
tests/fixtures/open-asr-leaderboard-normalizer (VoxPopuli texts alone, and all), and the cost of
texts 10x longer on inputs that make regular-expression normalizers quadratic.

CLI::

    python scripts/bench_normalizers.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Callable
from pathlib import Path

from audits.normalizing import get_normalizer
from normalizers import fast_normalizer
from scripts.benchlib import print_table

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "open-asr-leaderboard-normalizer" / "cases.jsonl"
ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "unclosed <": lambda k: "a" + "<" * k,
    "unclosed (": lambda k: " (" * k,
    "spaces before a late '": lambda k: " " * k + "x'",
    "digit words": lambda k: "one " * k,
}


def _best(fn: Callable[[str], str], texts: list[str], repeat: int) -> float:
    best = float("inf")
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            t0 = time.perf_counter()
            for t in texts:
                fn(t)
            best = min(best, time.perf_counter() - t0)
    finally:
        gc.enable()
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="best of this many passes")
    args = ap.parse_args()
    from whisper_normalizer.english import EnglishTextNormalizer

    rows = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").split("\n") if line]
    texts = {
        "VoxPopuli texts": [r["input"] for r in rows if r["category"] == "voxpopuli"],
        "all fixture texts but the pathological": [r["input"] for r in rows if r["category"] != "pathological"],
    }
    normalizers: dict[str, Callable[[str], str]] = {
        "whisper-english (whisper-normalizer's original)": EnglishTextNormalizer(),
        "whisper-english": fast_normalizer(get_normalizer("whisper-english")),
        "open-asr-leaderboard": fast_normalizer(get_normalizer("open-asr-leaderboard")),
    }
    table = []
    for name, fn in normalizers.items():
        table.append([name, *(f"{1e6 * _best(fn, t, args.repeat) / len(t):.1f}" for t in texts.values())])
    print_table("Microseconds per text (best of %d passes, one process)" % args.repeat, ["normalizer", *texts], table)
    growth = []
    for name in ("whisper-english", "open-asr-leaderboard"):
        fn = normalizers[name]
        cells = []
        for make in ADVERSARIAL.values():
            small, large = _best(fn, [make(2000)], args.repeat), _best(fn, [make(20000)], args.repeat)
            cells.append(f"{1e3 * large:.1f} ms, {large / small:.1f}x")
        growth.append([name, *cells])
    print_table(
        "Cost of the 20,000-unit text, and its ratio to the 2,000-unit one (10x means linear)", ["normalizer", *ADVERSARIAL], growth
    )


if __name__ == "__main__":
    main()
