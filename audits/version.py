"""The audit engine's version: one answer for ``audit --version``, ``summary.json`` and the Python API.

The installed package's metadata is the source of truth; a source checkout that was never
installed (``PYTHONPATH=.``) falls back to ``pyproject.toml``, so a run is never labelled with a
version it was not made with.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "audit-engine"
_PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _from_pyproject(path: Path = _PYPROJECT) -> str | None:
    """``[project] version`` of ``pyproject.toml`` (None when the file or the key is absent)."""
    if not path.exists():
        return None
    in_project = False
    for line in path.read_text(encoding="utf-8").splitlines():
        s = line.strip()
        if s.startswith("["):
            in_project = s == "[project]"
            continue
        m = re.match(r'version\s*=\s*["\']([^"\']+)["\']', s) if in_project else None
        if m:
            return m.group(1)
    return None


@lru_cache(maxsize=1)
def version() -> str:
    """The version of the code that is running (``"unknown"`` only when neither source says)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return _from_pyproject() or "unknown"


__all__ = ["DISTRIBUTION", "version"]
