"""The matched-voice arm of the synthetic-voice probe: for each original speaker, the available TTS
voice that sounds most like them.

The RW-Voice-EQ Bench paper (§3.2) renders the correct transcript twice: with a generic voice and
with a voice matched to the original speaker, so that a model's drop on synthetic audio can be
told apart from a drop caused merely by a voice unlike the speaker's. Here the match is chosen
from a configurable pool of voices (``engine:voice`` entries; ``engine:*`` takes every voice of a
backend when that backend is installed) by speaker embedding: every pool voice reads one fixed
calibration text, the speaker is the mean embedding of up to ``match_clips_per_speaker`` of their
real clips (L2-normalized before and after averaging), and the voice with the highest cosine
wins. A clip without a speaker label is its own speaker.

A pool voice that synthesized the speaker's own clips (named by ``derivation.tts`` of a synthetic
corpus, or by a speaker label that is a pool voice's ``engine:voice``, as in the demo corpus) is
never chosen for them: its rendition would be a copy of the benchmark audio, not a control.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from audits.probes.synthetic_voice import synthesize
from engine.backends.base import SVBackend, TTSBackend
from engine.data import SAMPLE_RATE, Utterance
from engine.errors import AudioError, AuditError, ConfigError

log = logging.getLogger(__name__)

#: Harvard sentences (list 1): phonetically varied, about 7 s in most voices
CALIBRATION_TEXT = (
    "The birch canoe slid on the smooth planks. Glue the sheet to the dark blue background. It is easy to tell the depth of a well."
)
#: a wildcard that would expand to more voices than this is refused (espeak-ng knows hundreds)
MAX_WILDCARD = 16


def parse_pool(entries: Iterable[Any], where: str) -> tuple[str, ...]:
    """Check ``engine:voice`` entries against the TTS registry (no backend is loaded here)."""
    from engine.backends import TTS_BACKENDS
    from engine.errors import RegistryError

    out: list[str] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, str) or ":" not in entry or not entry.split(":", 1)[1].strip():
            raise ConfigError(f"{where}[{i}]: {entry!r} is not 'engine:voice' (e.g. 'flite:slt', 'espeak-ng:en-us+m3', 'kokoro:*')")
        engine = entry.split(":", 1)[0]
        try:
            TTS_BACKENDS.get(engine)
        except RegistryError as exc:
            raise ConfigError(f"{where}[{i}]: {exc}") from None
        if entry in out:
            raise ConfigError(f"{where}[{i}]: '{entry}' is listed twice")
        out.append(entry)
    if not out:
        raise ConfigError(f"{where} is empty: list the TTS voices to match speakers against, e.g. ['flite:*', 'espeak-ng:en-us+m3']")
    return tuple(out)


@dataclass(frozen=True)
class VoiceMatch:
    """The pool voice chosen for one speaker and how close it is (cosine of speaker embeddings)."""

    speaker: str
    voice: str  # engine:voice
    similarity: float
    runner_up: str | None
    runner_up_similarity: float | None
    n_clips: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "speaker": self.speaker,
            "voice": self.voice,
            "similarity": round(self.similarity, 4),
            "runner_up": self.runner_up,
            "runner_up_similarity": None if self.runner_up_similarity is None else round(self.runner_up_similarity, 4),
            "n_clips": self.n_clips,
        }


class VoiceBank:
    """TTS backends by engine name, loaded once, rendering any ``engine:voice`` in this process.

    The probe renders through TTS units on the run's engine instead
    (``audits.probes.helper_passes.EngineVoices``, which gives the same samples); this is the direct form.
    """

    def __init__(self) -> None:
        self._tts: dict[str, TTSBackend] = {}

    def backend(self, engine: str) -> TTSBackend:
        if engine not in self._tts:
            from engine.backends import TTS_BACKENDS

            tts = TTS_BACKENDS.get(engine)()
            tts.load()
            self._tts[engine] = tts
        return self._tts[engine]

    def add(self, engine: str, tts: TTSBackend) -> None:
        self._tts[engine] = tts

    def version(self, engine: str) -> str:
        fn = getattr(self.backend(engine), "version", None)
        return str(fn()) if callable(fn) else "unknown"

    def render(self, key: str, text: str) -> np.ndarray:
        """``text`` in voice ``engine:voice``, 16 kHz with the probe's lead and tail."""
        engine, voice = key.split(":", 1)
        return synthesize(self.backend(engine), text, voice)


def unit_vector(x: Any) -> np.ndarray:
    """``x`` as a float64 vector of length 1 (unchanged when it is all zeros)."""
    v = np.asarray(x, dtype=np.float64).reshape(-1)
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


_unit = unit_vector


def voice_embeddings(bank: VoiceBank, voices: Sequence[str], encoder: SVBackend) -> tuple[dict[str, np.ndarray], list[str]]:
    """Unit embedding of each pool voice reading :data:`CALIBRATION_TEXT`, with the TTS and ``encoder``
    called here; voices that fail to render are left out and noted.

    The probe computes the same as TTS and encoder units on the run's engine
    (``audits.probes.helper_passes.EngineVoices``), stored per voice, TTS installation and encoder.
    """
    out: dict[str, np.ndarray] = {}
    notes: list[str] = []
    todo: list[tuple[str, np.ndarray]] = []
    for key in voices:
        try:
            todo.append((key, bank.render(key, CALIBRATION_TEXT)))
        except (AuditError, OSError) as exc:
            notes.append(f"{key} left out: {exc}")
            log.warning("synthetic_voice: pool voice %s left out: %s", key, exc)
    if todo:
        for (key, _), e in zip(todo, encoder.embed_batch([x for _, x in todo], SAMPLE_RATE), strict=True):
            out[key] = _unit(e)
    return {k: out[k] for k in voices if k in out}, notes


def speaker_key(u: Utterance) -> str:
    """The speaker a clip is matched as: its label, else the clip itself."""
    return str(u.speaker) if u.speaker else f"clip:{u.utt_id}"


def source_voice(u: Utterance) -> str | None:
    """``engine:voice`` that synthesized a clip, when its derivation says so (synthetic corpora)."""
    tts = (u.derivation or {}).get("tts")
    if isinstance(tts, Mapping) and tts.get("engine") and tts.get("voice"):
        return f"{tts['engine']}:{tts['voice']}"
    return None


def speaker_embeddings(clips: Mapping[str, Sequence[np.ndarray]], encoder: SVBackend) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Mean unit embedding per speaker over their clips, with ``encoder`` called here; clips too short to embed are skipped.

    The probe computes the same with the encoder on the engine's workers
    (``audits.probes.helper_passes.EngineVoices.embed``) and :func:`mean_speaker_embeddings`.
    """
    per: dict[str, list[np.ndarray | None]] = {}
    for spk, audios in clips.items():
        for x in audios:
            try:
                per.setdefault(spk, []).append(encoder.embed_batch([x], SAMPLE_RATE)[0])
            except AudioError as exc:
                log.debug("synthetic_voice: a clip of %s not embedded: %s", spk, exc)
                per.setdefault(spk, []).append(None)
    return mean_speaker_embeddings(per)


def mean_speaker_embeddings(per_speaker: Mapping[str, Sequence[Any]]) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Mean of the L2-normalized embeddings of each speaker's clips, normalized again; None entries (not embedded) are skipped."""
    out: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    for spk, embeddings in per_speaker.items():
        embs = [_unit(e) for e in embeddings if e is not None]
        if embs:
            out[spk] = _unit(np.mean(embs, axis=0))
            counts[spk] = len(embs)
    return out, counts


def choose_voices(
    speakers: Mapping[str, np.ndarray],
    pool: Mapping[str, np.ndarray],
    counts: Mapping[str, int] | None = None,
    exclude: Mapping[str, Iterable[str]] | None = None,
) -> dict[str, VoiceMatch]:
    """Per speaker, the pool voice of highest cosine (ties: pool order), leaving out ``exclude[speaker]``."""
    out: dict[str, VoiceMatch] = {}
    for spk, emb in speakers.items():
        banned = set((exclude or {}).get(spk, ()))
        scored = sorted(
            ((float(np.dot(_unit(emb), _unit(v))), i, k) for i, (k, v) in enumerate(pool.items()) if k not in banned),
            key=lambda t: (-t[0], t[1]),
        )
        if not scored:
            continue
        best = scored[0]
        second = scored[1] if len(scored) > 1 else None
        out[spk] = VoiceMatch(
            spk, best[2], best[0], second[2] if second else None, second[0] if second else None, int((counts or {}).get(spk, 0))
        )
    return out


def match_summary(
    matches: Mapping[str, VoiceMatch], pool: Sequence[str], notes: Sequence[str], file: Path | None, encoder: str
) -> dict[str, Any]:
    """Figures for summary.json (bounded by the pool size, not by the number of speakers)."""
    sims = np.array([m.similarity for m in matches.values()], dtype=float)
    by_voice: dict[str, int] = {}
    for m in matches.values():
        by_voice[m.voice] = by_voice.get(m.voice, 0) + 1
    out: dict[str, Any] = {
        "pool": list(pool),
        "n_speakers": len(matches),
        "chosen": dict(sorted(by_voice.items(), key=lambda kv: (-kv[1], kv[0]))),
        "similarity": (
            {"mean": round(float(sims.mean()), 4), "min": round(float(sims.min()), 4), "max": round(float(sims.max()), 4)}
            if sims.size
            else None
        ),
        "calibration_text": CALIBRATION_TEXT,
        "encoder": encoder,
        "method": "cosine of speaker embeddings: mean over the speaker's real clips vs one calibration rendition per pool voice",
    }
    if notes:
        out["notes"] = list(notes)
    if file is not None:
        out["file"] = str(file)
    return out
