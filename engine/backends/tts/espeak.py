"""espeak-ng text to speech through its command-line program (Debian package ``espeak-ng``).

espeak-ng is a formant synthesizer: offline, fast and deterministic (the same text, voice and
flags give byte-identical WAV output), which is what the demo corpus and the synthetic-voice
probe need. It is driven through the binary rather than a Python binding so that nothing beyond
the system package is required.
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

__all__ = ["EspeakTTS", "resample"]

log = logging.getLogger(__name__)


@lru_cache(maxsize=4)
def _version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], check=False, capture_output=True, text=True, timeout=30)
    first = out.stdout.strip().splitlines()[0] if out.stdout.strip() else "unknown"
    return first.split("  Data at:")[0].strip()


@lru_cache(maxsize=4)
def _voices(binary: str) -> tuple[str, ...]:
    out = subprocess.run([binary, "--voices"], check=False, capture_output=True, text=True, timeout=30)
    names: list[str] = []
    for line in out.stdout.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 5:
            names.append(parts[1])  # language/voice code accepted by -v (e.g. en-gb-x-rp)
            names.append(parts[4].split("/")[-1])  # file name (e.g. en-GB-x-rp)
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class EspeakOptions(ProgramTTSOptions):
    """espeak-ng's voice, program, output rate and deadline, and its pitch, rate and amplitude flags (null: espeak-ng's own)."""

    voice: str = option("en-us", "the voice (espeak-ng --voices lists them)")
    binary: str = option("espeak-ng", "the program: a name looked up on PATH, or a path")
    pitch: int | None = option(None, "-p: 0-99, espeak-ng's default 50; about +10 per 10 % higher f0", ge=0, le=99)
    rate: int | None = option(None, "-s: words per minute, espeak-ng's default 175", ge=80, le=450)
    amplitude: int | None = option(None, "-a: 0-200, espeak-ng's default 100", ge=0, le=200)


class EspeakTTS(ProgramTTS):
    """Synthesize with espeak-ng (options: :class:`EspeakOptions`; native output 22050 Hz)."""

    name = "espeak-ng"
    OPTIONS = EspeakOptions
    options: EspeakOptions
    program = "espeak-ng"
    install_hint = "install the Debian/Ubuntu packages 'espeak-ng' and 'espeak-ng-data' (sudo apt-get install espeak-ng)"

    def version(self) -> str:
        return _version(self.binary)

    def voices(self) -> list[str]:
        """Voice codes this installation accepts for ``-v``."""
        return list(_voices(self.binary))

    def command(
        self,
        voice: str,
        out_path: Path,
        pitch: int | None = None,
        rate: int | None = None,
        amplitude: int | None = None,
    ) -> list[str]:
        """The command line used (text is passed on stdin so it can never be read as a flag)."""
        cmd = [self.binary, "-v", voice, "-w", str(out_path)]
        o = self.options
        fields = EspeakOptions.declared()
        settings = (("pitch", "-p", pitch, o.pitch), ("rate", "-s", rate, o.rate), ("amplitude", "-a", amplitude, o.amplitude))
        for key, flag, given, configured in settings:  # a value passed here is checked as the option is
            value = configured if given is None else fields[key].check(given, f"{self.name} {key}")
            if value is not None:
                cmd += [flag, str(value)]
        cmd.append("--stdin")
        return cmd

    def synthesize(
        self,
        text: str,
        voice: str | None = None,
        *,
        pitch: int | None = None,
        rate: int | None = None,
        amplitude: int | None = None,
    ) -> tuple[np.ndarray, int]:
        """Return (mono float32 samples, sample rate) for ``text`` spoken by ``voice``."""
        if not text or not text.strip():
            raise AudioError("cannot synthesize empty text with espeak-ng")
        voice = voice or self.voice
        with tempfile.TemporaryDirectory(prefix="espeak-") as tmp:
            out_path = Path(tmp) / "out.wav"
            cmd = self.command(voice, out_path, pitch=pitch, rate=rate, amplitude=amplitude)
            proc = subprocess.run(cmd, input=text, check=False, capture_output=True, text=True, timeout=self.timeout_s)
            if proc.returncode != 0 or not out_path.exists() or out_path.stat().st_size <= 44:
                if voice not in _voices(self.binary):
                    raise ConfigError(f"espeak-ng voice '{voice}' is not installed; list voices with `espeak-ng --voices=en`")
                raise AudioError(f"espeak-ng failed (exit {proc.returncode}) for voice '{voice}': {proc.stderr.strip()[:300]}")
            samples, sr = read_wav(out_path)
        if self.sample_rate and sr != int(self.sample_rate):
            samples, sr = resample(samples, sr, int(self.sample_rate)), int(self.sample_rate)
        log.debug("espeak-ng %s: %.2f s for %r", voice, len(samples) / sr, text[:40])
        return samples, sr
