"""Tiny random speech-LLMs the other helpers do not build: Granite Speech, and the LoRA adapters that
Granite Speech 3.3 and Phi-4-multimodal ship beside their weights (see tests/tiny_families.py).

Nothing is downloaded. Adapters are written in PEFT's saved format by hand (``adapter_config.json``
and ``adapter_model.safetensors`` with ``base_model.model.<module>.lora_A/B.weight`` tensors), so
they exist even where peft is not installed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.tiny_families import favour_words, word_tokenizer

TEMPLATES = Path(__file__).parent / "fixtures" / "chat_templates"
#: the Granite chat templates (tests/fixtures/chat_templates/README.md says where each comes from)
GRANITE_TEMPLATES = {"3.3": "granite-3.3-instruct.jinja", "4.0": "granite-4.0-instruct.jinja"}


def granite_template(version: str) -> str:
    return (TEMPLATES / GRANITE_TEMPLATES[version]).read_text(encoding="utf-8")


def build_granite_speech(out: Path, lora: bool = False, template: str = "4.0") -> Path:
    """GraniteSpeechForConditionalGeneration (ibm-granite/granite-speech-3.3-* and 4.0 layout): a
    conformer encoder, a Q-Former projector and a Granite LM, the Granite ``template`` ("3.3": its
    default system turn holds today's date; "4.0"), and the extractor's ``preprocessor_config.json``
    as transformers saves it (the real checkpoints' values: 80 mels, n_fft 512, window 400, hop 160,
    projector window 15, downsampling 5). ``lora=True`` marks the config ``has_lora_adapter`` and
    writes the 3.3 checkpoints' adapter beside the weights."""
    import torch
    import transformers

    specials = ["<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>", "<|audio|>"]
    # the words of the prompts (the leaderboard's system turn, the templates' default ones, the user turn), so
    # each of them tokenizes to distinct ids and a different prompt gives different input ids
    prompt_words = " ".join(
        [
            "Knowledge Cutoff Date: April 2024. Today's Date: December 19, 2024. You are Granite, developed by IBM.",
            "You are a helpful AI assistant You are a helpful assistant. Please ensure responses are professional, accurate, and safe.",
            "can you transcribe the speech into a written format? system user assistant",
        ]
    ).split()
    tokenizer = word_tokenizer(
        specials, extra_words=8, bos="<|end_of_text|>", eos="<|end_of_text|>", pad="<|end_of_text|>", words=tuple(prompt_words)
    )
    tokenizer.chat_template = granite_template(template)
    tokenizer.save_pretrained(out)
    mel = {"sample_rate": 16000, "n_fft": 512, "win_length": 400, "hop_length": 160, "n_mels": 80}
    (out / "preprocessor_config.json").write_text(
        json.dumps(
            {
                "feature_extractor_type": "GraniteSpeechFeatureExtractor",
                "feature_size": 80,
                "melspec_kwargs": mel,
                "padding_side": "right",
                "padding_value": 0.0,
                "processor_class": "GraniteSpeechProcessor",
                "projector_downsample_rate": 5,
                "projector_window_size": 15,
                "return_attention_mask": False,
                "sampling_rate": 16000,
            },
            indent=2,
        )
    )
    (out / "processor_config.json").write_text(json.dumps({"audio_token": "<|audio|>", "processor_class": "GraniteSpeechProcessor"}))
    eos = tokenizer.eos_token_id
    torch.manual_seed(0)
    config = transformers.GraniteSpeechConfig(
        text_config={
            "model_type": "granite",
            "vocab_size": len(tokenizer),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 2048,
            "bos_token_id": eos,
            "eos_token_id": eos,
            "pad_token_id": eos,
            "tie_word_embeddings": True,
        },
        encoder_config={
            "input_dim": 160,
            "num_layers": 2,
            "hidden_dim": 32,
            "feedforward_mult": 2,
            "num_heads": 2,
            "dim_head": 16,
            "output_dim": 8,
            "context_size": 200,
            "max_pos_emb": 512,
            "conv_kernel_size": 5,
            "dropout": 0.0,
        },
        projector_config={
            "model_type": "blip_2_qformer",
            "hidden_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "encoder_hidden_size": 32,
            "cross_attention_frequency": 1,
            "max_position_embeddings": 64,
        },
        audio_token_index=tokenizer.convert_tokens_to_ids("<|audio|>"),
        has_lora_adapter=lora,
        downsample_rate=5,
        window_size=15,
    )
    model = transformers.GraniteSpeechForConditionalGeneration(config)
    favour_words(model, len(specials) + 1)
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = eos
    model.generation_config.bos_token_id = eos
    model.save_pretrained(out)
    if lora:
        write_lora(out, model, ["q_proj", "v_proj"], base=str(out), prefix="model.language_model.layers.")
    return out


def write_lora(folder: Path, model: Any, targets: list[str], base: str, prefix: str, rank: int = 2) -> Path:
    """A LoRA adapter over the ``targets`` linears under ``prefix`` (the LM's layers), in PEFT's saved
    format, with non-zero B matrices (a fresh PEFT adapter starts at B = 0 and would change nothing)."""
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(1)
    tensors: dict[str, Any] = {}
    for name, module in model.named_modules():
        if name.startswith(prefix) and name.rsplit(".", 1)[-1] in targets and isinstance(module, torch.nn.Linear):
            tensors[f"base_model.model.{name}.lora_A.weight"] = torch.randn(rank, module.in_features) * 0.5
            tensors[f"base_model.model.{name}.lora_B.weight"] = torch.randn(module.out_features, rank) * 0.5
    if not tensors:
        raise ValueError(f"no {targets} linears under {prefix!r} to adapt")
    # a regex (PEFT full-matches it against module names): the LM's linears only, as in the real adapters
    pattern = re.escape(prefix) + r"\d+\..*\.(" + "|".join(targets) + ")"
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(
        json.dumps(
            {
                "peft_type": "LORA",
                "task_type": "CAUSAL_LM",
                "base_model_name_or_path": base,
                "r": rank,
                "lora_alpha": 2 * rank,
                "lora_dropout": 0.0,
                "bias": "none",
                "target_modules": pattern,
                "inference_mode": True,
                "fan_in_fan_out": False,
            },
            indent=2,
        )
    )
    return folder
