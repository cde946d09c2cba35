"""scripts/wrap_long_lines.py: long lines get line breaks only, in the project's wrapping style."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from wrap_long_lines import long_lines, main, wrap_source  # noqa: E402

LIMIT = 60


def test_breaks_after_a_top_level_comma_and_keeps_the_tree() -> None:
    src = 'def f(a: dict[str, int], b: int) -> None:\n    result = some_function(first_argument, second_argument, third_argument, fourth)\n'
    out = wrap_source(src, LIMIT)
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(src))
    assert not long_lines(out, LIMIT)
    assert out.splitlines()[1:] == [
        "    result = some_function(first_argument, second_argument,",
        "        third_argument, fourth)",
    ]


def test_never_breaks_inside_a_subscript_or_a_comprehension_target() -> None:
    src = "x = {k: v for k, v in pairs_with_a_long_name}\ny: dict[str, int] = call_it(alpha, beta)\n"
    out = wrap_source(src, 40)
    assert "for k, v in" in out and "dict[str, int]" in out
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(src))


def test_splits_a_long_string_in_brackets_into_adjacent_literals() -> None:
    src = 'log(f"the value {x} is larger than the other value {y} by a lot")\n'
    out = wrap_source(src, 50)
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(src))
    first, second = out.splitlines()
    assert first.endswith('"') and second.lstrip().startswith('f"') and len(first) <= 50


def test_noqa_lines_stay_and_unwrappable_lines_are_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    keep = 'x = "' + "a" * 80 + '"  # noqa: E501\n'
    stuck = 'y = "' + "b" * 80 + '"\n'
    f = tmp_path / "m.py"
    f.write_text(keep + stuck, encoding="utf-8")
    assert main([str(f), "--limit", str(LIMIT)]) == 1
    assert f.read_text(encoding="utf-8") == keep + stuck
    assert "m.py:2: still over 60 characters" in caplog.text
