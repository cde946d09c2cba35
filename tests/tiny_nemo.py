"""Tiny randomly initialised NeMo models of the study's Canary and Canary-Qwen architectures.

Nothing is downloaded: the tokenizers are sentencepiece models trained here on a few sentences,
the encoders are one-layer FastConformers, the LLM is a two-layer Qwen3 built from its config.
Each builder saves the model in the layout the real checkpoint has (a ``.nemo`` archive for
Canary, a ``config.json`` + ``model.safetensors`` folder for Canary-Qwen).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SENTENCES = [
    "the cat sat on the mat",
    "one two three four five six seven",
    "a dog ran to the house",
    "speech test of the system",
    "seven cats and one dog sat on a mat",
    "the house of the dog",
]

# Canary's prompt tokens (spl_tokens tokenizer): languages, tasks and the canary2 slots.
CANARY_SPECIALS = [
    "<|en|>",
    "<|de|>",
    "<|transcribe|>",
    "<|translate|>",
    "<|startofcontext|>",
    "<|emo:undefined|>",
    "<|itn|>",
    "<|noitn|>",
    "<|timestamp|>",
    "<|notimestamp|>",
    "<|diarize|>",
    "<|nodiarize|>",
]


def _fastconformer(feat_in: int, d_model: int) -> dict[str, Any]:
    """A one-layer FastConformer encoder (Canary's and Canary-Qwen's encoder class and subsampling)."""
    return {
        "_target_": "nemo.collections.asr.modules.ConformerEncoder",
        "feat_in": feat_in,
        "n_layers": 1,
        "d_model": d_model,
        "subsampling": "dw_striding",
        "subsampling_factor": 8,
        "subsampling_conv_channels": 16,
        "ff_expansion_factor": 2,
        "self_attention_model": "rel_pos",
        "n_heads": 2,
        "conv_kernel_size": 9,
        "dropout": 0.0,
        "dropout_pre_encoder": 0.0,
        "dropout_emb": 0.0,
        "dropout_att": 0.0,
    }


def _preprocessor(features: int) -> dict[str, Any]:
    return {
        "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
        "sample_rate": 16000,
        "features": features,
        "window_size": 0.025,
        "window_stride": 0.01,
        "dither": 0.0,
        "pad_to": 0,
        "normalize": "per_feature",
    }


# The preprocessor every Parakeet / FastConformer / Canary checkpoint of the line-up ships (their
# model_config.yaml): 25 ms Hann windows every 10 ms, n_fft 512, log-Mel, per-feature normalisation,
# dither 1e-5 (NeMo applies it in training only), no padding to a multiple of frames.
REAL_PREPROCESSOR = {
    "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
    "sample_rate": 16000,
    "normalize": "per_feature",
    "window_size": 0.025,
    "window_stride": 0.01,
    "window": "hann",
    "features": 80,
    "n_fft": 512,
    "log": True,
    "frame_splicing": 1,
    "dither": 1.0e-05,
    "pad_to": 0,
    "pad_value": 0.0,
}


def _sentencepiece(folder: Path, vocab_size: int) -> Path:
    """A BPE sentencepiece tokenizer trained on ``SENTENCES`` (NeMo's own trainer)."""
    from nemo.collections.common.tokenizers.sentencepiece_tokenizer import create_spt_model

    folder.mkdir(parents=True, exist_ok=True)
    text = folder / "train_text.txt"
    text.write_text("\n".join(SENTENCES * 4) + "\n")
    create_spt_model(str(text), vocab_size=vocab_size, sample_size=-1, do_lower_case=False, tokenizer_type="bpe", output_dir=str(folder))
    return folder


def build_canary(out: Path, prompt_format: str) -> Path:
    """An ``EncDecMultiTaskModel`` (Canary AED) with the aggregate Canary tokenizer (``spl_tokens`` +
    an English BPE), saved as a ``.nemo`` file. ``prompt_format``: ``canary`` (canary-1b: source
    language, task, target language, pnc) or ``canary2`` (canary-180m-flash, 1b-flash, 1b-v2)."""
    import torch
    from nemo.collections.asr.models import EncDecMultiTaskModel
    from nemo.collections.common.tokenizers.canary_tokenizer import CanaryTokenizer
    from nemo.utils.app_state import AppState
    from omegaconf import OmegaConf

    work = out.parent / f"{out.stem}-tokenizers"
    spl = work / "spl_tokens"
    CanaryTokenizer.build_special_tokenizer(CANARY_SPECIALS, spl)
    en = _sentencepiece(work / "en", vocab_size=48)
    hidden = 32
    defaults = {"source_lang": "en", "target_lang": "en", "pnc": "yes"}
    if prompt_format == "canary":
        defaults["task"] = "asr"
    else:
        defaults.update(decodercontext="", emotion="<|emo:undefined|>", itn="no", timestamp="no", diarize="no")
    cfg = {
        "sample_rate": 16000,
        "prompt_format": prompt_format,
        "prompt_defaults": [{"role": "user", "slots": defaults}],
        "model_defaults": {"asr_enc_hidden": hidden, "lm_enc_hidden": hidden, "lm_dec_hidden": hidden},
        "preprocessor": REAL_PREPROCESSOR,
        "encoder": _fastconformer(REAL_PREPROCESSOR["features"], hidden),
        "transf_decoder": {
            "_target_": "nemo.collections.asr.modules.transformer.get_nemo_transformer",
            "model_name": None,
            "pretrained": False,
            "encoder": None,
            "pre_ln_final_layer_norm": True,
            "config_dict": {
                "max_sequence_length": 24,
                "num_token_types": 0,
                "hidden_size": hidden,
                "inner_size": 2 * hidden,
                "num_layers": 1,
                "num_attention_heads": 2,
                "pre_ln": True,
                "vocab_size": None,
            },
        },
        "head": {
            "_target_": "nemo.collections.asr.parts.submodules.token_classifier.TokenClassifier",
            "num_layers": 1,
            "activation": "relu",
            "log_softmax": True,
            "hidden_size": hidden,
            "num_classes": None,
        },
        "decoding": {"strategy": "beam", "beam": {"beam_size": 1, "len_pen": 0.0, "max_generation_delta": 8}},
        "tokenizer": {
            "dir": None,
            "type": "agg",
            "langs": {"spl_tokens": {"dir": str(spl), "type": "bpe"}, "en": {"dir": str(en), "type": "bpe"}},
            "custom_tokenizer": {"_target_": "nemo.collections.common.tokenizers.canary_tokenizer.CanaryTokenizer", "tokenizers": None},
        },
        "loss": {"_target_": "nemo.collections.common.losses.smoothed_cross_entropy.SmoothedCrossEntropyLoss", "label_smoothing": 0.0},
    }
    # NeMo keeps the last restore_from's path in a process-wide AppState; a model built from a config
    # afterwards would look for a timestamps model in that archive's (deleted) folder.
    AppState().model_restore_path = None
    torch.manual_seed(0)
    model = EncDecMultiTaskModel(cfg=OmegaConf.create(cfg))
    _favour_text(model)
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save_to(str(out))
    return out


def _favour_text(model: Any) -> None:
    """A random head mostly picks a prompt token or end-of-text first (then no text is decoded):
    push the ``spl_tokens`` logits, the BPE's ``<unk>`` and the head's padding rows down so beam
    search emits English pieces up to its length cap."""
    import torch

    first_text = int(model.tokenizer.token_id_offset["en"])
    final = [m for m in model.log_softmax.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        final.bias[: first_text + 1] = -30.0
        final.bias[model.tokenizer.vocab_size :] = -30.0  # the head is padded to a multiple of 8: never pick the padding


AUDIO_LOCATOR = "<|audioplaceholder|>"  # canary-qwen-2.5b's audio locator tag


def build_qwen3_llm(folder: Path) -> Path:
    """A two-layer ``Qwen3ForCausalLM`` config and a byte-level BPE tokenizer with Qwen's chat
    tokens, saved like the Qwen/Qwen3-1.7B folder SALM reads them from (weights are not needed:
    SALM takes the LLM weights from its own checkpoint)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast, Qwen3Config

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(SENTENCES * 4 + ["Transcribe the following:", "user\nassistant\n"], trainer=trainer)
    fast = Qwen2TokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None, bos_token=None)
    fast.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    folder.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(folder)
    cfg = Qwen3Config(
        vocab_size=len(fast) + 8,  # headroom for added tokens, as in Qwen/Qwen3-1.7B
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=fast.pad_token_id,
        bos_token_id=None,
    )
    cfg.save_pretrained(folder)
    return folder


def build_salm(out: Path, llm: Path, pretrained_llm: str = "Qwen/Qwen3-1.7B") -> Path:
    """A speechlm2 ``SALM`` (Canary-Qwen's class): FastConformer perception with a Conformer
    modality adapter, the tiny Qwen3 LLM with a LoRA adapter, the ``qwen`` prompt format. Saved
    with ``save_pretrained`` (``config.json`` + ``model.safetensors``, the nvidia/canary-qwen-2.5b
    layout); the saved ``pretrained_llm`` is the real hub id, so loading needs the LLM folder."""
    import torch
    from nemo.collections.speechlm2.models import SALM

    hidden = 32
    adapter = {**_fastconformer(hidden, hidden), "subsampling_factor": 1, "feat_out": -1}
    cfg = {
        "pretrained_llm": str(llm),
        "pretrained_asr": "nvidia/canary-1b-flash",
        "pretrained_weights": False,
        "freeze_params": ["^llm\\..+$", "^embed_tokens\\..+$"],
        "prevent_freeze_params": [],
        "prompt_format": "qwen",
        "audio_locator_tag": AUDIO_LOCATOR,
        "lora": {"task_type": "CAUSAL_LM", "r": 2, "lora_alpha": 4, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"]},
        "perception": {
            "target": "nemo.collections.speechlm2.modules.perception.AudioPerceptionModule",
            "preprocessor": _preprocessor(32),
            "encoder": _fastconformer(32, hidden),
            "modality_adapter": adapter,
            "output_dim": hidden,
        },
    }
    torch.manual_seed(0)
    model = SALM(cfg)
    # The output head is tied to the embeddings; a random one mostly picks a special or whitespace
    # token (then the answer strips to nothing): zero those rows and scale the word rows.
    tok = model.tokenizer.tokenizer
    blank = [i for i in range(len(tok)) if not tok.decode([i], skip_special_tokens=True).strip()]
    with torch.no_grad():
        model.embed_tokens.weight.mul_(20.0)
        model.embed_tokens.weight[blank] = 0.0
    model.cfg.pretrained_llm = pretrained_llm
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    return out


TDT_DURATIONS = [0, 1, 2, 3, 4]  # parakeet-tdt-* and parakeet-tdt_ctc-110m

#: kind -> (NeMo class, encoder subsampling, decoding config as the real checkpoint ships it)
PARAKEET_KINDS: dict[str, tuple[str, tuple[str, int], dict[str, Any]]] = {
    # parakeet-ctc-1.1b: FastConformer (dw_striding x8) + CTC
    "ctc": ("EncDecCTCModelBPE", ("dw_striding", 8), {"strategy": "greedy_batch"}),
    # stt_en_conformer_ctc_large: Conformer (striding x4) + CTC, its config decodes with plain "greedy"
    "conformer-ctc": ("EncDecCTCModelBPE", ("striding", 4), {"strategy": "greedy"}),
    # parakeet-rnnt-0.6b/1.1b, stt_en_fastconformer_transducer_large
    "rnnt": ("EncDecRNNTBPEModel", ("dw_striding", 8), {"strategy": "greedy_batch", "greedy": {"max_symbols": 10}}),
    # parakeet-tdt-0.6b-v3, parakeet-tdt-1.1b
    "tdt": (
        "EncDecRNNTBPEModel",
        ("dw_striding", 8),
        {"strategy": "greedy_batch", "model_type": "tdt", "durations": TDT_DURATIONS, "greedy": {"max_symbols": 10}},
    ),
    # parakeet-tdt_ctc-110m: hybrid, the TDT decoder is the default one
    "tdt-ctc": (
        "EncDecHybridRNNTCTCBPEModel",
        ("dw_striding", 8),
        {"strategy": "greedy_batch", "model_type": "tdt", "durations": TDT_DURATIONS, "greedy": {"max_symbols": 10}},
    ),
}


def build_parakeet(out: Path, kind: str) -> Path:
    """A tiny model of a Parakeet / Conformer checkpoint of the line-up (``PARAKEET_KINDS``): the real
    preprocessor, the encoder's real subsampling, a BPE tokenizer, the decoder and joint of its kind
    (TDT: 5 duration outputs and the TDT loss), and the decoding config the checkpoint ships; saved as
    a ``.nemo`` file. The blank logit is lowered so the random model emits tokens."""
    import torch
    from nemo.collections.asr import models as asr_models
    from nemo.utils.app_state import AppState
    from omegaconf import OmegaConf

    cls_name, (subsampling, factor), decoding = PARAKEET_KINDS[kind]
    tok = _sentencepiece(out.parent / f"{out.stem}-tokenizer", vocab_size=40)
    hidden = 32
    encoder = {**_fastconformer(80, hidden), "subsampling": subsampling, "subsampling_factor": factor}
    cfg: dict[str, Any] = {
        "sample_rate": 16000,
        "preprocessor": REAL_PREPROCESSOR,
        "encoder": encoder,
        "tokenizer": {"dir": str(tok), "type": "bpe"},
        "model_defaults": {"enc_hidden": hidden, "pred_hidden": 16},
        "decoding": decoding,
        # as in the real configs (the transcribe dataloader reads use_start_end_token from it)
        "validation_ds": {
            "manifest_filepath": None,
            "sample_rate": 16000,
            "batch_size": 16,
            "shuffle": False,
            "use_start_end_token": False,
        },
    }
    ctc_decoder = {"_target_": "nemo.collections.asr.modules.ConvASRDecoder", "feat_in": hidden, "num_classes": -1, "vocabulary": []}
    if kind in ("ctc", "conformer-ctc"):
        cfg["decoder"] = ctc_decoder
    else:
        tdt = kind in ("tdt", "tdt-ctc")
        cfg["decoder"] = {"_target_": "nemo.collections.asr.modules.RNNTDecoder", "prednet": {"pred_hidden": 16, "pred_rnn_layers": 1}}
        cfg["joint"] = {
            "_target_": "nemo.collections.asr.modules.RNNTJoint",
            "num_extra_outputs": len(TDT_DURATIONS) if tdt else 0,
            "jointnet": {"joint_hidden": 16, "activation": "relu"},
        }
        cfg["loss"] = (
            {"loss_name": "tdt", "tdt_kwargs": {"durations": TDT_DURATIONS, "sigma": 0.02, "omega": 0.1}}
            if tdt
            else {"loss_name": "default"}
        )
        if kind == "tdt-ctc":
            cfg["aux_ctc"] = {"decoder": ctc_decoder, "decoding": {"strategy": "greedy"}, "ctc_loss_weight": 0.3}
    AppState().model_restore_path = None
    torch.manual_seed(0)
    model = getattr(asr_models, cls_name)(cfg=OmegaConf.create(cfg))
    _lower_blank(model, kind)
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save_to(str(out))
    return out


def _lower_blank(model: Any, kind: str) -> None:
    """A random model mostly picks blank (nothing is decoded): lower the blank logit a little."""
    import torch

    with torch.no_grad():
        if kind in ("ctc", "conformer-ctc"):
            final = model.decoder.decoder_layers[-1]
            final.bias[-1] -= 2.0  # blank is the last CTC class
        else:
            final = [m for m in model.joint.joint_net.modules() if isinstance(m, torch.nn.Linear)][-1]
            blank = model.joint.num_classes_with_blank - 1  # before the duration outputs
            final.bias[blank] -= 1.0
