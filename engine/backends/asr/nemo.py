"""NVIDIA NeMo backend: by pretrained name or ``.nemo`` file, in two families.

* ``nemo-asr``: ``ASRModel`` (Parakeet CTC/RNNT/TDT, Conformer/FastConformer, Canary).
  ``transcribe`` on in-memory arrays; Canary takes its task and language arguments
  (``source_lang``, ``target_lang``, ``task``, ``pnc``) from the entry's options.
* ``nemo-salm``: speechlm2 ``SALM`` (nvidia/canary-qwen-2.5b), per its model card: a chat prompt
  ``Transcribe the following: <audio locator>`` with the audio passed as a padded batch and its
  lengths, ``generate(max_new_tokens=128)``, ``tokenizer.ids_to_text`` of the answer.

NeMo is a heavy optional extra, installed by ``make test-families`` only; without it ``load()``
raises ``BackendUnavailable`` with the install command.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.availability import Availability, local_or_cached
from engine.backends.base import ASRBackend, BackendInfo, package_versions
from engine.backends.bundled import check_audio_batch, check_batch_size, check_options
from engine.data import SAMPLE_RATE
from engine.errors import BackendUnavailable, ConfigError

log = logging.getLogger(__name__)

_INSTALL_HINT = 'pip install "nemo_toolkit[asr]"'

_DEFAULTS: dict[str, Any] = {
    "model": None,  # pretrained name ('nvidia/parakeet-tdt-0.6b-v2') or path to a .nemo file
    "device": "auto",  # 'auto' | 'cpu' | 'cuda' | 'cuda:N'
    "dtype": "float32",  # 'float32' | 'float16' | 'bfloat16' (autocast on CUDA)
    "batch_size": None,  # None: NeMo batch = the batch the caller passes
    "source_lang": None,  # Canary-style multitask prompts
    "target_lang": None,
    "pnc": None,  # punctuation and capitalisation for Canary ('yes'/'no')
    "task": None,  # Canary task ('asr' | 'ast'); None: the model's default
    "family": "nemo-asr",  # 'nemo-asr' (ASRModel) | 'nemo-salm' (speechlm2 SALM, e.g. canary-qwen)
    "prompt": "Transcribe the following:",  # nemo-salm: the instruction before the audio locator (model card)
    "max_new_tokens": 128,  # nemo-salm: model card setting
}
_FAMILIES = ("nemo-asr", "nemo-salm")


def _hypothesis_text(item: Any) -> str:
    """NeMo returns str, Hypothesis objects, or (best, all) tuples depending on model and version."""
    if isinstance(item, tuple) and item:
        item = item[0]
    if isinstance(item, list) and item:
        item = item[0]
    text = getattr(item, "text", item)
    return str(text) if text is not None else ""


class NemoBackend(ASRBackend):
    """NeMo ``ASRModel``: ``from_pretrained(name)`` or ``restore_from(path.nemo)``."""

    name = "nemo"
    requires = ("nemo",)
    extra = "nemo"
    #: the registry passes the entry's ``family`` as the option ``family``
    takes_family = True

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        """A local ``.nemo`` file, or a hub id already in the local cache."""
        model = str(options.get("model") or "")
        if model.endswith(".nemo"):
            ok = Path(model).expanduser().is_file()
            return Availability(ok, "local .nemo file" if ok else f"{model} not found")
        return local_or_cached(model, model, lambda p: False)

    def __init__(self, **options: Any) -> None:
        check_options(self.name, options, _DEFAULTS)
        merged = {**_DEFAULTS, **options}
        if not merged["model"]:
            raise ConfigError(f"{self.name} backend needs option 'model' (a NeMo pretrained name or a .nemo file)")
        check_batch_size(self.name, merged["batch_size"])
        if merged["dtype"] not in ("float32", "float16", "bfloat16"):
            raise ConfigError(f"{self.name}: option 'dtype' must be float32, float16 or bfloat16")
        if merged["family"] not in _FAMILIES:
            raise ConfigError(f"{self.name}: option 'family' must be one of {', '.join(_FAMILIES)}, got {merged['family']!r}")
        mnt = merged["max_new_tokens"]
        if isinstance(mnt, bool) or not isinstance(mnt, int) or mnt < 1:
            raise ConfigError(f"{self.name}: option 'max_new_tokens' must be a positive integer, got {mnt!r}")
        super().__init__(**merged)
        self._model: Any = None
        self._device: str | None = None
        self._torch: Any = None
        self._largest_batch = 0

    def load(self) -> None:
        """Import NeMo (optional extra) and restore or download the model."""
        salm = self.options["family"] == "nemo-salm"
        try:
            import torch

            if salm:
                from nemo.collections.speechlm2.models import SALM as ASRModel
            else:
                from nemo.collections.asr.models import ASRModel
        except ImportError as exc:
            raise BackendUnavailable(f"the nemo backend needs NeMo ({'speechlm2' if salm else 'asr'} collection): {_INSTALL_HINT}") from exc
        self._torch = torch
        device = str(self.options["device"])
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        model = str(self.options["model"])
        path = Path(model).expanduser()
        try:
            if model.endswith(".nemo") or path.exists():
                if not path.is_file():
                    raise BackendUnavailable(f"NeMo model file {path} does not exist")
                self._model = ASRModel.restore_from(str(path), map_location=torch.device(device))
            else:
                self._model = (
                    ASRModel.from_pretrained(model) if salm else ASRModel.from_pretrained(model_name=model,
                        map_location=torch.device(device))
                )
                if salm:
                    self._model.to(torch.device(device))
        except BackendUnavailable:
            raise
        except (OSError, RuntimeError, ValueError) as exc:
            raise BackendUnavailable(
                f"cannot load NeMo model '{model}' ({exc}); if the hub is unreachable, download the .nemo file "
                "where it is reachable and pass its path as 'model'"
            ) from exc
        self._model.eval()
        self._device = device
        log.info("loaded NeMo model %s on %s", model, device)

    def transcribe_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[str]:
        """NeMo ``transcribe`` on in-memory arrays, ``batch_size`` at a time."""
        clips = check_audio_batch(audios, sample_rate, self.name)
        if self._model is None:
            raise BackendUnavailable(f"{self.name}: call load() before transcribing")
        size = int(self.options["batch_size"] or max(1, len(clips)))
        self._largest_batch = max(self._largest_batch, min(size, len(clips)))
        if self.options["family"] == "nemo-salm":
            return self._salm(clips, size)
        kwargs: dict[str, Any] = {"batch_size": size, "verbose": False}
        for key in ("source_lang", "target_lang", "pnc", "task"):
            if self.options[key] is not None:
                kwargs[key] = self.options[key]
        torch = self._torch
        dtype = getattr(torch, str(self.options["dtype"]))
        use_autocast = dtype != torch.float32 and (self._device or "").startswith("cuda")
        with torch.inference_mode(), torch.autocast("cuda", dtype=dtype, enabled=use_autocast):
            output = self._model.transcribe(list(clips), **kwargs)
        if isinstance(output, tuple):  # older RNNT models return (best, all_hypotheses)
            output = output[0]
        return [_hypothesis_text(item).strip() for item in output]

    def _salm(self, clips: Sequence[np.ndarray], size: int) -> list[str]:
        """canary-qwen: the model card's chat prompt with the audio locator; audio as a padded batch."""
        torch = self._torch
        model = self._model
        texts: list[str] = []
        with torch.inference_mode():
            for start in range(0, len(clips), size):
                chunk = clips[start : start + size]
                lens = torch.tensor([c.shape[0] for c in chunk], dtype=torch.long, device=self._device)
                audio = torch.zeros((len(chunk), int(lens.max())), dtype=torch.float32, device=self._device)
                for i, c in enumerate(chunk):
                    audio[i, : c.shape[0]] = torch.from_numpy(c).to(self._device)
                prompts = [[{"role": "user", "content": f"{self.options['prompt']} {model.audio_locator_tag}"}] for _ in chunk]
                ids = model.generate(prompts=prompts, audios=audio, audio_lens=lens, max_new_tokens=int(self.options["max_new_tokens"]))
                texts.extend(str(model.tokenizer.ids_to_text(row.cpu())).strip() for row in ids)
        return texts

    def info(self) -> BackendInfo:
        """Model, family, task/prompt settings, device, dtype and NeMo version."""
        extra: dict[str, Any] = {"family": self.options["family"]}
        if self.options["family"] == "nemo-salm":
            extra.update(prompt=f"{self.options['prompt']} <audio locator>", decoding="greedy",
                max_new_tokens=self.options["max_new_tokens"])
            extra["post_processing"] = "tokenizer.ids_to_text of the answer, strip"
        else:
            task = {k: self.options[k] for k in ("source_lang", "target_lang", "task", "pnc") if self.options[k] is not None}
            extra["prompt"] = ("Canary task prompt " + ", ".join(f"{k}={v}" for k, v in task.items())) if task else None
            extra["decoding"] = "the model's default decoder (CTC greedy / RNNT-TDT greedy batch / Canary beam from its config)"
            extra["post_processing"] = "hypothesis text, strip"
            extra.update(task)
        extra.update(package_versions("nemo_toolkit"))
        return BackendInfo(
            backend=self.name,
            model_id=str(self.options["model"]),
            device=self._device or str(self.options["device"]),
            dtype=str(self.options["dtype"]),
            batch_size=int(self.options["batch_size"] or self._largest_batch or 1),
            extra=extra,
        )

    def close(self) -> None:
        """Drop the model and free accelerator memory."""
        self._model = None
        if self._torch is not None and (self._device or "").startswith("cuda"):
            self._torch.cuda.empty_cache()

    def __repr__(self) -> str:
        return f"NemoBackend(model={self.options['model']!r})"
