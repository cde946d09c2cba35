"""The study's line-up in the registry: tag ``rweq`` is the study's table (audit_configs/models/rweq-table.tsv)
row by row, each entry with a family whose loader exists and whose backend can be built from the
entry; remote code only by opt-in; hosted systems say what they need; ``audit sweep --check
--smoke`` answers per model before any run."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from engine.backends import ASR_BACKENDS, build_backend
from engine.backends.asr.families import FAMILIES, family_loader
from engine.config_tree import config_dir
from engine.errors import BackendUnavailable, ConfigError
from engine.model_registry import load_model_registry, read_study_table

#: table rows whose hub id is not the table's model name, and why
PORTS = {"kyutai/stt-2.6b-en": ("kyutai/stt-2.6b-en-trfs", "the transformers port of the same checkpoint, per its card")}
#: the table's vendor -> the hosted backend's vendor
HOSTED_VENDORS = {
    "elevenlabs": "elevenlabs",
    "speechmatics": "speechmatics",
    "assemblyai": "assemblyai",
    "deepgram": "deepgram",
    "modulate": "modulate",
    "gladia": "gladia",
    "smallestAI": "smallest",
    "google": "google",
    "microsoft": "azure",
}
#: registry entries that are not rows of the table: out of rweq, still in their own tags
NOT_IN_TABLE = (
    "parakeet-tdt-0.6b-v2",
    "qwen2-audio-7b",
    "voxtral-small-24b",
    "moonshine-base",
    "wav2vec2-large-960h-lv60-self",
    "hubert-large-ls960-ft",
    "data2vec-audio-large-960h",
)


def _norm(name: str) -> str:
    return name.lower().replace("_", "-")


def table_mismatches(reg: dict[str, Any], table: list[Any]) -> list[str]:
    """Every disagreement between tag rweq and the study's table, row by row (empty: they agree)."""
    out: list[str] = []
    rweq = {n: e for n, e in reg.items() if "rweq" in e.tags}
    rows = {r.key: r for r in table}
    named: dict[str, str] = {}
    for n, e in rweq.items():
        if not e.study_row:
            out.append(f"{n}: tagged rweq without a study_row")
        elif e.study_row in named:
            out.append(f"{n}: row {e.study_row} is also {named[e.study_row]}")
        else:
            named[e.study_row] = n
    out += [f"{n}: names {e.study_row}, not a row of the table" for n, e in rweq.items() if e.study_row and e.study_row not in rows]
    out += [f"row {k}: no entry tagged rweq" for k in rows if k not in named]
    out += [f"{n}: names row {e.study_row} but is not tagged rweq" for n, e in reg.items() if e.study_row and "rweq" not in e.tags]
    for key in rows.keys() & named.keys():
        row, name = rows[key], named[key]
        e = rweq[name]
        model = str(e.options.get("model"))
        if (e.family == "hosted") == row.open:
            out.append(f"{name}: row {key} is {'open' if row.open else 'proprietary'}, the entry's family is {e.family}")
        elif row.open:
            org, _, repo = model.partition("/")
            if _norm(org) != _norm(row.vendor):
                out.append(f"{name}: hub org {org!r} is not the table's vendor {row.vendor!r}")
            if _norm(repo) != _norm(row.model) and PORTS.get(key, ("",))[0] != model:
                out.append(f"{name}: hub id {model!r} is not the table's model {row.model!r}")
            if e.card != f"https://huggingface.co/{model}":
                out.append(f"{name}: card {e.card!r} is not the model card of {model}")
        else:
            if getattr(ASR_BACKENDS.get(e.backend), "vendor", None) != HOSTED_VENDORS[row.vendor]:
                out.append(f"{name}: backend {e.backend!r} is not vendor {row.vendor!r}")
            if model != row.model and not model.startswith(f"{row.model}-"):
                out.append(f"{name}: model {model!r} is not the table's {row.model!r}")
            if not (e.card or "").startswith("https://"):
                out.append(f"{name}: no API reference in card")
    return out


def test_rweq_is_the_study_table_row_by_row() -> None:
    """Tag rweq holds exactly the rows of the study's table: vendor, model id and open/hosted agree."""
    reg = load_model_registry()
    table = read_study_table()
    assert len(table) == 40 and sum(r.open for r in table) == 31 and sum(not r.open for r in table) == 9
    assert table_mismatches(reg, table) == []
    assert len([e for e in reg.values() if "rweq" in e.tags]) == 40
    for name in NOT_IN_TABLE:
        assert "rweq" not in reg[name].tags and "study" in reg[name].tags, name


def test_a_registry_that_drifts_from_the_table_fails_the_comparison(tmp_path: Path) -> None:
    """The comparison can fail: a missing, an extra, a doubled or a wrong row, and a malformed table are each caught."""
    reg, table = dict(load_model_registry()), read_study_table()
    reg.pop("mms-1b-all")
    reg["extra"] = replace(reg["whisper-large-v3"], name="extra", study_row="openAI/whisper-large-v2")
    reg["twice"] = replace(reg["canary-1b"], name="twice")
    reg["crisperwhisper"] = replace(reg["crisperwhisper"], options={"model": "openai/whisper-large-v3"})
    reg["deepgram-nova-3"] = replace(reg["deepgram-nova-3"], options={"model": "nova-2"})
    reg["assemblyai-universal-3-pro"] = replace(reg["assemblyai-universal-3-pro"], family="whisper")
    found = "\n".join(table_mismatches(reg, table))
    for expected in (
        "row facebook/mms-1b-all: no entry tagged rweq",
        "extra: names openAI/whisper-large-v2, not a row",
        "twice: row nvidia/canary-1b is also canary-1b",
        "crisperwhisper: hub org 'openai' is not the table's vendor",
        "deepgram-nova-3: model 'nova-2' is not the table's 'nova-3'",
        "assemblyai-universal-3-pro: row assemblyai/universal-3-pro is proprietary",
    ):
        assert expected in found, expected
    cfg = _registry(tmp_path, "  m: {backend: simulated}\n")
    text = (config_dir() / "models" / "rweq-table.tsv").read_text()
    (cfg / "models" / "rweq-table.tsv").write_text(text + "nvidia\tparakeet-ctc-1.1b\topen\t2023-12-28\n")
    with pytest.raises(ConfigError, match="row nvidia/parakeet-ctc-1.1b is listed twice"):
        read_study_table(cfg)
    (cfg / "models" / "rweq-table.tsv").write_text(text + "nvidia\tx\topen-ish\t2023\n")
    with pytest.raises(ConfigError, match=r"rweq-table.tsv, line 45: expected vendor, model, open\|proprietary"):
        read_study_table(cfg)
    (cfg / "models" / "x.yaml").write_text("models:\n  m: {backend: simulated, study_row: parakeet-ctc-1.1b}\n")
    with pytest.raises(ConfigError, match="study_row: must be 'vendor/model'"):
        load_model_registry(cfg)


def test_rweq_entries_have_a_loader_each() -> None:
    reg = load_model_registry()
    rweq = {n: e for n, e in reg.items() if "rweq" in e.tags}
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
    assert {"whisper", "encoder-decoder", "speech-llm", "qwen3-asr", "nemo-asr", "nemo-salm", "hosted", "ctc"} <= families
    for name, family in {
        "parakeet-tdt-ctc-110m": "nemo-asr",
        "canary-180m-flash": "nemo-asr",
        "granite-4.0-1b-speech": "speech-llm",
        "lite-whisper-large-v3-acc": "whisper",
        "moonshine-streaming-medium": "encoder-decoder",
        "qwen3-asr-0.6b": "qwen3-asr",
        "cohere-transcribe-03-2026": "encoder-decoder",
        "glm-asr-nano-2512": "speech-llm",
        "canary-qwen-2.5b": "nemo-salm",
        "modulate-velma-2": "hosted",
        "smallest-pulse": "hosted",
        "mms-1b-all": "ctc",
    }.items():
        assert rweq[name].family == family
    # gated repositories and packages beyond the backend are recorded, so --check can name them
    assert rweq["cohere-transcribe-03-2026"].gated and rweq["crisperwhisper"].gated
    assert all("peft" in rweq[n].requires for n in ("granite-speech-3.3-2b", "granite-speech-3.3-8b", "phi-4-multimodal"))
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
        (
            "{backend: transformers, trust_remote_code: 'yes', options: {model: x/y}}",
            r"trust_remote_code: expected a boolean \(true/false, unquoted\), got str 'yes'",
        ),
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
    monkeypatch.setenv("AUDIT_CONFIG_DIR", str(cfg))
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.delenv("MODULATE_API_KEY", raising=False)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: r\ndataset: {path: builtin:demo}\nmodels: [tiny-hubert]\n")
    monkeypatch.setenv("AUDIT_DATA_DIR", str(tmp_path / "data"))  # no demo corpus there: the espeak-ng clip is used
    res = CliRunner().invoke(app, ["sweep", str(recipe), "--models", "t", "--check", "--smoke"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    lines: dict[str, Any] = {
        ln.split("│")[1].strip(): [c.strip() for c in ln.split("│")[1:-1]] for ln in res.output.splitlines() if ln.count("│") >= 10
    }
    hub = lines["tiny-hubert"]
    assert hub[1:5] == ["ctc", "transformers", "local", "yes"] and hub[7] == "ok"
    assert float(hub[8]) > 0 and float(hub[9]) > 100  # load seconds and the worker's peak RSS
    assert lines["velma"][3] == "api" and lines["velma"][7] == "skipped"
    assert lines["gone"][4] == "no" and lines["gone"][7] == "skipped"
    assert not Path("runs/sweep-r").exists()
