"""What the commands print on stdout, for people and for programs.

* ``--format table|json|csv`` (:func:`emit`): a rich table for a terminal, or the same rows as a JSON
  array of objects (typed values: numbers, booleans, lists, null) or CSV with a header (lists joined
  with ``,``), so a listing or a result can go straight into ``jq``, a spreadsheet or a script;
* :func:`stdout_console`: when stdout is not a terminal (a pipe, a log file, CI), tables keep their
  full width instead of being squeezed to 80 columns (rich's default there), so no name is cut.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from engine.errors import ConfigError

FORMATS = ("table", "json", "csv")
#: Width of a table printed to a pipe or file: wide enough for any row, so none is wrapped or cut.
PIPE_WIDTH = 100_000


def stdout_console() -> Console:
    """A console on stdout; not a terminal (and no ``COLUMNS`` set by the user): unlimited width."""
    console = Console()
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console = Console(width=PIPE_WIDTH)
    return console


def check_format(fmt: str, option: str = "--format") -> str:
    """``fmt`` if it is one of :data:`FORMATS`, else a ``ConfigError`` naming them."""
    if fmt not in FORMATS:
        raise ConfigError(f"{option} must be one of {', '.join(FORMATS)}, not {fmt!r}")
    return fmt


def _plain(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    return v


def _cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


def render(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], fmt: str) -> str:
    """``rows`` (only ``columns``, in that order) as JSON or CSV text."""
    picked = [{c: _plain(r.get(c)) for c in columns} for r in rows]
    if fmt == "json":
        return json.dumps(picked, indent=1, ensure_ascii=False) + "\n"
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in picked:
        w.writerow(["" if r[c] is None else ",".join(map(str, r[c])) if isinstance(r[c], list) else r[c] for c in columns])
    return buf.getvalue()


def emit(
    console: Console,
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    fmt: str,
    title: str | None = None,
    styles: Mapping[str, Any] | None = None,
) -> None:
    """Print ``rows`` as a table (``title`` above it; ``styles``: column -> ``f(value) -> rich markup``), JSON or CSV."""
    if fmt != "table":
        console.print(render(rows, columns, fmt), end="", markup=False, highlight=False, soft_wrap=True)
        return
    t = Table(title=escape(title) if title else None)
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*((styles[c](r.get(c)) if styles and c in styles else escape(_cell(r.get(c)))) for c in columns))
    console.print(t)


__all__ = ["FORMATS", "PIPE_WIDTH", "check_format", "emit", "render", "stdout_console"]
