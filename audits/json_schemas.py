"""JSON Schemas for recipes and ``summary.json``, generated from the code's own declarations.

* the recipe schema from the typed option fields (``engine.options.Field``: type, default, bounds,
  choices, doc) of ``audits.recipes`` (``dataset:``, ``scoring:`` and the top-level numbers) and the
  registered audit sections (one object per section key; each section checks its own keys when a
  run starts, so their inner keys are left open here);
* the summary schema from the ``TypedDict`` contract in ``audits.schema`` (``Summary``: provenance) and
  the ASR section's result records (``audits.asr.results``: ``models`` and ``comparisons``), sections'
  keys open, as sections add their own parts.

``audit schema recipe|summary`` prints one; ``scripts/write_schemas.py`` writes both to
``docs/schemas/``, and ``tests/test_json_schemas.py`` regenerates them and fails when the
published files differ, so the docs always describe the code.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union

from engine.options import Field

DRAFT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_NAMES = ("recipe", "summary")
_JSON_TYPES: dict[type, str] = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


def field_schema(f: Field) -> dict[str, Any]:
    """One option's schema: its type (``null`` too when nullable), bounds, choices, default and doc."""
    kind = _JSON_TYPES.get(f.kind)
    out: dict[str, Any] = {}
    if kind is not None:
        out["type"] = [kind, "null"] if f.nullable or f.null_default else kind
    if f.doc:
        out["description"] = f.doc
    for key, bound in (("minimum", f.ge), ("exclusiveMinimum", f.gt), ("maximum", f.le), ("exclusiveMaximum", f.lt)):
        if bound is not None:
            out[key] = int(bound) if float(bound).is_integer() else bound
    if f.choices:
        out["enum"] = list(f.choices) + ([None] if f.nullable else [])
    try:
        if f.default is not None or f.nullable:
            out["default"] = json.loads(json.dumps(f.default))
    except (TypeError, ValueError):  # a default that is not JSON (none today) is left out rather than misstated
        pass
    return out


def _fields_object(fields: Mapping[str, Field], required: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "object",
        "properties": {k: field_schema(f) for k, f in fields.items()},
        "additionalProperties": False,
    }
    if required:
        out["required"] = list(required)
    return out


def recipe_schema() -> dict[str, Any]:
    """The recipe file's schema (YAML read as JSON): unknown keys are errors, as ``parse_recipe`` has them."""
    from audits.recipes import DATASET_FIELDS, DEFAULT_NORMALIZER, SCORING_FIELDS, TOP_FIELDS
    from audits.sections import ordered

    scoring = _fields_object(SCORING_FIELDS)
    scoring["properties"]["slices"]["items"] = {"type": "string"}
    scoring["properties"]["gaps"]["items"] = {
        "type": "array",
        "prefixItems": [{"type": "string"}] * 3,
        "minItems": 3,
        "maxItems": 3,
        "description": "[label, value_a, value_b]",
    }
    props: dict[str, Any] = {
        "name": {"type": "string", "description": "the recipe's name (default: the file's stem)"},
        "description": {"type": "string"},
        "dataset": {
            "description": "the dataset: a path, or a mapping with the path and reader settings",
            "oneOf": [{"type": "string"}, _fields_object(DATASET_FIELDS, ("path",))],
        },
        "models": {"type": "array", "items": {"type": "string"}, "description": "model registry names (audit list models)"},
        "normalizer": {"type": "string", "default": DEFAULT_NORMALIZER, "description": "text normalizer applied before scoring"},
        **{k: field_schema(f) for k, f in TOP_FIELDS.items()},
        "scoring": scoring,
    }
    for sec in ordered():
        props[sec.key] = {
            "type": ["object", "null"],
            "description": f"{sec.title}: the section's options (checked by the section when a run starts)",
        }
    return {
        "$schema": DRAFT,
        "$id": "recipe.schema.json",
        "title": "audit recipe",
        "type": "object",
        "required": ["dataset", "models"],
        "properties": props,
        "additionalProperties": False,
    }


def _type_schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """A Python annotation as a schema; TypedDicts become ``$defs`` entries."""
    if tp is Any or tp is object:
        return {}
    if tp is type(None):
        return {"type": "null"}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}
            defs[name] = _record_schema(tp, defs)
        return {"$ref": f"#/$defs/{name}"}
    if isinstance(tp, type) and typing.is_typeddict(tp):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # placeholder: recursion stops here
            defs[name] = _typeddict_schema(tp, defs)
        return {"$ref": f"#/$defs/{name}"}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return {"anyOf": [_type_schema(a, defs) for a in args]}
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (list, tuple, typing.Sequence) or tp in (list, tuple):
        return {"type": "array", "items": _type_schema(args[0], defs)} if args else {"type": "array"}
    if origin in (dict, Mapping) or tp is dict:
        return {"type": "object", "additionalProperties": _type_schema(args[1], defs)} if args else {"type": "object"}
    if tp is float:  # JSON has no NaN: a figure the data cannot give is written as null (audits.asr.summary.json_safe)
        return {"type": ["number", "null"]}
    if tp in _JSON_TYPES:
        return {"type": _JSON_TYPES[tp]}
    return {}


def _typeddict_schema(td: Any, defs: dict[str, Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(td)
    out: dict[str, Any] = {"type": "object", "properties": {k: _type_schema(v, defs) for k, v in hints.items()}}
    if td.__doc__ and td.__doc__ is not dict.__doc__:
        out["description"] = " ".join(td.__doc__.split())
    required = sorted(td.__required_keys__)
    if required:
        out["required"] = required
    return out


def _record_schema(cls: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """A frozen result record (``audits/records.py``) as an open object: its declared fields, and any other key
    (a record keeps keys it does not declare)."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.name not in ("extra", "layout")]
    out: dict[str, Any] = {"type": "object", "properties": {n: _type_schema(hints[n], defs) for n in names}}
    if cls.__doc__:
        out["description"] = " ".join(cls.__doc__.split())
    return out


def _referenced(node: Any, found: set[str]) -> None:
    """The ``$defs`` names a schema node refers to, directly or through other definitions' bodies (by the caller)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            found.add(ref.removeprefix("#/$defs/"))
        for v in node.values():
            _referenced(v, found)
    elif isinstance(node, list):
        for v in node:
            _referenced(v, found)


def summary_schema() -> dict[str, Any]:
    """``summary.json``'s schema from ``audits.schema.Summary``; each registered section's key is an object."""
    from audits.asr.results import Comparisons, ModelFigures
    from audits.schema import SCHEMA_VERSION, Summary
    from audits.sections import ordered

    defs: dict[str, Any] = {}
    body = _typeddict_schema(Summary, defs)
    # the ASR section's figures come from its result records, the declarations scoring fills (a new figure there
    # reaches this schema without another file); audits/schema.py types the rest of the file
    records: dict[str, Any] = {}
    body["properties"]["models"] = {"type": "object", "additionalProperties": _type_schema(ModelFigures, records)}
    body["properties"]["comparisons"] = _type_schema(Comparisons, records)
    defs.update(records)
    used: set[str] = set()
    _referenced(body, used)
    while True:  # definitions reached through other definitions
        more: set[str] = set()
        for name in used:
            _referenced(defs.get(name, {}), more)
        if more <= used:
            break
        used |= more
    defs = {k: v for k, v in defs.items() if k in used}
    for sec in ordered():
        body["properties"].setdefault(sec.key, {"type": "object", "description": f"{sec.title} (the section's own part)"})
    body["properties"]["schema_version"] = {"type": "integer", "const": SCHEMA_VERSION}
    body["required"] = ["schema_version", "models"]
    return {
        "$schema": DRAFT,
        "$id": "summary.schema.json",
        "title": f"audit summary.json (schema_version {SCHEMA_VERSION})",
        **body,
        "$defs": dict(sorted(defs.items())),
    }


def schema(name: str) -> dict[str, Any]:
    """``recipe`` or ``summary``."""
    from engine.errors import ConfigError

    if name == "recipe":
        return recipe_schema()
    if name == "summary":
        return summary_schema()
    raise ConfigError(f"unknown schema {name!r}; choose one of {', '.join(SCHEMA_NAMES)}")


def schema_text(name: str) -> str:
    """The schema as published (sorted keys off: the declaration order reads best; 2-space indent, final newline)."""
    return json.dumps(schema(name), indent=2, ensure_ascii=False) + "\n"


__all__ = ["SCHEMA_NAMES", "field_schema", "recipe_schema", "schema", "schema_text", "summary_schema"]
