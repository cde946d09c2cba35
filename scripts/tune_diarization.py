"""Tune the clustering threshold of the vad-resemblyzer diarizer on a conversation set, with a
held-out test split. Usage:

    python scripts/tune_diarization.py [SET_DIR] [--dev N] [--collar C] [--thresholds a,b,...]

SET_DIR defaults to the demo conversation set (built when absent). Recordings are taken in name
order; the first ``--dev`` are the development split (default: the first half), the rest the
test split. Each recording is embedded once (VAD + d-vectors do not depend on the threshold);
every threshold is then scored on the dev split, the one with the lowest pooled dev DER is
chosen, and the test split is scored at that threshold only (and at the current default, for
comparison). DER / JER use the audit's scorer (pyannote.metrics), with ``--collar`` as in the
recipe (default 0.0, overlap scored).
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def main() -> None:
    from audits.conversation.metrics import diarization_scores, pool_diarization
    from audits.conversation.readers import Segment
    from audits.conversation.run import load_conversation_data, resolve_dataset
    from audits.recipes import data_dir
    from engine.backends.diarization.baseline import DEFAULT_THRESHOLD, RecordingEmbeddings, VadResemblyzerDiarizer
    from engine.keyed.keyed_workers import load_recording as _load_audio

    ap = argparse.ArgumentParser()
    ap.add_argument("set_dir", nargs="?", default="builtin:demo-conversation")
    ap.add_argument("--dev", type=int, default=None, help="number of dev recordings (default: half); the rest is the test split")
    ap.add_argument("--collar", type=float, default=0.0, help="pyannote collar (total width, seconds)")
    ap.add_argument("--thresholds", default="0.2,0.25,0.3,0.325,0.35,0.375,0.4,0.45,0.5,0.6")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    root = resolve_dataset(args.set_dir, data_dir()) if args.set_dir.startswith("builtin:") else Path(args.set_dir)
    data = load_conversation_data(root)
    recs = sorted(data.recordings)
    n_dev = len(recs) // 2 if args.dev is None else args.dev
    if not 0 < n_dev < len(recs):
        raise SystemExit(f"--dev must be between 1 and {len(recs) - 1}, got {n_dev}")
    dev, test = recs[:n_dev], recs[n_dev:]
    diar = VadResemblyzerDiarizer()
    diar.load()
    t0 = time.perf_counter()
    analysed: dict[str, RecordingEmbeddings] = {r: diar.analyse(_load_audio(data.recordings[r]["path"])) for r in recs}
    audio_s = sum(float(data.recordings[r]["duration"]) for r in recs)
    print(
        f"{root}: {len(recs)} recordings ({audio_s / 60:.1f} min), dev {len(dev)} ({dev[0]}..{dev[-1]}), "
        f"test {len(test)} ({test[0]}..{test[-1]}); embedded in {time.perf_counter() - t0:.0f} s; collar {args.collar:g}"
    )

    def score(names: Sequence[str], threshold: float, oracle: bool = False) -> tuple[float, str]:
        diar.threshold = threshold
        ref = [s for s in data.turns.segments if s.session_id in set(names)]
        counts = {r: len({s.speaker for s in ref if s.session_id == r}) for r in names}
        hyp = [Segment(r, t.speaker, t.start, t.end) for r in names for t in diar.turns(analysed[r], counts[r] if oracle else None)]
        durations = {r: float(data.recordings[r]["duration"]) for r in names}
        scores = diarization_scores(ref, hyp, durations, collar=args.collar)
        p = pool_diarization(scores.values())
        n_err = np.mean([abs(s.n_hyp_speakers - s.n_ref_speakers) for s in scores.values()])
        speech = sum(s.end - s.start for s in ref)
        return p.der or 0.0, (
            f"reference speech {speech:6.1f} s  DER {100 * (p.der or 0):5.1f} %  JER {100 * (p.jer or 0):5.1f} %  missed "
            f"{p.missed_s:6.1f} s  "
            f"FA {p.false_alarm_s:5.1f} s  confusion {p.confusion_s:6.1f} s  mean |speaker-count error| {n_err:.2f}"
        )

    results: dict[float, float] = {}
    print("dev split:")
    for thr in [float(x) for x in args.thresholds.split(",")]:
        results[thr], line = score(dev, thr)
        print(f"  threshold {thr:.3f}: {line}")
    best = min(results, key=lambda t: (results[t], abs(t - DEFAULT_THRESHOLD)))
    print(f"chosen on dev: {best:.3f} (current default {DEFAULT_THRESHOLD:.3f})")
    print("test split (held out):")
    for thr in dict.fromkeys([best, DEFAULT_THRESHOLD]):
        print(f"  threshold {thr:.3f}: {score(test, thr)[1]}")
    print(f"  oracle speaker count: {score(test, best, oracle=True)[1]}")


if __name__ == "__main__":
    main()
