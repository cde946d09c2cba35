"""Named, versioned normalizers.

The recipes' default, ``whisper-english``, is Whisper's ``EnglishTextNormalizer`` (the classic
normalizer, which the Open ASR Leaderboard used until 2026); we take it from the maintained
``whisper-normalizer`` package and record that package's name and version with every score. The
leaderboard's current normalizer is ``open-asr-leaderboard`` (``normalizers/open_asr_leaderboard.py``).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from typing import Callable, Protocol

from normalizers.fast_english import FastWhisperEnglish
from normalizers.open_asr_leaderboard import OpenAsrLeaderboardNormalizer, leaderboard_english

log = logging.getLogger(__name__)


class Normalizer(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    def __call__(self, text: str) -> str: ...


def _pkg_version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class EnglishNormalizer:
    """Whisper's English normalizer, the classic one (also registered under its deprecated name ``open-asr-english``)."""

    name: str = "whisper-english"
    version: str = ""

    def __post_init__(self) -> None:
        if not self.version:
            object.__setattr__(self, "version", f"whisper-normalizer=={_pkg_version('whisper-normalizer')}")

    def __call__(self, text: str) -> str:
        return _whisper_english()(text)


@lru_cache(maxsize=1)
def _whisper_english() -> Callable[[str], str]:
    """The fast, linear-time equivalent when it passes its self-check, else the original."""
    try:
        return FastWhisperEnglish()
    except Exception as exc:  # noqa: BLE001 - an unexpected whisper-normalizer version: use the original
        log.warning("fast Whisper normalizer unavailable (%s); using the original (slower; quadratic on unmatched brackets)", exc)
    from whisper_normalizer.english import EnglishTextNormalizer

    return EnglishTextNormalizer()


def fast_normalizer(normalizer: Normalizer) -> Callable[[str], str]:
    """The bare callable behind ``normalizer`` (no per-call dataclass hop), or itself."""
    if type(normalizer) is EnglishNormalizer:
        return _whisper_english()
    if type(normalizer) is OpenAsrLeaderboardNormalizer:
        return leaderboard_english()
    return normalizer


@dataclass(frozen=True)
class BasicNormalizer:
    """Lower-case, strip punctuation/symbols, collapse spaces (language independent)."""

    name: str = "basic"
    version: str = "1"

    def __call__(self, text: str) -> str:
        text = unicodedata.normalize("NFKC", text).lower()
        text = "".join(" " if unicodedata.category(c)[0] in "PSC" and c != "'" else c for c in text)
        return re.sub(r"\s+", " ", text).strip()


@dataclass(frozen=True)
class IdentityNormalizer:
    """No normalization beyond whitespace collapsing (for raw-text probes)."""

    name: str = "identity"
    version: str = "1"

    def __call__(self, text: str) -> str:
        return re.sub(r"\s+", " ", text).strip()
