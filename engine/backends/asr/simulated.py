"""A simulated ASR model: real sleeps, real memory, deterministic text, no weights.

Scheduling, placement and memory claims about a 40-model sweep on a GPU cluster can only be
checked by running something with the same shape: a load that takes seconds, a decode whose
time is the audio duration divided by the model's RTFx, a resident footprint, occasional
failures. This backend has exactly those properties and nothing else. It really sleeps
(``time_scale`` shrinks every sleep so that a sweep of hours runs in minutes), really allocates
and touches ``memory_mb`` of RAM while loaded, and records the device it was given and the GPU
ids Ray assigned to its process, so that tests can prove placement on logical GPUs.

Its text is a deterministic function of the clip's samples (words picked by a hash, about 2.5
words per second of audio), so two runs of the same sweep give identical rows.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from engine.backends.availability import Availability
from engine.backends.base import ASRBackend, BackendInfo, BackendOptions, EmotionOutput, SERBackend, SVBackend
from engine.data import SAMPLE_RATE
from engine.errors import AuditError, BackendUnavailable
from engine.options import option

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SimulatedOptions(BackendOptions):
    """How the stand-in behaves: how long it loads and decodes, how much memory it holds, how often it fails."""

    load_s: float = option(0.0, "seconds a load takes (before time_scale)", ge=0, le=86_400)
    rtfx: float = option(100.0, "audio seconds decoded per wall second (before time_scale)", gt=0, le=1e9)
    memory_mb: float = option(0.0, "RAM allocated and touched while loaded", ge=0, le=1e7)
    failure_prob: float = option(0.0, "probability that a batch raises (decided by a seeded hash of the batch)", ge=0, le=1)
    seed: int = option(0, "seeds the text and the failures", ge=-(2**63), le=2**63 - 1)
    time_scale: float = option(1.0, "every sleep is multiplied by this", ge=0, le=1e6)
    device: str = option("cpu", "what the runner told it ('cuda' on a GPU actor)")
    unavailable: str | None = option(None, "a reason only the loading process finds (advisory here; load() raises with it)")
    missing: str | None = option(None, "a reason any machine can see (a definite no, like a missing package)")
    trace_dir: str | None = option(None, "append one JSON line per load/batch to <trace_dir>/<pid>.jsonl")
    name: str = option("simulated", "model id recorded in BackendInfo")


_WORDS = (
    "the a of and to in is was that for it with as his on be at by had not are but from or have an they which one you were her all "
    "she there would their we him been has when who will more no if out so said what up its about into than them can only other new"
).split()


class SimulatedFailure(AuditError):
    """The batch failure that ``failure_prob`` drew."""


def ray_gpu_ids() -> list[str]:
    """GPU ids Ray gave this process ([] outside a Ray worker)."""
    try:
        import ray

        if not ray.is_initialized():
            return []
        return [str(g) for g in ray.get_gpu_ids()]
    except Exception:  # noqa: BLE001 - placement facts are informative only
        return []


class SimulatedBackend(ASRBackend):
    """Sleeps like a model of the configured load time and RTFx; see the module docstring."""

    name = "simulated"
    OPTIONS = SimulatedOptions
    options: SimulatedOptions

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        o = cls.parse_options(options)
        if o.missing:
            return Availability(False, f"simulated: {o.missing}")
        why = o.unavailable
        if why:
            return Availability(False, f"simulated: {why}", checked=False)
        return Availability(True, "simulated model (no weights)")

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._ballast: np.ndarray | None = None
        self.loaded_at: float | None = None
        self.gpu_ids: list[str] = []

    def _sleep(self, seconds: float) -> None:
        scaled = seconds * self.options.time_scale
        if scaled > 0:
            time.sleep(scaled)

    def _trace(self, event: str, **fields: Any) -> None:
        folder = self.options.trace_dir
        if not folder:
            return
        path = Path(folder) / f"{os.getpid()}.jsonl"
        record = {"event": event, "t": time.time(), "pid": os.getpid(), "model": self.options.name, "gpu_ids": self.gpu_ids, **fields}
        with path.open("a") as fh:
            fh.write(json.dumps(record) + "\n")

    def load(self) -> None:
        if self.options.unavailable:
            raise BackendUnavailable(f"simulated: {self.options.unavailable}")
        self.gpu_ids = ray_gpu_ids()
        self._sleep(self.options.load_s)
        mb = self.options.memory_mb
        if mb > 0:
            self._ballast = np.ones(int(mb * 2**20), dtype=np.uint8)  # ones: every page is touched (resident)
        self.loaded_at = time.time()
        self._trace("load", device=self.options.device, cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"))

    def close(self) -> None:
        if self.loaded_at is not None:
            self._trace("close")
        self._ballast = None
        self.loaded_at = None

    def warmup(self) -> None:
        """No first-call costs to hide; loading already slept."""

    def _digest(self, audio: np.ndarray) -> bytes:
        arr = np.ascontiguousarray(audio, dtype=np.float32)
        return hashlib.blake2b(arr.tobytes() + str(self.options.seed).encode(), digest_size=16).digest()

    def _text(self, audio: np.ndarray, sample_rate: int) -> str:
        digest = self._digest(audio)
        rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
        n = max(1, int(round(2.5 * len(audio) / sample_rate)))
        return " ".join(_WORDS[i] for i in rng.integers(0, len(_WORDS), n))

    def transcribe_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[str]:
        """Sleep for the batch's audio duration / RTFx, then return one hash-derived text per clip."""
        if self.loaded_at is None:
            raise AuditError("simulated backend: transcribe_batch before load")
        seconds = sum(len(a) for a in audios) / float(sample_rate)
        self._sleep(seconds / self.options.rtfx)
        prob = self.options.failure_prob
        if prob > 0:
            h = hashlib.blake2b(b"".join(self._digest(a) for a in audios), digest_size=8).digest()
            if int.from_bytes(h, "little") / 2**64 < prob:
                raise SimulatedFailure(f"simulated failure (failure_prob={prob:g}) on a batch of {len(audios)}")
        self._trace("batch", n=len(audios), audio_s=seconds)
        return [self._text(a, sample_rate) for a in audios]

    def info(self) -> BackendInfo:
        return BackendInfo(
            backend=self.name,
            model_id=self.options.name,
            device=self.options.device,
            dtype="simulated",
            extra={
                "gpu_ids": list(self.gpu_ids),
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "simulated": {k: getattr(self.options, k) for k in ("load_s", "rtfx", "memory_mb", "failure_prob", "seed", "time_scale")},
            },
        )


# --------------------------------------------------------------------------------------------
# SV and SER stand-ins: real features of the clip, the device they were given, the GPUs Ray gave
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SimulatedEmbedOptions(BackendOptions):
    """The SV and SER stand-ins' options."""

    dim: int = option(16, "embedding size (frequency bands)", ge=2, le=4096)
    device: str = option("auto", "torch-style device; auto is resolved at load")
    load_s: float = option(0.0, "seconds a load takes (before time_scale)", ge=0, le=86_400)
    time_scale: float = option(1.0, "every sleep is multiplied by this", ge=0, le=1e6)
    name: str = option("simulated", "model id recorded in BackendInfo")


def _band_energies(audio: np.ndarray, n: int) -> np.ndarray:
    """Log energy of the clip's spectrum in ``n`` equal frequency bands (float64)."""
    spec = np.abs(np.fft.rfft(np.asarray(audio, dtype=np.float64))) ** 2
    bands = np.array_split(spec, n)
    return np.log10(np.array([float(b.sum()) for b in bands]) + 1e-9)


class _SimulatedEmbedBase:
    """Shared by the SV and SER stand-ins: options, load (resolving ``device: auto``), info."""

    name = "simulated-embed"
    OPTIONS: ClassVar[type[BackendOptions] | None] = SimulatedEmbedOptions
    options: SimulatedEmbedOptions

    def __init__(self, **options: Any) -> None:
        self.options = SimulatedEmbedOptions.parse(options, f"{self.name} backend options")
        self.device = self.options.device
        self.gpu_ids: list[str] = []
        self.loaded = False

    def load(self) -> None:
        from engine.backends.device import resolve_device

        self.device = resolve_device(self.device)
        self.gpu_ids = ray_gpu_ids()
        scaled = self.options.load_s * self.options.time_scale
        if scaled > 0:
            time.sleep(scaled)
        self.loaded = True

    def close(self) -> None:
        self.loaded = False

    def info(self) -> BackendInfo:
        return BackendInfo(
            backend=self.name,
            model_id=self.options.name,
            device=self.device,
            dtype="float32",
            extra={"gpu_ids": list(self.gpu_ids), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")},
        )


class SimulatedSV(_SimulatedEmbedBase, SVBackend):
    """Speaker "embedding" = the clip's normalized log band energies: a function of the audio, no weights."""

    name = "simulated-sv"

    def embed_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> np.ndarray:
        if not self.loaded:
            raise AuditError("simulated-sv: embed_batch before load")
        out = []
        for a in audios:
            v = _band_energies(a, self.options.dim)
            v = v - v.mean()
            norm = float(np.linalg.norm(v))
            out.append(v / norm if norm > 0 else v)
        return np.asarray(out, dtype=np.float32)


class SimulatedSER(_SimulatedEmbedBase, SERBackend):
    """Emotion "posteriors" = a softmax of four band energies, arousal = the clip's RMS level in dB."""

    name = "simulated-ser"
    labels = ("neutral", "happy", "sad", "angry")

    def predict_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[EmotionOutput]:
        if not self.loaded:
            raise AuditError("simulated-ser: predict_batch before load")
        out = []
        for a in audios:
            e = _band_energies(a, len(self.labels))
            p = np.exp(e - e.max())
            p = p / p.sum()
            rms = float(np.sqrt(np.mean(np.square(np.asarray(a, dtype=np.float64))))) if len(a) else 0.0
            out.append(
                EmotionOutput(
                    posteriors={k: float(v) for k, v in zip(self.labels, p)},
                    dimensions={"arousal": 20.0 * float(np.log10(rms + 1e-9))},
                )
            )
        return out
