"""What a transformers checkpoint folder must hold for its load to pass, checked before anything loads.

One function, ``transformers_checkpoint_problems``, answers for the availability check (``audit
list models``, ``audit sweep --check``) and for the ``transformers`` backend's load (called where
the model folder is resolved, before any weights are read), so a "yes" from ``--check`` means the
load passes these same checks and a "no" names the reason the load refuses with:

* weights readable and complete: every ``*.safetensors`` file the checkpoint names (single file
  or index shards, speech adapters, the MMS language adapter in use) has a header that parses and
  tensors whose byte ranges fill the file exactly (a truncated download is caught here, not as a
  raw error half-way through a load); ``pytorch_model.bin`` files are whole zip archives;
* remote-code policy: an ``auto_map`` in ``config.json`` or in a tokenizer / processor config
  means the checkpoint runs its own Python code, allowed only with the entry's
  ``trust_remote_code: true`` -- unless transformers has its own classes for the checkpoint's
  ``model_type`` (e.g. Cohere Transcribe, whose repository also ships code for older releases):
  without the opt-in transformers loads those and the repository's code is not run;
* tokenizer files: a vocabulary the tokenizer can be built from (``tokenizer.json``,
  ``vocab.json`` (+ ``merges.txt`` for byte-level BPE), a SentencePiece model, ``tekken.json``),
  with JSON files that parse;
* adapters: a PEFT adapter (``adapter_config.json`` beside the weights or in a subfolder, or a
  config that declares ``has_lora_adapter``) needs peft at the version transformers requires,
  and its weights; without them the model would silently run without its adapter;
* the family: the entry's family drives the checkpoint's ``model_type`` (with ``family: auto`` a
  model_type no family knows would fall back to the generic pipeline, which is not the model
  card's procedure).

Only files are read (JSON headers, zip directories, package metadata): nothing imports torch or
transformers' models, nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: bits per element of each safetensors dtype (the format's own table)
SAFETENSORS_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
}
#: a header larger than this is not a real checkpoint's (the format caps it at 100 MB)
MAX_HEADER_BYTES = 100_000_000
#: files a tokenizer can be built from (any one suffices, with the pairs below)
VOCAB_FILES = ("tokenizer.json", "tekken.json", "tokenizer.model", "spiece.model", "sentencepiece.bpe.model", "vocab.json", "vocab.txt")
#: configs whose ``auto_map`` makes transformers import the checkpoint's own code
CODE_CONFIGS = (
    "config.json",
    "tokenizer_config.json",
    "preprocessor_config.json",
    "processor_config.json",
    "feature_extractor_config.json",
)
#: tokenizer classes that read ``vocab.json`` together with ``merges.txt`` when there is no tokenizer.json
_BPE_CLASSES = re.compile(r"GPT2|Whisper|Qwen2|Roberta|Bart|CLIP|CodeGen|Bloom|Moshi", re.IGNORECASE)
REMOTE_CODE_FIX = (
    "add 'trust_remote_code: true' to the model's registry entry (models/*.yaml of the configuration tree) after reviewing that code"
)


def remote_code_message(source: str, where: str = "auto_map in config.json") -> str:
    """The refusal for a checkpoint that ships its own code without the entry's opt-in."""
    return f"{source} ships its own model code ({where}) and runs only with an explicit opt-in: {REMOTE_CODE_FIX}"


def _json(path: Path) -> tuple[Any, str | None]:
    """(parsed JSON, None) or (None, the problem naming the file)."""
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, f"{path.name} in {path.parent} cannot be read as JSON ({type(exc).__name__}: {exc}); the file is damaged or cut short"


# -- weights ---------------------------------------------------------------------------------


def safetensors_problem(path: Path) -> str | None:
    """None when ``path`` is a complete safetensors file, else what is wrong with it.

    The file is an 8-byte little-endian header length, a JSON header mapping tensor names to
    dtype, shape and ``data_offsets``, then the data; the tensors must fill the data exactly.
    """
    refetch = "download it again (or copy the complete file)"
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                return f"{path.name} in {path.parent} is truncated ({size} bytes, not even a header): {refetch}"
            n = int.from_bytes(head, "little")
            if n > MAX_HEADER_BYTES or 8 + n > size:
                return (
                    f"{path.name} in {path.parent} is truncated or not a safetensors file (header of {n} bytes declared, file of "
                    f"{size} bytes): {refetch}"
                )
            raw = fh.read(n)
    except OSError as exc:
        return f"{path.name} in {path.parent} cannot be read ({exc})"
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        return f"{path.name} in {path.parent} has a header that does not parse: {refetch}"
    if not isinstance(header, dict):
        return f"{path.name} in {path.parent} has a header that is not a JSON object: {refetch}"
    data = size - 8 - n
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, stop) = str(info["dtype"]), [int(d) for d in info["shape"]], info["data_offsets"]
            begin, stop = int(begin), int(stop)
        except (KeyError, TypeError, ValueError):
            return f"{path.name} in {path.parent}: the header entry of tensor '{name}' is malformed: {refetch}"
        bits = SAFETENSORS_BITS.get(dtype)
        if bits is not None and (stop - begin) * 8 != math.prod(shape) * bits:
            return (
                f"{path.name} in {path.parent}: tensor '{name}' ({dtype} {shape}) spans {stop - begin} bytes, its shape needs "
                f"{math.prod(shape) * bits // 8}: {refetch}"
            )
        if begin < 0 or stop < begin:
            return f"{path.name} in {path.parent}: tensor '{name}' has impossible data offsets {[begin, stop]}: {refetch}"
        end = max(end, stop)
    if end > data:
        return (
            f"{path.name} in {path.parent} is truncated: its header declares {end} bytes of tensor data, the file holds {data}: {refetch}"
        )
    if end < data:
        return f"{path.name} in {path.parent} has {data - end} bytes after its last tensor (not a valid safetensors file): {refetch}"
    return None


def torch_bin_problem(path: Path) -> str | None:
    """None when a ``pytorch_model.bin`` is a whole zip archive (the torch format since 1.6) or a
    legacy pickle (not checkable here); a zip without its central directory is truncated."""
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        return f"{path.name} in {path.parent} cannot be read ({exc})"
    if magic != b"PK\x03\x04":
        return None
    try:
        with zipfile.ZipFile(path) as zf:
            zf.infolist()
    except (zipfile.BadZipFile, OSError):
        return f"{path.name} in {path.parent} is truncated (its zip directory is missing): download it again"
    return None


def _file_problem(path: Path) -> str | None:
    if not path.is_file():
        return f"{path.name} is missing from {path.parent}"
    return safetensors_problem(path) if path.suffix == ".safetensors" else torch_bin_problem(path)


def weights_problems(folder: Path) -> list[str]:
    """Every problem with the model weights of a transformers folder, in the order transformers looks
    for them: model.safetensors, its index's shards, pytorch_model.bin, its index's shards."""
    for name in ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json"):
        path = folder / name
        if not path.is_file():
            continue
        if not name.endswith(".index.json"):
            problem = _file_problem(path)
            return [problem] if problem else []
        data, bad = _json(path)
        if bad:
            return [bad]
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            return [f"{name} in {folder} has no 'weight_map': download it again"]
        shards = sorted({str(v) for v in weight_map.values()})
        return [p for p in (_file_problem(folder / s) for s in shards) if p]
    return [
        f"no model weights in {folder} (looked for model.safetensors, model.safetensors.index.json and pytorch_model.bin): "
        "copy the checkpoint's weight files there"
    ]


# -- remote code -----------------------------------------------------------------------------


def native_model_type(model_type: object) -> bool:
    """transformers has its own configuration (and model classes) for ``model_type`` (a names table:
    no model code is imported)."""
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    except ImportError:
        return False
    return isinstance(model_type, str) and model_type in CONFIG_MAPPING_NAMES


def remote_code_problems(folder: Path, source: str, trust_remote_code: bool, native: bool = False) -> list[str]:
    """The checkpoint's own code (``auto_map`` in any config transformers reads) without the opt-in;
    none when ``native`` (transformers' own classes for the model type load instead)."""
    if trust_remote_code or native:
        return []
    where = []
    for name in CODE_CONFIGS:
        path = folder / name
        if path.is_file():
            data, _ = _json(path)
            if isinstance(data, dict) and data.get("auto_map"):
                where.append(f"auto_map in {name}")
    if not where:
        return []
    code = sorted(p.name for p in folder.glob("*.py"))
    if code:
        where.append(f"code files {', '.join(code[:4])}{' ...' if len(code) > 4 else ''}")
    return [remote_code_message(source, "; ".join(where))]


# -- tokenizer -------------------------------------------------------------------------------


def tokenizer_problems(folder: Path) -> list[str]:
    """A vocabulary the tokenizer can be built from, with JSON files that parse."""
    problems = []
    for name in ("tokenizer.json", "tekken.json", "tokenizer_config.json", "vocab.json"):
        path = folder / name
        if path.is_file():
            _, bad = _json(path)
            if bad:
                problems.append(bad)
    present = [n for n in VOCAB_FILES if (folder / n).is_file()]
    if not present:
        problems.append(
            f"no tokenizer vocabulary in {folder} (looked for {', '.join(VOCAB_FILES)}): copy the checkpoint's tokenizer "
            "files there (or name the folder that has them in the entry's option 'processor')"
        )
        return problems
    if present == ["vocab.json"]:
        config, _ = _json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else ({}, None)
        cls = str((config or {}).get("tokenizer_class") or "") if isinstance(config, dict) else ""
        if _BPE_CLASSES.search(cls) and not (folder / "merges.txt").is_file():
            problems.append(f"merges.txt is missing from {folder}: {cls} needs it beside vocab.json when there is no tokenizer.json")
    return problems


# -- adapters --------------------------------------------------------------------------------


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:4])


def older(have: str, need: str) -> bool:
    """``have`` < ``need`` as release versions (packaging's rule when it is installed)."""
    try:
        from packaging.version import Version

        return Version(have) < Version(need)
    except Exception:  # noqa: BLE001 - packaging absent or an unparseable version: compare the numbers
        return _version(have) < _version(need)


def installed_version(distribution: str) -> str | None:
    """The installed version of a distribution, or None (read from metadata, nothing imported)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def peft_minimum() -> str | None:
    """The peft release transformers needs to load adapters (``MIN_PEFT_VERSION``), read from its
    source without importing it (the import pulls in torch)."""
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root) / "integrations" / "peft.py"
        if path.is_file():
            m = re.search(r"^MIN_PEFT_VERSION\s*=\s*[\"']([^\"']+)[\"']", path.read_text(encoding="utf-8"), re.MULTILINE)
            if m:
                return m.group(1)
    return None


def peft_problem(what: str) -> str | None:
    """None when peft is installed at the version transformers needs, else the refusal and its fix."""
    need, have = peft_minimum(), installed_version("peft")
    if have is not None and (need is None or not older(have, need)):
        return None
    found = "peft is not installed" if have is None else f"found peft {have}"
    spec = f"peft>={need}" if need else "peft"
    return (
        f"{what}, which transformers loads only with peft >= {need or '(its minimum)'} ({found}); without it the model would "
        f"transcribe without its speech adapter. Fix: pip install '{spec}'"
    )


#: model types whose card runs them with a speech adapter in a subfolder (the load uses it when present)
SUBFOLDER_ADAPTERS = {"phi4_multimodal": "speech-lora"}


def adapter_problems(folder: Path, config: Mapping[str, Any], target_lang: str | None, expected_adapters: bool = True) -> list[str]:
    """PEFT adapters beside the weights or in a subfolder (peft and their weights), the MMS language
    adapter in use, and (``expected_adapters``) the adapter a model type's card always uses."""
    problems: list[str] = []
    found = [p.parent for p in [folder / "adapter_config.json", *folder.glob("*/adapter_config.json")] if p.is_file()]
    if config.get("has_lora_adapter") and folder not in found:
        problems.append(
            f"config.json in {folder} declares has_lora_adapter but there is no adapter_config.json beside the weights: "
            "copy the checkpoint's adapter files there (the model would run without its adapter)"
        )
    sub = SUBFOLDER_ADAPTERS.get(str(config.get("model_type") or "")) if expected_adapters else None
    if sub and folder / sub not in found:
        problems.append(
            f"{folder} has no {sub}/adapter_config.json: a {config.get('model_type')} checkpoint transcribes with its "
            f"{sub} adapter (per its card) and would run without it; copy the checkpoint's {sub}/ folder there"
        )
    for where in found:
        rel = "adapter_config.json beside the weights" if where == folder else f"{where.name}/adapter_config.json"
        weights = [where / n for n in ("adapter_model.safetensors", "adapter_model.bin") if (where / n).is_file()]
        if not weights:
            problems.append(f"{folder}: {rel} has no adapter_model.safetensors beside it: copy the adapter's weights")
        problems.extend(p for p in (_file_problem(w) for w in weights) if p)
        bad = peft_problem(f"{folder} ships its speech LoRA adapter ({rel})")
        if bad:
            problems.append(bad)
    if target_lang:
        paths = [p for p in (folder / f"adapter.{target_lang}.safetensors", folder / f"adapter.{target_lang}.bin") if p.is_file()]
        if not paths:
            problems.append(
                f"no language adapter adapter.{target_lang}.safetensors in {folder} (option target_lang={target_lang!r}; "
                "MMS uses ISO 639-3 codes such as 'eng')"
            )
        else:
            bad = _file_problem(paths[0])
            if bad:
                problems.append(bad)
    return problems


# -- the family ------------------------------------------------------------------------------


def family_problems(config: Mapping[str, Any], family: str) -> list[str]:
    """The entry's family must drive the checkpoint's model_type; ``auto`` must find a family."""
    from engine.backends.asr.families import FAMILIES, family_loader

    model_type = str(config.get("model_type") or "")
    if not model_type:
        return ["config.json has no model_type: it is not a transformers checkpoint"]
    transformers_families = [n for n, f in FAMILIES.items() if f.backends == ("transformers",)]
    try:
        if family != "auto":
            cls = family_loader(family)
            if not cls.drives(model_type):
                drives = ", ".join(sorted(getattr(cls, "model_types", ()))) or "its own model types"
                return [
                    f"family '{family}' does not drive model_type '{model_type}' (it drives {drives}): fix 'family' in the registry "
                    "entry or use family: auto"
                ]
            return []
        if any(family_loader(n).drives(model_type) for n in transformers_families if n != "seq2seq-pipeline"):
            return []
        if family_loader("seq2seq-pipeline").drives(model_type):
            return []
    except ImportError:  # transformers itself missing: the backend's own check says so
        return []
    return [
        f"no family drives model_type '{model_type}': with family: auto the load would fall back to the generic "
        "automatic-speech-recognition pipeline, which is not the model card's procedure; name a family in the registry entry"
    ]


# -- the one entry point ---------------------------------------------------------------------


def resolve_folder(model: str, revision: str | None = None) -> Path | None:
    """A local model folder, or the local Hugging Face cache's snapshot of a hub id; None when neither
    is here (nothing is downloaded)."""
    if not model:
        return None
    path = Path(model).expanduser()
    if path.exists():
        return path if path.is_dir() else None
    if model.startswith((".", "/", "~")) or importlib.util.find_spec("huggingface_hub") is None:
        return None
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(model, revision=revision, local_files_only=True))
    except Exception:  # noqa: BLE001 - any failure means "not in the local cache"
        return None


def transformers_checkpoint_problems(folder: Path, options: Any, source: str | None = None, family_check: bool = True) -> list[str]:
    """Every reason the transformers backend's load of the checkpoint in ``folder`` would refuse (or
    silently run something else), for the backend's options (its ``TransformersOptions`` record, not
    imported here: this module sits below the backends); empty when the load passes them.

    ``family_check=False`` leaves out what the load answers itself or records rather than refuses:
    the family (the same refusal for a family that does not drive the model_type; with ``auto``, a
    fallback to the pipeline recorded as ``family_fallback`` in backend_info), and the speech adapter
    a model type's card always uses (a copy without it runs with ``speech_adapter: null`` recorded).
    The availability check names both, so it never says "yes" for a run that would not be the
    model card's."""
    source = source or str(options.model or folder)
    config_path = folder / "config.json"
    if not config_path.is_file():
        return [f"{folder} is not a transformers model directory (no config.json)"]
    config, bad = _json(config_path)
    if bad:
        return [bad]
    if not isinstance(config, dict):
        return [f"config.json in {folder} is not a JSON object"]
    problems = weights_problems(folder)
    problems += remote_code_problems(folder, source, options.trust_remote_code, native_model_type(config.get("model_type")))
    if family_check and not any("auto_map" in p for p in problems):
        problems += family_problems(config, options.family)
    processor = options.processor
    tokenizer_folder = resolve_folder(processor, options.revision) if processor else folder
    if tokenizer_folder is not None:
        if processor and tokenizer_folder != folder:
            problems += remote_code_problems(tokenizer_folder, processor, options.trust_remote_code)
        problems += tokenizer_problems(tokenizer_folder)
    problems += adapter_problems(folder, config, options.target_lang or None, expected_adapters=family_check)
    return problems
