"""The demo conversation set: long recordings in which two or three synthetic voices take turns.

Built offline and deterministically (espeak-ng and Flite, as the demo corpus) into
``$AUDIT_DATA_DIR/conversation`` so that ``audit run demo-conversation`` needs no network.

Design
------
Each recording lasts between ``min_s`` and ``max_s`` seconds (default 60-120 s). It has 2 or 3
speakers (alternating by recording index: even -> 2, odd -> 3) drawn from five voices of the two
engines, so every recording mixes engines. Turns are one sentence of the demo sentence list; the
next speaker is any speaker other than the current one. The gap before a turn is drawn from
0.15-0.8 s; with probability ``P_OVERLAP`` (0.15) the turn instead starts 0.3-0.8 s before the
previous turn ends (an overlap). After a turn, with probability ``P_BACKCHANNEL`` (0.25), another
speaker says a backchannel ("yeah", "right", "okay", ...) inside it, starting at 30-60 % of its
span. Every fourth recording (index 3, 7, ...) gets pink noise at ``NOISE_SNR_DB`` (15 dB) over
the whole mix. Each voice is level-normalized to the same active level before mixing.

References are exact by construction: a turn's segment is where its trimmed clip was placed.
``reference.rttm`` holds the speaker turns, ``reference.json`` the per-speaker SegLST with each
turn's words (the sentence's reference text), ``manifest.jsonl`` one NeMo line per recording
(``audio_filepath``, ``duration``, ``text`` = every turn in onset order, and the slice labels
``n_speakers`` and ``background``); ``corpus.json`` adds per-recording overlap and turn counts.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.audio.shards import encode_audio
from engine.backends.base import TTSBackend
from engine.backends.tts import check_voices, tts_engines
from engine.backends.tts.program import resample
from engine.corpus import transforms as tf
from engine.corpus.texts import SENTENCES
from engine.data import SAMPLE_RATE

log = logging.getLogger(__name__)

BUILDER_VERSION = "conversation-2"
DEFAULT_N_RECORDINGS = 20
VOICE_POOL: tuple[tuple[str, str], ...] = (
    ("espeak-ng", "en-us"),
    ("flite", "slt"),
    ("flite", "awb"),
    ("espeak-ng", "en-gb-x-rp"),
    ("flite", "rms"),
)
BACKCHANNELS: tuple[str, ...] = ("yeah", "right", "okay", "I see", "sure", "really", "exactly", "uh huh")
P_OVERLAP = 0.15
P_BACKCHANNEL = 0.25
GAP_RANGE_S = (0.15, 0.8)
OVERLAP_RANGE_S = (0.3, 0.8)
NOISE_SNR_DB = 15.0
LEAD_S = 0.5


@dataclass(frozen=True)
class Turn:
    """One placed clip: who says what, where (seconds)."""

    speaker: str
    text: str
    start: float
    end: float
    kind: str  # "turn" or "backchannel"
    say: str = ""  # what the synthesizer read, when it differs from the reference text


@dataclass(frozen=True)
class ConversationSet:
    """Where a built conversation set lives."""

    root: Path
    manifest: Path
    rttm: Path
    seglst: Path
    n_recordings: int
    seed: int

    def info(self) -> dict[str, Any]:
        return dict(json.loads((self.root / "corpus.json").read_text(encoding="utf-8")))


def speaker_name(engine: str, voice: str) -> str:
    return f"{engine}:{voice}"


class _Voices:
    """Synthesizes (and caches) level-normalized, trimmed 16 kHz clips per (voice, text)."""

    def __init__(self) -> None:
        self.engines: dict[str, TTSBackend] = tts_engines(e for e, _ in VOICE_POOL)  # from the TTS registry
        self.cache: dict[tuple[str, str, str], np.ndarray] = {}

    def check(self) -> dict[str, str]:
        return check_voices("the conversation set", self.engines, [(e, v, speaker_name(e, v)) for e, v in VOICE_POOL])

    def clip(self, engine: str, voice: str, text: str) -> np.ndarray:
        key = (engine, voice, text)
        if key not in self.cache:
            x, sr = self.engines[engine].synthesize(text, voice)
            y = tf.trim_silence(resample(x, sr, SAMPLE_RATE), SAMPLE_RATE)
            self.cache[key], _ = tf.normalize_level(y, SAMPLE_RATE)
        return self.cache[key]


def plan_recording(
    index: int, seed: int, voices: _Voices, min_s: float, max_s: float
) -> tuple[list[tuple[str, str]], list[Turn], float, bool]:
    """Decide speakers, turns and times of one recording (audio lengths come from the TTS)."""
    rng = np.random.default_rng([seed, index])
    n_spk = 2 if index % 2 == 0 else 3
    picks = rng.choice(len(VOICE_POOL), size=n_spk, replace=False)
    cast = [VOICE_POOL[int(i)] for i in picks]
    if len({e for e, _ in cast}) == 1:  # mix engines so voices differ clearly
        other = [v for v in VOICE_POOL if v[0] != cast[0][0]]
        cast[-1] = other[int(rng.integers(len(other)))]
    target = float(rng.uniform(min_s, max_s))
    order = rng.permutation(len(SENTENCES))
    turns: list[Turn] = []
    t, cur, k = LEAD_S, int(rng.integers(n_spk)), 0
    while True:
        sentence = SENTENCES[int(order[k % len(order)])]
        k += 1
        engine, voice = cast[cur]
        dur = len(voices.clip(engine, voice, sentence.tts_text)) / SAMPLE_RATE
        reached = max((x.end for x in turns), default=0.0) + LEAD_S
        if turns and t + dur + LEAD_S > target and (reached >= min_s or t + dur + LEAD_S > max_s):
            break
        turns.append(Turn(speaker_name(engine, voice), sentence.text, round(t, 3), round(t + dur, 3), "turn", sentence.tts_text))
        if rng.random() < P_BACKCHANNEL:
            listener = [i for i in range(n_spk) if i != cur][int(rng.integers(n_spk - 1))]
            word = BACKCHANNELS[int(rng.integers(len(BACKCHANNELS)))]
            be, bv = cast[listener]
            bdur = len(voices.clip(be, bv, word)) / SAMPLE_RATE
            bstart = t + float(rng.uniform(0.3, 0.6)) * dur
            turns.append(Turn(speaker_name(be, bv), word, round(bstart, 3), round(bstart + bdur, 3), "backchannel"))
        nxt = [i for i in range(n_spk) if i != cur][int(rng.integers(n_spk - 1))]
        if rng.random() < P_OVERLAP:
            t = t + dur - float(rng.uniform(*OVERLAP_RANGE_S))
        else:
            t = t + dur + float(rng.uniform(*GAP_RANGE_S))
        cur = nxt
    duration = round(max(x.end for x in turns) + LEAD_S, 3)
    return [(e, v) for e, v in cast], turns, duration, index % 4 == 3


def _same_speaker_clash(turns: list[Turn]) -> list[Turn]:
    """A backchannel never overlaps its own speaker's turn (one voice cannot say two things);
    such a backchannel is moved to just after that turn ends, or dropped from the plan before
    any audio or reference exists (so the reference always matches the audio)."""
    out: list[Turn] = []
    for bc in turns:
        if bc.kind == "backchannel" and any(
            o is not bc and o.speaker == bc.speaker and o.start < bc.end and bc.start < o.end for o in turns
        ):
            continue
        out.append(bc)
    return out


def _mix(turns: list[Turn], cast_clips: Callable[[Turn], np.ndarray], duration: float, noisy: bool, rng: np.random.Generator) -> np.ndarray:
    n = int(round(duration * SAMPLE_RATE))
    mix = np.zeros(n, dtype=np.float64)
    for tr in turns:
        x = cast_clips(tr)
        s = int(round(tr.start * SAMPLE_RATE))
        mix[s : s + len(x)] += x[: max(0, n - s)]
    out = mix.astype(np.float32)
    if noisy:
        out, _ = tf.mix_at_snr(out, tf.pink_noise(n, rng), NOISE_SNR_DB, SAMPLE_RATE)
    out, _ = tf.peak_protect(out)
    return out


def _existing(out: Path, seed: int, n: int) -> ConversationSet | None:
    try:
        meta = json.loads((out / "corpus.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if (meta.get("seed"), meta.get("n_recordings"), meta.get("builder_version")) != (seed, n, BUILDER_VERSION):
        return None
    cs = ConversationSet(out, out / "manifest.jsonl", out / "reference.rttm", out / "reference.json", n, seed)
    return cs if all(p.exists() for p in (cs.manifest, cs.rttm, cs.seglst)) else None


def build_conversation_set(
    out_dir: Path | str,
    seed: int = 0,
    n_recordings: int = DEFAULT_N_RECORDINGS,
    min_s: float = 60.0,
    max_s: float = 120.0,
    force: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ConversationSet:
    """Build (or reuse) the conversation set; the same seed and sizes give identical files.
    ``corpus.json`` is written last: its presence marks a complete set."""
    out = Path(out_dir).resolve()
    if n_recordings < 1 or not 5.0 <= min_s <= max_s:
        raise ValueError(f"need n_recordings >= 1 and 5 <= min_s <= max_s, got {n_recordings}, {min_s}, {max_s}")
    if not force:
        found = _existing(out, int(seed), int(n_recordings))
        if found is not None:
            log.info("conversation set already built at %s", out)
            return found
    voices = _Voices()
    versions = voices.check()
    (out / "corpus.json").unlink(missing_ok=True)
    audio_dir = out / "audio"
    audio_dir.mkdir(parents=True, exist_ok=True)
    rttm_lines: list[str] = []
    seglst: list[dict[str, Any]] = []
    manifest: list[dict[str, Any]] = []
    stats: dict[str, dict[str, Any]] = {}
    by_speaker = {speaker_name(e, v): (e, v) for e, v in VOICE_POOL}
    for i in range(n_recordings):
        rec = f"conv-{i:03d}"
        cast, turns, duration, noisy = plan_recording(i, int(seed), voices, min_s, max_s)
        turns = sorted(_same_speaker_clash(turns), key=lambda t: (t.start, t.speaker))
        audio = _mix(
            turns, lambda t: voices.clip(*by_speaker[t.speaker], t.say or t.text), duration, noisy, np.random.default_rng([seed, i, 1])
        )
        path = audio_dir / f"{rec}.flac"
        path.write_bytes(encode_audio(audio, SAMPLE_RATE, "FLAC"))
        for t in turns:
            rttm_lines.append(f"SPEAKER {rec} 1 {t.start:.3f} {t.end - t.start:.3f} <NA> <NA> {t.speaker} <NA> <NA>")
            seglst.append(
                {"session_id": rec, "speaker": t.speaker, "start_time": t.start, "end_time": t.end, "words": t.text, "kind": t.kind}
            )
        speech = sum(t.end - t.start for t in turns)
        overlap = _overlap_seconds(turns)
        manifest.append(
            {
                "audio_filepath": f"audio/{rec}.flac",
                "duration": round(len(audio) / SAMPLE_RATE, 6),
                "text": " ".join(t.text for t in turns),
                "n_speakers": str(len(cast)),
                "background": f"noise-{NOISE_SNR_DB:g}db" if noisy else "clean",
            }
        )
        stats[rec] = {
            "speakers": [speaker_name(e, v) for e, v in cast],
            "overlap_s": round(overlap, 3),
            "speech_s": round(speech, 3),
            "n_turns": sum(t.kind == "turn" for t in turns),
            "n_backchannels": sum(t.kind == "backchannel" for t in turns),
        }
        if progress is not None:
            progress(i + 1, n_recordings)
    (out / "reference.rttm").write_text("\n".join(rttm_lines) + "\n", encoding="utf-8")
    (out / "reference.json").write_text(json.dumps(seglst, indent=1) + "\n", encoding="utf-8")
    (out / "manifest.jsonl").write_text("".join(json.dumps(m, sort_keys=True) + "\n" for m in manifest), encoding="utf-8")
    meta = {
        "name": "demo-conversation",
        "seed": int(seed),
        "n_recordings": int(n_recordings),
        "builder_version": BUILDER_VERSION,
        "sample_rate": SAMPLE_RATE,
        "min_s": min_s,
        "max_s": max_s,
        "voices": [speaker_name(e, v) for e, v in VOICE_POOL],
        "design": (__doc__ or "").split("Design\n------\n", 1)[-1].strip(),
        "p_overlap": P_OVERLAP,
        "p_backchannel": P_BACKCHANNEL,
        "noise_snr_db": NOISE_SNR_DB,
        "tool_versions": versions,
        "total_s": round(sum(m["duration"] for m in manifest), 3),
        "recordings": stats,
    }
    tmp = out / f".corpus.json.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, out / "corpus.json")
    log.info("built conversation set: %d recordings, %.0f s, in %s", n_recordings, meta["total_s"], out)
    return ConversationSet(out, out / "manifest.jsonl", out / "reference.rttm", out / "reference.json", int(n_recordings), int(seed))


def _overlap_seconds(turns: list[Turn]) -> float:
    """Seconds where two or more speakers talk at once."""
    edges = sorted([(t.start, 1) for t in turns] + [(t.end, -1) for t in turns])
    total, active, last = 0.0, 0, 0.0
    for time_s, step in edges:
        if active >= 2:
            total += time_s - last
        active += step
        last = time_s
    return total
