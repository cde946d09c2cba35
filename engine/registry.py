"""One generic registry for every pluggable kind (ASR/SV/SER/TTS backends, probes, dataset readers).

Names map to classes either directly (decorator) or lazily (``"module:attr"`` strings, imported
on first use so that listing names never imports heavy optional dependencies).
"""

from __future__ import annotations

import difflib
import importlib
from typing import Callable, Generic, Iterator, TypeVar

from engine.errors import RegistryError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to objects; unknown names list close matches, duplicates are errors."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._lazy: dict[str, str] = {}
        self._loaded: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@ASR_BACKENDS.register("my-backend")``."""

        def deco(obj: T) -> T:
            self._check_new(name)
            self._loaded[name] = obj
            return obj

        return deco

    def register_lazy(self, name: str, target: str) -> None:
        """Register ``"package.module:Attr"`` to import only when ``name`` is first used."""
        if ":" not in target:
            raise RegistryError(f"{self.kind} '{name}': lazy target must look like 'module:attr', got '{target}'")
        self._check_new(name)
        self._lazy[name] = target

    def _check_new(self, name: str) -> None:
        if name in self._lazy or name in self._loaded:
            raise RegistryError(f"duplicate {self.kind} name '{name}'")

    def names(self) -> list[str]:
        return sorted(set(self._lazy) | set(self._loaded))

    def __contains__(self, name: object) -> bool:
        return name in self._lazy or name in self._loaded

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def get(self, name: str) -> T:
        """Return the object for ``name``, importing it if it was registered lazily."""
        if name in self._loaded:
            return self._loaded[name]
        if name not in self._lazy:
            close = difflib.get_close_matches(name, self.names(), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise RegistryError(f"unknown {self.kind} '{name}'{hint} (known: {', '.join(self.names())})")
        module_name, attr = self._lazy[name].split(":", 1)
        module = importlib.import_module(module_name)
        obj = getattr(module, attr)
        self._loaded[name] = obj
        return obj
