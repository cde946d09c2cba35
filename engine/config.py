"""Safe YAML loading, and the key check of mappings whose keys are data (unknown keys are errors).

Options are declared and checked by the typed option layer (engine/options.py)."""

from __future__ import annotations

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
#: The only node types a configuration file may hold: plain data (strings, numbers, booleans,
#: null, lists, mappings). Everything else YAML can build (timestamps, binary, sets, ordered
#: pairs, merge keys) is refused with the file and line: none is a setting, and several change
#: what a key means without saying so.
PLAIN_TAGS = frozenset("tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "seq", "map"))


class _PlainDataLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses what is not plain data, and duplicate keys at any depth.

    A mapping that names one key twice is an error naming both lines (YAML itself keeps the last
    one silently, so a recipe with ``models:`` twice would run the second list). Merge keys
    (``<<: *base``) are refused: they override keys silently too. Anchors and aliases are kept
    (a list written once and reused is plain data; ``check_expansion`` bounds what they expand to).
    """

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        if node.tag not in PLAIN_TAGS:
            prefix = "tag:yaml.org,2002:"
            kind = node.tag[len(prefix) :] if node.tag.startswith(prefix) else node.tag
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"a {kind!r} value is not plain data (only strings, numbers, booleans, null, lists and mappings are "
                "accepted); quote it to make it a string",
                node.start_mark,
            )
        return super().construct_object(node, deep)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:  # type: ignore[override]
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    "merge keys ('<<') are not accepted: they override keys without saying so; write the keys out",
                    key_node.start_mark,
                )
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, f"a mapping key must be a plain value, not {type(key).__name__}", key_node.start_mark
                ) from None
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} appears twice in one mapping (first at line {first}); YAML would keep only the last one "
                    "silently: remove or rename one",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)  # type: ignore[no-any-return]


def _load_plain(stream: Any) -> Any:
    """One document through ``_PlainDataLoader`` (a ``yaml.SafeLoader``)."""
    loader = _PlainDataLoader(stream)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()  # type: ignore[no-untyped-call]


def parse_yaml(text: str, where: str) -> Any:
    """A YAML document held in memory, through the same rules as ``load_yaml`` (``where`` names it in errors)."""
    try:
        data = _load_plain(text)
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_message(exc, where)) from None
    check_expansion(data, where)
    return data


def _yaml_message(exc: yaml.YAMLError, where: str) -> str:
    mark = getattr(exc, "problem_mark", None)
    at = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc)
    return f"{where}{at}: invalid YAML: {problem}"


def load_yaml(path: Path) -> Any:
    """The one YAML loader of every configuration file (recipes, condition maps, model registries,
    judge prompts, pipeline configs): plain data only, no duplicate key at any depth, bounded file
    size and bounded alias expansion; errors name the file and line (``_PlainDataLoader``)."""
    try:
        size = Path(path).stat().st_size
        if size > MAX_YAML_BYTES:
            raise ConfigError(f"{path}: {size} bytes is larger than the {MAX_YAML_BYTES}-byte limit for a configuration file")
        with open(path, encoding="utf-8") as fh:
            data = _load_plain(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a YAML file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid UTF-8 text (byte {exc.start}); save the file as UTF-8") from None
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_message(exc, str(path))) from None
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
            raise ConfigError(
                f"{where}: YAML expands to more than {limit} values (nested aliases?); write the values out or simplify the file"
            )
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
