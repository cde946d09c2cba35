"""One perturbation of one clip: mono float32 samples in, samples and a JSON-able description out.

Every function is deterministic for its ``rng`` (and ffmpeg's encoders are run bit-exact,
single-threaded), so a seed gives the same derived bytes on every run. Additive noise uses the
demo corpus's SNR rule (``engine.corpus.transforms.mix_at_snr``: active speech power against
background power), pink noise and synthetic music from the same module. Recorded noise and
measured room responses come from ``engine.perturb.banks`` and are applied here
(``mix_recorded``, ``convolve_rir``) by the same rules as the generated ones.
"""

from __future__ import annotations

import io
import math
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.corpus import transforms as tf
from engine.errors import AudioError

NOISES = ("white", "pink", "babble", "music")
MU = 255


def _peak_safe(x: np.ndarray) -> np.ndarray:
    y, _ = tf.peak_protect(np.asarray(x, dtype=np.float32))
    return np.asarray(y, dtype=np.float32)


def add_noise(
    x: np.ndarray, sr: int, noise: str, snr_db: float, rng: np.random.Generator, others: Sequence[np.ndarray] = ()
) -> tuple[np.ndarray, dict[str, Any]]:
    """``x`` plus white, pink, babble (``others``: other clips of the dataset, summed) or music noise at ``snr_db``."""
    n = len(x)
    info: dict[str, Any] = {"noise": noise}
    if noise == "white":
        bg = rng.standard_normal(n).astype(np.float32)
    elif noise == "pink":
        bg = tf.pink_noise(n, rng)
    elif noise == "music":
        bg, minfo = tf.synth_music(n, sr, rng)
        info["music"] = minfo
    elif noise == "babble":
        if not others:
            raise AudioError("babble needs other clips of the dataset to build it from")
        bg = np.zeros(n, dtype=np.float64)
        for o in others:  # each talker at unit active power, each starting at a random offset
            o = np.asarray(o, dtype=np.float64)
            p = tf.active_power(o, sr)
            if p <= 0:
                continue
            start = int(rng.integers(0, max(1, len(o))))
            bg += tf.fit_length(np.roll(o, -start), n) / math.sqrt(p)
        if not np.any(bg):
            raise AudioError("babble: the other clips are silent")
        bg = bg.astype(np.float32)
        info["talkers"] = len(others)
    else:
        raise ValueError(f"unknown noise '{noise}' (known: {', '.join(NOISES)})")
    mix, levels = tf.mix_at_snr(x, bg, snr_db, sr)
    info.update(levels)
    return _peak_safe(mix), info


def _resample(x: np.ndarray, up: int, down: int) -> np.ndarray:
    from scipy.signal import resample_poly

    return np.asarray(resample_poly(np.asarray(x, dtype=np.float64), up, down), dtype=np.float64)


def telephone(x: np.ndarray, sr: int) -> tuple[np.ndarray, dict[str, Any]]:
    """Narrowband telephone channel: 300-3400 Hz band, 8 kHz sampling, 8-bit G.711-style mu-law, back to ``sr``."""
    from scipy.signal import butter, sosfiltfilt

    g = math.gcd(8000, sr)
    y = _resample(x, 8000 // g, sr // g)
    sos = butter(4, [300, 3400], btype="bandpass", fs=8000, output="sos")
    y = sosfiltfilt(sos, y)
    y = np.clip(y, -1.0, 1.0)
    comp = np.sign(y) * np.log1p(MU * np.abs(y)) / math.log1p(MU)
    q = np.round((comp + 1) / 2 * MU) / MU * 2 - 1  # 256 levels
    y = np.sign(q) * ((1 + MU) ** np.abs(q) - 1) / MU
    out = _resample(y, sr // g, 8000 // g)[: len(x)]
    out = np.pad(out, (0, max(0, len(x) - len(out))))
    return _peak_safe(out), {"band_hz": [300, 3400], "sample_rate": 8000, "mu_law_bits": 8}


def ffmpeg_available() -> str | None:
    return shutil.which("ffmpeg")


CODECS = {"mp3": ("libmp3lame", "mp3"), "opus": ("libopus", "ogg")}


def codec(x: np.ndarray, sr: int, name: str, kbps: float) -> tuple[np.ndarray, dict[str, Any]]:
    """Encode ``x`` with ffmpeg (MP3 via LAME, Opus via libopus) at ``kbps`` and decode it back to ``sr``."""
    import soundfile as sf

    exe = ffmpeg_available()
    if exe is None:
        raise AudioError("the codec perturbations need ffmpeg on PATH (apt-get install ffmpeg)")
    lib, fmt = CODECS[name]
    wav = io.BytesIO()
    sf.write(wav, np.clip(x, -1, 1).astype(np.float32), sr, format="WAV", subtype="PCM_16")
    base = [exe, "-hide_banner", "-loglevel", "error", "-nostdin", "-threads", "1"]
    enc = subprocess.run(
        base
        + [
            "-f",
            "wav",
            "-i",
            "pipe:0",
            "-c:a",
            lib,
            "-b:a",
            f"{kbps:g}k",
            "-ac",
            "1",
            "-map_metadata",
            "-1",
            "-fflags",
            "+bitexact",
            "-flags:a",
            "+bitexact",
            "-f",
            fmt,
            "pipe:1",
        ],
        input=wav.getvalue(),
        capture_output=True,
        check=False,
        timeout=120,
    )
    if enc.returncode != 0 or not enc.stdout:
        raise AudioError(f"ffmpeg could not encode {name} at {kbps:g} kbps: {enc.stderr.decode(errors='replace')[-300:]}")
    dec = subprocess.run(
        base + ["-f", fmt, "-i", "pipe:0", "-ac", "1", "-ar", str(sr), "-f", "wav", "-c:a", "pcm_f32le", "-fflags", "+bitexact", "pipe:1"],
        input=enc.stdout,
        capture_output=True,
        check=False,
        timeout=120,
    )
    if dec.returncode != 0 or not dec.stdout:
        raise AudioError(f"ffmpeg could not decode {name}: {dec.stderr.decode(errors='replace')[-300:]}")
    y, _ = sf.read(io.BytesIO(dec.stdout), dtype="float32")
    y = y[: len(x)] if len(y) >= len(x) else np.pad(y, (0, len(x) - len(y)))
    return _peak_safe(y), {"codec": name, "encoder": lib, "kbps": float(kbps), "encoded_bytes": len(enc.stdout)}


def synthetic_rir(sr: int, rt60: float, rng: np.random.Generator) -> np.ndarray:
    """A statistical room impulse response: a direct path, then Gaussian noise decaying 60 dB in ``rt60`` s.

    The exponentially decaying noise tail is the standard statistical model of late
    reverberation (Schroeder; Lehmann & Johansson 2008); the tail starts 2.5 ms after the direct
    sound and carries about as much energy as a room with that RT60 at a few metres' distance.
    """
    n = max(2, int(1.2 * rt60 * sr))
    t = np.arange(n) / sr
    h = rng.standard_normal(n) * np.exp(-math.log(1000.0) * t / rt60)
    h[: int(0.0025 * sr)] = 0.0
    h *= 1.0 / math.sqrt(float(np.sum(h**2)) + 1e-12)  # tail at unit energy: direct-to-reverberant ratio 0 dB
    h[0] = 1.0
    return h


def reverb(x: np.ndarray, sr: int, rt60: float, rng: np.random.Generator) -> tuple[np.ndarray, dict[str, Any]]:
    """``x`` convolved with a synthetic RIR of ``rt60`` seconds, at the input's active level."""
    from scipy.signal import fftconvolve

    h = synthetic_rir(sr, rt60, rng)
    y = fftconvolve(np.asarray(x, dtype=np.float64), h)[: len(x)]
    p_in, p_out = tf.active_power(x, sr), tf.active_power(y, sr)
    if p_out > 0 and p_in > 0:
        y *= math.sqrt(p_in / p_out)
    return _peak_safe(y), {"rt60_s": float(rt60), "rir": "direct path + exponentially decaying Gaussian noise", "rir_samples": len(h)}


def speed(x: np.ndarray, sr: int, factor: float) -> tuple[np.ndarray, dict[str, Any]]:
    """Play ``factor`` times faster (tempo and pitch together, like sox ``speed``), by resampling."""
    from fractions import Fraction

    fr = Fraction(factor).limit_denominator(100)
    y = _resample(x, fr.denominator, fr.numerator)
    return _peak_safe(y), {"factor": float(factor), "ratio": [fr.numerator, fr.denominator]}


def gain(x: np.ndarray, gain_db: float) -> tuple[np.ndarray, dict[str, Any]]:
    """Level change by ``gain_db``; samples beyond full scale clip, as a recording would."""
    y = np.asarray(x, dtype=np.float64) * 10 ** (gain_db / 20)
    clipped = int(np.count_nonzero(np.abs(y) > 1.0))
    return np.clip(y, -1.0, 1.0).astype(np.float32), {"gain_db": float(gain_db), "clipped_samples": clipped}


def mix_recorded(x: np.ndarray, sr: int, background: np.ndarray, snr_db: float) -> tuple[np.ndarray, dict[str, Any]]:
    """``x`` plus a recorded ``background`` (already fitted to the clip) at ``snr_db``, by the same rule as ``add_noise``."""
    mix, levels = tf.mix_at_snr(x, background, snr_db, sr)
    return _peak_safe(mix), {"noise": "recorded", **levels}


def direct_path_index(h: np.ndarray) -> int:
    """Index of the direct-path peak: the sample of largest magnitude.

    Kaldi's ``wav-reverberate`` and Lhotse's ``ReverbWithImpulseResponse`` take the largest
    sample (``argmax``); the magnitude is taken here so a response measured with inverted
    polarity is aligned the same way (identical for a positive direct path).
    """
    return int(np.argmax(np.abs(np.asarray(h))))


def convolve_rir(x: np.ndarray, sr: int, h: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    """``x`` in the room of the impulse response ``h`` (at ``sr``): the clip's length, aligned to the direct path.

    The response is scaled to unit energy (as torchaudio's RIR tutorial does), the convolution is
    cut to start at the direct-path peak and keep the clip's length (Kaldi's ``--shift-output``,
    enforced by Lhotse), and the result is brought back to the input's active speech level (the
    rule of ``reverb``; Kaldi and Lhotse restore the whole-clip power instead).
    """
    from scipy.signal import fftconvolve

    hh = np.asarray(h, dtype=np.float64)
    energy = float(np.sum(hh**2))
    if not math.isfinite(energy) or energy <= 0:
        raise AudioError("the room impulse response is silent")
    hh = hh / math.sqrt(energy)
    peak = direct_path_index(hh)
    y = fftconvolve(np.asarray(x, dtype=np.float64), hh)[peak : peak + len(x)]
    p_in, p_out = tf.active_power(x, sr), tf.active_power(y, sr)
    y = y * math.sqrt(p_in / p_out)
    return _peak_safe(y), {
        "direct_path_index": peak,
        "direct_path_s": round(peak / sr, 6),
        "rir_samples": len(hh),
        "rir_scaling": "unit energy",
        "output_level": "input active level",
    }


def _slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of ``y`` on ``x``."""
    xc = x - x.mean()
    return float(np.dot(xc, y - y.mean()) / np.dot(xc, xc))


def rt60_t20(h: np.ndarray, sr: int) -> float | None:
    """Reverberation time of an impulse response: the T20 of its Schroeder decay curve (ISO 3382-2).

    From the direct-path peak on, the energy is integrated backwards (Schroeder 1965) and the
    least-squares slope of the curve between -5 and -25 dB is extrapolated to 60 dB. A tail that
    ends in a flat noise floor (its last tenth within 3 dB of the tenth before) has the floor's
    energy subtracted and is cut where its 10 ms envelope comes within 5 dB of the floor; the
    energy lost beyond the cut (or beyond the end of a response stored too short) is added back
    from the envelope's own decay rate, as Lundeby et al. (1995) do. None when the floor is
    less than 35 dB below the peak (ISO 3382: T20's range must end 10 dB above the noise) or the
    curve never falls 25 dB.
    """
    hh = np.asarray(h, dtype=np.float64)
    if hh.size == 0 or not np.any(hh) or not np.all(np.isfinite(hh)):
        return None
    e = hh[direct_path_index(hh) :] ** 2
    block = max(1, round(0.01 * sr))
    nb = len(e) // block
    if nb < 4:
        return None
    env = e[: nb * block].reshape(nb, block).mean(axis=1)
    top = float(env.max())
    floor, end = 0.0, nb
    tenth = max(1, nb // 10)
    last, before = float(env[-tenth:].mean()), float(env[-2 * tenth : -tenth].mean())
    if nb >= 20 and last > 0 and before <= 2.0 * last:  # the tail stopped decaying: a noise floor
        floor = last
        if top < floor * 10**3.5:
            return None
        near = np.flatnonzero(env <= floor * 10**0.5)
        end = max(2, int(near[0])) if near.size else nb
    kept = np.clip(env[:end] - floor, 1e-30, None)
    kept_db = 10 * np.log10(kept / top)
    fit = np.flatnonzero(kept_db <= -5.0)
    tail = 0.0
    if fit.size >= 2:
        slope_db = _slope(fit * block / sr, kept_db[fit])  # dB per second
        if slope_db < 0:
            tail = float(kept[-1]) * sr / (-slope_db * math.log(10) / 10)  # sum of the missing exponential tail
    edc = np.cumsum(np.clip(e[: end * block] - floor, 0.0, None)[::-1])[::-1] + tail
    if edc[0] <= 0:
        return None
    edc_db = 10 * np.log10(np.maximum(edc, 1e-300) / edc[0])
    if edc_db.min() > -25.0:
        return None
    start, stop = int(np.argmax(edc_db <= -5.0)), int(np.argmax(edc_db <= -25.0))
    if stop - start < 2:
        return None
    slope = _slope(np.arange(start, stop + 1) / sr, edc_db[start : stop + 1])
    return None if slope >= 0 else -60.0 / slope
