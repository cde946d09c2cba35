"""What the command-line TTS backends (espeak-ng, Flite) share: finding the program, its version
and voice list, reading its WAV output, and resampling.

Both synthesizers are driven through their binaries so that nothing beyond the Debian package is
required; a subclass only says how to ask its program for the version and the voices, and how to
build the command for one utterance.
"""

from __future__ import annotations

import shutil
from abc import abstractmethod
from pathlib import Path
from typing import Any, cast

import numpy as np

from engine.backends.base import BackendInfo, TTSBackend
from engine.errors import BackendUnavailable


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


class ProgramTTS(TTSBackend):
    """A TTS backend that runs a synthesizer program found on ``PATH``.

    Common options: ``voice`` (default :attr:`default_voice`), ``binary`` (program name or path),
    ``sample_rate`` (resample the output to this rate), ``timeout_s`` (per utterance).
    """

    #: program looked up on PATH when the ``binary`` option is not given
    program: str = ""
    default_voice: str = ""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.voice: str = str(options.get("voice", self.default_voice))
        self.binary_name: str = str(options.get("binary", self.program))
        self.sample_rate: int | None = options.get("sample_rate")
        self.timeout_s: float = float(options.get("timeout_s", 60.0))
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
