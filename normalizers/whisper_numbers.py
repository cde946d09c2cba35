"""Whisper's spelled-out-number rules ("twenty five dollars" -> "$25"), rewritten to run in linear time.

Whisper's ``EnglishNumberNormalizer`` (kept unchanged by the Open ASR Leaderboard) reads a text word
by word with a small state machine: a pending value (an integer, or a string of digits when the
words are read digit by digit, "one oh one" -> "101"), a pending sign or currency prefix, and
rules per kind of word. This module gives the same output with two differences in cost and one
in failure:

* a digit-by-digit value grows in a list of pieces rather than by string concatenation, so a long
  run of digit words costs time linear in its length (the original copies the whole value per word);
* a value is turned into a number only where the rules need one (before a multiplier);
* a run of digits longer than Python converts to an integer (``sys.get_int_max_str_digits()``,
  4,300 by default), on which the original raises ``ValueError``, is kept as a plain word.

``tests/test_leaderboard_normalizer.py`` checks the rules against the ``whisper-normalizer``
package's implementation on random word sequences, and the whole leaderboard normalizer
against outputs of the leaderboard's own code.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Generator, Iterator, Match

_ONES_NAMES = (
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
ONES: dict[str, int] = {name: i for i, name in enumerate(_ONES_NAMES, start=1)}
ZEROS = frozenset({"o", "oh", "zero"})
TENS: dict[str, int] = {name: 10 * i for i, name in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
MULTIPLIERS: dict[str, int] = {
    name: 10**exp
    for name, exp in (
        ("hundred", 2),
        ("thousand", 3),
        ("million", 6),
        ("billion", 9),
        ("trillion", 12),
        ("quadrillion", 15),
        ("quintillion", 18),
        ("sextillion", 21),
        ("septillion", 24),
        ("octillion", 27),
        ("nonillion", 30),
        ("decillion", 33),
    )
}


def _ones_ordinal(name: str, value: int) -> str:
    """Whisper's ordinal spelling rule: the irregular five, plus "h" after a final t, else "th" ("nine" -> "nineth")."""
    irregular = {1: "first", 2: "second", 3: "third", 5: "fifth", 12: "twelfth"}
    return irregular.get(value) or name + ("h" if name.endswith("t") else "th")


# word -> (value, suffix) for words that end a number at once ("sixes" -> "6s", "fourth" -> "4th")
ONES_SUFFIXED: dict[str, tuple[int, str]] = {
    **{("sixes" if n == "six" else n + "s"): (v, "s") for n, v in ONES.items()},
    "zeroth": (0, "th"),
    **{_ones_ordinal(n, v): (v, "st" if v == 1 else "nd" if v == 2 else "rd" if v == 3 else "th") for n, v in ONES.items()},
}
TENS_SUFFIXED: dict[str, tuple[int, str]] = {
    **{n[:-1] + "ies": (v, "s") for n, v in TENS.items()},
    **{n[:-1] + "ieth": (v, "th") for n, v in TENS.items()},
}
MULTIPLIERS_SUFFIXED: dict[str, tuple[int, str]] = {
    **{n + "s": (v, "s") for n, v in MULTIPLIERS.items()},
    **{n + "th": (v, "th") for n, v in MULTIPLIERS.items()},
}
SIGNS = {"minus": "-", "negative": "-", "plus": "+", "positive": "+"}
CURRENCIES = {"pound": "£", "pounds": "£", "euro": "€", "euros": "€", "dollar": "$", "dollars": "$", "cent": "¢", "cents": "¢"}
PREFIX_CHARS = frozenset(SIGNS.values()) | frozenset(CURRENCIES.values())
SPECIALS = frozenset({"and", "double", "triple", "point"})
DECIMAL_WORDS = frozenset(ONES) | frozenset(TENS) | ZEROS
NUMBER_WORDS = frozenset(
    [
        *ZEROS,
        *ONES,
        *ONES_SUFFIXED,
        *TENS,
        *TENS_SUFFIXED,
        *MULTIPLIERS,
        *MULTIPLIERS_SUFFIXED,
        *SIGNS,
        *CURRENCIES,
        "per",
        "percent",
        *SPECIALS,
    ]
)
"""Every word the rules act on."""
_ACTIVE_WORDS = NUMBER_WORDS - {"and", "double", "triple"}
"""Without a digit or one of these, the rules change nothing: "and", "double" and "triple" act only before a number word
or a digit ("point" before any number word is dropped, so it counts)."""

_ARABIC = re.compile(r"\d+(?:\.\d+)?")
_HALF = re.compile(r"\band\s+a\s+half\b")
_LETTER_DIGIT = re.compile(r"([a-z])([0-9])")
_DIGIT_LETTER = re.compile(r"([0-9])([a-z])")
_DIGIT_SUFFIX = re.compile(r"([0-9])\s+(st|nd|rd|th|s)\b")
_CENTS_AFTER = re.compile(r"([€£$])([0-9]+) (?:and )?¢([0-9]{1,2})\b")
_ONLY_CENTS = re.compile(r"[€£$]0.([0-9]{1,2})\b")
_LONE_ONE = re.compile(r"\b1(s?)\b")
_ASCII_DIGIT = re.compile(r"[0-9]")


class _Digits:
    """A value read digit by digit ("one oh one"), built in pieces so appending is O(piece)."""

    __slots__ = ("parts",)

    def __init__(self, text: str) -> None:
        self.parts = [text]

    def append(self, text: str) -> _Digits:
        self.parts.append(text)
        return self

    def replace_last_char(self, text: str) -> _Digits:
        """Drop the last character, then append ``text`` ("twenty one": "20" -> "21")."""
        last = self.parts[-1]
        while not last:
            self.parts.pop()
            last = self.parts[-1]
        self.parts[-1] = last[:-1]
        self.parts.append(text)
        return self

    def ends_with_point(self) -> bool:
        return any(self.parts) and next(p for p in reversed(self.parts) if p).endswith(".")

    def text(self) -> str:
        if len(self.parts) > 1:
            self.parts = ["".join(self.parts)]
        return self.parts[0]


Value = int | _Digits


def _int_text(n: int) -> str:
    """``str(n)`` that never trips Python's digit limit (a value can pass it by a few digits)."""
    try:
        return str(n)
    except ValueError:
        high, low = divmod(n, 10**1000)
        return _int_text(high) + f"{low:01000d}"


def _as_text(value: Value) -> str:
    return value.text() if isinstance(value, _Digits) else _int_text(value)


def _fraction(text: str) -> Fraction | None:
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def _scaled(value: Value, multiplier: int) -> int | None:
    """``value * multiplier`` when that is a whole number (digits read as a decimal: "1.5" thousand)."""
    if isinstance(value, int):
        return value * multiplier
    f = _fraction(value.text())
    if f is None:
        return None
    p = f * multiplier
    return p.numerator if p.denominator == 1 else None


class _Reader:
    """One pass over the words of a text: yields the output words."""

    def __init__(self) -> None:
        self.prefix: str | None = None
        self.value: Value | None = None

    def emit(self, item: Value | str) -> str:
        text = item if isinstance(item, str) else _as_text(item)
        if self.prefix is not None:
            text = self.prefix + text
        self.prefix = None
        self.value = None
        return text

    def flush(self) -> Iterator[str]:
        if self.value is not None:
            yield self.emit(self.value)

    def digits_so_far(self) -> _Digits:
        """``str(value or "")`` of the original as a digit string to append to (0 and None read as nothing)."""
        v = self.value
        if isinstance(v, _Digits):
            return v
        return _Digits(_int_text(v) if v else "")

    def read(self, words: list[str]) -> Iterator[str]:
        skip = False
        n = len(words)
        for i, word in enumerate(words):
            if skip:
                skip = False
                continue
            prev = words[i - 1] if i else None
            nxt = words[i + 1] if i + 1 < n else None
            nxt_numeric = nxt is not None and _ARABIC.fullmatch(nxt) is not None
            if word not in NUMBER_WORDS:
                yield from self.plain_or_digits(word)
            elif word in ZEROS:
                self.value = self.digits_so_far().append("0")
            elif word in ONES:
                self.ones(ONES[word], prev)
            elif word in ONES_SUFFIXED:
                number, suffix = ONES_SUFFIXED[word]
                yield self.emit(self.ones_text(number, prev) + suffix)
            elif word in TENS:
                self.tens(TENS[word])
            elif word in TENS_SUFFIXED:
                tens, suffix = TENS_SUFFIXED[word]
                yield self.emit(self.tens_text(tens) + suffix)
            elif word in MULTIPLIERS:
                yield from self.multiplier(MULTIPLIERS[word])
            elif word in MULTIPLIERS_SUFFIXED:
                yield from self.multiplier_suffixed(*MULTIPLIERS_SUFFIXED[word])
            elif word in SIGNS:
                yield from self.flush()
                if nxt in NUMBER_WORDS or nxt_numeric:
                    self.prefix = SIGNS[word]
                else:
                    yield self.emit(word)
            elif word in CURRENCIES:
                if self.value is not None:
                    self.prefix = CURRENCIES[word]
                    yield self.emit(self.value)
                else:
                    yield self.emit(word)
            elif word in ("per", "percent"):
                if self.value is None:
                    yield self.emit(word)
                elif word == "percent":
                    yield self.emit(_as_text(self.value) + "%")
                elif nxt == "cent":
                    yield self.emit(_as_text(self.value) + "%")
                    skip = True
                else:
                    yield self.emit(self.value)
                    yield self.emit(word)
            else:
                skip = yield from self.special(word, prev, nxt, nxt_numeric)
        yield from self.flush()

    def plain_or_digits(self, word: str) -> Iterator[str]:
        """A written number ("25", "$3.50", "-4"), or any word the rules do not know."""
        signed = word[0] in PREFIX_CHARS
        bare = word[1:] if signed else word
        f = _fraction(bare) if _ARABIC.fullmatch(bare) else None
        if f is None:
            yield from self.flush()
            yield self.emit(word)
            return
        if self.value is not None:
            if isinstance(self.value, _Digits) and self.value.ends_with_point():
                self.value.append(word)  # decimals, and the parts of an IP address
                return
            yield self.emit(self.value)
        if signed:
            self.prefix = word[0]
        self.value = f.numerator if f.denominator == 1 else _Digits(bare)

    def ones_text(self, number: int, prev: str | None) -> str:
        """The pending value with a ones word added, as text."""
        v = self.value
        if v is None:
            return str(number)
        if isinstance(v, _Digits) or prev in ONES:
            if prev in TENS and number < 10 and isinstance(v, _Digits):  # after a tens word the value is "...0"
                return v.replace_last_char(str(number)).text()
            return _as_text(v) + str(number)
        if v % (10 if number < 10 else 100) == 0:
            return _int_text(v + number)
        return _int_text(v) + str(number)

    def ones(self, number: int, prev: str | None) -> None:
        v = self.value
        if v is None:
            self.value = number
        elif isinstance(v, _Digits) or prev in ONES:
            digits = self.digits_so_far() if isinstance(v, _Digits) else _Digits(_int_text(v))
            if prev in TENS and number < 10:
                self.value = digits.replace_last_char(str(number))
            else:
                self.value = digits.append(str(number))
        elif v % (10 if number < 10 else 100) == 0:
            self.value = v + number
        else:
            self.value = _Digits(_int_text(v)).append(str(number))

    def tens_text(self, tens: int) -> str:
        v = self.value
        if v is None:
            return str(tens)
        if isinstance(v, _Digits):
            return v.text() + str(tens)
        return _int_text(v + tens) if v % 100 == 0 else _int_text(v) + str(tens)

    def tens(self, tens: int) -> None:
        v = self.value
        if v is None:
            self.value = tens
        elif isinstance(v, _Digits):
            v.append(str(tens))
        elif v % 100 == 0:
            self.value = v + tens
        else:
            self.value = _Digits(_int_text(v)).append(str(tens))

    def multiplier(self, multiplier: int) -> Iterator[str]:
        v = self.value
        if v is None:
            self.value = multiplier
        elif isinstance(v, _Digits) or v == 0:
            scaled = _scaled(v, multiplier)
            if scaled is None:
                yield self.emit(v)
                self.value = multiplier
            else:
                self.value = scaled
        else:
            self.value = v // 1000 * 1000 + v % 1000 * multiplier

    def multiplier_suffixed(self, multiplier: int, suffix: str) -> Iterator[str]:
        v = self.value
        if v is None:
            yield self.emit(_int_text(multiplier) + suffix)
        elif isinstance(v, _Digits):
            scaled = _scaled(v, multiplier)
            if scaled is None:
                yield self.emit(v)
                yield self.emit(_int_text(multiplier) + suffix)
            else:
                yield self.emit(_int_text(scaled) + suffix)
        else:
            yield self.emit(_int_text(v // 1000 * 1000 + v % 1000 * multiplier) + suffix)

    def special(self, word: str, prev: str | None, nxt: str | None, nxt_numeric: bool) -> Generator[str, None, bool]:
        """ "and", "double", "triple", "point"; returns whether the next word was consumed."""
        if nxt not in NUMBER_WORDS and not nxt_numeric:
            yield from self.flush()
            yield self.emit(word)
            return False
        if word == "and":
            if prev not in MULTIPLIERS:  # "hundred and five": the "and" is dropped
                yield from self.flush()
                yield self.emit(word)
            return False
        if word == "point":
            if nxt in DECIMAL_WORDS or nxt_numeric:
                self.value = self.digits_so_far().append(".")
            return False  # before another number word that is not a digit, "point" is dropped
        if nxt is not None and (nxt in ONES or nxt in ZEROS):  # "double oh seven" -> "007"
            digit = str(ONES.get(nxt, 0))
            self.value = self.digits_so_far().append(digit * (2 if word == "double" else 3))
            return True
        yield from self.flush()
        yield self.emit(word)
        return False


def _preprocess(s: str) -> str:
    """ "<number> and a half" -> "<number> point five"; spaces between digits and letters, except before a suffix ("25 th")."""
    if "half" in s:
        out = []
        segments = _HALF.split(s)
        last = len(segments) - 1
        for i, segment in enumerate(segments):
            if not segment.strip():
                continue  # an empty segment drops the "and a half" after it
            out.append(segment)
            if i < last:
                final_word = segment.split()[-1]
                out.append("point five" if final_word in DECIMAL_WORDS or final_word in MULTIPLIERS else "and a half")
        s = " ".join(out)
    if _ASCII_DIGIT.search(s) is None:
        return s
    s = _LETTER_DIGIT.sub(r"\1 \2", s)
    s = _DIGIT_LETTER.sub(r"\1 \2", s)
    return _DIGIT_SUFFIX.sub(r"\1\2", s)


def _cents_after(m: Match[str]) -> str:
    return f"{m.group(1)}{m.group(2)}.{int(m.group(3)):02d}"


def _only_cents(m: Match[str]) -> str:
    return f"¢{int(m.group(1))}"


def _postprocess(s: str) -> str:
    """ "$2 and ¢7" -> "$2.07", "$0.07" -> "¢7", and a lone "1" written "one"."""
    if _ASCII_DIGIT.search(s) is None:
        return s
    s = _CENTS_AFTER.sub(_cents_after, s)
    s = _ONLY_CENTS.sub(_only_cents, s)
    return _LONE_ONE.sub(r"one\1", s)


_DIGIT = re.compile(r"\d")


def normalize_numbers(s: str) -> str:
    """Whisper's number normalization of ``s`` (lower case, symbols other than ``.%$¢€£`` already gone)."""
    s = _preprocess(s)
    words = s.split()
    if _DIGIT.search(s) is None and _ACTIVE_WORDS.isdisjoint(words):
        return " ".join(words)
    return _postprocess(" ".join(_Reader().read(words)))
