"""One generic registry for every pluggable kind (backends, sections, normalizers, dataset readers, runners).

Entries are lazy ``"module:attr"`` strings, imported on first use, so that listing names never
imports a heavy optional dependency. A registry with an entry-point ``group`` (for instance
``audit_engine.asr_backends``) fills itself on first use from the Python entry points of that
group, so a separately installed package adds a backend, a section or a reader without any edit
to this repository:

* the project's own entries are entry points too, declared in ``pyproject.toml``; when the code
  runs from a source tree (a checkout, or an editable install) they are read from that tree's
  ``pyproject.toml``, so a checkout without any install, or with stale install metadata, still
  finds exactly the built-ins its code has; an installed wheel reads them from its metadata;
* a name offered twice (two distributions, or a distribution and a built-in) is an error naming
  both, since silently picking one would run a different backend than the recipe's author meant;
* a broken entry point (malformed value, failing import, missing attribute) is an error naming
  its distribution and entry point; nothing is skipped silently;
* a name the registry's owner reserves (``reserved``: an audit section may not be called
  ``dataset``, since its results would replace summary.json's own ``dataset``) is refused when it
  is registered, by entry point or in code, with the reason.
"""

from __future__ import annotations

import difflib
import importlib
import logging
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Generic, Iterator, Mapping, TypeVar

from engine.errors import RegistryError

log = logging.getLogger(__name__)

T = TypeVar("T")

PROJECT_DIST = "audit-engine"
"""This project's distribution name; its entry points are the built-ins."""
BUILTIN = "built-in"
"""The origin shown for the project's own entries."""
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


@dataclass(frozen=True)
class Entry:
    """One registered name: what it loads (``module:attr``) and where it comes from."""

    name: str
    target: str
    origin: str
    """``built-in``, a distribution ``name version``, or ``registered in code``."""

    def describe(self) -> str:
        """How errors name the entry: its origin and the entry point line."""
        return f"{self.origin}: {self.name} = {self.target}"


def did_you_mean(kind: str, name: str, known: list[str]) -> str:
    """The one wording of an unknown name: close matches first, then every known name."""
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return f"unknown {kind} '{name}'{hint} (known: {', '.join(known) or 'none'})"


def _canonical(dist_name: str) -> str:
    return re.sub(r"[-_.]+", "-", dist_name).lower()


def _source_tree_pyproject() -> Path | None:
    """This project's ``pyproject.toml`` when the code runs from a source tree, else None."""
    path = Path(__file__).resolve().parents[1] / "pyproject.toml"
    if not path.is_file():
        return None
    data = _read_toml(path)
    return path if _canonical(str(data.get("project", {}).get("name", ""))) == PROJECT_DIST else None


def source_tree_root() -> Path | None:
    """The source checkout the code runs from, or None when it runs from an installed wheel."""
    pyproject = _source_tree_pyproject()
    return pyproject.parent if pyproject is not None else None


@lru_cache(maxsize=None)
def _read_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10 reads TOML through the tomli backport
        try:
            import tomli as tomllib
        except ImportError as exc:
            raise RegistryError(
                f"reading the built-in plug-ins from {path} on Python 3.10 needs 'tomli' (pip install tomli), or install the project"
            ) from exc
    with path.open("rb") as fh:
        return dict(tomllib.load(fh))


def builtin_entries(group: str) -> list[Entry]:
    """The project's own entries of ``group``, from the source tree's pyproject.toml or the installed metadata."""
    pyproject = _source_tree_pyproject()
    if pyproject is not None:
        table = _read_toml(pyproject).get("project", {}).get("entry-points", {}).get(group, {})
        return [Entry(str(k), str(v), BUILTIN) for k, v in table.items()]
    try:
        dist = metadata.distribution(PROJECT_DIST)
    except metadata.PackageNotFoundError:
        log.warning("neither a source tree's pyproject.toml nor installed metadata of %s: no built-in %s", PROJECT_DIST, group)
        return []
    return [Entry(ep.name, ep.value, BUILTIN) for ep in dist.entry_points if ep.group == group]


def plugin_entries(group: str) -> list[Entry]:
    """Entries of ``group`` that other installed distributions declare (nothing is imported)."""
    out = []
    for ep in metadata.entry_points(group=group):
        dist = getattr(ep, "dist", None)
        dist_name = str(dist.metadata["Name"]) if dist is not None else "an unknown distribution"
        if _canonical(dist_name) == PROJECT_DIST:
            continue  # the built-ins, read by builtin_entries (fresher in a source tree)
        origin = f"{dist_name} {dist.version}" if dist is not None else dist_name
        out.append(Entry(ep.name, ep.value, origin))
    return out


class Registry(Generic[T]):
    """Maps names to objects; unknown names list close matches, duplicates are errors.

    ``group`` is the entry-point group that fills the registry on first use (None: only what
    code registers). ``register``/``register_lazy`` add entries in code (tests, toy sections).
    """

    def __init__(
        self, kind: str, group: str | None = None, reserved: Mapping[str, str] | None = None, name_pattern: str | None = None
    ) -> None:
        self.kind = kind
        self.group = group
        self.reserved = dict(reserved or {})
        """Names no entry may take, each with why (what already uses it)."""
        self.name_pattern = re.compile(name_pattern) if name_pattern else None
        """A name must match it, when given (e.g. a key usable in a recipe, a summary and a query)."""
        self._entries: dict[str, Entry] = {}
        self._loaded: dict[str, T] = {}
        self._discovered = group is None

    def _discover(self) -> None:
        if self._discovered or self.group is None:
            return
        before = dict(self._entries)
        try:
            for entry in [*builtin_entries(self.group), *plugin_entries(self.group)]:
                self._add(entry)
        except RegistryError:
            self._entries = before  # every later use raises the same error, never a half-filled registry
            raise
        self._discovered = True

    def _add(self, entry: Entry) -> None:
        if not _TARGET.match(entry.target):
            raise RegistryError(
                f"{self.kind} '{entry.name}' ({entry.describe()}"
                f"{f', entry-point group {self.group}' if self.group else ''}): "
                "the value must look like 'package.module:Attribute'"
            )
        where = f"{self.kind} '{entry.name}' ({entry.describe()}{f', entry-point group {self.group}' if self.group else ''})"
        if entry.name in self.reserved:
            raise RegistryError(f"{where}: the name is reserved ({self.reserved[entry.name]}); rename the entry point")
        if self.name_pattern is not None and not self.name_pattern.fullmatch(entry.name):
            raise RegistryError(f"{where}: the name must match {self.name_pattern.pattern}; rename the entry point")
        if entry.name in self._entries:
            first = self._entries[entry.name]
            raise RegistryError(
                f"duplicate {self.kind} name '{entry.name}': offered by {first.describe()} and by {entry.describe()}; "
                "uninstall one of the two distributions (or rename the entry point)"
            )
        self._entries[entry.name] = entry

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@ASR_BACKENDS.register("my-backend")`` (for code that is not a distribution)."""

        def deco(obj: T) -> T:
            self._discover()
            self._add(
                Entry(name, f"{getattr(obj, '__module__', 'unknown')}:{getattr(obj, '__qualname__', 'object')}", "registered in code")
            )
            self._loaded[name] = obj
            return obj

        return deco

    def register_lazy(self, name: str, target: str, origin: str = "registered in code") -> None:
        """Register ``"package.module:Attr"`` to import only when ``name`` is first used."""
        self._discover()
        self._add(Entry(name, target, origin))

    def names(self) -> list[str]:
        self._discover()
        return sorted(self._entries)

    def entries(self) -> list[Entry]:
        """Every entry with its origin, by name (nothing imported)."""
        self._discover()
        return [self._entries[n] for n in sorted(self._entries)]

    def __contains__(self, name: object) -> bool:
        self._discover()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def check(self, name: str) -> None:
        """Raise ``RegistryError`` (with close matches) unless ``name`` is registered; imports nothing."""
        if name not in self:
            raise RegistryError(did_you_mean(self.kind, name, self.names()))

    def get(self, name: str) -> T:
        """Return the object for ``name``, importing it on first use.

        A failing import or a missing attribute is a ``RegistryError`` naming the entry's
        distribution and entry point (the cause is chained), so a broken plug-in is never
        mistaken for an unknown name or silently left out.
        """
        if name in self._loaded:
            return self._loaded[name]
        self.check(name)
        entry = self._entries[name]
        module_name, attr = entry.target.split(":", 1)
        where = f"{self.kind} '{name}' ({entry.describe()}{f', entry-point group {self.group}' if self.group else ''})"
        try:
            obj: Any = importlib.import_module(module_name)
        except Exception as exc:
            raise RegistryError(f"{where} cannot be imported: {type(exc).__name__}: {exc}") from exc
        for part in attr.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError:
                raise RegistryError(f"{where}: module {module_name} has no attribute {attr}") from None
        self._loaded[name] = obj
        return obj  # type: ignore[no-any-return]
