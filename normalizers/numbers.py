"""Numbers in raw transcripts: read digits and English number words to one canonical value.

Probes compare a reference and a hypothesis that may write the same spoken number in
different ways ("2016", "twenty sixteen", "two thousand and sixteen"). Everything here
reduces a written number to its value (``int``, or ``Decimal`` for non-integers) so that
matching is by value, never by surface string. Only exact number words count: "to",
"too", "for", "won" are never numbers. Ambiguous words are handled conservatively:
"a" is 1 only before a scale word ("a hundred"), "oh"/"o" is 0 only inside a year or
after "point", and "second" is the ordinal 2 only inside a compound ("twenty-second")
or after a determiner ("the second", "her second").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import lru_cache

Number = int | Decimal

_UNITS: dict[str, int] = {
    "zero": 0,
    "nought": 0,
    "naught": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
}
_TENS: dict[str, int] = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
# "the nineties", "nineteen nineties": decades read as their tens value
_TENS_PLURAL: dict[str, int] = {w[:-1] + "ies": v for w, v in _TENS.items()}
_ORD_SMALL: dict[str, int] = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
    "eleventh": 11,
    "twelfth": 12,
    "thirteenth": 13,
    "fourteenth": 14,
    "fifteenth": 15,
    "sixteenth": 16,
    "seventeenth": 17,
    "eighteenth": 18,
    "nineteenth": 19,
}
_ORD_TENS: dict[str, int] = {w[:-1] + "ieth": v for w, v in _TENS.items()}
_SCALES: dict[str, int] = {
    "thousand": 10**3,
    "million": 10**6,
    "billion": 10**9,
    "trillion": 10**12,
}
_ORD_SCALES: dict[str, int] = {w + "th": v for w, v in _SCALES.items()}
_DIGIT_WORDS: dict[str, int] = {
    "zero": 0,
    "oh": 0,
    "o": 0,
    "nought": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
}
# words after which a bare "second" is the ordinal rather than the unit of time
_ORDINAL_DETERMINERS = frozenset({"the", "his", "her", "its", "their", "our", "my", "your", "every"})
# inside a compound ordinal ("one hundred and second", "two thousand second")
_SECOND_AFTER = frozenset({"hundred", "and", "thousand", "million", "billion", "trillion"})
_NEGATIVE = frozenset({"minus", "negative"})
_DIGIT_SUFFIX_SCALE: dict[str, int] = {"k": 10**3, "m": 10**6, "bn": 10**9, "b": 10**9, "tn": 10**12}

#: Every word that can take part in a number phrase (used to recognise number-ish neighbours).
NUMBER_WORDS: frozenset[str] = frozenset(
    set(_UNITS)
    | set(_TENS)
    | set(_TENS_PLURAL)
    | set(_ORD_SMALL)
    | set(_ORD_TENS)
    | set(_SCALES)
    | set(_ORD_SCALES)
    | {"hundred", "hundredth"}
)

_STARTERS = NUMBER_WORDS | {"a", "point", "minus", "negative"}

_DIGITS_RE = re.compile(
    r"^(?P<sign>[-−])?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?P<suffix>st|nd|rd|th|s|'s|k|m|bn|b|tn)?$",
    re.IGNORECASE,
)
_EDGE_STRIP_LEFT = "\"'“”‘’([{<«$€£¥"
_EDGE_STRIP_RIGHT = "\"'“”‘’)]}>».,;:!?%"
_SEPARATORS = "\u00a0\u202f\u2009"  # non-breaking and thin spaces used as thousands separators


def _canon(value: Number | float) -> Number:
    """Integral values become ``int``; others a normalized ``Decimal`` (hash-equal across forms)."""
    if isinstance(value, float):
        value = Decimal(repr(value))
    if isinstance(value, Decimal):
        if value == value.to_integral_value():
            return int(value)
        return value.normalize()
    return int(value)


@dataclass(frozen=True)
class _Digits:
    value: Number
    ordinal: bool
    scaled: bool  # carried a k/m/bn suffix


def _parse_digit_token(tok: str) -> _Digits | None:
    for sep in _SEPARATORS:
        tok = tok.replace(sep, ",")
    m = _DIGITS_RE.match(tok)
    if not m:
        return None
    num = m.group("num").replace(",", "")
    try:
        value: Number = Decimal(num) if "." in num else int(num)
    except (InvalidOperation, ValueError):
        return None
    suffix = (m.group("suffix") or "").lower()
    scaled = False
    if suffix in _DIGIT_SUFFIX_SCALE:
        value = value * _DIGIT_SUFFIX_SCALE[suffix]
        scaled = True
    if m.group("sign"):
        value = -value
    ordinal = suffix in ("st", "nd", "rd", "th")
    return _Digits(_canon(value), ordinal, scaled)


def _clean(tok: str) -> str:
    """Lower-case a word and strip edge punctuation and currency/percent symbols."""
    return tok.strip().lstrip(_EDGE_STRIP_LEFT).rstrip(_EDGE_STRIP_RIGHT).lower()


@dataclass(frozen=True)
class _Sub:
    """A sub-token (hyphenated tokens are split) with the index of the token it came from."""

    word: str
    origin: int
    digits: _Digits | None


@lru_cache(maxsize=65536)
def _token_parts(tok: str) -> tuple[tuple[str, _Digits | None], ...]:
    """(word, digits) pieces of one token; hyphenated words split ('twenty-one')."""
    word = _clean(tok)
    if not word:
        return (("", None),)
    dig = _parse_digit_token(word)
    if dig is not None:
        return ((word, dig),)
    parts = re.split(r"[-‐–]", word) if not word.startswith("-") else [word]
    if len(parts) > 1 and all(parts):
        return tuple((p, None) for p in parts)
    return ((word, None),)


def _subtokens(tokens: Sequence[str]) -> list[_Sub]:
    subs: list[_Sub] = []
    for i, tok in enumerate(tokens):
        subs.extend(_Sub(word, i, dig) for word, dig in _token_parts(tok))
    return subs


@dataclass(frozen=True)
class _Parse:
    value: Number
    end: int  # sub-token index one past the phrase
    ordinal: bool = False
    alternatives: tuple[Number, ...] = ()  # other readings (components of a year reading)


class _Parser:
    """Recursive-descent reader of English cardinals, ordinals, years and decimals."""

    def __init__(self, subs: Sequence[_Sub]) -> None:
        self.w = [s.word for s in subs]
        self.d = [s.digits for s in subs]
        self.n = len(subs)

    def word(self, i: int) -> str:
        return self.w[i] if 0 <= i < self.n else ""

    def tens(self, i: int) -> _Parse | None:
        """1..99 (also 0 for 'zero'), possibly ordinal or plural decade."""
        w = self.word(i)
        if w in _TENS:
            v = _TENS[w]
            nxt = self.word(i + 1)
            if nxt in _UNITS and 1 <= _UNITS[nxt] <= 9:
                return _Parse(v + _UNITS[nxt], i + 2)
            if nxt in _ORD_SMALL and _ORD_SMALL[nxt] <= 9:
                return _Parse(v + _ORD_SMALL[nxt], i + 2, ordinal=True)
            return _Parse(v, i + 1)
        if w in _TENS_PLURAL:
            return _Parse(_TENS_PLURAL[w], i + 1)
        if w in _ORD_TENS:
            return _Parse(_ORD_TENS[w], i + 1, ordinal=True)
        if w in _UNITS:
            return _Parse(_UNITS[w], i + 1)
        if w in _ORD_SMALL:
            prev = self.word(i - 1)
            if w == "second" and prev not in _ORDINAL_DETERMINERS and prev not in _SECOND_AFTER:
                return None
            return _Parse(_ORD_SMALL[w], i + 1, ordinal=True)
        return None

    def hundreds(self, i: int) -> _Parse | None:
        """A chunk below a scale word: digits, 'a hundred', 'nineteen hundred and five', ..."""
        if i >= self.n:
            return None
        dig = self.d[i]
        if dig is not None:
            return _Parse(dig.value, i + 1, ordinal=dig.ordinal)
        w = self.word(i)
        if w == "hundredth":
            return _Parse(100, i + 1, ordinal=True)
        if w in _ORD_SCALES:
            return _Parse(_ORD_SCALES[w], i + 1, ordinal=True)
        if w == "a" and self.word(i + 1) in ("hundred", "hundredth", *_SCALES, *_ORD_SCALES):
            t: _Parse | None = _Parse(1, i + 1)
        else:
            t = self.tens(i)
        if t is None:
            return None
        if t.ordinal or t.value == 0:
            return t
        nxt = self.word(t.end)
        if nxt == "hundredth":
            return _Parse(t.value * 100, t.end + 1, ordinal=True)
        if nxt != "hundred":
            return t
        base = t.value * 100
        j = t.end + 1
        k = j + 1 if self.word(j) == "and" else j
        rest = self.tens(k)
        if rest is not None and 1 <= rest.value <= 99:
            return _Parse(base + rest.value, rest.end, ordinal=rest.ordinal)
        return _Parse(base, j)

    def cardinal(self, i: int) -> _Parse | None:
        """Chunks joined by strictly decreasing scale words ('two million three thousand and six')."""
        first = self.hundreds(i)
        if first is None:
            return None
        total: Number = 0
        chunk = first
        last_scale = 10**18
        while True:
            if chunk.ordinal:
                return _Parse(_canon(total + chunk.value), chunk.end, ordinal=True)
            nxt = self.word(chunk.end)
            if nxt in _SCALES and _SCALES[nxt] < last_scale and chunk.value != 0:
                scale = _SCALES[nxt]
                total += chunk.value * scale
                last_scale = scale
                j = chunk.end + 1
                k = j + 1 if self.word(j) == "and" else j
                nxt_chunk = self.hundreds(k)
                if nxt_chunk is None or nxt_chunk.value == 0 or nxt_chunk.value >= scale:
                    return _Parse(_canon(total), j)
                after = self.word(nxt_chunk.end)
                if not nxt_chunk.ordinal and after in _SCALES and _SCALES[after] >= last_scale:
                    return _Parse(_canon(total), j)
                if not nxt_chunk.ordinal and after in _ORD_SCALES and _ORD_SCALES[after] >= last_scale:
                    return _Parse(_canon(total), j)
                if k != j and self.d[k] is not None:
                    return _Parse(_canon(total), j)  # "thousand and 5" is two numbers
                chunk = nxt_chunk
                continue
            if nxt in _ORD_SCALES and _ORD_SCALES[nxt] < last_scale and chunk.value != 0:
                return _Parse(_canon(total + chunk.value * _ORD_SCALES[nxt]), chunk.end + 1, ordinal=True)
            return _Parse(_canon(total + chunk.value), chunk.end)

    def year(self, i: int) -> _Parse | None:
        """'twenty sixteen' = 2016, 'nineteen oh five' = 1905, 'nineteen nineties' = 1990."""
        if i >= self.n or self.d[i] is not None:
            return None
        g1 = self.tens(i)
        if g1 is None or g1.ordinal or not 10 <= g1.value <= 99:
            return None
        k = g1.end
        w = self.word(k)
        if w in ("oh", "o") and self.word(k + 1) in _UNITS and 1 <= _UNITS[self.word(k + 1)] <= 9:
            unit = _UNITS[self.word(k + 1)]
            return _Parse(g1.value * 100 + unit, k + 2, alternatives=(g1.value, unit))
        if w in ("oh", "o") and self.word(k + 1) in _ORD_SMALL and _ORD_SMALL[self.word(k + 1)] <= 9:
            return None
        if k < self.n and self.d[k] is not None:
            return None
        g2 = self.tens(k)
        if g2 is None or not 10 <= g2.value <= 99:
            return None
        if self.word(g2.end) in ("hundred", "hundredth", *_SCALES, *_ORD_SCALES):
            return None
        return _Parse(g1.value * 100 + g2.value, g2.end, ordinal=g2.ordinal, alternatives=(g1.value, g2.value))

    def decimal_tail(self, whole: _Parse) -> _Parse:
        """Extend a cardinal with 'point five', 'point oh two'."""
        if whole.ordinal or self.word(whole.end) != "point":
            return whole
        j = whole.end + 1
        digits = ""
        while self.word(j) in _DIGIT_WORDS:
            digits += str(_DIGIT_WORDS[self.word(j)])
            j += 1
        if not digits:
            return whole
        sign = -1 if whole.value < 0 else 1
        value = Decimal(str(whole.value)).copy_abs() + Decimal("0." + digits)
        return _Parse(_canon(sign * value), j)

    def at(self, i: int) -> _Parse | None:
        """The longest number phrase starting at sub-token i, or None."""
        negative = False
        start = i
        if self.word(i) in _NEGATIVE:
            negative = True
            i += 1
        if self.word(i) == "point" and self.word(i + 1) in _DIGIT_WORDS and self.word(i + 1) not in ("o",):
            p: _Parse | None = self.decimal_tail(_Parse(0, i))
        else:
            p = self.year(i) or self.cardinal(i)
            if p is not None:
                p = self.decimal_tail(p)
        if p is None or (p.end == start + (1 if negative else 0)):
            return None
        if negative:
            return _Parse(_canon(-p.value), p.end, p.ordinal, tuple(-a for a in p.alternatives))
        return p


@dataclass(frozen=True)
class NumberSpan:
    """One number phrase found in text: value, where it is, and how it was written."""

    value: Number
    start: int  # token index (parse_number_words) or character offset (find_numbers)
    end: int
    text: str
    has_digits: bool
    ordinal: bool = False
    alternatives: tuple[Number, ...] = field(default=())


def _parse_subs(subs: Sequence[_Sub]) -> list[tuple[_Parse, int]]:
    parser = _Parser(subs)
    out: list[tuple[_Parse, int]] = []
    i = 0
    while i < len(subs):
        if subs[i].digits is None and subs[i].word not in _STARTERS:
            i += 1
            continue
        p = parser.at(i)
        if p is None:
            i += 1
            continue
        out.append((p, i))
        i = p.end
    return out


def _parse_tokens(tokens: Sequence[str]) -> list[NumberSpan]:
    subs = _subtokens(tokens)
    spans: list[NumberSpan] = []
    for p, i in _parse_subs(subs):
        first, last = subs[i].origin, subs[p.end - 1].origin
        has_digits = any(s.digits is not None for s in subs[i : p.end])
        spans.append(NumberSpan(p.value, first, last + 1, " ".join(tokens[first : last + 1]), has_digits, p.ordinal, p.alternatives))
    return spans


def parse_number_words(tokens: Sequence[str]) -> list[tuple[Number, int, int]]:
    """Number phrases in a token list as ``(value, start, end)`` with ``end`` exclusive.

    Tokens may carry edge punctuation, digits ("2,016", "3rd", "5%", "$5", "2.5bn") and
    hyphens ("twenty-one"); digits combine with following scale words ("5 million").
    """
    return [(s.value, s.start, s.end) for s in _parse_tokens(tokens)]


_TEXT_TOKEN_RE = re.compile(r"\S+")
_BREAK_RE = re.compile(r"[.,;:!?]['\"”’)\]]*$")


def find_numbers(text: str) -> list[NumberSpan]:
    """Number phrases in raw text with character spans; phrases never cross , . ; : ! ?"""
    return list(_find_numbers_cached(text))


_HINT_RE = re.compile(r"\d|\b(?:" + "|".join(sorted(NUMBER_WORDS | {"point"}, key=len, reverse=True)) + r")\b", re.IGNORECASE)


@lru_cache(maxsize=8192)
def _find_numbers_cached(text: str) -> tuple[NumberSpan, ...]:
    if not _HINT_RE.search(text):
        return ()
    matches = list(_TEXT_TOKEN_RE.finditer(text))
    spans: list[NumberSpan] = []
    seg: list[re.Match[str]] = []

    def flush() -> None:
        if not seg:
            return
        for s in _parse_tokens([m.group() for m in seg]):
            a, b = seg[s.start].start(), seg[s.end - 1].end()
            raw = text[a:b]
            # trim edge punctuation from the reported character span
            left = len(raw) - len(raw.lstrip("\"'“”‘’([{<«"))
            right = len(raw) - len(raw.rstrip("\"'“”‘’)]}>».,;:!?"))
            a2, b2 = a + left, b - right
            spans.append(NumberSpan(s.value, a2, b2, text[a2:b2], s.has_digits, s.ordinal, s.alternatives))
        seg.clear()

    for m in matches:
        tok = m.group()
        seg.append(m)
        # a digit token like "2.5" ends with a digit, so only trailing punctuation breaks
        if _BREAK_RE.search(tok) and not re.fullmatch(r"[-−]?\d+(?:[.,]\d+)*", tok):
            flush()
    flush()
    return tuple(spans)


def _as_value(value: Number | float | str) -> Number:
    if isinstance(value, str):
        spans = find_numbers(value)
        if len(spans) != 1:
            raise ValueError(f"'{value}' is not exactly one number (found {len(spans)})")
        return spans[0].value
    if isinstance(value, bool):
        raise TypeError("a bool is not a number value")
    return _canon(value)


def number_values(text: str, include_alternatives: bool = True) -> list[Number]:
    """Every number value written in ``text`` (digits or words), with year components when asked."""
    out: list[Number] = []
    for s in find_numbers(text):
        out.append(s.value)
        if include_alternatives:
            out.extend(s.alternatives)
    return out


def count_number(text: str, value: Number | float | str) -> int:
    """How many phrases in ``text`` have this value (a year's components count as readings too)."""
    target = _as_value(value)
    n = 0
    for s in find_numbers(text):
        if s.value == target or target in s.alternatives:
            n += 1
    return n


def text_contains_number(text: str, value: Number | float | str) -> bool:
    """Whether ``text`` writes ``value`` in any form: "2016" matches "twenty sixteen"."""
    return count_number(text, value) > 0


# ---------------------------------------------------------------- rendering

_UNIT_NAMES = [w for w, v in sorted(_UNITS.items(), key=lambda kv: kv[1]) if w not in ("nought", "naught")]
_TENS_NAMES = {v: w for w, v in _TENS.items()}
_ORD_BY_CARD = {**{w: o for o, w in zip(_ORD_SMALL, _UNIT_NAMES[1:20])}, **{w: w[:-1] + "ieth" for w in _TENS}}
_SCALE_ORDER = sorted(_SCALES.items(), key=lambda kv: -kv[1])


def _below_100(n: int, hyphen: bool) -> str:
    if n < 20:
        return _UNIT_NAMES[n]
    tens, unit = divmod(n, 10)
    if unit == 0:
        return _TENS_NAMES[tens * 10]
    return f"{_TENS_NAMES[tens * 10]}{'-' if hyphen else ' '}{_UNIT_NAMES[unit]}"


def _below_1000(n: int, british_and: bool, hyphen: bool, a_for_one: bool) -> str:
    hundreds, rest = divmod(n, 100)
    parts: list[str] = []
    if hundreds:
        parts.append(("a" if a_for_one and hundreds == 1 else _UNIT_NAMES[hundreds]) + " hundred")
        if rest and british_and:
            parts.append("and")
    if rest or not hundreds:
        parts.append(_below_100(rest, hyphen))
    return " ".join(parts)


def int_to_words(n: int, *, british_and: bool = False, hyphen: bool = False, a_for_one: bool = False) -> str:
    """English cardinal words: 2016 -> 'two thousand sixteen' (or '... and sixteen')."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"int_to_words needs an int, got {type(n).__name__}")
    if n < 0:
        return "minus " + int_to_words(-n, british_and=british_and, hyphen=hyphen, a_for_one=a_for_one)
    if n == 0:
        return "zero"
    if n >= 10**15:
        raise ValueError(f"{n} is beyond the trillions this module reads")
    parts: list[str] = []
    rest = n
    first = True
    for name, scale in _SCALE_ORDER:
        chunk, rest = divmod(rest, scale)
        if chunk:
            words = _below_1000(chunk, british_and, hyphen, a_for_one and first)
            if a_for_one and first and chunk == 1:
                words = "a"
            parts.append(f"{words} {name}")
            first = False
    if rest:
        if parts and british_and and rest < 100:
            parts.append("and")
        parts.append(_below_1000(rest, british_and, hyphen, a_for_one and first))
    return " ".join(parts)


def year_to_words(n: int) -> str | None:
    """How a year is usually read: 1905 'nineteen oh five', 2016 'twenty sixteen', 1900 'nineteen hundred'.

    None outside 1010..9999 or for whole thousands (read as cardinals: 'two thousand').
    """
    if not 1010 <= n <= 9999 or n % 1000 == 0:
        return None
    hi, lo = divmod(n, 100)
    if lo == 0:
        return f"{_below_100(hi, False)} hundred"
    if lo < 10:
        return f"{_below_100(hi, False)} oh {_UNIT_NAMES[lo]}"
    return f"{_below_100(hi, False)} {_below_100(lo, False)}"


def ordinal_words(n: int) -> str:
    """'third', 'twenty first', 'one hundredth' for n >= 1."""
    if n < 1:
        raise ValueError(f"ordinal of {n} is not defined here")
    words = int_to_words(n).split(" ")
    last = words[-1]
    if last in _ORD_BY_CARD:
        words[-1] = _ORD_BY_CARD[last]
    else:  # hundred, thousand, million ...
        words[-1] = last + "th"
    return " ".join(words)


def _ordinal_suffix(n: int) -> str:
    if 10 <= n % 100 <= 20:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def decimal_to_words(value: Decimal) -> str:
    """'two point five' for 2.5; integer part in cardinals, then digit by digit."""
    sign = "minus " if value < 0 else ""
    text = format(abs(value), "f")
    whole, _, frac = text.partition(".")
    return f"{sign}{int_to_words(int(whole))} point " + " ".join(_UNIT_NAMES[int(c)] for c in frac)


def number_forms(token_or_phrase: str | int | Decimal) -> set[str]:
    """Common written forms of one number (lower case), built from its value.

    "2016" -> {"2016", "2,016", "two thousand sixteen", "two thousand and sixteen",
    "twenty sixteen", ...}; "3rd" -> {"3rd", "third"}; "5%" -> {"5%", "5 percent",
    "five percent", "five per cent", ...}. Raises ValueError when the input is not one number.
    """
    percent = False
    ordinal = False
    if isinstance(token_or_phrase, str):
        phrase = token_or_phrase.strip()
        low = phrase.lower()
        if low.endswith("%") or re.search(r"\bper ?cent$", low):
            percent = True
            phrase = re.sub(r"(?i)\s*(%|per ?cent)$", "", phrase)
        spans = find_numbers(phrase)
        if len(spans) != 1:
            raise ValueError(f"'{token_or_phrase}' is not exactly one number (found {len(spans)})")
        value = spans[0].value
        ordinal = spans[0].ordinal
    else:
        value = _as_value(token_or_phrase)
    forms: set[str] = set()
    if isinstance(value, Decimal):
        digits = [format(value, "f")]
        words = [decimal_to_words(value)]
    elif ordinal and value >= 1:
        digits = [f"{value}{_ordinal_suffix(value)}"]
        words = [ordinal_words(value), ordinal_words(value).replace("ty ", "ty-")]
        forms.update(digits + words)
        return {f.lower() for f in forms}
    else:
        digits = [str(value)]
        if abs(value) >= 1000:
            digits.append(f"{value:,}")
        words = [
            int_to_words(value),
            int_to_words(value, british_and=True),
            int_to_words(value, hyphen=True),
            int_to_words(value, british_and=True, hyphen=True),
        ]
        if str(abs(value))[0] == "1" and abs(value) >= 100:
            words.append(int_to_words(value, a_for_one=True))
            words.append(int_to_words(value, a_for_one=True, british_and=True))
        year = year_to_words(value) if value > 0 else None
        if year:
            words.append(year)
    if percent:
        for base in digits:
            forms.update({f"{base}%", f"{base} percent", f"{base} per cent"})
        for base in words:
            forms.update({f"{base} percent", f"{base} per cent"})
    else:
        forms.update(digits)
        forms.update(words)
    return {f.lower() for f in forms}


def is_number_word(word: str) -> bool:
    """Whether a single word (edge punctuation ignored) can be part of a number phrase."""
    w = _clean(word)
    return w in NUMBER_WORDS or _parse_digit_token(w) is not None


def values_of(texts: Iterable[str]) -> list[list[Number]]:
    """number_values for many texts (convenience for scoring loops)."""
    return [number_values(t) for t in texts]
