"""Option helpers shared by the recipe sections that run registered backends (speaker, emotion, judges, ...).

Each section declares its keys as an options record (``engine.options``); these are the parts
its declarations share: the ``backends`` list checked against a registry and the
``backend_options`` mapping checked against that list. They live here rather than in one
section's package so that sections do not import each other, and so that their messages (file,
key, close matches) are the same in every section.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, RegistryError
from engine.options import check_value
from engine.run.passes import split_placement


def backend_names(registry: Any) -> Callable[[tuple[str, ...], str], tuple[str, ...]]:
    """The ``parse`` of a ``backends`` option: a non-empty list of names registered in ``registry``
    (checked without importing them), none twice."""

    def parse(names: tuple[str, ...], where: str) -> tuple[str, ...]:
        if not names:
            raise ConfigError(f"{where}: list at least one backend ({', '.join(registry.names())})")
        for n in names:
            try:
                registry.check(n)  # imports nothing; lists close matches
            except RegistryError as exc:
                raise ConfigError(f"{where}: {exc}") from None
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"{where}: listed twice: {', '.join(dupes)}")
        return names

    return parse


def parse_backend_list(data: Mapping[str, Any], registry: Any, where: str) -> tuple[str, ...]:
    """``backends`` of the block at ``where``: a non-empty list of registered names."""
    if "backends" not in data:
        raise ConfigError(f"{where}: missing required key 'backends' (e.g. backends: [{registry.names()[0]}])")
    names: tuple[str, ...] = check_value(tuple[str, ...], data["backends"], f"{where}.backends")
    return backend_names(registry)(names, f"{where}.backends")


def options_map(value: Mapping[str, Any], where: str) -> dict[str, dict[str, Any]]:
    """The ``parse`` of a ``backend_options`` option: backend name -> its options mapping (``null`` is none)."""
    out: dict[str, dict[str, Any]] = {}
    for name, opts in value.items():
        out[str(name)] = check_value(dict[str, Any], {} if opts is None else opts, f"{where}.{name}")
    return out


def check_backend_options(options: Mapping[str, Mapping[str, Any]], backends: Sequence[str], where: str, registry: Any = None) -> None:
    """``backend_options`` (at ``where``) name only backends among ``backends``; their placement keys are sound.

    ``num_gpus``, ``num_cpus`` and ``memory_mb`` in a backend's options size its engine actors
    (``engine.run.passes.split_placement``) and are checked here; with the section's ``registry``, a
    GPU asked of a CPU-only backend (``device: cuda``, ``num_gpus`` > 0) is refused here too.
    """
    for name, opts_raw in options.items():
        if name not in backends:
            raise ConfigError(f"{where}: '{name}' is not in backends ({', '.join(backends)})")
        opts, placement = split_placement(dict(opts_raw), f"{where}.{name}")  # checked before anything runs
        if registry is not None and ("device" in opts or placement.get("num_gpus")):  # imports the backend's module only then
            try:
                check = getattr(registry.get(str(name)), "check_device", None)
            except RegistryError:  # a backend that cannot import is reported when its pass runs
                check = None
            if check is not None:
                check(opts, placement, f"{where}.{name}")


def resolve_path(value: str, source: str) -> str:
    """A relative path is taken from the recipe's folder when it exists there, else as given."""
    p = Path(value).expanduser()
    if not p.is_absolute() and source:
        cand = Path(source).parent / p
        if cand.exists():
            return str(cand)
    return str(p)


def source_of(where: str) -> str:
    """The recipe file a block's ``where`` (``r.yaml: emotion``) names, or "" when it names none."""
    return where.split(": ", 1)[0] if ": " in where else ""
