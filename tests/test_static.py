"""Static checks that keep the code base honest: type hints are checked, names are defined, the layout is the formatter's.

Both tools come with the ``test`` extra; their settings live in pyproject.toml.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *cmd], cwd=REPO, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_mypy_finds_no_type_errors() -> None:
    proc = _run("mypy", "--no-error-summary", "--cache-dir", str(REPO / ".mypy_cache"))
    assert proc.returncode == 0, f"mypy found problems:\n{proc.stdout}\n{proc.stderr}"


def test_ruff_finds_no_undefined_or_unused_names() -> None:
    proc = _run("ruff", "check", "engine", "audits", "normalizers", "scripts", "tests")
    assert proc.returncode == 0, f"ruff found problems:\n{proc.stdout}\n{proc.stderr}"


def test_ruff_format_leaves_every_file_as_it_is() -> None:
    """One layout, the formatter's (``[tool.ruff.format]``): run ``ruff format engine audits normalizers scripts tests``."""
    proc = _run("ruff", "format", "--check", "engine", "audits", "normalizers", "scripts", "tests")
    assert proc.returncode == 0, f"ruff format would change these files (run ruff format on them):\n{proc.stdout}\n{proc.stderr}"
