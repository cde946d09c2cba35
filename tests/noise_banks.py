"""Small folders in the MUSAN and RIRS_NOISES layouts, built in a temporary folder for the recorded-noise tests.

The recordings are short and generated here (a mains hum with fan noise, rain-like clicks,
a lowpassed rumble, chords), at the sample rates and channel counts the real sets have (16 kHz
mono MUSAN, 8 kHz and 44.1 kHz stereo extras, 48 kHz multichannel measured responses); MUSAN's
speech part is cut from a LibriVox clip of pocketsphinx-testdata when given. The room responses
are statistical (``engine.perturb.ops.synthetic_rir``) with the pre-delay, noise floor and
polarity of measured ones. The list files follow Kaldi's formats, with paths written from the
folder above ``RIRS_NOISES`` as the published lists write them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf

from engine.corpus import transforms as tf
from engine.perturb import ops


def _lowpass(x: np.ndarray, sr: int, hz: float) -> np.ndarray:
    from scipy.signal import butter, sosfilt

    return np.asarray(sosfilt(butter(4, hz, fs=sr, output="sos"), x))


def hum(sr: int, seconds: float, seed: int) -> np.ndarray:
    """Mains hum (100 Hz and harmonics) over fan noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(sr * seconds)) / sr
    x = sum(np.sin(2 * np.pi * 100 * k * t + rng.uniform(0, 6)) / k for k in range(1, 6)) * 0.05
    return (x + 0.05 * _lowpass(rng.standard_normal(len(t)), sr, 800)).astype(np.float32)


def rain(sr: int, seconds: float, seed: int) -> np.ndarray:
    """Sparse decaying clicks over pink noise."""
    rng = np.random.default_rng(seed)
    n = int(sr * seconds)
    x = 0.02 * tf.pink_noise(n, rng).astype(np.float64)
    for start in rng.integers(0, n - sr // 50, size=int(40 * seconds)):
        k = np.arange(sr // 50)
        x[start : start + len(k)] += rng.uniform(0.05, 0.3) * np.exp(-k / (sr / 2000)) * rng.standard_normal(len(k))
    return x.astype(np.float32)


def rumble(sr: int, seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (0.2 * _lowpass(rng.standard_normal(int(sr * seconds)), sr, 300)).astype(np.float32)


def measured_like_rir(
    sr: int, rt60: float, seed: int, channels: int = 1, predelay_s: float = 0.004, floor_db: float = -65.0, invert: bool = False
) -> np.ndarray:
    """A statistical response with a pre-delay, a noise floor after it and (optionally) inverted polarity; (samples, channels)."""
    rng = np.random.default_rng(seed)
    cols = []
    for c in range(channels):
        h = ops.synthetic_rir(sr, rt60, rng)
        h = np.concatenate([np.zeros(int(predelay_s * sr) + 7 * c), h, np.zeros(int(0.3 * sr))])
        h = h + rng.standard_normal(len(h)) * 10 ** (floor_db / 20)
        cols.append(-h if invert else h)
    n = min(len(c) for c in cols)
    return (0.5 * np.stack([c[:n] for c in cols], axis=1) / np.max(np.abs(cols[0]))).astype(np.float32)


def _write(path: Path, data: np.ndarray, sr: int, subtype: str = "PCM_16") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, data, sr, subtype=subtype)
    return path


def build_musan(root: Path, speech: Path | None = None) -> Path:
    """``root/musan`` with noise (free-sound, sound-bible), music (fma) and speech (librivox) parts."""
    m = root / "musan"
    fs = m / "noise" / "free-sound"
    _write(fs / "noise-free-sound-0000.wav", hum(16000, 4.0, 1), 16000)
    _write(fs / "noise-free-sound-0001.wav", np.stack([rain(44100, 0.8, 2), rain(44100, 0.8, 3)], axis=1), 44100)
    (fs / "ANNOTATIONS").write_text(
        "noise-free-sound-0000 https://freesound.org/example/1 bg\nnoise-free-sound-0001 https://freesound.org/example/2 fg\n"
    )
    (fs / "LICENSE").write_text("noise-free-sound-0000 CC0\nnoise-free-sound-0001 Attribution 3.0\n")
    sb = m / "noise" / "sound-bible"
    _write(sb / "noise-sound-bible-0000.wav", rumble(8000, 3.0, 4), 8000)
    (sb / "ANNOTATIONS").write_text("noise-sound-bible-0000 http://soundbible.com/example\n")
    (sb / "LICENSE").write_text("noise-sound-bible-0000 Public Domain\n")
    fma = m / "music" / "fma"
    for i in range(2):
        y, _ = tf.synth_music(16000 * 5, 16000, np.random.default_rng(10 + i))
        _write(fma / f"music-fma-000{i}.wav", 0.1 * y, 16000)
    (fma / "ANNOTATIONS").write_text("music-fma-0000 classical N Artist_A\nmusic-fma-0001 pop Y Artist_B\n")
    (fma / "LICENSE").write_text("music-fma-0000 Attribution 4.0\nmusic-fma-0001 Attribution-ShareAlike 4.0\n")
    if speech is not None:
        x, sr = sf.read(speech, dtype="float32")
        lv = m / "speech" / "librivox"
        _write(lv / "speech-librivox-0000.wav", x[: int(2.5 * sr)], sr)
        (lv / "ANNOTATIONS").write_text("speech-librivox-0000 austen en\n")
        (lv / "LICENSE").write_text("speech-librivox-0000 Public Domain\n")
    (m / "README").write_text("MUSAN-like test folder\n")
    return m


def build_rirs_noises(root: Path) -> Path:
    """``root/RIRS_NOISES`` with simulated small and medium rooms, real responses with isotropic noise, and point-source noises."""
    r = root / "RIRS_NOISES"
    sim = r / "simulated_rirs"
    rt60s = {"smallroom": (0.25, 0.3), "mediumroom": (0.7, 0.8)}
    for k, (size, rts) in enumerate(rt60s.items()):
        lines, info = [], [f"Room001 4.{k}0 5.00 2.70 1.00 2.00 1.50 0.{5 + k}0"]
        for j, rt in enumerate(rts, 1):
            rel = Path("simulated_rirs") / size / "Room001" / f"Room001-0000{j}.wav"
            _write(r / rel, ops.synthetic_rir(16000, rt, np.random.default_rng(20 + 3 * k + j)).astype(np.float32) * 0.5, 16000)
            lines.append(f"--rir-id {size}-Room001-0000{j} --room-id {size}-Room001 RIRS_NOISES/{rel.as_posix()}")
        (sim / size / "rir_list").write_text("\n".join(lines) + "\n")
        (sim / size / "room_info").write_text("\n".join(info) + "\n")
    real = r / "real_rirs_isotropic_noises"
    _write(real / "RVB2014_type1_rir_largeroom1_far_angla.wav", measured_like_rir(48000, 1.2, 30, channels=2), 48000)
    _write(real / "air_type1_rir_office_1.wav", measured_like_rir(16000, 0.5, 31, invert=True), 16000)
    _write(real / "RVB2014_type1_noise_largeroom1_1.wav", np.stack([rumble(48000, 2.0, 32), rumble(48000, 2.0, 33)], axis=1), 48000)
    (real / "rir_list").write_text(
        "--rir-id RVB2014_type1_rir_largeroom1_far_angla --room-id RVB2014_type1_rir_largeroom1 "
        "RIRS_NOISES/real_rirs_isotropic_noises/RVB2014_type1_rir_largeroom1_far_angla.wav\n"
        "--rir-id air_type1_rir_office_1 --room-id air_type1_rir_office "
        "RIRS_NOISES/real_rirs_isotropic_noises/air_type1_rir_office_1.wav\n"
    )
    (real / "noise_list").write_text(
        "--noise-id RVB2014_type1_noise_largeroom1_1 --noise-type isotropic --bg-fg-type background "
        "--rir-id RVB2014_type1_rir_largeroom1_far_angla RIRS_NOISES/real_rirs_isotropic_noises/RVB2014_type1_noise_largeroom1_1.wav\n"
    )
    ps = r / "pointsource_noises"
    _write(ps / "noise1.wav", rain(16000, 1.5, 40), 16000)
    _write(ps / "noise2.wav", hum(16000, 2.0, 41), 16000)
    (ps / "noise_list").write_text(
        "--noise-id noise1 --noise-type point-source --bg-fg-type foreground RIRS_NOISES/pointsource_noises/noise1.wav\n"
        "--noise-id noise2 --noise-type point-source --bg-fg-type background RIRS_NOISES/pointsource_noises/noise2.wav\n"
    )
    return r
