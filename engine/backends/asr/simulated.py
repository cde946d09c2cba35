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
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.availability import Availability
from engine.backends.base import ASRBackend, BackendInfo, EmotionOutput, SERBackend, SVBackend
from engine.backends.bundled import check_options
from engine.data import SAMPLE_RATE
from engine.errors import AuditError, BackendUnavailable, ConfigError

log = logging.getLogger(__name__)

_DEFAULTS: dict[str, Any] = {
    "load_s": 0.0,  # seconds a load takes (before time_scale)
    "rtfx": 100.0,  # audio seconds decoded per wall second (before time_scale)
    "memory_mb": 0.0,  # RAM allocated and touched while loaded
    "failure_prob": 0.0,  # probability that a batch raises (decided by a seeded hash of the batch)
    "seed": 0,
    "time_scale": 1.0,  # every sleep is multiplied by this
    "device": "cpu",  # what the runner told it ('cuda' on a GPU actor)
    "unavailable": None,  # a reason only the loading process finds (advisory here; load() raises with it)
    "missing": None,  # a reason any machine can see (a definite "no", like a missing package)
    "trace_dir": None,  # append one JSON line per load/batch to <trace_dir>/<pid>.jsonl
    "name": "simulated",  # model id recorded in BackendInfo
}

_WORDS = (
    "the a of and to in is was that for it with as his on be at by had not are but from or have an they which one you were her all "
    "she there would their we him been has when who will more no if out so said what up its about into than them can only other new"
).split()


class SimulatedFailure(AuditError):
    """The batch failure that ``failure_prob`` drew."""


def _number(name: str, value: Any, minimum: float = 0.0, strict: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum or (strict and value <= minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise ConfigError(f"simulated backend: option '{name}' must be a number {bound}, got {value!r}")
    return float(value)


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

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        if options.get("missing"):
            return Availability(False, f"simulated: {options['missing']}")
        why = options.get("unavailable")
        if why:
            return Availability(False, f"simulated: {why}", checked=False)
        return Availability(True, "simulated model (no weights)")

    def __init__(self, **options: Any) -> None:
        check_options(self.name, options, list(_DEFAULTS))
        merged = {**_DEFAULTS, **options}
        _number("load_s", merged["load_s"])
        _number("rtfx", merged["rtfx"], strict=True)
        _number("memory_mb", merged["memory_mb"])
        prob = _number("failure_prob", merged["failure_prob"])
        if prob > 1:
            raise ConfigError(f"simulated backend: option 'failure_prob' must be in [0, 1], got {prob!r}")
        _number("time_scale", merged["time_scale"])
        if not isinstance(merged["seed"], int) or isinstance(merged["seed"], bool):
            raise ConfigError(f"simulated backend: option 'seed' must be an integer, got {merged['seed']!r}")
        super().__init__(**merged)
        self._ballast: np.ndarray | None = None
        self.loaded_at: float | None = None
        self.gpu_ids: list[str] = []

    def _sleep(self, seconds: float) -> None:
        scaled = seconds * float(self.options["time_scale"])
        if scaled > 0:
            time.sleep(scaled)

    def _trace(self, event: str, **fields: Any) -> None:
        folder = self.options["trace_dir"]
        if not folder:
            return
        path = Path(str(folder)) / f"{os.getpid()}.jsonl"
        record = {"event": event, "t": time.time(), "pid": os.getpid(), "model": self.options["name"], "gpu_ids": self.gpu_ids, **fields}
        with path.open("a") as fh:
            fh.write(json.dumps(record) + "\n")

    def load(self) -> None:
        if self.options["unavailable"]:
            raise BackendUnavailable(f"simulated: {self.options['unavailable']}")
        self.gpu_ids = ray_gpu_ids()
        self._sleep(float(self.options["load_s"]))
        mb = float(self.options["memory_mb"])
        if mb > 0:
            self._ballast = np.ones(int(mb * 2**20), dtype=np.uint8)  # ones: every page is touched (resident)
        self.loaded_at = time.time()
        self._trace("load", device=self.options["device"], cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"))

    def close(self) -> None:
        if self.loaded_at is not None:
            self._trace("close")
        self._ballast = None
        self.loaded_at = None

    def warmup(self) -> None:
        """No first-call costs to hide; loading already slept."""

    def _digest(self, audio: np.ndarray) -> bytes:
        arr = np.ascontiguousarray(audio, dtype=np.float32)
        return hashlib.blake2b(arr.tobytes() + str(self.options["seed"]).encode(), digest_size=16).digest()

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
        self._sleep(seconds / float(self.options["rtfx"]))
        prob = float(self.options["failure_prob"])
        if prob > 0:
            h = hashlib.blake2b(b"".join(self._digest(a) for a in audios), digest_size=8).digest()
            if int.from_bytes(h, "little") / 2**64 < prob:
                raise SimulatedFailure(f"simulated failure (failure_prob={prob:g}) on a batch of {len(audios)}")
        self._trace("batch", n=len(audios), audio_s=seconds)
        return [self._text(a, sample_rate) for a in audios]

    def info(self) -> BackendInfo:
        return BackendInfo(
            backend=self.name,
            model_id=str(self.options["name"]),
            device=str(self.options["device"]),
            dtype="simulated",
            extra={
                "gpu_ids": list(self.gpu_ids),
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "simulated": {k: self.options[k] for k in ("load_s", "rtfx", "memory_mb", "failure_prob", "seed", "time_scale")},
            },
        )


# --------------------------------------------------------------------------------------------
# SV and SER stand-ins: real features of the clip, the device they were given, the GPUs Ray gave
# --------------------------------------------------------------------------------------------

_EMBED_DEFAULTS: dict[str, Any] = {"dim": 16, "device": "auto", "load_s": 0.0, "time_scale": 1.0, "name": "simulated"}


def _band_energies(audio: np.ndarray, n: int) -> np.ndarray:
    """Log energy of the clip's spectrum in ``n`` equal frequency bands (float64)."""
    spec = np.abs(np.fft.rfft(np.asarray(audio, dtype=np.float64))) ** 2
    bands = np.array_split(spec, n)
    return np.log10(np.array([float(b.sum()) for b in bands]) + 1e-9)


class _SimulatedEmbedBase:
    """Shared by the SV and SER stand-ins: options, load (resolving ``device: auto``), info."""

    name = "simulated-embed"

    def __init__(self, **options: Any) -> None:
        check_options(self.name, options, list(_EMBED_DEFAULTS))
        merged = {**_EMBED_DEFAULTS, **options}
        if not isinstance(merged["dim"], int) or isinstance(merged["dim"], bool) or merged["dim"] < 2:
            raise ConfigError(f"{self.name}: option 'dim' must be an integer >= 2, got {merged['dim']!r}")
        _number("load_s", merged["load_s"])
        _number("time_scale", merged["time_scale"])
        self.options = merged
        self.device = str(merged["device"])
        self.gpu_ids: list[str] = []
        self.loaded = False

    def load(self) -> None:
        from engine.backends.device import resolve_device

        self.device = resolve_device(self.device)
        self.gpu_ids = ray_gpu_ids()
        scaled = float(self.options["load_s"]) * float(self.options["time_scale"])
        if scaled > 0:
            time.sleep(scaled)
        self.loaded = True

    def close(self) -> None:
        self.loaded = False

    def info(self) -> BackendInfo:
        return BackendInfo(
            backend=self.name,
            model_id=str(self.options["name"]),
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
            v = _band_energies(a, int(self.options["dim"]))
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
