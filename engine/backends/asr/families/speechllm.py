"""Speech-LLMs in transformers: the processor's prompt (or chat template), ``generate``, new tokens only.

The ``automatic-speech-recognition`` pipeline does not drive these models: each needs its
prompt. Per model, as its card and the Open ASR Leaderboard's script run it (the option ``prompt``
replaces the default text, ``system_prompt`` adds a system turn, ``generate_kwargs`` replace
decoding settings; all are recorded in ``backend_info``; docs/loaders.md lists the references):

model_type: how the request is built; default prompt; decoding

- granite_speech: tokenizer chat template (a system turn when ``system_prompt`` is set: the
  registry gives granite-speech-3.3 the leaderboard's, since its template would otherwise write
  today's date into one), ``<|audio|>`` repeated per clip's audio-token count, features from
  ``granite_features`` (torchaudio's mel, without torchaudio);
  ``<|audio|>can you transcribe the speech into a written format?``; greedy, max_new_tokens 200
- qwen2_audio: processor chat template with an audio part, then ``processor(text, audio)``;
  ``Detect the language and recognize the speech: <|en|>``; greedy, max_new_tokens 256
- phi4_multimodal: the leaderboard's ``<|user|><|audio|>{prompt}<|end|><|assistant|>``, the audio
  token repeated per clip's embed size, then feature extractor + tokenizer;
  ``Transcribe the audio clip into text.``; greedy, max_new_tokens 128, each answer cut at its
  first ``<|end|>`` or eos (the leaderboard's stopping criterion)
- voxtral: ``processor.apply_transcription_request(language, audio, model_id, format="wav")``
  (needs ``mistral-common``; clips are padded to 30 s chunks by the processor);
  (transcription mode, no text prompt); greedy, max_new_tokens 500
- glmasr: ``processor.apply_transcription_request(audio)`` (30 s windows, up to 655 s, by the
  processor); the processor's ``default_transcription_prompt``; greedy, max_new_tokens 500

On CUDA ``dtype: auto`` loads these in bfloat16 (``cuda_dtype``), as the cards and the leaderboard.

Phi-4-multimodal's full processor also builds its image processor, which needs torchvision; for
speech the loader uses only its audio feature extractor and tokenizer and expands the audio token
as that processor does, so torchvision is not needed.

Speech LoRA adapters: Granite Speech 3.3 ships one beside its weights (``has_lora_adapter``; the
model turns it on whenever audio is given) and Phi-4-multimodal one in ``speech-lora/`` (loaded
and set active here, as its card does). transformers loads either only through peft at its
``MIN_PEFT_VERSION``; without it the base model would run without its speech adapter and
transcribe badly, so such a checkpoint is refused with the install command before any weights load.

Batches are left-padded so every prompt ends where generation starts; only the tokens after the
prompt are decoded (``skip_special_tokens=True``), then stripped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from engine.backends.asr.families.base import FamilyLoader
from engine.data import SAMPLE_RATE
from engine.errors import BackendUnavailable, ConfigError

#: the system turn the Open ASR Leaderboard (transformers/run_eval.py) gives granite-speech-3.3: its chat
#: template would otherwise write the day of the run into a default one
LEADERBOARD_GRANITE_SYSTEM = (
    "Knowledge Cutoff Date: April 2024.\nToday's Date: December 19, 2024.\n"
    "You are Granite, developed by IBM. You are a helpful AI assistant"
)

_CARDS: dict[str, dict[str, Any]] = {
    "granite_speech": {
        "style": "granite",
        "prompt": "<|audio|>can you transcribe the speech into a written format?",
        "generate": {"max_new_tokens": 200, "num_beams": 1, "do_sample": False, "repetition_penalty": 1.0},
    },
    "qwen2_audio": {
        "style": "chat",
        "prompt": "Detect the language and recognize the speech: <|en|>",
        "generate": {"max_new_tokens": 256, "num_beams": 1, "do_sample": False},
    },
    "phi4_multimodal": {
        "style": "phi4",
        "prompt": "Transcribe the audio clip into text.",
        "generate": {"max_new_tokens": 128, "num_beams": 1, "do_sample": False},
    },
    "voxtral": {"style": "voxtral", "prompt": None, "generate": {"max_new_tokens": 500, "num_beams": 1, "do_sample": False}},
    # prompt None: the processor's default_transcription_prompt (the checkpoint's processor_config.json)
    "glmasr": {"style": "glmasr", "prompt": None, "generate": {"max_new_tokens": 500, "num_beams": 1, "do_sample": False}},
}
#: Phi-4-multimodal's turn end: the leaderboard stops each answer at it (or at the tokenizer's eos)
PHI4_STOP = "<|end|>"


class SpeechLLMFamily(FamilyLoader):
    """Prompt + ``generate`` + decode of the new tokens, per the model card of each speech-LLM."""

    name = "speech-llm"
    model_types = frozenset(_CARDS)
    cuda_dtype = "bfloat16"  # the cards and the leaderboard's scripts load these models in bfloat16
    #: the speech LoRA in use: None, "" (beside the weights) or "speech-lora"
    adapter: str | None = None
    audio_token: str = "<|audio|>"
    granite_mel: Any = None

    def load(self, source: str, config: Any, common: Mapping[str, Any], model_kwargs: Mapping[str, Any]) -> None:
        import transformers

        self.check_type(config)
        self.source = source
        self.adapter = self._speech_adapter(source, config, common)
        if self.model_type == "granite_speech":
            cls: Any = transformers.GraniteSpeechForConditionalGeneration
        elif self.model_type == "qwen2_audio":
            cls = transformers.Qwen2AudioForConditionalGeneration
        elif self.model_type == "voxtral":
            cls = transformers.VoxtralForConditionalGeneration
        elif self.model_type == "glmasr":
            cls = transformers.GlmAsrForConditionalGeneration
        else:
            cls = (
                transformers.AutoModelForSpeechSeq2Seq
                if self.model_type not in ("phi4_multimodal",)
                else transformers.Phi4MultimodalForCausalLM
            )
        self.model = cls.from_pretrained(source, **model_kwargs)
        if self.adapter == "speech-lora":  # Phi-4-multimodal's card: load the speech adapter, make it the active one
            self.model.load_adapter(
                source,
                adapter_name="speech",
                adapter_kwargs={
                    "subfolder": "speech-lora",
                    "revision": common.get("revision"),
                    "local_files_only": bool(common.get("local_files_only")),
                },
            )
            self.model.set_adapter("speech")
        tokenizer: Any
        if self.card["style"] == "phi4":  # audio only: no image processor (torchvision)
            self.feature_extractor = transformers.AutoFeatureExtractor.from_pretrained(self.processor_source(source), **common)
            tokenizer = transformers.AutoTokenizer.from_pretrained(self.processor_source(source), **common)
        elif self.card["style"] == "granite":  # the processor needs torchaudio: same features from granite_features
            from engine.backends.asr.families.granite_features import GraniteFeatureConfig, GraniteLogMel

            values, _ = transformers.GraniteSpeechFeatureExtractor.get_feature_extractor_dict(
                self.processor_source(source), revision=common.get("revision"), local_files_only=common.get("local_files_only", False)
            )
            self.granite_mel = GraniteLogMel(GraniteFeatureConfig.from_dict(values, f"{source}: preprocessor_config.json"), self.torch)
            tokenizer = transformers.AutoTokenizer.from_pretrained(self.processor_source(source), **common)
            self._check_granite_prompt(tokenizer)
        else:
            self.processor = transformers.AutoProcessor.from_pretrained(self.processor_source(source), **common)
            tokenizer = getattr(self.processor, "tokenizer", None)
        self.tokenizer: Any = tokenizer
        if tokenizer is not None and hasattr(tokenizer, "padding_side"):
            tokenizer.padding_side = "left"
        self.place()

    def _speech_adapter(self, source: str, config: Any, common: Mapping[str, Any]) -> str | None:
        """Where the checkpoint's speech LoRA lies ("" beside the weights, "speech-lora"), or None;
        refuses before loading when transformers could not load it (peft missing or too old)."""
        from transformers.utils import cached_file

        if self.model_type == "granite_speech" and getattr(config, "has_lora_adapter", False):
            folder = ""
        elif self.model_type == "phi4_multimodal":
            folder = "speech-lora"
        else:
            return None
        found = cached_file(
            source,
            "adapter_config.json",
            subfolder=folder,
            revision=common.get("revision"),
            local_files_only=bool(common.get("local_files_only")),
            _raise_exceptions_for_missing_entries=False,
            _raise_exceptions_for_connection_errors=False,
        )
        if found is None:
            return None
        need, have = _peft_versions()
        if have is None or _older(have, need):
            where = f"{folder}/adapter_config.json" if folder else "adapter_config.json beside the weights"
            raise BackendUnavailable(
                f"{source}: this {self.model_type} checkpoint ships its speech LoRA adapter ({where}), which transformers loads "
                f"only with peft >= {need} ({'peft is not installed' if have is None else f'found peft {have}'}); without it the "
                f"model would transcribe without its speech adapter. Fix: pip install 'peft>={need}'"
            )
        return folder

    def _check_granite_prompt(self, tokenizer: Any) -> None:
        self.audio_token = str(getattr(tokenizer, "audio_token", None) or "<|audio|>")
        if str(self.prompt() or "").count(self.audio_token) != 1:
            raise ConfigError(
                f"Granite Speech's prompt must hold the audio token {self.audio_token} exactly once, got "
                f"{self.prompt()!r}: fix the option 'prompt' (default {self.card['prompt']!r})"
            )
        template = str(getattr(tokenizer, "chat_template", None) or "")
        if "strftime_now" in template and not self.system_prompt():
            # Granite 3.x templates write "Today's Date: <today>" into a default system turn: the
            # prompt, and so the transcript, would change with the day the run is made
            raise ConfigError(
                f"{self.source}: its chat template writes today's date into a default system turn when none is "
                "given, so the prompt would change from day to day: set the option 'system_prompt' (the Open ASR Leaderboard "
                f"uses {LEADERBOARD_GRANITE_SYSTEM!r})"
            )

    def system_prompt(self) -> str | None:
        value = self.options.system_prompt
        return str(value) if value else None

    @property
    def card(self) -> dict[str, Any]:
        return _CARDS[self.model_type]

    def prompt(self) -> str | None:
        value = self.options.prompt
        return str(value) if value else self.card["prompt"]

    def _inputs(self, clips: list[np.ndarray]) -> Any:
        style = self.card["style"]
        prompt = self.prompt()
        if style == "voxtral":
            return self.processor.apply_transcription_request(
                language=(self.options.language or "en"),
                audio=clips,
                model_id=self.source,
                sampling_rate=SAMPLE_RATE,
                format="wav",  # arrays need a container: the processor writes each clip to a 16-bit WAV buffer
            )
        if style == "glmasr":  # prompt None: the processor's own default_transcription_prompt
            return self.processor.apply_transcription_request(audio=clips, prompt=prompt)
        if style == "phi4":
            feats = self.feature_extractor(clips, sampling_rate=SAMPLE_RATE, return_tensors="pt")
            audio = str(getattr(self.tokenizer, "audio_token", None) or "<|audio|>")
            texts = [f"<|user|>{audio * int(n)}{prompt}{PHI4_STOP}<|assistant|>" for n in feats["audio_embed_sizes"]]
            return {**self.tokenizer(texts, return_tensors="pt", padding=True), **feats}
        if style == "granite":  # as GraniteSpeechProcessor: the audio token repeated per clip's audio-token count
            system = self.system_prompt()
            chat = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
            text = str(self.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True))
            audio = self.granite_mel(clips)
            texts = [text.replace(self.audio_token, self.audio_token * n, 1) for n in audio.pop("audio_embed_sizes")]
            return {**self.tokenizer(texts, return_tensors="pt", padding=True), **audio}
        messages = [{"role": "user", "content": [{"type": "audio"}, {"type": "text", "text": prompt}]}]
        text = self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return self.processor(text=[text] * len(clips), audio=clips, sampling_rate=SAMPLE_RATE, return_tensors="pt", padding=True)

    def _stop_ids(self) -> list[int]:
        """Phi-4-multimodal: the leaderboard ends each answer at ``<|end|>`` or the tokenizer's eos."""
        ids = [self.tokenizer.convert_tokens_to_ids(PHI4_STOP), self.tokenizer.eos_token_id]
        return [int(i) for i in dict.fromkeys(ids) if i is not None and i != self.tokenizer.unk_token_id]

    def transcribe(self, clips: Sequence[np.ndarray]) -> list[str]:
        inputs = self._inputs([np.asarray(c, dtype=np.float32) for c in clips])
        kwargs = self.generate_kwargs(self.card["generate"])
        stops: list[int] = []
        if self.card["style"] == "phi4":
            stops = self._stop_ids()
            kwargs.setdefault("eos_token_id", stops)
            kwargs.setdefault("pad_token_id", self.tokenizer.pad_token_id)
        ids = self.model.generate(**self.to_device(inputs), **kwargs)
        new = ids[:, inputs["input_ids"].shape[1] :].cpu()
        decoder = self.processor if self.processor is not None else self.tokenizer
        if stops:  # each answer up to its first stop token, as the leaderboard's stopping criterion cuts it
            rows = [_until(row.tolist(), stops) for row in new]
            return [str(decoder.decode(row, skip_special_tokens=True, clean_up_tokenization_spaces=False)) for row in rows]
        return [str(t) for t in decoder.batch_decode(new, skip_special_tokens=True)]

    def settings(self) -> dict[str, Any]:
        style = {
            "granite": "tokenizer chat template, audio token x the clip's audio-token count, tokenizer + granite_features",
            "chat": "processor chat template with an audio part",
            "voxtral": "processor.apply_transcription_request",
            "phi4": "model card prompt <|user|><|audio|>{prompt}<|end|><|assistant|>, feature extractor + tokenizer",
            "glmasr": "processor.apply_transcription_request",
        }[self.card["style"]]
        prompt = self.prompt()
        if self.card["style"] == "glmasr" and prompt is None and self.processor is not None:
            prompt = str(getattr(self.processor, "default_transcription_prompt", "") or "") or None
        out: dict[str, Any] = {
            "prompt": prompt,
            "prompt_style": style,
            "generate_kwargs": self.generate_kwargs(self.card["generate"]),
            "padding": "left",
            "post_processing": "decode tokens after the prompt (skip_special_tokens=True), strip",
        }
        if self.card["style"] == "granite":
            out["system_prompt"] = self.system_prompt()
            out["features"] = (
                "log-Mel as GraniteSpeechFeatureExtractor (torchaudio MelSpectrogram) computed with torch.stft and "
                "an HTK mel bank (granite_features)"
            )
        if self.model_type in ("granite_speech", "phi4_multimodal"):
            out["speech_adapter"] = None if self.adapter is None else (self.adapter or "adapter beside the weights")
        if self.card["style"] == "voxtral":
            out["language"] = self.options.language or "en"
            out["audio_input"] = "16-bit WAV buffer per clip (format='wav'), padded to 30 s chunks by the processor"
        return out


def _until(row: list[int], stops: list[int]) -> list[int]:
    """The tokens before the first of ``stops``."""
    for i, token in enumerate(row):
        if token in stops:
            return row[:i]
    return row


def _peft_versions() -> tuple[str, str | None]:
    """(the peft release transformers needs to load adapters, the installed one or None)."""
    from importlib.metadata import PackageNotFoundError, version

    from transformers.integrations.peft import MIN_PEFT_VERSION

    try:
        return str(MIN_PEFT_VERSION), version("peft")
    except PackageNotFoundError:
        return str(MIN_PEFT_VERSION), None


def _older(have: str, need: str) -> bool:
    from packaging.version import Version

    return Version(have) < Version(need)
