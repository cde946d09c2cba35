r"""The one secret scrubber: every stored artefact, error text and log line passes through it.

Why one place: a key can leak in many spellings (a CRLF ``.env`` leaves ``key\r``; a server or
proxy may echo it URL-encoded or inside an HTTP Basic ``user:key`` base64 blob), and a check
written per call site misses some of them. ``scrub(text)`` removes every form of every
configured secret:

* the raw value, the value stripped of surrounding whitespace, and the value with every
  whitespace/CR/LF removed;
* with any subset of its characters escaped, each in any of the forms a server, proxy or
  serializer may write (so partial escaping is covered: only the ``/`` of a key escaped, or
  only its non-ASCII letters): percent-encoding of the UTF-8 bytes (upper- or lower-case hex,
  ``%`` itself re-encoded as ``%25`` any number of times, ``+`` for a space); JSON, JavaScript and
  Python escapes (``\uXXXX`` for any character, surrogate pairs above U+FFFF, ``\u{...}``,
  ``\xHH``, ``\UXXXXXXXX``, ``\n``, ``\/``, ``\"``, the backslash itself escaped again any
  number of times); HTML numeric entities (decimal and hex, either case, leading zeros, with or
  without ``;``) and named entities (``&amp;``, ``&sol;``, ...), ``&`` itself re-escaped as
  ``&amp;``; and these escapes' own introducers percent-encoded (``%5Cu0041``, ``%26%2365%3B``);
* base64 (standard and URL-safe alphabets, with or without padding) at any byte offset, which
  covers ``base64(user:key)`` Basic-auth headers, its ``+``, ``/``, ``=``, ``-`` and ``_`` escaped as
  above (its letters and digits as written): the whole base64 token that holds the key is replaced.

Each secret becomes one regular expression: per character, an alternation of its forms. A text
with none of ``%``, ``\``, ``&``, ``+`` can hold only literal forms and is searched without it.

Which secrets: the values of the environment variables that configured backends name in
``api_key_env`` (``register_secret_env``), plus every variable whose name ends in ``_API_KEY``,
``_KEY``, ``_TOKEN``, ``_SECRET`` or ``_PASSWORD`` (values of 8 characters or more), read at
scrub time so a key set later (or in a worker process) is covered too.

``ScrubFilter`` applies the same to log records (message, arguments, traceback text);
``install_log_scrubber()`` attaches it to the root logger's handlers and to every new record.
"""

from __future__ import annotations

import base64
import html
import html.entities
import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

REDACTED = "[redacted]"
#: environment variable names that hold secrets even when no backend names them
SECRET_NAME = re.compile(r"(?:^|_)(?:API_KEY|KEY|TOKEN|SECRET|PASSWORD|ACCESS_KEY)$", re.IGNORECASE)
#: shortest value scrubbed from a variable matched only by its name (shorter ones are not keys)
MIN_PATTERN_LEN = 8
#: shortest value scrubbed from a variable a backend named (anything shorter would erase text)
MIN_NAMED_LEN = 4

_B64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_=")
_NAMED: set[str] = set()
_EXTRA: set[str] = set()
_LOCK = threading.Lock()


def clean_key(value: str | None) -> str:
    """A key read from the environment without surrounding whitespace (a CRLF .env leaves ``\\r``)."""
    return (value or "").strip()


def register_secret_env(name: str | None) -> None:
    """Scrub the value of environment variable ``name`` from now on (a backend's ``api_key_env``)."""
    if name:
        with _LOCK:
            _NAMED.add(str(name))


def register_secret(value: str | None) -> None:
    """Scrub a literal secret value from now on (one not held in the environment)."""
    if value and len(value.strip()) >= MIN_NAMED_LEN:
        with _LOCK:
            _EXTRA.add(value)


def configured_secrets(extra: Iterable[str] = ()) -> frozenset[str]:
    """Every secret value to scrub right now (see the module docstring for which)."""
    with _LOCK:
        named = set(_NAMED)
        values = set(_EXTRA)
    env = os.environ
    for name in named:
        value = env.get(name)
        if value and len(value.strip()) >= MIN_NAMED_LEN:
            values.add(value)
    for name, value in env.items():
        if value and len(value.strip()) >= MIN_PATTERN_LEN and SECRET_NAME.search(name):
            values.add(value)
    values.update(v for v in extra if v and len(v.strip()) >= MIN_NAMED_LEN)
    return frozenset(values)


def _b64_cores(raw: bytes) -> set[str]:
    """Base64 text that encodes ``raw`` at each of the three byte alignments, in both alphabets,
    trimmed to the characters that depend on ``raw`` alone (so they appear in any base64 stream
    that holds ``raw``, whatever surrounds it)."""
    out: set[str] = set()
    n = len(raw)
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + raw + b"\0" * 2).decode()
        first = -(-8 * k // 6)  # first character made of key bits only
        last = (8 * (k + n)) // 6  # one past the last such character
        core = enc[first:last]
        if len(core) >= 6:
            out.add(core)
            out.add(core.replace("+", "-").replace("/", "_"))
    return out


def _hex(value: int, width: int = 0) -> str:
    """A regex for ``value`` in hexadecimal, either case, zero-padded to ``width`` (``0``: leading zeros optional)."""
    digits = format(value, "x")
    body = "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in digits)
    if width:
        return "0" * max(0, width - len(digits)) + body if len(digits) <= width else body
    return "0*" + body


#: an escape's introducers, themselves percent-encoded or re-escaped any number of times, as
#: (first character, rest of the expression): every form of a character starts with a known literal
#: character, so one character class in front of the whole expression lets the regex engine skip, in
#: C, every position whose character starts no form
_PCT = r"(?:25)*"
_BS_ONE = rf"(?:\\|%{_PCT}5[cC])"
_BS = (("\\", f"{_BS_ONE}*"), ("%", rf"{_PCT}5[cC]{_BS_ONE}*"))
_AMP = (("&", "(?:amp;)*"), ("%", rf"{_PCT}26(?:amp(?:;|%{_PCT}3[bB]))*"))
_HASH = rf"(?:#|%{_PCT}23)"
_SEMI = rf"(?:;|%{_PCT}3[bB])?"
_SHORT = {'"': '"', "\\": "\\", "/": "/", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t", "'": "'", "\v": "v", "\0": "0"}
_ESCAPE_STARTS = ("%", "\\", "&", "+")


@lru_cache(maxsize=1)
def _named_entities() -> dict[str, tuple[str, ...]]:
    """Character -> the HTML5 entity names that stand for it alone (``&`` -> ``amp;``, ``AMP;``, ``amp``, ``AMP``)."""
    out: dict[str, list[str]] = {}
    for name, value in html.entities.html5.items():
        if len(value) == 1:
            out.setdefault(value, []).append(name)
    return {c: tuple(sorted(names, key=len, reverse=True)) for c, names in out.items()}


@lru_cache(maxsize=4096)
def _char_forms(c: str) -> tuple[tuple[str, str], ...]:
    """One character in every form it may be written in (see the module docstring), as (first character, rest of the
    expression) pairs."""
    cp = ord(c)
    utf8 = c.encode("utf-8")
    alts = [("%", _PCT + _hex(utf8[0], 2) + "".join(f"%{_PCT}{_hex(b, 2)}" for b in utf8[1:]))]
    for lead, bs in _BS:
        if cp <= 0xFFFF:
            alts.append((lead, f"{bs}u{_hex(cp, 4)}"))
        else:
            hi, lo = 0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF)
            alts.append((lead, f"{bs}u{_hex(hi, 4)}{_BS_ONE}+u{_hex(lo, 4)}"))
        alts.append((lead, f"{bs}U{_hex(cp, 8)}"))
        alts.append((lead, rf"{bs}u\{{{_hex(cp)}\}}"))
        if cp <= 0xFF:
            alts.append((lead, f"{bs}x{_hex(cp, 2)}"))
        if c in _SHORT:
            alts.append((lead, bs + re.escape(_SHORT[c])))
    for lead, amp in _AMP:
        alts.append((lead, f"{amp}{_HASH}0*{cp}{_SEMI}"))
        alts.append((lead, f"{amp}{_HASH}[xX]{_hex(cp)}{_SEMI}"))
        for name in _named_entities().get(c, ()):
            alts.append((lead, amp + re.escape(name.rstrip(";")) + (_SEMI if name.endswith(";") else "")))
    if c == " ":
        alts.append(("+", ""))
    # the character as written comes last: an escape that starts with it (a backslash, an ampersand) is then
    # taken whole, never cut after its first character
    alts.append((c, ""))
    return tuple(alts)


def _char_regex(c: str) -> str:
    return "(?:" + "|".join(re.escape(lead) + rest for lead, rest in _char_forms(c)) + ")"


def _b64_forms(c: str) -> tuple[tuple[str, str], ...]:
    """A base64 character's forms: a letter or digit as written (nothing escapes those inside a base64 token), the
    other characters (``+ / = - _``) in every form."""
    return ((c, ""),) if c.isalnum() else _char_forms(c)


def _b64_regex(c: str) -> str:
    return "(?:" + "|".join(re.escape(lead) + rest for lead, rest in _b64_forms(c)) + ")"


def _compile(texts: Sequence[str], b64: bool = False) -> re.Pattern[str] | None:
    """One expression matching any of ``texts`` with each character in any of its forms.

    Shape: ``[first characters](?:(?<=a)... rest of text 1 | (?<=%)... | ...)``: the leading class
    consumes a form's first character (the engine scans for it in C), a look-behind picks the forms
    that start with it, and the rest of the text follows, each character as an alternation.
    """
    if not texts:
        return None
    leads: set[str] = set()
    bodies = []
    for text in texts:
        by_lead: dict[str, list[str]] = {}
        for lead, rest in (_b64_forms if b64 else _char_forms)(text[0]):
            by_lead.setdefault(lead, []).append(rest)
        leads.update(by_lead)
        first = "|".join(f"(?<={re.escape(lead)})(?:{'|'.join(rests)})" for lead, rests in by_lead.items())
        bodies.append(f"(?:{first})" + "".join((_b64_regex if b64 else _char_regex)(c) for c in text[1:]))
    cls = "".join(re.escape(ch) for ch in sorted(leads))
    return re.compile(f"[{cls}](?:{'|'.join(bodies)})")


@lru_cache(maxsize=64)
def _forms(secrets: frozenset[str]) -> tuple[tuple[str, ...], tuple[str, ...], re.Pattern[str] | None, re.Pattern[str] | None]:
    """(literal forms longest first, base64 cores, one regex of every escaped form, one regex of every escaped core)."""
    literal: set[str] = set()
    cores: set[str] = set()
    for secret in secrets:
        bases = {secret, secret.strip(), "".join(secret.split()), secret.replace("\r", "").replace("\n", "")}
        for b in bases:
            if len(b) < MIN_NAMED_LEN:
                continue
            literal.add(b)
            cores.update(_b64_cores(b.encode("utf-8")))
    lit = tuple(sorted(literal, key=len, reverse=True))
    core = tuple(sorted(cores, key=len, reverse=True))
    return lit, core, _compile(lit), _compile(core, b64=True)


#: a base64 character, raw or escaped as above (to extend a matched core to its whole token)
_B64_TOKEN_RIGHT = re.compile(rf"(?:[A-Za-z0-9+/=_-]|%{_PCT}(?:2[bBfF]|3[dD])|{_BS_ONE}+/|{_BS_ONE}+u00(?:2[bBfF]|3[dD]))*")


class Scrubber:
    """The forms of one set of secrets; ``__call__`` scrubs a text (cheap when nothing matches)."""

    def __init__(self, secrets: frozenset[str]) -> None:
        self.literal, self.cores, self._lit_rx, self._core_rx = _forms(secrets)

    def __bool__(self) -> bool:
        return bool(self.literal)

    def __call__(self, text: str) -> str:
        if not self.literal or not text:
            return text
        if self._lit_rx is not None and any(ch in text for ch in _ESCAPE_STARTS):  # escaped forms are possible: the expressions
            text = self._lit_rx.sub(REDACTED, text)
            return self._scrub_cores(text, [(m.start(), m.end()) for m in self._core_rx.finditer(text)] if self._core_rx else [])
        for form in self.literal:  # only literal forms can be in a text without escapes: plain substring search
            if form in text:
                text = text.replace(form, REDACTED)
        spans = []
        for core in self.cores:
            start = text.find(core)
            while start >= 0:
                spans.append((start, start + len(core)))
                start = text.find(core, start + 1)
        return self._scrub_cores(text, sorted(spans))

    @staticmethod
    def _scrub_cores(text: str, spans: list[tuple[int, int]]) -> str:
        """Replace each whole base64 token that holds a core (left: raw base64 characters; right: raw or escaped)."""
        if not spans:
            return text
        out, pos = [], 0
        for lo, hi in spans:
            if lo < pos:
                continue
            while lo > pos and text[lo - 1] in _B64:
                lo -= 1
            m = _B64_TOKEN_RIGHT.match(text, hi)
            hi = m.end() if m else hi
            out.append(text[pos:lo] + REDACTED)
            pos = hi
        return "".join(out) + text[pos:]

    def value(self, obj: Any) -> Any:
        """``obj`` with every string inside it (dict keys and values, lists) scrubbed."""
        if not self.literal:
            return obj
        if isinstance(obj, str):
            return self(obj)
        if isinstance(obj, Mapping):
            return {self(k) if isinstance(k, str) else k: self.value(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.value(v) for v in obj) if isinstance(obj, list) else tuple(self.value(v) for v in obj)
        return obj


def scrubber(extra: Iterable[str] = ()) -> Scrubber:
    """A scrubber for the secrets configured now (take one per table or file, not per cell)."""
    return Scrubber(configured_secrets(extra))


def scrub(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with every form of every configured secret replaced by ``[redacted]``."""
    return scrubber(extra)(text)


def error_text(exc: BaseException, prefix: str = "") -> str:
    """``"<prefix><Type>: <message>"`` of an exception, scrubbed: what a row's ``error`` holds."""
    return scrub(f"{prefix}{type(exc).__name__}: {exc}")


class ScrubFilter(logging.Filter):
    """Rewrites a record's message, arguments and traceback text with the secrets removed."""

    def filter(self, record: logging.LogRecord) -> bool:
        s = scrubber()
        if not s:
            return True
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string: keep the record as logging would
            return True
        record.msg, record.args = s(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = s(record.exc_text)
        if record.stack_info:
            record.stack_info = s(record.stack_info)
        return True


_FILTER = ScrubFilter()
_FACTORY_INSTALLED = False


def install_log_scrubber(logger: logging.Logger | None = None) -> None:
    """Scrub every log line: the filter on ``logger``'s (default root) handlers, and on every
    record as it is made (so handlers added later, and third-party loggers, are covered)."""
    global _FACTORY_INSTALLED
    target = logger or logging.getLogger()
    for handler in target.handlers:
        if _FILTER not in handler.filters:
            handler.addFilter(_FILTER)
    with _LOCK:
        if _FACTORY_INSTALLED:
            return
        _FACTORY_INSTALLED = True
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _FILTER.filter(record)
        return record

    logging.setLogRecordFactory(factory)
