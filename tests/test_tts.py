"""The offline TTS backends (espeak-ng, Flite) produce real, controllable, deterministic speech."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends.tts.espeak import EspeakTTS
from engine.backends.tts.flite import FliteTTS
from engine.errors import AudioError, BackendUnavailable, ConfigError

SENTENCE = "Mrs. Brown said the colour was okay in 2016."


def median_f0(x: np.ndarray, sr: int) -> float:
    """Median autocorrelation pitch over voiced 40 ms frames (good enough for synthetic speech)."""
    x = np.asarray(x, np.float64)
    fr, hop = int(0.04 * sr), int(0.02 * sr)
    lo, hi = int(sr / 400), int(sr / 60)
    peak = np.abs(x).max()
    f0s = []
    for i in range(0, len(x) - fr, hop):
        w = x[i : i + fr]
        if np.sqrt(np.mean(w**2)) < 0.05 * peak:
            continue
        w = w - w.mean()
        ac = np.correlate(w, w, "full")[fr - 1 :]
        k = lo + int(np.argmax(ac[lo:hi]))
        if ac[k] > 0.4 * ac[0]:
            f0s.append(sr / k)
    return float(np.median(f0s))


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.asarray(x, np.float64) ** 2)))


@pytest.mark.parametrize("voice", ["en-us", "en-gb-x-rp", "en-gb-scotland", "en-029", "en-us-nyc"])
def test_espeak_voices_speak(voice: str) -> None:
    x, sr = EspeakTTS().synthesize(SENTENCE, voice)
    assert sr == 22050
    assert x.dtype == np.float32 and x.ndim == 1
    assert 1.5 < len(x) / sr < 8.0  # nine words
    assert rms(x) > 0.02


@pytest.mark.parametrize("voice,native_sr", [("slt", 16000), ("rms", 16000), ("awb", 16000), ("kal", 8000)])
def test_flite_voices_speak(voice: str, native_sr: int) -> None:
    x, sr = FliteTTS().synthesize(SENTENCE, voice)
    assert sr == native_sr
    assert x.dtype == np.float32 and x.ndim == 1
    assert 1.5 < len(x) / sr < 8.0
    assert rms(x) > 0.01


def test_espeak_is_deterministic_and_resamples() -> None:
    tts = EspeakTTS(sample_rate=16000)
    a, sr = tts.synthesize("Dr. Patel paid forty dollars.", "en-us")
    b, _ = tts.synthesize("Dr. Patel paid forty dollars.", "en-us")
    assert sr == 16000
    assert np.array_equal(a, b)


def test_espeak_pitch_and_rate_flags() -> None:
    tts = EspeakTTS()
    low, sr = tts.synthesize(SENTENCE, "en-us", pitch=30)
    high, _ = tts.synthesize(SENTENCE, "en-us", pitch=80)
    assert median_f0(high, sr) > 1.3 * median_f0(low, sr)
    slow, _ = tts.synthesize(SENTENCE, "en-us", rate=120)
    fast, _ = tts.synthesize(SENTENCE, "en-us", rate=300)
    assert len(fast) < 0.6 * len(slow)
    loud, _ = tts.synthesize(SENTENCE, "en-us", amplitude=150)
    quiet, _ = tts.synthesize(SENTENCE, "en-us", amplitude=50)
    assert rms(loud) > 2 * rms(quiet)


def test_flite_pitch_keeps_duration_and_rate_changes_it() -> None:
    tts = FliteTTS(sample_rate=16000)
    base, sr = tts.synthesize(SENTENCE, "rms")  # rms ignores Flite's own f0 targets
    up, _ = tts.synthesize(SENTENCE, "rms", pitch=1.25)
    assert sr == 16000
    assert abs(len(up) - len(base)) / len(base) < 0.03
    ratio = median_f0(up, sr) / median_f0(base, sr)
    assert 1.15 < ratio < 1.35
    fast, _ = tts.synthesize(SENTENCE, "rms", rate=1.5)
    assert 0.55 < len(fast) / len(base) < 0.8
    half, _ = tts.synthesize(SENTENCE, "rms", amplitude=0.5)
    assert rms(half) == pytest.approx(0.5 * rms(base), rel=0.01)


def test_flite_is_deterministic() -> None:
    a, _ = FliteTTS().synthesize("Is everything OK with the delivery?", "slt", pitch=0.85, rate=0.8)
    b, _ = FliteTTS().synthesize("Is everything OK with the delivery?", "slt", pitch=0.85, rate=0.8)
    assert np.array_equal(a, b)


def test_missing_programs_name_the_package() -> None:
    with pytest.raises(BackendUnavailable, match="apt-get install espeak-ng"):
        EspeakTTS(binary="no-such-espeak-binary").load()
    with pytest.raises(BackendUnavailable, match="apt-get install flite"):
        FliteTTS(binary="no-such-flite-binary").synthesize("hello there")


def test_bad_inputs_are_clear_errors() -> None:
    with pytest.raises(AudioError, match="empty text"):
        EspeakTTS().synthesize("   ")
    with pytest.raises(AudioError, match="empty text"):
        FliteTTS().synthesize("")
    with pytest.raises(ConfigError, match="pitch"):
        EspeakTTS().synthesize("hello", pitch=150)
    with pytest.raises(ConfigError, match="rate"):
        FliteTTS().synthesize("hello", rate=0.0)
    with pytest.raises(ConfigError, match="not built in"):
        FliteTTS().synthesize("hello", "no-such-voice")
    with pytest.raises(ConfigError, match="not installed"):
        EspeakTTS().synthesize("hello", "zzz-nonexistent")


def test_info_and_voice_listing() -> None:
    e = EspeakTTS(voice="en-gb-x-rp")
    e.load()
    assert {"en-us", "en-gb-x-rp", "en-029", "en-us-nyc", "en-gb-scotland"} <= set(e.voices())
    info = e.info()
    assert info.backend == "espeak-ng" and info.model_id == "espeak-ng:en-gb-x-rp"
    assert "1." in str(info.extra["version"])
    f = FliteTTS(voice="awb")
    f.load()
    assert {"slt", "rms", "awb", "kal"} <= set(f.voices())
    assert f.info().model_id == "flite:awb" and "flite" in str(f.info().extra["version"])
