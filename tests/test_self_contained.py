"""A clone of the repository is all a user has: nothing may reach outside its root.

Tests, scripts, recipes and documents that read a sibling ``shared`` folder (or any path above the root) pass
on a developer's machine and fail on a user's. This scans every tracked text file for paths that
climb out of the repository, and checks that every relative path a recipe names resolves inside it.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from engine.config import load_yaml

REPO = Path(__file__).resolve().parents[1]

TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".sh", ".toml", ".txt", ".cfg", ".ini", ""}

# Ways code and docs have reached outside the root: a sibling folder, climbing parents, an env
# variable that pointed at a sibling checkout.
ESCAPES = [
    re.compile(r"\.\./+shared\b"),
    re.compile(r"parents\[\s*[2-9]\s*\]\s*/"),
    re.compile(r"\bREPO(_ROOT)?\.parent\b"),
    re.compile(r"AUDIT_SHARED_DIR"),
]


def tracked_files() -> list[Path]:
    """Files git tracks plus untracked, not-ignored ones (what a commit would hold)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout
        files = [REPO / line for line in out.splitlines() if line]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an unpacked archive)
        files = [p for p in REPO.rglob("*") if ".venv" not in p.parts and ".git" not in p.parts]
    return [f for f in files if f.is_file() and (f.suffix in TEXT_SUFFIXES or f.name == "Makefile") and "fixtures" not in f.parts]


def test_no_file_reaches_outside_the_repository() -> None:
    offenders = []
    this = Path(__file__).resolve()
    for path in tracked_files():
        if path.resolve() == this:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for lineno, line in enumerate(text.splitlines(), start=1):
            for pattern in ESCAPES:
                if pattern.search(line):
                    offenders.append(f"{path.relative_to(REPO)}:{lineno}: {line.strip()[:120]}")
    assert not offenders, "these lines reach outside the repository root:\n" + "\n".join(offenders)


@pytest.mark.parametrize("recipe", sorted((REPO / "audit_configs" / "recipes").glob("*.yaml")), ids=lambda p: p.stem)
def test_recipe_dataset_paths_stay_inside_the_repository(recipe: Path) -> None:
    data = load_yaml(recipe)
    ds = data.get("dataset")
    path = ds if isinstance(ds, str) else (ds or {}).get("path", "")
    if not path or path.startswith("builtin:") or Path(path).is_absolute() or "://" in path:
        return
    if "/" in path and not path.startswith(".") and not (REPO / path).exists():
        return  # a hub id such as 'org/name' (the recipe says to pass --dataset)
    resolved = (REPO / path).resolve()
    assert resolved.is_relative_to(REPO), f"{recipe.name}: dataset.path {path!r} resolves outside the repository ({resolved})"


def test_the_scanner_catches_an_escape(tmp_path: Path) -> None:
    """The check above can fail: each pattern matches a line that reaches outside."""
    up = ".." + "/"
    samples = [
        "p = REPO" + ".parent / 'shared'",
        f"open('{up}shared/fixtures/x')",
        "Path(__file__).parents[2] / 'shared'",
        "os.environ['AUDIT_" + "SHARED_DIR']",
    ]
    for s in samples:
        assert any(p.search(s) for p in ESCAPES), s
