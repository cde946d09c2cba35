"""``--models hf:ORG/NAME[@REVISION]``: a hub checkpoint resolved from a real (offline) Hugging Face cache.

The cache is laid out as huggingface_hub writes it (``models--ORG--NAME/refs/main`` naming a commit,
``snapshots/<commit>/`` holding the files), with a tiny randomly initialised wav2vec2 CTC model in it,
so resolution, family detection and the transformers load all run for real, without network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.errors import ConfigError
from engine.hub_models import HubRef, detect_family
from engine.model_registry import hub_entry
from engine.sweep import select_models
from tests.conftest import write_manifest

COMMIT = "0123456789abcdef0123456789abcdef01234567"
ROOT = Path(__file__).resolve().parents[1]


def _cache_repo(hub: Path, repo_id: str, build, commit: str = COMMIT, branch: str = "main") -> Path:
    """A hub cache entry for ``repo_id`` at ``commit``, with ``build(folder)`` writing its files."""
    repo = hub / f"models--{repo_id.replace('/', '--')}"
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    build(snap)
    (repo / "refs").mkdir()
    (repo / "refs" / branch).write_text(commit)
    return snap


def _config_only(config: dict):
    def build(folder: Path) -> None:
        (folder / "config.json").write_text(json.dumps(config))

    return build


@pytest.fixture()
def hub_cache(tmp_path, monkeypatch):
    home = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return home / "hub"


def test_spec_parsing():
    assert HubRef.parse("hf:openai/whisper-small") == HubRef("openai/whisper-small", None)
    assert HubRef.parse("hf:openai/whisper-small@v1.0") == HubRef("openai/whisper-small", "v1.0")
    for bad in ("hf:whisper", "hf:a/b/c", "hf:../x/y", "hf:a/b@", "hf:a/b@../x"):
        with pytest.raises(ConfigError, match="hf:ORG/NAME|revision"):
            HubRef.parse(bad)


def test_family_from_config_and_refusals(hub_cache):
    _cache_repo(hub_cache, "org/w2v", _config_only({"model_type": "wav2vec2", "architectures": ["Wav2Vec2ForCTC"]}))
    e = hub_entry("hf:org/w2v")
    assert (e.backend, e.family, e.options["model"], e.options["revision"]) == ("transformers", "ctc", "org/w2v", COMMIT)
    assert e.spec().meta["hub"] == {
        "id": "org/w2v",
        "revision": None,
        "commit": COMMIT,
        "family": "ctc",
        "model_type": "wav2vec2",
        "family_from": "config.json model_type",
    }
    # a revision other than the cached one is not guessed at: the cache is read for that revision only
    with pytest.raises(ConfigError, match=r"cannot read org/w2v's config.json at v2 .*HF_HUB_OFFLINE.*--revision v2"):
        hub_entry("hf:org/w2v@v2")
    with pytest.raises(ConfigError, match="cannot read nobody/absent's config.json"):
        hub_entry("hf:nobody/absent")
    assert detect_family({"architectures": ["WhisperForConditionalGeneration"]}, "x")[:2] == ("whisper", "whisper")
    with pytest.raises(ConfigError, match=r"ships its own model code \(auto_map in config.json\).*trust_remote_code: true"):
        detect_family({"model_type": "my_private_asr", "auto_map": {"AutoModel": "modeling.M"}}, "hf:o/n")
    with pytest.raises(ConfigError, match="no family drives model_type 'bert'"):
        detect_family({"model_type": "bert"}, "hf:o/n")
    with pytest.raises(ConfigError, match="not a transformers checkpoint"):
        detect_family({"hidden": 3}, "hf:o/n")
    assert select_models({}, "hf:org/w2v,hf:org/other@main") == ["hf:org/w2v", "hf:org/other@main"]


def test_run_refuses_remote_code_before_anything_is_written(tmp_path, tone_wav, hub_cache):
    from typer.testing import CliRunner

    from audits.cli.main import app

    _cache_repo(hub_cache, "tiny-org/coded", _config_only({"model_type": "my_private_asr", "auto_map": {"AutoModel": "m.M"}}))
    manifest = write_manifest(tmp_path / "m.jsonl", [{"audio_filepath": str(tone_wav("a.wav")), "text": "the cat"}])
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"name: hub\ndataset: {{path: {manifest}}}\nmodels: []\n")
    res = CliRunner().invoke(app, ["run", str(recipe), "--models", "hf:tiny-org/coded", "--out", str(tmp_path / "no")])
    assert res.exit_code != 0 and "ships its own model code" in res.output and "trust_remote_code: true" in res.output
    assert not (tmp_path / "no").exists()
    swept = CliRunner().invoke(
        app, ["sweep", str(recipe), "--models", "hf:tiny-org/coded,hf:tiny-org/absent", "--out", str(tmp_path / "sw")]
    )
    assert swept.exit_code != 0 and "ships its own model code" in swept.output and not (tmp_path / "sw").exists()


def test_run_with_a_hub_checkpoint_records_it(tmp_path, tone_wav):
    """``audit run --models hf:...`` in a fresh process whose HF_HOME is the fake cache: resolution, the
    checkpoint checks and the transformers load all run for real; summary.json names the hub checkpoint."""
    pytest.importorskip("transformers")
    from tests.tiny_families import build_ctc

    hub = tmp_path / "hf" / "hub"
    _cache_repo(hub, "tiny-org/tiny-ctc", lambda folder: build_ctc(folder, "wav2vec2"))
    rows = [{"audio_filepath": str(tone_wav(f"c{i}.wav", seconds=1.0 + i)), "text": "the cat", "speaker": f"s{i}"} for i in range(2)]
    manifest = write_manifest(tmp_path / "m.jsonl", rows)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"name: hub\ndataset: {{path: {manifest}}}\nmodels: []\nshard_size: 2\nwarmup: 0\nscoring: {{n_boot: 10}}\n")
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    env.pop("HF_HUB_CACHE", None)
    cli = [sys.executable, "-m", "audits.cli", "run", str(recipe)]
    out = tmp_path / "run"
    done = subprocess.run([*cli, "--models", "hf:tiny-org/tiny-ctc", "--out", str(out)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    m = json.loads((out / "summary.json").read_text())["models"]["hf:tiny-org/tiny-ctc"]
    assert m["status"] == "loaded" and m["n_failed"] == 0 and m["backend"] == "transformers"
    assert m["hub"]["id"] == "tiny-org/tiny-ctc" and m["hub"]["commit"] == COMMIT and m["hub"]["family"] == "ctc"
    assert m["backend_info"]["family"] == "ctc" and m["params_m"] is not None and m["params_m"] > 0
