"""Calibrate the SpeechEQ prosody-contrast thresholds on within-voice rendition pairs.

Every pair is one voice reading one sentence twice, so voice and text cancel and only delivery
differs:

* null pairs: a neutral rendition against the same voice at a small, natural-sized variation
  (speed +-5 %, pitch +-3 espeak units, amplitude +-10 %): what two neutral readings differ by;
* emotion pairs: the neutral rendition against renditions with a clear prosody change
  (aroused: higher, faster, louder; calm: lower, slower, softer; stressed: louder, higher).

Prints, per dimension, the null pairs' 50th/95th percentile gap next to the threshold, and the
share of null pairs that pass (score >= 4; should be near 0) and of emotion pairs that pass
(should be near 1). Needs espeak-ng. Usage:

    python scripts/calibrate_prosody_contrast.py
"""

from __future__ import annotations

import itertools
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from audits.emotion.prosody_contrast import FEATURES, SpeechEQRules, contrast_score
from engine.backends.ser.prosody import speecheq_descriptors

SR = 16000
VOICES = ("en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en+f3", "en-us+m3")
SENTENCES = (
    "The committee will publish its findings before the end of the month.",
    "Please bring the blue folder to the meeting room on the second floor.",
    "We walked along the river until the sun went down behind the hills.",
    "Nobody expected the train to arrive so early on a Sunday morning.",
    "She said the results were better than anyone had hoped for.",
    "Turn left at the bakery and the station is right in front of you.",
)
NEUTRAL = ("-p", "50", "-s", "165", "-a", "100")
NULL = (
    ("-p", "50", "-s", "173", "-a", "100"),
    ("-p", "50", "-s", "157", "-a", "100"),
    ("-p", "53", "-s", "165", "-a", "110"),
    ("-p", "47", "-s", "165", "-a", "90"),
)
EMOTION = (("-p", "80", "-s", "215", "-a", "170"), ("-p", "25", "-s", "125", "-a", "55"), ("-p", "70", "-s", "175", "-a", "180"))


def render(tmp: Path, voice: str, text: str, args: tuple[str, ...]) -> np.ndarray:
    path = tmp / "x.wav"
    subprocess.run(["espeak-ng", "-v", voice, "-w", str(path), *args, text], check=True, capture_output=True)
    x, sr = sf.read(path, dtype="float32")
    return soxr.resample(x, sr, SR).astype(np.float32)


def main() -> None:
    rules = SpeechEQRules()
    null_gaps: dict[str, list[float]] = {f: [] for f in FEATURES}
    null_scores: list[int] = []
    emo_scores: list[int] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for voice, text in itertools.product(VOICES, SENTENCES):
            base = speecheq_descriptors(render(tmp, voice, text, NEUTRAL))
            for args in NULL:
                p = contrast_score(base, speecheq_descriptors(render(tmp, voice, text, args)), rules)
                null_scores.append(p.score)
                for f in FEATURES:
                    if p.gaps[f] is not None:
                        null_gaps[f].append(float(p.gaps[f]))  # type: ignore[arg-type]
            for args in EMOTION:
                emo_scores.append(contrast_score(base, speecheq_descriptors(render(tmp, voice, text, args)), rules).score)
    thresholds = {
        "pitch": rules.pitch_st_1,
        "rate": rules.zcr_rel_1,
        "centroid": rules.centroid_rel,
        "energy": rules.energy_db,
        "mfcc": rules.mfcc_abs,
        "duration": rules.duration_rel,
    }
    print(f"{len(null_scores)} null pairs, {len(emo_scores)} emotion pairs, {len(VOICES)} voices x {len(SENTENCES)} sentences")
    print(f"{'dimension':<10} {'null p50':>9} {'null p95':>9} {'threshold (1 pt)':>17}")
    for f in FEATURES:
        g = np.asarray(null_gaps[f])
        print(f"{f:<10} {np.percentile(g, 50):9.3f} {np.percentile(g, 95):9.3f} {thresholds[f]:17.3f}")
    ns, es = np.asarray(null_scores), np.asarray(emo_scores)
    print(f"null pairs:    mean score {ns.mean():.2f}, pass (>= 4) {np.mean(ns >= 4):.3f}")
    print(f"emotion pairs: mean score {es.mean():.2f}, pass (>= 4) {np.mean(es >= 4):.3f}")


if __name__ == "__main__":
    main()
