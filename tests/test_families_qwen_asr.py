"""Qwen3-ASR through the ``qwen-asr`` package, proven on a tiny random Qwen3ASRForConditionalGeneration
saved in the real checkpoint's layout: run through ``audit run`` (see tests/test_families.py), and
against the Open ASR Leaderboard's ``qwen/run_eval.py`` written here as a plain function, token
for token, at batch 1 and batch 4, on clips shorter and longer than the 30 s feature window.

``qwen-asr`` pins transformers 4.57, so this runs in its own environment: ``make test-families``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests import tiny_families as tiny
from tests.reference_clips import clips

pytestmark = [
    pytest.mark.families,
    pytest.mark.skipif(importlib.util.find_spec("qwen_asr") is None, reason="qwen-asr is not installed here: run make test-families"),
]

NEW_TOKENS = 6


def test_qwen3_asr_runs_through_audit_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tiny.build_qwen3_asr(tmp_path / "qwen3-asr")
    expect = {
        "prompt": "qwen-asr chat prompt: system=context, user=<audio>; assistant prefix 'language English<asr_text>'",
        "max_new_tokens": 5,
    }
    manifest = tiny.two_clips(tmp_path)
    tiny.assert_family_runs(tmp_path, monkeypatch, manifest, "qwen3-asr", "qwen3-asr", folder, {"max_new_tokens": 5}, expect)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny.build_qwen3_asr(tmp_path_factory.mktemp("qwen3-asr"))


def _recording(asr: Any) -> list[list[int]]:
    """Record the generated token ids of every ``generate`` the package makes (pass-through)."""
    calls: list[list[int]] = []
    real = asr.model.generate

    def generate(**kwargs: Any) -> Any:
        out = real(**kwargs)
        start = int(kwargs["input_ids"].shape[1])
        calls.extend(row[start:] for row in out.sequences.tolist())
        return out

    asr.model.generate = generate
    return calls


def _answer(row: list[int], stops: set[int]) -> tuple[int, ...]:
    cut = next((i for i, t in enumerate(row) if t in stops), len(row))
    return tuple(row[:cut])


def leaderboard(folder: Path, audio: list[np.ndarray], batch: int) -> tuple[list[tuple[int, ...]], list[str]]:
    """qwen/run_eval.py: ``Qwen3ASRModel.from_pretrained(model, dtype, device_map, max_inference_batch_size=batch_size,
    max_new_tokens)``, then per batch ``transcribe(audio=[(array, 16000), ...], language="English")``, ``r.text``."""
    import torch
    from qwen_asr import Qwen3ASRModel

    asr = Qwen3ASRModel.from_pretrained(
        str(folder), dtype=torch.float32, device_map="cpu", max_inference_batch_size=batch, max_new_tokens=NEW_TOKENS
    )
    calls = _recording(asr)
    texts: list[str] = []
    for start in range(0, len(audio), batch):
        texts += [r.text for r in asr.transcribe(audio=[(a, 16000) for a in audio[start : start + batch]], language="English")]
    return [_answer(row, _stops(asr)) for row in calls], texts


def _stops(asr: Any) -> set[int]:
    eos = asr.model.generation_config.eos_token_id
    return set(eos if isinstance(eos, list) else [eos]) | {asr.processor.tokenizer.pad_token_id}


def engine(folder: Path, audio: list[np.ndarray], batch: int, exact: bool) -> tuple[list[tuple[int, ...]], list[str]]:
    """The line-up's qwen3-asr entry (language English) through the engine's backend."""
    from engine.backends.asr.qwen3_asr import Qwen3ASRBackend

    backend = Qwen3ASRBackend(
        model=str(folder), device="cpu", language="English", max_new_tokens=NEW_TOKENS, batch_size=batch, exact_batches=exact
    )
    backend.load()
    calls = _recording(backend._asr)
    texts: list[str] = []
    for start in range(0, len(audio), batch):
        texts += backend.transcribe_batch(audio[start : start + batch])
    return [_answer(row, _stops(backend._asr)) for row in calls], texts


@pytest.mark.parametrize("batch", [1, 4])
def test_engine_matches_the_leaderboard_script_token_for_token(folder: Path, batch: int) -> None:
    """Batch 1: the engine is the leaderboard's procedure. Batch 4: with ``exact_batches: false`` the
    engine batches as the leaderboard does and matches it; by default it runs each clip alone (its
    text then depends on the clip only) and matches the leaderboard at batch 1."""
    audio = clips(30.0)
    ids, texts = leaderboard(folder, audio, batch)
    assert any(ids), "the tiny model generated nothing: the comparison would prove little"
    got_ids, got_texts = engine(folder, audio, batch, exact=False)
    assert got_ids == ids and got_texts == [t.strip() for t in texts]
    alone_ids, alone_texts = engine(folder, audio, batch, exact=True)
    single_ids, single_texts = leaderboard(folder, audio, 1) if batch != 1 else (ids, texts)
    assert alone_ids == single_ids and alone_texts == [t.strip() for t in single_texts]


def test_dtype_auto_is_the_leaderboards_bfloat16_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a CUDA device ``dtype: auto`` asks the package for bfloat16, as qwen/run_eval.py does (no GPU
    here: the device is reported as CUDA and the call the backend makes is recorded, then stopped)."""
    import qwen_asr
    import torch

    import engine.backends.asr.qwen3_asr as module

    asked: dict[str, Any] = {}

    def record(model: str, **kwargs: Any) -> Any:
        asked.update(kwargs)
        raise OSError("recorded")

    monkeypatch.setattr(module, "resolve_device", lambda value: "cuda")
    monkeypatch.setattr(qwen_asr.Qwen3ASRModel, "from_pretrained", record)
    with pytest.raises(Exception, match="recorded"):
        module.Qwen3ASRBackend(model="Qwen/Qwen3-ASR-1.7B").load()
    assert asked["dtype"] is torch.bfloat16 and asked["device_map"] == "cuda" and asked["max_new_tokens"] == 512
