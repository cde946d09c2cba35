"""The study's line-up in the registry: 40 systems under tag ``rweq``, each with a family whose
loader exists and whose backend can be built from the entry; remote code only by opt-in; hosted
systems say what they need; ``audit sweep --check --smoke`` answers per model before any run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import engine.model_registry
from engine.backends import ASR_BACKENDS, build_backend
from engine.backends.asr.families import FAMILIES, family_loader
from engine.errors import BackendUnavailable, ConfigError
from engine.model_registry import load_model_registry


def test_rweq_is_the_study_line_up_of_40_with_a_loader_each() -> None:
    reg = load_model_registry()
    rweq = {n: e for n, e in reg.items() if "rweq" in e.tags}
    assert len(rweq) == 40
    for name, e in rweq.items():
        assert e.family in FAMILIES, name
        assert e.backend in FAMILIES[e.family].backends, name
        loader = family_loader(e.family)  # the module and class exist
        assert isinstance(loader, type), name
        assert e.license and e.description, name
        assert e.resources.get("memory_mb", 0) > 0, name
        if e.family != "hosted":
            assert e.params_m and e.resources.get("rtfx", 0) > 0, name
        build_backend(e.spec())  # options are ones the backend accepts (nothing loads)
    families = {e.family for e in rweq.values()}
    assert {"whisper", "ctc", "encoder-decoder", "speech-llm", "qwen3-asr", "nemo-asr", "nemo-salm", "hosted"} <= families
    # the systems the issue found missing are there, in the right family
    for name, family in {
        "parakeet-tdt-ctc-110m": "nemo-asr", "canary-180m-flash": "nemo-asr", "granite-4.0-1b-speech": "speech-llm",
        "lite-whisper-large-v3-acc": "whisper", "moonshine-streaming-medium": "encoder-decoder", "qwen3-asr-0.6b": "qwen3-asr",
        "cohere-transcribe-03-2026": "encoder-decoder", "glm-asr-nano-2512": "speech-llm", "canary-qwen-2.5b": "nemo-salm",
        "modulate-velma-2": "hosted", "smallest-pulse": "hosted",
    }.items():  # fmt: skip
        assert rweq[name].family == family
    # extras keep the study tag and stay out of the line-up
    assert "speecht5-asr" in reg and "rweq" not in reg["speecht5-asr"].tags and "study" in reg["speecht5-asr"].tags


def test_family_and_remote_code_reach_the_backend_options() -> None:
    reg = load_model_registry()
    lite = reg["lite-whisper-large-v3"].spec().options
    assert lite["family"] == "whisper" and lite["trust_remote_code"] is True and lite["processor"] == "openai/whisper-large-v3"
    assert reg["canary-qwen-2.5b"].spec().options["family"] == "nemo-salm"
    assert "trust_remote_code" not in reg["whisper-large-v3"].spec().options
    assert reg["qwen3-asr-1.7b"].needed_extra == "qwen-asr" and reg["canary-1b"].needed_extra == "nemo"


def _registry(tmp_path: Path, body: str) -> Path:
    cfg = tmp_path / "configs"
    (cfg / "models").mkdir(parents=True)
    (cfg / "models" / "x.yaml").write_text("models:\n" + body)
    return cfg


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{backend: transformers, options: {model: x/y, trust_remote_code: true}}", "write 'trust_remote_code: true' beside 'backend'"),
        ("{backend: transformers, family: nemo-salm, options: {model: x/y}}", "family 'nemo-salm' runs on backend nemo"),
        ("{backend: transformers, family: speech-lm, options: {model: x/y}}", "unknown family 'speech-lm'"),
        ("{backend: transformers, trust_remote_code: 'yes', options: {model: x/y}}", "must be true or false"),
    ],
)
def test_bad_family_or_remote_code_entries_are_refused(tmp_path: Path, entry: str, message: str) -> None:
    cfg = _registry(tmp_path, f"  m: {entry}\n")
    with pytest.raises(ConfigError, match=message) as err:
        load_model_registry(cfg)
    assert "model 'm'" in str(err.value)


def test_remote_code_checkpoint_is_refused_without_opt_in(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    folder = tmp_path / "lite"
    folder.mkdir()
    config = {"model_type": "lite-whisper", "auto_map": {"AutoConfig": "configuration_lite_whisper.LiteWhisperConfig"}}
    (folder / "config.json").write_text(json.dumps(config))
    backend = ASR_BACKENDS.get("transformers")(model=str(folder), family="whisper")
    with pytest.raises(BackendUnavailable, match="add 'trust_remote_code: true' to the model's registry entry"):
        backend.load()


def test_a_family_that_does_not_drive_the_checkpoint_says_so(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from tests.tiny_families import build_ctc

    folder = build_ctc(tmp_path / "w2v2", "wav2vec2")
    backend = ASR_BACKENDS.get("transformers")(model=str(folder), family="speech-llm")
    with pytest.raises(BackendUnavailable, match="family 'speech-llm' does not drive model_type 'wav2vec2'"):
        backend.load()


def test_list_models_shows_families_and_what_hosted_systems_need(monkeypatch: pytest.MonkeyPatch) -> None:
    from audits.cli.main import app

    monkeypatch.delenv("MODULATE_API_KEY", raising=False)
    monkeypatch.setenv("COLUMNS", "300")
    res = CliRunner().invoke(app, ["list", "models", "--tag", "rweq"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rows = [ln for ln in res.output.splitlines() if ln.count("│") >= 6]
    names = {ln.split("│")[1].strip() for ln in rows} - {""}
    assert len(names) == 40
    velma = next(ln for ln in rows if "modulate-velma-2" in ln)
    assert "hosted" in velma and "MODULATE_API_KEY" in velma


@pytest.mark.slow
def test_sweep_check_smoke_loads_runs_and_measures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One Ray check per model, then a fresh worker per runnable model transcribes one clip."""
    pytest.importorskip("transformers")
    from audits.cli.main import app
    from tests.tiny_families import build_ctc

    folder = build_ctc(tmp_path / "hubert", "hubert")
    cfg = _registry(
        tmp_path,
        f"  tiny-hubert: {{backend: transformers, family: ctc, options: {{model: {folder}, device: cpu}}, tags: [t]}}\n"
        "  velma: {backend: modulate, family: hosted, options: {model: velma-2-stt-batch}, tags: [t]}\n"
        f"  gone: {{backend: transformers, family: ctc, options: {{model: {tmp_path / 'absent'}}}, tags: [t]}}\n",
    )
    monkeypatch.setattr(engine.model_registry, "CONFIG_DIR", cfg)
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.delenv("MODULATE_API_KEY", raising=False)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: r\ndataset: {path: builtin:demo}\nmodels: [tiny-hubert]\n")
    monkeypatch.setenv("AUDIT_DATA_DIR", str(tmp_path / "data"))  # no demo corpus there: the espeak-ng clip is used
    res = CliRunner().invoke(app, ["sweep", str(recipe), "--models", "t", "--check", "--smoke"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    lines: dict[str, Any] = {ln.split("│")[1].strip(): [c.strip() for c in ln.split("│")[1:-1]]
                             for ln in res.output.splitlines() if ln.count("│") >= 10}
    hub = lines["tiny-hubert"]
    assert hub[1:5] == ["ctc", "transformers", "local", "yes"] and hub[7] == "ok"
    assert float(hub[8]) > 0 and float(hub[9]) > 100  # load seconds and the worker's peak RSS
    assert lines["velma"][3] == "api" and lines["velma"][7] == "skipped"
    assert lines["gone"][4] == "no" and lines["gone"][7] == "skipped"
    assert not Path("runs/sweep-r").exists()
