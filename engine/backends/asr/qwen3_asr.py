"""Qwen3-ASR (Qwen/Qwen3-ASR-0.6B, -1.7B) through the ``qwen-asr`` package, as its model card runs it.

``Qwen3ASRModel.from_pretrained(dir_or_id, dtype, device_map, max_inference_batch_size,
max_new_tokens)`` then ``transcribe(audio=[(array, 16000), ...], language=...)``. The package
builds the prompt itself (a system turn holding the optional ``context`` and a user turn with
the audio; with ``language`` set it appends ``language <Name><asr_text>`` so the model answers
with the transcript only) and strips the language header from the answer.

Batching: the package pads a batch's waveforms to the longest before its Whisper feature
extractor, whose centred STFT then sees zeros instead of the reflected end of a shorter clip, so
a clip's features (and, measured on a small model, its logits) change with its batch partners.
By default (``exact_batches: true``) each clip therefore gets a ``transcribe`` call of its own,
which is what the model card does; ``exact_batches: false`` lets the package batch (faster; a
clip's text may then depend on its batch). Prompts are padded on the left either way.

``qwen-asr`` pins its own transformers release (4.57), so it lives in its own environment: the
``qwen-asr`` extra, installed and tested by ``make test-families``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from engine.backends.availability import Availability, local_or_cached
from engine.backends.base import ASRBackend, AsrCapabilities, BackendInfo, BackendOptions, package_versions
from engine.backends.bundled import check_audio_batch
from engine.backends.device import dtype_name_for, resolve_device
from engine.data import SAMPLE_RATE
from engine.errors import BackendUnavailable
from engine.options import option

log = logging.getLogger(__name__)

_INSTALL_HINT = 'pip install ".[qwen-asr]" (in an environment of its own: qwen-asr pins transformers 4.57)'


@dataclass(frozen=True)
class Qwen3ASROptions(BackendOptions):
    """The checkpoint, where it runs, and the package's prompt and decoding settings."""

    model: str = option(doc="a hub id (Qwen/Qwen3-ASR-1.7B) or a local model directory")
    device: str = option("auto", "auto, cpu, cuda or cuda:N")
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = option("auto", "auto: bfloat16 on CUDA as the card, float32 elsewhere")
    batch_size: int | None = option(None, "clips per package batch; null: 32", ge=1, le=100_000)
    language: str | None = option("English", "the package's language name; null: the model detects it")
    context: str = option("", "context text (the card's biasing prompt)")
    max_new_tokens: int = option(512, "cap on generated tokens (the package default)", ge=1, le=100_000)
    exact_batches: bool = option(True, "one transcribe call per clip, so a clip's text never depends on its batch")


class Qwen3ASRBackend(ASRBackend):
    """Qwen3-ASR via ``qwen_asr.Qwen3ASRModel`` (transformers inside the package)."""

    name = "qwen3-asr"
    OPTIONS = Qwen3ASROptions
    options: Qwen3ASROptions
    requires = ("qwen_asr", "torch")
    capabilities = AsrCapabilities(families=("qwen3-asr",))
    extra = "qwen-asr"

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        model = cls.parse_options(options).model
        return local_or_cached(model, model, lambda p: (p / "config.json").is_file())

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._asr: Any = None
        self._torch: Any = None
        self._device: str | None = None
        self._dtype_name: str | None = None
        self._largest_batch = 0

    def load(self) -> None:
        """Import qwen-asr (optional extra) and load the checkpoint on the chosen device."""
        try:
            import torch
            from qwen_asr import Qwen3ASRModel
        except ImportError as exc:
            raise BackendUnavailable(f"the qwen3-asr backend needs the qwen-asr package: {_INSTALL_HINT}") from exc
        self._torch = torch
        device = resolve_device(self.options.device)
        dtype_name = dtype_name_for(device, "bfloat16", self.options.dtype)  # bfloat16 on CUDA, as the card and the leaderboard
        model = self.options.model
        path = Path(model).expanduser()
        if model.startswith((".", "/", "~")) and not path.is_dir():
            raise BackendUnavailable(f"Qwen3-ASR model directory {path} does not exist")
        try:
            self._asr = Qwen3ASRModel.from_pretrained(
                str(path) if path.is_dir() else model,
                dtype=getattr(torch, dtype_name),
                device_map=device,
                max_inference_batch_size=self.options.batch_size or 32,
                max_new_tokens=self.options.max_new_tokens,
            )
        except (OSError, ValueError) as exc:
            raise BackendUnavailable(
                f"cannot load Qwen3-ASR '{model}' ({exc}); without hub access download it (huggingface-cli download {model} --local-dir "
                f"DIR) "
                "and pass DIR as 'model'"
            ) from exc
        tokenizer = getattr(getattr(self._asr, "processor", None), "tokenizer", None)
        if tokenizer is not None:
            # the package pads a batch of prompts with the tokenizer's side; a decoder-only model
            # needs the padding on the left, or a short clip's answer depends on its batch
            tokenizer.padding_side = "left"
        self._device = device
        self._dtype_name = dtype_name
        log.info("loaded Qwen3-ASR %s on %s/%s", model, device, dtype_name)

    def transcribe_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[str]:
        """The package's ``transcribe`` on in-memory (array, 16000) pairs; text only."""
        clips = check_audio_batch(audios, sample_rate, self.name)
        if self._asr is None:
            raise BackendUnavailable(f"{self.name}: call load() before transcribing")
        self._largest_batch = max(self._largest_batch, len(clips))
        language = self.options.language or None
        groups = [[c] for c in clips] if self.options.exact_batches else [list(clips)]
        results: list[Any] = []
        with self._torch.inference_mode():
            for group in groups:
                results += self._asr.transcribe(audio=[(c, SAMPLE_RATE) for c in group], context=self.options.context, language=language)
        return [str(getattr(r, "text", "") or "").strip() for r in results]

    def info(self) -> BackendInfo:
        """Model, prompt settings, device, dtype and package versions."""
        extra: dict[str, Any] = {
            "family": "qwen3-asr",
            "prompt": "qwen-asr chat prompt: system=context, user=<audio>"
            + (f"; assistant prefix 'language {self.options.language}<asr_text>'" if self.options.language else "; language detected"),
            "context": self.options.context,
            "decoding": "greedy",
            "padding": "left",
            "batching": "one transcribe call per clip" if self.options.exact_batches else "the package's padded batches",
            "max_new_tokens": self.options.max_new_tokens,
            "post_processing": "qwen-asr parse_asr_output (language header removed), strip",
        }
        extra.update(package_versions("qwen-asr", "transformers", "torch"))
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
        self._asr = None
        if self._torch is not None and (self._device or "").startswith("cuda"):
            self._torch.cuda.empty_cache()
