"""The NeMo families, each proven on a tiny random model of the real checkpoint's class, saved in
its layout and run through ``audit run`` (see tests/test_families.py): ``ASRModel`` as CTC,
RNN-T and Canary (``EncDecMultiTaskModel``, both of its prompt formats), and speechlm2 ``SALM``
(Canary-Qwen).

NeMo is too heavy for ``make test``; ``make test-families`` installs it in its own environment.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
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
        "model_class": "EncDecMultiTaskModel",
        "prompt_format": "canary",
        **options,
        "prompt": "<|startoftranscript|><|en|><|transcribe|><|en|><|pnc|>",
        "decoding": "beam",
        "decoding_settings": {"beam_size": 1, "len_pen": 0.0, "max_generation_delta": 8},
    }
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
        "model_class": "EncDecMultiTaskModel",
        "prompt_format": "canary2",
        "pnc": "yes",
        "prompt": "<|startofcontext|><|startoftranscript|><|emo:undefined|><|en|><|en|><|pnc|><|noitn|><|notimestamp|><|nodiarize|>",
        "decoding": "beam",
    }
    used = record_canary_prompts(monkeypatch)
    tiny.assert_family_runs(tmp_path, monkeypatch, manifest, "nemo", "nemo-asr", model, options, expect)
    assert len(used) == 4 and set(used) == {expect["prompt"]}, used


def test_canary_options_are_checked_before_loading(tmp_path: Path) -> None:
    """A pnc or task Canary does not know, or a Canary slot on a model without a prompt, is refused
    with the option named, before any audio is read."""
    from engine.backends.asr.nemo import NemoBackend

    with pytest.raises(ConfigError, match="nemo backend options.pnc: must be yes or no"):
        NemoBackend(model="x.nemo", pnc="maybe")
    with pytest.raises(ConfigError, match="nemo backend options.task: 'summarise' is not allowed; use one of asr"):
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
        "instruction": "Transcribe the following:",
        "decoding": "greedy",
        "max_new_tokens": 8,
        "prompt_format": "qwen",
        "llm": str(llm),
        "checkpoint_llm": "Qwen/Qwen3-1.7B",
        "lora": True,
        "weights_missing": 0,
        "weights_unused": 0,
    }
    tiny.assert_family_runs(tmp_path, monkeypatch, manifest, "nemo", "nemo-salm", model, options, expect)


# -- against the leaderboard's scripts, token for token -------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def registry(name: str) -> tuple[str, dict[str, Any]]:
    """The line-up entry's hub id and backend options as audit_configs/models/rweq.yaml gives them (the
    registry passes the entry's ``family`` to the nemo backend as the option ``family``)."""
    from engine.config import load_yaml

    entry = load_yaml(ROOT / "audit_configs" / "models" / "rweq.yaml")["models"][name]
    assert entry["backend"] == "nemo", entry
    options = {**entry["options"], "family": entry["family"]}
    return str(options.pop("model")), options


def _parakeet(kind: str) -> Callable[[Path], Path]:
    return lambda out: tiny_nemo.build_parakeet(out, kind)


def _canary(prompt_format: str) -> Callable[[Path], Path]:
    return lambda out: tiny_nemo.build_canary(out, prompt_format)


# entry of the line-up -> (tiny model of its class and configuration, the model's window in seconds: Canary's
# 40 s training length; the others attend over the whole clip, so a few seconds either side of 4 s)
NEMO_CASES: dict[str, tuple[Callable[[Path], Path], float]] = {
    "parakeet-ctc-1.1b": (_parakeet("ctc"), 4.0),
    "stt-en-conformer-ctc-large": (_parakeet("conformer-ctc"), 4.0),
    "parakeet-rnnt-0.6b": (_parakeet("rnnt"), 4.0),
    "parakeet-tdt-0.6b-v3": (_parakeet("tdt"), 4.0),
    "parakeet-tdt-ctc-110m": (_parakeet("tdt-ctc"), 4.0),
    "canary-1b": (_canary("canary"), 40.0),
    "canary-1b-flash": (_canary("canary2"), 40.0),
    "canary-1b-v2": (_canary("canary2"), 40.0),
}


@pytest.fixture(scope="module")
def nemo_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {}


def _answers(hyps: list[Any]) -> list[tuple[tuple[int, ...], str]]:
    return [(tuple(int(t) for t in h.y_sequence), str(h.text).strip()) for h in hyps]


@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("name", list(NEMO_CASES))
def test_nemo_entry_matches_the_leaderboard_script(
    name: str, batch: int, nemo_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry's options through ``NemoBackend`` give the token ids and text that nemo_asr/run_eval.py
    gives for the same checkpoint (its pnc choice for Canary, greedy_batch unless beam, float32 on the
    CPU), on clips shorter and longer than the model's window, at batch 1 and 4."""
    from engine.backends.asr.nemo import NemoBackend
    from tests import reference_nemo
    from tests.reference_clips import clips

    build, window = NEMO_CASES[name]
    if name not in nemo_models:
        nemo_models[name] = build(tmp_path_factory.mktemp(name) / f"{name}.nemo")
    path = nemo_models[name]
    hub_id, options = registry(name)
    audio = clips(window)
    prompts = record_canary_prompts(monkeypatch) if "canary" in name else []
    expected = _answers(reference_nemo.transcribe(reference_nemo.asr_model(path), hub_id, audio, batch, tmp_path_factory.mktemp("wav")))
    assert any(ids for ids, _ in expected), "the tiny model decoded nothing: the comparison would prove little"
    reference_prompts = list(prompts)
    prompts.clear()

    backend = NemoBackend(**{**options, "model": str(path), "device": "cpu", "batch_size": batch})
    backend.load()
    seen: list[Any] = []
    real = backend._model.transcribe

    def recording(*args: Any, **kwargs: Any) -> Any:  # pass-through: keeps the hypotheses the engine reads
        if "canary" in name:  # each clip decoded whole, alone or in a batch (NeMo's own long-form chunking off)
            assert kwargs["override_config"].enable_chunking is False
        out = real(*args, **kwargs)
        seen.extend(out[0] if isinstance(out, tuple) else out)
        return out

    monkeypatch.setattr(backend._model, "transcribe", recording)
    texts = backend.transcribe_batch(audio)
    assert prompts == reference_prompts  # Canary: the decoder prompt (language, task, pnc) the leaderboard's call makes
    assert _answers(seen) == expected
    assert texts == [text for _, text in expected]
    assert backend.info().dtype == "float32" and backend.info().extra["decoding"] in ("greedy_batch", "beam")


@pytest.mark.parametrize("batch", [1, 4])
def test_canary_qwen_matches_the_leaderboard_script(batch: int, tmp_path: Path) -> None:
    """canary-qwen-2.5b's entry through ``NemoBackend`` gives the token ids and text of
    nemo_asr/run_eval_salm.py (``SALM.from_pretrained``, the ``message`` slot prompt, greedy
    ``generate`` with 128 new tokens at most, answers cut at end-of-text), at batch 1 and 4, on clips
    shorter and longer than its 40 s training length."""
    from nemo.collections.speechlm2.models import SALM

    from engine.backends.asr.nemo import NemoBackend
    from engine.backends.asr.nemo_salm import answer_tokens
    from tests import reference_nemo
    from tests.reference_clips import clips

    llm = tiny_nemo.build_qwen3_llm(tmp_path / "qwen3")
    folder = tiny_nemo.build_salm(tmp_path / "canary-qwen", llm, pretrained_llm=str(llm))  # the LLM at hand, as on the hub
    audio = clips(40.0)
    reference = SALM.from_pretrained(str(folder)).eval()
    expected = []
    for start in range(0, len(audio), batch):
        expected += reference_nemo.salm_transcribe(reference, audio[start : start + batch])
    assert any(ids for ids, _ in expected), "the tiny model generated nothing: the comparison would prove little"

    _, options = registry("canary-qwen-2.5b")
    backend = NemoBackend(**{**options, "model": str(folder), "device": "cpu", "batch_size": batch})
    backend.load()
    seen: list[tuple[int, ...]] = []
    real = backend._model.generate

    def recording(*args: Any, **kwargs: Any) -> Any:  # pass-through: keeps the ids the engine decodes
        out = real(*args, **kwargs)
        seen.extend(tuple(answer_tokens(row, backend._model.text_eos_id)) for row in out.cpu().tolist())
        return out

    backend._model.generate = recording
    texts = backend.transcribe_batch(audio)
    assert seen == [ids for ids, _ in expected] and texts == [text for _, text in expected]
    assert backend.info().extra["max_new_tokens"] == 128


def test_nemo_dtype_auto_is_the_leaderboards_bfloat16_on_cuda(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a CUDA device ``dtype: auto`` casts the weights to bfloat16, as run_eval.py does (no GPU here:
    the device is reported as CUDA, the model is restored on the CPU and the cast recorded)."""
    import torch
    from nemo.collections.asr.models import ASRModel

    import engine.backends.asr.nemo as module

    path = tiny_nemo.build_parakeet(tmp_path / "ctc.nemo", "ctc")
    cast: list[Any] = []
    real_restore, real_to = ASRModel.restore_from, ASRModel.to

    def restore(*args: Any, **kwargs: Any) -> Any:
        kwargs["map_location"] = torch.device("cpu")
        return real_restore(*args, **kwargs)

    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        cast.extend(a for a in args if isinstance(a, torch.dtype))
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(module, "resolve_device", lambda value: "cuda")
    monkeypatch.setattr(ASRModel, "restore_from", restore)
    monkeypatch.setattr(ASRModel, "to", to)
    backend = module.NemoBackend(model=str(path))
    backend.load()
    assert cast == [torch.bfloat16] and backend.info().dtype == "bfloat16"
