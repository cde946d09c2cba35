"""Each open system's loader against its reference inference, token for token.

Per family, a tiny random model carries the real checkpoint's preprocessing and generation
configuration (tests/tiny_references.py). A reference procedure written here from the checkpoint's
reference inference (its model card / transformers docs and the Open ASR Leaderboard's script for
it; docs/loaders.md links them) transcribes each clip alone; the engine's transformers backend
transcribes the same clips at batch 1 and batch 4. The token ids of every generate() row (the
engine's ``token_ids``) and the final texts must be identical. Clips: three shorter than the
model's window, one longer (41 s).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("transformers")

from engine.backends import ASR_BACKENDS  # noqa: E402
from tests import tiny_references as tiny  # noqa: E402

Reference = Callable[[Path, np.ndarray], tuple[list[list[int]], str]]


@pytest.fixture(autouse=True)
def one_thread() -> Any:
    """Tiny models: one intra-op thread (on a busy 2-core machine, thread hand-offs cost more than the maths)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@functools.lru_cache(maxsize=4)
def _reference_model(folder: Path, model_class: str, processor_class: str = "AutoProcessor") -> tuple[Any, Any]:
    """The reference's own loading, once per tiny model: (processor, model in eval mode)."""
    import transformers

    processor = getattr(transformers, processor_class).from_pretrained(folder)
    return processor, getattr(transformers, model_class).from_pretrained(folder).eval()


def _engine(folder: Path, batch: int, **options: Any) -> Any:
    backend = ASR_BACKENDS.get("transformers")(model=str(folder), device="cpu", local_files_only=True, batch_size=batch, **options)
    backend.load()
    return backend


def _compare(folder: Path, clips: list[np.ndarray], reference: Reference, **options: Any) -> list[list[list[int]]]:
    """Reference (each clip alone) vs the engine's transformers backend at batch 1 and 4: the texts
    ``transcribe_batch`` returns, and the token ids of every row behind them (``token_ids``, recorded
    as the backend calls it)."""
    want = [reference(folder, clip) for clip in clips]
    want_ids = [ids for ids, _ in want]
    want_texts = [text.strip() for _, text in want]
    for batch in (1, 4):
        backend = _engine(folder, batch, **options)
        family = backend.family_loader
        seen: list[list[list[int]]] = []
        real = family.token_ids

        def recording(batch_clips: list[np.ndarray], real: Any = real) -> list[list[list[int]]]:
            rows = real(batch_clips)
            seen.extend(rows)
            return rows

        family.token_ids = recording  # a spy: the backend's own path runs unchanged
        texts = backend.transcribe_batch(clips)
        assert texts == want_texts, (batch, texts, want_texts)
        assert seen == want_ids, batch
        backend.close()
    assert all(want_texts), want_texts  # the stand-in really transcribes something
    return want_ids


# -- Kyutai STT ------------------------------------------------------------------------------------


def kyutai_reference(folder: Path, clip: np.ndarray) -> tuple[list[list[int]], str]:
    """transformers docs (model_doc/kyutai_speech_to_text, kyutai/stt-2.6b-en-trfs): the 24 kHz clip
    through the processor (which adds the silence prefix and the delay), generate(), batch_decode."""
    import soxr
    import torch

    processor, model = _reference_model(folder, "KyutaiSpeechToTextForConditionalGeneration", "KyutaiSpeechToTextProcessor")
    audio = np.asarray(soxr.resample(clip, tiny.SAMPLE_RATE, 24000), dtype=np.float32)
    inputs = processor(audio=audio, sampling_rate=24000, return_tensors="pt")  # audio= : the first positional argument is text in 5.x
    with torch.inference_mode():
        row = model.generate(**inputs)[0].tolist()
    return [row], processor.batch_decode([row[1:]], skip_special_tokens=True)[0]


def test_kyutai_stt_matches_the_reference(tmp_path: Path) -> None:
    folder = tiny.build_kyutai_stt(tmp_path / "kyutai")
    # 27 s + the 4.5 s of prefix and delay padding is over the LM's 375-frame (30 s) window
    clips = tiny.speechlike_clips((2.3, 4.9, 8.0, 27.0))
    ids = _compare(folder, clips, kyutai_reference)
    # one text step per 80 ms frame of prefix + clip + delay (+1 s): the transcript's tail is kept
    for clip, rows in zip(clips, ids):
        frames = (24000 * 1 + round(len(clip) * 1.5) + int(3.5 * 24000)) // 1920
        assert len(rows[0]) == 1 + frames


# -- Cohere Transcribe -----------------------------------------------------------------------------


def _remove_brackets(text: str) -> str:
    # Open ASR Leaderboard transformers/run_eval.py: brackets become spaces (the normalizer would delete their content)
    return re.sub(r"\s+", " ", text.replace("(", " ").replace(")", " "))


def _trim(row: list[int], eos: int) -> list[int]:
    return row[: row.index(eos) + 1] if eos in row else row


def cohere_reference(folder: Path, clip: np.ndarray) -> tuple[list[list[int]], str]:
    """The model card / leaderboard: processor(language='en', punctuation=False) splits a clip over 30 s
    into chunks, generate(max_new_tokens=500), processor.decode reassembles the chunks, brackets removed."""
    import torch

    processor, model = _reference_model(folder, "CohereAsrForConditionalGeneration")
    inputs = processor(clip, sampling_rate=16000, return_tensors="pt", language="en", punctuation=False)
    chunk_index = inputs.pop("audio_chunk_index")
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=500)
    text = processor.decode(out, skip_special_tokens=True, audio_chunk_index=chunk_index, language="en")[0]
    return [_trim(r, 3) for r in out.tolist()], _remove_brackets(text)


def test_cohere_transcribe_matches_the_reference(tmp_path: Path) -> None:
    folder = tiny.build_cohere_asr(tmp_path / "cohere")
    clips = tiny.speechlike_clips((2.3, 4.9, 8.0, 37.0))  # 37 s: over the 30 s threshold, two chunks of up to 35 s
    ids = _compare(folder, clips, cohere_reference, language="en")
    assert [len(rows) for rows in ids] == [1, 1, 1, 2]  # the 41 s clip is two chunks, reassembled into one text
    assert any(len(r) > 30 for rows in ids for r in rows)  # more than generate's default 20 tokens
