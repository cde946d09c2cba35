"""Wrap Python lines longer than the line limit by inserting line breaks only (ruff's E501 rule).

The project wraps long lines by hand, after a comma inside brackets, with the continuation four
spaces in; a long string literal inside brackets is split into two adjacent literals at a space
(or after ``>``, ``;`` or ``,``). This tool does the same so that a merged branch whose lines
are over the limit can be brought in line without reformatting anything else:

* only lines over the limit change (lines carrying ``noqa`` are left alone);
* a comma is never chosen inside a subscript (``dict[str, Any]``) or a comprehension's target;
* every file's syntax tree is compared before and after (adjacent literals join into the same
  constant), and a file whose tree would change is left untouched and reported.

Lines it cannot wrap (a single long replacement field of an f-string, a long docstring line)
are listed for a person to wrap or mark with ``# noqa: E501``.

    python scripts/wrap_long_lines.py engine audits normalizers scripts tests --limit 160
"""

from __future__ import annotations

import argparse
import ast
import io
import logging
import re
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("wrap_long_lines")

_STRING_OPEN = re.compile(r"^([rRbBuUfF]*)('''|\"\"\"|'|\")")
_NOT_SUBSCRIPT_BEFORE = {"in", "return", "and", "or", "not", "if", "else", "yield", "await", "lambda", "is"}


@dataclass
class _Scan:
    """Per line: commas that may break it, one-line strings, bracket depth at its start."""

    commas: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    strings: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)
    start_depth: dict[int, int] = field(default_factory=dict)
    in_multiline_string: set[int] = field(default_factory=set)


def _scan(src: str) -> _Scan:
    out = _Scan()
    depth = 0
    stack: list[tuple[bool, bool]] = []  # per open bracket: (is a subscript, inside a comprehension target)
    prev: tokenize.TokenInfo | None = None
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        row = tok.start[0]
        out.start_depth.setdefault(row, depth)
        if tok.type == tokenize.STRING:
            if tok.end[0] != row:
                out.in_multiline_string.update(range(row, tok.end[0] + 1))
            else:
                out.strings.setdefault(row, []).append((tok.start[1], tok.end[1], depth))
        elif tok.type == tokenize.NAME and stack and tok.string in ("for", "in"):
            stack[-1] = (stack[-1][0], tok.string == "for")
        elif tok.type == tokenize.OP:
            if tok.string in "([{":
                after_value = prev is not None and (
                    (prev.type == tokenize.NAME and prev.string not in _NOT_SUBSCRIPT_BEFORE) or prev.string in (")", "]")
                )
                stack.append((tok.string == "[" and after_value, False))
                depth += 1
            elif tok.string in ")]}":
                if stack:
                    stack.pop()
                depth -= 1
            elif tok.string == "," and stack and not stack[-1][0] and not stack[-1][1]:
                out.commas.setdefault(row, []).append((tok.start[1], depth))
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            prev = tok
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _split_at_comma(lines: list[str], row: int, scan: _Scan, limit: int) -> bool:
    line = lines[row - 1]
    if row in scan.in_multiline_string:
        return False
    fits = [
        (col, d) for col, d in scan.commas.get(row, [])
        if col + 1 <= limit and line[col + 1 :].strip() and not line[col + 1 :].lstrip().startswith("#")
    ]
    if not fits:
        return False
    shallowest = min(d for _, d in fits)
    col, d = max(cd for cd in fits if cd[1] == shallowest)
    if col < _indent(line) + 20:  # so early a break leaves the rest as long as before
        return False
    cont = _indent(line) + 4 if d > scan.start_depth.get(row, 0) else _indent(line)
    if line.lstrip().startswith(("def ", "async def ")):
        cont += 4  # parameters stand apart from the body
    lines[row - 1 : row] = [line[: col + 1].rstrip(), " " * cont + line[col + 1 :].lstrip()]
    return True


def _cut_point(line: str, body_start: int, end: int, is_format: bool, limit: int) -> int | None:
    """The last place before the limit where the literal may be cut (outside replacement fields and escapes)."""
    brace, best, i = 0, None, body_start
    while i < end - 1 and i < limit - 1:
        ch = line[i]
        if is_format and ch in "{}" and line[i : i + 2] in ("{{", "}}") and brace == 0:
            i += 2
            continue
        if is_format and ch == "{":
            brace += 1
        elif is_format and ch == "}":
            brace -= 1
        elif ch == "\\":
            i += 2
            continue
        elif brace == 0 and ch in " >;," and i > body_start + 10:
            best = i + 1
        i += 1
    return best


def _split_string(lines: list[str], row: int, scan: _Scan, limit: int) -> bool:
    line = lines[row - 1]
    if row in scan.in_multiline_string:
        return False
    for start, end, depth in scan.strings.get(row, []):
        if depth < 1 or start >= limit - 10 or end <= limit:
            continue
        m = _STRING_OPEN.match(line[start:end])
        if not m or len(m.group(2)) == 3:
            continue
        prefix, quote = m.group(1), m.group(2)
        cut = _cut_point(line, start + len(m.group(0)), end, "f" in prefix.lower(), limit)
        if cut is None:
            continue
        lines[row - 1 : row] = [line[:cut] + quote, " " * (_indent(line) + 4) + prefix + quote + line[cut:]]
        return True
    return False


def long_lines(src: str, limit: int) -> list[int]:
    """1-based numbers of the lines over ``limit`` characters that carry no ``noqa``."""
    return [i for i, line in enumerate(src.split("\n"), 1) if len(line) > limit and "noqa" not in line]


def wrap_source(src: str, limit: int) -> str:
    """``src`` with its long lines wrapped where possible; raises ValueError if the syntax tree would change."""
    before = ast.dump(ast.parse(src))
    lines = src.split("\n")
    for _ in range(8):  # a wrapped line may still be long: wrap its rest again
        rows = long_lines("\n".join(lines), limit)
        changed = False
        for row in reversed(rows):  # bottom-up keeps earlier line numbers valid
            scan = _scan("\n".join(lines))
            changed |= _split_at_comma(lines, row, scan, limit) or _split_string(lines, row, scan, limit)
        if not changed:
            break
    out = "\n".join(lines)
    if ast.dump(ast.parse(out)) != before:
        raise ValueError("wrapping would change the syntax tree")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", type=Path, help="Python files or folders")
    parser.add_argument("--limit", type=int, default=160, help="line limit (pyproject.toml's [tool.ruff] line-length)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    files = sorted({f for p in args.paths for f in ([p] if p.is_file() else p.rglob("*.py"))})
    left = 0
    for f in files:
        src = f.read_text(encoding="utf-8")
        if not long_lines(src, args.limit):
            continue
        try:
            new = wrap_source(src, args.limit)
        except ValueError as exc:
            log.error("%s: %s; left as it was", f, exc)
            left += len(long_lines(src, args.limit))
            continue
        if new != src:
            f.write_text(new, encoding="utf-8")
            log.info("wrapped %s", f)
        for row in long_lines(new, args.limit):
            log.warning("%s:%d: still over %d characters; wrap it by hand or mark it '# noqa: E501'", f, row, args.limit)
            left += 1
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
