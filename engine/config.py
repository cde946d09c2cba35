"""Safe YAML loading and strict validation into typed records (unknown keys are errors)."""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path
from typing import Any, Mapping

import yaml

from engine.errors import ConfigError

#: A recipe or registry file larger than this is refused (real ones are a few KB).
MAX_YAML_BYTES = 1 << 20
#: Values a YAML document may expand to once aliases are followed (an alias "bomb" of a few
#: hundred bytes expands to millions, which would then be copied into summary.json).
MAX_YAML_VALUES = 100_000


def load_yaml(path: Path) -> Any:
    """``yaml.safe_load`` only (tags that would construct Python objects are rejected), with
    bounded file size and bounded alias expansion; errors name the file."""
    try:
        size = Path(path).stat().st_size
        if size > MAX_YAML_BYTES:
            raise ConfigError(f"{path}: {size} bytes is larger than the {MAX_YAML_BYTES}-byte limit for a configuration file")
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a YAML file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid UTF-8 text (byte {exc.start}); save the file as UTF-8") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}{where}: invalid YAML: {problem}") from None
    check_expansion(data, str(path))
    return data


def check_expansion(data: Any, where: str, limit: int = MAX_YAML_VALUES) -> None:
    """Refuse documents whose aliases expand to more than ``limit`` values (shared nodes count once per use)."""
    count = 0
    stack = [data]
    while stack:
        node = stack.pop()
        count += 1
        if count > limit:
            raise ConfigError(f"{where}: YAML expands to more than {limit} values (nested aliases?); write the values out or simplify the file")
        if isinstance(node, dict):
            stack.extend(node.values())
            stack.extend(node.keys())
        elif isinstance(node, list):
            stack.extend(node)


def check_keys(data: Mapping[str, Any], allowed: set[str], where: str, required: set[str] = frozenset()) -> None:  # type: ignore[assignment]
    """Reject unknown keys (with a 'did you mean') and report missing required ones."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    for key in data:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"{where}: unknown key '{key}'{hint}; allowed: {', '.join(sorted(allowed))}")
    for key in required:
        if key not in data:
            raise ConfigError(f"{where}: missing required key '{key}'")


def dataclass_keys(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def expect_type(value: Any, types: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,))):
        names = types.__name__ if isinstance(types, type) else " or ".join(t.__name__ for t in types)
        raise ConfigError(f"{where}: expected {names}, got {type(value).__name__} ({value!r})")
    return value
