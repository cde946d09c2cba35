"""Tiny random models carrying each real checkpoint's preprocessing and generation configuration.

The network dimensions are shrunk; everything that decides *what the model is fed and what is kept*
is copied from the real checkpoint: sample rates, delays and silence prefixes, chunk windows,
decoder prompts and special-token ids, token caps, generation configs (forced ids, suppressed
tokens, language and task tables). tests/test_loader_references.py runs each through the engine
and through a reference procedure written from the checkpoint's reference inference and compares
token ids. Values copied from a checkpoint name it in a comment.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tests.tiny_families import favour_words, word_tokenizer

SAMPLE_RATE = 16000
def speechlike_clips(seconds: tuple[float, ...], seed: int = 7) -> list[np.ndarray]:
    """Deterministic 16 kHz clips shaped like speech: voiced bursts (a few harmonics under a noise
    envelope) of 0.2-0.9 s separated by 0.05-0.6 s pauses of faint noise, so energy-based splitting
    finds real quiet points."""
    rng = np.random.default_rng(seed)
    clips = []
    for total in seconds:
        n = int(total * SAMPLE_RATE)
        out = rng.normal(0.0, 0.002, n)
        pos = int(rng.uniform(0.05, 0.3) * SAMPLE_RATE)
        while pos < n:
            length = min(int(rng.uniform(0.2, 0.9) * SAMPLE_RATE), n - pos)
            t = np.arange(length) / SAMPLE_RATE
            f0 = rng.uniform(90, 220)
            voiced = sum(np.sin(2 * np.pi * f0 * k * t + rng.uniform(0, 6)) / k for k in (1, 2, 3, 5))
            env = np.sin(np.pi * np.arange(length) / max(1, length)) * rng.uniform(0.1, 0.4)
            out[pos : pos + length] += env * (voiced + rng.normal(0, 0.3, length))
            pos += length + int(rng.uniform(0.05, 0.6) * SAMPLE_RATE)
        clips.append(out.astype(np.float32))
    return clips


# -- Kyutai STT ------------------------------------------------------------------------------------

#: kyutai/stt-2.6b-en-trfs preprocessor_config.json: 24 kHz, 1 s of silence before the audio and the
#: text stream's 2.5 s delay (the feature extractor pads delay + 1 s after it)
KYUTAI_PREPROCESSOR = {"sampling_rate": 24000, "audio_silence_prefix_seconds": 1.0, "audio_delay_seconds": 2.5, "padding_value": 0.0}


def build_kyutai_stt(out: Path) -> Path:
    """KyutaiSpeechToTextForConditionalGeneration with stt-2.6b-en's delays, LM window (375 frames,
    30 s), position limit (750) and text padding id 3; Mimi at 12.5 Hz (frame 1920 samples) with its
    250-frame window. No eos: the model runs one text step per audio frame, as the real one."""
    import torch
    import transformers

    tokenizer = word_tokenizer(["<unk0>", "<s>", "</s>", "<pad>"], extra_words=8, bos="<s>", eos="</s>", pad="<pad>")
    extractor = transformers.KyutaiSpeechToTextFeatureExtractor(**KYUTAI_PREPROCESSOR)
    transformers.KyutaiSpeechToTextProcessor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(out)
    torch.manual_seed(0)
    codebooks = 2
    config = transformers.KyutaiSpeechToTextConfig(
        codebook_vocab_size=33, vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, ffn_dim=64, max_position_embeddings=750, sliding_window=375, num_codebooks=codebooks,
        audio_bos_token_id=32, audio_pad_token_id=len(tokenizer) + 32 * codebooks, pad_token_id=3, bos_token_id=1, eos_token_id=None,
        codec_config={"hidden_size": 16, "num_filters": 4, "upsampling_ratios": [8, 6, 5, 4], "codebook_size": 32, "codebook_dim": 8,
                      "num_quantizers": codebooks, "num_semantic_quantizers": 1, "vector_quantization_hidden_dimension": 8,
                      "upsample_groups": 16, "num_hidden_layers": 1, "intermediate_size": 32, "num_attention_heads": 2,
                      "num_key_value_heads": 2, "sliding_window": 250, "sampling_rate": 24000, "frame_rate": 12.5},
    )  # fmt: skip
    model = transformers.KyutaiSpeechToTextForConditionalGeneration(config)
    favour_words(model, 5)  # a random head would mostly emit the padding token; let every step emit a word
    generator = torch.Generator().manual_seed(1)
    for module in model.codec_model.modules():  # Mimi's codebooks start at zero: every frame would get code 0
        if type(module).__name__ == "MimiEuclideanCodebook":
            module.embed_sum.copy_(torch.randn(module.embed_sum.shape, generator=generator) * 0.1)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 3
    model.generation_config.bos_token_id = 1
    model.save_pretrained(out)
    return out


# -- Cohere Transcribe -----------------------------------------------------------------------------

#: CohereLabs/cohere-transcribe-03-2026: the tokenizer's first special tokens, in id order, and the
#: decoder-prompt tokens CohereAsrProcessor.get_decoder_prompt_ids builds from
COHERE_SPECIALS = ["<unk>", "<|nospeech|>", "<pad>", "<|endoftext|>", "<|startoftranscript|>", "<|pnc|>", "<|nopnc|>",
                   "<|startofcontext|>", "<|emo:undefined|>", "<|en|>", "<|noitn|>", "<|notimestamp|>", "<|nodiarize|>"]  # fmt: skip
#: its preprocessor_config.json (CohereAsrFeatureExtractor): 128 mel bins, 35 s chunks with a 5 s
#: boundary search (clips over 30 s are split), dither seeded per clip, pre-emphasis 0.97
COHERE_PREPROCESSOR = {"feature_size": 128, "sampling_rate": 16000, "hop_length": 160, "n_fft": 512, "win_length": 400,
                       "preemphasis": 0.97, "dither": 1e-5, "max_audio_clip_s": 35.0, "overlap_chunk_second": 5.0,
                       "min_energy_window_samples": 1600}  # fmt: skip


def build_cohere_asr(out: Path) -> Path:
    """CohereAsrForConditionalGeneration with the real special-token ids (pad 2, eos 3, bos 4), the
    real feature extractor settings and a generation config without a length cap (the checkpoint's
    gives none: generate's default of 20 tokens would apply)."""
    import torch
    import transformers

    from tests.tiny_families import WORDS

    # brackets are words here, so the leaderboard's bracket handling has something to do
    vocab = {t: i for i, t in enumerate([*COHERE_SPECIALS, "▁", "(", ")", *WORDS, *[f"w{i}" for i in range(8)]])}
    tokenizer = _word_level(vocab, specials=COHERE_SPECIALS, unk="<unk>", bos="<|startoftranscript|>", eos="<|endoftext|>", pad="<pad>")
    extractor = transformers.CohereAsrFeatureExtractor(**COHERE_PREPROCESSOR)
    transformers.CohereAsrProcessor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(out)
    torch.manual_seed(0)
    config = transformers.CohereAsrConfig(
        encoder_config={"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64, "conv_kernel_size": 9,
                        "subsampling_conv_channels": 8, "num_mel_bins": 128, "subsampling_factor": 8},
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=1024, pad_token_id=2, eos_token_id=3, bos_token_id=4, decoder_start_token_id=4,
    )  # fmt: skip
    model = transformers.CohereAsrForConditionalGeneration(config)
    head = model.get_output_embeddings()
    with torch.no_grad():  # words, and now and then the end of the transcript: eos competes like a few words
        n = len(COHERE_SPECIALS)
        head.weight[n:] *= 20.0
        eos = 1.5 * head.weight[n:].std() * torch.randn(head.weight.shape[1], generator=torch.Generator().manual_seed(3))
        head.weight[:n] = 0.0
        head.weight[3] = eos
    model.generation_config.eos_token_id = 3
    model.generation_config.pad_token_id = 2
    model.generation_config.bos_token_id = 4
    model.generation_config.decoder_start_token_id = 4
    for key in ("max_length", "max_new_tokens"):
        if hasattr(model.generation_config, key):
            setattr(model.generation_config, key, None)
    model.save_pretrained(out)
    cfg = json.loads((out / "generation_config.json").read_text())
    assert "max_new_tokens" not in cfg and "max_length" not in cfg, cfg
    return out


def _word_level(vocab: dict[str, int], specials: list[str], unk: str, bos: str, eos: str, pad: str) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(vocab, unk_token=unk))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=unk, bos_token=bos, eos_token=eos, pad_token=pad)
    fast.add_special_tokens({"additional_special_tokens": [s for s in specials if s not in (unk, bos, eos, pad)]})
    return fast
