"""The normalizer registry: names recipes use -> normalizers (entry-point group ``audit_engine.normalizers``).

``normalizers`` is the bottom layer and imports nothing of the project, so it holds the
normalizer classes only; the registry that names them (and finds a plug-in package's) lives
here, one layer up, as an instance of the one registry type (engine/registry.py). An entry is a
zero-argument callable (usually the class) that returns a ``normalizers.Normalizer``.
"""

from __future__ import annotations

from typing import Callable

from engine.errors import ConfigError
from engine.registry import Registry
from normalizers import Normalizer
from normalizers.leaderboard_tables import SpellingListError

NORMALIZERS: Registry[Callable[[], Normalizer]] = Registry("normalizer", "audit_engine.normalizers")


def get_normalizer(name: str) -> Normalizer:
    """The normalizer registered as ``name``; an unknown name raises ``RegistryError`` with close matches,
    one whose word lists are not the ones it follows (``open-asr-leaderboard``) a ``ConfigError``."""
    factory = NORMALIZERS.get(name)
    try:
        return factory()
    except SpellingListError as exc:
        raise ConfigError(f"normalizer '{name}': {exc}") from None


def normalizer_names() -> list[str]:
    """Registered normalizer names (nothing imported)."""
    return NORMALIZERS.names()
