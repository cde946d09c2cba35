"""Backend interfaces. A backend is constructed from its options, loads weights in ``load``,
and processes a batch of decoded mono 16 kHz float32 clips."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from engine.backends.availability import Availability, install_hint, missing_modules
from engine.data import SAMPLE_RATE
from engine.errors import ConfigError
from engine.options import Options


@dataclass(frozen=True)
class BackendInfo:
    """How numbers were made: travels with every result (device, dtype, batch size...)."""

    backend: str
    model_id: str
    device: str = "cpu"
    dtype: str = "float32"
    batch_size: int = 1
    extra: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "model_id": self.model_id,
            "device": self.device,
            "dtype": self.dtype,
            "batch_size": self.batch_size,
            **dict(self.extra),
        }


def package_versions(*distributions: str) -> dict[str, str]:
    """``{<name>_version: version}`` for each installed distribution (recorded with every result;
    an absent one is left out rather than guessed)."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str] = {}
    for dist in distributions:
        try:
            out[f"{dist.replace('-', '_')}_version"] = version(dist)
        except PackageNotFoundError:
            continue
    return out


UNSEEDED = 0xFFFFFFFF
"""Left out of :func:`clip_seed`'s range: CTranslate2 reads this seed as "seed from the system's entropy"."""


def clip_seed(seed: int, clip: np.ndarray) -> int:
    """The seed of one clip's random draws (sampled decoding): the run's ``seed`` and the clip's
    float32 samples, nothing else, so a clip's words never depend on what else is decoded."""
    digest = hashlib.sha256(int(seed).to_bytes(8, "little", signed=False))
    digest.update(np.ascontiguousarray(clip, dtype=np.float32).tobytes())
    return int.from_bytes(digest.digest()[:8], "little") % UNSEEDED


class BackendOptions(Options):
    """Base of every backend's options record (engine/options.py).

    Float options keep an integer as written: a backend's options reach response caches,
    judges' answer digests and ``info()`` as given, and existing caches and run directories
    must keep matching them.
    """

    numbers_as_given: ClassVar[bool] = True
    noun: ClassVar[str] = "option"


class Backend(ABC):
    """Common life cycle: ``__init__(**options)`` is cheap, ``load()`` does the heavy work.

    A backend declares its options once, as a frozen record (``OPTIONS``, a :class:`BackendOptions`
    subclass); ``__init__`` checks the given options against it (unknown keys, types, ranges, NaN)
    and keeps the record as ``self.options``.
    """

    name: str = "backend"
    #: The backend's options record (every built-in backend declares one); None only for a plug-in that
    #: declares none (its options stay the dict it was given, unchecked).
    OPTIONS: ClassVar[type[BackendOptions] | None] = None
    options: Any
    #: Modules the backend imports when it loads, and the pip extra that provides them.
    requires: ClassVar[tuple[str, ...]] = ()
    extra: ClassVar[str] = "core"
    #: The backend computes on the CPU only (hand-made features, no model a GPU would speed up):
    #: runners never give its actors a GPU, and ``device`` other than cpu/auto is refused.
    cpu_only: ClassVar[bool] = False

    def __init__(self, **options: Any) -> None:
        self.options = self.parse_options(options) if self.OPTIONS is not None else dict(options)
        type(self).check_device(options)

    @classmethod
    def parse_options(cls, options: Mapping[str, Any]) -> Any:
        """The backend's options record for ``options`` (errors name the backend and the key)."""
        if cls.OPTIONS is None:
            return dict(options)
        return cls.OPTIONS.parse(options, f"{cls.name} backend options")

    @classmethod
    def check_device(cls, options: Mapping[str, Any], placement: Mapping[str, Any] | None = None, where: str = "") -> None:
        """Refuse a GPU for a CPU-only backend (``device: cuda``, ``num_gpus`` > 0), naming the backend and
        the option, so a run never reserves a GPU that a CPU computation would leave idle."""
        if not cls.cpu_only:
            return
        at = f"{where}: " if where else ""
        device = options.get("device")
        if device is not None and str(device) not in ("cpu", "auto"):
            raise ConfigError(
                f"{at}backend '{cls.name}' computes on the CPU only: option 'device' must be cpu or auto (or left out), got {device!r}"
            )
        gpus = (placement or {}).get("num_gpus")
        if gpus:
            raise ConfigError(f"{at}backend '{cls.name}' computes on the CPU only: option 'num_gpus' must be 0 (or left out), got {gpus!r}")

    @classmethod
    def availability(cls, options: Mapping[str, Any], extra: str | None = None) -> Availability:
        """Can this backend run with ``options`` here? Cheap: no weights loaded, no network. A missing
        package and a problem with the weights are both named (the weights are checked even when a
        package is missing: they are files)."""
        missing = missing_modules(cls.requires)
        need = f"needs {', '.join(missing)}: {install_hint(extra or cls.extra)}"
        try:
            weights = cls.check_weights(options)
        except ConfigError as exc:
            weights = Availability.refused([str(exc)])
        except ImportError:  # a check that needs the missing package itself
            return Availability.refused([need])
        if not missing:
            return weights
        rest = list(weights.problems) or ([weights.reason] if not weights.runnable else [])
        return Availability.refused([need, *rest])

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        """Whether the weights (or endpoint) the options name can be had here; backends override it
        (a declared backend reads ``cls.parse_options(options)``: a bad option is refused by name)."""
        return Availability(True, "no weights to fetch")

    @abstractmethod
    def load(self) -> None:
        """Load weights; raise ``BackendUnavailable`` with a fix-it message when impossible."""

    def close(self) -> None:
        """Release resources (GPU memory, sessions)."""

    @abstractmethod
    def info(self) -> BackendInfo:
        """Facts to record beside every number this backend produces."""


@dataclass(frozen=True)
class AsrCapabilities:
    """What an ASR backend can do, declared once on its class (``ASRBackend.capabilities``), so code
    asks the capability and never tests a backend's name; the family table and the lists of hosted
    backends are derived from these declarations (``engine/backends/capabilities.py``)."""

    word_timestamps: bool = False
    """``transcribe_with_word_timestamps(audio)`` gives per-word times (the probes' ``whisper`` word timings)."""
    positive_control: bool = False
    """Answers from the benchmark's references: probes must flag it, and it may never serve as an independent listener."""
    hosted: bool = False
    """Sends audio to a vendor's API (credentials, cost, a response cache) rather than running a model here."""
    families: tuple[str, ...] = ()
    """The model families (``engine/backends/asr/families``) whose registry entries this backend runs."""


class ASRBackend(Backend):
    """Speech recognition: audio in, raw text out (never normalized).

    A backend that exposes per-clip confidences sets ``last_confidences`` in ``transcribe_batch``:
    one mapping per clip with keys from ``engine.data.CONFIDENCE_COLUMNS`` (or None for a clip
    without them). Runners copy them into the result rows; other backends leave it None.
    """

    last_confidences: list[dict[str, float] | None] | None = None

    #: Options whose value names another registry model (the registry resolves them to
    #: ``{name, backend, options}`` when it builds a spec, so backends never read the registry).
    model_options: ClassVar[tuple[str, ...]] = ()
    #: What the backend can do (word timestamps, positive control, hosted, families): asked, never its name.
    capabilities: ClassVar[AsrCapabilities] = AsrCapabilities()

    @classmethod
    def bind_dataset(
        cls, options: Mapping[str, Any], source: str, reader: str, reader_options: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Options for a run over the dataset at ``source`` (opened by ``reader`` with ``reader_options``);
        a backend that needs the run's data (the memorizer control indexes it) fills them in here,
        so runners need no special cases."""
        return dict(options)

    @classmethod
    def delegates_to(cls, options: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
        """The backend and options whose rows this backend's are, for a wrapper that only adds failures or
        delays (the fault-injection backend); None (default) for a backend that makes its own rows. A run
        store records the inner identity, so a unit finished under the wrapper stays done without it."""
        return None

    @classmethod
    def rebind_dataset(cls, options: Mapping[str, Any], old_source: str, new_source: str, new_reader: str) -> dict[str, Any]:
        """Options for a derived copy of the run's dataset (a probe's corrupted references): a
        backend bound to ``old_source`` follows it to ``new_source``; others are unchanged."""
        return dict(options)

    @abstractmethod
    def transcribe_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[str]:
        """Transcribe a batch; raise for the whole batch only when the backend itself fails."""

    def warmup(self) -> None:
        """Run one short dummy batch so that first-call costs stay out of timings."""
        rng = np.random.default_rng(0)
        self.transcribe_batch([rng.normal(0, 0.01, SAMPLE_RATE).astype(np.float32)])


class SVBackend(Backend):
    """Speaker verification: one fixed-size embedding per clip."""

    @abstractmethod
    def embed_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> np.ndarray:
        """Return an (n, dim) float32 array."""


@dataclass(frozen=True)
class EmotionOutput:
    """Categorical posteriors and/or dimensional values (and raw descriptors) for one clip."""

    posteriors: Mapping[str, float] = field(default_factory=dict)
    dimensions: Mapping[str, float] = field(default_factory=dict)
    descriptors: Mapping[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str | None:
        return max(self.posteriors, key=self.posteriors.__getitem__) if self.posteriors else None


class SERBackend(Backend):
    """Speech emotion recognition."""

    @abstractmethod
    def predict_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[EmotionOutput]:
        """One output per clip."""


class TTSBackend(Backend):
    """Text to speech, for derived audio (synthetic-voice probe, demo corpus): ``voices()`` lists the
    installed voices and ``install_hint`` says what to install, so the corpus builders take their
    engines from the registry (``TTS_BACKENDS``) and name the fix without knowing an engine's name."""

    #: what to install for this engine and its voices (said when it or a voice is missing)
    install_hint: ClassVar[str] = ""

    def voices(self) -> list[str]:
        """The voice names this installation accepts (default: none known)."""
        return []

    def version(self) -> str:
        """The engine's version, recorded with every clip it makes (default: unknown)."""
        return "unknown"

    @abstractmethod
    def synthesize(self, text: str, voice: str | None = None) -> tuple[np.ndarray, int]:
        """Return (mono float32 samples, sample rate)."""


@dataclass(frozen=True)
class SpeakerTurn:
    """One stretch of one speaker in a recording (seconds); turns of different speakers may overlap."""

    start: float
    end: float
    speaker: str


class DiarizationBackend(Backend):
    """Speaker diarization: who spoke when in one long recording."""

    @abstractmethod
    def diarize(self, audio: np.ndarray, sample_rate: int = SAMPLE_RATE, num_speakers: int | None = None) -> list[SpeakerTurn]:
        """Turns sorted by start; labels are arbitrary but consistent within the recording."""
