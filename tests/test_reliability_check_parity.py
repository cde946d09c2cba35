"""Reliability class 16: --check runs the load's checks.

``audit sweep --check`` (and ``audit list models``) answered "yes" for a checkpoint whose
safetensors file was cut short and for a checkpoint that ships its own code without the entry's
opt-in; the run then refused both. Here a tiny random checkpoint saved with ``save_pretrained``
is damaged one way at a time (a truncated safetensors file, an ``auto_map`` with code and no
opt-in for a model type only that code knows, a missing tokenizer vocabulary, a PEFT adapter
without peft): the answer the Ray workers
compute (``engine.sweep._check_here``) says no and names the reason, and the real load refuses
with the same reason. The intact checkpoint is answered yes and loads and transcribes. Every
reason is named at once, entry-level facts (a gated repository, packages the checkpoint needs)
are named too, and a checkpoint already in the local hub cache is checked like a local folder.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from engine.backends import build_backend
from engine.data import ModelSpec
from engine.errors import BackendUnavailable
from engine.sweep import _check_here

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.tiny_families import build_ctc

    return build_ctc(tmp_path_factory.mktemp("ckpt") / "tiny-ctc", "wav2vec2")


@pytest.fixture()
def copy(intact: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(intact, tmp_path / "tiny-ctc"))


def check(folder: Path | str, **options: Any) -> dict[str, Any]:
    """What one Ray worker answers for this model under ``audit sweep --check``."""
    return _check_here("transformers", {"model": str(folder), "family": "ctc", **options}, "transformers")


def load(folder: Path | str, **options: Any) -> Any:
    backend = build_backend(ModelSpec("tiny", "transformers", {"model": str(folder), "family": "ctc", "device": "cpu", **options}, 2, {}))
    backend.load()
    return backend


def refused_alike(folder: Path, expected: str, **options: Any) -> dict[str, Any]:
    """--check says no with a reason containing ``expected``; the load refuses with that same reason."""
    answer = check(folder, **options)
    assert answer["runnable"] is False and answer["checked"] is True, answer
    reasons = [p for p in answer["problems"] if expected in p]
    assert len(reasons) == 1, answer["problems"]
    with pytest.raises(BackendUnavailable) as err:
        load(folder, **options)
    assert reasons[0] in str(err.value)
    return answer


def test_an_intact_checkpoint_is_answered_yes_and_loads(intact: Path) -> None:
    answer = check(intact)
    assert answer["runnable"] is True and answer["problems"] == [] and answer["weights"] == "local"
    assert "weights, tokenizer, code policy and adapters checked" in answer["reason"]
    backend = load(intact)
    t = np.arange(8000, dtype=np.float32) / 16000
    (text,) = backend.transcribe_batch([(0.1 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)])
    assert isinstance(text, str)


def test_a_truncated_safetensors_file_is_no_for_check_and_load(copy: Path) -> None:
    weights = copy / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) - 1000])
    answer = refused_alike(copy, "model.safetensors")
    held = len(data) - 1000 - 8 - _header_len(data)
    assert "is truncated: its header declares" in answer["reason"] and f"the file holds {held}" in answer["reason"]


def test_a_cut_header_and_a_missing_shard_are_named(copy: Path) -> None:
    (copy / "model.safetensors").write_bytes((copy / "model.safetensors").read_bytes()[:100])
    refused_alike(copy, "is truncated or not a safetensors file")
    (copy / "model.safetensors").rename(copy / "model-00001-of-00002.safetensors")
    (copy / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})
    )
    answer = check(copy)
    assert any("model-00002-of-00002.safetensors is missing" in p for p in answer["problems"])


def _custom_model_type(folder: Path) -> dict[str, Any]:
    """Make the checkpoint's model_type one transformers has no classes of (as lite-whisper's): only
    its own code could load it. Returns the config, to be extended and written back."""
    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = "custom-ctc"
    (folder / "config.json").write_text(json.dumps(config))
    return config


def test_remote_code_without_opt_in_is_no_for_check_and_load(copy: Path) -> None:
    config = _custom_model_type(copy)
    config["auto_map"] = {"AutoModelForCTC": "modeling_custom.CustomForCTC"}
    (copy / "config.json").write_text(json.dumps(config))
    (copy / "modeling_custom.py").write_text("raise RuntimeError('this code must never run without the opt-in')\n")
    answer = refused_alike(copy, "ships its own model code")
    assert "auto_map in config.json" in answer["reason"] and "modeling_custom.py" in answer["reason"]
    assert "add 'trust_remote_code: true' to the model's registry entry" in answer["reason"]
    assert not any("own model code" in p for p in check(copy, trust_remote_code=True)["problems"])  # the opt-in lifts it


def test_a_native_model_type_loads_transformers_own_classes_and_never_the_repository_code(copy: Path) -> None:
    """A repository that ships code for a model type transformers now has (Cohere Transcribe's does,
    for releases before 5.4): without the opt-in transformers loads its own classes, as the model
    card and the leaderboard do; the repository's code never runs, and backend_info says so."""
    config = json.loads((copy / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "configuration_custom.CustomConfig", "AutoModelForCTC": "modeling_custom.CustomForCTC"}
    (copy / "config.json").write_text(json.dumps(config))
    for name in ("configuration_custom.py", "modeling_custom.py"):
        (copy / name).write_text("raise RuntimeError('this code must never run without the opt-in')\n")
    answer = check(copy)
    assert answer["runnable"] is True and answer["problems"] == [], answer
    backend = load(copy)
    assert "was not run" in backend.info().as_dict()["remote_code"]
    (text,) = backend.transcribe_batch([np.zeros(8000, dtype=np.float32)])
    assert isinstance(text, str)


def test_a_tokenizer_with_custom_code_is_remote_code_too(copy: Path) -> None:
    _custom_model_type(copy)
    tok = json.loads((copy / "tokenizer_config.json").read_text())
    tok["auto_map"] = {"AutoTokenizer": ["tokenization_custom.CustomTokenizer", None]}
    (copy / "tokenizer_config.json").write_text(json.dumps(tok))
    refused_alike(copy, "auto_map in tokenizer_config.json")


def test_a_missing_tokenizer_vocabulary_is_no_for_check_and_load(copy: Path) -> None:
    (copy / "vocab.json").unlink()
    answer = refused_alike(copy, "no tokenizer vocabulary")
    assert str(copy) in answer["reason"] and "tokenizer.json" in answer["reason"]


def test_a_damaged_tokenizer_json_is_named(copy: Path) -> None:
    (copy / "vocab.json").write_text('{"<pad>": 0, "<s>"')  # cut short
    refused_alike(copy, "vocab.json in")


def test_an_adapter_without_peft_is_no_for_check_and_load(copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.backends.checkpoint_checks as cc

    real = cc.installed_version
    monkeypatch.setattr(cc, "installed_version", lambda dist: None if dist == "peft" else real(dist))
    lora = copy / "speech-lora"
    lora.mkdir()
    (lora / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 4}))
    shutil.copy(copy / "model.safetensors", lora / "adapter_model.safetensors")
    answer = refused_alike(copy, "ships its speech LoRA adapter (speech-lora/adapter_config.json)")
    assert f"Fix: pip install 'peft>={cc.peft_minimum()}'" in answer["reason"] and "peft is not installed" in answer["reason"]
    monkeypatch.setattr(cc, "installed_version", lambda dist: "0.1.0" if dist == "peft" else real(dist))
    assert "found peft 0.1.0" in check(copy)["reason"]
    config = json.loads((copy / "config.json").read_text())
    config["has_lora_adapter"] = True  # Granite Speech's flag: its adapter lies beside the weights
    (copy / "config.json").write_text(json.dumps(config))
    assert any("declares has_lora_adapter but there is no adapter_config.json" in p for p in check(copy)["problems"])


def test_a_checkpoint_without_the_adapter_its_card_uses_is_never_yes(copy: Path) -> None:
    """Phi-4-multimodal transcribes with its speech-lora adapter; a copy without that folder would run
    without it (the load records speech_adapter: null), so --check says no."""
    config = json.loads((copy / "config.json").read_text())
    config["model_type"] = "phi4_multimodal"
    (copy / "config.json").write_text(json.dumps(config))
    answer = check(copy, family="speech-llm")
    assert answer["runnable"] is False and any("has no speech-lora/adapter_config.json" in p for p in answer["problems"])


def test_a_missing_or_cut_language_adapter_is_no_for_check_and_load(tmp_path: Path) -> None:
    from tests.tiny_families import build_ctc

    mms = build_ctc(tmp_path / "mms", "wav2vec2", adapter_lang="eng")
    assert check(mms, target_lang="eng")["runnable"] is True
    refused_alike(mms, "no language adapter adapter.fra.safetensors", target_lang="fra")
    adapter = mms / "adapter.eng.safetensors"
    adapter.write_bytes(adapter.read_bytes()[:-4])
    refused_alike(mms, "adapter.eng.safetensors in", target_lang="eng")


def test_every_reason_is_named_at_once(copy: Path) -> None:
    weights = copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-10])
    config = _custom_model_type(copy)
    config["auto_map"] = {"AutoModelForCTC": "modeling_custom.CustomForCTC"}
    (copy / "config.json").write_text(json.dumps(config))
    (copy / "vocab.json").unlink()
    answer = check(copy)
    assert len(answer["problems"]) == 3 and answer["reason"] == "; ".join(answer["problems"])
    with pytest.raises(BackendUnavailable) as err:
        load(copy)
    assert all(p in str(err.value) for p in answer["problems"])


def test_a_family_that_does_not_drive_the_checkpoint_or_a_fallback_is_no(copy: Path) -> None:
    answer = check(copy, family="whisper")
    assert answer["runnable"] is False and "family 'whisper' does not drive model_type 'wav2vec2'" in answer["reason"]
    config = json.loads((copy / "config.json").read_text())
    config["model_type"] = "unheard-of"
    (copy / "config.json").write_text(json.dumps(config))
    assert "would fall back to the generic automatic-speech-recognition pipeline" in check(copy, family="auto")["reason"]


def test_entry_facts_gated_repository_and_required_packages_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "no-token"))
    answer = _check_here(
        "transformers", {"model": "example-org/not-cached-model", "family": "ctc"}, "transformers", ["surely-not-installed-dist>=1.0"], True
    )
    assert answer["runnable"] is False and answer["checked"] is True
    text = answer["reason"]
    assert "not in the local Hugging Face cache" in text
    assert "needs surely-not-installed-dist>=1.0 (not installed)" in text
    assert "gated repository: accept its conditions at https://huggingface.co/example-org/not-cached-model" in text
    (tmp_path / "no-token").write_text("hf_x")  # logged in: the conditions may have been accepted; the answer stays advisory
    advisory = _check_here("transformers", {"model": "example-org/not-cached-model", "family": "ctc"}, "transformers", [], True)
    assert advisory["runnable"] is False and advisory["checked"] is False


@pytest.fixture()
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    import huggingface_hub.constants as constants

    cache = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    yield cache


def test_a_checkpoint_in_the_hub_cache_is_checked_like_a_folder(intact: Path, hub_cache: Path) -> None:
    snapshot = hub_cache / "models--example-org--tiny-ctc" / "snapshots" / ("0" * 40)
    shutil.copytree(intact, snapshot)
    (hub_cache / "models--example-org--tiny-ctc" / "refs").mkdir()
    (hub_cache / "models--example-org--tiny-ctc" / "refs" / "main").write_text("0" * 40)
    assert check("example-org/tiny-ctc")["runnable"] is True
    weights = snapshot / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-10])
    answer = check("example-org/tiny-ctc")
    assert answer["runnable"] is False and "model.safetensors" in answer["reason"] and answer["weights"] == "cached"
    with pytest.raises(BackendUnavailable) as err:
        load("example-org/tiny-ctc")
    assert answer["problems"][0] in str(err.value)


def test_list_models_and_the_sweep_plan_use_the_same_answer(copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from audits.cli.main import app
    from engine.model_registry import load_model_registry
    from engine.sweep import plan_sweep

    (copy / "vocab.json").unlink()
    cfg = tmp_path / "configs"
    (cfg / "models").mkdir(parents=True)
    entry = f"{{backend: transformers, family: ctc, options: {{model: '{copy}'}}, tags: [t]}}"
    (cfg / "models" / "t.yaml").write_text(f"models:\n  broken: {entry}\n")
    monkeypatch.setenv("AUDIT_CONFIG_DIR", str(cfg))
    monkeypatch.setenv("COLUMNS", "400")
    reg = load_model_registry()
    assert "no tokenizer vocabulary" in plan_sweep(reg, ["broken"], explicit=True).skipped["broken"]
    res = CliRunner().invoke(app, ["list", "models", "--tag", "t"], catch_exceptions=False)
    assert res.exit_code == 0 and "no tokenizer vocabulary" in res.output.replace("\n", "").replace("│", "")


def _header_len(data: bytes) -> int:
    return int.from_bytes(data[:8], "little")
