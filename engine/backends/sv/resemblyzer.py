"""Resemblyzer: the GE2E speaker encoder that ships inside the ``resemblyzer`` package (CPU).

It needs no download, so it is the speaker-verification backend of the offline demo. Each clip
is volume-normalized and its long silences removed by webrtcvad (resemblyzer's own
preprocessing) before embedding; a clip with too little voiced audio left raises ``AudioError``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.backends.base import BackendInfo, BackendOptions, SVBackend
from engine.backends.bundled import verify_package_weights
from engine.backends.device import resolve_device
from engine.data import SAMPLE_RATE
from engine.errors import AudioError, BackendUnavailable
from engine.options import option

log = logging.getLogger(__name__)

EMBED_DIM = 256


@dataclass(frozen=True)
class ResemblyzerOptions(BackendOptions):
    """The GE2E speaker encoder's device, weights, threads and how much voiced audio a clip needs."""

    device: str = option("auto", "torch device; auto: CUDA when the process has a GPU (resolved at load)")
    min_speech_s: float = option(0.5, "seconds of voiced audio a clip needs after silence trimming", ge=0, le=3_600)
    trim_silence: bool = option(True, "remove long silences with webrtcvad (resemblyzer's preprocessing)")
    weights: str | None = option(None, "a custom pretrained.pt; null: the bundled one")
    num_threads: int | None = option(
        None, "torch intra-op threads for this process (1 when several actors share few cores); null: torch's", ge=1, le=1_024
    )


class ResemblyzerBackend(SVBackend):
    """GE2E d-vectors, (n, 256) float32, L2-normalized by the encoder (options: :class:`ResemblyzerOptions`)."""

    name = "resemblyzer"
    OPTIONS = ResemblyzerOptions
    options: ResemblyzerOptions

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        o = self.options
        self.device = o.device  # resolved at load (engine/backends/device.py)
        self.min_speech_s = o.min_speech_s
        self.trim_silence = o.trim_silence
        self.weights = o.weights
        self.num_threads = o.num_threads
        self._encoder: Any = None

    def load(self) -> None:
        self.device = resolve_device(self.device)
        try:
            from resemblyzer import VoiceEncoder
        except ImportError as exc:
            hint = (
                "pip install 'setuptools<81' (webrtcvad imports pkg_resources)"
                if "pkg_resources" in str(exc)
                else "pip install resemblyzer webrtcvad 'setuptools<81'"
            )
            raise BackendUnavailable(f"resemblyzer cannot be imported ({exc}); fix: {hint}") from exc
        if self.weights is None:
            verify_package_weights("resemblyzer")  # the bundled pretrained.pt, as recorded for the pinned release
        if self.num_threads:
            import torch

            torch.set_num_threads(self.num_threads)
        try:
            self._encoder = VoiceEncoder(device=self.device, verbose=False, weights_fpath=self.weights)
        except (OSError, RuntimeError) as exc:
            raise BackendUnavailable(f"resemblyzer encoder could not load on {self.device!r}: {exc}") from exc

    def info(self) -> BackendInfo:
        return BackendInfo(
            backend=self.name,
            model_id=str(self.weights or "resemblyzer/pretrained.pt (GE2E)"),
            device=self.device,
            extra={"embedding_dim": EMBED_DIM, "min_speech_s": self.min_speech_s, "trim_silence": self.trim_silence},
        )

    def _prepare(self, audio: np.ndarray, sample_rate: int, index: int) -> np.ndarray:
        from resemblyzer import preprocess_wav
        from resemblyzer.audio import normalize_volume
        from resemblyzer.hparams import audio_norm_target_dBFS

        x = np.asarray(audio, dtype=np.float32).reshape(-1)
        if not np.all(np.isfinite(x)):
            raise AudioError(f"clip {index} in the batch contains NaN or infinite samples")
        if sample_rate != SAMPLE_RATE:
            import soxr

            x = soxr.resample(x, sample_rate, SAMPLE_RATE).astype(np.float32)
        if len(x) < 0.1 * SAMPLE_RATE:
            raise AudioError(
                f"clip {index} in the batch lasts {len(x) / SAMPLE_RATE:.3f} s; resemblyzer needs at least {self.min_speech_s} s of speech"
            )
        x = np.clip(x, -1.0, 1.0)
        wav = preprocess_wav(x) if self.trim_silence else normalize_volume(x, audio_norm_target_dBFS, increase_only=True)
        speech_s = len(wav) / SAMPLE_RATE
        if speech_s < self.min_speech_s:
            raise AudioError(
                f"clip {index} in the batch has {speech_s:.2f} s of speech after silence trimming; resemblyzer "
                f"needs at least {self.min_speech_s} s (option min_speech_s)"
            )
        return wav

    def embed_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> np.ndarray:
        if self._encoder is None:
            self.load()
        wavs = [self._prepare(a, sample_rate, i) for i, a in enumerate(audios)]
        if not wavs:
            return np.zeros((0, EMBED_DIM), dtype=np.float32)
        return np.stack([np.asarray(self._encoder.embed_utterance(w), dtype=np.float32) for w in wavs])

    def close(self) -> None:
        self._encoder = None
