"""The typed option layer: every backend, recipe section and recipe block declares its options once.

A declaration is a frozen dataclass deriving from :class:`Options` whose fields are made with
:func:`option`: the annotation is the type (``int``, ``float | None``, ``Literal["a", "b"]``,
``tuple[str, ...]``, ``dict[str, Any]``, another ``Options`` record), the call gives the default,
the allowed range and one line of documentation. ``Record.parse(mapping, where)`` checks a
mapping read from YAML (or built from command-line flags) against the declaration and returns
the frozen record, so code reads ``options.beam_size`` and never casts a dict value.

The rules are the same on every surface: booleans only from booleans (a quoted ``"false"`` is
refused, never read as true), integers only from integers, numbers only from numbers (a string
``"30"`` is refused), every number finite (NaN and infinities are refused at any depth, inside
lists and mappings too) and within the declared range, unknown keys refused with a "did you
mean". Each refusal names ``where`` (the file and block) and the key, and says what is allowed.

The documentation tables of options (docs/options.md and the tables in docs/datasets.md,
docs/loaders.md, docs/profiles.md) are generated from the same declarations
(:meth:`Options.doc_rows`, scripts/options_doc.py), and a test holds them equal.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, TypeVar, Union

from engine.errors import ConfigError

_REQUIRED: Any = type("_Required", (), {"__repr__": lambda self: "<required>"})()
"""The default of an option that has none: :meth:`Options.parse` refuses a mapping that leaves it out."""

_KIND_WORDS = {
    bool: "a boolean (true/false, unquoted)",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "a mapping",
}
_DOC_KIND = {bool: "boolean", int: "integer", float: "number", str: "text", list: "list", dict: "mapping"}


def _num(x: float) -> str:
    """A bound as written in messages: whole numbers without exponent or decimals."""
    if isinstance(x, int):
        return str(x)
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def _range_text(ge: float | None, gt: float | None, le: float | None, lt: float | None, choices: tuple[Any, ...] = ()) -> str:
    parts = []
    if ge is not None:
        parts.append(f">= {_num(ge)}")
    if gt is not None:
        parts.append(f"> {_num(gt)}")
    if le is not None:
        parts.append(f"<= {_num(le)}")
    if lt is not None:
        parts.append(f"< {_num(lt)}")
    if choices:
        parts.append("one of " + ", ".join(str(c) for c in choices))
    return " and ".join(parts)


def check_number(
    value: Any,
    where: str,
    *,
    integer: bool = False,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
) -> Any:
    """A finite number (an integer when ``integer``) within the bounds; booleans and strings are refused.

    The rule behind every numeric :class:`Field`; ``--n-boot -1`` and ``n_boot: -1`` get the same message.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        want = "an integer" if integer else "a number"
        raise ConfigError(f"{where}: expected {want}, got {type(value).__name__} {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: expected a finite number, got {value!r}")
    bad = (
        (ge is not None and value < ge)
        or (gt is not None and value <= gt)
        or (le is not None and value > le)
        or (lt is not None and value >= lt)
    )
    if bad:
        raise ConfigError(f"{where}: {value!r} is out of range; it must be {_range_text(ge, gt, le, lt)}")
    return value


def _non_finite(value: Any, where: str) -> tuple[str, Any] | None:
    """``(path, value)`` of the first NaN or infinity inside ``value`` (nested mappings and lists included), else None."""
    if isinstance(value, float) and not math.isfinite(value):  # numpy's float64 is a float too
        return where, value
    if isinstance(value, Mapping):
        for k, v in value.items():
            found = _non_finite(v, f"{where}.{k}")
            if found is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _non_finite(v, f"{where}[{i}]")
            if found is not None:
                return found
    return None


def refuse_non_finite(value: Any, where: str) -> Any:
    """``value`` unchanged when no NaN or infinity sits anywhere inside it, else a ``ConfigError`` naming its path."""
    bad = _non_finite(value, where)
    if bad is not None:
        raise ConfigError(f"{bad[0]}: expected a finite number, got {bad[1]!r}")
    return value


@dataclasses.dataclass(frozen=True)
class Field:
    """One option: its type, default, allowed range and a line of documentation.

    ``kind`` is ``bool``, ``int``, ``float``, ``str``, ``list`` (``item``: each element's
    field; the value becomes a tuple), ``dict`` (``item``: each value's field, or ``record``: an
    :class:`Options` record the mapping is parsed into) or ``object`` (anything plain; ``parse``
    says how, ``kind_doc`` how the docs name it). Numbers are refused when not finite (NaN,
    ±inf) at any depth; ``ge``/``gt``/``le``/``lt`` bound them; ``nullable`` lets ``null``
    through; ``choices`` limits the values. Fields are made from annotations by :func:`option`
    and :class:`Options`; code that checks one value on its own builds one directly.
    """

    kind: Any
    default: Any = None
    doc: str = ""
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    nullable: bool = False
    choices: tuple[Any, ...] = ()
    kind_doc: str = ""
    """The type as the docs name it, when ``kind`` alone would not say it."""
    item: Field | None = None
    record: Any = None
    parse: Callable[[Any, str], Any] | None = None
    """Turns a value that passed the type check into the option's value (or refuses it naming ``where``)."""
    required: bool = False
    null_default: bool = False
    """``null`` stands for the default (a recipe's ``backend_options:`` left empty), rather than being refused."""

    def range_text(self) -> str:
        """The allowed range in words (for messages and docs)."""
        return _range_text(self.ge, self.gt, self.le, self.lt, self.choices)

    def fresh_default(self) -> Any:
        """The default, copied when it is a mutable mapping or list (a record never shares one)."""
        if isinstance(self.default, dict):
            return dict(self.default)
        if isinstance(self.default, list):
            return tuple(self.default)
        return self.default

    def check(self, value: Any, where: str, *, as_given: bool = False) -> Any:
        """The value, type- and range-checked, or a ``ConfigError`` naming ``where``.

        Integers stay integers; a float field takes an integer and returns it as a float, unless
        ``as_given`` (backends' options: their values reach response caches and settings digests
        as written, so a 30 stays 30 there).
        """
        if value is None:
            if self.nullable:
                return None
            if self.null_default:
                return self.fresh_default()
            if self.kind is object and self.parse is not None:  # the parse says what null means
                return self.parse(None, where)
            raise ConfigError(f"{where}: expected {self._kind_words()}, got null")
        if self.kind is bool:
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: expected {_KIND_WORDS[bool]}, got {type(value).__name__} {value!r}")
            return value
        if self.kind is int:
            value = check_number(value, where, integer=True, ge=self.ge, gt=self.gt, le=self.le, lt=self.lt)
            return self._chosen(value, where)
        if self.kind is float:  # 30 and 30.0 are one setting (fingerprints hash the value)
            value = check_number(value, where, ge=self.ge, gt=self.gt, le=self.le, lt=self.lt)
            return self._chosen(value if as_given else float(value), where)
        if self.kind is object:
            refuse_non_finite(value, where)
            return self.parse(value, where) if self.parse is not None else value
        if self.kind is list:
            if not isinstance(value, (list, tuple)):
                raise ConfigError(f"{where}: expected {self._kind_words()}, got {type(value).__name__} {value!r}")
            items = tuple(self.item.check(v, f"{where}[{i}]", as_given=as_given) if self.item else v for i, v in enumerate(value))
            refuse_non_finite(items, where)
            return self.parse(items, where) if self.parse is not None else items
        if self.kind is dict:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: expected {self._kind_words()}, got {type(value).__name__} {value!r}")
            if self.record is not None:
                out: Any = self.record.parse(value, where)
            elif self.item is not None:
                out = {k: self.item.check(v, f"{where}.{k}", as_given=as_given) for k, v in value.items()}
            else:
                out = dict(refuse_non_finite(value, where))
            return self.parse(out, where) if self.parse is not None else out
        if not isinstance(value, self.kind) or isinstance(value, bool):
            raise ConfigError(f"{where}: expected {self._kind_words()}, got {type(value).__name__} {value!r}")
        value = self._chosen(value, where)
        return self.parse(value, where) if self.parse is not None else value

    def _chosen(self, value: Any, where: str) -> Any:
        if self.choices and value not in self.choices:
            close = difflib.get_close_matches(str(value), [str(c) for c in self.choices], n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"{where}: {value!r} is not allowed{hint}; use {self.range_text()}")
        return value

    def _kind_words(self) -> str:
        if self.kind_doc:
            return self.kind_doc
        return _KIND_WORDS.get(self.kind, getattr(self.kind, "__name__", str(self.kind)))

    def doc_kind(self) -> str:
        """The type as the docs tables name it."""
        kind = self.kind_doc or _DOC_KIND.get(self.kind, getattr(self.kind, "__name__", str(self.kind)))
        return kind + (" or null" if self.nullable or self.null_default else "")


# ---- declarations ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Declared:
    """What :func:`option` records in a dataclass field's metadata (the type comes from the annotation)."""

    default: Any
    doc: str
    ge: float | None
    gt: float | None
    le: float | None
    lt: float | None
    choices: tuple[Any, ...]
    kind_doc: str
    parse: Callable[[Any, str], Any] | None
    doc_default: Any
    accepts: Any
    null_default: bool


def option(
    default: Any = _REQUIRED,
    doc: str = "",
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    choices: tuple[Any, ...] = (),
    kind_doc: str = "",
    parse: Callable[[Any, str], Any] | None = None,
    doc_default: Any = _REQUIRED,
    accepts: Any = None,
    null_default: bool = False,
) -> Any:
    """One field of an :class:`Options` record: its default (none: the option is required), one
    line of documentation, its bounds and, for what a type cannot say, ``parse`` (a function
    ``(value, where) -> value`` run on a value that passed the type check). ``accepts`` is the
    type a file may write when it is not the field's own (``float | list[float]`` for a field
    that ``parse`` turns into a tuple). ``null_default``: a ``null`` in the file means the default.
    A list default becomes a tuple; a mapping default is copied per record. ``doc_default`` is
    the default as the docs show it, when not the value itself."""
    declared = _Declared(default, doc, ge, gt, le, lt, tuple(choices), kind_doc, parse, doc_default, accepts, null_default)
    meta = {"option": declared}
    if isinstance(default, dict):
        return dataclasses.field(default_factory=lambda: dict(default), metadata=meta)
    if isinstance(default, list):
        default = tuple(default)
    return dataclasses.field(default=None if default is _REQUIRED else default, metadata=meta)


def _field_of(tp: Any, declared: _Declared | None = None) -> Field:
    """The :class:`Field` an annotation (and the declaration of :func:`option`) makes."""
    d = declared
    extra: dict[str, Any] = {}
    if d is not None:
        default = d.default
        extra = {"ge": d.ge, "gt": d.gt, "le": d.le, "lt": d.lt, "kind_doc": d.kind_doc, "parse": d.parse, "doc": d.doc}
        extra["null_default"] = d.null_default
        extra["required"] = default is _REQUIRED
        extra["default"] = None if default is _REQUIRED else default
    nullable = False
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(tp))
        tp = args[0] if len(args) == 1 else object
        origin = typing.get_origin(tp)
    choices: tuple[Any, ...] = tuple(d.choices) if d is not None else ()
    item: Field | None = None
    record: Any = None
    if origin is Literal:
        choices = typing.get_args(tp)
        kind: Any = type(choices[0])
    elif origin in (tuple, list):
        kind = list
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        item = _field_of(args[0]) if args and args[0] is not Any else None
    elif origin in (dict, Mapping) or tp in (dict, Mapping):
        kind = dict
        args = list(typing.get_args(tp))
        item = _field_of(args[1]) if len(args) == 2 and args[1] is not Any else None
    elif isinstance(tp, type) and issubclass(tp, Options):
        kind, record = dict, tp
    elif tp in (bool, int, float, str):
        kind = tp
    else:
        kind = object
    return Field(kind, nullable=nullable, choices=choices, item=item, record=record, **extra)


# ---- records ---------------------------------------------------------------------------------

R = TypeVar("R", bound="Options")


@dataclasses.dataclass(frozen=True)
class Options:
    """Base of every options record: a frozen dataclass whose :func:`option` fields are its declaration.

    Fields made without :func:`option` are no options (a record may carry derived facts beside
    them); :meth:`parse` neither takes nor fills them.
    """

    numbers_as_given: ClassVar[bool] = False
    """Float options keep an integer as written (backends: see :meth:`Field.check`)."""
    noun: ClassVar[str] = "key"
    """What messages call one entry ("unknown key 'x'", "missing required option 'model'")."""

    @classmethod
    def declared(cls) -> dict[str, Field]:
        """Every option of the record, in declaration order, as :class:`Field` s (built once per class)."""
        cached = cls.__dict__.get("_declared_fields")
        if cached is None:
            hints = typing.get_type_hints(cls)
            cached = {}
            for f in dataclasses.fields(cls):
                d = f.metadata.get("option")
                if d is not None:
                    cached[f.name] = _field_of(hints[f.name] if d.accepts is None else d.accepts, d)
            type.__setattr__(cls, "_declared_fields", cached)
        return dict(cached)

    @classmethod
    def key_path(cls, where: str, key: str) -> str:
        """How messages name ``key`` of a block at ``where`` (``r.yaml: dataset`` -> ``r.yaml: dataset.limit``)."""
        return f"{where}.{key}" if where else key

    @classmethod
    def parse(cls: type[R], raw: Any, where: str) -> R:
        """The record for the mapping ``raw`` (None: every default), every value checked, unknown keys refused."""
        raw = {} if raw is None else raw
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {type(raw).__name__} {raw!r}")
        fields = cls.declared()
        cls.refuse_unknown(raw, where)
        values: dict[str, Any] = {}
        for key, f in fields.items():
            if key in raw:
                values[key] = f.check(raw[key], cls.key_path(where, key), as_given=cls.numbers_as_given)
            elif f.required:
                hint = f" ({f.doc})" if f.doc else ""
                raise ConfigError(f"{where}: missing required {cls.noun} '{key}'{hint}")
            else:
                values[key] = f.fresh_default()
        record = cls(**values)
        record.validate(where)
        return record

    @classmethod
    def refuse_unknown(cls, raw: Mapping[str, Any], where: str) -> None:
        """Refuse a key the record does not declare, naming the closest declared one."""
        allowed = list(cls.declared())
        for key in raw:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                listed = ", ".join(sorted(allowed)) or "none"
                raise ConfigError(f"{where}: unknown {cls.noun} '{key}'{hint}; allowed: {listed}")

    def validate(self, where: str) -> None:
        """Rules between fields (a record that needs them overrides this); raise ``ConfigError`` naming ``where``."""

    def check(self, where: str = "") -> None:
        """Check a record built in code (not by :meth:`parse`) as :meth:`parse` checks a mapping."""
        for key, f in self.declared().items():
            value = getattr(self, key)
            if f.required and value is None:
                raise ConfigError(f"{where or type(self).__name__}: missing required {self.noun} '{key}'")
            f.check(value, self.key_path(where, key), as_given=True)
        self.validate(where)

    def as_dict(self) -> dict[str, Any]:
        """The options as a plain mapping, in declaration order (nested records too)."""
        return {k: (v.as_dict() if isinstance(v, Options) else v) for k, v in ((k, getattr(self, k)) for k in self.declared())}

    def replace(self: R, **changes: Any) -> R:
        """A copy with ``changes`` (values set by code: they are not checked again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def doc_rows(cls, key_format: str = "`{}`") -> list[str]:
        """One Markdown table row per option (key, type, default, allowed values, meaning), for the docs."""
        rows = []
        for f in dataclasses.fields(cls):
            d = f.metadata.get("option")
            if d is None:
                continue
            spec = cls.declared()[f.name]
            shown = spec.default if d.doc_default is _REQUIRED else d.doc_default
            default = "required" if spec.required and d.doc_default is _REQUIRED else f"`{doc_value(shown)}`"
            rows.append(f"| {key_format.format(f.name)} | {spec.doc_kind()} | {default} | {spec.range_text() or '—'} | {spec.doc} |")
        return rows


def doc_value(x: Any) -> str:
    """A default as a recipe would write it (YAML spelling)."""
    if x is None:
        return "null"
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, (list, tuple, dict)):
        return json.dumps(list(x) if isinstance(x, tuple) else x)
    return str(x)


def check_value(tp: Any, value: Any, where: str, **bounds: Any) -> Any:
    """One value checked against the annotation ``tp`` (and ``ge``/``gt``/``le``/``lt``/``choices``), for
    mappings whose keys are data rather than declared options (a condition map's output columns)."""
    base = _field_of(tp)
    return dataclasses.replace(base, **bounds).check(value, where)


TABLE_HEAD = "| key | type | default | allowed | meaning |\n| --- | --- | --- | --- | --- |\n"
"""The header of every options table in the docs."""


def field_rows(fields: Mapping[str, Field], key_format: str = "`{}`") -> list[str]:
    """One Markdown table row per field of a plain mapping of fields (blocks not yet declared as a record)."""
    return [
        f"| {key_format.format(key)} | {f.doc_kind()} | `{doc_value(f.default)}` | {f.range_text() or '—'} | {f.doc} |"
        for key, f in fields.items()
    ]


def table(rows: list[str]) -> str:
    """The Markdown table (header and ``rows``) the docs show for one block of options."""
    return TABLE_HEAD + "".join(row + "\n" for row in rows)


BLOCK_START = "<!-- options-table: {} -->"
BLOCK_END = "<!-- /options-table -->"


def replace_block(text: str, name: str, content: str, where: str) -> str:
    """``text`` with the generated block ``name`` (between its start marker and the end marker) set to ``content``."""
    start = BLOCK_START.format(name)
    i = text.find(start)
    if i < 0:
        raise ConfigError(f"{where}: no '{start}' marker; put one (and '{BLOCK_END}') where the table of '{name}' goes")
    j = text.find(BLOCK_END, i)
    if j < 0:
        raise ConfigError(f"{where}: the block '{name}' has no '{BLOCK_END}' marker after it")
    return text[: i + len(start)] + "\n" + content + text[j:]
