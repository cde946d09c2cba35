"""The one answer to "can this model run here, and if not, why not?".

Each backend class knows what it needs (``requires``: importable modules; ``check_weights``:
bundled files, a local folder, the Hugging Face cache, an API key), so this module only
dispatches through the backend registry and holds the checks several backends share. Nothing
here imports torch, loads weights or touches the network: ``audit list models`` and a sweep's
selection call it for every registry entry.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Availability:
    """Whether a model can run on this machine now, and one sentence saying why (not).

    ``checked`` is False when this machine cannot tell (weights that a worker with network
    access might download): the answer is then advisory, and the process that loads the model
    decides.
    """

    runnable: bool
    reason: str
    checked: bool = True

    def __bool__(self) -> bool:
        return self.runnable


def has_module(name: str) -> bool:
    """Whether ``name`` can be imported, found without importing (executing) it."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def missing_modules(names: tuple[str, ...]) -> list[str]:
    return [m for m in names if not has_module(m)]


def hf_cached(repo_id: str) -> bool:
    """Whether a hub repository already sits in the local Hugging Face cache (no network)."""
    if not repo_id or not has_module("huggingface_hub"):
        return False
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(repo_id, local_files_only=True)
    except Exception:  # noqa: BLE001 - any failure means "not usable offline"
        return False
    return True


def local_or_cached(model: str, repo_id: str, is_model_dir: Callable[[Path], bool]) -> Availability:
    """A local model folder, or a hub id found in the local cache; otherwise not runnable offline."""
    if not model:
        return Availability(False, "no 'model' option given")
    path = Path(model).expanduser()
    if path.exists():
        if path.is_dir() and is_model_dir(path):
            return Availability(True, f"local directory {path}")
        return Availability(False, f"{path} exists but is not a model directory")
    if model.startswith((".", "/", "~")):
        return Availability(False, f"local path {path} does not exist")
    if hf_cached(repo_id):
        return Availability(True, f"'{repo_id}' is in the local Hugging Face cache")
    return Availability(
        False,
        f"'{repo_id}' is not in the local Hugging Face cache; it needs a download from the hub (or pass a local directory as 'model')",
        checked=False,
    )


def model_availability(backend: str, options: Mapping[str, Any], extra: str | None = None) -> Availability:
    """Can a model (backend name + its options) run here now, and why (not)?

    ``extra`` names the pip extra that provides the backend's packages, when the registry entry
    knows better than the backend's default.
    """
    from engine.backends import ASR_BACKENDS
    from engine.errors import RegistryError

    try:
        cls = ASR_BACKENDS.get(backend)
    except RegistryError as exc:
        return Availability(False, str(exc))
    check: Any = getattr(cls, "availability", None)
    if check is None:
        return Availability(True, "the backend has no availability check", checked=False)
    result: Availability = check(dict(options), extra)
    return result
