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
    """Whether a model can run on this machine now, and why (not).

    ``checked`` is False when this machine cannot tell (weights that a worker with network
    access might download): the answer is then advisory, and the process that loads the model
    decides. ``problems`` lists every reason it would not run as configured (``reason`` joins
    them), so one look names all the fixes, not only the first.
    """

    runnable: bool
    reason: str
    checked: bool = True
    problems: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.runnable

    @classmethod
    def refused(cls, problems: list[str] | tuple[str, ...]) -> Availability:
        """Not runnable, for every one of ``problems`` (at least one)."""
        unique = tuple(dict.fromkeys(problems))
        return cls(False, "; ".join(unique), True, unique)

    def plus(self, problems: list[str] | tuple[str, ...]) -> Availability:
        """This answer with further definite problems added (none: unchanged)."""
        if not problems:
            return self
        own = self.problems or ((self.reason,) if not self.runnable else ())
        return Availability.refused((*own, *problems))


def has_module(name: str) -> bool:
    """Whether ``name`` can be imported, found without importing (executing) it."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def missing_modules(names: tuple[str, ...]) -> list[str]:
    return [m for m in names if not has_module(m)]


def install_hint(extra: str) -> str:
    """The command that installs an optional extra, as this install was made: ``pip install '.[ray]'``
    in a source checkout, ``pip install 'audit-engine[ray]'`` for an installed wheel."""
    from engine.config_tree import source_root

    target = ("." if source_root() is not None else "audit-engine") + ("" if extra == "core" else f"[{extra}]")
    return f"pip install '{target}'"


def require_modules(purpose: str, modules: tuple[str, ...], extra: str) -> None:
    """Raise ``BackendUnavailable`` naming the missing packages and the extra that installs them, before
    any work starts (the core install leaves Ray, pocketsphinx and the demo's audio packages out)."""
    missing = missing_modules(modules)
    if missing:
        from engine.errors import BackendUnavailable

        raise BackendUnavailable(f"{purpose} needs {', '.join(missing)}, which the '{extra}' extra installs: {install_hint(extra)}")


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


def requirement_problems(requires: tuple[str, ...] | list[str]) -> list[str]:
    """Packages a registry entry names in ``requires`` (``dist`` or ``dist>=version``) that are missing
    or too old. A bare ``peft`` means the release transformers needs to load adapters."""
    from engine.backends.checkpoint_checks import installed_version, older, peft_minimum

    problems = []
    for spec in requires:
        name, _, need = str(spec).partition(">=")
        name, need = name.strip(), need.strip() or (peft_minimum() or "" if name.strip() == "peft" else "")
        have = installed_version(name)
        wanted = f"{name}>={need}" if need else name
        if have is None:
            problems.append(f"needs {wanted} (not installed): pip install '{wanted}'")
        elif need and older(have, need):
            problems.append(f"needs {wanted} (found {name} {have}): pip install -U '{wanted}'")
    return problems


def hf_token_present() -> bool:
    """Whether a Hugging Face token is configured (HF_TOKEN or the token file), without contacting the hub."""
    import os

    if os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN"):
        return True
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    return (Path(os.environ["HF_TOKEN_PATH"]) if os.environ.get("HF_TOKEN_PATH") else home / "token").is_file()


def model_availability(
    backend: str, options: Mapping[str, Any], extra: str | None = None, requires: tuple[str, ...] | list[str] = (), gated: bool = False
) -> Availability:
    """Can a model (backend name + its options) run here now, and why (not)? Every reason is named.

    ``extra`` names the pip extra that provides the backend's packages, when the registry entry
    knows better than the backend's default; ``requires`` and ``gated`` are the entry's own facts
    (packages the checkpoint needs beyond the backend's, a hub repository behind accepted terms).
    """
    from engine.backends import ASR_BACKENDS
    from engine.errors import RegistryError

    try:
        cls = ASR_BACKENDS.get(backend)
    except RegistryError as exc:
        return Availability(False, str(exc))
    check: Any = getattr(cls, "availability", None)
    if check is None:
        result = Availability(True, "the backend has no availability check", checked=False)
    else:
        result = check(dict(options), extra)
    problems = requirement_problems(requires)
    if gated and not result.runnable and not result.checked:  # a download is needed: the hub asks for accepted terms
        repo = str(options.get("model") or "")
        if not hf_token_present():
            problems.append(
                f"gated repository: accept its conditions at https://huggingface.co/{repo} and log in "
                "(HF_TOKEN or huggingface-cli login), or copy the checkpoint to a folder and pass it as 'model'"
            )
    return result.plus(problems)
