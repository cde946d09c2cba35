"""The ``profiles:`` recipe section's options, validated before anything runs (errors name file and key)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from audits.profiles.ladder import LadderSpec
from audits.profiles.maps import ConditionMap, load_map
from engine.config import check_keys, expect_type
from engine.data import CONFIDENCE_COLUMNS, RESERVED_LABELS
from engine.errors import ConfigError

PROFILE_KEYS = {"condition_maps", "gaps", "columns", "ladders", "breaking_margin", "n_boot", "seed", "alpha", "gpu_hour_usd", "normalizer"}
MAP_KEYS = {"map", "column", "values"}
LADDER_KEYS = {"name", "column", "baseline", "levels", "unit"}

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
class ProfilesConfig:
    maps: tuple[MapUse, ...] = ()
    gaps: tuple[tuple[str, str, str], ...] = STUDY_GAPS
    columns: tuple[str, ...] = ()
    ladders: tuple[LadderSpec, ...] = ()
    breaking_margin: float = 0.05
    n_boot: int = 1000
    seed: int = 0
    alpha: float = 0.05
    gpu_hour_usd: float | None = None
    normalizer: str | None = None


def _number(value: Any, where: str, lo: float | None = None, hi: float | None = None) -> float:
    x = float(expect_type(value, (int, float), where))
    if not math.isfinite(x):
        raise ConfigError(f"{where}: expected a finite number, got {value!r}")
    if (lo is not None and x < lo) or (hi is not None and x > hi):
        raise ConfigError(f"{where}: {x:g} must lie in [{'-inf' if lo is None else f'{lo:g}'}, {'inf' if hi is None else f'{hi:g}'}]")
    return x


def _int(value: Any, where: str, lo: int) -> int:
    x = int(expect_type(value, int, where))
    if x < lo:
        raise ConfigError(f"{where}: must be >= {lo}, got {x}")
    return x


def parse_maps(raw: Any, where: str, source: str) -> tuple[MapUse, ...]:
    """``condition_maps``: a list of ``{map: <shipped name or path>, column: <label column>, values: {...}}``."""
    uses: list[MapUse] = []
    outputs: dict[str, str] = {}
    for i, item in enumerate(expect_type(raw, list, where)):
        w = f"{where}[{i}]"
        data = expect_type(item, dict, w)
        check_keys(data, MAP_KEYS, w, required={"map", "column"})
        name = str(expect_type(data["map"], str, f"{w}.map"))
        column = str(expect_type(data["column"], str, f"{w}.column"))
        overrides = expect_type(data.get("values") or {}, dict, f"{w}.values")
        cmap = load_map(name, f"{w}.map", source, overrides)
        for o in cmap.outputs:
            if o in outputs:
                raise ConfigError(f"{w}: output column '{o}' is also made by {outputs[o]}; apply each map once")
            outputs[o] = f"{w} ({cmap.name})"
        uses.append(MapUse(cmap, column))
    return tuple(uses)


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


def parse_gaps(raw: Any, where: str) -> tuple[tuple[str, str, str], ...]:
    out = []
    for i, g in enumerate(expect_type(raw, list, where)):
        items = expect_type(g, list, f"{where}[{i}]")
        if len(items) != 3 or not all(isinstance(x, str) for x in items):
            raise ConfigError(f"{where}[{i}]: expected [label, value_a, value_b] (three strings; gap = WER(a) - WER(b)), got {g!r}")
        out.append((items[0], items[1], items[2]))
    return tuple(out)


def parse_ladders(raw: Any, where: str) -> tuple[LadderSpec, ...]:
    """``ladders``: ``{column, baseline, levels: {value: number, ...} (mildest first), unit, name}``."""
    out = []
    for i, item in enumerate(expect_type(raw, list, where)):
        w = f"{where}[{i}]"
        data = expect_type(item, dict, w)
        check_keys(data, LADDER_KEYS, w, required={"column", "baseline", "levels"})
        levels_raw = expect_type(data["levels"], dict, f"{w}.levels")
        if not levels_raw:
            raise ConfigError(f"{w}.levels: list at least one level (value: number), mildest first")
        levels = tuple((str(k), _number(v, f"{w}.levels.{k}")) for k, v in levels_raw.items())
        baseline = str(expect_type(data["baseline"], str, f"{w}.baseline"))
        if baseline in dict(levels):
            raise ConfigError(f"{w}.levels: the baseline '{baseline}' is not a level")
        out.append(
            LadderSpec(
                str(expect_type(data["column"], str, f"{w}.column")),
                baseline,
                levels,
                str(expect_type(data.get("unit", ""), str, f"{w}.unit")),
                str(expect_type(data.get("name", ""), str, f"{w}.name")),
            )
        )
    return tuple(out)


def parse_profiles_config(mapping: Mapping[str, Any], source: str = "") -> ProfilesConfig:
    """Validate a recipe's ``profiles`` section (loads the map files; runs nothing)."""
    where = f"{source}: profiles" if source else "profiles"
    check_keys(mapping, PROFILE_KEYS, where)
    maps = parse_maps(mapping.get("condition_maps") or [], f"{where}.condition_maps", source)
    gaps = parse_gaps(mapping["gaps"], f"{where}.gaps") if "gaps" in mapping else STUDY_GAPS
    cols_raw = expect_type(mapping.get("columns") or [], list, f"{where}.columns")
    columns = tuple(str(expect_type(c, str, f"{where}.columns[{i}]")) for i, c in enumerate(cols_raw))
    gpu = mapping.get("gpu_hour_usd")
    norm = mapping.get("normalizer")
    return ProfilesConfig(
        maps=maps,
        gaps=gaps,
        columns=columns,
        ladders=parse_ladders(mapping.get("ladders") or [], f"{where}.ladders"),
        breaking_margin=_number(mapping.get("breaking_margin", 0.05), f"{where}.breaking_margin", 0.0, 1.0),
        n_boot=_int(mapping.get("n_boot", 1000), f"{where}.n_boot", 10),
        seed=_int(mapping.get("seed", 0), f"{where}.seed", 0),
        alpha=_number(mapping.get("alpha", 0.05), f"{where}.alpha", 1e-6, 0.5),
        gpu_hour_usd=None if gpu is None else _number(gpu, f"{where}.gpu_hour_usd", 0.0),
        normalizer=None if norm is None else str(expect_type(norm, str, f"{where}.normalizer")),
    )
