"""What the command-line TTS backends (espeak-ng, Flite) share: finding the program, its version
and voice list, reading its WAV output, and resampling.

Both synthesizers are driven through their binaries so that nothing beyond the Debian package is
required; a subclass only says how to ask its program for the version and the voices, and how to
build the command for one utterance.
"""

from __future__ import annotations

import shutil
from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, cast

import numpy as np

from engine.backends.base import BackendInfo, BackendOptions, TTSBackend
from engine.errors import BackendUnavailable
from engine.options import option


def read_wav(path: Path) -> tuple[np.ndarray, int]:
    """Read a synthesizer's WAV output as mono float32 (channels averaged)."""
    import soundfile as sf

    samples, sr = sf.read(str(path), dtype="float32", always_2d=True)
    return np.ascontiguousarray(samples.mean(axis=1), dtype=np.float32), int(sr)


def resample(samples: np.ndarray, sr_in: float, sr_out: int) -> np.ndarray:
    """High-quality, deterministic resampling with soxr (``sr_in`` may be fractional)."""
    import soxr

    if sr_in == sr_out:
        return np.asarray(samples, dtype=np.float32)
    return np.asarray(soxr.resample(np.asarray(samples, dtype=np.float32), sr_in, sr_out), dtype=np.float32)


@dataclass(frozen=True)
class ProgramTTSOptions(BackendOptions):
    """What every command-line TTS backend takes: the voice, the program, the output rate and a deadline."""

    numbers_as_given: ClassVar[bool] = False

    voice: str = option(doc="the voice (the backend's voices() lists them)")
    binary: str = option(doc="the program: a name looked up on PATH, or a path")
    sample_rate: int | None = option(None, "resample the output to this rate; null: the voice's own rate", ge=8000, le=384_000)
    timeout_s: float = option(60.0, "seconds the program may take per utterance", gt=0, le=86_400)


class ProgramTTS(TTSBackend):
    """A TTS backend that runs a synthesizer program found on ``PATH`` (options: a :class:`ProgramTTSOptions` record)."""

    #: program looked up on PATH when the ``binary`` option is not given
    program: str = ""
    options: ProgramTTSOptions  # the backend's own record (a subclass)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.voice: str = self.options.voice
        self.binary_name: str = self.options.binary
        self.sample_rate: int | None = self.options.sample_rate
        self.timeout_s: float = self.options.timeout_s
        self._binary: str | None = None

    def load(self) -> None:
        """Find the program; raise ``BackendUnavailable`` with the package to install if absent."""
        found = shutil.which(self.binary_name)
        if found is None:
            raise BackendUnavailable(f"{self.name} program '{self.binary_name}' not found on PATH; {self.install_hint}")
        self._binary = found

    @property
    def binary(self) -> str:
        if self._binary is None:
            self.load()
        return cast(str, self._binary)

    @abstractmethod
    def version(self) -> str:
        """The program's version line (recorded with every synthesized clip)."""

    @abstractmethod
    def voices(self) -> list[str]:
        """Voice names this installation accepts."""

    def info(self) -> BackendInfo:
        return BackendInfo(
            backend=self.name,
            model_id=f"{self.name}:{self.voice}",
            extra={"version": self.version() if self._binary else "not loaded"},
        )
