#!/usr/bin/env python
"""Engine overhead benchmark: kept as a name, folded into ``scripts/bench.py``.

    python scripts/bench_engine_overhead.py [--n-utts 24] [--models whisper-tiny.en] [--actors 2]

runs ``bench.py overhead`` (bare loop vs in-process runner vs Ray runner with one actor) and, with
``--actors N`` > 1, ``bench.py scaling --workers N``. See the README, Performance section.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="whisper-tiny.en")
    ap.add_argument("--n-utts", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--actors", type=int, default=1, help="also run the scaling benchmark up to this many actors")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    common = ["--models", args.models, "--n-utts", str(args.n_utts), "--repeats", str(args.repeats)] + (["--quick"] if args.quick else [])
    rc = bench.main(["overhead", *common])
    if rc == 0 and args.actors > 1:
        rc = bench.main(["scaling", "--workers", str(args.actors), *common])
    return rc


if __name__ == "__main__":
    sys.exit(main())
