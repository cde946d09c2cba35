"""Signal transforms that turn clean TTS speech into the demo corpus's slice conditions.

Everything here is a pure function of its inputs and a seeded ``numpy.random.Generator``, so the
corpus is reproducible. Levels follow one rule, used everywhere:

* the *active power* of speech is the mean square over the 20 ms frames whose power is within
  ``ACTIVE_FLOOR_DB`` (40 dB) of the loudest frame, so leading/trailing silence and pauses do not
  dilute it (TTS output has digital silence between words, which makes this rule unambiguous);
* a background (noise or music) is scaled so that
  ``SNR_dB = 10*log10(active_power(speech) / mean_square(background over the whole clip))``;
* a second talker is scaled relative to the primary talker by the same active-power rule (both
  are speech), ``level_db = 10*log10(active_power(second) / active_power(primary))``.

Emotion is *simulated*: a prosody transform (f0 median and range, speaking rate, energy) of a
neutral synthetic rendition, not acted or natural emotional speech. The parameters below follow the usual acoustic correlates
(high arousal: higher and faster and louder; low arousal: lower, slower, quieter).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from engine.errors import AudioError

ACTIVE_FLOOR_DB = 40.0
FRAME_S = 0.02
TARGET_LEVEL_DBFS = -26.0  # active speech level of every clean TTS clip before the emotion gain
PEAK_LIMIT = 0.98


# ----------------------------------------------------------------------------- prosody / emotion


@dataclass(frozen=True)
class Prosody:
    """A simulated-emotion prosody change: f0 factor, f0-range factor, speaking-rate factor, gain."""

    pitch: float = 1.0
    rate: float = 1.0
    gain_db: float = 0.0
    pitch_range: float = 1.0

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    @property
    def is_identity(self) -> bool:
        return self.pitch == 1.0 and self.rate == 1.0 and self.pitch_range == 1.0


EMOTIONS: dict[str, Prosody] = {
    "neutral": Prosody(1.0, 1.0, 0.0),
    "positive-high-arousal": Prosody(pitch=1.25, rate=1.12, gain_db=5.0, pitch_range=1.4),
    "negative-high-arousal": Prosody(pitch=1.12, rate=1.22, gain_db=7.0, pitch_range=1.2),
    "negative-low-arousal": Prosody(pitch=0.85, rate=0.80, gain_db=-7.0, pitch_range=0.6),
}

PSOLA_PITCH_FLOOR_HZ, PSOLA_PITCH_CEILING_HZ = 60.0, 600.0


def render_emotion(x: np.ndarray, sr: int, prosody: Prosody, seed: int = 0) -> tuple[np.ndarray, dict[str, Any]]:
    """Apply ``prosody`` to a neutral rendition and keep the voice: return (samples, derivation).

    Why PSOLA: resampling (or a TTS engine's own pitch control on some voices) moves the formants
    with f0, which turns one speaker into another; Praat's pitch-synchronous overlap-add changes
    f0 median, f0 range and duration while the spectral envelope stays (formant shift ratio 1).
    The gain is applied by the caller, after level normalization. Praat's overlap-add draws random
    numbers for voiceless stretches, so its generator is seeded with ``seed`` for the call (the same
    seed gives the same samples) and reseeded unpredictably afterwards.
    """
    arr = _as_float(x)
    if prosody.is_identity:
        return arr.astype(np.float32), {"method": "none"}
    try:
        import parselmouth
        from parselmouth.praat import call
    except ImportError as exc:  # pragma: no cover - declared dependency
        from engine.backends.availability import install_hint

        raise AudioError(
            f"simulated emotions need the Python package 'praat-parselmouth', which the 'demo' extra installs: {install_hint('demo')}"
        ) from exc
    sound = parselmouth.Sound(arr, sampling_frequency=float(sr))
    pitch = sound.to_pitch(pitch_floor=PSOLA_PITCH_FLOOR_HZ, pitch_ceiling=PSOLA_PITCH_CEILING_HZ)
    median = call(pitch, "Get quantile", 0.0, 0.0, 0.5, "Hertz")
    if not math.isfinite(median) or median <= 0:
        raise AudioError("cannot simulate an emotion: no voiced frames found in the neutral rendition")
    parselmouth.praat.run(f"random_initializeWithSeedUnsafelyButPredictably ({int(seed)})")
    try:
        out = call(
            sound,
            "Change gender",
            PSOLA_PITCH_FLOOR_HZ,
            PSOLA_PITCH_CEILING_HZ,
            1.0,
            float(median * prosody.pitch),
            float(prosody.pitch_range),
            float(1.0 / prosody.rate),
        )
    finally:
        parselmouth.praat.run("random_initializeSafelyAndUnpredictably ()")
    y = np.asarray(out.values[0], dtype=np.float32)
    info = {
        "method": "praat-psola-change-gender",
        "praat_version": str(parselmouth.PRAAT_VERSION),
        "formant_shift_ratio": 1.0,
        "f0_median_hz_before": round(float(median), 3),
        "f0_median_hz_target": round(float(median * prosody.pitch), 3),
        "pitch_range_factor": prosody.pitch_range,
        "duration_factor": round(1.0 / prosody.rate, 6),
        "seed": int(seed),
    }
    return y, info


# ----------------------------------------------------------------------------- levels


def _as_float(x: np.ndarray) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise AudioError(f"expected mono 1-D samples, got shape {arr.shape}")
    return arr


def frame_powers(x: np.ndarray, sr: int, frame_s: float = FRAME_S) -> np.ndarray:
    """Mean square per non-overlapping frame (the last partial frame is kept)."""
    arr = _as_float(x)
    n = max(1, round(frame_s * sr))
    pad = (-len(arr)) % n
    if pad:
        arr = np.concatenate([arr, np.zeros(pad)])
    if len(arr) == 0:
        return np.zeros(0)
    return np.asarray((arr.reshape(-1, n) ** 2).mean(axis=1), dtype=np.float64)


def active_mask(x: np.ndarray, sr: int, floor_db: float = ACTIVE_FLOOR_DB) -> np.ndarray:
    """Boolean per frame: power within ``floor_db`` of the loudest frame (and not digital zero)."""
    p = frame_powers(x, sr)
    if p.size == 0 or p.max() <= 0:
        return np.zeros(p.shape, dtype=bool)
    return np.asarray((p >= p.max() * 10 ** (-floor_db / 10)) & (p > 0), dtype=bool)


def active_power(x: np.ndarray, sr: int, floor_db: float = ACTIVE_FLOOR_DB) -> float:
    """Mean square over active frames (see module docstring); raises on silent input."""
    p = frame_powers(x, sr)
    mask = active_mask(x, sr, floor_db)
    if not mask.any():
        raise AudioError("signal is silent: cannot measure its active speech level")
    return float(p[mask].mean())


def power_db(power: float) -> float:
    return 10.0 * math.log10(max(power, 1e-20))


def normalize_level(x: np.ndarray, sr: int, target_dbfs: float = TARGET_LEVEL_DBFS) -> tuple[np.ndarray, float]:
    """Scale so the active level is ``target_dbfs`` (dB re full-scale square wave); return gain dB."""
    gain_db = target_dbfs - power_db(active_power(x, sr))
    return apply_gain_db(x, gain_db), gain_db


def apply_gain_db(x: np.ndarray, gain_db: float) -> np.ndarray:
    return (_as_float(x) * 10 ** (gain_db / 20)).astype(np.float32)


def trim_silence(x: np.ndarray, sr: int, margin_s: float = 0.05, floor_db: float = 50.0) -> np.ndarray:
    """Cut leading/trailing frames more than ``floor_db`` below the loudest, keeping a margin."""
    mask = active_mask(x, sr, floor_db)
    if not mask.any():
        raise AudioError("TTS produced silence: nothing to trim to")
    n = max(1, round(FRAME_S * sr))
    idx = np.flatnonzero(mask)
    start = max(0, idx[0] * n - int(margin_s * sr))
    end = min(len(x), (idx[-1] + 1) * n + int(margin_s * sr))
    return np.asarray(x[start:end], dtype=np.float32)


def pad(x: np.ndarray, sr: int, lead_s: float, tail_s: float) -> np.ndarray:
    return np.concatenate([np.zeros(round(lead_s * sr), np.float32), np.asarray(x, np.float32), np.zeros(round(tail_s * sr), np.float32)])


def peak_protect(x: np.ndarray, limit: float = PEAK_LIMIT) -> tuple[np.ndarray, float]:
    """Scale the whole clip down (never up) so its peak is at most ``limit``; ratios are kept."""
    peak = float(np.max(np.abs(x))) if len(x) else 0.0
    scale = 1.0 if peak <= limit else limit / peak
    return (np.asarray(x, np.float64) * scale).astype(np.float32), scale


# ----------------------------------------------------------------------------- backgrounds


def pink_noise(n: int, rng: np.random.Generator) -> np.ndarray:
    """Unit-RMS pink (1/f power) noise, flat below 20 Hz-equivalent bins, no DC."""
    white = rng.standard_normal(n)
    spec = np.fft.rfft(white)
    k = np.arange(spec.size, dtype=np.float64)
    k[0] = 1.0
    shaped = spec / np.sqrt(np.maximum(k, max(1.0, spec.size / 400.0)))
    shaped[0] = 0.0
    y = np.fft.irfft(shaped, n)
    return np.asarray(y / np.sqrt(np.mean(y**2)), dtype=np.float32)


_PROGRESSIONS: tuple[tuple[tuple[int, str], ...], ...] = (
    ((0, "maj"), (7, "maj"), (9, "min"), (5, "maj")),  # I V vi IV
    ((9, "min"), (5, "maj"), (0, "maj"), (7, "maj")),  # vi IV I V
    ((0, "maj"), (5, "maj"), (7, "maj"), (0, "maj")),  # I IV V I
    ((2, "min"), (7, "maj"), (0, "maj"), (9, "min")),  # ii V I vi
)
_TRIADS = {"maj": (0, 4, 7), "min": (0, 3, 7)}


def _note(freq: float, dur_s: float, sr: int, decay_s: float, rng: np.random.Generator) -> np.ndarray:
    """A plucked/struck tone: five decaying harmonics, 10 ms attack, exponential decay."""
    t = np.arange(int(dur_s * sr)) / sr
    tone = np.zeros_like(t)
    for h in range(1, 6):
        if freq * h < sr / 2:
            tone += (0.55**h) * np.sin(2 * np.pi * freq * h * t + rng.uniform(0, 2 * np.pi))
    env = np.exp(-t / decay_s) * np.minimum(1.0, t / 0.01)
    release = min(len(t), int(0.03 * sr))
    if release:
        env[-release:] *= np.linspace(1.0, 0.0, release)
    return np.asarray(tone * env, dtype=np.float64)


def synth_music(n: int, sr: int, rng: np.random.Generator) -> tuple[np.ndarray, dict[str, Any]]:
    """Unit-RMS music-like background: a chord progression, bass line and melody notes.

    Tempo, key and progression are drawn from ``rng``; the description is returned for the
    derivation record.
    """
    bpm = float(rng.uniform(84, 126))
    beat = 60.0 / bpm
    root = int(rng.integers(45, 57))  # MIDI A2..G#3
    prog_i = int(rng.integers(len(_PROGRESSIONS)))
    prog = _PROGRESSIONS[prog_i]
    out = np.zeros(n + int(4 * beat * sr) + sr)
    pos, chord_i = 0, 0
    while pos < n:
        offset, quality = prog[chord_i % len(prog)]
        chord_len = 2 * beat
        base = root + offset
        for iv in _TRIADS[quality]:
            f = 440.0 * 2 ** ((base + 12 + iv - 69) / 12)
            seg = 0.35 * _note(f, chord_len, sr, decay_s=0.8, rng=rng)
            out[pos : pos + len(seg)] += seg
        fb = 440.0 * 2 ** ((base - 12 - 69) / 12)
        seg = 0.6 * _note(fb, chord_len, sr, decay_s=0.5, rng=rng)
        out[pos : pos + len(seg)] += seg
        for b in range(2):
            iv = _TRIADS[quality][int(rng.integers(3))]
            fm = 440.0 * 2 ** ((base + 24 + iv - 69) / 12)
            start = pos + int(b * beat * sr)
            seg = 0.3 * _note(fm, beat, sr, decay_s=0.25, rng=rng)
            out[start : start + len(seg)] += seg
        pos += round(chord_len * sr)
        chord_i += 1
    y = out[:n]
    rms = float(np.sqrt(np.mean(y**2))) if n else 0.0
    if rms <= 0:
        raise AudioError("music synthesis produced silence")
    info = {"type": "synth-music", "bpm": round(bpm, 2), "root_midi": root, "progression": [list(c) for c in prog]}
    return (y / rms).astype(np.float32), info


def fit_length(x: np.ndarray, n: int) -> np.ndarray:
    """Tile (or cut) ``x`` to exactly ``n`` samples."""
    arr = np.asarray(x, np.float32)
    if len(arr) == 0:
        raise AudioError("cannot fit an empty background to a clip")
    reps = -(-n // len(arr))
    return np.tile(arr, reps)[:n]


def mix_at_snr(
    speech: np.ndarray,
    background: np.ndarray,
    snr_db: float,
    sr: int,
    speech_power: float | None = None,
) -> tuple[np.ndarray, dict[str, float]]:
    """Add ``background`` (tiled/cut to the clip) so that SNR equals ``snr_db`` exactly.

    ``speech_power`` defaults to the active power of ``speech``; pass the primary talker's power
    when ``speech`` already holds a second talker that must not count as signal.
    Returns the float32 mix (not peak-limited) and the levels used.
    """
    s = _as_float(speech)
    p_s = active_power(s, sr) if speech_power is None else float(speech_power)
    bg = fit_length(background, len(s)).astype(np.float64)
    p_b = float(np.mean(bg**2))
    if p_b <= 0:
        raise AudioError("background is silent: cannot mix it at an SNR")
    gain = math.sqrt(p_s / (p_b * 10 ** (snr_db / 10)))
    mix = s + gain * bg
    info = {
        "snr_db": float(snr_db),
        "speech_active_power_db": round(power_db(p_s), 4),
        "background_power_db": round(power_db(p_b * gain**2), 4),
        "background_gain_db": round(20 * math.log10(gain), 4),
    }
    return mix.astype(np.float32), info


def measured_snr_db(speech: np.ndarray, mix: np.ndarray, sr: int) -> float:
    """SNR of ``mix`` against its clean ``speech`` under the module's rule (for checks and tests)."""
    s = _as_float(speech)
    bg = _as_float(mix)[: len(s)] - s
    return power_db(active_power(s, sr)) - power_db(float(np.mean(bg**2)))


def overlay_talker(
    primary: np.ndarray,
    secondary: np.ndarray,
    sr: int,
    offset_s: float,
    level_db: float,
    primary_power: float | None = None,
) -> tuple[np.ndarray, dict[str, float]]:
    """Add a second talker starting at ``offset_s``, ``level_db`` relative to the primary talker.

    The result is as long as needed to hold both talkers.
    """
    p = _as_float(primary)
    q = _as_float(secondary)
    p_p = active_power(p, sr) if primary_power is None else float(primary_power)
    gain = math.sqrt(p_p * 10 ** (level_db / 10) / active_power(q, sr))
    start = max(0, round(offset_s * sr))
    out = np.zeros(max(len(p), start + len(q)))
    out[: len(p)] += p
    out[start : start + len(q)] += gain * q
    return out.astype(np.float32), {
        "offset_s": round(start / sr, 4),
        "level_db": float(level_db),
        "secondary_gain_db": round(20 * math.log10(gain), 4),
    }


def fade_out(x: np.ndarray, sr: int, fade_s: float = 0.05) -> np.ndarray:
    y = np.asarray(x, np.float32).copy()
    n = min(len(y), int(fade_s * sr))
    if n:
        y[-n:] *= np.linspace(1.0, 0.0, n, dtype=np.float32)
    return y


def speech_span(x: np.ndarray, sr: int, floor_db: float = ACTIVE_FLOOR_DB) -> tuple[float, float]:
    """(start_s, end_s) of the first and last active frame."""
    mask = active_mask(x, sr, floor_db)
    if not mask.any():
        raise AudioError("signal is silent: no speech span")
    idx = np.flatnonzero(mask)
    return idx[0] * FRAME_S, (idx[-1] + 1) * FRAME_S
