"""Backends behind registries filled from entry points (engine/registry.py; built-ins in pyproject.toml).

Listing names reads entry-point metadata only, so it never imports a backend or its heavy extras.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.data import ModelSpec
from engine.errors import RegistryError
from engine.registry import Registry

if TYPE_CHECKING:
    from engine.backends.base import AsrCapabilities

ASR_BACKENDS: Registry[type] = Registry("ASR backend", "audit_engine.asr_backends")
SV_BACKENDS: Registry[type] = Registry("speaker-verification backend", "audit_engine.sv_backends")
SER_BACKENDS: Registry[type] = Registry("speech-emotion backend", "audit_engine.ser_backends")
TTS_BACKENDS: Registry[type] = Registry("TTS backend", "audit_engine.tts_backends")
DIAR_BACKENDS: Registry[type] = Registry("diarization backend", "audit_engine.diarization_backends")
JUDGE_BACKENDS: Registry[type] = Registry("audio-LM judge backend", "audit_engine.judge_backends")


def asr_capabilities(backend: str) -> AsrCapabilities:
    """What the ASR backend registered as ``backend`` declares it can do (imports that backend's module only)."""
    from engine.backends.base import AsrCapabilities

    caps = getattr(ASR_BACKENDS.get(backend), "capabilities", None)
    if not isinstance(caps, AsrCapabilities):
        raise RegistryError(f"ASR backend '{backend}': 'capabilities' must be an engine.backends.base.AsrCapabilities, got {caps!r}")
    return caps


def asr_backends_where(**wanted: Any) -> list[str]:
    """The registered ASR backends whose capabilities have every field of ``wanted`` (``hosted=True``), by
    name; for a family, :func:`family_backends`. Imports every backend's module (no weights, no torch)."""
    return [n for n in ASR_BACKENDS.names() if all(getattr(asr_capabilities(n), k) == v for k, v in wanted.items())]


def family_backends(family: str) -> tuple[str, ...]:
    """The registered ASR backends that declare they run ``family`` (``AsrCapabilities.families``)."""
    return tuple(n for n in ASR_BACKENDS.names() if family in asr_capabilities(n).families)


def build_backend(spec: ModelSpec) -> Any:
    """Construct (not load) the ASR backend a model spec names; options are checked by the backend."""
    cls = ASR_BACKENDS.get(spec.backend)
    return cls(**dict(spec.options))
