"""The typed option layer (engine/options.py) and the docs' option tables it generates (scripts/options_doc.py)."""

from __future__ import annotations

import importlib.util
import math
import sys
from dataclasses import FrozenInstanceError, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import pytest

from engine.errors import ConfigError
from engine.options import Options, option, replace_block, table

ROOT = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_options_doc", ROOT / "scripts" / "options_doc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


def test_the_option_tables_in_the_docs_are_the_ones_the_declarations_make() -> None:
    stale = _script().stale(ROOT)
    assert not stale, f"stale option tables in {[str(p.relative_to(ROOT)) for p in stale]}: run python scripts/options_doc.py"


def test_every_declared_builtin_backend_has_its_table() -> None:
    from engine.backends import ASR_BACKENDS

    page = (ROOT / "docs" / "options.md").read_text(encoding="utf-8")
    for name in ("faster-whisper", "memorizer", "fault-inject"):
        cls: Any = ASR_BACKENDS.get(name)
        assert cls.OPTIONS is not None and f"## ASR: `{name}`" in page


def test_a_block_without_its_marker_is_named() -> None:
    with pytest.raises(ConfigError, match="x.md: no '<!-- options-table: speed -->' marker"):
        replace_block("no markers here", "speed", "| a |\n", "x.md")
    text = "a\n<!-- options-table: speed -->\nold\n<!-- /options-table -->\nb"
    assert replace_block(text, "speed", "new\n", "x.md") == "a\n<!-- options-table: speed -->\nnew\n<!-- /options-table -->\nb"


@dataclass(frozen=True)
class _Demo(Options):
    """A record for the tests."""

    name: str = option(doc="what to call it")
    count: int = option(2, "how many", ge=1, le=10)
    rate: float | None = option(None, "how fast", gt=0)
    mode: Literal["fast", "slow"] = option("fast", "which way")
    on: bool = option(False, "whether it runs")
    extra: dict[str, Any] | None = option(None, "anything else")


def test_a_record_is_frozen_typed_and_filled_with_defaults() -> None:
    rec = _Demo.parse({"name": "a", "rate": 2}, "r.yaml: demo")
    assert (rec.name, rec.count, rec.rate, rec.mode, rec.on) == ("a", 2, 2.0, "fast", False)
    assert isinstance(rec.rate, float)
    with pytest.raises(FrozenInstanceError):
        rec.count = 3  # type: ignore[misc]
    assert table(_Demo.doc_rows()).splitlines()[2] == "| `name` | text | required | — | what to call it |"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"name": "a", "on": "false"}, "r.yaml: demo.on: expected a boolean"),
        ({"name": "a", "on": 0}, "r.yaml: demo.on: expected a boolean"),
        ({"name": "a", "count": "3"}, "r.yaml: demo.count: expected an integer"),
        ({"name": "a", "count": 2.0}, "r.yaml: demo.count: expected an integer"),
        ({"name": "a", "count": 11}, "r.yaml: demo.count: 11 is out of range; it must be >= 1 and <= 10"),
        ({"name": "a", "rate": math.nan}, "r.yaml: demo.rate: expected a finite number"),
        ({"name": "a", "extra": {"k": [1.0, math.inf]}}, r"r.yaml: demo.extra.k\[1\]: expected a finite number"),
        ({"name": "a", "mode": "fats"}, "r.yaml: demo.mode: 'fats' is not allowed \\(did you mean 'fast'\\?\\)"),
        ({"name": "a", "cuont": 3}, "r.yaml: demo: unknown key 'cuont' \\(did you mean 'count'\\?\\)"),
        ({"count": 3}, "r.yaml: demo: missing required key 'name' \\(what to call it\\)"),
    ],
)
def test_a_bad_value_is_refused_naming_the_key(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _Demo.parse(raw, "r.yaml: demo")
