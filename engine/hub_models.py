"""Hugging Face checkpoints named on the command line (``--models hf:ORG/NAME[@REVISION]``) as registry entries.

A hub id becomes a ``ModelEntry`` of the ``transformers`` backend whose family is read from the
checkpoint's own ``config.json`` (``model_type``; ``architectures`` when it has none), with the
family table the registry uses (engine/backends/asr/families). It then takes exactly the path of
a registry entry: the same availability check, the same checkpoint checks at load, the same
refusals. What a registry entry makes explicit is refused here rather than guessed:

* remote code: a checkpoint whose ``auto_map`` would run its own Python code (and that
  transformers has no classes of its own for) needs an entry with ``trust_remote_code: true``;
* a model type no family drives: the load would fall back to a generic pipeline that is not the
  model card's procedure, so a registry entry has to name the family;
* a checkpoint that is not a transformers one (no ``model_type``).

The revision is pinned to the commit whose ``config.json`` was read, so the weights that load are
the ones the family was chosen for; the hub id, the revision asked for, that commit and the
family are recorded in the spec's meta (``hub``), which summary.json carries per model.

Only ``config.json`` is fetched here (from the local cache when ``HF_HUB_OFFLINE`` is set); the
weights are the backend's business, as for any registry entry.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ConfigError

HUB_PREFIX = "hf:"
#: a hub repository id: ORG/NAME of letters, digits, ``-``, ``_`` and ``.`` (the hub's own rule)
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")
BACKEND = "transformers"


def is_hub_spec(name: str) -> bool:
    """Whether a ``--models`` name is a hub checkpoint (``hf:ORG/NAME[@REVISION]``) rather than a registry name."""
    return name.startswith(HUB_PREFIX)


@dataclass(frozen=True)
class HubRef:
    """A parsed ``hf:`` name: the repository and the revision asked for (None: the default branch)."""

    repo_id: str
    revision: str | None = None

    @classmethod
    def parse(cls, spec: str) -> HubRef:
        body = spec[len(HUB_PREFIX) :] if is_hub_spec(spec) else spec
        repo_id, sep, revision = body.partition("@")
        if not _REPO_ID.match(repo_id) or ".." in repo_id:
            raise ConfigError(f"--models {spec!r}: expected hf:ORG/NAME or hf:ORG/NAME@REVISION (a Hugging Face repository id)")
        if sep and not (_REVISION.match(revision) and ".." not in revision):
            raise ConfigError(f"--models {spec!r}: the revision after '@' must be a branch, tag or commit, got {revision!r}")
        return cls(repo_id, revision if sep else None)


def _cache_dir() -> str | None:
    """The hub cache as the environment names it now (``HF_HUB_CACHE``, else ``HF_HOME``/hub), or the library's default."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return str(Path(os.environ["HF_HOME"]) / "hub")
    return None


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def fetch_config(ref: HubRef, spec: str) -> tuple[dict[str, Any], str | None]:
    """The checkpoint's ``config.json`` and the commit it was read at (None when the cache does not say)."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise ConfigError(f"--models {spec}: reading a hub checkpoint needs huggingface_hub (pip install '.[transformers]')") from None
    offline = _offline()
    try:
        path = Path(hf_hub_download(ref.repo_id, "config.json", revision=ref.revision, cache_dir=_cache_dir(), local_files_only=offline))
    except Exception as exc:  # noqa: BLE001 - every failure gets the same actionable message, with its cause
        where = f"the local Hugging Face cache ({_cache_dir() or 'the default cache'})"
        how = "HF_HUB_OFFLINE is set, so only the cache is read" if offline else "the hub could not be reached or refused"
        raise ConfigError(
            f"--models {spec}: cannot read {ref.repo_id}'s config.json{'' if ref.revision is None else f' at {ref.revision}'} from "
            f"{where}; {how}. Download it where the hub is reachable (huggingface-cli download {ref.repo_id}"
            f"{'' if ref.revision is None else f' --revision {ref.revision}'}) or pass a local folder through a registry entry. "
            f"Cause: {type(exc).__name__}: {str(exc)[:200]}"
        ) from None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"--models {spec}: config.json in {path.parent} cannot be read as JSON ({exc}); download it again") from None
    if not isinstance(config, dict):
        raise ConfigError(f"--models {spec}: config.json in {path.parent} is not a JSON object")
    commit = path.parent.name if path.parent.parent.name == "snapshots" else None
    return config, commit


def _model_type_from_architectures(architectures: Any) -> str | None:
    """The model type whose transformers classes include one of ``architectures`` (a names table; no model code imported)."""
    if not isinstance(architectures, list):
        return None
    try:
        from transformers.models.auto import modeling_auto
    except ImportError:
        return None
    wanted = {a for a in architectures if isinstance(a, str)}
    for attr in dir(modeling_auto):
        table = getattr(modeling_auto, attr)
        if attr.endswith("_MAPPING_NAMES") and isinstance(table, dict):
            for model_type, names in table.items():
                if wanted & ({names} if isinstance(names, str) else set(names)):
                    return str(model_type)
    return None


def detect_family(config: dict[str, Any], spec: str) -> tuple[str, str, str]:
    """(family, model_type, what it was read from) for a checkpoint's config, or the refusal a registry entry would get."""
    from engine.backends.asr.families import FAMILIES, family_loader
    from engine.backends.checkpoint_checks import native_model_type, remote_code_message

    model_type, source = str(config.get("model_type") or ""), "model_type"
    if not model_type:
        model_type, source = _model_type_from_architectures(config.get("architectures")) or "", "architectures"
    if config.get("auto_map") and not native_model_type(model_type):
        raise ConfigError(f"--models {spec}: {remote_code_message(spec)}")
    if not model_type:
        raise ConfigError(
            f"--models {spec}: config.json has neither a model_type nor architectures transformers knows: it is not a transformers "
            "checkpoint; write a registry entry naming its backend (models/*.yaml, docs/datasets.md#model-registry)"
        )
    transformers_families = [n for n, f in FAMILIES.items() if f.backends == (BACKEND,)]
    for name in [n for n in transformers_families if n != "seq2seq-pipeline"] + ["seq2seq-pipeline"]:
        if family_loader(name).drives(model_type):
            return name, model_type, source
    raise ConfigError(
        f"--models {spec}: no family drives model_type '{model_type}' (families: {', '.join(transformers_families)}); the generic "
        "pipeline is not the model card's procedure, so a registry entry has to name the family"
    )


def _params_m(folder: Path) -> float | None:
    """Parameters in millions from the safetensors headers already in the cache (None when absent): the memory plan's estimate."""
    from math import prod

    files = sorted(folder.glob("*.safetensors"))
    total = 0
    for f in files:
        if f.name.startswith("adapter"):
            continue
        try:
            with f.open("rb") as fh:
                n = int.from_bytes(fh.read(8), "little")
                header = json.loads(fh.read(n)) if n < 100_000_000 else {}
        except (OSError, ValueError):
            return None
        total += sum(prod(v.get("shape", [])) for k, v in header.items() if k != "__metadata__" and isinstance(v, dict))
    return round(total / 1e6, 3) if total else None


@dataclass(frozen=True)
class HubCheckpoint:
    """What a ``hf:`` name resolved to: the facts a registry entry is built from (``engine.model_registry.hub_entry``)."""

    spec: str
    repo_id: str
    revision: str | None
    commit: str | None
    family: str
    model_type: str
    family_from: str
    params_m: float | None

    @property
    def pinned(self) -> str | None:
        """The revision the load uses: the commit whose config.json was read, else the one asked for."""
        return self.commit or self.revision

    def facts(self) -> dict[str, Any]:
        """The provenance summary.json records under ``models.<name>.hub``."""
        return {
            "id": self.repo_id,
            "revision": self.revision,
            "commit": self.commit,
            "family": self.family,
            "model_type": self.model_type,
            "family_from": self.family_from,
        }


def resolve_hub(spec: str) -> HubCheckpoint:
    """A ``hf:ORG/NAME[@REVISION]`` name resolved: config read, family detected, the commit to pin found."""
    ref = HubRef.parse(spec)
    config, commit = fetch_config(ref, spec)
    family, model_type, read_from = detect_family(config, spec)
    from engine.backends.checkpoint_checks import resolve_folder

    folder = resolve_folder(ref.repo_id, commit or ref.revision)
    return HubCheckpoint(
        spec=spec,
        repo_id=ref.repo_id,
        revision=ref.revision,
        commit=commit,
        family=family,
        model_type=model_type,
        family_from=f"config.json {read_from}",
        params_m=_params_m(folder) if folder is not None else None,
    )
