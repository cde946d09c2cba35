"""Text-to-speech backends (the demo corpus, the conversation set and the synthetic-voice probe).

The corpus builders take their engines from the TTS registry by the names their voice lists use,
and ask each engine for its voices and what to install (``TTSBackend.install_hint``), so adding an
engine to a voice list needs no code that knows its name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from engine.backends import TTS_BACKENDS
from engine.backends.base import TTSBackend
from engine.errors import BackendUnavailable


def tts_engines(names: Iterable[str]) -> dict[str, TTSBackend]:
    """The TTS engines a voice list names, each built from the TTS registry (``TTS_BACKENDS``) with its
    defaults, in the order the list first names them; an unknown name is the registry's error."""
    return {name: TTS_BACKENDS.get(name)() for name in dict.fromkeys(names)}


def check_voices(what: str, engines: Mapping[str, TTSBackend], voices: Sequence[tuple[str, str, str]]) -> dict[str, str]:
    """Load every engine and check that each ``(engine, voice, speaker)`` is installed, naming what to install
    (each engine's ``install_hint``) when an engine or a voice is missing; return each engine's version."""
    missing: dict[str, list[str]] = {}
    for name, engine in engines.items():
        try:
            engine.load()
        except BackendUnavailable as exc:
            raise BackendUnavailable(f"{what} needs the {name} voices: {exc}; {engine.install_hint}") from exc
        have = set(engine.voices())
        if lost := [speaker for e, voice, speaker in voices if e == name and voice not in have]:
            missing[name] = lost
    if missing:
        names = ", ".join(s for lost in missing.values() for s in lost)
        raise BackendUnavailable(f"TTS voices missing for {what}: {names}; {'; '.join(engines[e].install_hint for e in missing)}")
    return {name: engine.version() for name, engine in engines.items()}


__all__ = ["check_voices", "tts_engines"]
