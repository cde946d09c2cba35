"""Backends behind registries. Built-in entries are lazy so listing never imports heavy extras."""

from __future__ import annotations

from typing import Any

from engine.data import ModelSpec
from engine.registry import Registry

ASR_BACKENDS: Registry[type] = Registry("ASR backend")
SV_BACKENDS: Registry[type] = Registry("speaker-verification backend")
SER_BACKENDS: Registry[type] = Registry("speech-emotion backend")
TTS_BACKENDS: Registry[type] = Registry("TTS backend")
DIAR_BACKENDS: Registry[type] = Registry("diarization backend")
JUDGE_BACKENDS: Registry[type] = Registry("audio-LM judge backend")

ASR_BACKENDS.register_lazy("faster-whisper", "engine.backends.asr_faster_whisper:FasterWhisperBackend")
ASR_BACKENDS.register_lazy("pocketsphinx", "engine.backends.asr_pocketsphinx:PocketsphinxBackend")
ASR_BACKENDS.register_lazy("transformers", "engine.backends.asr_transformers:TransformersBackend")
ASR_BACKENDS.register_lazy("nemo", "engine.backends.asr_nemo:NemoBackend")
ASR_BACKENDS.register_lazy("openai-compatible", "engine.backends.asr_openai:OpenAICompatibleBackend")
ASR_BACKENDS.register_lazy("fault-inject", "engine.backends.fault:FaultInjectionBackend")
ASR_BACKENDS.register_lazy("simulated", "engine.backends.simulated:SimulatedBackend")
ASR_BACKENDS.register_lazy("memorizer", "engine.backends.memorizer:MemorizerBackend")
for _name, _cls in (
    ("deepgram", "DeepgramBackend"),
    ("assemblyai", "AssemblyAIBackend"),
    ("speechmatics", "SpeechmaticsBackend"),
    ("elevenlabs", "ElevenLabsBackend"),
    ("gladia", "GladiaBackend"),
    ("google-stt-v2", "GoogleSTTv2Backend"),
    ("azure-fast", "AzureFastBackend"),
):
    ASR_BACKENDS.register_lazy(_name, f"engine.backends.hosted.vendors:{_cls}")

SV_BACKENDS.register_lazy("resemblyzer", "engine.backends.sv_resemblyzer:ResemblyzerBackend")
SV_BACKENDS.register_lazy("speechbrain-ecapa", "engine.backends.sv_hub:SpeechBrainECAPA")
SV_BACKENDS.register_lazy("nemo-titanet", "engine.backends.sv_hub:NemoTitaNet")
SV_BACKENDS.register_lazy("wavlm-sv", "engine.backends.sv_hub:WavLMSV")

SER_BACKENDS.register_lazy("prosody", "engine.backends.ser_prosody:ProsodyBackend")
SER_BACKENDS.register_lazy("transformers-ser", "engine.backends.ser_hub:TransformersSER")
SER_BACKENDS.register_lazy("audeering-dim", "engine.backends.ser_hub:AudeeringDim")
SER_BACKENDS.register_lazy("emotion2vec", "engine.backends.ser_hub:Emotion2Vec")
SER_BACKENDS.register_lazy("gemini-judge", "engine.backends.hosted.judge_ser:GeminiJudgeSER")
SER_BACKENDS.register_lazy("openai-audio-judge", "engine.backends.hosted.judge_ser:OpenAIAudioJudgeSER")

JUDGE_BACKENDS.register_lazy("gemini", "engine.backends.hosted.judges:GeminiJudge")
JUDGE_BACKENDS.register_lazy("openai-audio", "engine.backends.hosted.judges:OpenAIAudioJudge")

TTS_BACKENDS.register_lazy("espeak-ng", "engine.backends.tts_espeak:EspeakTTS")
TTS_BACKENDS.register_lazy("flite", "engine.backends.tts_flite:FliteTTS")
TTS_BACKENDS.register_lazy("kokoro", "engine.backends.tts_kokoro:KokoroTTS")

DIAR_BACKENDS.register_lazy("vad-resemblyzer", "engine.backends.diar_baseline:VadResemblyzerDiarizer")
DIAR_BACKENDS.register_lazy("pyannote", "engine.backends.diar_pyannote:PyannoteDiarizer")


def build_backend(spec: ModelSpec) -> Any:
    """Construct (not load) the ASR backend a model spec names; options are checked by the backend."""
    cls = ASR_BACKENDS.get(spec.backend)
    return cls(**dict(spec.options))
