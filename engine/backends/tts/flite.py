"""CMU Flite text to speech through its command-line program (Debian package ``flite``).

Flite ships several built-in English voices (slt, rms, awb: 16 kHz; kal: 8 kHz diphones) and is
deterministic, so it gives the demo corpus speakers that sound unlike espeak-ng.

Prosody: the speaking rate uses Flite's own ``duration_stretch`` feature. Flite's f0 target
features are ignored by some voices (rms), so pitch is changed uniformly for every voice by
resampling: the waveform is synthesized ``pitch`` times longer and then played ``pitch`` times
faster, which scales f0 (and the formants with it) by ``pitch`` while keeping the requested rate.
Amplitude is a plain linear gain on the samples.
"""

from __future__ import annotations

import logging
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from engine.backends.tts.program import ProgramTTS, ProgramTTSOptions, read_wav, resample
from engine.errors import AudioError, ConfigError
from engine.options import option

log = logging.getLogger(__name__)


@lru_cache(maxsize=4)
def _version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], check=False, capture_output=True, text=True, timeout=30)
    lines = [ln.strip() for ln in out.stdout.splitlines() if "version" in ln]
    return lines[0] if lines else "unknown"


@lru_cache(maxsize=4)
def _voices(binary: str) -> tuple[str, ...]:
    out = subprocess.run([binary, "-lv"], check=False, capture_output=True, text=True, timeout=30)
    text = out.stdout.split(":", 1)[-1]
    return tuple(text.split())


@dataclass(frozen=True)
class FliteOptions(ProgramTTSOptions):
    """Flite's voice, program, output rate and deadline, and its pitch, rate and amplitude factors (1.0: unchanged)."""

    voice: str = option("slt", "the voice (flite -lv lists them), or a .flitevox file")
    binary: str = option("flite", "the program: a name looked up on PATH, or a path")
    pitch: float = option(1.0, "f0 factor (by resampling, formants move with it)", ge=0.5, le=2.0)
    rate: float = option(1.0, "speed factor; 1.2: 20 % faster than the voice's own rate", ge=0.3, le=3.0)
    amplitude: float = option(1.0, "linear gain on the samples", ge=0.0, le=10.0)


class FliteTTS(ProgramTTS):
    """Synthesize with Flite (options: :class:`FliteOptions`)."""

    name = "flite"
    OPTIONS = FliteOptions
    options: FliteOptions
    program = "flite"
    install_hint = "install the Debian/Ubuntu package 'flite' (sudo apt-get install flite)"

    def version(self) -> str:
        return _version(self.binary)

    def voices(self) -> list[str]:
        """Voice names compiled into this Flite (``flite -lv``)."""
        return list(_voices(self.binary))

    def synthesize(
        self,
        text: str,
        voice: str | None = None,
        *,
        pitch: float | None = None,
        rate: float | None = None,
        amplitude: float | None = None,
    ) -> tuple[np.ndarray, int]:
        """Return (mono float32 samples, sample rate) for ``text`` spoken by ``voice``."""
        if not text or not text.strip():
            raise AudioError("cannot synthesize empty text with flite")
        voice = voice or self.voice
        if "/" not in voice and not voice.endswith(".flitevox") and voice not in _voices(self.binary):
            # flite silently falls back to its default voice for an unknown name, so check first.
            raise ConfigError(f"flite voice '{voice}' is not built in (available: {', '.join(_voices(self.binary))})")
        fields = FliteOptions.declared()  # a factor passed here is checked as the option is
        pitch_f = self.options.pitch if pitch is None else float(fields["pitch"].check(pitch, "flite pitch"))
        rate_f = self.options.rate if rate is None else float(fields["rate"].check(rate, "flite rate"))
        gain = self.options.amplitude if amplitude is None else float(fields["amplitude"].check(amplitude, "flite amplitude"))
        stretch = pitch_f / rate_f  # shortened again by the pitch resampling below
        with tempfile.TemporaryDirectory(prefix="flite-") as tmp:
            text_path = Path(tmp) / "in.txt"
            out_path = Path(tmp) / "out.wav"
            text_path.write_text(text + "\n", encoding="utf-8")
            cmd = [self.binary, "-voice", voice]
            if abs(stretch - 1.0) > 1e-9:
                cmd += ["--setf", f"duration_stretch={stretch:.6f}"]
            cmd += ["-f", str(text_path), "-o", str(out_path)]
            proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=self.timeout_s)
            if proc.returncode != 0 or not out_path.exists() or out_path.stat().st_size <= 44:
                raise AudioError(f"flite failed (exit {proc.returncode}) for voice '{voice}': {proc.stderr.strip()[:300]}")
            samples, sr = read_wav(out_path)
        out_sr = int(self.sample_rate) if self.sample_rate else sr
        if abs(pitch_f - 1.0) > 1e-9 or out_sr != sr:
            # Treating the samples as recorded at sr * pitch raises f0 by ``pitch``.
            samples = resample(samples, sr * pitch_f, out_sr)
        if gain != 1.0:
            samples = (samples * np.float32(gain)).astype(np.float32)
        log.debug("flite %s: %.2f s for %r", voice, len(samples) / out_sr, text[:40])
        return samples, out_sr
