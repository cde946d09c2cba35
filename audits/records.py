"""Small frozen records of JSON objects: every section's typed result is made of them.

A ``Record`` declares its fields (``figure``) and reads and writes the JSON object it stands for:
``from_json`` keeps the order and presence of the keys it read (``layout``) and every key it does
not declare (``extra``), so ``to_json`` gives back the same object (``summary.json`` read and written
again is the same text, an older or newer writer's included). A record built in code writes its
fields in declaration order, leaving out optional fields that are None. Values are frozen: lists
become tuples, objects read-only mappings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Generic, Self, TypeVar

R = TypeVar("R", bound="Record")

EMPTY: Mapping[str, Any] = MappingProxyType({})


def freeze(value: Any) -> Any:
    """A JSON value made read-only: lists become tuples, objects read-only mappings (recursively)."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The plain JSON value of a frozen one (records, mappings and tuples to dicts and lists)."""
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, Mapping):
        return {str(k): thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


def figure(default: Any = None, *, optional: bool = False, codec: Any = None, report: tuple[str, str] | None = None) -> Any:
    """A record field: ``optional`` ones are left out of a record built in code when None; ``codec`` reads nested
    records (a ``Record`` class, or ``("map", cls)`` / ``("list", cls)``); ``report`` adds a column to the model table."""
    meta = {"optional": optional, "codec": codec, "report": report}
    if isinstance(default, Mapping):
        return field(default_factory=lambda: EMPTY, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Record:
    """A frozen JSON object with declared fields; ``layout`` is the key order it was read with (None: built in code, declaration order)."""

    extra: Mapping[str, Any] = field(default_factory=lambda: EMPTY, kw_only=True, repr=False)
    """Keys the record does not declare, kept as read (a newer or plug-in writer's)."""
    layout: tuple[str, ...] | None = field(default=None, kw_only=True, repr=False, compare=False)

    _OWN: ClassVar[frozenset[str]] = frozenset({"extra", "layout"})

    @classmethod
    def declared(cls) -> list[dataclasses.Field[Any]]:
        return [f for f in dataclasses.fields(cls) if f.name not in Record._OWN]

    @classmethod
    def from_json(cls: type[R], data: Mapping[str, Any]) -> R:
        """The record of a JSON object (every key kept: declared ones as fields, others under ``extra``)."""
        known = {f.name: f for f in cls.declared()}
        values = {k: _decode(known[k].metadata.get("codec"), v) for k, v in data.items() if k in known}
        extra = {k: freeze(v) for k, v in data.items() if k not in known}
        return cls(**values, extra=MappingProxyType(extra), layout=tuple(str(k) for k in data))

    def keys(self) -> Iterator[str]:
        """The JSON keys, in order: as read, or the declared fields (optional ones only when set), then ``extra``."""
        if self.layout is not None:  # as read; a field set afterwards (``dataclasses.replace``) follows
            yield from self.layout
            for f in self.declared():
                if f.name not in self.layout and getattr(self, f.name) != _default(f):
                    yield f.name
            return
        for f in self.declared():
            if not (f.metadata.get("optional") and getattr(self, f.name) is None):
                yield f.name
        yield from self.extra

    def to_json(self) -> dict[str, Any]:
        """The plain JSON object (what ``summary.json`` holds)."""
        names = {f.name for f in self.declared()}
        return {k: thaw(getattr(self, k) if k in names else self.extra[k]) for k in self.keys()}


def _default(f: dataclasses.Field[Any]) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def _decode(codec: Any, value: Any) -> Any:
    if value is None or codec is None:
        return freeze(value)
    if isinstance(codec, tuple):
        kind, cls = codec
        if kind == "map":
            return MappingProxyType({str(k): cls.from_json(v) for k, v in value.items()})
        return tuple(cls.from_json(v) for v in value)
    return codec.from_json(value)


def section_json(result: Any) -> Any:
    """A section's result as ``summary.json`` holds it: ``to_json()`` of a record, plain JSON as it is."""
    to_json = getattr(result, "to_json", None)
    return to_json() if callable(to_json) else result


E = TypeVar("E", bound=Record)


@dataclass(frozen=True)
class EntriesResult(Generic[E]):
    """A section result keyed by name (a backend's, a model's, a probe's), each entry a record, then ``judges`` when
    the section asked audio-LM judges (``summary.json``: ``{name: entry, ..., "judges": {...}}``)."""

    entries: Mapping[str, E] = field(default_factory=lambda: EMPTY)
    judges: Mapping[str, Any] | None = None

    entry_type: ClassVar[type[Record]] = Record
    judge_type: ClassVar[type[Record] | None] = None
    """The record of each judge's entry under ``judges`` (None: the judges' object is kept frozen as read)."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """The result of a section's JSON object (every entry a record of ``entry_type``; each judge's a ``judge_type``)."""
        entries = {str(k): cls.entry_type.from_json(v) for k, v in data.items() if k != "judges"}
        judges: Any = None
        if "judges" in data:
            jt = cls.judge_type
            judges = (
                freeze(data["judges"]) if jt is None else MappingProxyType({str(k): jt.from_json(v) for k, v in data["judges"].items()})
            )
        return cls(MappingProxyType(entries), judges)  # type: ignore[arg-type]

    def backends(self) -> list[tuple[str, E]]:
        """The entries (one per backend or model), sorted by name."""
        return sorted(self.entries.items(), key=lambda kv: kv[0])

    def to_json(self) -> dict[str, Any]:
        """The JSON object ``summary.json`` holds under the section's key."""
        out: dict[str, Any] = {name: e.to_json() for name, e in self.entries.items()}
        if self.judges is not None:
            out["judges"] = thaw(self.judges)
        return out

    def entry(self, name: str) -> E:
        """One entry by name (``KeyError`` naming the entries there are when absent)."""
        try:
            return self.entries[name]
        except KeyError:
            raise KeyError(f"no entry '{name}' in this result (entries: {', '.join(self.entries) or 'none'})") from None
