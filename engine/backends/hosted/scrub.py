"""The one secret scrubber: every stored artefact, error text and log line passes through it.

Why one place: a key can leak in many spellings (a CRLF ``.env`` leaves ``key\\r``; a server or
proxy may echo it URL-encoded or inside an HTTP Basic ``user:key`` base64 blob), and a check
written per call site misses some of them. ``scrub(text)`` removes every form of every
configured secret:

* the raw value, the value stripped of surrounding whitespace, and the value with every
  whitespace/CR/LF removed;
* URL-encoded (``quote`` with and without ``/`` kept, ``quote_plus``, lower- and upper-case hex,
  and double-encoded);
* JSON- and HTML-escaped;
* base64 (standard and URL-safe alphabets, with or without padding) at any byte offset, which
  covers ``base64(user:key)`` Basic-auth headers: the whole base64 token that holds the key is
  replaced.

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
import json
import logging
import os
import re
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
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


@lru_cache(maxsize=64)
def _forms(secrets: frozenset[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(literal forms longest first, base64 cores) of a set of secrets."""
    literal: set[str] = set()
    cores: set[str] = set()
    for secret in secrets:
        bases = {secret, secret.strip(), "".join(secret.split()), secret.replace("\r", "").replace("\n", "")}
        for b in bases:
            if len(b) < MIN_NAMED_LEN:
                continue
            encoded = {b, urllib.parse.quote(b, safe=""), urllib.parse.quote(b), urllib.parse.quote_plus(b),
                urllib.parse.quote_plus(b, safe="")}
            encoded.add(urllib.parse.quote(urllib.parse.quote(b, safe=""), safe=""))
            encoded.add(json.dumps(b)[1:-1])
            encoded.add(html.escape(b))
            encoded.add(repr(b)[1:-1])
            for e in list(encoded):
                encoded.add(re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), e))
            literal.update(encoded)
            cores.update(_b64_cores(b.encode("utf-8")))
    return tuple(sorted(literal, key=len, reverse=True)), tuple(sorted(cores, key=len, reverse=True))


class Scrubber:
    """The forms of one set of secrets; ``__call__`` scrubs a text (cheap when nothing matches)."""

    def __init__(self, secrets: frozenset[str]) -> None:
        self.literal, self.cores = _forms(secrets)

    def __bool__(self) -> bool:
        return bool(self.literal)

    def __call__(self, text: str) -> str:
        if not self.literal or not text:
            return text
        for form in self.literal:
            if form in text:
                text = text.replace(form, REDACTED)
        for core in self.cores:
            start = text.find(core)
            while start >= 0:
                lo, hi = start, start + len(core)
                while lo > 0 and text[lo - 1] in _B64:
                    lo -= 1
                while hi < len(text) and text[hi] in _B64:
                    hi += 1
                text = text[:lo] + REDACTED + text[hi:]
                start = text.find(core, lo + len(REDACTED))
        return text

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
