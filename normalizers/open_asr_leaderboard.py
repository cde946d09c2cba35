"""The Open ASR Leaderboard's current English normalizer (``open-asr-leaderboard``), written here.

The leaderboard scores every English dataset after normalizing reference and prediction with its
``EnglishTextNormalizer`` (``normalizer/normalizer.py`` of huggingface/open_asr_leaderboard). It
began as Whisper's normalizer and has since gained: more fillers, contractions expanded more
carefully ("john's" is no longer "john is"), multi-word compounds joined ("wi-fi", "a.m.", "o.k."),
name variants mapped to one form ("stephen" -> "steven"), single letters and digits joined into
acronyms ("b b c" -> "bbc", "5 g" -> "5g"), and spelling-list edits ("ok" -> "okay"). This module
gives the same output, step for step, in time linear in the text's length (the leaderboard's
bracket, parenthesis and space-before-apostrophe patterns are quadratic on adversarial text), and
never raises on a number too long for Python's integer conversion (the leaderboard's code does).

The word lists are in ``normalizers/leaderboard_tables.py``; the number rules in
``normalizers/whisper_numbers.py``. ``tests/fixtures/open-asr-leaderboard-normalizer`` holds the
leaderboard's own outputs on a few thousand strings, and the tests require equality on every one.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from normalizers.fast_english import drop_space_before_apostrophe, remove_bracketed, remove_parenthesized
from normalizers.leaderboard_tables import (
    COMPOUNDS,
    CONTRACTION_SUFFIXES,
    FILLERS,
    IS_CONTRACTION_WORDS,
    LEADERBOARD_COMMIT,
    LEADERBOARD_REPO,
    NAMES,
    PERFECT_TENSES,
    TITLES,
    WORD_EXPANSIONS,
    leaderboard_spellings,
)
from normalizers.whisper_numbers import normalize_numbers

VERSION = f"{LEADERBOARD_REPO}@{LEADERBOARD_COMMIT}"
"""What ``summary.json`` records as this normalizer's version: the leaderboard commit it follows."""

KEEP_SYMBOLS = ".%$¢€£"
"""Symbols kept through symbol removal, for the number rules (decimals, percent, currencies)."""

#: Letters that Unicode decomposition does not split into a base letter and a mark (Whisper's list).
LETTER_FOLDS: Mapping[str, str] = {
    "œ": "oe",
    "Œ": "OE",
    "ø": "o",
    "Ø": "O",
    "æ": "ae",
    "Æ": "AE",
    "ß": "ss",
    "ẞ": "SS",
    "đ": "d",
    "Đ": "D",
    "ð": "d",
    "Ð": "D",
    "þ": "th",
    "Þ": "th",
    "ł": "l",
    "Ł": "L",
}


class _SymbolFold(dict[int, str]):
    """``str.translate`` table for symbol and diacritic removal, filled per character on first sight.

    After NFKD decomposition: kept symbols stay; :data:`LETTER_FOLDS` are spelled out; combining
    marks that do not take space (category Mn) vanish; other marks, symbols and punctuation
    (categories M*, S*, P*) become a space; anything else stays.
    """

    def __missing__(self, code: int) -> str:
        ch = chr(code)
        if ch in KEEP_SYMBOLS:
            out = ch
        elif ch in LETTER_FOLDS:
            out = LETTER_FOLDS[ch]
        else:
            category = unicodedata.category(ch)
            out = "" if category == "Mn" else " " if category[0] in "MSP" else ch
        self[code] = out
        return out


def remove_symbols_and_diacritics(s: str, table: _SymbolFold) -> str:
    """NFKD, then ``table``; ASCII text needs no decomposition."""
    if not s.isascii():
        s = unicodedata.normalize("NFKD", s)
    return s.translate(table)


def join_letter_runs(words: Sequence[str]) -> list[str]:
    """Runs of one-character words (letters or digits) become one word: "b b c" -> "bbc", "5 g" -> "5g".

    A run needs two words, or three when it holds "a" or "i" (so "a cat" and "i see" stay); a
    lone one-character word between longer words is left alone.
    """
    out: list[str] = []
    run: list[str] = []

    def close() -> None:
        if len(run) >= (3 if "a" in run or "i" in run else 2):
            out.append("".join(run))
        else:
            out.extend(run)
        run.clear()

    for word in words:
        if len(word) == 1 and word.isalnum():
            run.append(word)
        else:
            if run:
                close()
            out.append(word)
    if run:
        close()
    return out


Step = tuple[re.Pattern[str], "str | Callable[[re.Match[str]], str]", tuple[str, ...]]
"""A substitution: pattern, replacement, and literal texts that every match contains (absent: the step is skipped)."""


def _apply(steps: Sequence[Step], s: str) -> str:
    for pattern, replacement, needs in steps:
        for literal in needs:
            if literal not in s:
                break
        else:
            s = pattern.sub(replacement, s)
    return s


def _word_steps() -> list[Step]:
    """Whole-word expansions in the leaderboard's order, then the title abbreviations.

    The leaderboard applies one pattern per title; they match whole words, and no expansion is
    itself a title, so one alternation of all of them gives the same text in one pass.
    """
    steps: list[Step] = [(re.compile(rf"\b{re.escape(w)}\b"), full, (w,)) for w, full in WORD_EXPANSIONS]
    titles = {abbr: f"{full} " for abbr, full in TITLES}
    steps.append((re.compile(rf"\b({'|'.join(titles)})\b"), lambda m: titles[m.group(1)], ()))
    return steps


def _apostrophe_steps() -> list[Step]:
    """Contractions (perfect tenses first), in the leaderboard's order; every one needs an apostrophe."""
    steps: list[Step] = [(re.compile(rf"{re.escape(c)}\b"), full, (c,)) for c, full in PERFECT_TENSES]
    for ending, full in CONTRACTION_SUFFIXES:
        if ending == "'s":
            steps.append((re.compile(rf"\b({'|'.join(IS_CONTRACTION_WORDS)})'s\b"), r"\1 is", ("'s",)))
        else:
            steps.append((re.compile(rf"{re.escape(ending)}\b"), full, (ending,)))
    return steps


class LeaderboardEnglish:
    """The callable behind :class:`OpenAsrLeaderboardNormalizer` (built once; see :func:`leaderboard_english`)."""

    def __init__(self) -> None:
        self._fillers = re.compile(rf"\b({'|'.join(FILLERS)})\b")
        self._word_steps = _word_steps()
        self._apostrophe_steps = _apostrophe_steps()
        self._digit_commas = re.compile(r"(\d),(\d)")
        self._periods = re.compile(r"\.([^0-9]|$)")
        self._symbols = _SymbolFold()
        self._compounds: list[Step] = [
            (re.compile(r"\b" + r"\s+".join(phrase.split()) + r"\b"), joined, tuple(phrase.split())) for phrase, joined in COMPOUNDS
        ]
        spellings = leaderboard_spellings()
        # spelling first, then names, one lookup each (no form of either list is a word of the other)
        self._words: dict[str, str] = {w: NAMES.get(f, f) for w, f in spellings.items()}
        for w, f in NAMES.items():
            self._words.setdefault(w, f)
        self._symbol_before = re.compile(r"[.$¢€£]([^0-9])")
        self._percent_after = re.compile(r"([^0-9])%")
        self._spaces = re.compile(r"\s+")

    def __call__(self, s: str) -> str:
        s = s.lower()
        if "<" in s or "[" in s:
            s = remove_bracketed(s)
        if "(" in s:
            s = remove_parenthesized(s)
        s = self._fillers.sub("", s)
        apostrophe = "'" in s
        if apostrophe:
            s = drop_space_before_apostrophe(s)
        s = _apply(self._word_steps, s)
        if apostrophe:
            s = _apply(self._apostrophe_steps, s)
        if "," in s:
            s = self._digit_commas.sub(r"\1\2", s)
        if "." in s:
            s = self._periods.sub(r" \1", s)
        s = remove_symbols_and_diacritics(s, self._symbols)
        s = _apply(self._compounds, s)
        s = normalize_numbers(s)
        lookup = self._words
        s = " ".join(join_letter_runs([lookup.get(w, w) for w in s.split()]))
        if "." in s or "$" in s or "¢" in s or "€" in s or "£" in s:
            s = self._symbol_before.sub(r" \1", s)
        if "%" in s:
            s = self._percent_after.sub(r"\1 ", s)
        return self._spaces.sub(" ", s)


@lru_cache(maxsize=1)
def leaderboard_english() -> LeaderboardEnglish:
    """The one built instance (the spelling list is read and checked once)."""
    return LeaderboardEnglish()


@dataclass(frozen=True)
class OpenAsrLeaderboardNormalizer:
    """The Open ASR Leaderboard's current English normalizer (registered as ``open-asr-leaderboard``)."""

    name: str = "open-asr-leaderboard"
    version: str = VERSION

    def __post_init__(self) -> None:
        leaderboard_english()  # read and check the spelling list now: a wrong list stops a run before any model loads

    def __call__(self, text: str) -> str:
        return leaderboard_english()(text)
