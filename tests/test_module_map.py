"""docs/design.md's module map names every module of the three packages, and no module that does not exist.

The map is the first place a contributor looks; a map that misses modules (or names deleted
ones) sends them to the wrong file. Rules of the map's code block: a line whose first word ends
in ``/`` opens a folder (unindented: a top-level package; indented: a folder inside the current
package); every ``name.py`` on that line and on the lines below it belongs to that folder until
the next folder line. Top-level folders other than the three packages are not checked.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("normalizers", "engine", "audits")
SKIP = {"__init__.py", "__main__.py"}


def _map_block() -> list[str]:
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    after = text.split("### Module map", 1)[1]
    block = after.split("```", 2)[1]
    return block.splitlines()


def mapped_modules() -> set[str]:
    """Relative paths of the ``.py`` files the module map names."""
    named: set[str] = set()
    top = ""
    folder = ""
    for line in _map_block():
        if not line.strip():
            continue
        first = line.split()[0]
        indented = line[:1].isspace()
        if first.endswith("/"):
            if not indented:
                top = first.rstrip("/")
                folder = top
            else:
                folder = f"{top}/{first.rstrip('/')}"
        elif indented and first.endswith(".py") and line.startswith("  ") and not line.startswith("   "):
            folder = top  # a module line of the package itself
        if top not in PACKAGES:
            continue
        for name in re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*\.py)\b", line):
            if name not in SKIP:
                named.add(f"{folder}/{name}")
    return named


def existing_modules() -> set[str]:
    found: set[str] = set()
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            if path.name in SKIP or "__pycache__" in path.parts:
                continue
            found.add(path.relative_to(ROOT).as_posix())
    return found


def test_module_map_names_every_module() -> None:
    missing = sorted(existing_modules() - mapped_modules())
    assert not missing, f"docs/design.md's module map does not name: {missing}"


def test_module_map_names_no_missing_module() -> None:
    extra = sorted(mapped_modules() - existing_modules())
    assert not extra, f"docs/design.md's module map names modules that do not exist: {extra}"


CONTRIBUTING_TOPICS = ("Add an ASR backend", "Add an ASR metric", "Add an audit section", "Add a dataset reader", "Add a recipe")
_PATH = re.compile(r"`([A-Za-z0-9_.<>/-]+(?:/|\.(?:py|toml|yaml|md)))`")


def contributing_paths() -> dict[str, list[str]]:
    """Every repository path docs/contributing.md names in backticks, by the section it is named in."""
    text = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    out: dict[str, list[str]] = {}
    for part in text.split("\n## ")[1:]:
        title, body = part.split("\n", 1)
        out[title.strip()] = [p for p in _PATH.findall(body) if "/" in p or p.endswith((".toml", ".md"))]
    return out


def test_contributing_page_names_files_that_exist_and_modules_on_the_map() -> None:
    """docs/contributing.md: one numbered list per kind of change; every file it names exists (a ``<name>``
    placeholder: its folder does), and every module it names is on the module map."""
    sections = contributing_paths()
    assert list(sections) == list(CONTRIBUTING_TOPICS)
    text = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    mapped = mapped_modules()
    for title, paths in sections.items():
        body = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
        assert re.search(r"^1\. ", body, re.M) and re.search(r"^3\. ", body, re.M), f"{title}: a numbered list of the files touched"
        assert any(p.endswith(".py") for p in paths) or title == "Add a recipe", title
        for p in paths:
            if "<" in p:
                folder = p.split("<", 1)[0].rsplit("/", 1)[0]
                assert (ROOT / folder).is_dir(), f"{title}: {p}: no folder {folder}"
                continue
            path = p if (ROOT / p).exists() or p.startswith(("tests/", "docs/")) else f"docs/{p}"  # links relative to docs/
            assert (ROOT / path).exists(), f"{title}: {p} does not exist"
            if path.endswith(".py") and path.split("/", 1)[0] in PACKAGES and Path(path).name not in SKIP:
                assert path in mapped, f"{title}: {path} is not on docs/design.md's module map"


def test_readme_links_the_contributing_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/contributing.md)" in readme
