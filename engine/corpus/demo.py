"""The embedded demo corpus: English sentences spoken by offline TTS voices, with slice labels.

Built deterministically from a seed with espeak-ng and Flite (system packages) and Kokoro-82M
(an int8 ONNX model shipped in Python packages), so ``audit run demo`` works on a machine with no
network. Every clip is 16 kHz mono, stored as FLAC.

Slice labels on every utterance
-------------------------------
``content``
    ``speech``, or ``speech-free`` for clips with no speech at all (empty reference; scored apart
    from WER, as a hallucination rate). Speech-free clips carry only ``content`` and
    ``background`` (``silence``, ``noise-only``, ``music-only``).
``accent``
    one value per synthetic voice: ``en-us``, ``en-gb-rp``, ``en-gb-scotland``, ``en-caribbean``,
    ``en-us-nyc`` (espeak-ng, each accent with its own voice variant, so each is one timbre);
    ``flite-slt``, ``flite-rms``, ``flite-awb``, ``flite-kal``; ``kokoro-jf-alpha``,
    ``kokoro-jf-gongitsune``, ``kokoro-jf-nezumi``, ``kokoro-jf-tebukuro``, ``kokoro-jm-kumo``.
``accent_group``
    a *stylistic* two-way grouping of these synthetic voices: ``native`` = voices modelling the
    General American / Received Pronunciation standard accents that dominate English ASR training
    data (espeak-ng en-us and en-gb-x-rp; Flite slt, rms and kal, which are US English);
    ``non-native`` = voices further from that standard: espeak-ng en-gb-scotland, en-029
    Caribbean and en-us-nyc, Flite awb (a Scottish speaker), and the five Kokoro voices, which
    were trained on Japanese speakers and speak English phonemes with a Japanese colouring (the
    only voices here whose accent comes from real non-native speech).
``tts_engine``
    ``espeak-ng``, ``flite`` or ``kokoro``.
``emotion`` / ``emotion_source``
    ``neutral``, ``positive-high-arousal``, ``negative-high-arousal``, ``negative-low-arousal``,
    simulated by a prosody transform of a neutral rendition that keeps the voice (see
    ``engine.corpus.transforms.render_emotion``); ``emotion_source`` is always ``simulated``.
``background``
    ``clean``; ``noise-20db``, ``noise-10db``, ``noise-5db`` (pink noise at that SNR);
    ``music`` (synthesized chords, bass and melody at ``MUSIC_SNR_DB`` = 10 dB SNR).
``conversation``
    ``single``; ``second-talker`` (another voice reading two other sentences underneath, at
    ``SECOND_TALKER_LEVEL_DB`` = -10 dB relative to the primary talker; the reference holds the
    primary talker's words only, since the task is to transcribe the foreground talker);
    ``overlap`` (a second turn by another voice, at -3 dB, starting 0.6-1.2 s before the first
    turn ends; the reference holds *both* turns in onset order, because both are foreground
    speech that a transcript of the conversation must contain).

Design
------
Voices rotate (utterance i gets voice i mod 14), so the default 196 speech utterances give 14 per
voice. Background and conversation form one "channel" factor changed one at a time from the
baseline (clean, single): weights 3 for (clean, single) and 1 for each of the six other
conditions. Emotion is crossed with the channel factor: weights 3 for neutral and 1 per simulated
emotion, spread evenly inside every channel condition and voice, so that comparing two values of
one family compares groups with the same mix of the other families. Every emotional clip
re-voices the neutral rendition of a neutral clip with the same voice, channel and sentence
(``parent_id`` names it), so neutral/emotional pairs differ in prosody only; where a voice and
channel has fewer neutral than emotional clips, the rest read sentences of their own. Sentences
are assigned so that no voice reads the same sentence twice (pairs aside) until every sentence
has been used. After the speech clips come speech-free clips (3 per 48 speech clips, at most 12:
silence at a -75 dBFS floor, pink noise and synthesized music at -36 dBFS), 2.5-6 s long. All
draws come from ``numpy.random.default_rng`` seeded from ``seed`` (design) and ``(seed, index)``
(signals).

Subsets
-------
``subset="small"`` (the quick demo) builds a balanced subset of the full design
(``select_small``) plus one speech-free clip of each kind. Every chosen clip keeps its id,
reference and audio bytes, so it can be compared clip for clip with a run on the full corpus.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.audio.shards import encode_audio, iter_table_utterances, write_manifest, write_shards
from engine.backends.availability import require_modules
from engine.backends.base import TTSBackend
from engine.backends.tts import check_voices, tts_engines
from engine.backends.tts.espeak import resample
from engine.corpus import transforms as tf
from engine.corpus.texts import SENTENCES, Sentence, text_info
from engine.data import SAMPLE_RATE, Utterance
from engine.errors import AuditError, ConfigError

log = logging.getLogger(__name__)

BUILDER_VERSION = "demo-2"
DEFAULT_N_UTTS = 196
SMALL_PER_VOICE = 3
SUBSETS = ("full", "small")
SHARD_SIZE = 64
SMALL_SHARD_SIZE = 16  # the quick demo: more, smaller units, so progress and resume come often
LEAD_S, TAIL_S = 0.25, 0.35
MUSIC_SNR_DB = 10.0
SECOND_TALKER_LEVEL_DB = -10.0
OVERLAP_LEVEL_DB = -3.0
OVERLAP_RANGE_S = (0.6, 1.2)


@dataclass(frozen=True)
class VoiceSpec:
    """One synthetic speaker: engine, engine voice name and its slice labels."""

    engine: str
    voice: str
    accent: str
    accent_group: str

    @property
    def speaker(self) -> str:
        return f"{self.engine}:{self.voice}"


# Fourteen distinct timbres: every espeak-ng accent gets its own voice variant (the variants
# change the formant synthesizer's timbre, so one accent is one speaker), the four Flite voices,
# and the five Kokoro-82M voices, neural voices trained on Japanese speakers that speak English
# with a Japanese colouring (fed English phonemes from espeak-ng).
VOICES: tuple[VoiceSpec, ...] = (
    VoiceSpec("espeak-ng", "en-us+klatt", "en-us", "native"),
    VoiceSpec("flite", "slt", "flite-slt", "native"),
    VoiceSpec("kokoro", "jf_alpha", "kokoro-jf-alpha", "non-native"),
    VoiceSpec("espeak-ng", "en-gb-x-rp+m5", "en-gb-rp", "native"),
    VoiceSpec("flite", "awb", "flite-awb", "non-native"),
    VoiceSpec("kokoro", "jm_kumo", "kokoro-jm-kumo", "non-native"),
    VoiceSpec("espeak-ng", "en-gb-scotland+m7", "en-gb-scotland", "non-native"),
    VoiceSpec("flite", "rms", "flite-rms", "native"),
    VoiceSpec("kokoro", "jf_gongitsune", "kokoro-jf-gongitsune", "non-native"),
    VoiceSpec("espeak-ng", "en-029+f4", "en-caribbean", "non-native"),
    VoiceSpec("flite", "kal", "flite-kal", "native"),
    VoiceSpec("kokoro", "jf_nezumi", "kokoro-jf-nezumi", "non-native"),
    VoiceSpec("espeak-ng", "en-us-nyc+f5", "en-us-nyc", "non-native"),
    VoiceSpec("kokoro", "jf_tebukuro", "kokoro-jf-tebukuro", "non-native"),
)

# (background, conversation, weight): one factor changed at a time from the baseline.
CHANNELS: tuple[tuple[str, str, int], ...] = (
    ("clean", "single", 3),
    ("noise-20db", "single", 1),
    ("noise-10db", "single", 1),
    ("noise-5db", "single", 1),
    ("music", "single", 1),
    ("clean", "second-talker", 1),
    ("clean", "overlap", 1),
)
EMOTION_WEIGHTS: tuple[tuple[str, int], ...] = (
    ("neutral", 3),
    ("positive-high-arousal", 1),
    ("negative-high-arousal", 1),
    ("negative-low-arousal", 1),
)
BACKGROUNDS: dict[str, tuple[str, float] | None] = {
    "clean": None,
    "noise-20db": ("pink-noise", 20.0),
    "noise-10db": ("pink-noise", 10.0),
    "noise-5db": ("pink-noise", 5.0),
    "music": ("synth-music", MUSIC_SNR_DB),
}
FAMILIES: dict[str, tuple[str, ...]] = {
    "content": ("speech", "speech-free"),
    "accent": tuple(v.accent for v in VOICES),
    "accent_group": ("native", "non-native"),
    "tts_engine": tuple(dict.fromkeys(v.engine for v in VOICES)),
    "emotion": tuple(e for e, _ in EMOTION_WEIGHTS),
    "emotion_source": ("simulated",),
    "background": tuple(BACKGROUNDS) + tuple(f"{k}-only" if k != "silence" else k for k in ("silence", "noise", "music")),
    "conversation": ("single", "second-talker", "overlap"),
}


@dataclass(frozen=True)
class DemoCorpus:
    """Where a built demo corpus lives."""

    root: Path
    manifest: Path
    shards: tuple[Path, ...]
    n_utts: int
    seed: int = 0

    def info(self) -> dict[str, Any]:
        """The ``corpus.json`` record (seed, version, voices, design, tool versions)."""
        return dict(json.loads((self.root / "corpus.json").read_text(encoding="utf-8")))

    def utterances(self) -> list[Utterance]:
        """All utterances, read back from the Parquet shards."""
        import pyarrow.parquet as pq

        out: list[Utterance] = []
        for shard in self.shards:
            out.extend(iter_table_utterances(pq.read_table(shard), str(shard)))
        return out


@dataclass(frozen=True)
class UttPlan:
    """Everything decided about one utterance before any audio is made."""

    index: int
    utt_id: str
    voice: VoiceSpec
    sentence: int
    emotion: str
    background: str
    conversation: str
    second_voice: VoiceSpec | None = None
    second_sentences: tuple[int, ...] = ()
    parent: int | None = None  # index of the neutral clip whose rendition this clip re-voices

    @property
    def parent_id(self) -> str | None:
        return None if self.parent is None else utt_id_of(self.parent)

    def labels(self) -> dict[str, str]:
        return {
            "content": "speech",
            "accent": self.voice.accent,
            "accent_group": self.voice.accent_group,
            "tts_engine": self.voice.engine,
            "emotion": self.emotion,
            "emotion_source": "simulated",
            "background": self.background,
            "conversation": self.conversation,
        }


@dataclass(frozen=True)
class SpeechFreePlan:
    """A clip with no speech (empty reference): digital-floor silence, noise only or music only."""

    index: int
    utt_id: str
    background: str  # 'silence' | 'noise-only' | 'music-only'
    duration_s: float

    def labels(self) -> dict[str, str]:
        return {"content": "speech-free", "background": self.background}


SPEECH_FREE_KINDS = ("silence", "noise-only", "music-only")
# Mean level of each kind, dBFS: a quiet recording-room floor, and the level that noise and music
# have under -26 dBFS speech at 10 dB SNR in the speech clips.
SPEECH_FREE_LEVEL_DBFS = {"silence": -75.0, "noise-only": -36.0, "music-only": -36.0}


def utt_id_of(index: int) -> str:
    return f"demo-{index + 1:04d}"


def n_speech_free(n_utts: int) -> int:
    """Speech-free clips added to ``n_utts`` speech clips: 3 per 48 speech clips, at most 12."""
    return 3 * min(4, n_utts // 48)


# ----------------------------------------------------------------------------- design


def quotas(n: int, weights: Sequence[int]) -> list[int]:
    """Integer counts proportional to ``weights`` summing to ``n`` (largest remainder).

    Every value gets at least one utterance when ``n`` allows, so small corpora cover all slices.
    """
    total = float(sum(weights))
    exact = [n * w / total for w in weights]
    counts = [int(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in by_remainder[: n - sum(counts)]:
        counts[i] += 1
    if n >= len(weights):
        for i, c in enumerate(counts):
            if c == 0:
                donor = max(range(len(counts)), key=lambda j: (counts[j], -j))
                counts[donor] -= 1
                counts[i] = 1
    return counts


def spread(values: Sequence[str], counts: Sequence[int], rng: np.random.Generator) -> list[str]:
    """A sequence holding ``counts[i]`` copies of ``values[i]``, each value evenly spaced."""
    keyed: list[tuple[float, int, str]] = []
    for i, (v, c) in enumerate(zip(values, counts)):
        phase = float(rng.uniform(0, 1))
        keyed.extend(((k + phase) / c, i, v) for k in range(c))
    return [v for _, _, v in sorted(keyed)]


def _assign_texts(voices: Sequence[int], n_voices: int, n_texts: int, rng: np.random.Generator) -> list[int]:
    """A sentence per clip (``voices[k]`` speaks clip k): no voice repeats one until all are used."""
    order = [int(k) for k in rng.permutation(n_texts)]
    uses = [0] * n_texts
    read_by: dict[int, set[int]] = {v: set() for v in range(n_voices)}
    pointer = 0
    out: list[int] = []
    for v in voices:
        # Least-used sentence not yet read by this voice, first in the seeded cyclic order.
        best_key, best_pos = (len(SENTENCES) + len(voices), 2), pointer
        for step in range(n_texts):
            pos = (pointer + step) % n_texts
            key = (uses[order[pos]], int(order[pos] in read_by[v]))
            if key < best_key:
                best_key, best_pos = key, pos
        k = order[best_pos]
        uses[k] += 1
        read_by[v].add(k)
        pointer = (best_pos + 1) % n_texts
        out.append(k)
    return out


def _pair_with_neutral(voice_idx: Sequence[int], channel: Sequence[str], emotion: Sequence[str]) -> list[int | None]:
    """For each emotional clip, a neutral clip of the same voice and channel (each used once)."""
    parent: list[int | None] = [None] * len(emotion)
    cells: dict[tuple[int, str], tuple[list[int], list[int]]] = {}
    for i, (v, c, e) in enumerate(zip(voice_idx, channel, emotion)):
        neutral, emotional = cells.setdefault((v, c), ([], []))
        (neutral if e == "neutral" else emotional).append(i)
    for neutral, emotional in cells.values():
        for child, par in zip(emotional, neutral):
            parent[child] = par
    return parent


def plan_design(n_utts: int = DEFAULT_N_UTTS, seed: int = 0) -> list[UttPlan]:
    """Decide voice, text and slice values of every utterance (no audio; fast and pure)."""
    if n_utts < 1:
        raise ConfigError(f"demo corpus needs n_utts >= 1, got {n_utts}")
    rng = np.random.default_rng([int(seed), 0])
    n_v = len(VOICES)
    voice_idx = [i % n_v for i in range(n_utts)]

    tie = rng.permutation(n_utts)
    chan_names = [f"{b}|{c}" for b, c, _ in CHANNELS]
    chan_seq = spread(chan_names, quotas(n_utts, [w for *_, w in CHANNELS]), rng)
    channel: list[str] = [""] * n_utts
    for pos, i in enumerate(sorted(range(n_utts), key=lambda i: (voice_idx[i], tie[i]))):
        channel[i] = chan_seq[pos]

    tie2 = rng.permutation(n_utts)
    emo_names = [e for e, _ in EMOTION_WEIGHTS]
    emo_seq = spread(emo_names, quotas(n_utts, [w for _, w in EMOTION_WEIGHTS]), rng)
    emotion: list[str] = [""] * n_utts
    order = sorted(range(n_utts), key=lambda i: (chan_names.index(channel[i]), voice_idx[i], tie2[i]))
    for pos, i in enumerate(order):
        emotion[i] = emo_seq[pos]

    # Emotional clips re-voice the rendition of a neutral clip (same voice, channel and sentence),
    # so prosody can be compared within a voice; the others get sentences of their own.
    parent = _pair_with_neutral(voice_idx, channel, emotion)
    roots = [i for i in range(n_utts) if parent[i] is None]
    root_texts = _assign_texts([voice_idx[i] for i in roots], n_v, len(SENTENCES), rng)
    texts = [0] * n_utts
    for i, k in zip(roots, root_texts):
        texts[i] = k
    for i in range(n_utts):
        par = parent[i]
        if par is not None:
            texts[i] = texts[par]

    plans: list[UttPlan] = []
    for i in range(n_utts):
        background, conversation = channel[i].split("|")
        second_voice: VoiceSpec | None = None
        second: tuple[int, ...] = ()
        if conversation != "single":
            others = [j for j in range(n_v) if j != voice_idx[i]]
            second_voice = VOICES[others[int(rng.integers(len(others)))]]
            pool = [k for k in range(len(SENTENCES)) if k != texts[i]]
            n_second = 2 if conversation == "second-talker" else 1
            second = tuple(int(pool[j]) for j in rng.choice(len(pool), size=n_second, replace=False))
        plans.append(
            UttPlan(
                index=i,
                utt_id=utt_id_of(i),
                voice=VOICES[voice_idx[i]],
                sentence=texts[i],
                emotion=emotion[i],
                background=background,
                conversation=conversation,
                second_voice=second_voice,
                second_sentences=second,
                parent=parent[i],
            )
        )
    return plans


def plan_speech_free(n_utts: int = DEFAULT_N_UTTS, seed: int = 0) -> list[SpeechFreePlan]:
    """The speech-free clips that follow ``n_utts`` speech clips (equal numbers of each kind)."""
    rng = np.random.default_rng([int(seed), 2])
    out: list[SpeechFreePlan] = []
    for k in range(n_speech_free(n_utts)):
        index = n_utts + k
        kind = SPEECH_FREE_KINDS[k % len(SPEECH_FREE_KINDS)]
        out.append(SpeechFreePlan(index, utt_id_of(index), kind, round(float(rng.uniform(2.5, 6.0)), 3)))
    return out


def slice_counts(plans: Sequence[UttPlan], free: Sequence[SpeechFreePlan] = ()) -> dict[str, dict[str, int]]:
    """Utterances per value of every slice family (every design value listed, zero included)."""
    counts: dict[str, dict[str, int]] = {fam: {v: 0 for v in vals} for fam, vals in FAMILIES.items()}
    labels: list[dict[str, str]] = [p.labels() for p in plans] + [f.labels() for f in free]
    for record in labels:
        for fam, val in record.items():
            counts[fam][val] = counts[fam].get(val, 0) + 1
    return counts


def _plan_keys(plan: UttPlan) -> list[tuple[str, str]]:
    return [("channel", f"{plan.background}|{plan.conversation}"), ("emotion", plan.emotion)]


def select_small(plans: Sequence[UttPlan], per_voice: int = SMALL_PER_VOICE) -> list[UttPlan]:
    """``per_voice`` clips per voice covering every channel and emotion value, counts kept even.

    Units are a neutral clip with the emotional clips that re-voice it; each step takes, among units
    that fit their voice's quota, the one adding the most unseen values, then the least represented
    values, then the lowest index (deterministic)."""
    children: dict[int, list[UttPlan]] = {}
    for p in plans:
        if p.parent is not None:
            children.setdefault(p.parent, []).append(p)
    units = [[p, *children.get(p.index, [])] for p in plans if p.parent is None]
    seen: dict[tuple[str, str], int] = {}
    per: dict[str, int] = {}
    chosen: list[UttPlan] = []
    while True:
        fitting = [u for u in units if per.get(u[0].voice.speaker, 0) + len(u) <= per_voice]
        if not fitting:
            break

        def score(unit: list[UttPlan]) -> tuple[int, int, int]:
            keys = [k for p in unit for k in _plan_keys(p)]
            return (-len({k for k in keys if k not in seen}), sum(seen.get(k, 0) for k in keys) - len(unit), unit[0].index)

        best = min(fitting, key=score)
        units.remove(best)
        for p in best:
            for k in _plan_keys(p):
                seen[k] = seen.get(k, 0) + 1
        per[best[0].voice.speaker] = per.get(best[0].voice.speaker, 0) + len(best)
        chosen.extend(best)
    return sorted(chosen, key=lambda p: p.index)


def select_plans(subset: str, n_utts: int, seed: int) -> tuple[list[UttPlan], list[SpeechFreePlan]]:
    """The speech and speech-free plans a corpus of ``subset`` builds (``full``: all of them)."""
    if subset not in SUBSETS:
        raise ConfigError(f"unknown demo corpus subset '{subset}' (known: {', '.join(SUBSETS)})")
    plans = plan_design(n_utts, seed)
    free = plan_speech_free(n_utts, seed)
    if subset == "full":
        return plans, free
    first_of_kind = {f.background: f for f in reversed(free)}
    return select_small(plans), sorted(first_of_kind.values(), key=lambda f: f.index)


# ----------------------------------------------------------------------------- synthesis


@dataclass(frozen=True)
class _Job:
    engine: str
    voice: str
    text: str


class _Synth:
    """Runs neutral TTS jobs on the three engines; returns trimmed 16 kHz audio plus the settings."""

    def __init__(self) -> None:
        self.engines: dict[str, TTSBackend] = tts_engines(v.engine for v in VOICES)

    def check(self) -> dict[str, str]:
        """Fail early, naming the package, when a program or a voice is missing; return versions."""
        require_modules("the demo corpus (its emotions are Praat prosody transforms)", ("parselmouth",), "demo")
        return check_voices("the demo corpus", self.engines, [(v.engine, v.voice.split("+")[0], v.speaker) for v in VOICES])

    def run(self, job: _Job) -> tuple[np.ndarray, dict[str, Any]]:
        x, sr = self.engines[job.engine].synthesize(job.text, job.voice)
        y = tf.trim_silence(resample(x, sr, SAMPLE_RATE), SAMPLE_RATE)
        return y, {"native_sample_rate": sr}


def _compose(
    plan: UttPlan, seed: int, audio: dict[_Job, Future[tuple[np.ndarray, dict[str, Any]]]]
) -> tuple[np.ndarray, str, dict[str, Any]]:
    """Build one clip from its TTS parts; return (samples, reference, derivation)."""
    sr = SAMPLE_RATE
    rng = np.random.default_rng([int(seed), 1, plan.index])
    sent: Sentence = SENTENCES[plan.sentence]
    prosody = tf.EMOTIONS[plan.emotion]
    raw, tts_settings = audio[_Job(plan.voice.engine, plan.voice.voice, sent.tts_text)].result()
    raw, emotion_info = tf.render_emotion(raw, sr, prosody, seed=int(rng.integers(1, 2**31 - 1)))
    x, norm_gain = tf.normalize_level(raw, sr)
    x = tf.apply_gain_db(x, prosody.gain_db)
    x = tf.pad(x, sr, LEAD_S, TAIL_S)
    primary_power = tf.active_power(x, sr)
    reference = sent.text
    derivation: dict[str, Any] = {
        "builder": "engine.corpus.demo",
        "builder_version": BUILDER_VERSION,
        "seed": int(seed),
        "index": plan.index,
        "sentence_index": plan.sentence,
        "tts": {"engine": plan.voice.engine, "voice": plan.voice.voice, "text_spoken": sent.tts_text, **tts_settings},
        "resample": {"to_hz": sr, "with": "soxr"},
        "emotion": {
            "label": plan.emotion,
            "source": "simulated",
            "from_rendition_of": plan.parent_id,
            **prosody.as_dict(),
            "transform": emotion_info,
        },
        "level": {
            "target_active_dbfs": tf.TARGET_LEVEL_DBFS,
            "normalize_gain_db": round(norm_gain, 4),
            "emotion_gain_db": prosody.gain_db,
            "primary_active_dbfs": round(tf.power_db(primary_power), 4),
        },
        "text_info": text_info(sent),
    }

    conv: dict[str, Any] = {"label": plan.conversation, "reference_scope": "primary-talker"}
    if plan.conversation != "single" and plan.second_voice is not None:
        sv = plan.second_voice
        parts = [audio[_Job(sv.engine, sv.voice, SENTENCES[k].tts_text)].result()[0] for k in plan.second_sentences]
        texts = [SENTENCES[k].text for k in plan.second_sentences]
        if plan.conversation == "second-talker":
            gap = np.zeros(int(0.3 * sr), np.float32)
            second = np.concatenate([parts[0], gap, *parts[1:]])
            offset = float(rng.uniform(0.0, LEAD_S + 0.2))
            room = len(x) - int(offset * sr)
            if len(second) > room:
                second = tf.fade_out(second[:room], sr)
            x, info = tf.overlay_talker(x, second, sr, offset, SECOND_TALKER_LEVEL_DB, primary_power)
        else:
            start, end = tf.speech_span(x, sr)
            overlap = min(float(rng.uniform(*OVERLAP_RANGE_S)), 0.5 * (end - start))
            x, info = tf.overlay_talker(x, parts[0], sr, end - overlap, OVERLAP_LEVEL_DB, primary_power)
            x = tf.pad(x, sr, 0.0, TAIL_S)
            info["overlap_s"] = round(overlap, 4)
            reference = f"{sent.text} {texts[0]}"
            conv["reference_scope"] = "both-turns-in-onset-order"
        conv.update(
            {
                "second_engine": sv.engine,
                "second_voice": sv.voice,
                "second_texts": texts,
                "second_sentence_indices": list(plan.second_sentences),
                "second_text_info": [text_info(SENTENCES[k]) for k in plan.second_sentences],
                **info,
            }
        )
    derivation["conversation"] = conv

    bg_spec = BACKGROUNDS[plan.background]
    bg: dict[str, Any] = {"label": plan.background}
    if bg_spec is not None:
        kind, snr = bg_spec
        if kind == "pink-noise":
            noise = tf.pink_noise(len(x), rng)
            bg["type"] = kind
        else:
            noise, music_info = tf.synth_music(len(x), sr, rng)
            bg.update(music_info)
        x, mix_info = tf.mix_at_snr(x, noise, snr, sr, speech_power=primary_power)
        bg.update(mix_info)
        bg["snr_rule"] = "active power of primary speech (20 ms frames within 40 dB of the loudest) / mean background power"
    derivation["background"] = bg

    x, scale = tf.peak_protect(x)
    derivation["peak_scale"] = round(scale, 6)
    return x, reference, derivation


def _compose_speech_free(plan: SpeechFreePlan, seed: int) -> tuple[np.ndarray, dict[str, Any]]:
    """A clip with no speech at all: its reference is empty and it is scored apart from WER."""
    sr = SAMPLE_RATE
    rng = np.random.default_rng([int(seed), 3, plan.index])
    n = int(round(plan.duration_s * sr))
    level = SPEECH_FREE_LEVEL_DBFS[plan.background]
    info: dict[str, Any] = {}
    if plan.background == "music-only":
        x, info = tf.synth_music(n, sr, rng)
    else:
        x = tf.pink_noise(n, rng)
        info["type"] = "pink-noise"
    x = tf.apply_gain_db(x, level - tf.power_db(float(np.mean(np.asarray(x, np.float64) ** 2))))
    x, scale = tf.peak_protect(x)
    derivation = {
        "builder": "engine.corpus.demo",
        "builder_version": BUILDER_VERSION,
        "seed": int(seed),
        "index": plan.index,
        "speech_free": {"kind": plan.background, "mean_level_dbfs": level, "duration_s": plan.duration_s, **info},
        "peak_scale": round(scale, 6),
    }
    return x, derivation


def _jobs_for(plan: UttPlan) -> list[_Job]:
    jobs = [_Job(plan.voice.engine, plan.voice.voice, SENTENCES[plan.sentence].tts_text)]
    if plan.second_voice is not None:
        sv = plan.second_voice
        jobs += [_Job(sv.engine, sv.voice, SENTENCES[k].tts_text) for k in plan.second_sentences]
    return jobs


# ----------------------------------------------------------------------------- build


def _existing(out_dir: Path, seed: int, n_utts: int, subset: str = "full") -> DemoCorpus | None:
    meta_path = out_dir / "corpus.json"
    if not meta_path.exists():
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    found = (meta.get("name"), meta.get("seed"), meta.get("n_utts"), meta.get("builder_version"), meta.get("subset", "full"))
    if found != ("demo", seed, n_utts, BUILDER_VERSION, subset):
        return None
    shards = tuple(out_dir / s for s in meta.get("shards", []))
    manifest = out_dir / str(meta.get("manifest", "manifest.jsonl"))
    if not shards or not manifest.exists() or not all(s.exists() for s in shards):
        return None
    return DemoCorpus(root=out_dir, manifest=manifest, shards=shards, n_utts=int(meta.get("n_speech", n_utts)), seed=seed)


def _clear_previous(out_dir: Path) -> None:
    (out_dir / "corpus.json").unlink(missing_ok=True)
    for sub, pattern in (("shards", "shard-*.parquet"), ("audio", "demo-*.flac")):
        for old in (out_dir / sub).glob(pattern):
            old.unlink()


def _store(
    audio_dir: Path,
    utt_id: str,
    samples: np.ndarray,
    reference: str,
    labels: dict[str, str],
    derivation: dict[str, Any],
    speaker: str | None = None,
    parent_id: str | None = None,
) -> Utterance:
    """Write one clip as FLAC and return its utterance record (audio bytes embedded)."""
    data = encode_audio(samples, SAMPLE_RATE, "FLAC")
    path = audio_dir / f"{utt_id}.flac"
    path.write_bytes(data)
    return Utterance(
        utt_id=utt_id,
        reference=reference,
        audio_path=str(path),
        audio_bytes=data,
        duration_s=round(len(samples) / SAMPLE_RATE, 6),
        speaker=speaker,
        labels=labels,
        parent_id=parent_id,
        derivation=derivation,
    )


def build_demo_corpus(
    out_dir: Path | str,
    seed: int = 0,
    n_utts: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    force: bool = False,
    workers: int | None = None,
    subset: str = "full",
) -> DemoCorpus:
    """Build (or reuse) the demo corpus in ``out_dir``; the same seed gives identical audio bytes.

    An existing complete corpus with the same seed, size, subset and builder version is returned
    as is unless ``force``. ``progress(done, total)`` is called after each utterance. ``subset``
    ``small`` builds the balanced subset of the design (module docstring, "Subsets").
    """
    out = Path(out_dir).resolve()
    n = DEFAULT_N_UTTS if n_utts is None else int(n_utts)
    if not force:
        found = _existing(out, int(seed), n, subset)
        if found is not None:
            log.info("demo corpus already built at %s (seed %d, %d utterances, %s)", out, seed, found.n_utts, subset)
            return found
    plans, free_plans = select_plans(subset, n, int(seed))
    total = len(plans) + len(free_plans)
    synth = _Synth()
    tool_versions = synth.check()
    out.mkdir(parents=True, exist_ok=True)
    _clear_previous(out)
    audio_dir = out / "audio"
    audio_dir.mkdir(parents=True, exist_ok=True)

    n_workers = workers or min(8, 2 * (os.cpu_count() or 1))
    utts: list[Utterance] = []
    with ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="demo-tts") as pool:
        futures: dict[_Job, Future[tuple[np.ndarray, dict[str, Any]]]] = {}
        for plan in plans:
            for job in _jobs_for(plan):
                if job not in futures:
                    futures[job] = pool.submit(synth.run, job)
        try:
            for done, plan in enumerate(plans, start=1):
                samples, reference, derivation = _compose(plan, int(seed), futures)
                utt = _store(audio_dir, plan.utt_id, samples, reference, plan.labels(), derivation, plan.voice.speaker, plan.parent_id)
                utts.append(utt)
                if progress is not None:
                    progress(done, total)
        except AuditError:
            for f in futures.values():
                f.cancel()
            raise
    for done, free in enumerate(free_plans, start=len(plans) + 1):
        samples, derivation = _compose_speech_free(free, int(seed))
        utts.append(_store(audio_dir, free.utt_id, samples, "", free.labels(), derivation))
        if progress is not None:
            progress(done, total)

    shard_paths = write_shards(utts, out / "shards", shard_size=SHARD_SIZE if subset == "full" else SMALL_SHARD_SIZE)
    manifest = write_manifest(utts, out / "manifest.jsonl")
    meta = {
        "name": "demo",
        "seed": int(seed),
        "n_utts": n,
        "subset": subset,
        "n_speech": len(plans),
        "utt_ids": [p.utt_id for p in plans] + [f.utt_id for f in free_plans] if subset != "full" else None,
        "n_speech_free": len(free_plans),
        "builder_version": BUILDER_VERSION,
        "sample_rate": SAMPLE_RATE,
        "channels": 1,
        "audio_format": "FLAC PCM_16",
        "voices": [
            {"engine": v.engine, "voice": v.voice, "speaker": v.speaker, "accent": v.accent, "accent_group": v.accent_group} for v in VOICES
        ],
        "slice_design": {
            "description": (__doc__ or "").split("Design\n------\n", 1)[-1].strip(),
            "channels": [{"background": b, "conversation": c, "weight": w} for b, c, w in CHANNELS],
            "emotion_weights": dict(EMOTION_WEIGHTS),
            "emotions": {k: p.as_dict() for k, p in tf.EMOTIONS.items()},
            "backgrounds": {k: (None if v is None else {"type": v[0], "snr_db": v[1]}) for k, v in BACKGROUNDS.items()},
            "second_talker_level_db": SECOND_TALKER_LEVEL_DB,
            "overlap_level_db": OVERLAP_LEVEL_DB,
            "overlap_range_s": list(OVERLAP_RANGE_S),
            "reference_scope": {"single": "primary-talker", "second-talker": "primary-talker", "overlap": "both-turns-in-onset-order"},
            "target_active_dbfs": tf.TARGET_LEVEL_DBFS,
            "counts": slice_counts(plans, free_plans),
            "emotion_pairs": (
                "each emotional clip re-voices the neutral rendition of a clip with the same voice, channel and sentence (parent_id)"
            ),
            "emotion_transform": "Praat PSOLA 'Change gender' with formant shift ratio 1: f0 median and range, duration; the voice is kept",
            "speech_free": {
                "n": len(free_plans),
                "kinds": list(SPEECH_FREE_KINDS),
                "mean_level_dbfs": SPEECH_FREE_LEVEL_DBFS,
                "reference": "empty; label content=speech-free; scored apart from WER (hallucination rate)",
            },
        },
        "n_sentences": len(SENTENCES),
        "tool_versions": tool_versions,
        "manifest": manifest.name,
        "shards": [str(p.relative_to(out)) for p in shard_paths],
    }
    tmp = out / f".corpus.json.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, out / "corpus.json")  # written last: its presence marks a complete corpus
    log.info("built demo corpus: %d utterances (%s) in %s", len(plans), subset, out)
    return DemoCorpus(root=out, manifest=manifest, shards=tuple(shard_paths), n_utts=len(plans), seed=int(seed))
