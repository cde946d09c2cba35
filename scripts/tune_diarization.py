"""Sweep the clustering threshold of the vad-resemblyzer diarizer on a conversation set and print
DER / JER per threshold (embeddings are computed once per recording). Usage:

    python scripts/tune_diarization.py [SET_DIR] [--n N]

SET_DIR defaults to the demo conversation set (built when absent).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np


def main() -> None:
    from audits.conversation.metrics import diarization_scores, pool_diarization
    from audits.conversation.readers import Segment
    from audits.conversation.run import _load_audio, load_conversation_data, resolve_dataset
    from audits.recipes import data_dir
    from engine.backends.diar_baseline import VadResemblyzerDiarizer

    ap = argparse.ArgumentParser()
    ap.add_argument("set_dir", nargs="?", default="builtin:demo-conversation")
    ap.add_argument("--n", type=int, default=None, help="use the first N recordings")
    ap.add_argument("--thresholds", default="0.2,0.25,0.3,0.35,0.4,0.45,0.5,0.6")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    root = resolve_dataset(args.set_dir, data_dir()) if args.set_dir.startswith("builtin:") else Path(args.set_dir)
    data = load_conversation_data(root)
    recs = sorted(data.recordings)[: args.n]
    durations = {r: data.recordings[r]["duration"] for r in recs}
    ref = [s for s in data.turns.segments if s.session_id in recs]
    diar = VadResemblyzerDiarizer()
    diar.load()
    cache = {}
    for r in recs:
        audio = _load_audio(data.recordings[r]["path"])
        cache[r] = audio
    for thr in [float(x) for x in args.thresholds.split(",")]:
        diar.threshold = thr
        hyp = [Segment(r, t.speaker, t.start, t.end) for r in recs for t in diar.diarize(cache[r])]
        scores = diarization_scores(ref, hyp, durations)
        p = pool_diarization(scores.values())
        n_err = np.mean([abs(s.n_hyp_speakers - s.n_ref_speakers) for s in scores.values()])
        print(f"threshold {thr:.2f}: DER {100 * (p.der or 0):.1f} %  JER {100 * (p.jer or 0):.1f} %  "
              f"missed {p.missed_s:.1f} s  FA {p.false_alarm_s:.1f} s  confusion {p.confusion_s:.1f} s  mean |speaker-count error| {n_err:.2f}")


if __name__ == "__main__":
    main()
