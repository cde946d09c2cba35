"""Speech-LLMs in transformers: the processor's prompt (or chat template), ``generate``, new tokens only.

The ``automatic-speech-recognition`` pipeline does not drive these models: each needs its
prompt. Per model card (the option ``prompt`` replaces the default text; ``generate_kwargs``
replace decoding settings; both are recorded in ``backend_info``):

model_type: how the request is built; default prompt; card decoding

- granite_speech: tokenizer chat template, then ``processor(text, audio)``;
  ``<|audio|>can you transcribe the speech into a written format?``; beams 4, max_new_tokens 200
- qwen2_audio: processor chat template with an audio part, then ``processor(text, audio)``;
  ``Detect the language and recognize the speech: <|en|>``; greedy, max_new_tokens 256
- phi4_multimodal: the card's ``<|user|><|audio|>{prompt}<|end|><|assistant|>``, the audio token repeated
  per clip's embed size, then feature extractor + tokenizer; ``Transcribe the audio to text.``; greedy, max_new_tokens 1000
- voxtral: ``processor.apply_transcription_request(language, audio, model_id, format="wav")``
  (needs ``mistral-common``);
  (transcription mode, no text prompt); greedy, max_new_tokens 500
- glmasr: ``processor.apply_transcription_request(audio, prompt)``;
  ``Please transcribe this audio into text``; greedy, max_new_tokens 500

Phi-4-multimodal's full processor also builds its image processor, which needs torchvision; for
speech the loader uses only its audio feature extractor and tokenizer and expands the audio token
as that processor does, so torchvision is not needed.

Batches are left-padded so every prompt ends where generation starts; only the tokens after the
prompt are decoded (``skip_special_tokens=True``), then stripped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from engine.backends.asr.families.base import FamilyLoader
from engine.data import SAMPLE_RATE

_CARDS: dict[str, dict[str, Any]] = {
    "granite_speech": {"style": "granite", "prompt": "<|audio|>can you transcribe the speech into a written format?",
                       "generate": {"max_new_tokens": 200, "num_beams": 4, "do_sample": False, "min_length": 1, "repetition_penalty": 1.0,
                           "length_penalty": 1.0}},
    "qwen2_audio": {"style": "chat", "prompt": "Detect the language and recognize the speech: <|en|>",
                    "generate": {"max_new_tokens": 256, "num_beams": 1, "do_sample": False}},
    "phi4_multimodal": {"style": "phi4", "prompt": "Transcribe the audio to text.",
                        "generate": {"max_new_tokens": 1000, "num_beams": 1, "do_sample": False}},
    "voxtral": {"style": "voxtral", "prompt": None, "generate": {"max_new_tokens": 500, "num_beams": 1, "do_sample": False}},
    "glmasr": {"style": "glmasr", "prompt": "Please transcribe this audio into text",
        "generate": {"max_new_tokens": 500, "num_beams": 1, "do_sample": False}},
}  # fmt: skip


class SpeechLLMFamily(FamilyLoader):
    """Prompt + ``generate`` + decode of the new tokens, per the model card of each speech-LLM."""

    name = "speech-llm"
    model_types = frozenset(_CARDS)

    def load(self, source: str, config: Any, common: Mapping[str, Any], model_kwargs: Mapping[str, Any]) -> None:
        import transformers

        self.check_type(config)
        self.source = source
        if self.model_type == "granite_speech":
            cls: Any = transformers.GraniteSpeechForConditionalGeneration
        elif self.model_type == "qwen2_audio":
            cls = transformers.Qwen2AudioForConditionalGeneration
        elif self.model_type == "voxtral":
            cls = transformers.VoxtralForConditionalGeneration
        elif self.model_type == "glmasr":
            cls = transformers.GlmAsrForConditionalGeneration
        else:
            cls = transformers.AutoModelForSpeechSeq2Seq if self.model_type not in ("phi4_multimodal",
                ) else transformers.Phi4MultimodalForCausalLM
        self.model = cls.from_pretrained(source, **model_kwargs)
        tokenizer: Any
        if self.card["style"] == "phi4":  # audio only: no image processor (torchvision)
            self.feature_extractor = transformers.AutoFeatureExtractor.from_pretrained(self.processor_source(source), **common)
            tokenizer = transformers.AutoTokenizer.from_pretrained(self.processor_source(source), **common)
        else:
            self.processor = transformers.AutoProcessor.from_pretrained(self.processor_source(source), **common)
            tokenizer = getattr(self.processor, "tokenizer", None)
        self.tokenizer: Any = tokenizer
        if tokenizer is not None and hasattr(tokenizer, "padding_side"):
            tokenizer.padding_side = "left"
        self.place()

    @property
    def card(self) -> dict[str, Any]:
        return _CARDS[self.model_type]

    def prompt(self) -> str | None:
        value = self.options.get("prompt")
        return str(value) if value else self.card["prompt"]

    def _inputs(self, clips: list[np.ndarray]) -> Any:
        style = self.card["style"]
        prompt = self.prompt()
        if style == "voxtral":
            return self.processor.apply_transcription_request(
                language=str(self.options.get("language") or "en"), audio=clips, model_id=self.source, sampling_rate=SAMPLE_RATE,
                format="wav",  # arrays need a container: the processor writes each clip to a 16-bit WAV buffer
            )
        if style == "glmasr":
            return self.processor.apply_transcription_request(audio=clips, prompt=[prompt] * len(clips))
        if style == "phi4":
            feats = self.feature_extractor(clips, sampling_rate=SAMPLE_RATE, return_tensors="pt")
            audio = str(getattr(self.tokenizer, "audio_token", None) or "<|audio|>")
            texts = [f"<|user|>{audio * int(n)}{prompt}<|end|><|assistant|>" for n in feats["audio_embed_sizes"]]
            return {**self.tokenizer(texts, return_tensors="pt", padding=True), **feats}
        if style == "granite":
            chat = [{"role": "user", "content": prompt}]
            text = self.processor.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
            return self.processor([text] * len(clips), clips, return_tensors="pt")
        messages = [{"role": "user", "content": [{"type": "audio"}, {"type": "text", "text": prompt}]}]
        text = self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return self.processor(text=[text] * len(clips), audio=clips, sampling_rate=SAMPLE_RATE, return_tensors="pt", padding=True)

    def transcribe(self, clips: Sequence[np.ndarray]) -> list[str]:
        inputs = self._inputs([np.asarray(c, dtype=np.float32) for c in clips])
        ids = self.model.generate(**self.to_device(inputs), **self.generate_kwargs(self.card["generate"]))
        new = ids[:, inputs["input_ids"].shape[1] :].cpu()
        decoder = self.processor if self.processor is not None else self.tokenizer
        return [str(t) for t in decoder.batch_decode(new, skip_special_tokens=True)]

    def settings(self) -> dict[str, Any]:
        style = {"granite": "tokenizer chat template + processor(text, audio)", "chat": "processor chat template with an audio part",
                 "voxtral": "processor.apply_transcription_request",
                 "phi4": "model card prompt <|user|><|audio|>{prompt}<|end|><|assistant|>, feature extractor + tokenizer",
                 "glmasr": "processor.apply_transcription_request"}[self.card["style"]]  # fmt: skip
        out: dict[str, Any] = {
            "prompt": self.prompt(),
            "prompt_style": style,
            "generate_kwargs": self.generate_kwargs(self.card["generate"]),
            "padding": "left",
            "post_processing": "decode tokens after the prompt (skip_special_tokens=True), strip",
        }
        if self.card["style"] == "voxtral":
            out["language"] = str(self.options.get("language") or "en")
            out["audio_input"] = "16-bit WAV buffer per clip (format='wav'), padded to 30 s chunks by the processor"
        return out
