"""Audio encoder-decoders in transformers: Moonshine (incl. streaming), Kyutai STT, Cohere Transcribe.

Each follows its model card:

* Moonshine / Moonshine streaming: ``processor(audio)`` then ``generate`` with a length cap of
  6.5 tokens per second of audio (the card's guard against repetition loops on short clips).
  Each clip gets a ``generate`` of its own: padding reaches a shorter clip's encoder frames
  (Moonshine's GroupNorm after the first convolution takes its statistics over the whole padded
  length; the streaming encoder's last frames see it), so in a batch its words would depend on
  the batch's longest clip.
* Kyutai STT (kyutai/stt-2.6b-en-trfs): ``processor(audio, padding=True)`` then ``generate``;
  its feature extractor works at 24 kHz, so clips are resampled (soxr) to the extractor's rate.
  The model is streaming (one text token per codec frame) and ``generate`` runs as many steps
  as the batch's longest clip has frames; each clip's answer is cut to its own frame count,
  which is exactly what it yields alone (later steps only see padding).
* Cohere Transcribe: ``processor(audio, language=..., punctuation=...)`` builds the decoder prompt
  (language and punctuation tokens); then ``generate``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from engine.backends.asr.families.base import FamilyLoader
from engine.data import SAMPLE_RATE

_MOONSHINE = frozenset({"moonshine", "moonshine_streaming"})
_TOKENS_PER_S = 6.5  # Moonshine model card: max_length = audio seconds * 6.5


class EncoderDecoderFamily(FamilyLoader):
    """Processor features, encoder-decoder ``generate``, ``batch_decode``."""

    name = "encoder-decoder"
    model_types = frozenset({"moonshine", "moonshine_streaming", "kyutai_speech_to_text", "cohere_asr"})

    def load(self, source: str, config: Any, common: Mapping[str, Any], model_kwargs: Mapping[str, Any]) -> None:
        import transformers

        self.check_type(config)
        if self.model_type == "kyutai_speech_to_text":
            self.model = transformers.KyutaiSpeechToTextForConditionalGeneration.from_pretrained(source, **model_kwargs)
        else:
            self.model = transformers.AutoModelForSpeechSeq2Seq.from_pretrained(source, **model_kwargs)
        self.processor = transformers.AutoProcessor.from_pretrained(self.processor_source(source), **common)
        self.place()

    def _inputs(self, clips: Sequence[np.ndarray]) -> Any:
        extractor = getattr(self.processor, "feature_extractor", None)
        rate = int(getattr(extractor, "sampling_rate", SAMPLE_RATE) or SAMPLE_RATE)
        if rate != SAMPLE_RATE:  # Kyutai's Mimi front end runs at 24 kHz
            import soxr

            clips = [np.asarray(soxr.resample(c, SAMPLE_RATE, rate), dtype=np.float32) for c in clips]
        if self.model_type == "cohere_asr":
            return self.processor(
                audio=list(clips), sampling_rate=SAMPLE_RATE, language=str(self.options.get("language") or "en"),
                punctuation=bool(self.options.get("punctuation", True)), return_tensors="pt",
            )  # fmt: skip
        kwargs: dict[str, Any] = {"sampling_rate": rate, "return_tensors": "pt"}
        if self.model_type == "kyutai_speech_to_text":
            kwargs["padding"] = True
        if self.model_type in _MOONSHINE:
            kwargs.update(padding=True, return_attention_mask=True)
        return self.processor(audio=list(clips), **kwargs)

    def transcribe(self, clips: Sequence[np.ndarray]) -> list[str]:
        if self.model_type in _MOONSHINE and len(clips) > 1:
            return [self._generate([c])[0] for c in clips]
        return self._generate(clips)

    def _generate(self, clips: Sequence[np.ndarray]) -> list[str]:
        inputs = self._inputs(clips)
        kwargs = self.generate_kwargs({"num_beams": 1, "do_sample": False})
        caps: list[int] | None = None
        if self.model_type in _MOONSHINE and "max_new_tokens" not in kwargs:
            caps = [max(1, int(c.shape[0] / SAMPLE_RATE * _TOKENS_PER_S)) for c in clips]
            kwargs["max_length"] = max(caps)
        if self.model_type == "kyutai_speech_to_text" and "padding_mask" in inputs:
            frame = int(self.model.config.codec_config.frame_size)
            caps = [1 + int(n) // frame for n in inputs["padding_mask"].sum(-1).tolist()]  # the start token + one per frame
        ids = self.model.generate(**self.to_device(inputs), **kwargs).cpu()
        rows = [row.tolist() for row in ids]
        if caps is not None:
            # Moonshine: max_length counts the decoder start token; greedy tokens do not depend on the cap.
            # Kyutai: tokens after a clip's last frame only saw padding.
            rows = [row[:cap] for row, cap in zip(rows, caps)]
        return [str(t) for t in self.processor.batch_decode(rows, skip_special_tokens=True)]

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {"decoding": "greedy", "generate_kwargs": self.generate_kwargs({"num_beams": 1, "do_sample": False})}
        if self.model_type in _MOONSHINE:
            out["prompt"] = None
            out["length_cap"] = f"{_TOKENS_PER_S} tokens per second of audio, per clip (model card)"
            out["batching"] = "one clip per generate (padding would reach a clip's encoder frames)"
        elif self.model_type == "cohere_asr":
            out["prompt"] = (f"decoder prompt for language={self.options.get('language') or 'en'}, "
                             f"punctuation={bool(self.options.get('punctuation', True))}")
        else:
            out["prompt"] = None
            out["resampled_to_hz"] = 24000
            out["length_cap"] = "one text token per codec frame of the clip itself (the batch is cut per clip)"
        out["post_processing"] = "batch_decode(skip_special_tokens=True), strip"
        return out
