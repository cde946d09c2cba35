"""Tiny randomly initialised models of the study's architectures, saved in each real checkpoint's layout.

Nothing is downloaded: configs are shrunk to a few layers, tokenizers are built here from a small
word vocabulary (``tokenizers``), feature extractors from their classes. Each builder returns the
folder; a registry entry pointing at it runs the family loader exactly as for the real checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

CLIPS = ["the cat sat on the mat", "one two three four five six seven"]
WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "and", "ran", "to", "house", "of", "speech", "test", "one", "two"]


def two_clips(root: Path) -> Path:
    """Two espeak-ng clips of different lengths and their manifest."""
    from tests.conftest import espeak_wav, write_manifest

    rows = [{"audio_filepath": str(espeak_wav(root / f"c{i}.wav", text)), "text": text} for i, text in enumerate(CLIPS)]
    return write_manifest(root / "manifest.jsonl", rows)


def word_tokenizer(
    specials: list[str],
    extra_words: int = 0,
    bos: str | None = None,
    eos: str | None = None,
    pad: str | None = None,
    words: tuple[str, ...] = (),
) -> Any:
    """A word-level fast tokenizer: special tokens first, then a small vocabulary (decoded with spaces);
    ``words``: more whole words (e.g. those of a prompt, so that it tokenizes without ``<unk>``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    extra = [w for w in dict.fromkeys(words) if w not in WORDS]
    vocab = {t: i for i, t in enumerate([*specials, "<unk>", *WORDS, *extra, *[f"w{i}" for i in range(extra_words)]])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins word tokens with spaces
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token=bos, eos_token=eos, pad_token=pad)
    fast.add_special_tokens({"additional_special_tokens": [s for s in specials if s not in (bos, eos, pad)]})
    return fast


def favour_words(model: Any, n_special: int) -> None:
    """Random output heads mostly pick special tokens (then nothing is decoded): zero the rows of the
    special tokens and scale the word rows, so greedy decoding emits words until its length cap."""
    import torch

    head = model.get_output_embeddings()
    with torch.no_grad():
        head.weight[:n_special] = 0.0
        head.weight[n_special:] *= 20.0


def build_whisper(out: Path, tokenizer_file: Path) -> Path:
    """WhisperForConditionalGeneration (openai/whisper-* layout) with the real tiny.en tokenizer."""
    import torch
    import transformers
    from transformers import GenerationConfig, WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration, WhisperProcessor

    tokenizer = getattr(transformers, "WhisperTokenizerFast")(tokenizer_file=str(tokenizer_file))  # noqa: B009
    sot, eot, no_ts = tokenizer.convert_tokens_to_ids(["<|startoftranscript|>", "<|endoftext|>", "<|notimestamps|>"])
    WhisperProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=80), tokenizer=tokenizer).save_pretrained(out)
    torch.manual_seed(0)
    config = WhisperConfig(
        vocab_size=len(tokenizer),
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        num_mel_bins=80,
        max_source_positions=1500,
        max_target_positions=64,
        decoder_start_token_id=sot,
        eos_token_id=eot,
        pad_token_id=eot,
        bos_token_id=eot,
    )
    model = WhisperForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        decoder_start_token_id=sot, eos_token_id=eot, pad_token_id=eot, max_length=12, no_timestamps_token_id=no_ts
    )
    model.save_pretrained(out)
    return out


def build_ctc(out: Path, arch: str, adapter_lang: str | None = None) -> Path:
    """wav2vec2 / HuBERT / data2vec-audio CTC; with ``adapter_lang`` an MMS layout (adapter.<lang>.safetensors,
    a vocabulary per language)."""
    import torch
    import transformers
    from safetensors.torch import save_file

    letters = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, "|": 4, **{c: i + 5 for i, c in enumerate("etaoinshrdlucmwfgypbvk")}}
    (out / "vocab.json").parent.mkdir(parents=True, exist_ok=True)
    (out / "vocab.json").write_text(json.dumps({adapter_lang: letters} if adapter_lang else letters))
    tok_kwargs: dict[str, Any] = {"target_lang": adapter_lang} if adapter_lang else {}
    tokenizer = transformers.Wav2Vec2CTCTokenizer(
        str(out / "vocab.json"), unk_token="<unk>", pad_token="<pad>", word_delimiter_token="|", **tok_kwargs
    )
    extractor = transformers.Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True, return_attention_mask=True
    )
    transformers.Wav2Vec2Processor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(out)
    common = dict(
        vocab_size=len(letters),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        conv_dim=(16, 16, 16),
        conv_stride=(5, 4, 4),
        conv_kernel=(10, 4, 4),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        feat_extract_norm="layer",
        do_stable_layer_norm=True,
        pad_token_id=0,
        apply_spec_augment=False,
    )
    torch.manual_seed(0)
    if arch == "wav2vec2":
        config: Any = transformers.Wav2Vec2Config(**common, **({"adapter_attn_dim": 8} if adapter_lang else {}))
        model: Any = transformers.Wav2Vec2ForCTC(config)
    elif arch == "hubert":
        model = transformers.HubertForCTC(transformers.HubertConfig(**common))
    else:
        common.pop("do_stable_layer_norm")
        common.pop("feat_extract_norm")
        model = transformers.Data2VecAudioForCTC(transformers.Data2VecAudioConfig(**common))
    model.save_pretrained(out)
    if adapter_lang:
        weights = {k: v.detach().clone().contiguous() for k, v in model._get_adapters().items()}
        save_file(weights, str(out / f"adapter.{adapter_lang}.safetensors"))
    return out


def build_moonshine(out: Path) -> Path:
    """MoonshineForConditionalGeneration (UsefulSensors/moonshine-* layout: Wav2Vec2Processor)."""
    import torch
    import transformers

    tokenizer = word_tokenizer(["<pad>", "<s>", "</s>"], bos="<s>", eos="</s>", pad="<pad>")
    extractor = transformers.Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=False, return_attention_mask=True
    )
    transformers.Wav2Vec2Processor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(out)
    torch.manual_seed(0)
    config = transformers.MoonshineConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        encoder_num_hidden_layers=1,
        decoder_num_hidden_layers=1,
        encoder_num_attention_heads=2,
        decoder_num_attention_heads=2,
        max_position_embeddings=256,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    )
    model = transformers.MoonshineForConditionalGeneration(config)
    favour_words(model, 4)
    model.generation_config.decoder_start_token_id = 1
    model.save_pretrained(out)
    return out


QWEN2_AUDIO_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for c in message['content'] %}"
    "{% if c['type'] == 'audio' %}Audio 1: <|audio_bos|><|AUDIO|><|audio_eos|>\n{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_qwen2_audio(out: Path) -> Path:
    """Qwen2AudioForConditionalGeneration (Qwen/Qwen2-Audio-7B-Instruct layout) with a chat template."""
    import torch
    import transformers

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"]
    tokenizer = word_tokenizer(specials, extra_words=8, eos="<|im_end|>", pad="<|endoftext|>")
    extractor = transformers.WhisperFeatureExtractor(feature_size=128, return_attention_mask=True)
    transformers.Qwen2AudioProcessor(feature_extractor=extractor, tokenizer=tokenizer, chat_template=QWEN2_AUDIO_TEMPLATE).save_pretrained(
        out
    )
    audio_id = tokenizer.convert_tokens_to_ids("<|AUDIO|>")
    torch.manual_seed(0)
    config = transformers.Qwen2AudioConfig(
        audio_config={"d_model": 16, "encoder_layers": 1, "encoder_attention_heads": 2, "encoder_ffn_dim": 32, "num_mel_bins": 128},
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 2048,
            "eos_token_id": tokenizer.eos_token_id,
            "pad_token_id": tokenizer.pad_token_id,
        },
        audio_token_index=audio_id,
    )
    model = transformers.Qwen2AudioForConditionalGeneration(config)
    favour_words(model, len(specials) + 1)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    return out


QWEN3_ASR_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for c in message['content'] %}"
    "{% if c['type'] == 'audio' %}<|audio_start|><|audio_pad|><|audio_end|>{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_qwen3_asr(out: Path) -> Path:
    """Qwen3ASRForConditionalGeneration of the ``qwen-asr`` package (Qwen/Qwen3-ASR-* layout): its
    config, a Qwen2 fast tokenizer with the audio tokens and the package's processor."""
    import torch
    import transformers
    from qwen_asr.core.transformers_backend import Qwen3ASRConfig, Qwen3ASRForConditionalGeneration, Qwen3ASRProcessor

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|audio_start|>", "<|audio_end|>", "<|audio_pad|>", "<asr_text>"]
    base = word_tokenizer(specials, extra_words=8, eos="<|im_end|>", pad="<|endoftext|>")
    tokenizer = transformers.Qwen2TokenizerFast(
        tokenizer_object=base.backend_tokenizer,
        unk_token="<unk>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        extra_special_tokens={"audio_token": "<|audio_pad|>", "audio_bos_token": "<|audio_start|>", "audio_eos_token": "<|audio_end|>"},
    )
    extractor = transformers.WhisperFeatureExtractor(feature_size=128, return_attention_mask=True)
    Qwen3ASRProcessor(feature_extractor=extractor, tokenizer=tokenizer, chat_template=QWEN3_ASR_TEMPLATE).save_pretrained(out)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in specials}
    torch.manual_seed(0)
    config = Qwen3ASRConfig(
        thinker_config={
            "audio_config": {
                "num_mel_bins": 128,
                "encoder_layers": 1,
                "encoder_attention_heads": 2,
                "encoder_ffn_dim": 32,
                "d_model": 16,
                "output_dim": 32,
                "downsample_hidden_size": 8,
                "n_window": 50,
                "n_window_infer": 100,
                "conv_chunksize": 500,
            },
            "text_config": {
                "vocab_size": len(tokenizer),
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "head_dim": 16,
                "max_position_embeddings": 4096,
                "rope_scaling": {"rope_type": "default", "mrope_section": [4, 2, 2], "interleaved": True, "mrope_interleaved": True},
            },
            "audio_token_id": ids["<|audio_pad|>"],
            "audio_start_token_id": ids["<|audio_start|>"],
        },
        support_languages=["English"],
    )
    model = Qwen3ASRForConditionalGeneration(config)
    favour_words(model.thinker, len(specials) + 1)  # the LM head sits on the thinker
    for gen in (model.generation_config, model.thinker.generation_config):
        gen.eos_token_id = ids["<|im_end|>"]
        gen.pad_token_id = ids["<|endoftext|>"]
    model.save_pretrained(out)
    return out


def _entry(backend: str, folder: Path, family: str, options: dict[str, Any], batch: int) -> str:
    opts = {"model": str(folder), "device": "cpu", **{k: v for k, v in options.items() if v is not None}}
    if backend == "transformers":
        opts["local_files_only"] = True
    return json.dumps({"backend": backend, "family": family, "options": opts, "batch_size": batch, "tags": ["tiny"]})


def assert_family_runs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    manifest: Path,
    backend: str,
    family: str,
    folder: Path,
    options: dict[str, Any],
    expect: dict[str, Any],
) -> None:
    """``audit run`` over two clips with the model at batch 2 and batch 1: the family path ran, text
    came out, batching changed nothing, and backend_info holds the prompt and decoding settings."""
    import pandas as pd
    from typer.testing import CliRunner

    from audits.cli.main import app

    cfg = tmp_path / "configs"
    (cfg / "models").mkdir(parents=True)
    (cfg / "models" / "tiny.yaml").write_text(
        f"models:\n  tiny-b2: {_entry(backend, folder, family, options, 2)}\n  tiny-b1: {_entry(backend, folder, family, options, 1)}\n"
    )
    monkeypatch.setenv("AUDIT_CONFIG_DIR", str(cfg))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        f"name: tiny\ndataset: {{path: {manifest}}}\nmodels: [tiny-b2, tiny-b1]\nshard_size: 2\nwarmup: 0\nscoring: {{n_boot: 10}}\n"
    )
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", str(recipe), "--out", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    rows = pd.read_parquet(out / "utterances.parquet")
    texts: dict[str, dict[str, str]] = {}
    for name in ("tiny-b2", "tiny-b1"):
        m = summary["models"][name]
        assert m["status"] == "loaded" and m["n_failed"] == 0, m
        info = m["backend_info"]
        assert info["family"] == family and info.get("family_fallback", False) is False  # the family path ran, no pipeline fallback
        assert "prompt" in info and ("decoding" in info or "generate_kwargs" in info) and info["post_processing"]
        for key, value in expect.items():
            assert info[key] == value, (key, info)
        mine = rows[rows["model"] == name]
        texts[name] = dict(zip(mine["utt_id"], mine["hyp_raw"]))
        if name == "tiny-b2":
            # one batch of two really ran: the runner shares a batch's time by duration, so both clips
            # get the same seconds per audio second (a failed batch retried clip by clip would not)
            per_s = (mine["infer_s"] / mine["duration_s"]).tolist()
            assert per_s[0] == pytest.approx(per_s[1], rel=1e-9), per_s
    assert len(texts["tiny-b2"]) == 2 and all(isinstance(t, str) and t.strip() for t in texts["tiny-b2"].values())
    assert texts["tiny-b2"] == texts["tiny-b1"], texts  # batching does not change a clip's text


def build_nemo_ctc(out: Path) -> Path:
    """A NeMo ``EncDecCTCModel`` (the ASRModel class of character CTC checkpoints such as
    stt_en_conformer_ctc_*'s ancestors) from a tiny config, saved as a ``.nemo`` file."""
    import torch
    from nemo.collections.asr.models import EncDecCTCModel
    from omegaconf import OmegaConf

    labels = [" ", *"abcdefghijklmnopqrstuvwxyz", "'"]
    cfg = {
        "sample_rate": 16000,
        "labels": labels,
        "preprocessor": {
            "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
            "sample_rate": 16000,
            "features": 32,
            "window_size": 0.025,
            "window_stride": 0.01,
            "dither": 0.0,
            "pad_to": 0,
        },
        "encoder": {
            "_target_": "nemo.collections.asr.modules.ConvASREncoder",
            "feat_in": 32,
            "activation": "relu",
            "conv_mask": True,
            "jasper": [
                {
                    "filters": 32,
                    "repeat": 1,
                    "kernel": [3],
                    "stride": [1],
                    "dilation": [1],
                    "dropout": 0.0,
                    "residual": False,
                    "separable": True,
                    "se": False,
                }
            ],
        },
        "decoder": {
            "_target_": "nemo.collections.asr.modules.ConvASRDecoder",
            "feat_in": 32,
            "num_classes": len(labels),
            "vocabulary": labels,
        },
    }
    torch.manual_seed(0)
    model = EncDecCTCModel(cfg=OmegaConf.create(cfg))
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save_to(str(out))
    return out


def build_moonshine_streaming(out: Path) -> Path:
    """MoonshineStreamingForConditionalGeneration (UsefulSensors/moonshine-streaming-* layout)."""
    import torch
    import transformers

    tokenizer = word_tokenizer(["<pad>", "<s>", "</s>"], bos="<s>", eos="</s>", pad="<pad>")
    extractor = transformers.Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=False, return_attention_mask=True
    )
    transformers.MoonshineStreamingProcessor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(out)
    torch.manual_seed(0)
    config = transformers.MoonshineStreamingConfig(
        encoder_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "sliding_windows": [[16, 4], [16, 0]],
        },
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    )
    model = transformers.MoonshineStreamingForConditionalGeneration(config)
    favour_words(model, 4)
    model.generation_config.decoder_start_token_id = 1
    model.save_pretrained(out)
    return out


GLMASR_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for c in message['content'] %}"
    "{% if c['type'] == 'audio' %}<|begin_of_audio|><|pad|><|end_of_audio|>\n{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
    "{% endfor %}{% endif %}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def build_glmasr(out: Path) -> Path:
    """GlmAsrForConditionalGeneration (zai-org/GLM-ASR-Nano-2512 layout) with a chat template."""
    import torch
    import transformers

    specials = ["<|endoftext|>", "<|user|>", "<|assistant|>", "<|begin_of_audio|>", "<|end_of_audio|>", "<|pad|>"]
    tokenizer = word_tokenizer(specials, extra_words=8, eos="<|endoftext|>", pad="<|endoftext|>")
    extractor = transformers.WhisperFeatureExtractor(feature_size=128, return_attention_mask=True)
    transformers.GlmAsrProcessor(feature_extractor=extractor, tokenizer=tokenizer, chat_template=GLMASR_TEMPLATE).save_pretrained(out)
    torch.manual_seed(0)
    config = transformers.GlmAsrConfig(
        audio_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "num_mel_bins": 128},
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 2048,
            "eos_token_id": tokenizer.eos_token_id,
            "pad_token_id": tokenizer.pad_token_id,
        },
        audio_token_id=tokenizer.convert_tokens_to_ids("<|pad|>"),
    )
    model = transformers.GlmAsrForConditionalGeneration(config)
    favour_words(model, len(specials) + 1)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    return out


def build_nemo_rnnt(out: Path) -> Path:
    """A NeMo ``EncDecRNNTModel`` (the transducer ASRModel class behind Parakeet RNN-T) from a tiny
    config with greedy batch decoding, saved as a ``.nemo`` file."""
    import torch
    from nemo.collections.asr.models import EncDecRNNTModel
    from omegaconf import OmegaConf

    labels = [" ", *"abcdefghijklmnopqrstuvwxyz", "'"]
    cfg = {
        "sample_rate": 16000,
        "labels": labels,
        "model_defaults": {"enc_hidden": 32, "pred_hidden": 16},
        "preprocessor": {
            "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
            "sample_rate": 16000,
            "features": 32,
            "window_size": 0.025,
            "window_stride": 0.01,
            "dither": 0.0,
            "pad_to": 0,
        },
        "encoder": {
            "_target_": "nemo.collections.asr.modules.ConvASREncoder",
            "feat_in": 32,
            "activation": "relu",
            "conv_mask": True,
            "jasper": [
                {
                    "filters": 32,
                    "repeat": 1,
                    "kernel": [3],
                    "stride": [1],
                    "dilation": [1],
                    "dropout": 0.0,
                    "residual": False,
                    "separable": True,
                    "se": False,
                }
            ],
        },
        "decoder": {"_target_": "nemo.collections.asr.modules.RNNTDecoder", "prednet": {"pred_hidden": 16, "pred_rnn_layers": 1}},
        "joint": {"_target_": "nemo.collections.asr.modules.RNNTJoint", "jointnet": {"joint_hidden": 16, "activation": "relu"}},
        "decoding": {"strategy": "greedy_batch", "greedy": {"max_symbols": 5}},
        "loss": {"loss_name": "default"},
    }
    torch.manual_seed(0)
    model = EncDecRNNTModel(cfg=OmegaConf.create(cfg))
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save_to(str(out))
    return out


VOXTRAL_SPECIALS = [
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[PREFIX]",
    "[MIDDLE]",
    "[SUFFIX]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
    "[ARGS]",
    "[CALL_ID]",
    "[THINK]",
    "[/THINK]",
    "[AUDIO]",
    "[BEGIN_AUDIO]",
    "[TRANSCRIBE]",
]
#: mistral-common's tekken pre-tokenizer pattern (the one the real tekken.json files carry)
TEKKEN_PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
    r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def build_voxtral(out: Path) -> Path:
    """VoxtralForConditionalGeneration (mistralai/Voxtral-Mini-3B-2507 layout): a ``tekken.json`` built
    here (byte vocabulary, the special tokens with ``[AUDIO]`` at id 24 as transformers expects, the
    audio section: 12.5 audio tokens/s, 30 s chunks), read by mistral-common through transformers'
    ``MistralCommonBackend``, and the Whisper-style 128-mel feature extractor."""
    import base64

    import torch
    import transformers

    pytest.importorskip(
        "mistral_common",
        minversion="1.13",
        reason="Voxtral needs mistral-common (in the test extra): pip install -c constraints.txt mistral-common",
    )
    from transformers.tokenization_mistral_common import MistralCommonBackend

    n_special = 100
    tekken = {
        "config": {
            "pattern": TEKKEN_PATTERN,
            "num_vocab_tokens": 256,
            "default_vocab_size": n_special + 256,
            "default_num_special_tokens": n_special,
            "version": "v7",
        },
        "vocab": [
            {"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": chr(i) if 32 <= i < 127 else None}
            for i in range(256)
        ],
        "special_tokens": [{"rank": i, "token_str": t, "is_control": True} for i, t in enumerate(VOXTRAL_SPECIALS)],
        "audio": {
            "sampling_rate": 16000,
            "frame_rate": 12.5,
            "chunk_length_s": 30.0,
            "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160, "window_size": 400},
        },
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "tekken.json").write_text(json.dumps(tekken))
    tokenizer = MistralCommonBackend(tokenizer_path=str(out / "tekken.json"))
    extractor = transformers.WhisperFeatureExtractor(feature_size=128, return_attention_mask=False)
    transformers.VoxtralProcessor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(out)
    ids = {t: VOXTRAL_SPECIALS.index(t) for t in ("<s>", "</s>", "<pad>", "[AUDIO]")}
    torch.manual_seed(0)
    config = transformers.VoxtralConfig(
        # the projector stacks 4 encoder frames: intermediate_size is 4 x hidden_size, as in the real model
        audio_config={
            "hidden_size": 16,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "num_mel_bins": 128,
        },
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 16,
            "max_position_embeddings": 4096,
            "bos_token_id": ids["<s>"],
            "eos_token_id": ids["</s>"],
            "pad_token_id": ids["<pad>"],
        },
        audio_token_id=ids["[AUDIO]"],
    )
    model = transformers.VoxtralForConditionalGeneration(config)
    head = model.get_output_embeddings()
    letters = [n_special + b for b in b" abcdefghijklmnopqrstuvwxyz"]  # byte tokens sit after the special ones
    with torch.no_grad():  # a random head mostly picks special or control bytes: let greedy decoding emit letters
        kept = head.weight[letters].clone() * 20.0
        head.weight.zero_()
        head.weight[letters] = kept
    model.generation_config.eos_token_id = ids["</s>"]
    model.generation_config.pad_token_id = ids["<pad>"]
    model.save_pretrained(out)
    return out


def build_phi4_multimodal(out: Path) -> Path:
    """Phi4MultimodalForCausalLM (microsoft/Phi-4-multimodal-instruct, transformers-native layout): the
    audio feature extractor and a tokenizer with its ``<|audio|>``/``<|image|>`` tokens. The full
    processor also needs the image processor (torchvision), which the speech loader does not use."""
    import torch
    import transformers

    specials = ["<|endoftext|>", "<|user|>", "<|assistant|>", "<|end|>", "<|image|>", "<|audio|>"]
    # as the real tokenizer: eos and pad are <|endoftext|>; a turn ends with <|end|> (generation_config stops at both)
    base = word_tokenizer(specials, extra_words=8, eos="<|endoftext|>", pad="<|endoftext|>")
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=base.backend_tokenizer,
        unk_token="<unk>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        extra_special_tokens={"image_token": "<|image|>", "audio_token": "<|audio|>"},
    )
    tokenizer.save_pretrained(out)
    transformers.Phi4MultimodalFeatureExtractor(feature_size=80).save_pretrained(out)
    audio_id, image_id = tokenizer.convert_tokens_to_ids(["<|audio|>", "<|image|>"])
    torch.manual_seed(0)
    config = transformers.Phi4MultimodalConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        original_max_position_embeddings=4096,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        vision_config={
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 28,
            "patch_size": 14,
            "crop_size": 28,
            "image_token_id": image_id,
        },
        audio_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_blocks": 1,
            "num_attention_heads": 2,
            "ext_pw_out_channel": 32,
            "depthwise_separable_out_channel": 32,
            "nemo_conv_channels": 32,
            "input_size": 80,
            "audio_token_id": audio_id,
        },
    )
    model = transformers.Phi4MultimodalForCausalLM(config)
    favour_words(model, len(specials) + 1)
    end = tokenizer.convert_tokens_to_ids("<|end|>")
    head = model.get_output_embeddings()
    with torch.no_grad():  # <|end|> where "the" would win: some answers end at a turn end, as real ones do
        head.weight[end] = head.weight[tokenizer.convert_tokens_to_ids("the")] * 1.01
    model.generation_config.eos_token_id = [end, tokenizer.eos_token_id]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    return out
