"""The NeMo families, each proven on a tiny random model of the real checkpoint's class, saved in
its layout and run through ``audit run`` (see tests/test_families.py): ``ASRModel`` as CTC,
RNN-T and Canary (``EncDecMultiTaskModel``, both of its prompt formats), and speechlm2 ``SALM``
(Canary-Qwen).

NeMo is too heavy for ``make test``; ``make test-families`` installs it in its own environment.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.errors import ConfigError
from tests import tiny_families as tiny
from tests import tiny_nemo

pytestmark = [
    pytest.mark.families,
    pytest.mark.skipif(importlib.util.find_spec("nemo") is None, reason="NeMo is not installed here: run make test-families"),
]


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """One intra-op thread: the tiny models' per-step ops (the RNN-T prediction LSTM runs ~1000
    times per clip) are too small to split, and on a busy CPU the thread pool's waits made the
    transducer test ~20x slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def record_canary_prompts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The decoder prompts Canary really fed its decoder during ``transcribe`` (the recorded prompt
    must be this one, not a reconstruction that could drift from it)."""
    from nemo.collections.asr.models import EncDecMultiTaskModel

    seen: list[str] = []
    original = EncDecMultiTaskModel._transcribe_forward

    def spy(self: Any, batch: Any, trcfg: Any) -> Any:
        out = original(self, batch, trcfg)
        seen.extend(str(self.tokenizer.ids_to_text(row.tolist())) for row in out["decoder_input_ids"])
        return out

    monkeypatch.setattr(EncDecMultiTaskModel, "_transcribe_forward", spy)
    return seen


def test_nemo_asr_model_runs_through_audit_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tiny.build_nemo_ctc(tmp_path / "tiny-ctc.nemo")
    manifest = tiny.two_clips(tmp_path)
    expect = {"model_class": "EncDecCTCModel", "prompt": None, "decoding": "greedy_batch"}
    tiny.assert_family_runs(tmp_path, monkeypatch, manifest, "nemo", "nemo-asr", model, {}, expect)


def test_nemo_transducer_runs_through_audit_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tiny.build_nemo_rnnt(tmp_path / "tiny-rnnt.nemo")
    manifest = tiny.two_clips(tmp_path)
    expect = {"family": "nemo-asr", "model_class": "EncDecRNNTModel", "prompt": None, "decoding": "greedy_batch"}
    tiny.assert_family_runs(tmp_path, monkeypatch, manifest, "nemo", "nemo-asr", model, {}, expect)


def test_canary_1b_prompt_runs_through_audit_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """canary-1b's registry options (source and target language, task, pnc) in the ``canary``
    prompt format: the decoder prompt the model reads is recorded token for token."""
    model = tiny_nemo.build_canary(tmp_path / "tiny-canary-1b.nemo", "canary")
    manifest = tiny.two_clips(tmp_path)
    options = {"source_lang": "en", "target_lang": "en", "task": "asr", "pnc": "yes"}
    expect = {
        "model_class": "EncDecMultiTaskModel", "prompt_format": "canary", **options,
        "prompt": "<|startoftranscript|><|en|><|transcribe|><|en|><|pnc|>",
        "decoding": "beam", "decoding_settings": {"beam_size": 1, "len_pen": 0.0, "max_generation_delta": 8},
    }  # fmt: skip
    used = record_canary_prompts(monkeypatch)
    tiny.assert_family_runs(tmp_path, monkeypatch, manifest, "nemo", "nemo-asr", model, options, expect)
    assert len(used) == 4 and set(used) == {expect["prompt"]}, used  # 2 clips x (batch 2, batch 1)


def test_canary_flash_prompt_runs_through_audit_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """canary-180m-flash's options in the ``canary2`` format; ``pnc: yes`` unquoted in YAML is a
    boolean, which NeMo's slot mapping would read as *no* punctuation: the backend makes it 'yes'."""
    model = tiny_nemo.build_canary(tmp_path / "tiny-canary-flash.nemo", "canary2")
    manifest = tiny.two_clips(tmp_path)
    options = {"source_lang": "en", "target_lang": "en", "pnc": True}
    expect = {
        "model_class": "EncDecMultiTaskModel", "prompt_format": "canary2", "pnc": "yes",
        "prompt": "<|startofcontext|><|startoftranscript|><|emo:undefined|><|en|><|en|><|pnc|><|noitn|><|notimestamp|><|nodiarize|>",
        "decoding": "beam",
    }  # fmt: skip
    used = record_canary_prompts(monkeypatch)
    tiny.assert_family_runs(tmp_path, monkeypatch, manifest, "nemo", "nemo-asr", model, options, expect)
    assert len(used) == 4 and set(used) == {expect["prompt"]}, used


def test_canary_options_are_checked_before_loading(tmp_path: Path) -> None:
    """A pnc or task Canary does not know, or a Canary slot on a model without a prompt, is refused
    with the option named, before any audio is read."""
    from engine.backends.asr.nemo import NemoBackend

    with pytest.raises(ConfigError, match="'pnc' must be yes or no"):
        NemoBackend(model="x.nemo", pnc="maybe")
    with pytest.raises(ConfigError, match="'task' must be one of"):
        NemoBackend(model="x.nemo", task="summarise")
    with pytest.raises(ConfigError, match="do not apply to family nemo-salm"):
        NemoBackend(model="x", family="nemo-salm", source_lang="en")
    ctc = NemoBackend(model=str(tiny.build_nemo_ctc(tmp_path / "ctc.nemo")), device="cpu", source_lang="en")
    with pytest.raises(ConfigError, match="Canary prompt slots.*EncDecCTCModel"):
        ctc.load()


def test_canary_qwen_salm_runs_through_audit_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """speechlm2 ``SALM`` saved as nvidia/canary-qwen-2.5b is (config.json naming Qwen/Qwen3-1.7B,
    model.safetensors). Without the LLM's tokenizer and config at hand the check says so and names
    the fix; with ``llm`` pointing at them it runs the model card's prompt through ``generate``."""
    from engine.backends.asr.nemo import NemoBackend

    llm = tiny_nemo.build_qwen3_llm(tmp_path / "qwen3")
    model = tiny_nemo.build_salm(tmp_path / "canary-qwen", llm)
    offline = NemoBackend.check_weights({"model": str(model), "family": "nemo-salm"})
    assert not offline.runnable and "Qwen/Qwen3-1.7B" in offline.reason and "option 'llm'" in offline.reason, offline
    assert NemoBackend.check_weights({"model": str(model), "family": "nemo-salm", "llm": str(llm)}).runnable
    manifest = tiny.two_clips(tmp_path)
    options = {"llm": str(llm), "max_new_tokens": 8}
    expect = {
        "prompt": "<|im_start|>user\nTranscribe the following: <|audioplaceholder|><|im_end|>\n<|im_start|>assistant\n",
        "instruction": "Transcribe the following:", "decoding": "greedy", "max_new_tokens": 8, "prompt_format": "qwen",
        "llm": str(llm), "checkpoint_llm": "Qwen/Qwen3-1.7B", "lora": True, "weights_missing": 0, "weights_unused": 0,
    }  # fmt: skip
    tiny.assert_family_runs(tmp_path, monkeypatch, manifest, "nemo", "nemo-salm", model, options, expect)
