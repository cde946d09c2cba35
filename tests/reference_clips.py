"""The clips the reference tests feed a loader and its reference procedure: speech-like signals
(harmonics under a syllable-rate envelope, plus noise), two inside one window of the model and two
that reach into the next, on the 16-bit grid so that a WAV round trip (Voxtral's processor and the
leaderboard's NeMo script write one) changes nothing."""

from __future__ import annotations

import numpy as np


def lengths(window: float) -> tuple[float, ...]:
    """Clip lengths in seconds: two inside one ``window`` of the model, two that reach into the next."""
    return (1.3, 2.7, window + 1.4, window + 4.0)


def clips(window: float = 30.0, sample_rate: int = 16000) -> list[np.ndarray]:
    """Four float32 clips of ``lengths(window)``; the same every call."""
    rng = np.random.default_rng(7)
    out = []
    for k, seconds in enumerate(lengths(window)):
        t = np.arange(int(seconds * sample_rate)) / sample_rate
        f0 = 110 + 30 * k
        voice = sum(np.sin(2 * np.pi * f0 * h * t) / h for h in range(1, 6))
        envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 3.5 * t + k)
        signal = 0.2 * voice * envelope + 0.02 * rng.standard_normal(t.size)
        out.append((np.round(np.clip(signal, -1, 1) * 32767) / 32768).astype(np.float32))
    return out
