"""Every registry a plug-in can add to, for the commands and checks that go over all of them.

The registries are found in the modules that own them (every module-level ``Registry`` with an
entry-point group), so ``audit list backends`` and the tests never list the registries by hand: a
new registry in one of these modules appears everywhere at once, and tests/test_plugins.py checks
that every ``audit_engine.*`` group of pyproject.toml has exactly one.
"""

from __future__ import annotations

import importlib
from typing import Any

from engine.registry import Registry

OWNERS = ("engine.backends", "engine.datasets", "engine.engine", "audits.normalizing", "audits.sections")
"""The modules that make the registries (importing them imports no backend: entries are lazy)."""


def all_registries() -> list[Registry[Any]]:
    """Every module-level registry with an entry-point group in ``OWNERS``, in the order the modules make them."""
    out: list[Registry[Any]] = []
    for module in OWNERS:
        for value in vars(importlib.import_module(module)).values():
            if isinstance(value, Registry) and value.group is not None and all(value is not r for r in out):
                out.append(value)
    return out


__all__ = ["OWNERS", "all_registries"]
