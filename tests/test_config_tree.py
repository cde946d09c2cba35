"""The configuration tree is located in one place (engine/config_tree.py): the shipped ``audit_configs``
package, read through importlib.resources, or ``$AUDIT_CONFIG_DIR``; every reader goes through it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import engine.registry
from audits.profiles.maps import load_map, shipped_maps
from audits.recipes import data_dir, find_recipe, list_recipes, load_recipe
from engine.backends.availability import install_hint
from engine.backends.hosted.judges import default_prompts_path, load_prompts
from engine.config_tree import config_dir, display_path, resolve_relative, shipped_config_dir, source_root
from engine.errors import ConfigError
from engine.model_registry import load_model_registry, read_study_table

REPO = Path(__file__).resolve().parents[1]


def test_the_checkout_reads_the_shipped_package_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AUDIT_CONFIG_DIR", raising=False)
    assert shipped_config_dir().resolve() == (REPO / "audit_configs").resolve() == config_dir().resolve()  # the same files, no copy
    assert "demo" in list_recipes() and find_recipe("demo") == config_dir() / "recipes" / "demo.yaml"
    assert "whisper-tiny.en" in load_model_registry() and read_study_table()
    assert "kachru" in shipped_maps() and load_map("kachru", "test").path == "audit_configs/conditions/kachru.yaml"
    assert default_prompts_path() == config_dir() / "judges" / "prompts.yaml" and load_prompts(default_prompts_path())


def test_a_folder_of_ones_own_replaces_the_shipped_folders_for_every_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = tmp_path / "mine"
    for sub in ("models", "recipes", "conditions", "judges"):
        (own / sub).mkdir(parents=True)
    (own / "models" / "m.yaml").write_text("models:\n  only-mine:\n    backend: simulated\n", encoding="utf-8")
    (own / "recipes" / "r.yaml").write_text("name: r\ndataset: {path: x.jsonl}\nmodels: [only-mine]\n", encoding="utf-8")
    shutil.copy2(REPO / "audit_configs" / "conditions" / "kachru.yaml", own / "conditions" / "accents.yaml")
    shutil.copy2(REPO / "audit_configs" / "judges" / "prompts.yaml", own / "judges" / "prompts.yaml")
    monkeypatch.setenv("AUDIT_CONFIG_DIR", str(own))
    assert config_dir() == own
    assert list_recipes() == ["r"] and load_recipe("r").models == ("only-mine",)
    assert list(load_model_registry()) == ["only-mine"]
    assert shipped_maps() == ["accents"]
    own_map = load_map("accents", "test")
    assert own_map.path == str(own / "conditions" / "accents.yaml")  # a file outside the shipped tree is named by its path
    assert default_prompts_path() == own / "judges" / "prompts.yaml"
    with pytest.raises(ConfigError, match=r"unknown recipe 'demo'.*known: r\)"):
        find_recipe("demo")
    (own / "recipes" / "r.yaml").unlink()
    with pytest.raises(ConfigError, match=r"known: none in .*mine/recipes"):
        find_recipe("demo")


def test_folders_the_override_lacks_come_from_the_shipped_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = tmp_path / "mine"
    (own / "models").mkdir(parents=True)
    (own / "models" / "m.yaml").write_text("models:\n  only-mine:\n    backend: simulated\n", encoding="utf-8")
    monkeypatch.setenv("AUDIT_CONFIG_DIR", str(own))
    assert list(load_model_registry()) == ["only-mine"]  # models/ is replaced ...
    assert "demo" in list_recipes() and "kachru" in shipped_maps()  # ... the rest is the shipped tree's
    assert default_prompts_path() == shipped_config_dir() / "judges" / "prompts.yaml"
    assert load_map("kachru", "test").path == "audit_configs/conditions/kachru.yaml"


@pytest.mark.parametrize("case", ["missing", "file", "too-deep"])
def test_an_invalid_config_folder_is_a_clear_error(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = {"missing": tmp_path / "nope", "file": tmp_path / "f.yaml", "too-deep": tmp_path / "cfg" / "recipes"}[case]
    if case == "file":
        target.write_text("models: {}\n")
    if case == "too-deep":
        target.mkdir(parents=True)
    monkeypatch.setenv("AUDIT_CONFIG_DIR", str(target))
    expected = {"missing": "no such folder", "file": "not a folder", "too-deep": "holds none of models/, recipes/"}[case]
    for reader in (list_recipes, load_model_registry, shipped_maps, default_prompts_path):
        with pytest.raises(ConfigError, match=re.escape(f"AUDIT_CONFIG_DIR={target}: {expected}")):
            reader()


def test_installed_paths_do_not_point_into_site_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """From a checkout, relative recipe paths and the demo data fall back to the checkout; from a wheel
    (no pyproject.toml beside the code) to the working directory, as ``runs/`` does."""
    monkeypatch.delenv("AUDIT_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert source_root() == REPO and data_dir() == REPO / "data"
    assert resolve_relative("tests/fixtures") == REPO / "tests" / "fixtures" and install_hint("ray") == "pip install '.[ray]'"
    monkeypatch.setattr(engine.registry, "_source_tree_pyproject", lambda: None)  # what an installed wheel sees
    assert source_root() is None and data_dir() == tmp_path / "data"
    assert resolve_relative("tests/fixtures") == Path("tests/fixtures")
    assert install_hint("ray") == "pip install 'audit-engine[ray]'" and install_hint("core") == "pip install 'audit-engine'"
    monkeypatch.setenv("AUDIT_DATA_DIR", str(tmp_path / "elsewhere"))
    assert data_dir() == tmp_path / "elsewhere"


def test_an_install_that_predates_the_package_still_reads_the_checkouts_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    """An editable install made before ``audit_configs`` existed maps only the code packages; from a
    checkout the tree is then read in place (as the plug-in registry reads the checkout's pyproject.toml)."""
    import engine.config_tree as tree

    def not_importable(package: str) -> None:
        raise ModuleNotFoundError(f"No module named {package!r}")

    monkeypatch.setattr(tree.resources, "files", not_importable)
    assert shipped_config_dir() == REPO / "audit_configs"
    monkeypatch.setattr(engine.registry, "_source_tree_pyproject", lambda: None)
    with pytest.raises(ConfigError, match="reinstall audit-engine, or set AUDIT_CONFIG_DIR"):
        shipped_config_dir()


def test_display_path_names_shipped_files_the_same_everywhere(tmp_path: Path) -> None:
    assert display_path(shipped_config_dir() / "models" / "local.yaml") == "audit_configs/models/local.yaml"
    assert display_path(tmp_path / "x.yaml") == str(tmp_path / "x.yaml")


def test_only_config_tree_locates_configuration() -> None:
    """No other module reads the variable, opens the package or builds a ``configs`` path of its own."""
    pattern = re.compile(
        r"(environ|getenv)\W.*AUDIT_CONFIG_DIR|resources\.files\([\"']audit_configs|[\"']configs[\"']"
        r"|\bREPO_ROOT\b|\bCONFIG_DIR\b"
    )
    offenders = []
    for pkg in ("engine", "audits", "normalizers"):
        for path in sorted((REPO / pkg).rglob("*.py")):
            if path == REPO / "engine" / "config_tree.py":
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(line):
                    offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
