"""Heavy or demo-only packages are extras, not core dependencies; code that needs one says which extra
installs it before any work starts (and imports none of them at module level)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import engine.backends.availability as availability
from engine.backends import ASR_BACKENDS, SER_BACKENDS
from engine.backends.availability import model_availability
from engine.engine import EngineOptions
from engine.errors import BackendUnavailable

REPO = Path(__file__).resolve().parents[1]
#: import name -> the extra that installs it
OPTIONAL = {"ray": "ray", "pocketsphinx": "bundled", "librosa": "demo", "parselmouth": "demo"}


def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _dist(req: str) -> str:
    return re.split(r"[\[<>=!~ ;]", req, maxsplit=1)[0].strip().lower()


def test_core_leaves_the_heavy_packages_to_their_extras() -> None:
    project = _pyproject()
    core = {_dist(r) for r in project["dependencies"]}
    assert not core & {"ray", "pocketsphinx", "librosa", "praat-parselmouth"}, core
    extras = {name: {_dist(r) for r in reqs} for name, reqs in project["optional-dependencies"].items()}
    assert "ray" in extras["ray"] and "pocketsphinx" in extras["bundled"] and {"librosa", "praat-parselmouth"} <= extras["demo"]
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    make_extras = set(re.search(r"^EXTRAS := (.+)$", makefile, flags=re.MULTILINE).group(1).split(","))  # type: ignore[union-attr]
    assert {"bundled", "demo", "speaker", "semantic", "kokoro"} <= make_extras  # make demo installs what the demo runs
    assert '-e ".[$(EXTRAS),ray,test]"' in makefile  # make test adds Ray


def _module_level_imports(path: Path) -> Iterator[tuple[int, str]]:
    """Imports executed when the module is imported (not inside a function or class body)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        stmts = [node]
        if isinstance(node, (ast.If, ast.Try)):
            stmts = [n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))]
        for stmt in stmts:
            if isinstance(stmt, ast.Import):
                yield from ((stmt.lineno, a.name.split(".")[0]) for a in stmt.names)
            elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
                yield stmt.lineno, stmt.module.split(".")[0]


def test_no_module_imports_an_optional_package_when_imported() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {name}"
        for pkg in ("engine", "audits", "normalizers")
        for path in sorted((REPO / pkg).rglob("*.py"))
        for line, name in _module_level_imports(path)
        if name in OPTIONAL
    ]
    assert not offenders, offenders


@pytest.fixture
def hidden(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """Make the named modules look uninstalled to the availability checks."""
    gone: set[str] = set()
    real = availability.has_module
    monkeypatch.setattr(availability, "has_module", lambda name: name not in gone and real(name))
    return gone


def test_the_ray_engine_names_its_extra_before_anything_runs(hidden: set[str]) -> None:
    hidden.add("ray")
    with pytest.raises(BackendUnavailable, match=re.escape("needs ray, which the 'ray' extra installs: pip install '.[ray]'")):
        EngineOptions(kind="ray").check()
    from engine.run.ray_setup import init_ray

    with pytest.raises(BackendUnavailable, match="'ray' extra"):
        init_ray()
    EngineOptions(kind="inprocess").check()  # the in-process engine needs none of it


def test_backends_name_the_extra_that_installs_their_package(hidden: set[str]) -> None:
    hidden.update({"pocketsphinx", "librosa"})
    ps = model_availability("pocketsphinx", {})
    assert not ps and "needs pocketsphinx: pip install '.[bundled]'" in ps.reason
    memo = ASR_BACKENDS.get("memorizer").availability({"fallback": "whisper-tiny.en"})
    assert not memo and "needs librosa: pip install '.[demo]'" in memo.reason
    with pytest.raises(BackendUnavailable, match=re.escape("the prosody emotion backend needs librosa, which the 'demo' extra installs")):
        SER_BACKENDS.get("prosody")().load()
    with pytest.raises(BackendUnavailable, match=re.escape("the memorizer control needs librosa, which the 'demo' extra installs")):
        ASR_BACKENDS.get("memorizer")(index="unused").load()


def test_the_demo_corpus_names_its_extra_before_synthesizing(hidden: set[str], tmp_path: Path) -> None:
    from engine.corpus.demo import build_demo_corpus

    hidden.add("parselmouth")
    with pytest.raises(
        BackendUnavailable,
        match=re.escape(
            "the demo corpus (its emotions are Praat prosody transforms) needs parselmouth, "
            "which the 'demo' extra installs: pip install '.[demo]'"
        ),
    ):
        build_demo_corpus(tmp_path / "demo", subset="small")
    assert not (tmp_path / "demo").exists()  # refused before anything was written
