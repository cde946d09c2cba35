"""Word/character alignment and edit counts.

Counts come from rapidfuzz's C Levenshtein (fast enough for millions of pairs); the
alignment (which words are substituted, deleted, inserted) comes from its edit operations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence, cast

from rapidfuzz.distance import Levenshtein

OpTag = Literal["equal", "sub", "del", "ins"]


@dataclass(frozen=True)
class EditCounts:
    """Edit counts of one hypothesis against one reference."""

    hits: int
    subs: int
    dels: int
    ins: int

    @property
    def errors(self) -> int:
        return self.subs + self.dels + self.ins

    @property
    def n_ref(self) -> int:
        return self.hits + self.subs + self.dels


@dataclass(frozen=True)
class AlignedPair:
    """One column of an alignment; ``ref`` or ``hyp`` is None for insertions/deletions."""

    tag: OpTag
    ref: str | None
    hyp: str | None
    ref_index: int | None
    hyp_index: int | None


def edit_counts(ref: Sequence[str], hyp: Sequence[str]) -> EditCounts:
    """Minimum-edit counts; the total is exact, the S/D/I split follows rapidfuzz's tie-breaking."""
    if not ref and not hyp:
        return EditCounts(0, 0, 0, 0)
    subs = dels = ins = 0
    for op in Levenshtein.editops(list(ref), list(hyp)):
        if op.tag == "replace":
            subs += 1
        elif op.tag == "delete":
            dels += 1
        else:
            ins += 1
    return EditCounts(len(ref) - subs - dels, subs, dels, ins)


def error_count(ref: Sequence[str], hyp: Sequence[str]) -> int:
    """Levenshtein distance between token sequences (faster than ``edit_counts``)."""
    return int(Levenshtein.distance(list(ref), list(hyp)))


def align(ref: Sequence[str], hyp: Sequence[str]) -> list[AlignedPair]:
    """Full minimum-edit alignment as a list of columns, in order."""
    ref = list(ref)
    hyp = list(hyp)
    out: list[AlignedPair] = []
    ops = cast(list[tuple[str, int, int, int, int]], Levenshtein.opcodes(ref, hyp).as_list())
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            out.extend(AlignedPair("equal", ref[i1 + k], hyp[j1 + k], i1 + k, j1 + k) for k in range(i2 - i1))
        elif tag == "replace":
            n_r, n_h = i2 - i1, j2 - j1
            for k in range(max(n_r, n_h)):
                r = i1 + k if k < n_r else None
                h = j1 + k if k < n_h else None
                if r is not None and h is not None:
                    out.append(AlignedPair("sub", ref[r], hyp[h], r, h))
                elif r is not None:
                    out.append(AlignedPair("del", ref[r], None, r, None))
                else:
                    out.append(AlignedPair("ins", None, hyp[h], None, h))  # type: ignore[index]
        elif tag == "delete":
            out.extend(AlignedPair("del", ref[i], None, i, None) for i in range(i1, i2))
        elif tag == "insert":
            out.extend(AlignedPair("ins", None, hyp[j], None, j) for j in range(j1, j2))
    return out
