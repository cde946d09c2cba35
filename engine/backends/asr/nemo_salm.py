"""NeMo speechlm2 ``SALM`` (nvidia/canary-qwen-2.5b): loading, prompt and greedy generation.

A SALM checkpoint is a folder (``config.json`` + ``model.safetensors``, written by
``SALM.save_pretrained``). Its ``config.json`` names the LLM by hub id (``pretrained_llm``,
``Qwen/Qwen3-1.7B`` for Canary-Qwen): ``SALM.__init__`` reads that LLM's tokenizer and config
(not its weights, which are in the checkpoint) with ``AutoTokenizer``/``AutoConfig``, so even a
local checkpoint reaches the hub unless the LLM is in the Hugging Face cache or the ``llm``
option names a local folder holding its tokenizer and config. This module loads the folder the
way ``SALM.from_pretrained`` does (``pretrained_weights=False``, then the safetensors weights,
non-strict), with that one override, and says which of the two is missing before any download.

Transcription follows the model card and the Open ASR Leaderboard's ``run_eval_salm.py``: the
user turn ``Transcribe the following: <audio locator>`` in the model's prompt format, the audio as
a zero-padded batch with its lengths, ``generate`` with ``max_new_tokens=128`` (greedy: neither
sets sampling), the answer cut at the first end-of-text token, ``tokenizer.ids_to_text`` of it
(special tokens dropped), stripped. Weights in bfloat16 on CUDA, as the leaderboard loads them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.availability import Availability, has_module, hf_cached, local_or_cached
from engine.errors import BackendUnavailable

log = logging.getLogger(__name__)

CONFIG = "config.json"
WEIGHTS = "model.safetensors"


def is_salm_dir(path: Path) -> bool:
    """A ``SALM.save_pretrained`` folder: its config names an LLM and the weights are there."""
    cfg = path / CONFIG
    if not (cfg.is_file() and (path / WEIGHTS).is_file()):
        return False
    try:
        return "pretrained_llm" in json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


def is_cached_salm(repo_id: str) -> bool:
    """Whether a hub id sits in the local cache as a SALM checkpoint (no network)."""
    if not has_module("huggingface_hub"):
        return False
    from huggingface_hub import snapshot_download

    try:
        return is_salm_dir(Path(snapshot_download(repo_id, local_files_only=True)))
    except Exception:  # noqa: BLE001 - any failure means "not a cached SALM checkpoint"
        return False


def _llm_reachable(name: str) -> Availability:
    """The LLM whose tokenizer and config SALM reads: a local folder or a cached hub id."""
    path = Path(name).expanduser()
    if path.is_dir():
        ok = (path / CONFIG).is_file()
        return Availability(ok, f"LLM folder {path}" if ok else f"LLM folder {path} has no {CONFIG}")
    if name.startswith((".", "/", "~")):
        return Availability(False, f"LLM folder {path} does not exist")
    if hf_cached(name):
        return Availability(True, f"LLM '{name}' is in the local Hugging Face cache")
    return Availability(
        False,
        f"its LLM '{name}' (tokenizer and config) is not in the local Hugging Face cache; "
        f"download it, or set option 'llm' to a local folder holding its tokenizer and config.json",
        checked=False,
    )


def check_salm_weights(model: str, llm: str | None) -> Availability:
    """Checkpoint folder (or cached hub id) and the LLM it names; no network, nothing loaded."""
    path = Path(model).expanduser()
    if not path.is_dir():
        found = local_or_cached(model, model, is_salm_dir)
        if not found:
            return found
        from huggingface_hub import snapshot_download

        path = Path(snapshot_download(model, local_files_only=True))  # cached: its config names the LLM
    if not is_salm_dir(path):
        return Availability(False, f"{path} is not a SALM checkpoint folder ({CONFIG} naming 'pretrained_llm' and {WEIGHTS})")
    name = llm or str(json.loads((path / CONFIG).read_text(encoding="utf-8"))["pretrained_llm"])
    reach = _llm_reachable(name)
    if not reach:
        return reach
    return Availability(True, f"SALM checkpoint in {path}; {reach.reason}")


def _snapshot(model: str) -> Path:
    """The checkpoint folder: a local path, else the hub snapshot (download allowed here, as
    ``SALM.from_pretrained`` would)."""
    path = Path(model).expanduser()
    if path.exists():
        if not is_salm_dir(path):
            raise BackendUnavailable(
                f"{path} is not a SALM checkpoint folder: it needs {CONFIG} (naming 'pretrained_llm') "
                f"and {WEIGHTS}, as written by SALM.save_pretrained"
            )
        return path
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(model, allow_patterns=[CONFIG, WEIGHTS]))
    except Exception as exc:  # noqa: BLE001 - hub errors come in many classes; all mean "not here"
        raise BackendUnavailable(
            f"cannot fetch SALM checkpoint '{model}' ({exc}); download it where the hub is reachable and pass the folder as 'model'"
        ) from exc


def load_salm(model: str, llm: str | None, device: str, dtype: Any = None) -> tuple[Any, dict[str, Any]]:
    """Build ``SALM`` from the folder's config (LLM taken from ``llm`` when given), load its weights
    and cast them to ``dtype`` (the leaderboard: bfloat16 on CUDA); returns the model and facts for
    ``backend_info``."""
    import torch
    from nemo.collections.speechlm2.models import SALM
    from safetensors.torch import load_model

    folder = _snapshot(model)
    cfg = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    saved_llm = str(cfg["pretrained_llm"])
    cfg["pretrained_llm"] = llm or saved_llm
    cfg["pretrained_weights"] = False  # as SALM.from_pretrained: the weights come from this checkpoint
    try:
        salm = SALM(cfg)
    except (OSError, ValueError) as exc:
        raise BackendUnavailable(
            f"SALM '{model}' needs the tokenizer and config of its LLM '{cfg['pretrained_llm']}' ({exc}); put them in the "
            "Hugging Face cache, or in a local folder named by option 'llm'"
        ) from exc
    missing, unexpected = load_model(salm, str(folder / WEIGHTS), strict=False, device="cpu")
    if missing or unexpected:  # SALM.from_pretrained loads non-strictly too; say so, do not hide it
        log.warning("SALM %s: %d weights missing from the checkpoint, %d unused", model, len(missing), len(unexpected))
    salm.to(torch.device(device))
    if dtype is not None:
        salm.to(dtype)
    salm.eval()
    facts = {
        "llm": cfg["pretrained_llm"],
        "checkpoint_llm": saved_llm,
        "prompt_format": str(cfg.get("prompt_format")),
        "lora": "lora" in cfg,
        "weights_missing": len(missing),
        "weights_unused": len(unexpected),
    }
    return salm, facts


def salm_prompt(salm: Any, instruction: str) -> list[dict[str, str]]:
    """The model card's single user turn: the instruction, then the audio locator tag."""
    return [{"role": "user", "content": f"{instruction} {salm.audio_locator_tag}"}]


def rendered_prompt(salm: Any, instruction: str) -> str:
    """The prompt exactly as the LLM reads it (chat template applied, special tokens kept)."""
    from nemo.collections.common.prompts import PromptFormatter

    formatter = PromptFormatter.resolve(salm.cfg.prompt_format)(salm.tokenizer)
    ids = formatter.encode_dialog(turns=salm_prompt(salm, instruction))["input_ids"]
    return str(salm.tokenizer.ids_to_text(ids.tolist(), remove_special_tokens=False))


def salm_transcribe(salm: Any, clips: Sequence[np.ndarray], instruction: str, max_new_tokens: int, device: str) -> list[str]:
    """One padded batch through ``generate`` (greedy, ``max_new_tokens``), answers decoded."""
    import torch
    from transformers import GenerationConfig

    lens = torch.tensor([c.shape[0] for c in clips], dtype=torch.long, device=device)
    audio = torch.zeros((len(clips), int(lens.max())), dtype=torch.float32, device=device)
    for i, c in enumerate(clips):
        audio[i, : c.shape[0]] = torch.from_numpy(c).to(device)
    config = GenerationConfig(
        bos_token_id=salm.text_bos_id,
        eos_token_id=salm.text_eos_id,
        pad_token_id=salm.text_pad_id,
        do_sample=False,
        num_beams=1,
        max_new_tokens=max_new_tokens,
    )
    prompts = [salm_prompt(salm, instruction) for _ in clips]
    ids = salm.generate(prompts=prompts, audios=audio, audio_lens=lens, generation_config=config)
    return [str(salm.tokenizer.ids_to_text(answer_tokens(row.tolist(), salm.text_eos_id))).strip() for row in ids]


def answer_tokens(row: list[int], eos_id: int) -> list[int]:
    """The answer up to (not including) its first end-of-text token: what follows it in a batch is
    padding or, where generation ran on, text the model never meant to say."""
    return row[: row.index(eos_id)] if eos_id in row else row
