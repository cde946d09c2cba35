"""Which clips a part of the audit reads: the dataset's own (source) clips, or source and derived ones.

A recipe with a ``perturbations:`` block makes new audio from every clip of the dataset
(``engine/perturb/derive.py``): each derived clip is a level of its source clip (label
``perturbation`` = ``<family>:<level>``, ``parent_id`` = the source), not a new clip. Counting it
as one would pair a clip with its own noisy copy in a speaker trial, count a clip twice in a
label count, and mix copies into the headline WER. So every part of the audit declares what it
reads (``AuditSection.reads``; the ASR scoring reads source clips), and this module is the one
place that selects its rows and its dataset:

* ``SOURCE`` (the default): the dataset's own clips, exactly as a run without derived clips has
  them (the derivation labels dropped), so every figure outside the ladders is the same with or
  without a ``perturbations:`` block;
* ``DERIVED``: source and derived clips, with the derivation as a column (``perturbation`` is
  ``clean`` on source clips). A derived clip is never independent of its source: ``source_ids``
  maps it to its source, and ``block_keys`` gives it its source's bootstrap block (its speaker,
  or its source clip where the speaker is unknown).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.data import DERIVATION_COLUMN, DERIVATION_LABELS, SOURCE_DERIVATION
from engine.errors import ConfigError

if TYPE_CHECKING:  # pandas is imported where rows are read, so declaring a scope (audits.sections) stays cheap
    import numpy as np
    import pandas as pd

    from engine.datasets.base import Dataset

SOURCE = "source"
"""Source clips only: the dataset's own clips (every section's default, and the ASR scoring's)."""
DERIVED = "source+derived"
"""Source and derived clips, with the derivation as a column (the perturbation ladders)."""
SCOPES = (SOURCE, DERIVED)


def check_scope(scope: str, where: str) -> str:
    """``scope`` if it is one of ``SCOPES``; a ``ConfigError`` naming ``where`` otherwise."""
    if scope not in SCOPES:
        raise ConfigError(f"{where}: reads must be one of {', '.join(repr(s) for s in SCOPES)}, got {scope!r}")
    return scope


def clip_source(utt_id: str, parent_id: str | None, labels: Mapping[str, str]) -> str:
    """The source clip of one clip (its ``parent_id`` when the run derived it, else itself)."""
    value = labels.get(DERIVATION_COLUMN)
    return str(parent_id) if parent_id and value not in (None, "", SOURCE_DERIVATION) else utt_id


def derived_mask(rows: pd.DataFrame) -> pd.Series:
    """True for the rows of derived clips (a derivation label other than ``clean``)."""
    import pandas as pd

    if DERIVATION_COLUMN not in rows.columns:
        return pd.Series(False, index=rows.index)
    col = rows[DERIVATION_COLUMN].astype("string")
    return (col.notna() & (col != SOURCE_DERIVATION)).fillna(False).astype(bool)


def source_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of source clips, without the derivation labels: what a run without derived clips holds."""
    derived = derived_mask(rows)
    out = rows[~derived] if bool(derived.any()) else rows
    drop = [c for c in DERIVATION_LABELS if c in out.columns]
    return out.drop(columns=drop) if drop else out


def rows_for(scope: str, rows: pd.DataFrame) -> pd.DataFrame:
    """The rows a part of the audit that reads ``scope`` sees."""
    return source_rows(rows) if check_scope(scope, "clip scope") == SOURCE else rows


def source_ids(rows: pd.DataFrame) -> pd.Series:
    """The source clip of every row: its ``parent_id`` for a derived clip, its own ``utt_id`` otherwise."""
    ids = rows["utt_id"].astype(str)
    derived = derived_mask(rows)
    if bool(derived.any()) and "parent_id" in rows.columns:
        ids = ids.where(~derived, rows["parent_id"].astype(str))
    return ids


def block_keys(rows: pd.DataFrame) -> np.ndarray:
    """Bootstrap block of every row: its speaker, else its source clip (so a derived clip shares its source's block)."""
    src = source_ids(rows)
    if "speaker" not in rows.columns:
        return src.to_numpy()
    return rows["speaker"].where(rows["speaker"].notna(), src).astype(str).to_numpy()


@dataclass(frozen=True)
class ClipViews:
    """The run's dataset and rows as each scope sees them.

    ``source`` is the dataset as the recipe opened it; ``full`` is the dataset the models ran on
    (``source`` plus whatever a section's ``prepare_dataset`` derived; the same object when
    nothing was derived).
    """

    source: Dataset
    full: Dataset

    @property
    def has_derived(self) -> bool:
        return self.full is not self.source

    def dataset(self, scope: str) -> Dataset:
        """The dataset a part of the audit that reads ``scope`` sees."""
        return self.source if check_scope(scope, "clip scope") == SOURCE else self.full

    def rows(self, scope: str, table: pd.DataFrame) -> pd.DataFrame:
        """``table`` (the run's result rows) as a part of the audit that reads ``scope`` sees it (a copy)."""
        return rows_for(scope, table).copy()

    def loader(self, scope: str, table: pd.DataFrame) -> Callable[[], pd.DataFrame]:
        """A ``load_rows`` for a section that reads ``scope``."""
        return lambda: self.rows(scope, table)

    def describe(self, read_by: Sequence[str] = ()) -> dict[str, Any]:
        """The dataset block of summary.json: the source dataset's (its ``n_utts`` and fingerprint), and
        under ``derived`` what was derived from it and which sections (``read_by``) read those clips."""
        desc = self.source.describe()
        if self.has_derived:
            desc.update({k: v for k, v in self.full.meta.items() if k not in self.source.meta})
            desc["derived"] = {
                "n_utts": self.full.n_utts - self.source.n_utts,
                "fingerprint_with_derived": self.full.fingerprint,
                "read_by": list(read_by),
                "note": "derived clips are levels of their source clips, read only by the sections named in read_by; every other "
                "figure (ASR WER, slices, gaps, comparisons, speed, the other sections) uses the source clips",
            }
        return desc


__all__ = [
    "DERIVED",
    "SCOPES",
    "SOURCE",
    "ClipViews",
    "block_keys",
    "check_scope",
    "clip_source",
    "derived_mask",
    "rows_for",
    "source_ids",
    "source_rows",
]
