"""The ``perturbations:`` recipe section: a perturbation ladder on any dataset, and WER along it per model.

Before the models run, every clip of the dataset is derived at every level of every family
(``engine.perturb``: additive white / pink / babble / music noise at an SNR ladder, recorded noise
from a folder (MUSAN, RIRS_NOISES or plain) at an SNR ladder, 8 kHz telephone band with mu-law,
MP3 and Opus through ffmpeg, reverberation at an RT60 ladder with a synthetic or a measured room
response, speed and level changes); the derived clips are stored as shards under ``<run>/derived/`` and are part
of the run's plan. After the models ran, each family is a ladder (``audits.profiles.ladder``):
WER per level against the clean clips, slope per unit and breaking point with intervals.

This section is the only one that reads derived clips (``reads = DERIVED``, ``audits.clips``):
every other figure of the run uses the source clips, as if the block were absent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from audits.section_config import source_of
from engine.errors import ConfigError
from engine.options import Field, Options, check_value, option
from engine.perturb.derive import Family  # the options record's annotation is read at run time

if TYPE_CHECKING:
    from audits.profiles.results import PerturbationsResult
    from audits.sections import SectionContext
    from engine.data import DecodeOptions
    from engine.datasets.base import Dataset


@dataclass(frozen=True)
class FamilyOptions(Options):
    """One perturbation family of a ``perturbations:`` block (docs/profiles.md's option table is made from it)."""

    kind: str = option(doc="noise, telephone, mp3, opus, reverb, room, speed or gain")
    noise: str | None = option(None, "a noise family's noise: white, pink, babble, music or recorded")
    levels: tuple[float, ...] | None = option(None, "the levels in the kind's unit, mildest first (a room's: RT60 band edges, ascending)")
    name: str | None = option(None, "the family's name in labels and reports (default: from kind and noise)")
    folder: str | None = option(
        None,
        "the folder of recordings of a `recorded` noise or a `room` family "
        "(relative paths: from the recipe's folder, else the working directory)",
    )
    layout: Literal["auto", "musan", "rirs_noises", "plain"] = option(
        "auto", "the folder's layout; auto tells MUSAN and RIRS_NOISES by their top-level folders"
    )
    subsets: tuple[str, ...] = option(
        (),
        "folders inside it to draw from, e.g. `noise/free-sound` or `simulated_rirs/smallroom` "
        "(default: MUSAN `noise`; RIRS_NOISES the noises or the responses)",
    )
    music_vocals: bool = option(True, "keep MUSAN music with vocals (its ANNOTATIONS say which)")
    max_rir_s: float = option(10.0, "a room family refuses a response longer than this (seconds)", gt=0, le=60)


#: A family's keys, typed (``FamilyOptions``).
FAMILY_FIELDS: Mapping[str, Field] = FamilyOptions.declared()
FOLDER_KEYS = ("layout", "subsets", "music_vocals", "max_rir_s")
#: (lowest, highest) level accepted per kind, in the kind's unit.
LEVEL_RANGES: Mapping[str, tuple[float, float]] = {
    "noise": (-20.0, 60.0),
    "telephone": (8.0, 8.0),
    "mp3": (8.0, 320.0),
    "opus": (6.0, 256.0),
    "reverb": (0.05, 5.0),
    "room": (0.05, 10.0),
    "speed": (0.5, 2.0),
    "gain": (-60.0, 30.0),
}
DEFAULT_LEVELS: Mapping[str, tuple[float, ...]] = {"telephone": (8.0,)}


def _families(value: tuple[Any, ...], where: str) -> tuple[Family, ...]:
    fams: list[Family] = []
    for i, raw in enumerate(value):
        fams.append(_family(raw, f"{where}[{i}]", source_of(where), {f.name for f in fams}))
    if not fams:
        raise ConfigError(f"{where}: list at least one family")
    return tuple(fams)


@dataclass(frozen=True)
class PerturbationsConfig(Options):
    """The ``perturbations:`` block: a perturbation ladder derived from every clip, and WER along it per model."""

    families: tuple[Family, ...] = option(doc="the perturbation families (the table below)", accepts=list[Any], parse=_families)
    seed: int = option(0, "seed of the derived noise and of the bootstrap", ge=0)
    breaking_margin: float = option(0.05, "WER rise (absolute, 0.05 = 5 points) that marks a breaking point", ge=0, le=1)
    n_boot: int = option(1000, "bootstrap replicates per interval", ge=10)
    alpha: float = option(0.05, "1 - the intervals' confidence", gt=0, le=0.5)
    normalizer: str | None = option(None, "text normalizer applied before scoring (default: the recipe's)")


def _folder(raw: str, where: str, source: str) -> str:
    """An absolute folder path: as given, or relative to the recipe's folder when it exists there, else to the working directory."""
    if not raw.strip():
        raise ConfigError(f"{where}: give the folder's path")
    p = Path(raw).expanduser()
    if not p.is_absolute() and source and (Path(source).parent / p).exists():
        p = Path(source).parent / p
    return os.path.normpath(p.absolute())


def _family(raw: Any, w: str, source: str, taken: set[str]) -> Family:
    from engine.perturb import ops
    from engine.perturb.banks import BankSpec
    from engine.perturb.derive import KINDS

    data = check_value(dict[str, Any], raw, w)
    opts = FamilyOptions.parse(data, w)
    kind = opts.kind
    if kind not in KINDS:
        raise ConfigError(f"{w}.kind: unknown kind '{kind}' (known: {', '.join(KINDS)})")
    noise = ""
    if kind == "noise":
        if opts.noise is None:
            raise ConfigError(f"{w}: missing required key 'noise' (white, pink, babble, music or recorded)")
        noise = opts.noise
        if noise not in (*ops.NOISES, "recorded"):
            raise ConfigError(f"{w}.noise: unknown noise '{noise}' (known: {', '.join((*ops.NOISES, 'recorded'))})")
    elif "noise" in data:
        raise ConfigError(f"{w}.noise: only a 'noise' family takes a noise type")
    takes_folder = kind == "room" or noise == "recorded"
    if takes_folder and opts.folder is None:
        what = "room impulse responses" if kind == "room" else "recordings"
        raise ConfigError(f"{w}: missing required key 'folder' (the folder of {what})")
    for key in ("folder", *FOLDER_KEYS):
        if key in data and not takes_folder:
            raise ConfigError(f"{w}.{key}: only a recorded noise (noise: recorded) or a room family reads a folder")
    if "music_vocals" in data and kind == "room":
        raise ConfigError(f"{w}.music_vocals: a room family reads impulse responses, not music")
    if "max_rir_s" in data and kind != "room":
        raise ConfigError(f"{w}.max_rir_s: only a room family reads impulse responses")
    if opts.levels is not None:
        levels = opts.levels
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
    if kind == "room" and list(levels) != sorted(levels):
        raise ConfigError(f"{w}.levels: a room family's levels are the upper edges of RT60 bands; list them ascending")
    if kind in ops.CODECS and ops.ffmpeg_available() is None:
        raise ConfigError(f"{w}.kind: {kind} needs ffmpeg on PATH (apt-get install ffmpeg)")
    name = opts.name if opts.name is not None else (f"{noise}-noise" if kind == "noise" else kind)
    if not name or any(c in name for c in ":~/"):
        raise ConfigError(f"{w}.name: '{name}' must be non-empty without ':', '~' or '/'")
    if name in taken:
        raise ConfigError(f"{w}.name: '{name}' is used twice; name each family once")
    spec = None
    if takes_folder:
        spec = BankSpec(
            _folder(opts.folder or "", f"{w}.folder", source),
            "rir" if kind == "room" else "noise",
            opts.layout,
            opts.subsets,
            opts.music_vocals,
            opts.max_rir_s,
            where=w,
        )
    return Family(name, kind, levels, noise, source=spec)


def parse_perturbations(mapping: Mapping[str, Any], source: str = "") -> PerturbationsConfig:
    """Validate the block (pure, but checks that ffmpeg exists when a codec family is asked for; folders are read by ``check_sources``)."""
    return PerturbationsConfig.parse(mapping, f"{source}: perturbations" if source else "perturbations")


def check_sources(config: PerturbationsConfig) -> tuple[Family, ...]:
    """The families with their folders read (``engine.perturb.banks.scan_bank``: every file's header and SHA-256), and every
    room level's RT60 band checked to hold a response; errors name the recipe key and the file. Called before any model loads."""
    from dataclasses import replace as dc_replace

    from engine.perturb.banks import band, lower_edge, scan_bank

    out = []
    for f in config.families:
        if f.source is None:
            out.append(f)
            continue
        bank = scan_bank(f.source)
        if f.kind == "room":
            rts = [x.rt60_s for x in bank.files if x.rt60_s is not None]
            for j, lv in enumerate(f.levels):
                lo = lower_edge(f.levels, lv)
                if not band(bank, lo, lv):
                    raise ConfigError(
                        f"{f.source.where}.levels[{j}]: no response in {bank.root} has an RT60 in ({lo:g}, {lv:g}] s (its "
                        f"{len(rts)} responses span {min(rts):.2f} to {max(rts):.2f} s); choose levels within that range"
                    )
        out.append(dc_replace(f, bank=bank))
    return tuple(out)


def derive(config: PerturbationsConfig, dataset: Dataset, out_dir: Path, decode_options: DecodeOptions) -> Dataset:
    """The dataset with every derived clip (built or resumed under ``out_dir/derived``)."""
    from engine.perturb.derive import derive_dataset

    return derive_dataset(dataset, check_sources(config), config.seed, Path(out_dir) / "derived", decode_options)


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
        "families": [
            {
                "name": f.name,
                "kind": f.kind,
                "noise": f.noise or None,
                "levels": list(f.levels),
                "unit": f.unit,
                **({"folder": f.source.folder} if f.source is not None else {}),
            }
            for f in config.families
        ],
        "seed": config.seed,
        "normalizer": name,
        "n_boot": config.n_boot,
        "derived": (ctx.dataset.meta or {}).get("perturbations"),
        "ladders": ladders(frame, specs, config.breaking_margin, config.n_boot, config.seed, config.alpha),
    }


def perturbation_lines(result: PerturbationsResult, title: str) -> list[str]:
    from audits.profiles.report import ladder_md
    from audits.reports.formatting import md

    lines = [
        f"## {md(title)}",
        "",
        f"Derived clips: seed {result.seed}, stored under derived/{md((result.derived or {}).get('cache_key', ''))}. "
        "They count in these ladders only; every other figure of this report uses the source clips.",
        "",
    ]
    sources = (result.derived or {}).get("sources") or {}
    if sources:
        lines += ["| family | folder | layout | files used / in folder | clips | license files (clips) |", "|---|---|---|---|---|---|"]
        for name, src in sources.items():
            lic = ", ".join(f"{md(x['license_file'] or 'none')} ({x['clips']})" for x in src.get("licenses") or []) or "none"
            lines.append(
                f"| {md(name)} | {md(src.get('folder', ''))} | {md(src.get('layout', ''))} | {src.get('files_used')} / "
                f"{src.get('n_files')} | {src.get('clips')} | {lic} |"
            )
        lines += ["", "Every file used, with its SHA-256: derived/" + md(next(iter(sources.values())).get("manifest", "")) + ".", ""]
    for lad in result.ladders or ():
        lines += ladder_md(lad)
    return lines


def render_perturbations(result: PerturbationsResult, colors: Mapping[str, str]) -> str:
    from audits.profiles.report import ladder_html
    from audits.reports.formatting import esc

    sources = (result.derived or {}).get("sources") or {}
    head = ""
    if sources:
        rows = []
        for name, src in sources.items():
            lic = ", ".join(f"{x['license_file'] or 'none'} ({x['clips']})" for x in src.get("licenses") or []) or "none"
            used = f"{src.get('files_used')} / {src.get('n_files')}"
            rows.append(
                f"<tr><td class='l'>{esc(name)}</td><td class='l'>{esc(src.get('folder', ''))}</td><td>{esc(src.get('layout', ''))}"
                f"</td><td>{esc(used)}</td><td>{esc(src.get('clips'))}</td><td class='l'>{esc(lic)}</td></tr>"
            )
        head = (
            "<h3>Recorded noise and rooms</h3><table class='ladder'><thead><tr><th class='l'>family</th><th class='l'>folder</th>"
            "<th>layout</th><th>files used / in folder</th><th>clips</th><th class='l'>license files (clips)</th></tr></thead><tbody>"
            + "".join(rows)
            + "</tbody></table>"
        )
    return head + "".join(ladder_html(lad, colors) for lad in result.ladders or ())
