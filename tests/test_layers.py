"""The layering rules, checked from the import graph of the source (every import, lazy ones included).

* ``normalizers`` imports nothing of the project but itself;
* ``engine`` imports nothing of ``audits`` or ``normalizers`` (it moves audio and never scores);
* inside ``engine``, its two ways of running work meet only in the entry point ``engine/engine.py``:
  ``engine/run/`` (shard passes) imports nothing of ``engine/keyed/`` (keyed passes), and
  ``engine/keyed/`` imports of ``engine/run/`` only the worker set-up ``engine/run/ray_setup.py``;
  the entry point is imported by the rest of the engine only from ``engine/run/embed_runner.py``
  (which submits the speaker and emotion passes through it); the engine's data model, storage,
  ``audio/``, ``backends/``, ``datasets/``, ``corpus/`` and ``perturb/`` import neither family nor the
  entry point;
* no import cycles between modules, in the packages or in ``scripts/``;
* no module over ~800 lines, so a newcomer can read any one file.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("normalizers", "engine", "audits")
MAX_LINES = 800


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def source_files() -> Iterator[Path]:
    for pkg in PACKAGES:
        yield from sorted((REPO / pkg).rglob("*.py"))


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """Project modules that ``path`` imports anywhere (top level or inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = module_name(path)
    out: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg_parts = here.split(".") if path.name == "__init__.py" else here.split(".")[:-1]
                pkg_parts = pkg_parts[: len(pkg_parts) - (node.level - 1)]
                base = ".".join([*pkg_parts, base] if base else pkg_parts)
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        for name in names:
            # the longest known module that prefixes the name (``from a.b import c`` may import a.b or a.b.c)
            parts = name.split(".")
            for i in range(len(parts), 0, -1):
                cand = ".".join(parts[:i])
                if cand in known:
                    if cand != here:
                        out.add(cand)
                    break
    return out


def import_graph(files: list[Path]) -> dict[str, set[str]]:
    known = {module_name(f) for f in files}
    return {module_name(f): imported_modules(f, known) for f in files}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules, or None (depth-first search with colours)."""
    colour: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            # a package's __init__ importing its own submodules is not a cycle of concern
            if nxt.startswith(node + ".") or node.startswith(nxt + "."):
                continue
            if colour.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if colour.get(nxt) is None:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        colour[node] = 2
        return None

    for node in sorted(graph):
        if colour.get(node) is None:
            found = visit(node)
            if found:
                return found
    return None


GRAPH = import_graph(list(source_files()))


def test_normalizers_import_nothing_of_the_project() -> None:
    bad = {m: sorted(d for d in deps if not d.startswith("normalizers")) for m, deps in GRAPH.items() if m.startswith("normalizers")}
    bad = {m: d for m, d in bad.items() if d}
    assert not bad, f"normalizers must import nothing of the project: {bad}"


def test_engine_never_imports_audits_or_normalizers() -> None:
    bad = {m: sorted(d for d in deps if d.startswith(("audits", "normalizers"))) for m, deps in GRAPH.items() if m.startswith("engine")}
    bad = {m: d for m, d in bad.items() if d}
    assert not bad, f"engine must not import audits or normalizers: {bad}"


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


SHARD_PASSES, KEYED_PASSES, ENTRY_POINT = "engine.run", "engine.keyed", "engine.engine"
#: the one module of engine/run/ that keyed passes share: connecting to Ray, worker logging, placement, option checks
SHARED_WORKER_SETUP = "engine.run.ray_setup"
#: what the engine builds on: modules here import neither family nor the entry point
FOUNDATION = (
    "engine.data",
    "engine.errors",
    "engine.config",
    "engine.config_tree",
    "engine.registry",
    "engine.model_registry",
    "engine.storage",
    "engine.audio",
    "engine.backends",
    "engine.datasets",
    "engine.corpus",
    "engine.perturb",
)


def test_shard_passes_import_nothing_of_keyed_passes() -> None:
    bad = {m: sorted(d for d in deps if _within(d, KEYED_PASSES)) for m, deps in GRAPH.items() if _within(m, SHARD_PASSES)}
    bad = {m: d for m, d in bad.items() if d}
    assert not bad, f"engine/run/ must not import engine/keyed/ (they meet in engine/engine.py): {bad}"


def test_keyed_passes_use_only_the_shared_worker_setup_of_shard_passes() -> None:
    bad = {
        m: sorted(d for d in deps if _within(d, SHARD_PASSES) and d != SHARED_WORKER_SETUP)
        for m, deps in GRAPH.items()
        if _within(m, KEYED_PASSES)
    }
    bad = {m: d for m, d in bad.items() if d}
    assert not bad, f"engine/keyed/ may import of engine/run/ only {SHARED_WORKER_SETUP}: {bad}"


def test_the_entry_point_is_the_one_place_the_families_meet() -> None:
    users = sorted(m for m, deps in GRAPH.items() if _within(m, "engine") and ENTRY_POINT in deps)
    assert users == ["engine.run.embed_runner"], f"inside engine, only engine/run/embed_runner.py submits through the entry point: {users}"
    both = sorted(
        m
        for m, deps in GRAPH.items()
        if _within(m, "engine")
        and any(_within(d, SHARD_PASSES) for d in deps)
        and any(_within(d, KEYED_PASSES) for d in deps)
        and not _within(m, KEYED_PASSES)
    )
    assert both == [ENTRY_POINT], f"only engine/engine.py imports both engine/run/ and engine/keyed/: {both}"


def test_the_engine_foundation_imports_neither_family() -> None:
    assert all(any(m == f or m.startswith(f + ".") for m in GRAPH) for f in FOUNDATION), "a FOUNDATION entry names no module"
    bad = {
        m: sorted(d for d in deps if _within(d, SHARD_PASSES) or _within(d, KEYED_PASSES) or d == ENTRY_POINT)
        for m, deps in GRAPH.items()
        if any(_within(m, f) for f in FOUNDATION)
    }
    bad = {m: d for m, d in bad.items() if d}
    assert not bad, f"the engine's data model, storage, audio, backends, datasets, corpus and perturbations must not import a runner: {bad}"


def test_no_import_cycles_in_the_packages() -> None:
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_import_cycles_in_scripts() -> None:
    files = sorted((REPO / "scripts").glob("*.py"))
    names = {f.stem for f in files}
    graph: dict[str, set[str]] = {}
    for f in files:
        tree = ast.parse(f.read_text(encoding="utf-8"))
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in names}
            elif isinstance(node, ast.ImportFrom) and node.module in names:
                deps.add(node.module)
        graph[f.stem] = deps - {f.stem}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle in scripts/: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("path", [*source_files(), *sorted((REPO / "scripts").glob("*.py"))], ids=lambda p: str(p.relative_to(REPO)))
def test_modules_stay_readable(path: Path) -> None:
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{path.relative_to(REPO)} has {n} lines (limit {MAX_LINES}): split it by concept"


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
