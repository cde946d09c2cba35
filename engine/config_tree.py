"""Where the configuration tree is: the one place that locates recipes, registries, maps and prompts.

The tree has four folders: ``models/`` (model registries), ``recipes/``, ``conditions/``
(condition maps) and ``judges/`` (judges' prompts). It ships as the data package
``audit_configs``, read through ``importlib.resources``, so a source checkout, an editable
install and an installed wheel all read the files the package holds. ``$AUDIT_CONFIG_DIR`` names
another folder with the same layout: each of the four folders it holds replaces the shipped
folder of that name, and the ones it lacks come from the shipped tree (a folder with only
``models/`` runs the shipped recipes and condition maps on one's own registry). Copy the shipped
tree to start from it: ``audit list recipes`` prints where it is.

This module only locates: it returns paths and never parses (``engine.config`` reads YAML).
It is read at call time, so a process that sets ``AUDIT_CONFIG_DIR`` (a test, a Ray worker's
environment) sees the change without re-importing anything.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from engine.errors import ConfigError

#: The environment variable that points at a configuration folder of one's own.
CONFIG_ENV = "AUDIT_CONFIG_DIR"
#: The data package that holds the shipped tree.
CONFIG_PACKAGE = "audit_configs"
#: The folders a configuration tree may hold (one at least).
SUBFOLDERS = ("models", "recipes", "conditions", "judges")


def shipped_config_dir() -> Path:
    """The configuration tree that ships with the code (the ``audit_configs`` package's folder)."""
    try:
        root = resources.files(CONFIG_PACKAGE)
    except ModuleNotFoundError as exc:
        checkout = source_root()  # an editable install made before the package existed maps only the code packages
        if checkout is not None and (checkout / CONFIG_PACKAGE / "__init__.py").is_file():
            return checkout / CONFIG_PACKAGE
        raise ConfigError(
            f"the shipped configuration package '{CONFIG_PACKAGE}' is not installed beside the engine ({exc}); "
            f"reinstall audit-engine, or set {CONFIG_ENV} to a folder holding {', '.join(f'{s}/' for s in SUBFOLDERS)}"
        ) from None
    if not isinstance(root, Path):  # a zipped install: recipes are globbed and opened as files
        raise ConfigError(
            f"the shipped configuration package '{CONFIG_PACKAGE}' is not a folder on disk ({root}); install audit-engine "
            f"unzipped (pip installs wheels unzipped), or set {CONFIG_ENV} to a folder holding {', '.join(f'{s}/' for s in SUBFOLDERS)}"
        )
    return root


def config_dir() -> Path:
    """The folder ``$AUDIT_CONFIG_DIR`` names (checked), else the shipped tree; readers ask
    :func:`config_folder`, which falls back to the shipped folders the override lacks.

    A folder that does not exist, is not a folder, or holds none of the tree's folders is an
    error naming the variable, so a typo never silently runs with no recipes or models.
    """
    env = os.environ.get(CONFIG_ENV)
    if env is None or not env.strip():
        return shipped_config_dir()
    path = Path(env).expanduser()
    folders = ", ".join(f"{s}/" for s in SUBFOLDERS)
    if not path.exists():
        raise ConfigError(
            f"{CONFIG_ENV}={env}: no such folder; point it at a configuration folder (holding {folders}) "
            f"or unset it to use the shipped one ({shipped_config_dir()})"
        )
    if not path.is_dir():
        raise ConfigError(
            f"{CONFIG_ENV}={env}: not a folder; point it at a configuration folder (holding {folders}) or unset it to use the shipped one"
        )
    if not any((path / s).is_dir() for s in SUBFOLDERS):
        raise ConfigError(
            f"{CONFIG_ENV}={env}: holds none of {folders} (is it one level too deep?); point it at the folder above "
            f"them, e.g. a copy of {shipped_config_dir()}"
        )
    return path


def config_folder(name: str) -> Path:
    """One folder of the tree in use (``models``, ``recipes``, ``conditions`` or ``judges``): the one in
    ``$AUDIT_CONFIG_DIR`` when that folder has it, else the shipped one."""
    if name not in SUBFOLDERS:
        raise ValueError(f"unknown configuration folder {name!r} (known: {', '.join(SUBFOLDERS)})")
    own = config_dir() / name
    return own if own.is_dir() else shipped_config_dir() / name


def config_path(*parts: str) -> Path:
    """A path inside the configuration tree in use, e.g. ``config_path("judges", "prompts.yaml")``."""
    return config_folder(parts[0]).joinpath(*parts[1:])


def display_path(path: Path) -> str:
    """How a configuration file is named in results: ``audit_configs/...`` for a shipped file (the same
    in a checkout and an installed wheel), the path itself otherwise."""
    try:
        return str(Path(CONFIG_PACKAGE) / Path(path).resolve().relative_to(shipped_config_dir().resolve()))
    except (ValueError, ConfigError):
        return str(path)


def source_root() -> Path | None:
    """The source checkout the code runs from (its ``pyproject.toml`` is this project's), else None
    (an installed wheel). Relative dataset paths and the demo data folder fall back to it."""
    from engine.registry import source_tree_root

    return source_tree_root()


def resolve_relative(path: str | Path) -> Path:
    """A relative path as a run opens it: against the working directory, else (in a source checkout)
    against the checkout, so the shipped recipes' ``tests/...`` and ``data/...`` paths work from anywhere."""
    p = Path(path)
    if p.is_absolute() or p.exists():
        return p
    root = source_root()
    if root is not None and (root / p).exists():
        return root / p
    return p


def data_dir() -> Path:
    """Where built-in corpora are built and read: ``$AUDIT_DATA_DIR``, else ``data/`` in the source
    checkout, else ``data/`` under the working directory (an installed wheel, like ``runs/``)."""
    env = os.environ.get("AUDIT_DATA_DIR")
    if env:
        return Path(env).expanduser()
    root = source_root()
    return (root if root is not None else Path.cwd()) / "data"


__all__ = [
    "CONFIG_ENV",
    "CONFIG_PACKAGE",
    "SUBFOLDERS",
    "config_dir",
    "config_folder",
    "config_path",
    "data_dir",
    "display_path",
    "resolve_relative",
    "shipped_config_dir",
    "source_root",
]
