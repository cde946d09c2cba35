"""Condition maps: shipped YAML files that map a dataset's label vocabulary onto the study's groups.

A map file (``conditions/*.yaml`` of the configuration tree) names its ``outputs`` (new label columns, e.g.
``circle`` and ``nativeness``), the values each output may take (``allowed``), its ``sources``
(citations) and ``values``: one entry per label value with its outputs, the key of the source the
assignment comes from, and aliases. ``patterns`` (regular expressions) cover tags with a level.

Matching normalizes a value (lower case; every run of other characters becomes one ``-``) and
tries, in order: an entry name or alias, a pattern, and with ``prefix_fallback`` the value
without its last ``-part`` (locale tags). Values that match nothing are returned as unmapped and
reported, never dropped silently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.config import check_keys, load_yaml
from engine.config_tree import config_folder, display_path
from engine.errors import ConfigError
from engine.options import Options, check_value, option

META_KEYS = {"source", "note", "aliases"}


def normalize_value(value: Any) -> str:
    """The matching form of a label value: lower case, runs of non-alphanumerics as one '-'."""
    return re.sub(r"[^0-9a-z]+", "-", str(value).strip().lower()).strip("-")


@dataclass(frozen=True)
class Assignment:
    """The outputs one label value maps to, and where that assignment comes from."""

    outputs: Mapping[str, str]
    source: str
    entry: str
    note: str = ""


@dataclass(frozen=True)
class ConditionMap:
    """One loaded map file (plus any recipe overrides), ready to apply to a label column."""

    name: str
    path: str
    outputs: tuple[str, ...]
    allowed: Mapping[str, tuple[str, ...]]
    sources: Mapping[str, str]
    table: Mapping[str, Assignment]
    patterns: tuple[tuple[re.Pattern[str], Assignment], ...] = ()
    prefix_fallback: bool = False
    description: str = ""
    entries: Mapping[str, Assignment] = field(default_factory=dict)

    def lookup(self, value: Any) -> tuple[Assignment, str] | None:
        """``(assignment, how)`` for a label value (how: exact, pattern or prefix:<key>), or None."""
        key = normalize_value(value)
        if not key:
            return None
        if key in self.table:
            return self.table[key], "exact"
        for rx, a in self.patterns:
            if rx.fullmatch(key):
                return a, "pattern"
        if self.prefix_fallback:
            parts = key.split("-")
            for n in range(len(parts) - 1, 0, -1):
                cand = "-".join(parts[:n])
                if cand in self.table:
                    return self.table[cand], f"prefix:{cand}"
        return None


def _str(value: Any, where: str) -> str:
    return check_value(str, value, where)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class MapFile(Options):
    """A condition map file's top-level keys (``conditions/*.yaml``); each entry's keys are the file's outputs."""

    name: str = option(doc="the map's name in reports")
    description: str = option("", "what the map is for", doc_default='""')
    outputs: tuple[str, ...] = option(doc="the label columns the map writes")
    allowed: dict[str, tuple[str, ...]] = option(doc="output -> the values it may take")
    prefix_fallback: bool = option(False, "match a value without its last '-part' (locale tags)")
    sources: dict[str, str] = option(doc="source key -> citation")
    values: dict[str, dict[str, Any]] = option(doc="label value -> {output: value, ..., source, note, aliases}")
    patterns: tuple[dict[str, Any], ...] = option((), "{regex, output: value, ..., source, note} for tags with a level", null_default=True)


FILE_KEYS = set(MapFile.declared())


def _assignment(
    entry: str,
    raw: Any,
    outputs: Sequence[str],
    allowed: Mapping[str, Sequence[str]],
    sources: Mapping[str, str],
    where: str,
    extra_keys: set[str] = frozenset(),  # type: ignore[assignment]
) -> Assignment:
    data = check_value(dict[str, Any], raw, where)
    check_keys(data, set(outputs) | META_KEYS | extra_keys, where, required=set(outputs) | {"source"})
    source = _str(data["source"], f"{where}.source")
    if source not in sources:
        raise ConfigError(f"{where}.source: '{source}' is not a key of the file's sources ({', '.join(sources)})")
    outs: dict[str, str] = {}
    for o in outputs:
        v = _str(data[o], f"{where}.{o}")
        if v not in allowed[o]:
            raise ConfigError(f"{where}.{o}: '{v}' is not allowed (allowed: {', '.join(allowed[o])})")
        outs[o] = v
    note = _str(data.get("note", ""), f"{where}.note")
    return Assignment(outs, source, entry, note)


def load_map_file(path: Path) -> dict[str, Any]:
    """The raw mapping of a map file (its keys are checked by ``parse_map``)."""
    return check_value(dict[str, Any], load_yaml(path), str(path))  # type: ignore[no-any-return]


def _unique(items: Sequence[str], where: str, normalize: Any = None) -> None:
    """Refuse a list that names one value twice (after ``normalize``): the second would be silently redundant or contradictory."""
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        key = normalize(item) if normalize else item
        if key in seen:
            same = f" (as '{key}')" if key != item else ""
            raise ConfigError(f"{where}[{i}]: '{item}'{same} is listed twice (first at {where}[{seen[key]}]); list each value once")
        seen[key] = i


def parse_map(data: Mapping[str, Any], where: str, overrides: Mapping[str, Any] | None = None, override_where: str = "") -> ConditionMap:
    """Validate a map file's mapping (``where`` names the file) and add a recipe's ``overrides``.

    Overrides are ``value: {output: ..., ...}`` entries; their source is the recipe itself. A
    list that names one value twice (an output, an allowed value, an alias, also when two
    aliases normalize to one value or an alias repeats its entry's name) is refused, as a key
    written twice is by the YAML loader.
    """
    f = MapFile.parse(data, where)
    outputs = f.outputs
    if not outputs:
        raise ConfigError(f"{where}.outputs: list at least one output column")
    _unique(outputs, f"{where}.outputs")
    allowed: dict[str, tuple[str, ...]] = {}
    for o in outputs:
        if o not in f.allowed:
            raise ConfigError(f"{where}.allowed: missing the values of output '{o}'")
        allowed[o] = f.allowed[o]
        _unique(allowed[o], f"{where}.allowed.{o}")
    sources = {str(k): v for k, v in f.sources.items()}
    table: dict[str, Assignment] = {}
    entries: dict[str, Assignment] = {}
    owner: dict[str, str] = {}

    def add(key_raw: Any, a: Assignment, w: str, replace: bool = False) -> None:
        key = normalize_value(key_raw)
        if not key:
            raise ConfigError(f"{w}: '{key_raw}' is empty once normalized")
        if key in owner and owner[key] != a.entry and not replace:
            raise ConfigError(f"{w}: '{key_raw}' (as '{key}') is already an alias of '{owner[key]}'; each value may map one way only")
        table[key] = a
        owner[key] = a.entry

    for entry, raw in f.values.items():
        w = f"{where}.values.{entry}"
        a = _assignment(str(entry), raw, outputs, allowed, sources, w)
        entries[str(entry)] = a
        add(entry, a, w)
        aliases = list(check_value(tuple[str, ...], raw.get("aliases", []), f"{w}.aliases"))
        _unique(aliases, f"{w}.aliases", normalize_value)
        for i, alias in enumerate(aliases):
            if normalize_value(alias) == normalize_value(entry):
                raise ConfigError(
                    f"{w}.aliases[{i}]: '{alias}' is the entry's own name once normalized ('{normalize_value(entry)}'); "
                    "list each value once"
                )
            add(alias, a, f"{w}.aliases[{i}]")
    patterns: list[tuple[re.Pattern[str], Assignment]] = []
    for i, pdata in enumerate(f.patterns):
        w = f"{where}.patterns[{i}]"
        rx_text = _str(pdata.get("regex"), f"{w}.regex")
        try:
            rx = re.compile(rx_text)
        except re.error as exc:
            raise ConfigError(f"{w}.regex: invalid regular expression: {exc}") from None
        body = {k: v for k, v in pdata.items() if k != "regex"}
        patterns.append((rx, _assignment(f"pattern {rx_text}", body, outputs, allowed, sources, w)))
    if overrides:
        sources = {**sources, "recipe": f"assigned in the recipe ({override_where or 'values'})"}
        for entry, raw in overrides.items():
            w = f"{override_where}.{entry}"
            body = dict(check_value(dict[str, Any], raw, w))
            body.setdefault("source", "recipe")
            a = _assignment(str(entry), body, outputs, allowed, sources, w)
            add(entry, a, w, replace=True)
            entries[str(entry)] = a
    return ConditionMap(
        name=f.name,
        path=where,
        outputs=outputs,
        allowed=allowed,
        sources=sources,
        table=table,
        patterns=tuple(patterns),
        prefix_fallback=f.prefix_fallback,
        description=f.description,
        entries=entries,
    )


def shipped_maps() -> list[str]:
    """Names of the map files in ``conditions/`` of the configuration tree."""
    return sorted(p.stem for p in conditions_dir().glob("*.yaml"))


def conditions_dir() -> Path:
    """The shipped maps' folder: ``conditions/`` of the configuration tree in use (engine/config_tree.py)."""
    return config_folder("conditions")


def resolve_map_path(name: str, where: str, recipe_source: str = "") -> Path:
    """A shipped map by name, or a path (relative to the recipe's folder when it exists there)."""
    if "/" not in name and not name.endswith((".yaml", ".yml")):
        p = conditions_dir() / f"{name}.yaml"
        if not p.is_file():
            raise ConfigError(
                f"{where}: no shipped condition map '{name}' (shipped: {', '.join(shipped_maps())}); or give a path to a YAML file"
            )
        return p
    p = Path(name).expanduser()
    if not p.is_absolute() and recipe_source and (Path(recipe_source).parent / p).exists():
        p = Path(recipe_source).parent / p
    if not p.is_file():
        raise ConfigError(f"{where}: condition map file {p} does not exist")
    return p


def load_map(name: str, where: str, recipe_source: str = "", overrides: Mapping[str, Any] | None = None) -> ConditionMap:
    """Load and validate a map (shipped name or path) with a recipe's value overrides."""
    path = resolve_map_path(name, where, recipe_source)
    return parse_map(load_map_file(path), display_path(path), overrides, f"{where}.values")
