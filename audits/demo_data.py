"""The demo recipes' built-in corpora: built when absent, only the clips a ``--limit`` run needs, and never over a corpus the user built.

* ``builtin:demo`` / ``builtin:demo-small`` with ``--limit N`` build ``full-limit-N`` / ``small-limit-N``
  (the first N clips of the subset, as before) or ``...-limit-N-pairs`` (when a section compares
  clips of one speaker: speaker or emotion) in ``data/demo-limit/<subset>``: N clips chosen from
  the design (engine/corpus/demo_limit.py), not the whole corpus;
* a corpus in the built-in folder that was built with other settings (``audit corpus demo --n 50``,
  ``audit corpus conversation --n 2``) is the user's: a demo recipe refuses to replace it and
  names the command that rebuilds the default one (``--force``), or how to run on it instead.
  Only a corpus with the default settings (e.g. from an older builder version) is rebuilt in place.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.errors import ConfigError

DEFAULT_N_UTTS = 196
"""The demo design's size (engine/corpus/demo.py's DEFAULT_N_UTTS, which a test compares), known here without importing the builder."""

log = logging.getLogger(__name__)

PAIR_SECTIONS = ("speaker", "emotion")
"""Sections that compare clips of one speaker (same-speaker trials, neutral/emotional renditions): a limited corpus takes clips in pairs."""


def _meta(path: Path) -> dict[str, Any] | None:
    """A built corpus's ``corpus.json`` (None when there is none or it cannot be read: an unfinished build)."""
    try:
        data = json.loads((path / "corpus.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _refuse(path: Path, what: str, found: str, default: str, rebuild: str, instead: str) -> ConfigError:
    return ConfigError(
        f"{path} holds a {what} built with other settings ({found}); a demo recipe uses the default one ({default}) and does not "
        f"overwrite yours. Rebuild the default {what} there with `{rebuild} --force`, or {instead}"
    )


def ensure_conversation_set(path: Path, limit: int | None = None) -> Path:
    """The demo conversation set in ``path``, built when absent; a set built with other settings is refused (module docstring).

    ``limit``: when the default set is not built, only its first ``limit`` recordings are built, in
    ``data/demo-limit/conversation-N`` (a recording depends on its index and the seed alone, so they
    are the default set's first recordings).
    """
    from engine.corpus.conversation import DEFAULT_N_RECORDINGS, build_conversation_set

    meta = _meta(path)
    default = (0, DEFAULT_N_RECORDINGS, 60.0, 120.0)
    if limit is not None and limit < DEFAULT_N_RECORDINGS:
        found = None if meta is None else (meta.get("seed"), meta.get("n_recordings"), meta.get("min_s"), meta.get("max_s"))
        if found != default:
            return build_conversation_set(path.parent / "demo-limit" / f"conversation-{int(limit)}", n_recordings=int(limit)).root
    if meta is not None:
        found = (meta.get("seed"), meta.get("n_recordings"), meta.get("min_s"), meta.get("max_s"))
        if found != default:
            raise _refuse(
                path,
                "conversation set",
                f"{meta.get('n_recordings')} recordings of {meta.get('min_s')}-{meta.get('max_s')} s, seed {meta.get('seed')}",
                f"{DEFAULT_N_RECORDINGS} recordings of 60-120 s, seed 0",
                f"audit corpus conversation --out {path}",
                "keep it and set conversation.dataset (and the recipe's dataset.path) to another folder for the default set",
            )
    return build_conversation_set(path).root


def _is_default(meta: dict[str, Any], subset: str) -> bool:
    """Whether a demo corpus.json records the default settings of ``subset`` (seed 0, the whole design)."""
    return (meta.get("seed"), meta.get("n_utts"), meta.get("subset", "full")) == (0, DEFAULT_N_UTTS, subset)


def ensure_demo_corpus(
    path: Path, progress: Callable[[int, int], None] | None = None, limit: int | None = None, pairs: bool = False
) -> Path:
    """The demo corpus folder for ``path`` (``data/demo`` or ``data/demo-small``), built when absent.

    ``limit``: a ``BASE-limit-N[-pairs]`` corpus of only the clips the run reads, in ``data/demo-limit/``
    (a built subset is used as it is when the run reads its first N clips). A corpus in ``path`` built
    with other settings is refused, never replaced.
    """
    from engine.corpus.demo_limit import limit_subset

    if path.name == "conversation":
        return ensure_conversation_set(path, limit)
    subset = base = "small" if path.name == "demo-small" else "full"
    if limit is not None:
        from engine.corpus.demo import select_plans

        n_plans = sum(len(x) for x in select_plans(base, DEFAULT_N_UTTS, 0))  # the design alone: no audio
        built = _meta(path)
        whole = built is not None and (path / "shards").is_dir() and _is_default(built, base)
        # the subset itself when the limit reads all of it, or when it is built and the first N clips are what is read
        if limit < n_plans and not (whole and not pairs):
            subset = limit_subset(base, limit, pairs)
            path = path.parent / "demo-limit" / subset
    meta = _meta(path)
    if meta is not None and subset == base:  # a built-in folder: a corpus of other settings there is the user's
        if not _is_default(meta, subset):
            flag = " --subset small" if subset == "small" else ""
            raise _refuse(
                path,
                "demo corpus",
                f"{meta.get('n_speech', meta.get('n_utts'))} clips, subset {meta.get('subset', 'full')}, seed {meta.get('seed')}",
                f"subset {subset}, seed 0",
                f"audit corpus demo{flag} --out {path}",
                f"run the recipe on it with --dataset {path / 'manifest.jsonl'}",
            )
        if (path / "shards").is_dir():
            return path
    from engine.corpus.demo import build_demo_corpus

    log.info("building the demo corpus (%s) in %s%s", subset, path, " (first run only)" if limit is None else "")
    build_demo_corpus(path, progress=progress, subset=subset)
    return path
