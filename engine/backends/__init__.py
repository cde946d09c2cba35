"""Backends behind registries filled from entry points (engine/registry.py; built-ins in pyproject.toml).

Listing names reads entry-point metadata only, so it never imports a backend or its heavy extras.
"""

from __future__ import annotations

from typing import Any

from engine.data import ModelSpec
from engine.registry import Registry

ASR_BACKENDS: Registry[type] = Registry("ASR backend", "audit_engine.asr_backends")
SV_BACKENDS: Registry[type] = Registry("speaker-verification backend", "audit_engine.sv_backends")
SER_BACKENDS: Registry[type] = Registry("speech-emotion backend", "audit_engine.ser_backends")
TTS_BACKENDS: Registry[type] = Registry("TTS backend", "audit_engine.tts_backends")
DIAR_BACKENDS: Registry[type] = Registry("diarization backend", "audit_engine.diarization_backends")
JUDGE_BACKENDS: Registry[type] = Registry("audio-LM judge backend", "audit_engine.judge_backends")


def build_backend(spec: ModelSpec) -> Any:
    """Construct (not load) the ASR backend a model spec names; options are checked by the backend."""
    cls = ASR_BACKENDS.get(spec.backend)
    return cls(**dict(spec.options))
