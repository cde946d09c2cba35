"""Config-parsing helpers shared by the recipe sections that run registered backends (speaker, emotion, ...).

They live here rather than in one section's package so that sections do not import each other:
each section validates its own keys, and these helpers keep the error messages (file, key,
close matches) the same across sections.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.config import expect_type
from engine.errors import ConfigError, RegistryError
from engine.run.passes import split_placement


def str_list(value: Any, where: str) -> tuple[str, ...]:
    """A YAML list of strings as a tuple; ``where`` names the file and key in the error."""
    items = expect_type(value, list, where)
    for i, x in enumerate(items):
        expect_type(x, str, f"{where}[{i}]")
    return tuple(items)


def parse_backend_list(data: Mapping[str, Any], registry: Any, where: str) -> tuple[str, ...]:
    """``backends``: a non-empty list of registered names (checked without importing them)."""
    if "backends" not in data:
        raise ConfigError(f"{where}: missing required key 'backends' (e.g. backends: [{registry.names()[0]}])")
    names = str_list(data["backends"], f"{where}.backends")
    if not names:
        raise ConfigError(f"{where}.backends: list at least one backend ({', '.join(registry.names())})")
    for n in names:
        try:
            registry.check(n)  # imports nothing; lists close matches
        except RegistryError as exc:
            raise ConfigError(f"{where}.backends: {exc}") from None
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"{where}.backends: listed twice: {', '.join(dupes)}")
    return names


def parse_backend_options(data: Mapping[str, Any], backends: Sequence[str], where: str, registry: Any = None) -> dict[str, dict[str, Any]]:
    """``backend_options``: backend name -> options mapping; names must be among ``backends``.

    ``num_gpus``, ``num_cpus`` and ``memory_mb`` in a backend's options size its engine actors
    (``engine.run.passes.split_placement``) and are checked here; with the section's ``registry``, a
    GPU asked of a CPU-only backend (``device: cuda``, ``num_gpus`` > 0) is refused here too.
    """
    raw = expect_type(data.get("backend_options", {}) or {}, dict, f"{where}.backend_options")
    out: dict[str, dict[str, Any]] = {}
    for name, opts in raw.items():
        if name not in backends:
            raise ConfigError(f"{where}.backend_options: '{name}' is not in backends ({', '.join(backends)})")
        out[str(name)] = dict(expect_type(opts or {}, dict, f"{where}.backend_options.{name}"))
        opts, placement = split_placement(out[str(name)], f"{where}.backend_options.{name}")  # checked before anything runs
        if registry is not None and ("device" in opts or placement.get("num_gpus")):  # imports the backend's module only then
            try:
                check = getattr(registry.get(str(name)), "check_device", None)
            except RegistryError:  # a backend that cannot import is reported when its pass runs
                check = None
            if check is not None:
                check(opts, placement, f"{where}.backend_options.{name}")
    return out


def resolve_path(value: str, source: str) -> str:
    """A relative path is taken from the recipe's folder when it exists there, else as given."""
    p = Path(value).expanduser()
    if not p.is_absolute() and source:
        cand = Path(source).parent / p
        if cand.exists():
            return str(cand)
    return str(p)
