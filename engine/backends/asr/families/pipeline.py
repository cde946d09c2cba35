"""Seq2seq checkpoints that the ``automatic-speech-recognition`` pipeline drives correctly.

Speech2Text (facebook/s2t-*), SpeechT5 ASR and SeamlessM4T (speech-to-text in the target
language) keep the pipeline: it knows their feature extractors and decoder prompts. Speech-LLMs,
Whisper, CTC models and the other encoder-decoders have families of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from engine.backends.asr.families.base import FamilyLoader
from engine.data import SAMPLE_RATE


class PipelineFamily(FamilyLoader):
    """``pipeline("automatic-speech-recognition")`` for the seq2seq models it handles."""

    name = "seq2seq-pipeline"
    model_types = frozenset({"speech_to_text", "speecht5", "seamless_m4t", "seamless_m4t_v2", "speech-encoder-decoder"})

    def load(self, source: str, config: Any, common: Mapping[str, Any], model_kwargs: Mapping[str, Any]) -> None:
        import transformers

        self.check_type(config)
        extra = {k: v for k, v in model_kwargs.items() if k != "dtype" and k not in common}
        self.pipeline = transformers.pipeline(
            "automatic-speech-recognition", model=source, device=self.device, dtype=self.dtype, model_kwargs=extra, **dict(common)
        )
        self.model = self.pipeline.model
        self.model.eval()

    def _kwargs(self) -> dict[str, Any]:
        kwargs = self.generate_kwargs({"num_beams": 1})
        if self.options.language:
            kwargs["tgt_lang" if self.model_type.startswith("seamless") else "language"] = self.options.language
        return kwargs

    def transcribe(self, clips: Sequence[np.ndarray]) -> list[str]:
        inputs: Any = [{"raw": c, "sampling_rate": SAMPLE_RATE} for c in clips]
        outputs = self.pipeline(inputs, batch_size=len(clips), generate_kwargs=self._kwargs() or None)
        return [str(o["text"]) for o in outputs]

    def settings(self) -> dict[str, Any]:
        return {
            "prompt": None,
            "decoding": "pipeline generate",
            "generate_kwargs": self._kwargs(),
            "post_processing": "pipeline text, strip",
        }
