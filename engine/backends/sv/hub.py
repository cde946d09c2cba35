"""Hub-hosted speaker encoders: SpeechBrain ECAPA-TDNN, NeMo TitaNet, transformers WavLM x-vector.

Each is an optional extra: its library is imported inside ``load()``, and a missing library or
weights that cannot be reached (offline, no cache) raise ``BackendUnavailable`` saying what to
install or download. ``model_id`` accepts a hub id or a local directory (or a ``.nemo`` file for
NeMo) so air-gapped machines can point at copied weights.
"""

from __future__ import annotations

import logging
import os
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from engine.backends.base import BackendInfo, BackendOptions, SVBackend
from engine.backends.device import resolve_device
from engine.data import SAMPLE_RATE
from engine.errors import AudioError, BackendUnavailable
from engine.options import option

log = logging.getLogger(__name__)


def import_optional(module: str, extra_hint: str) -> Any:
    """Import ``module`` or raise ``BackendUnavailable`` naming the package to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise BackendUnavailable(f"{module} is not importable ({exc}); install it with: {extra_hint}") from exc


def unreachable(model_id: str, exc: BaseException, hint: str = "") -> BackendUnavailable:
    """A ``BackendUnavailable`` for weights that could not be loaded (usually: offline, not cached)."""
    offline = " (HF_HUB_OFFLINE is set)" if os.environ.get("HF_HUB_OFFLINE") else ""
    where = "local directory" if Path(model_id).exists() else "hub model"
    return BackendUnavailable(
        f"could not load {where} {model_id!r}{offline}: {type(exc).__name__}: {exc}. Download it where the hub is "
        f"reachable and pass the local directory as model_id{hint}"
    )


def prepare_clips(audios: Sequence[np.ndarray], sample_rate: int, min_duration_s: float, backend: str) -> list[np.ndarray]:
    """Mono float32 at 16 kHz; clips shorter than ``min_duration_s`` or non-finite raise ``AudioError``."""
    out: list[np.ndarray] = []
    for i, a in enumerate(audios):
        x = np.asarray(a, dtype=np.float32).reshape(-1)
        if not np.all(np.isfinite(x)):
            raise AudioError(f"clip {i} in the batch contains NaN or infinite samples")
        if sample_rate != SAMPLE_RATE:
            import soxr

            x = soxr.resample(x, sample_rate, SAMPLE_RATE).astype(np.float32)
        if len(x) < min_duration_s * SAMPLE_RATE:
            raise AudioError(
                f"clip {i} in the batch lasts {len(x) / SAMPLE_RATE:.3f} s; {backend} needs at least {min_duration_s} s "
                "(option min_duration_s)"
            )
        out.append(x)
    return out


def pad_batch(clips: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Zero-padded (n, max_len) array and the true lengths."""
    lengths = np.array([len(c) for c in clips], dtype=np.int64)
    batch = np.zeros((len(clips), int(lengths.max())), dtype=np.float32)
    for i, c in enumerate(clips):
        batch[i, : len(c)] = c
    return batch, lengths


def model_id_option(default: str) -> Any:
    """The ``model_id`` option of a hub-weights backend whose checkpoint is ``default`` when it is left out."""
    return option(None, "hub id or local directory (NeMo: or a .nemo file); left out or null: the default shown", doc_default=default)


@dataclass(frozen=True)
class HubSVOptions(BackendOptions):
    """A hub-weights speaker encoder's checkpoint, device, download folder and shortest clip."""

    model_id: str | None = model_id_option("the backend's own checkpoint")
    model: str | None = option(None, "another name for model_id (used when model_id is not given)")
    device: str = option("auto", "torch device; auto: CUDA when the process has a GPU (resolved at load)")
    cache_dir: str | None = option(None, "where downloaded weights go; null: the library's cache")
    min_duration_s: float = option(0.3, "shorter clips are an error, in seconds", ge=0, le=3_600)


@dataclass(frozen=True)
class HubSEROptions(HubSVOptions):
    """A hub-weights emotion model's checkpoint, device, download folder and shortest clip."""

    min_duration_s: float = option(0.2, "shorter clips are an error, in seconds", ge=0, le=3_600)


class HubWeights:
    """Options every hub-weights SV/SER backend takes (a :class:`HubSVOptions` record), mixed in before its backend ABC.

    ``model_id`` (or ``model``) null means :attr:`default_model`.
    """

    name = ""
    default_model = ""
    install_hint = ""
    OPTIONS: ClassVar[type[BackendOptions] | None] = HubSVOptions
    options: HubSVOptions  # the backend's own record (a subclass)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        o = self.options
        self.model_id: str = o.model_id or o.model or self.default_model
        self.device: str = o.device  # resolved at load (engine/backends/device.py)
        self.cache_dir: str | None = o.cache_dir
        self.min_duration_s: float = o.min_duration_s
        self._model: Any = None
        self._extractor: Any = None

    def _info_extra(self) -> dict[str, Any]:
        return {}

    def info(self) -> BackendInfo:
        return BackendInfo(backend=self.name, model_id=self.model_id, device=self.device, extra=self._info_extra())

    def close(self) -> None:
        self._model = None


class _HubSV(HubWeights, SVBackend):
    """A speaker encoder with hub weights (see :class:`HubWeights` for the options)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._dim: int | None = None

    def _info_extra(self) -> dict[str, Any]:
        return {"embedding_dim": self._dim}

    def embed_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> np.ndarray:
        if self._model is None:
            self.load()
        clips = prepare_clips(audios, sample_rate, self.min_duration_s, self.name)
        if not clips:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        emb = np.asarray(self._embed(clips), dtype=np.float32)
        self._dim = int(emb.shape[1])
        return emb

    @abstractmethod
    def _embed(self, clips: list[np.ndarray]) -> np.ndarray:
        """Run the loaded model on prepared clips (each subclass knows its model)."""


ECAPA = "speechbrain/spkrec-ecapa-voxceleb"
TITANET = "nvidia/speakerverification_en_titanet_large"
WAVLM_SV = "microsoft/wavlm-base-plus-sv"


@dataclass(frozen=True)
class SpeechBrainECAPAOptions(HubSVOptions):
    """SpeechBrain ECAPA-TDNN's checkpoint, device, download folder and shortest clip."""

    model_id: str | None = model_id_option(ECAPA)


@dataclass(frozen=True)
class NemoTitaNetOptions(HubSVOptions):
    """NeMo TitaNet's checkpoint, device, download folder and shortest clip."""

    model_id: str | None = model_id_option(TITANET)


@dataclass(frozen=True)
class WavLMSVOptions(HubSVOptions):
    """WavLM x-vector's checkpoint, device, download folder and shortest clip."""

    model_id: str | None = model_id_option(WAVLM_SV)


class SpeechBrainECAPA(_HubSV):
    """SpeechBrain ECAPA-TDNN trained on VoxCeleb (192-dim)."""

    name = "speechbrain-ecapa"
    default_model = ECAPA
    OPTIONS = SpeechBrainECAPAOptions
    install_hint = "pip install speechbrain (needs a torchaudio matching your torch)"

    def load(self) -> None:
        self.device = resolve_device(self.device)
        import_optional("speechbrain", self.install_hint)
        try:
            from speechbrain.inference.speaker import EncoderClassifier
        except ImportError:  # speechbrain < 1.0
            from speechbrain.pretrained import EncoderClassifier  # type: ignore[no-redef]
        savedir = self.cache_dir or str(Path.home() / ".cache" / "audit" / "speechbrain" / self.model_id.replace("/", "--"))
        try:
            self._model = EncoderClassifier.from_hparams(source=self.model_id, savedir=savedir, run_opts={"device": self.device})
        except Exception as exc:  # hub, file-system and hparams errors all mean "cannot load here"
            raise unreachable(self.model_id, exc) from exc
        if self._model is None:
            raise BackendUnavailable(f"speechbrain returned no model for {self.model_id!r}")
        self._model.eval()

    def _embed(self, clips: list[np.ndarray]) -> np.ndarray:
        import torch

        batch, lengths = pad_batch(clips)
        wavs = torch.from_numpy(batch).to(self.device)
        rel = torch.from_numpy(lengths / lengths.max()).float().to(self.device)
        with torch.inference_mode():
            emb = self._model.encode_batch(wavs, rel)
        return emb.reshape(len(clips), -1).cpu().numpy()


class NemoTitaNet(_HubSV):
    """NVIDIA NeMo TitaNet-Large speaker encoder (192-dim)."""

    name = "nemo-titanet"
    default_model = TITANET
    OPTIONS = NemoTitaNetOptions
    install_hint = "pip install 'nemo_toolkit[asr]'"

    def load(self) -> None:
        self.device = resolve_device(self.device)
        import_optional("nemo.collections.asr", self.install_hint)
        from nemo.collections.asr.models import EncDecSpeakerLabelModel

        path = Path(self.model_id)
        try:
            if path.is_dir():
                found = sorted(path.glob("*.nemo"))
                if not found:
                    raise BackendUnavailable(f"no .nemo file in {path}; point model_id at the TitaNet .nemo checkpoint")
                path = found[0]
            if path.is_file():
                self._model = EncDecSpeakerLabelModel.restore_from(str(path), map_location=self.device)
            else:
                self._model = EncDecSpeakerLabelModel.from_pretrained(model_name=self.model_id, map_location=self.device)
        except BackendUnavailable:
            raise
        except Exception as exc:
            raise unreachable(self.model_id, exc, " (a .nemo file or a directory holding one)") from exc
        self._model.eval()

    def _embed(self, clips: list[np.ndarray]) -> np.ndarray:
        import torch

        batch, lengths = pad_batch(clips)
        with torch.inference_mode():
            _, emb = self._model.forward(
                input_signal=torch.from_numpy(batch).to(self.device),
                input_signal_length=torch.from_numpy(lengths).to(self.device),
            )
        return emb.cpu().numpy()


class WavLMSV(_HubSV):
    """microsoft/wavlm-base-plus-sv through transformers (WavLMForXVector, 512-dim x-vectors)."""

    name = "wavlm-sv"
    default_model = WAVLM_SV
    OPTIONS = WavLMSVOptions
    install_hint = "pip install transformers torch"

    def load(self) -> None:
        self.device = resolve_device(self.device)
        transformers = import_optional("transformers", self.install_hint)
        try:
            self._extractor = transformers.AutoFeatureExtractor.from_pretrained(self.model_id, cache_dir=self.cache_dir)
            self._model = transformers.WavLMForXVector.from_pretrained(self.model_id, cache_dir=self.cache_dir)
        except (OSError, ValueError) as exc:
            raise unreachable(self.model_id, exc) from exc
        self._model.to(self.device).eval()
        self._dim = int(self._model.config.xvector_output_dim)

    def _embed(self, clips: list[np.ndarray]) -> np.ndarray:
        # Group-norm feature encoders (base models) see padding as signal: embed those one by one.
        if getattr(self._model.config, "feat_extract_norm", "layer") == "group" and len(clips) > 1:
            return np.concatenate([self._embed([c]) for c in clips])
        import torch

        feats = self._extractor(clips, sampling_rate=SAMPLE_RATE, padding=True, return_attention_mask=True, return_tensors="pt")
        feats = {k: v.to(self.device) for k, v in feats.items()}
        with torch.inference_mode():
            out = self._model(**feats)
        return out.embeddings.cpu().numpy()
