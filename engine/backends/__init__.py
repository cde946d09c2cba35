"""Backends behind registries. Built-in entries are lazy so listing never imports heavy extras."""

from __future__ import annotations

from engine.registry import Registry

ASR_BACKENDS: Registry[type] = Registry("ASR backend")
SV_BACKENDS: Registry[type] = Registry("speaker-verification backend")
SER_BACKENDS: Registry[type] = Registry("speech-emotion backend")
TTS_BACKENDS: Registry[type] = Registry("TTS backend")

ASR_BACKENDS.register_lazy("faster-whisper", "engine.backends.asr_faster_whisper:FasterWhisperBackend")
ASR_BACKENDS.register_lazy("pocketsphinx", "engine.backends.asr_pocketsphinx:PocketsphinxBackend")
ASR_BACKENDS.register_lazy("transformers", "engine.backends.asr_transformers:TransformersBackend")
ASR_BACKENDS.register_lazy("nemo", "engine.backends.asr_nemo:NemoBackend")
ASR_BACKENDS.register_lazy("openai-compatible", "engine.backends.asr_openai:OpenAICompatibleBackend")
