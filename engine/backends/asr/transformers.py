"""Hugging Face transformers backend: any speech-recognition model id or local directory.

The checkpoint's family decides how it is driven (``engine/backends/asr/families/``): Whisper,
CTC, encoder-decoders, speech-LLMs, and the ``automatic-speech-recognition`` pipeline for the
seq2seq models it handles. The registry entry names the family (option ``family``); ``auto``
picks it from ``config.model_type``. Each family records its prompt, decoding settings and
post-processing in ``backend_info``.

Checkpoints that ship their own Python code (``auto_map`` in config.json, e.g. lite-whisper) load
only when the registry entry opts in with ``trust_remote_code: true``; otherwise they are refused
with that fix, unless transformers has its own classes for the checkpoint's ``model_type`` (e.g.
Cohere Transcribe, whose repository also ships code for older releases): those load, as the
model card recommends, and the repository's code is not run. ``transformers`` and ``torch`` are
an optional extra, imported only in ``load()``. Options are declared once (``TransformersOptions``,
engine/backends/asr/families/base.py) and reach the families as that record; ``dtype: auto`` is
the family's reference precision (engine/backends/device.py).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.asr.families.base import FAMILIES, TransformersOptions
from engine.backends.availability import Availability, local_or_cached
from engine.backends.base import ASRBackend, AsrCapabilities, BackendInfo, clip_seed, package_versions
from engine.backends.bundled import check_audio_batch
from engine.backends.checkpoint_checks import remote_code_message, resolve_folder, transformers_checkpoint_problems
from engine.backends.device import dtype_name_for, resolve_device
from engine.data import SAMPLE_RATE
from engine.errors import BackendUnavailable

log = logging.getLogger(__name__)

_INSTALL_HINT = 'pip install ".[transformers]"'


class TransformersBackend(ASRBackend):
    """Any transformers ASR checkpoint: hub id (downloaded or cached) or local directory."""

    name = "transformers"
    OPTIONS = TransformersOptions
    options: TransformersOptions
    requires = ("transformers", "torch")
    capabilities = AsrCapabilities(families=("whisper", "ctc", "encoder-decoder", "speech-llm", "seq2seq-pipeline"))
    extra = "transformers"
    #: the registry passes the entry's ``family`` as the option ``family``
    takes_family = True

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        """The folder (local or the hub cache's snapshot), then the same checkpoint checks the load runs."""
        o = cls.parse_options(options)
        model = o.model
        found = local_or_cached(model, model, lambda p: (p / "config.json").is_file())
        folder = resolve_folder(model, o.revision) if found.runnable else None
        if folder is None:
            return found
        problems = transformers_checkpoint_problems(folder, o, model)
        if problems:
            return Availability.refused(problems)
        return Availability(True, f"{found.reason}; weights, tokenizer, code policy and adapters checked")

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._kind: str | None = None  # the family that drives the checkpoint
        self._family: Any = None
        self._fallback = False
        self._model: Any = None
        self._device: str | None = None
        self._dtype_name: str | None = None
        self._torch: Any = None
        self._largest_batch = 0
        self._remote_code_skipped = False

    # -- loading -----------------------------------------------------------------------------
    def _source(self) -> str:
        model = self.options.model
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
        offline = os.environ.get("HF_HUB_OFFLINE") or self.options.local_files_only
        how = "the hub is switched off (HF_HUB_OFFLINE / local_files_only)" if offline else "it may be offline"
        return BackendUnavailable(
            f"cannot load '{source}' from the Hugging Face hub and it is not in the local cache ({how}): "
            f"download it where the hub is reachable (huggingface-cli download {source} --local-dir DIR) "
            f"and pass DIR as 'model'. Cause: {exc}"
        )

    def _remote_code_refused(self, source: str) -> BackendUnavailable:
        return BackendUnavailable(remote_code_message(source))

    def _check_checkpoint(self, source: str) -> None:
        """The checks ``--check`` runs (engine/backends/checkpoint_checks.py), on the folder the load
        reads: a local directory, or the hub cache's snapshot when the checkpoint is already there."""
        folder = Path(source) if Path(source).is_dir() else resolve_folder(source, self.options.revision)
        if folder is None:
            return  # a download: transformers verifies what it fetches
        problems = transformers_checkpoint_problems(folder, self.options, source, family_check=False)
        if problems:
            raise BackendUnavailable(f"cannot load {source}: " + "; ".join(problems))

    def _pick_family(self, model_type: str) -> Any:
        """The family the entry names, checked against the checkpoint; ``auto``: the one that drives it."""
        from engine.backends.asr.families import family_loader

        wanted = self.options.family
        if wanted != "auto":
            return family_loader(wanted)
        for name in FAMILIES:
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
        device = resolve_device(self.options.device)
        source = self._source()
        self._check_checkpoint(source)
        common: dict[str, Any] = {
            "revision": self.options.revision,
            "local_files_only": self.options.local_files_only,
            "trust_remote_code": self.options.trust_remote_code,
        }
        try:
            config = transformers.AutoConfig.from_pretrained(source, **common)
        except (OSError, ValueError) as exc:
            if "trust_remote_code" in str(exc) and not common["trust_remote_code"]:
                raise self._remote_code_refused(source) from exc
            raise self._unavailable(source, exc) from exc
        self._remote_code_skipped = False
        if getattr(config, "auto_map", None) and not common["trust_remote_code"]:
            from transformers.models.auto.configuration_auto import CONFIG_MAPPING

            if str(config.model_type) not in CONFIG_MAPPING:
                raise self._remote_code_refused(source)
            # transformers has its own classes for this model type (e.g. cohere_asr): they load, the repository's code does not run
            self._remote_code_skipped = True
        family = self._pick_family(str(config.model_type))
        dtype_name = dtype_name_for(device, family.cuda_dtype_for(str(config.model_type)), self.options.dtype)
        dtype = getattr(torch, dtype_name)
        model_kwargs: dict[str, Any] = dict(common, dtype=dtype)
        if self.options.attn_implementation:
            model_kwargs["attn_implementation"] = self.options.attn_implementation
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

    @property
    def family_loader(self) -> Any:
        """The loaded family (its ``token_ids`` give the raw generate rows per clip), or None before ``load()``."""
        return self._family

    # -- transcription -----------------------------------------------------------------------
    def transcribe_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[str]:
        """Raw text per clip, ``batch_size`` clips per forward pass."""
        clips = check_audio_batch(audios, sample_rate, self.name)
        if self._model is None:
            raise BackendUnavailable(f"{self.name}: call load() before transcribing")
        size = self.options.batch_size or max(1, len(clips))
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
        kwargs = dict(self.options.generate_kwargs or {})
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
        if self.options.language:
            extra["language"] = self.options.language
        if self.options.trust_remote_code:
            extra["trust_remote_code"] = True
        if self._remote_code_skipped:
            extra["remote_code"] = "the checkpoint's auto_map code was not run: transformers' own classes for its model_type"
        if self._model is not None and self._draws_samples():
            extra["sampling"] = "each clip decoded alone, torch's generator seeded from the clip's samples"
        extra.update(package_versions("transformers", "torch"))
        return BackendInfo(
            backend=self.name,
            model_id=self.options.model,
            device=self._device or self.options.device,
            dtype=self._dtype_name or self.options.dtype,
            batch_size=self.options.batch_size or self._largest_batch or 1,
            extra=extra,
        )

    def close(self) -> None:
        """Drop the model and free accelerator memory."""
        self._model = self._family = None
        torch = self._torch
        if torch is not None and self._device and self._device.startswith("cuda"):
            torch.cuda.empty_cache()

    def __repr__(self) -> str:
        return f"TransformersBackend(model={self.options.model!r}, device={self._device or self.options.device!r})"
