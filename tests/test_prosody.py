"""The weight-free prosody backend (f0, syllable rate, arousal proxy) and the prosody-contrast audit."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audits.emotion import prosody_contrast as pc
from engine.backends.ser import prosody as sp
from engine.errors import AudioError, ConfigError

SR = 16_000
TEXT = "The quick brown fox jumps over the lazy dog near the river bank."


def harmonic(f0: float, seconds: float, amp: float = 0.1, n_harm: int = 8) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    x = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, n_harm + 1))
    return (amp * x / np.abs(x).max()).astype(np.float32)


def syllable_train(f0: float, rate_hz: float, n: int, amp: float) -> np.ndarray:
    """``n`` voiced 'syllables' (raised-cosine bursts) at ``rate_hz``, with 0.3 s silence around."""
    period = 1.0 / rate_hz
    tone = harmonic(f0, n * period, amp=1.0)
    t = np.arange(tone.size) / SR
    env = np.clip(np.sin(np.pi * (t % period) / period), 0, None) ** 2
    pad = np.zeros(int(0.3 * SR), dtype=np.float32)
    return np.concatenate([pad, amp * tone * env, pad]).astype(np.float32)


def espeak(tmp: Path, name: str, *args: str) -> np.ndarray:
    import soxr

    path = tmp / f"{name}.wav"
    subprocess.run(["espeak-ng", "-w", str(path), *args, TEXT], check=True, capture_output=True)
    x, sr = sf.read(path, dtype="float32")
    return soxr.resample(x, sr, SR).astype(np.float32)


needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")


# ------------------------------------------------------------------ descriptors


@pytest.mark.parametrize("f0", [90.0, 150.0, 240.0])
def test_yin_recovers_f0_of_harmonic_tone(f0: float) -> None:
    est, aper = sp.yin_f0(harmonic(f0, 0.5), SR)
    voiced = np.isfinite(est)
    assert voiced.mean() > 0.9
    assert np.median(est[voiced]) == pytest.approx(f0, rel=0.01)
    assert np.median(aper[voiced]) < 0.1


def test_yin_marks_silence_and_noise_unvoiced() -> None:
    est, _ = sp.yin_f0(np.zeros(SR // 2, dtype=np.float32), SR)
    assert np.all(np.isnan(est))
    noise = np.random.default_rng(0).normal(0, 0.1, SR).astype(np.float32)
    assert np.isfinite(sp.yin_f0(noise, SR)[0]).mean() < 0.2


def test_syllable_rate_counts_bursts() -> None:
    d = sp.prosody_descriptors(syllable_train(130.0, 4.0, 10, 0.2), SR)
    assert d["n_syllable_nuclei"] == 10
    assert d["syllable_rate"] == pytest.approx(4.0, rel=0.15)
    assert d["duration_s"] == pytest.approx(10 / 4 + 0.6, abs=0.01)
    assert d["speech_s"] == pytest.approx(2.5, abs=0.15)


def test_descriptor_basics() -> None:
    x = harmonic(200.0, 1.0, amp=0.5)
    d = sp.prosody_descriptors(x, SR)
    assert d["rms_db"] == pytest.approx(10 * np.log10(np.mean(x.astype(np.float64) ** 2)), abs=0.5)
    assert d["f0_median_hz"] == pytest.approx(200.0, rel=0.01)
    assert d["f0_range_st"] < 0.5
    assert 200 < d["spectral_centroid_hz"] < 1600  # harmonics 200..1600 Hz, falling as 1/k
    assert 0 < d["zcr"] < 0.1
    assert all(np.isfinite(d[f"mfcc_mean_{k}"]) for k in range(sp.N_MFCC))
    fb = sp.mel_filterbank(SR, 512)
    assert fb.shape == (sp.N_MELS, 257) and np.all(fb.max(axis=1) > 0.5)


def test_silent_clip_gives_nan_not_crash() -> None:
    out = sp.ProsodyBackend().predict_batch([np.zeros(SR, dtype=np.float32)])[0]
    assert np.isnan(out.dimensions["arousal_proxy"])
    assert out.descriptors["active_fraction"] == 0.0 and np.isnan(out.descriptors["f0_median_hz"])


def test_too_short_and_bad_samples_raise_audio_error() -> None:
    backend = sp.ProsodyBackend()
    backend.load()
    with pytest.raises(AudioError, match=r"clip 1 .* lasts 0\.050 s"):
        backend.predict_batch([harmonic(120, 0.5), np.zeros(800, dtype=np.float32)])
    bad = harmonic(120, 0.5)
    bad[10] = np.nan
    with pytest.raises(AudioError, match="NaN"):
        backend.predict_batch([bad])
    with pytest.raises(ConfigError, match="reference"):
        sp.ProsodyBackend(reference={"rms_db": (0.0, 0.0)})


def test_backend_is_honest_about_what_it_measures() -> None:
    b = sp.ProsodyBackend()
    out = b.predict_batch([syllable_train(120, 4.0, 6, 0.1)])[0]
    assert out.posteriors == {} and out.label is None  # no emotion categories
    assert set(out.dimensions) == {"arousal_proxy"}
    assert "not emotion" in b.info().as_dict()["measures"]


# ------------------------------------------------------------------ arousal ranking


def test_arousal_ranks_synthetic_aroused_rendition_above_neutral() -> None:
    b = sp.ProsodyBackend()
    neutral = syllable_train(110.0, 3.5, 8, 0.05)
    aroused = syllable_train(180.0, 5.5, 8, 0.2)
    out_n, out_a = b.predict_batch([neutral, aroused])
    assert out_a.dimensions["arousal_proxy"] > out_n.dimensions["arousal_proxy"] + 0.5
    assert out_a.descriptors["syllable_rate"] > out_n.descriptors["syllable_rate"]


@needs_espeak
def test_arousal_ranks_espeak_renditions(tmp_path: Path) -> None:
    neutral = espeak(tmp_path, "neutral")
    aroused = espeak(tmp_path, "aroused", "-p", "80", "-s", "230", "-a", "180")
    calm = espeak(tmp_path, "calm", "-p", "30", "-s", "130", "-a", "60")
    out = sp.ProsodyBackend().predict_batch([calm, neutral, aroused])
    a = [o.dimensions["arousal_proxy"] for o in out]
    assert a[0] < a[1] < a[2]
    d_n, d_a = out[1].descriptors, out[2].descriptors
    assert d_a["f0_median_hz"] > 1.2 * d_n["f0_median_hz"]
    assert d_a["rms_db"] > d_n["rms_db"] + 3
    assert d_a["syllable_rate"] > d_n["syllable_rate"]
    assert d_a["speech_s"] < d_n["speech_s"]

    # the contrast audit: a strong rendition pair passes, an identical pair is flagged
    desc = {"neutral": d_n, "aroused": d_a, "copy": dict(d_n)}
    res = pc.audit_pairs([("neutral", "aroused"), ("neutral", "copy"), ("neutral", "missing")], desc)
    scores = {(p.a, p.b): p.score for p in res.pairs}
    assert scores[("neutral", "aroused")] >= 5
    assert scores[("neutral", "copy")] == 0
    d = res.to_dict()
    assert d["below_threshold"] == [{"a": "neutral", "b": "copy", "score": 0}]
    assert d["skipped"][0]["b"] == "missing" and d["n_pairs"] == 2


# ------------------------------------------------------------------ contrast scoring rule


V = pc.SEMITONE_SYLLABLE  # the earlier variant, kept as a named option


def _desc(f0: float, rate: float, centroid: float, rms: float, mfcc_shift: float, dur: float) -> dict[str, float]:
    d = {"f0_median_hz": f0, "syllable_rate": rate, "spectral_centroid_hz": centroid, "rms_db": rms, "speech_s": dur}
    d.update({f"mfcc_mean_{k}": (mfcc_shift if k == 1 else 0.0) for k in range(13)})
    return d


def test_contrast_points_hand_computed() -> None:
    base = _desc(100.0, 4.0, 1000.0, -20.0, 0.0, 3.0)
    # pitch +2.5 st (2), rate +25% (2), centroid +12% (1), +4 dB (1), mfcc distance 2 (1), duration +20% (1)
    loud = _desc(100.0 * 2 ** (2.5 / 12), 5.0, 1120.0, -16.0, 2.0, 3.6)
    p = pc.contrast_score(base, loud, definition=V)
    assert p.points == {"pitch": 2, "rate": 2, "centroid": 1, "energy": 1, "mfcc": 1, "duration": 1}
    assert p.score == pc.MAX_SCORE == 8
    # pitch +1.5 st (1), rate +12% (1), centroid +5% (0), +2 dB (0), mfcc 1 (0), duration +5% (0)
    mild = _desc(100.0 * 2 ** (1.5 / 12), 4.48, 1050.0, -18.0, 1.0, 3.15)
    q = pc.contrast_score(base, mild, definition=V)
    assert q.points == {"pitch": 1, "rate": 1, "centroid": 0, "energy": 0, "mfcc": 0, "duration": 0}
    assert q.gaps["pitch"] == pytest.approx(1.5) and q.gaps["rate"] == pytest.approx(0.12)
    # symmetric, and a missing f0 earns no pitch points and is named
    assert pc.contrast_score(loud, base, definition=V).score == 8
    unvoiced = dict(loud, f0_median_hz=float("nan"))
    r = pc.contrast_score(base, unvoiced, definition=V)
    assert r.points["pitch"] == 0 and r.missing == ["pitch"] and r.score == 6


def test_contrast_rules_and_threshold_validation() -> None:
    base = _desc(100.0, 4.0, 1000.0, -20.0, 0.0, 3.0)
    other = _desc(100.0, 4.0, 1000.0, -18.0, 0.0, 3.0)
    assert pc.contrast_score(base, other, pc.ContrastRules(energy_db=1.0), definition=V).points["energy"] == 1
    with pytest.raises(ConfigError):
        pc.ContrastRules(pitch_st_1=3.0, pitch_st_2=2.0)
    with pytest.raises(ConfigError):
        pc.audit_pairs([], {}, threshold=9)


def test_pairs_from_parents() -> None:
    parents = {"src": None, "src_angry": "src", "src_sad": "src", "orphan": "gone"}
    assert pc.pairs_from_parents(parents) == [("src", "src_angry"), ("src", "src_sad")]


# ------------------------------------------------------------------ SpeechEQ definition (default)


def _seq(pitch: float, zcr: float, centroid: float, rms: float, mfcc: float, dur: float) -> dict[str, float]:
    return {
        "seq_pitch_mean_hz": pitch,
        "seq_zcr": zcr,
        "seq_centroid_hz": centroid,
        "seq_rms": rms,
        "seq_mfcc_mean": mfcc,
        "seq_duration_s": dur,
    }


def test_speecheq_points_hand_computed() -> None:
    base = _seq(120.0, 0.10, 1500.0, 0.05, -20.0, 3.0)
    # pitch +2.2 st (2), zcr +25% (2), centroid +11% (1), rms x1.5 = +3.52 dB (1), mfcc +1.2 (1), duration +15% (1)
    strong = _seq(120.0 * 2 ** (2.2 / 12), 0.125, 1665.0, 0.075, -18.8, 3.45)
    p = pc.contrast_score(base, strong)
    assert p.points == {"pitch": 2, "rate": 2, "centroid": 1, "energy": 1, "mfcc": 1, "duration": 1} and p.score == 8
    assert p.gaps["energy"] == pytest.approx(20 * np.log10(1.5)) and p.gaps["mfcc"] == pytest.approx(1.2)
    # pitch +1.2 st (1), zcr +12% (1), centroid +5% (0), rms x1.2 = 1.58 dB (0), mfcc 0.5 (0), duration +5% (0): 2 < 4 fails
    mild = _seq(120.0 * 2 ** (1.2 / 12), 0.112, 1575.0, 0.06, -19.5, 3.15)
    q = pc.contrast_score(base, mild)
    assert q.points == {"pitch": 1, "rate": 1, "centroid": 0, "energy": 0, "mfcc": 0, "duration": 0}
    res = pc.audit_pairs([("base", "strong"), ("base", "mild")], {"base": base, "strong": strong, "mild": mild})
    d = res.to_dict()
    assert d["definition"] == "speecheq" and d["below_threshold"] == [{"a": "base", "b": "mild", "score": 2}]
    assert pc.contrast_score(base, dict(strong, seq_pitch_mean_hz=float("nan"))).missing == ["pitch"]
    with pytest.raises(ConfigError):
        pc.audit_pairs([], {}, definition="nope")
    with pytest.raises(ConfigError):
        pc.contrast_score(base, strong, pc.ContrastRules())  # the variant's rules under the paper's definition


def test_speecheq_descriptors_with_librosa() -> None:
    """librosa descriptors on tones of known pitch, level and length."""
    t = np.arange(int(1.5 * SR)) / SR
    low = (0.1 * np.sin(2 * np.pi * 120 * t)).astype(np.float32)
    high = (0.2 * np.sin(2 * np.pi * 240 * t[:SR])).astype(np.float32)
    a, b = sp.speecheq_descriptors(low), sp.speecheq_descriptors(high)
    assert a["seq_pitch_mean_hz"] == pytest.approx(120, rel=0.02) and b["seq_pitch_mean_hz"] == pytest.approx(240, rel=0.02)
    assert a["seq_duration_s"] == pytest.approx(1.5) and b["seq_rms"] / a["seq_rms"] == pytest.approx(2.0, rel=0.02)
    assert a["seq_zcr"] == pytest.approx(2 * 120 / SR, rel=0.05)  # a sine crosses zero twice per period
    p = pc.contrast_score(a, b)
    assert p.gaps["pitch"] == pytest.approx(12.0, abs=0.3) and p.gaps["energy"] == pytest.approx(6.02, abs=0.2)
    silent = sp.speecheq_descriptors(np.zeros(SR, np.float32))
    assert np.isnan(silent["seq_pitch_mean_hz"]) and silent["seq_duration_s"] == 1.0
