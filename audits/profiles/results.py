"""The profiles and perturbations sections' typed results (``summary.json``'s ``profiles`` and ``perturbations``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from audits.records import Record, figure


@dataclass(frozen=True)
class ProfilesResult(Record):
    """Condition WERs per profile, the gap table, rank stability, ladders and trade-offs."""

    condition_maps: Any = figure(optional=True)
    columns: Any = figure(optional=True)
    missing_columns: Any = figure(optional=True)
    conditions: Any = figure(optional=True)
    n_boot: int | None = figure(optional=True)
    seed: int | None = figure(optional=True)
    alpha: float | None = figure(optional=True)
    profiles: Any = figure(optional=True)
    gap_table: Any = figure(optional=True)
    rank_stability: Any = figure(optional=True)
    ladders: Any = figure(optional=True)
    trade_offs: Mapping[str, Any] | None = figure(optional=True)
    rows: Any = figure(optional=True)
    normalizer: str | None = figure(optional=True)


@dataclass(frozen=True)
class PerturbationsResult(Record):
    """The derived levels' families and their WER ladders (slope, breaking point) per model."""

    families: Any = figure(optional=True)
    seed: int | None = figure(optional=True)
    normalizer: Any = figure(optional=True)
    n_boot: int | None = figure(optional=True)
    derived: Mapping[str, Any] | None = figure(optional=True)
    ladders: Any = figure(optional=True)
