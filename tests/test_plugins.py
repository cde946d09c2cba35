"""Plug-ins by entry points: the one registry type, built-ins from the source tree, and a separate package.

The distributions here are real: a hand-written ``*.dist-info`` folder on ``sys.path`` is what
``importlib.metadata`` reads for any installed package, and the end-to-end test installs
``tests/plugin_pkg`` with pip into a temporary folder and runs ``audit run`` on it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from engine import registry as registry_mod
from engine.errors import RegistryError
from engine.registry import BUILTIN, Registry, builtin_entries

REPO = Path(__file__).resolve().parents[1]
PLUGIN_PKG = REPO / "tests" / "plugin_pkg"
GROUPS = (
    "asr_backends",
    "sv_backends",
    "ser_backends",
    "tts_backends",
    "diarization_backends",
    "judge_backends",
    "sections",
    "normalizers",
    "dataset_readers",
    "runners",
    "trackers",
)


def pyproject_entry_points() -> dict[str, dict[str, str]]:
    import tomllib

    with open(REPO / "pyproject.toml", "rb") as fh:
        return dict(tomllib.load(fh)["project"]["entry-points"])


def fake_dist(root: Path, name: str, version: str, groups: dict[str, dict[str, str]]) -> None:
    """An installed distribution as importlib.metadata sees it: METADATA plus entry_points.txt."""
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    text = "".join(f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n" for g, eps in groups.items())
    (info / "entry_points.txt").write_text(text, encoding="utf-8")


@pytest.fixture()
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder on sys.path for fake distributions and their modules."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    return site


def test_every_kind_has_its_builtins_from_pyproject() -> None:
    from audits.registries import all_registries

    table = pyproject_entry_points()
    regs = all_registries()
    assert sorted(r.group for r in regs) == sorted(f"audit_engine.{g}" for g in GROUPS)
    assert sorted(g for g in table if g.startswith("audit_engine.")) == sorted(r.group for r in regs)  # one registry per group
    for reg in regs:
        declared = table[reg.group]
        assert {e.name: e.target for e in reg.entries() if e.origin == BUILTIN} == declared
        for name in declared:  # every built-in target imports and is what it claims
            assert reg.get(name) is not None


def test_an_installed_wheel_reads_the_builtins_from_its_metadata(on_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No pyproject.toml beside the code (a wheel): the built-ins come from audit-engine's entry_points.txt."""
    table = pyproject_entry_points()
    fake_dist(on_path, "audit-engine", "9.9", {g: eps for g, eps in table.items() if g.startswith("audit_engine.")})
    monkeypatch.setattr(registry_mod, "_source_tree_pyproject", lambda: None)
    for g in GROUPS:
        group = f"audit_engine.{g}"
        assert {e.name: e.target for e in builtin_entries(group)} == table[group]
        assert registry_mod.plugin_entries(group) == []  # the project's own entries are not plug-ins
    reg: Registry[type] = Registry("ASR backend", "audit_engine.asr_backends")
    assert {e.origin for e in reg.entries()} == {BUILTIN} and "pocketsphinx" in reg


def test_source_tree_without_any_install_finds_the_builtins(tmp_path: Path) -> None:
    """No audit-engine metadata anywhere on the path: the built-ins still come from pyproject.toml."""
    import numpy

    site_packages = Path(numpy.__file__).resolve().parents[1]
    farm = tmp_path / "site"
    farm.mkdir()
    for p in site_packages.iterdir():  # the environment's packages, less this project's install
        if not p.name.lower().replace("-", "_").startswith(("audit_engine", "__editable__")):
            (farm / p.name).symlink_to(p)
    src = tmp_path / "src"
    src.mkdir()
    for name in ("engine", "audits", "normalizers", "pyproject.toml"):
        (src / name).symlink_to(REPO / name)
    child = (  # the environment's packages after the standard library, as site would put them
        f"import sys; sys.path.insert(0, {str(src)!r}); sys.path.append({str(farm)!r})\n"
        "import importlib.metadata as m, json\n"
        "try:\n    m.distribution('audit-engine'); found = True\nexcept m.PackageNotFoundError:\n    found = False\n"
        "from engine.backends import ASR_BACKENDS\n"
        "from audits.sections import SECTIONS\n"
        "print(json.dumps({'found': found, 'asr': ASR_BACKENDS.names(), 'sections': SECTIONS.names(),"
        " 'origins': sorted({e.origin for e in ASR_BACKENDS.entries()})}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    proc = subprocess.run([sys.executable, "-S", "-c", child], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    table = pyproject_entry_points()
    assert got["found"] is False
    assert got["asr"] == sorted(table["audit_engine.asr_backends"])
    assert got["sections"] == sorted(table["audit_engine.sections"])
    assert got["origins"] == [BUILTIN]


def test_listing_imports_nothing_and_names_the_origin(on_path: Path) -> None:
    (on_path / "lazy_plug.py").write_text("class Thing:\n    pass\n", encoding="utf-8")
    fake_dist(on_path, "lazy-plug", "1.2", {"audit_engine.tts_backends": {"lazy": "lazy_plug:Thing"}})
    reg: Registry[type] = Registry("TTS backend", "audit_engine.tts_backends")
    assert "lazy" in reg.names() and "espeak-ng" in reg.names()
    origins = {e.name: e.origin for e in reg.entries()}
    assert origins["lazy"] == "lazy-plug 1.2" and origins["espeak-ng"] == BUILTIN
    assert "lazy_plug" not in sys.modules  # built-ins: test_listing_builtins_imports_no_backend_module
    assert reg.get("lazy").__name__ == "Thing" and "lazy_plug" in sys.modules
    sys.modules.pop("lazy_plug", None)


def test_listing_builtins_imports_no_backend_module() -> None:
    child = (
        "import sys\nfrom engine.backends import ASR_BACKENDS, SV_BACKENDS\n"
        "ASR_BACKENDS.names(); SV_BACKENDS.entries()\n"
        "print(sorted(m for m in sys.modules if m.startswith('engine.backends.') or m in ('faster_whisper', 'torch', 'ctranslate2')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_broken_entry_point_names_distribution_and_entry_point(on_path: Path) -> None:
    fake_dist(on_path, "broken-plug", "0.3", {"audit_engine.asr_backends": {"broken": "no_such_module_xyz:Backend"}})
    reg: Registry[type] = Registry("ASR backend", "audit_engine.asr_backends")
    assert "broken" in reg.names()  # listed, never silently skipped
    with pytest.raises(
        RegistryError, match=r"ASR backend 'broken' \(broken-plug 0\.3: broken = no_such_module_xyz:Backend.*cannot be imported"
    ) as info:
        reg.get("broken")
    assert isinstance(info.value.__cause__, ModuleNotFoundError)
    (on_path / "half_plug.py").write_text("X = 1\n", encoding="utf-8")
    fake_dist(on_path, "half-plug", "1.0", {"audit_engine.sections": {"half": "half_plug:Missing"}})
    sections: Registry[type] = Registry("audit section", "audit_engine.sections")
    with pytest.raises(RegistryError, match=r"half-plug 1\.0: half = half_plug:Missing.*has no attribute Missing"):
        sections.get("half")


def test_malformed_entry_point_value_is_an_error(on_path: Path) -> None:
    fake_dist(on_path, "odd-plug", "2.0", {"audit_engine.runners": {"odd": "odd_plug.just_a_module"}})
    reg: Registry[type] = Registry("runner", "audit_engine.runners")
    with pytest.raises(
        RegistryError, match=r"runner 'odd' \(odd-plug 2\.0: odd = odd_plug\.just_a_module.*audit_engine\.runners.*module:Attribute"
    ):
        reg.names()


def test_duplicate_names_across_distributions_name_both(on_path: Path) -> None:
    fake_dist(on_path, "first-plug", "1.0", {"audit_engine.dataset_readers": {"shared": "first_plug:Reader"}})
    fake_dist(on_path, "second-plug", "4.1", {"audit_engine.dataset_readers": {"shared": "second_plug:Reader"}})
    reg: Registry[type] = Registry("dataset reader", "audit_engine.dataset_readers")
    with pytest.raises(RegistryError, match="duplicate dataset reader name 'shared'") as info:
        reg.names()
    assert "first-plug 1.0" in str(info.value) and "second-plug 4.1" in str(info.value)
    with pytest.raises(RegistryError, match="duplicate"):  # and again: the registry is never left half-filled
        reg.get("csv")


def test_a_plugin_may_not_take_a_builtin_name(on_path: Path) -> None:
    fake_dist(on_path, "greedy-plug", "1.0", {"audit_engine.normalizers": {"basic": "greedy_plug:Basic"}})
    reg: Registry[type] = Registry("normalizer", "audit_engine.normalizers")
    with pytest.raises(
        RegistryError,
        match=r"duplicate normalizer name 'basic': offered by built-in: basic = normalizers\.english:BasicNormalizer and by greedy-plug "
        r"1\.0",
    ):
        reg.names()


def test_unknown_names_get_the_registrys_error_everywhere(tmp_path: Path) -> None:
    """The former copies of the 'not in registry' check now all say the registry's words."""
    from audits.recipes import parse_recipe
    from audits.runners import check_runner
    from audits.section_config import parse_backend_list
    from engine.backends import SER_BACKENDS
    from engine.errors import ConfigError
    from engine.model_registry import load_model_registry

    base = {"name": "r", "dataset": {"path": "m.jsonl"}, "models": ["x"]}
    with pytest.raises(ConfigError, match=r"r\.yaml: normalizer: unknown normalizer 'basik'; did you mean 'basic'\?"):
        parse_recipe({**base, "normalizer": "basik"}, "r.yaml")
    with pytest.raises(ConfigError, match=r"--engine: unknown runner 'rey'; did you mean 'ray'\? \(known: inprocess, ray"):
        check_runner("rey")
    with pytest.raises(ConfigError, match=r"e\.yaml: emotion\.backends: unknown speech-emotion backend 'prosidy'; did you mean 'prosody'"):
        parse_backend_list({"backends": ["prosidy"]}, SER_BACKENDS, "e.yaml: emotion")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "m.yaml").write_text("models:\n  m1: {backend: pocketspinx}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"model 'm1': unknown ASR backend 'pocketspinx'; did you mean 'pocketsphinx'"):
        load_model_registry(tmp_path)


def _tones(path: Path, bursts: int) -> Path:
    """``bursts`` 0.3 s tones separated by 0.3 s of silence."""
    sr = 16000
    tone = 0.3 * np.sin(2 * np.pi * 440 * np.arange(int(0.3 * sr)) / sr)
    gap = np.zeros(int(0.3 * sr))
    sf.write(path, np.concatenate([gap] + [np.concatenate([tone, gap]) for _ in range(bursts)]).astype(np.float32), sr)
    return path


@pytest.mark.slow
def test_separate_package_adds_a_backend_and_a_section(tmp_path: Path) -> None:
    """pip installs tests/plugin_pkg into a temporary target; `audit run` uses its backend and section."""
    target = tmp_path / "plugins"
    source = shutil.copytree(PLUGIN_PKG, tmp_path / "plugin_pkg")  # pip builds in the source folder: keep the repository clean
    pip = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert list(target.glob("toy_audit_plugin-0.1.0.dist-info"))
    data = tmp_path / "data"
    data.mkdir()
    rows = []
    for i, (bursts, ref) in enumerate([(1, "tone"), (2, "tone tone"), (3, "tone tone")]):  # the last reference misses one
        rows.append({"audio_filepath": str(_tones(data / f"c{i}.wav", bursts)), "text": ref, "utt_id": f"c{i}"})
    (data / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    configs = tmp_path / "configs"
    (configs / "models").mkdir(parents=True)
    (configs / "models" / "toy.yaml").write_text(
        "models:\n  toy-tones:\n    backend: tone-counter\n    options: {threshold: 0.05}\n", encoding="utf-8"
    )
    recipe = tmp_path / "toy.yaml"
    recipe.write_text(
        f"name: toy\ndataset: {{path: {data / 'manifest.jsonl'}, reader: nemo}}\nmodels: [toy-tones]\nnormalizer: basic\n"
        "warmup: 0\nscoring: {n_boot: 50, seed: 0}\ncliplen: {top: 2}\n",
        encoding="utf-8",
    )
    env = {**os.environ, "AUDIT_CONFIG_DIR": str(configs), "PYTHONPATH": os.pathsep.join([str(target), str(REPO)])}
    audit = [sys.executable, "-c", "from audits.cli.main import entrypoint; entrypoint()"]
    listed = subprocess.run(
        [*audit, "list", "backends", "--format", "json"], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path
    )
    assert listed.returncode == 0, listed.stderr
    lines = {r["name"]: r["origin"].split() for r in json.loads(listed.stdout)}
    assert lines["tone-counter"][:2] == ["toy-audit-plugin", "0.1.0"] and lines["cliplen"][:2] == ["toy-audit-plugin", "0.1.0"]
    assert lines["pocketsphinx"][0] == BUILTIN
    out = tmp_path / "run"
    proc = subprocess.run(
        [*audit, "run", str(recipe), "--out", str(out)], capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    table = pd.read_parquet(out / "utterances.parquet").set_index("utt_id")
    assert table.loc[["c0", "c1", "c2"], "hyp_raw"].tolist() == ["tone", "tone tone", "tone tone tone"]
    summary = json.loads((out / "summary.json").read_text())
    model = summary["models"]["toy-tones"]
    assert model["n_utts"] == 3 and model["n_failed"] == 0
    assert model["wer"] == pytest.approx(1 / 5)  # one insertion against five reference words
    assert summary["cliplen"] == {"models": {"toy-tones": {"clips": 3, "hyp_words": 6, "ref_words": 5, "longest": ["c2", "c1"]}}}
    report = (out / "report.md").read_text()
    assert "## Clip lengths (plug-in)" in report and "| toy-tones | 3 | 6 | 5 |" in report


def test_plugin_runners_run_the_pass_kinds_they_declare(on_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/plugin_pkg's runners, found through their entry points, declare the pass kinds they run and the
    engine asks that declaration, never the name: ``toy-serial`` (ASR shard passes) refuses a recipe whose
    sections need keyed or emotion passes before any model loads, naming the sections, what it runs and the
    runners that would (``toy-all`` among them), and nothing is written; it runs the bad-reference panel's
    re-run (an ASR pass); ``toy-all`` runs the emotion section's pass (not ASR) and its result is the
    built-in runner's."""
    from typer.testing import CliRunner

    import engine.engine
    from audits.cli.main import app

    runners = {"toy-serial": "toy_audit_plugin.runner:SerialRunner", "toy-all": "toy_audit_plugin.runner:SerialAllRunner"}
    fake_dist(on_path, "toy-audit-plugin", "0.1.0", {"audit_engine.runners": runners})
    monkeypatch.syspath_prepend(str(PLUGIN_PKG))  # the plug-in's modules, as an install would put them on the path
    monkeypatch.setattr(engine.engine, "RUNNERS", Registry("runner", "audit_engine.runners"))  # discovered afresh
    cfg = tmp_path / "cfg"
    (cfg / "models").mkdir(parents=True)
    (cfg / "models" / "sim.yaml").write_text(
        "models:\n  sim-a: {backend: simulated, options: {rtfx: 1000}, batch_size: 2}\n"
        "  sim-b: {backend: simulated, options: {rtfx: 1000, seed: 1}, batch_size: 2}\n"
    )
    monkeypatch.setenv("AUDIT_CONFIG_DIR", str(cfg))
    data = tmp_path / "data"
    data.mkdir()
    rows = [
        {
            "audio_filepath": str(_tones(data / f"c{i}.wav", i + 1)),
            "text": "the tone sounds here",
            "utt_id": f"c{i}",
            "emotion": ["neutral", "sad"][i % 2],
        }
        for i in range(4)
    ]
    (data / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    base = (
        f"name: toy\ndataset: {{path: {data / 'manifest.jsonl'}, reader: nemo}}\nmodels: [sim-a]\nnormalizer: basic\nwarmup: 0\n"
        "scoring: {n_boot: 20, seed: 0}\n"
    )
    refused = tmp_path / "refused.yaml"
    refused.write_text(
        base + "probes: {masking: {variants: [silence]}, orthography: {},\n"
        "  bad_reference: {panel: [sim-b], min_eligible_panel: 1}}\nemotion: {backends: [prosody]}\n"
    )
    out = tmp_path / "run-refused"
    res = CliRunner().invoke(app, ["run", str(refused), "--engine", "toy-serial", "--out", str(out)])
    assert res.exit_code != 0
    text = " ".join(res.output.split())
    assert (
        "recipe 'toy' has sections that run passes its runner does not (probes: masking re-runs; emotion: emotion-recognition pass): "
        "engine 'toy-serial' does not run shard:ser, keyed passes (it declares: shard:asr); use --engine inprocess or --engine ray or "
        "--engine toy-all, or drop these sections (probes, emotion) from the recipe"
    ) in text, text
    assert not out.exists(), "nothing may be written before the refusal"
    ok = tmp_path / "ok.yaml"
    ok.write_text(
        base + "probes: {orthography: {}, bad_reference: {panel: [sim-b], min_eligible_panel: 1}}\n"  # sim-b: a re-run (ASR pass)
        "perturbations: {families: [{kind: noise, noise: white, levels: [10]}], n_boot: 20}\n"
    )
    out = tmp_path / "run-ok"
    res = CliRunner().invoke(app, ["run", str(ok), "--engine", "toy-serial", "--out", str(out)])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["engine"]["runner"] == "toy-serial" and summary["models"]["sim-a"]["n_utts"] == 4  # the source clips
    assert summary["perturbations"]["ladders"][0]["models"]["sim-a"]["levels"][0]["n_utts"] == 4  # their noisy copies: in the ladder
    assert {"orthography", "bad_reference"} <= set(summary["probes"]) and summary["perturbations"], summary.keys()
    emo = tmp_path / "emo.yaml"
    emo.write_text(base + "emotion: {backends: [prosody]}\n")
    runs = {}
    for engine_name in ("toy-all", "inprocess"):
        out = tmp_path / f"run-{engine_name}"
        res = CliRunner().invoke(app, ["run", str(emo), "--engine", engine_name, "--out", str(out)])
        assert res.exit_code == 0, res.output
        runs[engine_name] = json.loads((out / "summary.json").read_text())
    assert runs["toy-all"]["engine"]["runner"] == "toy-all" and runs["toy-all"]["emotion"]["prosody"]["facts"]["n_ok"] == 4
    assert _without_timings(runs["toy-all"]["emotion"]) == _without_timings(runs["inprocess"]["emotion"])


def _without_timings(value: Any) -> Any:
    """A summary part less what differs between two runs of the same clips (timings, paths)."""
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if not any(t in k for t in ("time", "_s", "path", "dir", "rtf", "pid"))}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value
