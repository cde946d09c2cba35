"""The ``profiles:`` recipe section's options, validated before anything runs (errors name file and key)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from audits.profiles.ladder import LadderSpec
from audits.profiles.maps import ConditionMap, load_map
from audits.section_config import source_of
from engine.data import CONFIDENCE_COLUMNS, RESERVED_LABELS
from engine.errors import ConfigError
from engine.options import Options, check_value, option

#: The study's gap table: (output column, a, b), each read as WER(a) - WER(b).
STUDY_GAPS: tuple[tuple[str, str, str], ...] = (
    ("nativeness", "non-native", "native"),
    ("circle", "outer", "inner"),
    ("circle", "expanding", "inner"),
    ("quadrant", "positive-high", "negative-high"),
    ("background_type", "noise", "music"),
)


@dataclass(frozen=True)
class MapUse:
    """A condition map applied to one label column of the dataset."""

    map: ConditionMap
    column: str


@dataclass(frozen=True)
class MapOptions(Options):
    """One entry of ``condition_maps``: a condition map applied to a label column."""

    map: str = option(doc="a shipped condition map's name or a map file's path")
    column: str = option(doc="the dataset's label column the map reads")
    values: dict[str, Any] = option({}, "the recipe's own entries, over the map's (value -> outputs)", null_default=True)


def parse_maps(raw: tuple[Any, ...], where: str, source: str | None = None) -> tuple[MapUse, ...]:
    """``condition_maps``: a list of ``{map: <shipped name or path>, column: <label column>, values: {...}}``."""
    source = source_of(where) if source is None else source
    uses: list[MapUse] = []
    outputs: dict[str, str] = {}
    for i, item in enumerate(raw):
        w = f"{where}[{i}]"
        opts = MapOptions.parse(check_value(dict[str, Any], item, w), w)
        cmap = load_map(opts.map, f"{w}.map", source, opts.values)
        for o in cmap.outputs:
            if o in outputs:
                raise ConfigError(f"{w}: output column '{o}' is also made by {outputs[o]}; apply each map once")
            outputs[o] = f"{w} ({cmap.name})"
        uses.append(MapUse(cmap, opts.column))
    return tuple(uses)


def parse_gaps(raw: tuple[Any, ...], where: str) -> tuple[tuple[str, str, str], ...]:
    out = []
    for i, g in enumerate(raw):
        if not isinstance(g, (list, tuple)) or len(g) != 3 or not all(isinstance(x, str) for x in g):
            raise ConfigError(f"{where}[{i}]: expected [label, value_a, value_b] (three strings; gap = WER(a) - WER(b)), got {g!r}")
        out.append((g[0], g[1], g[2]))
    return tuple(out)


@dataclass(frozen=True)
class LadderOptions(Options):
    """One entry of ``ladders``: a label column whose values are the rungs of a ladder."""

    column: str = option(doc="the label column")
    baseline: str = option(doc="the column's value of the clean clips")
    levels: dict[str, float] = option(doc="value -> number, mildest first")
    unit: str = option("", "the levels' unit", doc_default='""')
    name: str = option("", "the ladder's name in reports", doc_default='""')

    def validate(self, where: str) -> None:
        if not self.levels:
            raise ConfigError(f"{where}.levels: list at least one level (value: number), mildest first")
        if self.baseline in {str(k) for k in self.levels}:
            raise ConfigError(f"{where}.levels: the baseline '{self.baseline}' is not a level")


def parse_ladders(raw: tuple[Any, ...], where: str) -> tuple[LadderSpec, ...]:
    """``ladders``: ``{column, baseline, levels: {value: number, ...} (mildest first), unit, name}``."""
    out = []
    for i, item in enumerate(raw):
        w = f"{where}[{i}]"
        o = LadderOptions.parse(check_value(dict[str, Any], item, w), w)
        out.append(LadderSpec(o.column, o.baseline, tuple((str(k), v) for k, v in o.levels.items()), o.unit, o.name))
    return tuple(out)


@dataclass(frozen=True)
class ProfilesConfig(Options):
    """The ``profiles:`` block: WER profiles by condition (mapped labels), gaps between conditions and ladders."""

    condition_maps: tuple[MapUse, ...] = option(
        (), "condition maps applied to label columns ({map, column, values})", accepts=list[Any], parse=parse_maps, null_default=True
    )
    gaps: tuple[tuple[str, str, str], ...] = option(
        STUDY_GAPS, "[label, value_a, value_b]: WER(a) - WER(b) with intervals", accepts=list[Any], parse=parse_gaps
    )
    columns: tuple[str, ...] = option((), "label columns profiled as they are", null_default=True)
    ladders: tuple[LadderSpec, ...] = option(
        (), "ordered conditions ({column, baseline, levels, unit, name})", accepts=list[Any], parse=parse_ladders, null_default=True
    )
    breaking_margin: float = option(0.05, "WER rise (absolute) that marks a ladder's breaking point", ge=0, le=1)
    n_boot: int = option(1000, "bootstrap replicates per interval", ge=10)
    seed: int = option(0, "bootstrap seed", ge=0)
    alpha: float = option(0.05, "1 - the intervals' confidence", ge=1e-6, le=0.5)
    gpu_hour_usd: float | None = option(None, "price of a GPU hour, for cost per hour of audio", ge=0)
    normalizer: str | None = option(None, "text normalizer applied before scoring (default: the recipe's)")

    @property
    def maps(self) -> tuple[MapUse, ...]:
        """The condition maps in use (``condition_maps``)."""
        return self.condition_maps


#: Columns the scored rows hold besides the dataset's labels, which a map's output would overwrite:
#: the result rows' and scoring's own (``engine.data.RESERVED_LABELS``), the backends' confidences,
#: scoring's per-row flags and the labels a ``perturbations`` block writes on every clip.
ROW_COLUMNS: frozenset[str] = (
    RESERVED_LABELS
    | frozenset(CONFIDENCE_COLUMNS)
    | frozenset(
        {"speech_free", "hyp_words", "loop", "length_outlier", "semsim", "perturbation", "perturbation_family", "perturbation_level"}
    )
)


def check_map_outputs(config: ProfilesConfig, label_names: Iterable[str]) -> None:
    """Refuse, before any model loads, a map whose output column the rows already have (a label of the dataset or a row column).

    The rows would otherwise be scored first and the section refused after every model ran.
    """
    have = set(label_names) | ROW_COLUMNS
    for i, use in enumerate(config.maps):
        clash = [o for o in use.map.outputs if o in have]
        if clash:
            raise ConfigError(
                f"profiles.condition_maps[{i}]: map '{use.map.name}' ({use.map.path}) writes the column(s) {', '.join(clash)}, which "
                "the rows already have (a label column of the dataset or a column of the result rows); rename the dataset's "
                "column or use another map file"
            )


def parse_profiles_config(mapping: Mapping[str, Any], source: str = "") -> ProfilesConfig:
    """Validate a recipe's ``profiles`` section (loads the map files; runs nothing)."""
    return ProfilesConfig.parse(mapping, f"{source}: profiles" if source else "profiles")
