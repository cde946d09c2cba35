"""Weight-free prosody descriptors: an acoustic measuring stick, not an emotion recognizer.

``ProsodyBackend`` measures how a clip is delivered -- pitch level and range, loudness,
speaking-rate proxy, zero-crossing rate, spectral centroid, MFCC mean, duration -- and combines
some of them into ``arousal_proxy``. It knows nothing about emotion categories and gives no
posteriors; arousal_proxy is "louder, faster, higher, brighter than a typical voice", which
tracks activation within one speaker but is confounded by voice (a high-pitched speaker reads
as aroused). Compare its values within a speaker or between renditions of the same text.

The descriptors of the default prosody contrast (SpeechEQ's six dimensions, keys ``seq_*``) come
from librosa, as in the paper. The older descriptors (f0 median, syllable rate, MFCC vector ...)
used by the arousal proxy and the ``semitone-syllable`` contrast variant come from a YIN f0 tracker
with aperiodicity (numpy; librosa's ``yin`` gives no voicing), an energy-envelope syllable-nucleus
counter, and librosa's mel filterbank and MFCC. Frames are 10 ms apart.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.backends.availability import require_modules
from engine.backends.base import BackendInfo, BackendOptions, EmotionOutput, SERBackend
from engine.data import SAMPLE_RATE
from engine.errors import AudioError, ConfigError
from engine.options import check_number, option

log = logging.getLogger(__name__)

HOP_S = 0.010
N_MFCC = 13
N_MELS = 40

# arousal_proxy = mean of z-scores of these descriptors against fixed reference (mean, sd)
# values -- rough figures for adult read speech, so a clip's value does not depend on which
# other clips share its batch. Pass ``reference=...`` (e.g. per-speaker statistics) to change.
AROUSAL_REFERENCE: dict[str, tuple[float, float]] = {
    "f0_level_st": (3.0, 5.0),  # 12*log2(median f0 / 100 Hz): ~133 Hz, sd 5 semitones
    "f0_range_st": (7.0, 3.0),  # 5th..95th percentile span of voiced f0, semitones
    "rms_db": (-26.0, 6.0),  # loudness of active frames, dBFS
    "syllable_rate": (4.0, 1.0),  # syllable nuclei per second of speech span
    "spectral_centroid_hz": (1400.0, 400.0),  # brightness / vocal effort
}


# --------------------------------------------------------------------------------------------
# Signal helpers
# --------------------------------------------------------------------------------------------


def _frames(x: np.ndarray, frame_len: int, hop: int) -> np.ndarray:
    """(n_frames, frame_len) view, frames centred every ``hop`` samples (zero padded at ends)."""
    pad = frame_len // 2
    xp = np.pad(x, (pad, pad + frame_len))
    n = 1 + (len(x) - 1) // hop
    return np.lib.stride_tricks.sliding_window_view(xp, frame_len)[: n * hop : hop][:n]


def yin_f0(
    x: np.ndarray,
    sr: int = SAMPLE_RATE,
    fmin: float = 60.0,
    fmax: float = 500.0,
    threshold: float = 0.3,
    hop_s: float = HOP_S,
    window_s: float = 0.025,
) -> tuple[np.ndarray, np.ndarray]:
    """YIN fundamental frequency per frame: (f0 in Hz, NaN where unvoiced; aperiodicity 0..1).

    Difference function via FFT cross-correlation, cumulative-mean normalization, the first
    dip under ``threshold`` refined to its local minimum and by parabolic interpolation.
    """
    hop = int(round(hop_s * sr))
    w = int(round(window_s * sr))
    tau_min = max(2, int(math.floor(sr / fmax)))
    tau_max = int(math.ceil(sr / fmin))
    frame_len = w + tau_max + 1
    fr = _frames(np.asarray(x, dtype=np.float64), frame_len, hop)
    n_fft = 1 << int(math.ceil(math.log2(frame_len + w)))
    spec_full = np.fft.rfft(fr, n_fft)
    spec_head = np.fft.rfft(fr[:, :w], n_fft)
    cross = np.fft.irfft(spec_full * np.conj(spec_head), n_fft)[:, : tau_max + 1]
    sq = np.cumsum(np.pad(fr**2, ((0, 0), (1, 0))), axis=1)
    e_head = sq[:, w][:, None]
    taus = np.arange(tau_max + 1)
    e_shift = sq[:, taus + w] - sq[:, taus]
    d = np.maximum(e_head + e_shift - 2 * cross, 0.0)
    cum = np.cumsum(d[:, 1:], axis=1)
    cmnd = np.ones_like(d)
    cmnd[:, 1:] = d[:, 1:] * taus[1:] / np.maximum(cum, 1e-12)
    f0 = np.full(len(fr), np.nan)
    aper = np.ones(len(fr))
    search = cmnd[:, tau_min : tau_max + 1]
    below = search < threshold
    loud = e_head[:, 0] > max(float(e_head.max()) * 1e-5, 1e-10)  # silent frames are unvoiced
    for i in np.flatnonzero(below.any(axis=1) & loud):
        t = int(np.argmax(below[i])) + tau_min
        while t + 1 <= tau_max and cmnd[i, t + 1] < cmnd[i, t]:
            t += 1
        a, b, c = cmnd[i, t - 1], cmnd[i, t], cmnd[i, t + 1] if t + 1 <= tau_max else cmnd[i, t]
        den = a - 2 * b + c
        shift = 0.5 * (a - c) / den if den > 0 else 0.0
        f0[i] = sr / (t + float(np.clip(shift, -1, 1)))
        aper[i] = float(b)
    return f0, aper


def _stft_power(x: np.ndarray, sr: int, n_fft: int = 512, hop_s: float = HOP_S) -> np.ndarray:
    fr = _frames(x, n_fft, int(round(hop_s * sr))) * np.hanning(n_fft)
    return np.abs(np.fft.rfft(fr, n_fft)) ** 2


def mel_filterbank(sr: int, n_fft: int, n_mels: int = N_MELS, fmin: float = 20.0, fmax: float | None = None) -> np.ndarray:
    """Triangular filters on the HTK mel scale (librosa), peak 1, shape (n_mels, n_fft // 2 + 1)."""
    import librosa

    return np.asarray(
        librosa.filters.mel(sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax or sr / 2, htk=True, norm=None), dtype=np.float64
    )


def mfcc(power: np.ndarray, sr: int, n_fft: int = 512, n_mfcc: int = N_MFCC) -> np.ndarray:
    """MFCCs (librosa's orthonormal DCT-II of natural-log mel energies), shape (n_frames, n_mfcc)."""
    import librosa

    mel = power @ mel_filterbank(sr, n_fft).T
    return np.asarray(librosa.feature.mfcc(S=np.log(mel + 1e-10).T, n_mfcc=n_mfcc, dct_type=2, norm="ortho")).T


def _smooth(x: np.ndarray, n: int) -> np.ndarray:
    if n <= 1:
        return x
    k = np.hanning(n + 2)[1:-1]
    return np.convolve(x, k / k.sum(), mode="same")


def prosody_descriptors(x: np.ndarray, sr: int = SAMPLE_RATE, active_range_db: float = 35.0) -> dict[str, float]:
    """All descriptors for one mono clip (NaN where a clip has no speech or no voicing).

    Active frames are those within ``active_range_db`` of the loudest frame (and above
    -70 dBFS); loudness, centroid, ZCR and MFCC are means over active frames, so leading or
    trailing silence does not dilute them.
    """
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    n_fft = 512
    hop = int(round(HOP_S * sr))
    power = _stft_power(x, sr, n_fft)
    frame_pow = np.mean(_frames(x, int(round(0.025 * sr)), hop) ** 2, axis=1)
    frame_db = 10 * np.log10(frame_pow + 1e-12)
    active = (frame_db > frame_db.max() - active_range_db) & (frame_db > -70.0)
    duration = len(x) / sr
    nan = float("nan")
    d: dict[str, float] = {"duration_s": duration, "active_fraction": float(active.mean()) if active.size else 0.0}
    d["rms_db_total"] = float(10 * np.log10(np.mean(x**2) + 1e-12))
    if not active.any():
        d.update(
            {
                k: nan
                for k in (
                    "speech_s",
                    "rms_db",
                    "f0_mean_hz",
                    "f0_median_hz",
                    "f0_p5_hz",
                    "f0_p95_hz",
                    "f0_range_st",
                    "f0_std_st",
                    "f0_level_st",
                    "voiced_fraction",
                    "syllable_rate",
                    "n_syllable_nuclei",
                    "zcr",
                    "spectral_centroid_hz",
                )
            }
        )
        d.update({f"mfcc_mean_{k}": nan for k in range(N_MFCC)})
        return d
    idx = np.flatnonzero(active)
    speech_s = (idx[-1] - idx[0] + 1) * HOP_S
    d["speech_s"] = float(speech_s)
    d["rms_db"] = float(10 * np.log10(np.mean(frame_pow[active]) + 1e-12))

    f0, _ = yin_f0(x, sr)
    n = min(len(f0), len(active))
    voiced = np.isfinite(f0[:n]) & active[:n]
    d["voiced_fraction"] = float(voiced.sum() / max(1, active[:n].sum()))
    if voiced.sum() >= 3:
        fv = f0[:n][voiced]
        st = 12 * np.log2(fv / 100.0)
        p5, p95 = np.percentile(fv, [5, 95])
        d.update(
            {
                "f0_mean_hz": float(fv.mean()),
                "f0_median_hz": float(np.median(fv)),
                "f0_p5_hz": float(p5),
                "f0_p95_hz": float(p95),
                "f0_range_st": float(12 * np.log2(p95 / p5)),
                "f0_std_st": float(st.std()),
                "f0_level_st": float(12 * np.log2(np.median(fv) / 100.0)),
            }
        )
    else:
        d.update({k: nan for k in ("f0_mean_hz", "f0_median_hz", "f0_p5_hz", "f0_p95_hz", "f0_range_st", "f0_std_st", "f0_level_st")})

    # syllable nuclei: peaks of the smoothed 250-4000 Hz band energy that stand out by >= 2 dB,
    # lie within 25 dB of the loudest frame, have voicing within 40 ms, and are >= 80 ms apart.
    from scipy.signal import find_peaks

    freqs = np.fft.rfftfreq(n_fft, 1 / sr)
    band = (freqs >= 250) & (freqs <= 4000)
    env = _smooth(10 * np.log10(power[:, band].sum(axis=1) + 1e-12), 5)
    peaks, _ = find_peaks(env, prominence=2.0, distance=int(round(0.08 / HOP_S)), height=env.max() - 25.0)
    near_voiced = np.convolve(voiced.astype(float), np.ones(9), mode="same") > 0  # voiced within 40 ms
    peaks = [p for p in peaks if p < n and near_voiced[p]]
    d["n_syllable_nuclei"] = float(len(peaks))
    d["syllable_rate"] = float(len(peaks) / speech_s) if speech_s > 0 else nan

    m = min(len(power), len(active))
    act = active[:m]
    p_act = power[:m][act]
    d["spectral_centroid_hz"] = float(np.mean((p_act @ freqs) / np.maximum(p_act.sum(axis=1), 1e-12)))
    zfr = _frames(x, int(round(0.025 * sr)), hop)[: len(active)]
    signs = np.signbit(zfr)
    d["zcr"] = float(np.mean(np.mean(signs[:, 1:] != signs[:, :-1], axis=1)[active[: len(zfr)]]))
    coeffs = mfcc(p_act, sr, n_fft).mean(axis=0)
    d.update({f"mfcc_mean_{k}": float(c) for k, c in enumerate(coeffs)})
    return d


# SpeechEQ's six prosody dimensions, computed with librosa as the paper does (keys prefixed "seq_").
SEQ_FRAME = 400  # 25 ms at 16 kHz
SEQ_HOP = 160  # 10 ms
SEQ_N_FFT = 512
SEQ_ACTIVE_DB = 35.0  # frames within this many dB of the loudest frame are speech
SEQ_VOICED_ZCR = 0.25  # and below this zero-crossing rate they count as voiced for the pitch mean


def speecheq_descriptors(x: np.ndarray, sr: int = SAMPLE_RATE) -> dict[str, float]:
    """The six SpeechEQ prosody dimensions of one clip, with librosa.

    ``seq_pitch_mean_hz``: mean of ``librosa.yin`` f0 (60-500 Hz) over voiced frames (active and
    zero-crossing rate below ``SEQ_VOICED_ZCR``); ``seq_zcr``: mean zero-crossing rate (the
    paper's speaking-rate proxy); ``seq_centroid_hz``: mean spectral centroid; ``seq_rms``: mean
    RMS energy (linear); ``seq_mfcc_mean``: mean of the 13 MFCCs over coefficients and frames;
    ``seq_duration_s``: clip duration. Means run over active frames (within ``SEQ_ACTIVE_DB`` of
    the loudest), so leading and trailing silence do not dilute them; NaN where a clip has none.
    """
    import librosa

    y = np.asarray(x, dtype=np.float32).reshape(-1)
    nan = float("nan")
    out = {"seq_duration_s": float(len(y) / sr)}
    rms = librosa.feature.rms(y=y, frame_length=SEQ_FRAME, hop_length=SEQ_HOP)[0]
    db = 20 * np.log10(rms + 1e-10)
    active = (db > db.max() - SEQ_ACTIVE_DB) & (db > -70.0)
    if not active.any():
        out.update({k: nan for k in ("seq_pitch_mean_hz", "seq_zcr", "seq_centroid_hz", "seq_rms", "seq_mfcc_mean")})
        return out
    zcr = librosa.feature.zero_crossing_rate(y, frame_length=SEQ_FRAME, hop_length=SEQ_HOP)[0]
    cent = librosa.feature.spectral_centroid(y=y, sr=sr, n_fft=SEQ_N_FFT, hop_length=SEQ_HOP)[0]
    mf = librosa.feature.mfcc(y=y, sr=sr, n_mfcc=13, n_fft=SEQ_N_FFT, hop_length=SEQ_HOP)
    f0 = librosa.yin(y, fmin=60.0, fmax=500.0, sr=sr, frame_length=1024, hop_length=SEQ_HOP)
    n = min(len(active), len(zcr), len(cent), mf.shape[1], len(f0))
    act = active[:n]
    voiced = act & (zcr[:n] < SEQ_VOICED_ZCR)
    out["seq_pitch_mean_hz"] = float(f0[:n][voiced].mean()) if voiced.sum() >= 3 else nan
    out["seq_zcr"] = float(zcr[:n][act].mean())
    out["seq_centroid_hz"] = float(cent[:n][act].mean())
    out["seq_rms"] = float(rms[:n][act].mean())
    out["seq_mfcc_mean"] = float(mf[:, :n][:, act].mean())
    return out


def arousal_proxy(descriptors: Mapping[str, float], reference: Mapping[str, tuple[float, float]] | None = None) -> float:
    """Mean z-score of pitch level, pitch range, loudness, syllable rate and spectral centroid.

    ``z = (value - ref_mean) / ref_sd`` per descriptor (``AROUSAL_REFERENCE`` by default),
    averaged with equal weights over the descriptors that are finite; NaN if none is.
    """
    ref = reference or AROUSAL_REFERENCE
    zs = []
    for key, (mu, sd) in ref.items():
        v = descriptors.get(key, float("nan"))
        if v is not None and np.isfinite(v):
            zs.append((float(v) - mu) / sd)
    return float(np.mean(zs)) if zs else float("nan")


# --------------------------------------------------------------------------------------------
# Backend
# --------------------------------------------------------------------------------------------


def _reference(value: Any, where: str) -> dict[str, tuple[float, float]]:
    """The ``reference`` option: descriptor -> [mean, sd], both numbers, the sd positive."""
    out: dict[str, tuple[float, float]] = {}
    for key, pair in value.items():
        at = f"{where}.{key}"
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ConfigError(f"{at}: expected [mean, sd] (two numbers), got {pair!r}")
        out[str(key)] = (float(check_number(pair[0], f"{at}[0] (mean)")), float(check_number(pair[1], f"{at}[1] (sd)", gt=0)))
    return out


@dataclass(frozen=True)
class ProsodyOptions(BackendOptions):
    """The prosody descriptors' shortest clip and the arousal proxy's reference statistics (CPU only)."""

    min_duration_s: float = option(0.1, "shorter clips are an error, in seconds", ge=0, le=3_600)
    reference: dict[str, Any] | None = option(
        None,
        "descriptor -> [mean, sd] for arousal_proxy (e.g. per-speaker statistics); null: fixed figures for adult read speech",
        parse=_reference,
    )
    device: str | None = option(None, "cpu or auto (or left out): the backend computes on the CPU only")


class ProsodyBackend(SERBackend):
    """Acoustic prosody descriptors and an arousal proxy; no weights, no emotion categories.

    Options: :class:`ProsodyOptions`. Numpy and librosa on the CPU: its actors never take a GPU,
    and ``device: cuda`` is refused (``cpu_only``).
    """

    name = "prosody"
    OPTIONS = ProsodyOptions
    options: ProsodyOptions
    cpu_only = True
    requires = ("librosa",)
    extra = "demo"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.min_duration_s = self.options.min_duration_s
        self.reference: dict[str, tuple[float, float]] = dict(self.options.reference or AROUSAL_REFERENCE)

    def load(self) -> None:
        """Nothing to load (pure signal processing), but librosa must be there before the first clip."""
        require_modules("the prosody emotion backend", self.requires, self.extra)

    def info(self) -> BackendInfo:
        return BackendInfo(
            backend=self.name,
            model_id="prosody-descriptors-v1",
            extra={"measures": "acoustics (pitch, loudness, rate, spectrum), not emotion", "arousal_reference": self.reference},
        )

    def predict_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[EmotionOutput]:
        outs: list[EmotionOutput] = []
        for i, audio in enumerate(audios):
            x = np.asarray(audio, dtype=np.float64).reshape(-1)
            if len(x) < self.min_duration_s * sample_rate:
                raise AudioError(
                    f"clip {i} in the batch lasts {len(x) / sample_rate:.3f} s; the prosody backend needs at least {self.min_duration_s} s"
                )
            if not np.all(np.isfinite(x)):
                raise AudioError(f"clip {i} in the batch contains NaN or infinite samples")
            desc = prosody_descriptors(x, sample_rate)
            desc.update(speecheq_descriptors(x, sample_rate))
            outs.append(EmotionOutput(dimensions={"arousal_proxy": arousal_proxy(desc, self.reference)}, descriptors=desc))
        return outs
