"""pyannote.audio speaker-diarization pipelines (e.g. ``pyannote/speaker-diarization-3.1`` or
``-community-1``) loaded from a local checkpoint: a folder holding the pipeline's
``config.yaml`` (with its segmentation and embedding models beside it), or a path to that
``config.yaml``. Weights are never fetched from a hub here; download the pipeline once where a
network and the model's licence acceptance are available and point ``checkpoint`` at it.

Needs the optional extra ``diarization`` (``pip install -c constraints.txt '.[diarization]'``),
with a torchaudio build that matches the installed torch (a CUDA torchaudio wheel does not load
against a CPU-only torch). pyannote.audio 4 reports usage to its vendor's telemetry endpoint by
default; this backend turns that off (``PYANNOTE_METRICS_ENABLED=false``) unless the variable is
already set, so that a run stays offline.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.availability import Availability
from engine.backends.base import BackendInfo, BackendOptions, DiarizationBackend, SpeakerTurn, package_versions
from engine.backends.device import resolve_device
from engine.config import load_yaml
from engine.data import SAMPLE_RATE
from engine.errors import BackendUnavailable, ConfigError
from engine.options import option

log = logging.getLogger(__name__)


def _config_path(checkpoint: str | Path) -> Path:
    path = Path(checkpoint).expanduser()
    return path / "config.yaml" if path.is_dir() else path


#: Pipeline parameters that name a model; a value that is neither ``$model/...`` (beside
#: config.yaml) nor an existing path is a hub repository id.
_MODEL_PARAMS = ("segmentation", "embedding", "plda")
_OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def _hub_offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in {"1", "true", "yes", "on"} for v in _OFFLINE_VARS)


def hub_references(cfg: Path) -> list[str]:
    """The hub models that loading ``cfg`` would fetch: model parameters naming a repository id
    rather than a local file, and, with pyannote.audio 4, the PLDA of
    ``speaker-diarization-community-1`` that its SpeakerDiarization pipeline falls back to when
    the config names none (3.x configs such as speaker-diarization-3.1 name none)."""
    try:  # the engine's one YAML loader: plain data, no duplicate key
        config = load_yaml(cfg)
    except ConfigError as exc:
        raise BackendUnavailable(f"pyannote pipeline config {cfg} cannot be read: {exc}") from None
    pipeline = config.get("pipeline") if isinstance(config, Mapping) else None
    if not isinstance(pipeline, Mapping) or not isinstance(pipeline.get("name"), str):
        raise BackendUnavailable(f"{cfg} is not a pyannote pipeline config: it needs a 'pipeline' block with a 'name'")
    params = pipeline.get("params") or {}
    refs = []
    for key in _MODEL_PARAMS:
        value = params.get(key)
        if isinstance(value, Mapping):
            value = value.get("checkpoint")
        if isinstance(value, str) and not value.startswith("$model/") and not Path(value).expanduser().exists():
            refs.append(f"{key}: {value}")
    if "plda" not in params and str(pipeline["name"]).endswith("SpeakerDiarization"):
        from importlib.metadata import PackageNotFoundError, version

        try:
            major = int(version("pyannote.audio").split(".")[0])
        except (PackageNotFoundError, ValueError):
            major = 0
        if major >= 4:
            refs.append("plda: pyannote/speaker-diarization-community-1 (pyannote.audio 4's default when config.yaml names none)")
    return refs


def _hub_problem(cfg: Path) -> str | None:
    refs = hub_references(cfg)  # also checks that cfg is a pipeline config
    if not refs or _hub_offline():
        return None
    return (
        f"{cfg} refers to hub models that would be downloaded ({'; '.join(refs)}); this backend never downloads: "
        "point those entries at local files (e.g. 'plda: $model/plda' with xvec_transform.npz and plda.npz beside "
        "config.yaml), or set HF_HUB_OFFLINE=1 if they are already in the local Hugging Face cache"
    )


@dataclass(frozen=True)
class PyannoteOptions(BackendOptions):
    """The pyannote diarizer's options (checked when the recipe is parsed)."""

    checkpoint: str = option(doc="a local pipeline folder holding config.yaml")
    device: str = option("auto", "torch device; auto is resolved at load")
    min_speakers: int | None = option(None, "lower bound on the number of speakers", ge=1, le=1000)
    max_speakers: int | None = option(None, "upper bound on the number of speakers", ge=1, le=1000)


class PyannoteDiarizer(DiarizationBackend):
    """A pyannote.audio pipeline from a local folder (options: :class:`PyannoteOptions`)."""

    name = "pyannote"
    OPTIONS = PyannoteOptions
    options: PyannoteOptions
    requires = ("pyannote.audio", "torch")
    extra = "diarization"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.checkpoint = self.options.checkpoint
        self.device = self.options.device  # resolved at load (engine/backends/device.py)
        self._pipeline: Any = None

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        ckpt = cls.parse_options(options).checkpoint
        if not ckpt:
            return Availability(False, "needs option checkpoint: a local pyannote pipeline folder holding config.yaml")
        cfg = _config_path(str(ckpt))
        if not cfg.is_file():
            return Availability(False, f"{cfg} does not exist: download the pipeline once and set checkpoint to its folder")
        try:
            problem = _hub_problem(cfg)
        except BackendUnavailable as exc:
            return Availability(False, str(exc))
        if problem:
            return Availability(False, problem)
        return Availability(True, f"local pipeline at {cfg}")

    def load(self) -> None:
        self.device = resolve_device(self.device)
        cfg = _config_path(self.checkpoint)
        if not cfg.is_file():
            raise BackendUnavailable(f"pyannote pipeline config {cfg} does not exist; set checkpoint to a local pipeline folder")
        problem = _hub_problem(cfg)
        if problem:
            raise BackendUnavailable(problem)
        os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "false")
        try:
            import torch
            from pyannote.audio import Pipeline
        except ImportError as exc:
            raise BackendUnavailable(f"pyannote.audio cannot be imported ({exc}): pip install -c constraints.txt '.[diarization]'") from exc
        except OSError as exc:  # torchaudio's compiled extension does not match the installed torch
            raise BackendUnavailable(
                f"pyannote.audio cannot be imported: a native library failed to load ({exc}); install a torchaudio "
                "build that matches the installed torch (same version line and the same CPU/CUDA variant)"
            ) from exc
        try:
            pipeline = Pipeline.from_pretrained(str(cfg))
        except Exception as exc:  # the library raises many kinds for a bad checkpoint
            raise BackendUnavailable(f"pyannote pipeline at {cfg} could not load: {exc}") from exc
        if pipeline is None:
            raise BackendUnavailable(f"pyannote returned no pipeline for {cfg} (gated model not downloaded?)")
        pipeline.to(torch.device(self.device))
        self._pipeline = pipeline

    def info(self) -> BackendInfo:
        return BackendInfo(
            backend=self.name,
            model_id=self.checkpoint,
            device=self.device,
            extra=package_versions("pyannote.audio", "torch"),
        )

    def diarize(self, audio: np.ndarray, sample_rate: int = SAMPLE_RATE, num_speakers: int | None = None) -> list[SpeakerTurn]:
        import torch

        if self._pipeline is None:
            self.load()
        waveform = torch.from_numpy(np.asarray(audio, dtype=np.float32).reshape(1, -1))
        kwargs: dict[str, Any] = {}
        if num_speakers:
            kwargs["num_speakers"] = int(num_speakers)
        else:
            for key in ("min_speakers", "max_speakers"):
                if getattr(self.options, key) is not None:
                    kwargs[key] = getattr(self.options, key)
        out = self._pipeline({"waveform": waveform, "sample_rate": sample_rate}, **kwargs)
        # pyannote.audio 4 returns an object holding the annotation; 3.x returns the annotation.
        annotation = getattr(out, "speaker_diarization", out)
        # The pipeline's sliding windows overhang the end of the audio, and so can its last turns:
        # crop every turn to the recording, dropping any that lie wholly outside it.
        duration = waveform.shape[1] / sample_rate
        turns = []
        for seg, _, label in annotation.itertracks(yield_label=True):
            start, end = max(0.0, float(seg.start)), min(duration, float(seg.end))
            if end > start:
                turns.append(SpeakerTurn(start, end, str(label)))
        return sorted(turns, key=lambda t: (t.start, t.end, t.speaker))

    def close(self) -> None:
        self._pipeline = None
