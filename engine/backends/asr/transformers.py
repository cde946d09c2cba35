"""Hugging Face transformers backend: any speech-recognition model id or local directory.

The checkpoint's family decides how it is driven (``engine/backends/asr/families/``): Whisper,
CTC, encoder-decoders, speech-LLMs, and the ``automatic-speech-recognition`` pipeline for the
seq2seq models it handles. The registry entry names the family (option ``family``); ``auto``
picks it from ``config.model_type``. Each family records its prompt, decoding settings and
post-processing in ``backend_info``.

Checkpoints that ship their own Python code (``auto_map`` in config.json, e.g. lite-whisper) load
only when the registry entry opts in with ``trust_remote_code: true``; otherwise they are refused
with that fix. ``transformers`` and ``torch`` are an optional extra, imported only in ``load()``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.availability import Availability, local_or_cached
from engine.backends.base import ASRBackend, BackendInfo, clip_seed, package_versions
from engine.backends.bundled import check_audio_batch, check_batch_size, check_options
from engine.backends.device import resolve_device
from engine.data import SAMPLE_RATE
from engine.errors import BackendUnavailable, ConfigError

log = logging.getLogger(__name__)

_INSTALL_HINT = 'pip install ".[transformers]"'

_DEFAULTS: dict[str, Any] = {
    "model": None,
    "device": "auto",  # 'auto' | 'cpu' | 'cuda' | 'cuda:N' | 'mps'
    "dtype": "auto",  # 'auto' (float16 on CUDA, float32 elsewhere) | 'float32' | 'float16' | 'bfloat16'
    "batch_size": None,  # None: one forward pass per batch the caller passes
    "language": None,  # Whisper-style generation language, e.g. 'en'
    "task": None,  # 'transcribe' | 'translate' for multitask models
    "num_beams": None,  # None: the family's model-card setting (greedy for most)
    "max_new_tokens": None,
    "generate_kwargs": None,  # extra keyword arguments for generate()
    "revision": None,
    "local_files_only": False,
    "trust_remote_code": False,  # set by the registry from the entry's trust_remote_code: true
    "attn_implementation": None,
    "family": "auto",  # a family of engine/backends/asr/families (whisper, ctc, encoder-decoder, speech-llm, seq2seq-pipeline) or auto
    "processor": None,  # processor source when the checkpoint ships none (lite-whisper: its base Whisper)
    "prompt": None,  # speech-LLMs: replaces the model card's default instruction
    "target_lang": None,  # MMS: language adapter (ISO 639-3, e.g. 'eng')
    "punctuation": True,  # Cohere Transcribe: punctuation token in the decoder prompt
}

_TRANSFORMERS_FAMILIES = ("whisper", "ctc", "encoder-decoder", "speech-llm", "seq2seq-pipeline")


class TransformersBackend(ASRBackend):
    """Any transformers ASR checkpoint: hub id (downloaded or cached) or local directory."""

    name = "transformers"
    requires = ("transformers", "torch")
    extra = "transformers"
    #: the registry passes the entry's ``family`` as the option ``family``
    takes_family = True

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        model = str(options.get("model") or "")
        return local_or_cached(model, model, lambda p: (p / "config.json").is_file())

    def __init__(self, **options: Any) -> None:
        check_options(self.name, options, _DEFAULTS)
        merged = {**_DEFAULTS, **options}
        if not merged["model"]:
            raise ConfigError(f"{self.name} backend needs option 'model' (a hub id or a local model directory)")
        check_batch_size(self.name, merged["batch_size"])
        for key in ("num_beams",):
            value = merged[key]
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ConfigError(f"{self.name}: option '{key}' must be an integer >= 1 (or null: the model card's setting), got {value!r}")
        if merged["dtype"] not in ("auto", "float32", "float16", "bfloat16"):
            raise ConfigError(f"{self.name}: option 'dtype' must be auto, float32, float16 or bfloat16, got {merged['dtype']!r}")
        if merged["generate_kwargs"] is not None and not isinstance(merged["generate_kwargs"], Mapping):
            raise ConfigError(f"{self.name}: option 'generate_kwargs' must be a mapping")
        if merged["family"] != "auto" and merged["family"] not in _TRANSFORMERS_FAMILIES:
            raise ConfigError(f"{self.name}: option 'family' must be auto or one of {', '.join(_TRANSFORMERS_FAMILIES)}, got "
                f"{merged['family']!r}")
        if not isinstance(merged["trust_remote_code"], bool) or not isinstance(merged["punctuation"], bool):
            raise ConfigError(f"{self.name}: options 'trust_remote_code' and 'punctuation' must be true or false")
        super().__init__(**merged)
        self._kind: str | None = None  # the family that drives the checkpoint
        self._family: Any = None
        self._fallback = False
        self._model: Any = None
        self._device: str | None = None
        self._dtype_name: str | None = None
        self._torch: Any = None
        self._largest_batch = 0

    # -- loading -----------------------------------------------------------------------------
    def _source(self) -> str:
        model = str(self.options["model"])
        path = Path(model).expanduser()
        if path.exists():
            if not (path / "config.json").is_file():
                raise BackendUnavailable(f"{path} is not a transformers model directory (no config.json)")
            return str(path)
        if model.startswith((".", "/", "~")):
            raise BackendUnavailable(f"transformers model directory {path} does not exist")
        return model

    def _unavailable(self, source: str, exc: Exception) -> BackendUnavailable:
        if Path(source).is_dir():
            return BackendUnavailable(f"cannot load transformers model from {source}: {exc}")
        offline = os.environ.get("HF_HUB_OFFLINE") or self.options["local_files_only"]
        how = "the hub is switched off (HF_HUB_OFFLINE / local_files_only)" if offline else "it may be offline"
        return BackendUnavailable(
            f"cannot load '{source}' from the Hugging Face hub and it is not in the local cache ({how}): "
            f"download it where the hub is reachable (huggingface-cli download {source} --local-dir DIR) "
            f"and pass DIR as 'model'. Cause: {exc}"
        )

    def _remote_code_refused(self, source: str) -> BackendUnavailable:
        return BackendUnavailable(
            f"{source} ships its own model code (auto_map in config.json) and runs only with an explicit opt-in: "
            "add 'trust_remote_code: true' to the model's registry entry (configs/models/*.yaml) after reviewing that code"
        )

    def _pick_family(self, model_type: str) -> Any:
        """The family the entry names, checked against the checkpoint; ``auto``: the one that drives it."""
        from engine.backends.asr.families import family_loader

        wanted = str(self.options["family"])
        if wanted != "auto":
            return family_loader(wanted)
        for name in _TRANSFORMERS_FAMILIES:
            cls = family_loader(name)
            if cls.drives(model_type):
                return cls
        # a model_type no family knows: the pipeline is the last resort, and says so in backend_info
        self._fallback = True
        fallback: Any = family_loader("seq2seq-pipeline")

        class _Fallback(fallback):  # type: ignore[misc,valid-type]
            @classmethod
            def drives(cls, model_type: str) -> bool:
                return True

        return _Fallback

    def load(self) -> None:
        """Pick the device and dtype, read the config, and load model + processor for its family."""
        try:
            import torch
            import transformers
        except ImportError as exc:
            raise BackendUnavailable(f"transformers backend needs transformers and torch: {_INSTALL_HINT}") from exc
        self._torch = torch
        device = resolve_device(self.options["device"])
        dtype_name = str(self.options["dtype"])
        if dtype_name == "auto":
            dtype_name = "float16" if device.startswith("cuda") else "float32"
        dtype = getattr(torch, dtype_name)
        source = self._source()
        common: dict[str, Any] = {
            "revision": self.options["revision"],
            "local_files_only": bool(self.options["local_files_only"]),
            "trust_remote_code": bool(self.options["trust_remote_code"]),
        }
        try:
            config = transformers.AutoConfig.from_pretrained(source, **common)
        except (OSError, ValueError) as exc:
            if "trust_remote_code" in str(exc) and not common["trust_remote_code"]:
                raise self._remote_code_refused(source) from exc
            raise self._unavailable(source, exc) from exc
        if getattr(config, "auto_map", None) and not common["trust_remote_code"]:
            raise self._remote_code_refused(source)
        family = self._pick_family(str(config.model_type))
        model_kwargs: dict[str, Any] = dict(common, dtype=dtype)
        if self.options["attn_implementation"]:
            model_kwargs["attn_implementation"] = self.options["attn_implementation"]
        self._family = family(self.options, torch, device, dtype)
        try:
            self._family.load(source, config, common, model_kwargs)
        except (OSError, ValueError) as exc:
            raise self._unavailable(source, exc) from exc
        self._model = self._family.model
        self._kind = self._family.name
        self._device = device
        # record the precision the weights really have, not the one asked for
        self._dtype_name = str(getattr(self._model, "dtype", dtype_name)).replace("torch.", "")
        log.info("loaded transformers %s (%s family) on %s/%s", source, self._kind, device, dtype_name)

    # -- transcription -----------------------------------------------------------------------
    def transcribe_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[str]:
        """Raw text per clip, ``batch_size`` clips per forward pass."""
        clips = check_audio_batch(audios, sample_rate, self.name)
        if self._model is None:
            raise BackendUnavailable(f"{self.name}: call load() before transcribing")
        size = int(self.options["batch_size"] or max(1, len(clips)))
        self._largest_batch = max(self._largest_batch, min(size, len(clips)))
        texts: list[str] = []
        with self._torch.inference_mode():
            if self._draws_samples():
                # torch's one generator would be shared by the batch (and by every batch before it):
                # a sampling clip is decoded alone, its draws seeded from its own samples
                for clip in clips:
                    self._torch.manual_seed(clip_seed(0, clip))
                    texts.extend(self._family.transcribe([clip]))
            else:
                for start in range(0, len(clips), size):
                    chunk = clips[start : start + size]
                    texts.extend(self._family.transcribe(chunk))
        return [t.strip() for t in texts]

    def _draws_samples(self) -> bool:
        """Whether ``generate`` draws random numbers: ``do_sample`` (the entry's ``generate_kwargs``,
        else the checkpoint's generation config) or a temperature above 0 (Whisper samples at every
        non-zero temperature of a fallback schedule)."""
        kwargs = dict(self.options["generate_kwargs"] or {})
        config = getattr(self._model, "generation_config", None)
        do_sample = kwargs["do_sample"] if "do_sample" in kwargs else getattr(config, "do_sample", False)
        temperature = kwargs.get("temperature")
        values = temperature if isinstance(temperature, (list, tuple)) else [temperature]
        return bool(do_sample) or any(isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0 for t in values)

    # -- bookkeeping -------------------------------------------------------------------------
    def info(self) -> BackendInfo:
        """Model, path taken, device/dtype, decoding settings and library versions."""
        extra: dict[str, Any] = {"path": self._kind, "family": self._kind, "family_fallback": self._fallback}
        if self._family is not None:
            extra["model_type"] = self._family.model_type
            extra.update(self._family.settings())
        if self.options["language"]:
            extra["language"] = self.options["language"]
        if self.options["trust_remote_code"]:
            extra["trust_remote_code"] = True
        if self._model is not None and self._draws_samples():
            extra["sampling"] = "each clip decoded alone, torch's generator seeded from the clip's samples"
        extra.update(package_versions("transformers", "torch"))
        return BackendInfo(
            backend=self.name,
            model_id=str(self.options["model"]),
            device=self._device or str(self.options["device"]),
            dtype=self._dtype_name or str(self.options["dtype"]),
            batch_size=int(self.options["batch_size"] or self._largest_batch or 1),
            extra=extra,
        )

    def close(self) -> None:
        """Drop the model and free accelerator memory."""
        self._model = self._family = None
        torch = self._torch
        if torch is not None and self._device and self._device.startswith("cuda"):
            torch.cuda.empty_cache()

    def __repr__(self) -> str:
        return f"TransformersBackend(model={self.options['model']!r}, device={self._device or self.options['device']!r})"
