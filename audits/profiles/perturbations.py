"""The ``perturbations:`` recipe section: a perturbation ladder on any dataset, and WER along it per model.

Before the models run, every clip of the dataset is derived at every level of every family
(``engine.perturb``: additive white / pink / babble / music noise at an SNR ladder, 8 kHz
telephone band with mu-law, MP3 and Opus through ffmpeg, reverberation at an RT60 ladder, speed
and level changes); the derived clips are stored as shards under ``<run>/derived/`` and are part
of the run's plan. After the models ran, each family is a ladder (``audits.profiles.ladder``):
WER per level against the clean clips, slope per unit and breaking point with intervals.

This section is the only one that reads derived clips (``reads = DERIVED``, ``audits.clips``):
every other figure of the run uses the source clips, as if the block were absent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.config import check_keys, expect_type
from engine.errors import ConfigError

if TYPE_CHECKING:
    from audits.sections import SectionContext
    from engine.data import DecodeOptions
    from engine.datasets.base import Dataset
    from engine.perturb.derive import Family

KEYS = {"families", "seed", "breaking_margin", "n_boot", "alpha", "normalizer"}
FAMILY_KEYS = {"name", "kind", "noise", "levels"}
#: (lowest, highest) level accepted per kind, in the kind's unit.
LEVEL_RANGES: Mapping[str, tuple[float, float]] = {
    "noise": (-20.0, 60.0), "telephone": (8.0, 8.0), "mp3": (8.0, 320.0), "opus": (6.0, 256.0),
    "reverb": (0.05, 5.0), "speed": (0.5, 2.0), "gain": (-60.0, 30.0),
}
DEFAULT_LEVELS: Mapping[str, tuple[float, ...]] = {"telephone": (8.0,)}


@dataclass(frozen=True)
class PerturbationsConfig:
    families: tuple[Family, ...]
    seed: int = 0
    breaking_margin: float = 0.05
    n_boot: int = 1000
    alpha: float = 0.05
    normalizer: str | None = None


def _num(value: Any, where: str) -> float:
    x = float(expect_type(value, (int, float), where))
    if not math.isfinite(x):
        raise ConfigError(f"{where}: expected a finite number, got {value!r}")
    return x


def parse_perturbations(mapping: Mapping[str, Any], source: str = "") -> PerturbationsConfig:
    """Validate the block (pure, but checks that ffmpeg exists when a codec family is asked for)."""
    from engine.perturb import ops
    from engine.perturb.derive import KINDS, Family

    where = f"{source}: perturbations" if source else "perturbations"
    check_keys(mapping, KEYS, where, required={"families"})
    fams: list[Family] = []
    for i, raw in enumerate(expect_type(mapping["families"], list, f"{where}.families")):
        w = f"{where}.families[{i}]"
        data = expect_type(raw, dict, w)
        check_keys(data, FAMILY_KEYS, w, required={"kind"})
        kind = str(expect_type(data["kind"], str, f"{w}.kind"))
        if kind not in KINDS:
            raise ConfigError(f"{w}.kind: unknown kind '{kind}' (known: {', '.join(KINDS)})")
        noise = ""
        if kind == "noise":
            noise = str(expect_type(data.get("noise"), str, f"{w}.noise"))
            if noise not in ops.NOISES:
                raise ConfigError(f"{w}.noise: unknown noise '{noise}' (known: {', '.join(ops.NOISES)})")
        elif "noise" in data:
            raise ConfigError(f"{w}.noise: only a 'noise' family takes a noise type")
        if "levels" in data:
            levels = tuple(_num(v, f"{w}.levels[{j}]") for j, v in enumerate(expect_type(data["levels"], list, f"{w}.levels")))
        elif kind in DEFAULT_LEVELS:
            levels = DEFAULT_LEVELS[kind]
        else:
            raise ConfigError(f"{w}: missing required key 'levels' (mildest first, in {'dB SNR' if kind == 'noise' else kind + ' units'})")
        if not levels:
            raise ConfigError(f"{w}.levels: list at least one level")
        if len(set(levels)) != len(levels):
            raise ConfigError(f"{w}.levels: a level is listed twice")
        lo, hi = LEVEL_RANGES[kind]
        for j, lv in enumerate(levels):
            if not lo <= lv <= hi:
                raise ConfigError(f"{w}.levels[{j}]: {lv:g} is outside [{lo:g}, {hi:g}] for {kind}")
        if kind in ops.CODECS and ops.ffmpeg_available() is None:
            raise ConfigError(f"{w}.kind: {kind} needs ffmpeg on PATH (apt-get install ffmpeg)")
        name = str(expect_type(data.get("name", f"{noise}-noise" if kind == "noise" else kind), str, f"{w}.name"))
        if not name or any(c in name for c in ":~/"):
            raise ConfigError(f"{w}.name: '{name}' must be non-empty without ':', '~' or '/'")
        if name in {f.name for f in fams}:
            raise ConfigError(f"{w}.name: '{name}' is used twice; name each family once")
        fams.append(Family(name, kind, levels, noise))
    if not fams:
        raise ConfigError(f"{where}.families: list at least one family")
    seed = expect_type(mapping.get("seed", 0), int, f"{where}.seed")
    margin = _num(mapping.get("breaking_margin", 0.05), f"{where}.breaking_margin")
    if not 0 <= margin <= 1:
        raise ConfigError(f"{where}.breaking_margin: {margin:g} must lie in [0, 1] (absolute WER, 0.05 = 5 points)")
    n_boot = expect_type(mapping.get("n_boot", 1000), int, f"{where}.n_boot")
    if n_boot < 10:
        raise ConfigError(f"{where}.n_boot: must be >= 10")
    alpha = _num(mapping.get("alpha", 0.05), f"{where}.alpha")
    if not 0 < alpha <= 0.5:
        raise ConfigError(f"{where}.alpha: must lie in (0, 0.5]")
    norm = mapping.get("normalizer")
    return PerturbationsConfig(tuple(fams), int(seed), margin, int(n_boot), alpha,
        None if norm is None else str(expect_type(norm, str, f"{where}.normalizer")))


def derive(config: PerturbationsConfig, dataset: Dataset, out_dir: Path, decode_options: DecodeOptions) -> Dataset:
    """The dataset with every derived clip (built or resumed under ``out_dir/derived``)."""
    from engine.perturb.derive import derive_dataset

    return derive_dataset(dataset, config.families, config.seed, Path(out_dir) / "derived", decode_options)


def run_perturbations(config: PerturbationsConfig, ctx: SectionContext) -> dict[str, Any]:
    """Per family, the ladder of every model (WER per level, slope, breaking point)."""
    from audits.asr.scoring import score_table
    from audits.normalizing import get_normalizer
    from audits.profiles.ladder import LadderSpec, ladders
    from audits.profiles.run import normalizer_name

    name = normalizer_name(config.normalizer, ctx)
    frame = score_table(ctx.load_rows(), get_normalizer(name)).frame
    specs = [LadderSpec("perturbation", "clean", tuple((f.label(lv), lv) for lv in f.levels), f.unit, f.name) for f in config.families]
    return {
        "families": [{"name": f.name, "kind": f.kind, "noise": f.noise or None, "levels": list(f.levels),
            "unit": f.unit} for f in config.families],
        "seed": config.seed, "normalizer": name, "n_boot": config.n_boot,
        "derived": (ctx.dataset.meta or {}).get("perturbations"),
        "ladders": ladders(frame, specs, config.breaking_margin, config.n_boot, config.seed, config.alpha),
    }


def perturbation_lines(section: Mapping[str, Any], title: str) -> list[str]:
    from audits.profiles.report import ladder_md
    from audits.reports.formatting import md

    lines = [f"## {md(title)}", "",
        f"Derived clips: seed {section.get('seed')}, stored under derived/{md((section.get('derived') or {}).get('cache_key', ''))}. "
        "They count in these ladders only; every other figure of this report uses the source clips.", ""]
    for lad in section.get("ladders") or []:
        lines += ladder_md(lad)
    return lines


def render_perturbations(section: Mapping[str, Any], colors: Mapping[str, str]) -> str:
    from audits.profiles.report import ladder_html

    return "".join(ladder_html(lad, colors) for lad in section.get("ladders") or [])
