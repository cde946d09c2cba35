"""Reliability class 19: secrets echoed in escaped forms.

A server, proxy or serializer may echo a key with any of its characters escaped, and only some
of them: JSON ``\\uXXXX`` (either case, surrogate pairs) or short escapes, HTML numeric entities
(decimal or hex, leading zeros, with or without ``;``) or named ones, percent-encoding of any
subset of its UTF-8 bytes (either case, ``%`` re-encoded as ``%25``), or base64 at any byte offset
with its ``+``, ``/`` and ``=`` escaped. Property tests over generated keys and encodings check
that ``scrub`` removes every such form, using the standard library's own decoders as the oracle
(what a reader of the scrubbed text could decode back).
"""

from __future__ import annotations

import base64
import html
import html.entities
import json
import re
import urllib.parse

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.backends.hosted.scrub import REDACTED, scrub

# Keys: printable ASCII (the characters escaping is for: quotes, slashes, %, &, <, +, =, ...) and a
# few non-ASCII letters, one outside the BMP; never the context markers « and ».
KEY_CHARS = st.sampled_from(list("abcXYZ0189-_.~:/+=%&#;<>\"'\\?@!$()*,[]{}|^`") + ["é", "ß", "€", "中", "𝄞"])
KEYS = st.lists(KEY_CHARS, min_size=10, max_size=24).map("".join)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _hex(value: int, width: int, upper: bool) -> str:
    text = format(value, f"0{width}x")
    return text.upper() if upper else text


def _named(c: str) -> list[str]:
    return [n for n, v in html.entities.html5.items() if v == c and n.endswith(";")]


def _forms(c: str) -> list[str]:
    """Every way one character may be written by a JSON, JS, Python, HTML or URL encoder."""
    cp = ord(c)
    out = [c]
    for upper in (False, True):
        out.append("".join("%" + _hex(b, 2, upper) for b in c.encode("utf-8")))
        out.append("".join("%25" + _hex(b, 2, upper) for b in c.encode("utf-8")))  # encoded twice
        if cp <= 0xFFFF:
            out.append("\\u" + _hex(cp, 4, upper))
        else:
            hi, lo = 0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF)
            out.append("\\u" + _hex(hi, 4, upper) + "\\u" + _hex(lo, 4, upper))
        out.append("\\u{" + _hex(cp, 1, upper) + "}")
        out.append("&#x" + _hex(cp, 1, upper) + ";")
        out.append("&#X" + _hex(cp, 4, upper) + ";")
    out += [f"&#{cp};", f"&#000{cp};", f"&#{cp}", "\\U" + _hex(cp, 8, False)]
    if cp <= 0xFF:
        out.append("\\x" + _hex(cp, 2, False))
    short = {'"': '\\"', "\\": "\\\\", "/": "\\/", "'": "\\'"}
    if c in short:
        out.append(short[c])
    out += ["&" + n for n in _named(c)]
    return out


@given(key=KEYS, data=st.data())
@SETTINGS
def test_any_mix_of_escaped_characters_is_scrubbed(key: str, data: st.DataObject) -> None:
    """Each character of the key in its own, independently drawn form (partial escaping included)."""
    echoed = "".join(data.draw(st.sampled_from(_forms(c))) for c in key)
    text = f"error: «{echoed}» was rejected"
    out = scrub(text, extra=[key])
    assert out == f"error: «{REDACTED}» was rejected", (echoed, out)


@given(key=KEYS, data=st.data(), ascii_only=st.booleans())
@SETTINGS
def test_json_escaping_of_any_subset_decodes_to_no_key(key: str, data: st.DataObject, ascii_only: bool) -> None:
    """A JSON body from a real encoder, then any subset of the key's characters rewritten as \\uXXXX (still valid JSON)."""
    body = json.dumps({"detail": f"invalid key {key}", "echo": key}, ensure_ascii=ascii_only)
    escape = data.draw(st.lists(st.booleans(), min_size=len(body), max_size=len(body)))
    upper = data.draw(st.booleans())
    # \uXXXX for any BMP character outside an existing escape sequence
    rewritten, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            m = re.match(r"\\(u[0-9a-fA-F]{4}|.)", body[i:])
            assert m is not None
            rewritten.append(m.group(0))
            i += len(m.group(0))
            continue
        rewritten.append("\\u" + _hex(ord(ch), 4, upper) if escape[i] and ch not in '{}":, ' and ord(ch) <= 0xFFFF else ch)
        i += 1
    text = "".join(rewritten)
    assert json.loads(text)["echo"] == key
    out = json.loads(scrub(text, extra=[key]))
    assert key not in out["echo"] and key not in out["detail"] and REDACTED in out["echo"]


@given(key=KEYS, data=st.data())
@SETTINGS
def test_html_entities_of_any_subset_decode_to_no_key(key: str, data: st.DataObject) -> None:
    def one(c: str) -> str:
        return data.draw(
            st.sampled_from(
                [
                    c if c not in "&<>\"'" else html.escape(c),
                    f"&#{ord(c)};",
                    f"&#x{ord(c):X};",
                    f"&#x{ord(c):x};",
                    f"&#00{ord(c)};",
                    *(["&" + n for n in _named(c)][:3]),
                ]
            )
        )

    text = "<p>The key " + "".join(one(c) for c in key) + " is not valid.</p>"
    assert key in html.unescape(text)
    out = scrub(text, extra=[key])
    assert key not in html.unescape(out) and REDACTED in out


@given(key=KEYS, data=st.data())
@SETTINGS
def test_percent_encoding_of_any_subset_decodes_to_no_key(key: str, data: st.DataObject) -> None:
    upper = data.draw(st.booleans())
    encoded = "".join(
        "".join("%" + _hex(b, 2, upper) for b in c.encode("utf-8")) if data.draw(st.booleans()) or c in "%&=?#+ " else c for c in key
    )
    url = f"https://api.example.com/v1/listen?model=x&key={encoded}&lang=en"
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["key"] == [key]
    out = scrub(url, extra=[key])
    assert key not in urllib.parse.unquote(out) and key not in urllib.parse.unquote_plus(out) and REDACTED in out


B64_TOKEN = re.compile(r"[A-Za-z0-9+/=_-]+")


def _decodes_to(token: str, secret: bytes) -> bool:
    """Does any alignment of this base64 token decode to bytes that hold ``secret``?"""
    std = token.replace("-", "+").replace("_", "/").rstrip("=")
    for skip in range(4):
        part = std[skip:]
        part = part[: len(part) - len(part) % 4] if len(part) % 4 == 1 else part
        try:
            raw = base64.b64decode(part + "=" * (-len(part) % 4))
        except ValueError:
            continue
        if secret in raw:
            return True
    return False


@given(
    key=KEYS,
    before=st.binary(max_size=5),
    after=st.binary(max_size=5),
    urlsafe=st.booleans(),
    pad=st.booleans(),
    escape=st.sampled_from(["none", "json-slash", "percent", "unicode"]),
)
@SETTINGS
def test_base64_at_any_offset_with_its_symbols_escaped(
    key: str, before: bytes, after: bytes, urlsafe: bool, pad: bool, escape: str
) -> None:
    raw = before + key.encode("utf-8") + after
    token = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(raw).decode()
    token = token if pad else token.rstrip("=")
    if escape == "json-slash":
        shown = token.replace("/", "\\/")
    elif escape == "percent":
        shown = token.replace("+", "%2B").replace("/", "%2f").replace("=", "%3D")
    elif escape == "unicode":
        shown = token.replace("+", "\\u002B").replace("/", "\\u002f").replace("=", "\\u003d")
    else:
        shown = token
    out = scrub(f'{{"authorization": "Basic {shown}"}}', extra=[key])
    plain = out
    if escape != "none":  # undo the escaping of the token's symbols
        plain = re.sub(r"\\u00([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), urllib.parse.unquote(out).replace("\\/", "/"))
    assert not any(_decodes_to(t, key.encode("utf-8")) for t in B64_TOKEN.findall(plain)), (shown, out)
    assert REDACTED in out
