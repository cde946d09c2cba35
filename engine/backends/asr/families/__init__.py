"""Model families of the study line-up: which backend drives each, and which loader implements it.

A registry entry names its ``family``; this table says where the family's loader lives (a
``module:attr`` string, imported only when used, so listing the registry never imports torch).
Which backends run a family is not repeated here: each backend declares the families it runs
(``AsrCapabilities.families``), and :attr:`Family.backends` asks those declarations. Families
inside the ``transformers`` backend share one interface (``engine/backends/asr/families/base.py``);
the others are whole backends of their own.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError


@dataclass(frozen=True)
class Family:
    """One family: its loader, the pip extra, and one line on it; the backends that run it declare it."""

    name: str
    loader: str
    extra: str
    description: str

    @property
    def backends(self) -> tuple[str, ...]:
        """The registered ASR backends that declare this family (imports their modules, never torch)."""
        from engine.backends import family_backends

        return family_backends(self.name)


# a table, kept as laid out by hand: one family per entry, its name, loader, extra and description side by side
# fmt: off
FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("whisper", "engine.backends.asr.families.whisper:WhisperFamily", "transformers",
               "Whisper in transformers (incl. distil, CrisperWhisper, lite-whisper): batched generate on 30 s log-Mel windows"),
        Family("whisper-ct2", "engine.backends.asr.faster_whisper:FasterWhisperBackend", "core",
               "Whisper converted to CTranslate2 (faster-whisper)"),
        Family("ctc", "engine.backends.asr.families.ctc:CTCFamily", "transformers",
               "CTC encoders (wav2vec2, HuBERT, data2vec, MMS with its language adapter): greedy CTC"),
        Family("encoder-decoder", "engine.backends.asr.families.encdec:EncoderDecoderFamily", "transformers",
               "audio encoder-decoders (Moonshine incl. streaming, Kyutai STT, Cohere Transcribe): processor + generate"),
        Family("speech-llm", "engine.backends.asr.families.speechllm:SpeechLLMFamily", "transformers",
               "speech-LLMs (Granite Speech, Qwen2-Audio, Voxtral, Phi-4-multimodal, GLM-ASR): prompt or chat template + generate"),
        Family("seq2seq-pipeline", "engine.backends.asr.families.pipeline:PipelineFamily", "transformers",
               "other seq2seq checkpoints (Speech2Text, SpeechT5, SeamlessM4T) through the automatic-speech-recognition pipeline"),
        Family("qwen3-asr", "engine.backends.asr.qwen3_asr:Qwen3ASRBackend", "qwen-asr",
               "Qwen3-ASR through the qwen-asr package"),
        Family("nemo-asr", "engine.backends.asr.nemo:NemoBackend", "nemo",
               "NeMo ASRModel (Parakeet CTC/RNNT/TDT, Conformer/FastConformer, Canary with task and language arguments)"),
        Family("nemo-salm", "engine.backends.asr.nemo:NemoBackend", "nemo",
               "NeMo speechlm2 SALM (Canary-Qwen): audio-locator prompt + generate"),
        Family("hosted", "engine.backends.hosted.base:HostedASRBackend", "core", "hosted speech-to-text APIs, one vendor backend each"),
    )
}
# fmt: on


def get_family(name: str) -> Family:
    """The family called ``name``, or a ConfigError listing the known ones."""
    if name not in FAMILIES:
        raise ConfigError(f"unknown model family '{name}' (known: {', '.join(sorted(FAMILIES))})")
    return FAMILIES[name]


def family_loader(name: str) -> Any:
    """Import and return the loader class of a family (imports the module, never torch at import)."""
    module, attr = get_family(name).loader.split(":", 1)
    loader: Any = getattr(importlib.import_module(module), attr)
    return loader
