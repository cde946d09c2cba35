"""Full-size stand-ins (scripts/standins.py), the forced decode lengths, the GPU bench's dry run and the
registry's ``measured`` mapping. Everything here is small: the full sizes are counted on the meta
device, the build path runs on a shrunk entry, and the GPU bench runs its tiny layouts on the CPU."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import standins  # noqa: E402


def test_every_transformers_checkpoint_of_the_line_up_has_a_stand_in_of_its_family() -> None:
    from engine.model_registry import load_model_registry

    ckpts = standins.load_checkpoints()
    registry = load_model_registry()
    transformers_line_up = {n for n, e in registry.items() if "rweq" in e.tags and e.backend == "transformers"}
    assert set(ckpts) == transformers_line_up
    for name, c in ckpts.items():
        assert standins.BUILDERS[c.builder].family == registry[name].family, name
        assert c.card_params_m == registry[name].params_m, name  # the card's figure, as the registry records it
        assert c.source and c.verified
    others = {registry[n].family for n, e in registry.items() if "rweq" in e.tags and e.family != "hosted" and n not in ckpts}
    assert others <= set(standins.OTHER_ENVIRONMENTS)


def test_a_bad_entry_is_refused_naming_the_file_and_key(tmp_path: Path) -> None:
    good = {
        "builder": "mms",
        "card_params_m": 965,
        "storage_dtype": "float32",
        "base": "tiny",
        "config": {},
        "source": "s",
        "verified": "v",
        "autoregressive": False,
    }
    for bad, key in (
        ({"builder": "nope"}, "builder"),
        ({"storage_dtype": "int8"}, "storage_dtype"),
        ({"card_params_m": True}, "card_params_m"),
        ({"colour": 1}, "unknown keys"),
        ({"base": "big"}, "base"),
    ):
        path = tmp_path / "c.yaml"
        path.write_text(json.dumps({"checkpoints": {"mms-1b-all": {**good, **bad}}}))
        with pytest.raises(standins.StandInError, match=key) as err:
            standins.load_checkpoints(path)
        assert str(path) in str(err.value) and "mms-1b-all" in str(err.value)


@pytest.mark.parametrize(
    "name, exact", [("whisper-large-v3", 1_543_490_560), ("mms-1b-all", 964_684_444), ("kyutai-stt-2.6b-en", 2_696_431_425)]
)
def test_full_size_parameter_counts_of_checkpoints_with_read_dimensions(name: str, exact: int, tmp_path: Path) -> None:
    """Counted on the meta device: the published size, within 4% of the card's rounded figure."""
    ckpt = standins.load_checkpoints()[name]
    params = standins.count_params(ckpt, tmp_path)
    assert params == exact
    assert abs(params / 1e6 / ckpt.card_params_m - 1) < 0.04


def _small_whisper(tmp_path: Path) -> tuple[standins.Checkpoint, dict[str, standins.Checkpoint]]:
    ckpt = standins.load_checkpoints()["whisper-large-v3"]
    small = dataclasses.replace(
        ckpt,
        config={
            **ckpt.config,
            "d_model": 64,
            "encoder_layers": 2,
            "decoder_layers": 2,
            "encoder_attention_heads": 4,
            "decoder_attention_heads": 4,
            "encoder_ffn_dim": 128,
            "decoder_ffn_dim": 128,
        },
    )
    return small, {"whisper-large-v3": small}


def test_build_fills_the_published_layout_and_the_engine_loader_runs_it(tmp_path: Path) -> None:
    """The build path (no initialisation, cheap fill, storage dtype, save) on a shrunk Whisper entry; the
    engine's transformers backend loads the folder and decodes exactly the forced token counts."""
    import torch

    from engine.backends.asr.transformers import TransformersBackend

    small, ckpts = _small_whisper(tmp_path)
    built = standins.build("whisper-large-v3", tmp_path / "w", "full", ckpts)
    config = json.loads((built.folder / "config.json").read_text())
    assert config["d_model"] == 64 and config["vocab_size"] == 51866 and config["num_mel_bins"] == 128
    from safetensors import safe_open

    with safe_open(str(built.folder / "model.safetensors"), "pt") as f:
        dtypes = {f.get_tensor(k).dtype for k in f.keys()}
    assert dtypes == {torch.float16}  # whisper-large-v3 is published in float16
    rng = np.random.default_rng(0)
    clips = [rng.normal(0, 0.1, n).astype(np.float32) for n in (16000, 24000, 8000)]
    plan = [[5, 9], [3]]
    kwargs, forced = standins.forced_generate_kwargs(plan, [50257], None)
    kwargs.pop("max_new_tokens")
    kwargs.pop("min_new_tokens")
    backend = TransformersBackend(
        model=str(built.folder),
        device="cpu",
        local_files_only=True,
        family="whisper",
        language="en",
        task="transcribe",
        batch_size=2,
        generate_kwargs=kwargs,
    )
    backend.load()
    rows = backend.family_loader.token_ids(clips[:2]) + backend.family_loader.token_ids(clips[2:])
    forced.check()
    assert [len(r[0]) for r in rows] == [5, 9, 3]  # the new tokens of each clip (generate returns them without the prompt)
    assert [c["steps"] for c in forced.calls] == [10, 4]  # the longest target, then the forced end of text


def test_forced_lengths_suppress_the_end_until_the_target_and_check_the_plan() -> None:
    import torch

    forced = standins.ForcedLengths([[2, 1]], eos_ids=[0], allowed=[3, 4])
    ids = torch.tensor([[9], [9]])
    scores = torch.zeros(2, 6)
    out = forced(ids, scores)
    assert out[0, 0] < -1e30 and out[0, 3] == 0 and out[0, 5] < -1e30  # end suppressed, only allowed ids
    assert out[1, 0] < -1e30
    out = forced(torch.tensor([[9, 3], [9, 4]]), scores)
    assert out[1].argmax() == 0 and out[0, 0] < -1e30  # row 1 reached its 1 token: end forced; row 0 not yet
    out = forced(torch.tensor([[9, 3, 4], [9, 4, 0]]), scores)
    assert out[0].argmax() == 0
    forced.check()
    with pytest.raises(standins.StandInError, match="no entry in the plan"):
        forced(torch.tensor([[1]]), torch.zeros(1, 6))
    wrong = standins.ForcedLengths([[2, 1]], eos_ids=[0])
    with pytest.raises(standins.StandInError, match="has 1 rows, the plan 2"):
        wrong(torch.tensor([[1]]), torch.zeros(1, 6))
    with pytest.raises(standins.StandInError, match="1 were planned"):
        standins.ForcedLengths([[1]], eos_ids=[0]).check()


def test_reference_token_counts_use_a_real_bpe_when_installed() -> None:
    counts, how = standins.reference_token_counts(["the cat sat on the mat", "Around 25% of the budget goes to schools in Texas."])
    assert len(counts) == 2 and all(c > 0 for c in counts) and counts[1] > counts[0]
    assert how


def test_gpu_bench_dry_run_on_cpu_with_tiny_layouts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """scripts/gpu_bench.py as the GPU would run it, on the CPU with the tiny layouts: an autoregressive
    model (forced lengths), a CTC model and a family built elsewhere, each with its row."""
    import gpu_bench

    out = tmp_path / "bench.json"
    code = gpu_bench.main(
        [
            "--device",
            "cpu",
            "--tiny",
            "--in-process",
            "--clips",
            "2",
            "--batches",
            "1,2",
            "--json",
            str(out),
            "--models",
            "whisper-large-v3-turbo,mms-1b-all,parakeet-tdt-0.6b-v3",
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    rows = {r["model"]: r for r in report["results"]}
    for name in ("whisper-large-v3-turbo", "mms-1b-all"):
        r = rows[name]
        assert r["status"] == "measured", r
        assert set(r["ladder"]) == {"1", "2"}
        for s in r["ladder"].values():
            assert s["engine_rtfx"] > 0 and s["bare_rtfx"] > 0 and s["ratio"] > 0
    assert rows["whisper-large-v3-turbo"]["forced"] is True and rows["mms-1b-all"]["forced"] is False
    calls = rows["whisper-large-v3-turbo"]["ladder"]["2"]["engine"]["calls"]
    assert calls and all(c["steps"] == max(c["targets"]) + 1 for c in calls)
    assert rows["parakeet-tdt-0.6b-v3"]["status"] == "not built"


def _registry(tmp_path: Path, entry: str) -> Any:
    from engine.model_registry import load_model_registry

    (tmp_path / "models").mkdir(exist_ok=True)
    (tmp_path / "models" / "m.yaml").write_text(f"models:\n  m: {entry}\n")
    return load_model_registry(tmp_path)


def test_measured_mapping_is_checked(tmp_path: Path) -> None:
    from engine.errors import ConfigError

    ok = (
        "{backend: simulated, memory_mb: 1400, rtfx: 2.5, measured: {fields: [memory_mb, rtfx], device: cpu, dtype: float32, batch: 4, "
        "threads: 2, by: scripts/bench_fullsize.py}}"
    )
    assert _registry(tmp_path, ok)["m"].measured["batch"] == 4
    for bad, words in (
        (
            "{backend: simulated, rtfx: 2, measured: {fields: [memory_mb], device: cpu, dtype: float32, batch: 1, by: x}}",
            "sets no memory_mb",
        ),
        ("{backend: simulated, rtfx: 2, measured: {fields: [speed], device: cpu, dtype: float32, batch: 1, by: x}}", "measured.fields"),
        ("{backend: simulated, rtfx: 2, measured: {fields: [rtfx], device: tpu, dtype: float32, batch: 1, by: x}}", "measured.device"),
        ("{backend: simulated, rtfx: 2, measured: {fields: [rtfx], device: cpu, dtype: int8, batch: 1, by: x}}", "measured.dtype"),
        ("{backend: simulated, rtfx: 2, measured: {fields: [rtfx], device: cpu, dtype: float32, batch: 0, by: x}}", "measured.batch"),
        ("{backend: simulated, rtfx: 2, measured: {fields: [rtfx], device: cpu, dtype: float32, batch: 1}}", "by"),
    ):
        with pytest.raises(ConfigError, match=words):
            _registry(tmp_path, bad)


def test_line_up_entries_say_which_figures_were_measured() -> None:
    from engine.model_registry import load_model_registry

    line_up = {n: e for n, e in load_model_registry().items() if "rweq" in e.tags and e.family != "hosted"}
    measured = {n: e for n, e in line_up.items() if e.measured}
    for name, e in measured.items():
        how = dict(e.measured or {})
        assert "stand-in" in str(how.get("note", "")) + str(how["by"]), name


def test_mms_stand_in_carries_its_language_adapter_at_the_built_size(tmp_path: Path) -> None:
    """The English adapter file is rewritten at the stand-in's size, so the loader's load_adapter('eng') works."""
    from engine.backends.asr.transformers import TransformersBackend

    ckpt = standins.load_checkpoints()["mms-1b-all"]
    small = dataclasses.replace(
        ckpt,
        config={
            **ckpt.config,
            "hidden_size": 48,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "intermediate_size": 96,
            "conv_dim": [16] * 7,
        },
    )
    built = standins.build("mms-1b-all", tmp_path / "mms", "full", {"mms-1b-all": small})
    backend = TransformersBackend(model=str(built.folder), device="cpu", local_files_only=True, family="ctc", target_lang="eng")
    backend.load()
    texts = backend.transcribe_batch([np.random.default_rng(1).normal(0, 0.1, 16000).astype(np.float32)])
    assert len(texts) == 1 and isinstance(texts[0], str)
