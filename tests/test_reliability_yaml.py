"""Reliability class 14: YAML last-wins.

Every configuration file (recipes, condition maps, model registries, judge prompts, pipeline
configs) is read by one loader (``engine.config.load_yaml``) that refuses a key written twice at
any depth, naming the file, the line and the key (YAML itself keeps the last one silently), and
anything but plain data: timestamps, binary, sets, merge keys and Python tags, with the file and
line. Lists whose semantics make a repeat a duplicate (a condition map's aliases, outputs and
allowed values, a label map's labels, a judge task's choices) are refused too. Anchors and aliases
stay accepted: a list written once and reused is plain data, and its expansion is bounded.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from audits.emotion.metrics import LabelMap
from audits.profiles.maps import load_map
from audits.recipes import load_recipe
from engine.backends.hosted.judges import load_prompts
from engine.config import load_yaml, parse_yaml
from engine.errors import BackendUnavailable, ConfigError
from engine.model_registry import load_model_registry

REPO = Path(__file__).resolve().parents[1]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def test_a_recipe_with_models_twice_is_refused_naming_file_line_and_key(tmp_path: Path) -> None:
    recipe = _write(
        tmp_path, "r.yaml", "name: r\ndataset: {path: builtin:demo}\nmodels: [whisper-tiny.en]\nwarmup: 0\nmodels: [pocketsphinx-en-us]\n"
    )
    with pytest.raises(ConfigError, match=r"r\.yaml, line 5, column 1: .*key 'models' appears twice in one mapping \(first at line 3\)"):
        load_recipe(str(recipe))
    # anchors and aliases stay: a list written once and reused is plain data; an explicit plain tag too
    assert parse_yaml("local: &l [a, b]\nmodels: *l\n", "x.yaml") == {"local": ["a", "b"], "models": ["a", "b"]}
    assert parse_yaml("x: !!str 5\n", "x.yaml") == {"x": "5"}


@pytest.mark.parametrize(
    "text,line,key",
    [
        ("scoring:\n  n_boot: 10\n  seed: 1\n  n_boot: 2000\n", 4, "n_boot"),  # nested, block style
        ("scoring: {n_boot: 10, n_boot: 20}\n", 1, "n_boot"),  # flow style
        ("profiles:\n  ladders:\n    - column: bg\n      levels: {n20: 20, n10: 10, n20: 5}\n", 4, "n20"),  # in a list item, 4 levels deep
        ("a: 1\n1: x\ntrue: y\n", 3, "True"),  # 1 and true are one key to Python: the second would replace the first
    ],
)
def test_duplicate_keys_at_any_depth(tmp_path: Path, text: str, line: int, key: str) -> None:
    with pytest.raises(ConfigError, match=rf"f\.yaml, line {line}, .*key '?{re.escape(key)}'? appears twice"):
        load_yaml(_write(tmp_path, "f.yaml", text))


@pytest.mark.parametrize(
    "text,what",
    [
        ("date: 2024-05-01\n", "timestamp"),
        ("blob: !!binary aGVsbG8=\n", "binary"),
        ("s: !!set {a, b}\n", "set"),
        ("o: !!omap [{a: 1}, {b: 2}]\n", "omap"),
        ("base: &b {n_boot: 10}\nscoring:\n  <<: *b\n  n_boot: 20\n", "merge keys"),
    ],
)
def test_anything_but_plain_data_is_refused_with_the_line(tmp_path: Path, text: str, what: str) -> None:
    with pytest.raises(ConfigError, match=rf"f\.yaml, line \d+, column \d+: .*{re.escape(what)}"):
        load_yaml(_write(tmp_path, "f.yaml", text))


def _map(tmp_path: Path, values: str, outputs: str = "[t]", allowed: str = "{t: [a, b]}") -> Path:
    return _write(tmp_path, "m.yaml", f"name: m\noutputs: {outputs}\nallowed: {allowed}\nsources: {{s: x}}\nvalues:\n{values}")


@pytest.mark.parametrize(
    "values,outputs,allowed,match",
    [
        ("  one: {t: a, source: s}\n  one: {t: b, source: s}\n", "[t]", "{t: [a, b]}", r"m\.yaml, line 7, .*key 'one' appears twice"),
        (
            "  one: {t: a, source: s, aliases: [uno, eins, uno]}\n",
            "[t]",
            "{t: [a, b]}",
            r"values\.one\.aliases\[2\]: 'uno' is listed twice",
        ),
        ("  one: {t: a, source: s, aliases: [Un-o, un o]}\n", "[t]", "{t: [a, b]}", r"aliases\[1\]: 'un o' \(as 'un-o'\) is listed twice"),
        ("  one: {t: a, source: s, aliases: [ONE]}\n", "[t]", "{t: [a, b]}", r"aliases\[0\]: 'ONE' is the entry's own name"),
        ("  one: {t: a, source: s}\n", "[t, t]", "{t: [a, b]}", r"outputs\[1\]: 't' is listed twice"),
        ("  one: {t: a, source: s}\n", "[t]", "{t: [a, b, a]}", r"allowed\.t\[2\]: 'a' is listed twice"),
    ],
)
def test_a_condition_map_naming_one_value_twice_is_refused(tmp_path: Path, values: str, outputs: str, allowed: str, match: str) -> None:
    path = _map(tmp_path, values, outputs, allowed)
    with pytest.raises(ConfigError, match=match):
        load_map(str(path), "profiles.maps[0]")


def test_a_label_map_naming_one_label_twice_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "labels.csv", "# raw,canonical\nhap,happy\nang,angry\nHAP,sad\n")
    with pytest.raises(ConfigError, match=r"labels\.csv, line 4: label 'HAP' is mapped twice \(first at line 2\)"):
        LabelMap.from_file(path)
    with pytest.raises(ConfigError, match="'Happy' and 'happy ' are one label"):
        LabelMap({"Happy": "happy", "happy ": "sad"})


def test_a_model_registry_naming_one_model_twice_is_refused(tmp_path: Path) -> None:
    _write(tmp_path, "models/a.yaml", "models:\n  m1: {backend: simulated}\n  m2: {backend: simulated}\n  m1: {backend: memorizer}\n")
    with pytest.raises(ConfigError, match=r"a\.yaml, line 4, .*key 'm1' appears twice"):
        load_model_registry(tmp_path)


def test_a_judge_prompt_file_naming_one_task_or_choice_twice_is_refused(tmp_path: Path) -> None:
    task = "    prompt: say\n    answer: {key: a, type: choice, choices: [A, B]}\n"
    twice = _write(tmp_path, "p.yaml", f"tasks:\n  t1:\n{task}  t1:\n{task}")
    with pytest.raises(ConfigError, match=r"p\.yaml, line 5, .*key 't1' appears twice"):
        load_prompts(twice)
    choice = _write(tmp_path, "q.yaml", "tasks:\n  t1:\n    prompt: say\n    answer: {key: a, type: choice, choices: [A, B, a]}\n")
    with pytest.raises(ConfigError, match=r"choices: 'A', 'a' listed twice"):
        load_prompts(choice)


def test_a_pipeline_config_goes_through_the_same_loader(tmp_path: Path) -> None:
    from engine.backends.diarization.pyannote import hub_references

    cfg = _write(tmp_path, "config.yaml", "pipeline:\n  name: x.SpeakerDiarization\n  params: {segmentation: a}\n  params: {}\n")
    with pytest.raises(BackendUnavailable, match=r"config\.yaml, line 4, .*key 'params' appears twice"):
        hub_references(cfg)


def test_every_yaml_read_in_the_repository_goes_through_the_one_loader() -> None:
    """No yaml.load / yaml.safe_load / yaml.full_load outside engine/config.py's loader, in code, scripts or tests."""
    pattern = re.compile(r"\byaml\.(safe_load|load|full_load|unsafe_load|load_all|safe_load_all)\s*\(")
    found = []
    for root in ("engine", "audits", "normalizers", "scripts", "tests"):
        for f in (REPO / root).rglob("*.py"):
            if f.name == Path(__file__).name:
                continue
            for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(line.split("#", 1)[0]) and "in code for s in" not in line:
                    found.append(f"{f.relative_to(REPO)}:{i}")
    assert found == []
