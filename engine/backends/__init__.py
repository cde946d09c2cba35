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

ASR_BACKENDS.register_lazy("faster-whisper", "engine.backends.asr.faster_whisper:FasterWhisperBackend")
ASR_BACKENDS.register_lazy("pocketsphinx", "engine.backends.asr.pocketsphinx:PocketsphinxBackend")
ASR_BACKENDS.register_lazy("transformers", "engine.backends.asr.transformers:TransformersBackend")
ASR_BACKENDS.register_lazy("nemo", "engine.backends.asr.nemo:NemoBackend")
ASR_BACKENDS.register_lazy("openai-compatible", "engine.backends.asr.openai_compatible:OpenAICompatibleBackend")
ASR_BACKENDS.register_lazy("fault-inject", "engine.backends.asr.fault:FaultInjectionBackend")
ASR_BACKENDS.register_lazy("simulated", "engine.backends.asr.simulated:SimulatedBackend")
ASR_BACKENDS.register_lazy("memorizer", "engine.backends.asr.memorizer:MemorizerBackend")
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
ASR_BACKENDS.register_lazy("modulate", "engine.backends.hosted.study_vendors:ModulateBackend")
ASR_BACKENDS.register_lazy("smallest", "engine.backends.hosted.study_vendors:SmallestBackend")
ASR_BACKENDS.register_lazy("qwen3-asr", "engine.backends.asr.qwen3_asr:Qwen3ASRBackend")

SV_BACKENDS.register_lazy("resemblyzer", "engine.backends.sv.resemblyzer:ResemblyzerBackend")
SV_BACKENDS.register_lazy("speechbrain-ecapa", "engine.backends.sv.hub:SpeechBrainECAPA")
SV_BACKENDS.register_lazy("nemo-titanet", "engine.backends.sv.hub:NemoTitaNet")
SV_BACKENDS.register_lazy("wavlm-sv", "engine.backends.sv.hub:WavLMSV")

SER_BACKENDS.register_lazy("prosody", "engine.backends.ser.prosody:ProsodyBackend")
SER_BACKENDS.register_lazy("transformers-ser", "engine.backends.ser.hub:TransformersSER")
SER_BACKENDS.register_lazy("audeering-dim", "engine.backends.ser.hub:AudeeringDim")
SER_BACKENDS.register_lazy("emotion2vec", "engine.backends.ser.hub:Emotion2Vec")
SER_BACKENDS.register_lazy("gemini-judge", "engine.backends.hosted.judge_ser:GeminiJudgeSER")
SER_BACKENDS.register_lazy("openai-audio-judge", "engine.backends.hosted.judge_ser:OpenAIAudioJudgeSER")

JUDGE_BACKENDS.register_lazy("gemini", "engine.backends.hosted.judges:GeminiJudge")
JUDGE_BACKENDS.register_lazy("openai-audio", "engine.backends.hosted.judges:OpenAIAudioJudge")

TTS_BACKENDS.register_lazy("espeak-ng", "engine.backends.tts.espeak:EspeakTTS")
TTS_BACKENDS.register_lazy("flite", "engine.backends.tts.flite:FliteTTS")
TTS_BACKENDS.register_lazy("kokoro", "engine.backends.tts.kokoro:KokoroTTS")

DIAR_BACKENDS.register_lazy("vad-resemblyzer", "engine.backends.diarization.baseline:VadResemblyzerDiarizer")
DIAR_BACKENDS.register_lazy("pyannote", "engine.backends.diarization.pyannote:PyannoteDiarizer")


def build_backend(spec: ModelSpec) -> Any:
    """Construct (not load) the ASR backend a model spec names; options are checked by the backend."""
    cls = ASR_BACKENDS.get(spec.backend)
    return cls(**dict(spec.options))
