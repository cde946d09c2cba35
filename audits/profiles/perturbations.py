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

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.config import Field, check_fields, check_keys, expect_type
from engine.errors import ConfigError

if TYPE_CHECKING:
    from audits.profiles.results import PerturbationsResult
    from audits.sections import SectionContext
    from engine.data import DecodeOptions
    from engine.datasets.base import Dataset
    from engine.perturb.derive import Family

KEYS = {"families", "seed", "breaking_margin", "n_boot", "alpha", "normalizer"}
#: A family's keys (docs/profiles.md's option table is held equal to this by a test).
FAMILY_FIELDS: Mapping[str, Field] = {
    "kind": Field(str, doc="noise, telephone, mp3, opus, reverb, room, speed or gain"),
    "noise": Field(str, nullable=True, doc="a noise family's noise: white, pink, babble, music or recorded"),
    "levels": Field(list, nullable=True, doc="the levels in the kind's unit, mildest first (a room's: RT60 band edges, ascending)"),
    "name": Field(str, nullable=True, doc="the family's name in labels and reports (default: from kind and noise)"),
    "folder": Field(
        str,
        nullable=True,
        doc="the folder of recordings of a `recorded` noise or a `room` family "
        "(relative paths: from the recipe's folder, else the working directory)",
    ),
    "layout": Field(
        str,
        "auto",
        doc="the folder's layout; auto tells MUSAN and RIRS_NOISES by their top-level folders",
        choices=("auto", "musan", "rirs_noises", "plain"),
    ),
    "subsets": Field(
        list,
        [],
        doc="folders inside it to draw from, e.g. `noise/free-sound` or `simulated_rirs/smallroom` "
        "(default: MUSAN `noise`; RIRS_NOISES the noises or the responses)",
    ),
    "music_vocals": Field(bool, True, doc="keep MUSAN music with vocals (its ANNOTATIONS say which)"),
    "max_rir_s": Field(float, 10.0, gt=0, le=60, doc="a room family refuses a response longer than this (seconds)"),
}
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
    from engine.perturb.derive import KINDS, Family

    data = expect_type(raw, dict, w)
    opts = check_fields(data, FAMILY_FIELDS, w)
    kind = opts["kind"]
    if kind not in KINDS:
        raise ConfigError(f"{w}.kind: unknown kind '{kind}' (known: {', '.join(KINDS)})")
    noise = ""
    if kind == "noise":
        noise = str(expect_type(data.get("noise"), str, f"{w}.noise"))
        if noise not in (*ops.NOISES, "recorded"):
            raise ConfigError(f"{w}.noise: unknown noise '{noise}' (known: {', '.join((*ops.NOISES, 'recorded'))})")
    elif "noise" in data:
        raise ConfigError(f"{w}.noise: only a 'noise' family takes a noise type")
    takes_folder = kind == "room" or noise == "recorded"
    if takes_folder and opts["folder"] is None:
        what = "room impulse responses" if kind == "room" else "recordings"
        raise ConfigError(f"{w}: missing required key 'folder' (the folder of {what})")
    for key in ("folder", *FOLDER_KEYS):
        if key in data and not takes_folder:
            raise ConfigError(f"{w}.{key}: only a recorded noise (noise: recorded) or a room family reads a folder")
    if "music_vocals" in data and kind == "room":
        raise ConfigError(f"{w}.music_vocals: a room family reads impulse responses, not music")
    if "max_rir_s" in data and kind != "room":
        raise ConfigError(f"{w}.max_rir_s: only a room family reads impulse responses")
    if opts["levels"] is not None:
        levels = tuple(_num(v, f"{w}.levels[{j}]") for j, v in enumerate(opts["levels"]))
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
    name = opts["name"] if opts["name"] is not None else (f"{noise}-noise" if kind == "noise" else kind)
    if not name or any(c in name for c in ":~/"):
        raise ConfigError(f"{w}.name: '{name}' must be non-empty without ':', '~' or '/'")
    if name in taken:
        raise ConfigError(f"{w}.name: '{name}' is used twice; name each family once")
    spec = None
    if takes_folder:
        subsets = tuple(str(expect_type(x, str, f"{w}.subsets[{j}]")) for j, x in enumerate(opts["subsets"]))
        spec = BankSpec(
            _folder(opts["folder"], f"{w}.folder", source),
            "rir" if kind == "room" else "noise",
            opts["layout"],
            subsets,
            opts["music_vocals"],
            opts["max_rir_s"],
            where=w,
        )
    return Family(name, kind, levels, noise, source=spec)


def parse_perturbations(mapping: Mapping[str, Any], source: str = "") -> PerturbationsConfig:
    """Validate the block (pure, but checks that ffmpeg exists when a codec family is asked for; folders are read by ``check_sources``)."""
    where = f"{source}: perturbations" if source else "perturbations"
    check_keys(mapping, KEYS, where, required={"families"})
    fams: list[Family] = []
    for i, raw in enumerate(expect_type(mapping["families"], list, f"{where}.families")):
        fams.append(_family(raw, f"{where}.families[{i}]", source, {f.name for f in fams}))
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
    return PerturbationsConfig(
        tuple(fams), int(seed), margin, int(n_boot), alpha, None if norm is None else str(expect_type(norm, str, f"{where}.normalizer"))
    )


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
