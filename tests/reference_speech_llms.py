"""Reference procedures for the speech-LLMs of the study line-up, written here as plain functions from
the scripts that define how each checkpoint is run: the Open ASR Leaderboard's
``transformers/run_eval.py`` (Granite Speech 3.3, Voxtral, GLM-ASR), its ``phi/run_eval.py``
(Phi-4-multimodal), and the granite-4.0-1b-speech model card's usage code.

They share nothing with the engine's loader (``engine/backends/asr/families/speechllm.py``): each
builds its inputs the way its script does, calls ``generate`` with the script's settings, and
returns the new token ids and the decoded text per clip. Two things a batched reference must do
that the scripts leave to the checkpoint are made explicit: prompts are padded on the left (the
leaderboard runs batches, and a decoder-only model needs left padding for them), and
``max_new_tokens`` is a parameter so the tests stay fast (the scripts' caps are asserted separately).

Granite Speech's processor builds its log-Mel features with torchaudio; where torchaudio is not
installed the features come from ``granite_features`` (held equal to transformers' extractor by
tests/test_speech_llm_extras.py), and the prompt is expanded exactly as ``GraniteSpeechProcessor``
does (the audio token repeated per clip's ``audio_embed_sizes``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers

SAMPLE_RATE = 16000
LEADERBOARD_GRANITE_SYSTEM = (
    "Knowledge Cutoff Date: April 2024.\nToday's Date: December 19, 2024.\n"
    "You are Granite, developed by IBM. You are a helpful AI assistant"
)
GRANITE_USER = "<|audio|>can you transcribe the speech into a written format?"
PHI4_USER = "Transcribe the audio clip into text."  # phi/run_phi4_multimodal.sh USER_PROMPT


@dataclass(frozen=True)
class Answer:
    """One clip's answer: the generated token ids (up to the end of the answer) and the text."""

    ids: tuple[int, ...]
    text: str


@lru_cache(maxsize=8)
def _load(cls: Any, folder: Path, attn: str | None = None) -> Any:
    """The model in float32 (the CPU precision), loaded once per folder for all batches of a test."""
    kwargs = {"attn_implementation": attn} if attn else {}
    return cls.from_pretrained(folder, dtype=torch.float32, **kwargs).eval()


def _answers(new: Any, stops: Sequence[int], decode: Any) -> list[Answer]:
    out = []
    for row in new.tolist():
        cut = next((i for i, t in enumerate(row) if t in stops), len(row))
        out.append(Answer(tuple(row[:cut]), str(decode(row[:cut])).strip()))
    return out


def granite(folder: Path, clips: Sequence[np.ndarray], system: str | None, max_new_tokens: int, attn: str | None = None) -> list[Answer]:
    """transformers/run_eval.py for ``granite-speech-3.3`` (``system`` = its system turn) and the
    granite-4.0-1b-speech card (``system`` None: the user turn alone): chat template with
    ``add_generation_prompt``, ``processor(texts, audios)``, ``generate(max_new_tokens, repetition_penalty=1.0)``
    greedy, the tokens after the prompt decoded with ``skip_special_tokens``."""
    from engine.backends.asr.families.granite_features import GraniteFeatureConfig, GraniteLogMel

    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    tokenizer.padding_side = "left"
    chat = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": GRANITE_USER}]
    text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    values, _ = transformers.GraniteSpeechFeatureExtractor.get_feature_extractor_dict(str(folder))
    audio = GraniteLogMel(GraniteFeatureConfig.from_dict(values), torch)(list(clips))
    texts = [text.replace("<|audio|>", "<|audio|>" * int(n), 1) for n in audio.pop("audio_embed_sizes")]
    inputs = {**tokenizer(texts, return_tensors="pt", padding=True), **audio}
    model = _load(transformers.GraniteSpeechForConditionalGeneration, folder, attn)
    with torch.inference_mode():
        ids = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1, repetition_penalty=1.0)
    new = ids[:, inputs["input_ids"].shape[1] :]
    return _answers(new, [tokenizer.eos_token_id], lambda r: tokenizer.decode(r, skip_special_tokens=True))


def voxtral(folder: Path, clips: Sequence[np.ndarray], max_new_tokens: int) -> list[Answer]:
    """transformers/run_eval.py for Voxtral: ``apply_transcription_request(language="en", audio, model_id,
    sampling_rate, format=["wav"] * n)``, ``generate``, ``decode(pred_ids[:, prompt_len:], skip_special_tokens=True)``."""
    processor = transformers.AutoProcessor.from_pretrained(folder)
    inputs = processor.apply_transcription_request(
        language="en", audio=list(clips), model_id=str(folder), sampling_rate=SAMPLE_RATE, format=["wav"] * len(clips)
    )
    model = _load(transformers.VoxtralForConditionalGeneration, folder)
    with torch.inference_mode():
        ids = model.generate(**inputs, max_new_tokens=max_new_tokens)
    new = ids[:, inputs["input_ids"].shape[1] :]
    eos = model.generation_config.eos_token_id
    return _answers(new, eos if isinstance(eos, list) else [eos], lambda r: processor.decode(r, skip_special_tokens=True))


def glmasr(folder: Path, clips: Sequence[np.ndarray], max_new_tokens: int) -> list[Answer]:
    """transformers/run_eval.py for GLM-ASR: ``apply_transcription_request(audios)`` (the processor's default
    prompt), ``generate``, ``decode(pred_ids[:, prompt_len:], skip_special_tokens=True)``."""
    processor = transformers.AutoProcessor.from_pretrained(folder)
    processor.tokenizer.padding_side = "left"
    inputs = processor.apply_transcription_request(list(clips))
    model = _load(transformers.GlmAsrForConditionalGeneration, folder)
    with torch.inference_mode():
        ids = model.generate(**inputs, max_new_tokens=max_new_tokens)
    new = ids[:, inputs["input_ids"].shape[1] :]
    eos = model.generation_config.eos_token_id
    return _answers(new, eos if isinstance(eos, list) else [eos], lambda r: processor.decode(r, skip_special_tokens=True))


def phi4(folder: Path, clips: Sequence[np.ndarray], max_new_tokens: int) -> list[Answer]:
    """phi/run_eval.py: ``<|user|><|audio_1|>{prompt}<|end|><|assistant|>`` (the transformers-native checkpoint's
    audio token is ``<|audio|>``, expanded per clip's ``audio_embed_sizes`` as its processor does),
    ``generate(eos_token_id=tokenizer.eos_token_id, pad_token_id, num_beams=1)`` with the script's
    stopping criterion on ``<|end|>`` or eos, each answer cut where its first stop token begins."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    tokenizer.padding_side = "left"
    extractor = transformers.AutoFeatureExtractor.from_pretrained(folder)
    feats = extractor(list(clips), sampling_rate=SAMPLE_RATE, return_tensors="pt")
    texts = [f"<|user|>{'<|audio|>' * int(n)}{PHI4_USER}<|end|><|assistant|>" for n in feats["audio_embed_sizes"]]
    inputs = {**tokenizer(texts, return_tensors="pt", padding=True), **feats}
    stop_ids = tokenizer(["<|end|>", tokenizer.eos_token], add_special_tokens=False, padding="longest", return_tensors="pt")["input_ids"]
    criterion = _MultipleTokenBatchStoppingCriteria(stop_ids, batch_size=len(clips))
    model = _load(transformers.Phi4MultimodalForCausalLM, folder)
    with torch.inference_mode():
        ids = model.generate(
            **inputs,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
            max_new_tokens=max_new_tokens,
            num_beams=1,
            stopping_criteria=transformers.StoppingCriteriaList([criterion]),
        )
    stop_at = criterion.stop_tokens_idx.reshape(len(clips), -1)[:, 0]
    stop_at = torch.where(stop_at > 0, stop_at - stop_ids.shape[-1], ids.shape[-1])
    out = []
    for row, end in zip(ids, stop_at):
        kept = row[inputs["input_ids"].shape[1] : int(end)].tolist()
        out.append(Answer(tuple(kept), str(tokenizer.decode(kept, skip_special_tokens=True, clean_up_tokenization_spaces=False)).strip()))
    return out


class _MultipleTokenBatchStoppingCriteria(transformers.StoppingCriteria):
    """phi/run_eval.py's stopping criterion: per row, the length at which one of the stop tokens was
    first produced; generation ends when every row has one."""

    def __init__(self, stop_tokens: Any, batch_size: int) -> None:
        self.stop_tokens = stop_tokens
        self.max_stop_tokens = stop_tokens.shape[-1]
        self.stop_tokens_idx = torch.zeros(batch_size, dtype=torch.long)

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        generated = torch.eq(input_ids[:, -self.max_stop_tokens :].unsqueeze(1), self.stop_tokens)
        hit = torch.any(torch.all(generated, dim=2), dim=1)
        unset = self.stop_tokens_idx == 0
        self.stop_tokens_idx[hit & unset] = input_ids.shape[-1]
        return torch.all(self.stop_tokens_idx).expand(input_ids.shape[0])
