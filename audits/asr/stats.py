"""Interval estimates shared by every audit: Wilson score intervals, block bootstrap, and the one
rule that decides when an interval or test can be computed at all (``check_testable``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

Z95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when n == 0."""
    if n <= 0:
        return (0.0, 1.0)
    if successes < 0 or successes > n:
        raise ValueError(f"successes={successes} must lie in [0, n={n}]")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def block_bootstrap_ratio(
    numer: Sequence[float] | np.ndarray,
    denom: Sequence[float] | np.ndarray,
    blocks: Sequence[object] | np.ndarray | None,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> tuple[float, float]:
    """Percentile bootstrap interval of sum(numer)/sum(denom), resampling whole blocks.

    Blocks are speakers when known (utterances of one speaker are not independent), else
    each item is its own block. Returns (nan, nan) when there is nothing to resample.
    """
    return block_bootstrap_ratios([(numer, denom)], blocks, n_boot, seed, alpha)[0]


def _block_codes(blocks: Sequence[object] | np.ndarray | None, size: int) -> np.ndarray:
    """Block index of every item, blocks numbered in sorted order of their string names."""
    if blocks is None:
        return np.arange(size)
    _, codes = np.unique(np.asarray([str(b) for b in blocks]), return_inverse=True)
    return codes.reshape(-1)


def _draw_blocks(rng: np.random.Generator, n_blocks: int, n_boot: int) -> np.ndarray:
    """Resampling with replacement: (n_boot, n_blocks) block indices, drawn in one call.

    Uniform integer draws are several times faster than the equivalent multinomial counts on
    large slices (15,000 unblocked utterances), with the same distribution of replicates.
    """
    return rng.integers(0, n_blocks, size=(n_boot, n_blocks), dtype=np.int32 if n_blocks < 2**31 else np.int64)


def _ratio_replicates(
    pairs: Sequence[tuple[Sequence[float] | np.ndarray, Sequence[float] | np.ndarray]],
    blocks: Sequence[object] | np.ndarray | None,
    n_boot: int,
    seed: int,
    codes: np.ndarray | None = None,
) -> list[np.ndarray | None]:
    """Bootstrap replicates of sum(numer)/sum(denom) per pair (draws with no words left out; None: nothing to resample).

    ``codes``: the block codes of ``blocks`` when the caller has them already (``_block_codes``).
    """
    arrays = [(np.asarray(n, dtype=np.float64), np.asarray(d, dtype=np.float64)) for n, d in pairs]
    live = [i for i, (n, d) in enumerate(arrays) if n.size > 0 and d.sum() > 0]
    out: list[np.ndarray | None] = [None] * len(arrays)
    if not live:
        return out
    if codes is None:
        codes = _block_codes(blocks, arrays[live[0]][0].size)
    n_blocks = int(codes.max()) + 1
    rng = np.random.default_rng(seed)
    # draws[b] = the n_blocks block indices drawn with replacement in replicate b
    draws = _draw_blocks(rng, n_blocks, n_boot)
    for i in live:
        numer_a, denom_a = arrays[i]
        num = np.bincount(codes, weights=numer_a, minlength=n_blocks)[draws].sum(axis=1)
        den = np.bincount(codes, weights=denom_a, minlength=n_blocks)[draws].sum(axis=1)
        ok = den > 0
        out[i] = num[ok] / den[ok] if ok.any() else None
    return out


def block_bootstrap_ratios(
    pairs: Sequence[tuple[Sequence[float] | np.ndarray, Sequence[float] | np.ndarray]],
    blocks: Sequence[object] | np.ndarray | None,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> list[tuple[float, float]]:
    """``block_bootstrap_ratio`` for several (numer, denom) pairs over the same items and blocks.

    One set of block draws serves every pair (WER and CER of a slice), so each interval equals
    what ``block_bootstrap_ratio`` returns for that pair alone, at the cost of a single draw.
    The raw percentiles, degenerate or not: figures use ``ratio_estimates`` (the testability rule).
    """
    out: list[tuple[float, float]] = []
    for reps in _ratio_replicates(pairs, blocks, n_boot, seed):
        if reps is None:
            out.append((math.nan, math.nan))
        else:
            lo, hi = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
            out.append((float(lo), float(hi)))
    return out


def bootstrap_ratio_difference(
    numer_a: np.ndarray,
    denom_a: np.ndarray,
    blocks_a: Sequence[object] | np.ndarray | None,
    numer_b: np.ndarray,
    denom_b: np.ndarray,
    blocks_b: Sequence[object] | np.ndarray | None,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> tuple[float, float]:
    """Interval for ratio(A) - ratio(B), resampling blocks of A and of B independently."""
    diff = ratio_difference_replicates(numer_a, denom_a, blocks_a, numer_b, denom_b, blocks_b, n_boot, seed)
    if diff.size == 0:
        return (math.nan, math.nan)
    lo, hi = np.quantile(diff, [alpha / 2, 1 - alpha / 2])
    return (float(lo), float(hi))


def ratio_difference_replicates(
    numer_a: np.ndarray,
    denom_a: np.ndarray,
    blocks_a: Sequence[object] | np.ndarray | None,
    numer_b: np.ndarray,
    denom_b: np.ndarray,
    blocks_b: Sequence[object] | np.ndarray | None,
    n_boot: int = 1000,
    seed: int = 0,
) -> np.ndarray:
    """The finite bootstrap replicates of ratio(A) - ratio(B) (independent block draws for A and B)."""

    def replicates(
        numer: np.ndarray, denom: np.ndarray, blocks: Sequence[object] | np.ndarray | None, rng: np.random.Generator
    ) -> np.ndarray:
        numer = np.asarray(numer, dtype=np.float64)
        denom = np.asarray(denom, dtype=np.float64)
        codes = _block_codes(blocks, numer.size)
        n_blocks = int(codes.max()) + 1
        bn = np.bincount(codes, weights=numer, minlength=n_blocks)
        bd = np.bincount(codes, weights=denom, minlength=n_blocks)
        draws = _draw_blocks(rng, n_blocks, n_boot)
        den = bd[draws].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return bn[draws].sum(axis=1) / den

    if np.asarray(numer_a).size == 0 or np.asarray(numer_b).size == 0:
        return np.empty(0)
    rng = np.random.default_rng(seed)
    diff = replicates(numer_a, denom_a, blocks_a, rng) - replicates(numer_b, denom_b, blocks_b, rng)
    return diff[np.isfinite(diff)]


# ---- the one testability rule ---------------------------------------------------------------
#
# Every interval and test of the engine (slice and model WER, gaps, paired model comparisons, the
# profiles' gap tests, rank stability and ladders, tracks) is decided by ``check_testable`` on the
# groups it resamples, and its result is an ``Interval`` or a ``NotTestable`` with the reason in
# words: never a zero-width interval, never a p-value the data cannot support (docs/metrics.md,
# "When a statistic is not testable").

MIN_BLOCKS = 2
"""Resampling blocks a group needs: with one, every bootstrap replicate is the same number."""


@dataclass(frozen=True)
class Interval:
    """A percentile interval that the data support (``lo < hi``)."""

    lo: float
    hi: float

    def as_list(self) -> list[float]:
        return [self.lo, self.hi]


@dataclass(frozen=True)
class NotTestable:
    """An interval or test that the data cannot support, and why (``"only 1 speaker in accent=x"``)."""

    reason: str


Estimate = Union[Interval, NotTestable]
"""What every interval function returns."""


@dataclass(frozen=True)
class BlockGroup:
    """One resampled group: the per-block sums of a ratio's numerator and denominator.

    ``name`` says which group it is in messages (``"background=clean"``); ``unit`` what a block is
    (``speaker``, or ``clip`` when speakers are unknown). Blocks with a zero denominator hold no
    clip of the group and do not count.
    """

    name: str
    numer: np.ndarray
    denom: np.ndarray
    unit: str = "speaker"

    @classmethod
    def of(
        cls,
        name: str,
        numer: Sequence[float] | np.ndarray,
        denom: Sequence[float] | np.ndarray,
        blocks: Sequence[object] | np.ndarray | None,
        unit: str | None = None,
    ) -> BlockGroup:
        """The group of items ``numer``/``denom`` in ``blocks`` (None: each item is its own block, a clip)."""
        n = np.asarray(numer, dtype=np.float64)
        d = np.asarray(denom, dtype=np.float64)
        if n.size == 0:
            return cls(name, np.zeros(0), np.zeros(0), unit or ("clip" if blocks is None else "speaker"))
        codes = _block_codes(blocks, n.size)
        nb = int(codes.max()) + 1
        return cls(name, np.bincount(codes, n, nb), np.bincount(codes, d, nb), unit or ("clip" if blocks is None else "speaker"))

    @property
    def n_blocks(self) -> int:
        return int(np.count_nonzero(self.denom > 0))

    def ratios(self) -> np.ndarray:
        live = self.denom > 0
        return np.asarray(self.numer[live] / self.denom[live])


def _plural(unit: str, n: int) -> str:
    return unit if n == 1 else f"{unit}s"


def check_testable(groups: Sequence[BlockGroup], statistic: str = "WER", min_blocks: int = MIN_BLOCKS) -> NotTestable | None:
    """The one rule: ``None`` when an interval over these groups can be computed, else why not.

    In order: every group needs reference words (a denominator), and at least ``min_blocks``
    blocks (speakers) to resample; and the statistic must vary between blocks in at least one
    group (when every block of every group has the same ratio, every replicate is the same number).
    """
    for g in groups:
        if g.denom.size == 0 or float(g.denom[g.denom > 0].sum()) <= 0:
            return NotTestable(f"no reference words in {g.name}")
        if g.n_blocks < min_blocks:
            return NotTestable(f"only {g.n_blocks} {_plural(g.unit, g.n_blocks)} in {g.name}")
    spreads = [np.ptp(g.ratios()) if g.n_blocks else 0.0 for g in groups]
    if groups and all(s <= 1e-12 for s in spreads):
        values = sorted({f"{100 * float(g.ratios()[0]):.1f}%" for g in groups})
        units = sorted({g.unit for g in groups})
        return NotTestable(
            f"no variance: every {' or '.join(units)} of {', '.join(g.name for g in groups)} has the same {statistic} ({', '.join(values)})"
        )
    return None


def percentile_interval(replicates: np.ndarray, alpha: float = 0.05, statistic: str = "value") -> Estimate:
    """The percentile interval of the finite replicates; not testable when they do not vary (the last guard of the rule)."""
    r = np.asarray(replicates, dtype=np.float64)
    r = r[np.isfinite(r)]
    if r.size < 2:
        return NotTestable(f"no bootstrap replicate of the {statistic} could be computed")
    lo, hi = np.quantile(r, [alpha / 2, 1 - alpha / 2])
    if not hi > lo:
        return NotTestable(f"no variance: {100 * (1 - alpha):.0f}% of the bootstrap replicates give the same {statistic} ({float(lo):.4g})")
    return Interval(float(lo), float(hi))


def estimate_fields(est: Estimate, key: str = "ci95", reason_key: str = "not_testable") -> dict[str, Any]:
    """How summary.json holds an estimate: ``{key: [lo, hi]}`` or ``{key: None, reason_key: "why"}``."""
    if isinstance(est, Interval):
        return {key: est.as_list()}
    return {key: None, reason_key: est.reason}


def ratio_estimates(
    pairs: Sequence[tuple[Sequence[float] | np.ndarray, Sequence[float] | np.ndarray]],
    blocks: Sequence[object] | np.ndarray | None,
    name: str,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    statistics: Sequence[str] = ("WER", "CER"),
    unit: str | None = None,
) -> list[Estimate]:
    """``block_bootstrap_ratios`` through the rule: an ``Interval`` or ``NotTestable`` per (numer, denom) pair.

    The draws (and so the intervals) are those of ``block_bootstrap_ratios`` with the same seed;
    ``name`` names the group in the reasons, ``unit`` what a block is (default: speaker, or clip
    when ``blocks`` is None).
    """
    unit = unit or ("clip" if blocks is None else "speaker")
    size = int(np.asarray(pairs[0][0]).size) if pairs else 0
    codes = _block_codes(blocks, size) if size else np.zeros(0, dtype=np.int64)
    nb = int(codes.max()) + 1 if size else 0
    verdicts = []
    for (n, d), stat in zip(pairs, statistics):
        group = BlockGroup(
            name,
            np.bincount(codes, np.asarray(n, dtype=np.float64), nb) if size else np.zeros(0),
            np.bincount(codes, np.asarray(d, dtype=np.float64), nb) if size else np.zeros(0),
            unit,
        )
        verdicts.append(check_testable([group], stat))
    raw = _ratio_replicates(pairs, blocks, n_boot, seed, codes if size else None)
    out: list[Estimate] = []
    for verdict, reps, stat in zip(verdicts, raw, statistics):
        if verdict is not None:
            out.append(verdict)
        else:
            out.append(percentile_interval(np.zeros(0) if reps is None else reps, alpha, stat))
    return out
