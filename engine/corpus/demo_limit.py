"""The clips a ``--limit N`` run of a demo recipe needs, chosen from the demo corpus's design before any audio is made.

Why: building the whole corpus (208 clips, minutes of synthesis) for a run that reads N of them
wastes the user's time, and a section that compares clips of one speaker needs pairs, which the
first N clips do not give (the design's first clips cycle through the voices: the first 8 are 8
speakers, so no same-speaker trial).

* ``BASE-limit-N`` (BASE ``full`` or ``small``, the subset the recipe reads): the first N clips of
  that subset, exactly the clips ``--limit N`` read from the built subset before, so figures of
  such runs do not change;
* ``BASE-limit-N-pairs`` (recipes with a speaker or emotion section): whole units (a neutral clip
  with the emotional clips that re-voice it, so emotion pairs stay whole), voices in turn, each
  voice giving at least two clips before the next one is visited, so every voice taken has a
  same-speaker pair (but possibly the last). No speech-free clips.

Clips keep the ids, references and audio bytes they have in the full corpus.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, TypeVar

from engine.errors import ConfigError


class _Voice(Protocol):
    @property
    def speaker(self) -> str: ...


class _Plan(Protocol):
    """What the selection reads of a demo plan (engine/corpus/demo.py's UttPlan), without importing the builder."""

    @property
    def index(self) -> int: ...
    @property
    def parent(self) -> int | None: ...
    @property
    def voice(self) -> _Voice: ...


P = TypeVar("P", bound=_Plan)
F = TypeVar("F")

_SUBSET = re.compile(r"(full|small)-limit-([1-9][0-9]*)(-pairs)?")


def limit_subset(base: str, limit: int, pairs: bool) -> str:
    """The subset name of a limited demo corpus (recorded in its corpus.json, so it is rebuilt only when it differs)."""
    return f"{base}-limit-{int(limit)}" + ("-pairs" if pairs else "")


def select_limited(plans: Sequence[P], free: Sequence[F], subset: str) -> tuple[list[P], list[F]]:
    """The speech and speech-free plans of ``subset`` from its base subset's ``plans`` and ``free`` (module docstring)."""
    m = _SUBSET.fullmatch(subset)
    if m is None:
        raise ConfigError(f"demo corpus subset '{subset}': expected full-limit-N or small-limit-N (N >= 1), optionally with -pairs")
    limit = int(m.group(2))
    if not m.group(3):
        return list(plans[:limit]), list(free[: max(0, limit - len(plans))])
    ids = {p.index for p in plans}
    children: dict[int, list[P]] = {}
    for p in plans:
        if p.parent is not None and p.parent in ids:
            children.setdefault(p.parent, []).append(p)
    queues: dict[str, list[list[P]]] = {}
    for p in plans:
        if p.parent is None or p.parent not in ids:
            queues.setdefault(p.voice.speaker, []).append([p, *children.get(p.index, [])])
    chosen: list[P] = []
    while len(chosen) < limit and any(queues.values()):
        for queue in queues.values():
            got = 0
            while queue and got < 2 and len(chosen) < limit:
                unit = queue.pop(0)[: limit - len(chosen)]
                chosen.extend(unit)
                got += len(unit)
    return sorted(chosen, key=lambda p: p.index), []
