"""A tiny ASR backend: says "tone" once per burst of sound in the clip.

It is a real backend for the engine's purposes (audio in, text out, through the same life cycle
as the built-ins): it frames the clip, marks frames whose RMS is above a threshold, and counts
runs of loud frames separated by at least ``min_gap_s`` of quiet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.backends.base import ASRBackend, BackendInfo
from engine.data import SAMPLE_RATE
from engine.errors import ConfigError


class ToneCounter(ASRBackend):
    """One word "tone" per burst of sound (frames of 20 ms with RMS above ``threshold``)."""

    name = "tone-counter"

    def __init__(self, threshold: float = 0.02, min_gap_s: float = 0.1, **options: Any) -> None:
        if options:
            raise ConfigError(f"tone-counter: unknown option(s) {', '.join(sorted(options))}; known: min_gap_s, threshold")
        super().__init__(threshold=threshold, min_gap_s=min_gap_s)
        self.threshold = float(threshold)
        self.min_gap_s = float(min_gap_s)

    def load(self) -> None:
        """Nothing to load: the backend has no weights."""

    def info(self) -> BackendInfo:
        return BackendInfo(backend=self.name, model_id=f"tone-counter(threshold={self.threshold:g})")

    def transcribe_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[str]:
        return [" ".join(["tone"] * self._bursts(a, sample_rate)) for a in audios]

    def _bursts(self, audio: np.ndarray, sample_rate: int) -> int:
        frame = max(1, int(0.02 * sample_rate))
        n = len(audio) // frame
        if n == 0:
            return 0
        rms = np.sqrt(np.mean(np.square(audio[: n * frame].reshape(n, frame), dtype=np.float64), axis=1))
        loud = rms > self.threshold
        gap_frames = max(1, round(self.min_gap_s / 0.02))
        bursts, quiet_run, in_burst = 0, gap_frames, False
        for is_loud in loud:
            if is_loud:
                if not in_burst and quiet_run >= gap_frames:
                    bursts += 1
                in_burst, quiet_run = True, 0
            else:
                in_burst = False
                quiet_run += 1
        return bursts
