"""Escaping and number formatting shared by the reports: every value shown passes through here.

Label values, model names and failure reasons come from users' manifests and from backends, so
they are escaped for the format they land in (HTML, or a Markdown table cell), and characters
that can disguise text (NUL, bidirectional overrides such as U+202E) are removed.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")


#: NUL and the Unicode bidirectional controls (embeddings, overrides, isolates, marks).
_INVISIBLE = dict.fromkeys(map(ord, "\x00\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"), None)


def visible(x: Any) -> str:
    """``str(x)`` without NUL and bidirectional controls (None gives '')."""
    return "" if x is None else str(x).translate(_INVISIBLE)


def esc(x: Any) -> str:
    """HTML-escape anything (quotes too, so the result is safe inside attributes)."""
    return html.escape(visible(x), quote=True)


def md(x: Any) -> str:
    """Text for one Markdown table cell or list item: no pipes, line breaks or raw HTML."""
    s = visible(x).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    return " ".join(s.split())


def pct(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{100 * x:.{digits}f}"


def ci_text(ci: Any, digits: int = 1) -> str:
    lo, hi = ci_bounds(ci)
    return "—" if lo is None or hi is None else f"[{100 * lo:.{digits}f}, {100 * hi:.{digits}f}]"


def interval_text(
    entry: Mapping[str, Any], key: str = "ci95", reason_key: str = "not_testable", digits: int = 1, scale: float = 100.0
) -> str:
    """A figure's interval as every report shows it: ``[lo, hi]``, ``not testable (why)`` or ``—``.

    Plain text: the reason names label values from the data, so the caller escapes it for its
    format (``md`` or ``esc``) like any other cell.
    """
    reason = entry.get(reason_key)
    if reason:
        return f"not testable ({visible(reason)})"
    lo, hi = ci_bounds(entry.get(key))
    return "—" if lo is None or hi is None else f"[{scale * lo:.{digits}f}, {scale * hi:.{digits}f}]"


def ci_bounds(ci: Any) -> tuple[float | None, float | None]:
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and ci[0] is not None and ci[1] is not None:
        return float(ci[0]), float(ci[1])
    return None, None


def num_attr(x: Any) -> str:
    """A number for a data attribute: full precision, empty when missing."""
    if x is None:
        return ""
    try:
        f = float(x)
    except (TypeError, ValueError):
        return ""
    return repr(f) if math.isfinite(f) else ""


def attrs(**kv: Any) -> str:
    return "".join(f' data-{k.replace("_", "-")}="{esc(v)}"' for k, v in kv.items())


def json_for_script(obj: Any) -> str:
    """JSON that is safe inside a ``<script>`` element (``<``, ``>``, ``&`` as unicode escapes)."""
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, sort_keys=False)
    text = (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )
    # bidirectional controls and NUL as JSON escapes: the data keeps them, the page's source does not
    return text.translate({c: f"\\u{c:04x}" for c in _INVISIBLE})


def rate_text(x: Any) -> str:
    return "—" if x is None else f"{float(x):.3f}"


def rate_ci_text(ci: Any) -> str:
    lo, hi = ci_bounds(ci)
    return "—" if lo is None else f"[{lo:.3f}, {hi:.3f}]"


def truncate(label: str, n: int = 34) -> str:
    return label if len(label) <= n else label[: n - 1] + "…"


def section_html(sid: str, title: str, body: str, note: str = "") -> str:
    return f'<section id="{esc(sid)}"><h2>{esc(title)}</h2>' + (f'<p class="note">{note}</p>' if note else "") + body + "</section>"


def color_map(models: Sequence[str]) -> dict[str, str]:
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(models)}


def seconds_text(x: Any) -> str:
    return "—" if x is None else f"{float(x):.1f}"
