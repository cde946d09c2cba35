"""Recipes and the model registry: safe YAML, strict keys, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from audits.recipes import list_recipes, load_recipe, parse_recipe, with_overrides
from engine.config import load_yaml
from engine.errors import ConfigError
from engine.model_registry import load_model_registry, resolve_models


def test_builtin_recipes_valid():
    names = list_recipes()
    assert "demo" in names
    for n in names:
        load_recipe(n)
    demo = load_recipe("demo")
    assert demo.models == ("whisper-tiny.en", "whisper-base", "pocketsphinx-en-us")
    assert demo.dataset.path == "builtin:demo-small"  # the quick demo; demo-full runs every clip
    full = load_recipe("demo-full")
    assert full.dataset.path == "builtin:demo" and full.models == demo.models and full.scoring == demo.scoring


def test_unknown_key_named(tmp_path: Path):
    p = tmp_path / "r.yaml"
    p.write_text("dataset: x.jsonl\nmodels: [whisper-tiny.en]\nnormaliser: basic\n")
    with pytest.raises(ConfigError, match=r"unknown key 'normaliser' \(did you mean 'normalizer'\?\)"):
        load_recipe(str(p))
    p.write_text("dataset: {path: x.jsonl, limt: 3}\nmodels: [a]\n")
    with pytest.raises(ConfigError, match="dataset: unknown key 'limt'"):
        load_recipe(str(p))


def test_yaml_tags_that_run_code_are_rejected(tmp_path: Path):
    p = tmp_path / "evil.yaml"
    p.write_text("dataset: !!python/object/apply:os.system ['echo pwned']\nmodels: [a]\n")
    with pytest.raises(ConfigError, match="line 1"):
        load_yaml(p)


def test_bad_types_and_missing_keys(tmp_path: Path):
    with pytest.raises(ConfigError, match="missing required key 'models'"):
        parse_recipe({"dataset": "x"}, "r.yaml")
    with pytest.raises(ConfigError, match="models: expected a list"):
        parse_recipe({"dataset": "x", "models": "whisper"}, "r.yaml")
    with pytest.raises(ConfigError, match=r"gaps\[0\]"):
        parse_recipe({"dataset": "x", "models": [], "scoring": {"gaps": [["a", "b"]]}}, "r.yaml")


def test_unknown_recipe_did_you_mean():
    with pytest.raises(ConfigError, match="did you mean 'demo'"):
        load_recipe("demoo")


def test_overrides():
    r = with_overrides(load_recipe("demo"), dataset="d.jsonl", models=["whisper-tiny.en"], limit=5)
    assert r.dataset.path == "d.jsonl" and r.models == ("whisper-tiny.en",) and r.dataset.limit == 5


def test_model_registry():
    reg = load_model_registry()
    for name in ("whisper-tiny.en", "whisper-base", "pocketsphinx-en-us", "parakeet-tdt-0.6b-v2", "canary-1b-flash", "whisper-large-v3"):
        assert name in reg
    assert len([e for e in reg.values() if "study" in e.tags]) >= 30
    with pytest.raises(ConfigError, match="did you mean 'whisper-tiny.en'"):
        resolve_models(["whisper-tiny"], reg)
    for name in ("whisper-tiny.en", "pocketsphinx-en-us"):
        avail = reg[name].availability()
        assert avail.runnable and avail.checked, avail.reason
    parakeet = reg["parakeet-tdt-0.6b-v2"].availability()
    assert not parakeet.runnable and ("pip install" in parakeet.reason or "hub" in parakeet.reason)


def test_registry_rejects_unknown_entry_keys(tmp_path: Path, monkeypatch):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "x.yaml").write_text("models:\n  m1: {backend: pocketsphinx, optoins: {}}\n")
    with pytest.raises(ConfigError, match="unknown key 'optoins'"):
        load_model_registry(tmp_path)
    (tmp_path / "models" / "x.yaml").write_text("models:\n  m1: {backend: pocketsphinxx}\n")
    with pytest.raises(ConfigError, match="did you mean 'pocketsphinx'"):
        load_model_registry(tmp_path)


def test_builtin_demo_corpora_and_their_subsets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from audits.pipeline import ensure_demo_corpus
    from audits.recipes import builtin_dataset_path

    monkeypatch.setenv("AUDIT_DATA_DIR", str(tmp_path))
    assert builtin_dataset_path("builtin:demo-small") == tmp_path / "demo-small"
    assert builtin_dataset_path("builtin:demo") == tmp_path / "demo"
    with pytest.raises(ConfigError, match="demo-small"):
        builtin_dataset_path("builtin:demo-tiny")
    # a built corpus of the default settings is used as it is (nothing is synthesized)
    for name, meta in (
        ("demo-small", '{"name": "demo", "seed": 0, "n_utts": 196, "subset": "small"}'),
        ("demo", '{"name": "demo", "seed": 0, "n_utts": 196}'),  # built before subsets existed: the full design
    ):
        (tmp_path / name / "shards").mkdir(parents=True)
        (tmp_path / name / "corpus.json").write_text(meta)
        assert ensure_demo_corpus(tmp_path / name) == tmp_path / name
    # a small corpus in the full corpus's folder is the user's: refused, not rebuilt (tests/test_demo_limit.py)
    (tmp_path / "demo" / "corpus.json").write_text('{"name": "demo", "seed": 0, "n_utts": 196, "subset": "small"}')
    with pytest.raises(ConfigError, match="audit corpus demo --out .* --force"):
        ensure_demo_corpus(tmp_path / "demo")
