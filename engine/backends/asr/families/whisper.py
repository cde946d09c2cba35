"""Whisper in transformers (openai/whisper-*, distil-whisper, CrisperWhisper, lite-whisper).

Model-card usage: ``WhisperProcessor`` log-Mel features, ``generate`` (greedy unless
``num_beams``), ``batch_decode(skip_special_tokens=True)``. Clips up to 30 s are batched in one
``generate``; longer clips use Whisper's sequential long-form generation with timestamps, one
clip at a time. English-only checkpoints take no language; multilingual ones get ``language``
and ``task`` when the entry sets them (otherwise Whisper detects the language).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from engine.backends.asr.families.base import FamilyLoader
from engine.data import SAMPLE_RATE

_WINDOW_S = 30.0


class WhisperFamily(FamilyLoader):
    """Batched Whisper generate on 30 s windows; long-form for longer clips."""

    name = "whisper"
    # lite-whisper (efficient-speech/lite-whisper-*) is remote code whose config says 'lite-whisper'
    model_types = frozenset({"whisper", "lite-whisper"})

    @classmethod
    def cuda_dtype_for(cls, model_type: str) -> str:
        # the leaderboard's liteASR script loads lite-whisper in float16; its transformers script, Whisper in bfloat16
        return "float16" if model_type == "lite-whisper" else "bfloat16"

    def load(self, source: str, config: Any, common: Mapping[str, Any], model_kwargs: Mapping[str, Any]) -> None:
        import transformers

        self.check_type(config)
        self.model = transformers.AutoModelForSpeechSeq2Seq.from_pretrained(source, **model_kwargs)
        self.processor = transformers.AutoProcessor.from_pretrained(self.processor_source(source), **common)
        self.place()

    def _kwargs(self) -> dict[str, Any]:
        kwargs = self.generate_kwargs({"num_beams": 1})
        for key in ("language", "task"):
            if self.options.get(key):
                kwargs[key] = self.options[key]
        return kwargs

    def transcribe(self, clips: Sequence[np.ndarray]) -> list[str]:
        extractor = self.processor.feature_extractor
        window = int(_WINDOW_S * SAMPLE_RATE)
        short = [i for i, c in enumerate(clips) if c.shape[0] <= window]
        texts: list[str] = [""] * len(clips)
        kwargs = self._kwargs()
        if short:
            feats = extractor([clips[i] for i in short], sampling_rate=SAMPLE_RATE, return_attention_mask=True, return_tensors="pt")
            ids = self.model.generate(
                feats.input_features.to(self.device, self.model.dtype), attention_mask=feats.attention_mask.to(self.device), **kwargs
            )
            for i, text in zip(short, self.processor.batch_decode(ids, skip_special_tokens=True)):
                texts[i] = text
        for i, clip in enumerate(clips):
            if clip.shape[0] > window:
                feats = extractor(
                    [clip], sampling_rate=SAMPLE_RATE, truncation=False, padding="longest", return_attention_mask=True, return_tensors="pt"
                )
                ids = self.model.generate(
                    feats.input_features.to(self.device, self.model.dtype),
                    attention_mask=feats.attention_mask.to(self.device),
                    return_timestamps=True,
                    **kwargs,
                )
                texts[i] = self.processor.batch_decode(ids, skip_special_tokens=True)[0]
        return texts

    def settings(self) -> dict[str, Any]:
        kwargs = self._kwargs()
        beams = int(kwargs.get("num_beams", 1))
        return {
            "prompt": "decoder prompt <|startoftranscript|>"
            + (f"<|{self.options['language']}|>" if self.options.get("language") else "")
            + (f"<|{self.options['task']}|>" if self.options.get("task") else "")
            + " (the rest from the checkpoint's generation_config)",
            "decoding": "greedy" if beams == 1 else f"beam search ({beams})",
            "generate_kwargs": {k: v for k, v in kwargs.items() if isinstance(v, (int, float, str, bool))},
            "long_form": "clips over 30 s: sequential long-form generate with timestamps, one clip at a time",
            "post_processing": "batch_decode(skip_special_tokens=True), strip",
        }
