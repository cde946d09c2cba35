"""Folders of recorded noise and room impulse responses that perturbations draw from (MUSAN, RIRS_NOISES, plain).

A *bank* is the usable files of one folder for one role: ``noise`` recordings mixed at an SNR,
or ``rir`` room impulse responses convolved with the clip. Scanning a folder reads every file's
header and SHA-256 (and, for a response, its RT60), so a bank's ``digest`` changes whenever a
file does, and the derived-shard cache key changes with it. Every problem is a ``ConfigError``
naming the recipe key and the file, raised before any model loads.

Layouts (``auto`` tells them apart by their top-level folders):

* ``musan``, the MUSAN corpus (Snyder, Chen & Povey 2015, OpenSLR 17): ``music/``, ``noise/`` and
  ``speech/``, each with source folders (``noise/free-sound``, ``noise/sound-bible``,
  ``music/fma`` ...) holding WAV files, an ``ANNOTATIONS`` and a ``LICENSE`` file. Noise only.
  ``music/*/ANNOTATIONS`` (``id genres vocals musician``) says which pieces have vocals;
  ``music_vocals: false`` leaves them out, as Kaldi's and Lhotse's ``use_vocals`` do.
* ``rirs_noises``, the RIRS_NOISES set (Ko et al. 2017, OpenSLR 28):
  ``simulated_rirs/{small,medium,large}room/RoomNNN/*.wav`` with ``rir_list`` and ``room_info``;
  ``real_rirs_isotropic_noises/*.wav`` with ``rir_list`` and ``noise_list``;
  ``pointsource_noises/*.wav`` with ``noise_list``.
* ``plain``: every WAV or FLAC file under the folder.

The lists are Kaldi's (``steps/data/reverberate_data_dir.py``): one file per line, after
``--key value`` options (``--rir-id``, ``--room-id``, ``--rt60``, ``--noise-id``, ``--noise-type``,
``--bg-fg-type`` ...). Where a folder has a ``rir_list`` (``noise_list``), that list says which of
its files are responses (noises) and its options are kept with each file; elsewhere every audio
file counts, except in ``real_rirs_isotropic_noises``, where the file name does (``rir`` or
``noise`` in it, as Lhotse's recipe reads them). A list's ``--rt60`` is used as given; else a
response's RT60 is measured (``ops.rt60_t20``). A ``room_info`` line of Kaldi's simulation
(``RoomNNN x y z mic_x mic_y mic_z absorption``) adds the room's size and absorption.

Each file keeps the license file that covers it: the nearest ``LICENSE``/``LICENCE``/``COPYING``
file from its folder up to the bank's folder (MUSAN has one per source folder).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import AudioError, ConfigError

log = logging.getLogger(__name__)

LAYOUTS = ("auto", "musan", "rirs_noises", "plain")
ROLES = ("noise", "rir")
AUDIO_SUFFIXES = (".wav", ".flac")
MUSAN_PARTS = ("music", "noise", "speech")
RIRS_PARTS = ("simulated_rirs", "real_rirs_isotropic_noises", "pointsource_noises")
#: What a layout offers each role when the recipe names no ``subsets``.
DEFAULT_SUBSETS: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("musan", "noise"): ("noise",),
    ("rirs_noises", "noise"): ("pointsource_noises", "real_rirs_isotropic_noises"),
    ("rirs_noises", "rir"): ("simulated_rirs", "real_rirs_isotropic_noises"),
}
#: Parts of RIRS_NOISES that hold no file of a role.
_RIRS_WITHOUT = {"rir": ("pointsource_noises",), "noise": ("simulated_rirs",)}
LIST_NAMES = {"rir": "rir_list", "noise": "noise_list"}
LICENSE_PREFIXES = ("license", "licence", "copying")
MAX_CHANNELS = 32
MAX_SAMPLE_RATE = 384_000
SILENT_WINDOW_TRIES = 8


@dataclass(frozen=True)
class BankSpec:
    """What a recipe asks for: a folder (absolute), its layout, which parts, for which role."""

    folder: str
    role: str
    layout: str = "auto"
    subsets: tuple[str, ...] = ()
    music_vocals: bool = True
    max_rir_s: float = 10.0
    where: str = field(default="", compare=False)
    """The recipe key errors name (``r.yaml: perturbations.families[0]``)."""


@dataclass(frozen=True)
class BankFile:
    """One usable file: where it is (relative to the bank's folder), its digest, header and metadata."""

    path: str
    sha256: str
    sample_rate: int
    frames: int
    channels: int
    license: str | None = None
    meta: tuple[tuple[str, str], ...] = ()
    rt60_s: float | None = None
    rt60_source: str = ""

    @property
    def duration_s(self) -> float:
        return self.frames / self.sample_rate

    def record(self, layout: str) -> dict[str, Any]:
        """The file's provenance as a derived clip records it."""
        out: dict[str, Any] = {
            "path": self.path,
            "sha256": self.sha256,
            "layout": layout,
            "license": self.license,
            "sample_rate": self.sample_rate,
            "channels": self.channels,
            "channel": 0,
            "duration_s": round(self.duration_s, 6),
        }
        if self.meta:
            out["meta"] = dict(self.meta)
        if self.rt60_s is not None:
            out["rt60_s"] = round(self.rt60_s, 4)
            out["rt60_source"] = self.rt60_source
        return out


@dataclass(frozen=True, eq=False)
class Bank:
    """The scanned folder: its usable files (sorted by path), what was left out and why, and the digest of it all."""

    spec: BankSpec
    layout: str
    subsets: tuple[str, ...]
    files: tuple[BankFile, ...]
    excluded: tuple[tuple[str, str], ...]
    digest: str

    @property
    def root(self) -> Path:
        return _norm(Path(self.spec.folder).absolute())

    def key(self) -> dict[str, Any]:
        """What the derived clips depend on: the role, the files' paths, digests and metadata (not where the folder is)."""
        return {"role": self.spec.role, "layout": self.layout, "digest": self.digest}

    def describe(self) -> dict[str, Any]:
        licenses = sorted({f.license for f in self.files if f.license})
        out: dict[str, Any] = {
            "folder": self.spec.folder,
            "layout": self.layout,
            "role": self.spec.role,
            "subsets": list(self.subsets),
            "n_files": len(self.files),
            "digest": self.digest,
            "license_files": licenses,
        }
        if self.spec.role == "noise" and self.layout == "musan":
            out["music_vocals"] = self.spec.music_vocals
        if self.spec.role == "rir":
            rts = [f.rt60_s for f in self.files if f.rt60_s is not None]
            out["rt60_range_s"] = [round(min(rts), 4), round(max(rts), 4)] if rts else None
            out["max_rir_s"] = self.spec.max_rir_s
        if self.excluded:
            out["excluded"] = {"n_files": len(self.excluded), "examples": [{"path": p, "why": w} for p, w in self.excluded[:10]]}
        return out


# ---------------------------------------------------------------- layout and candidate files


@dataclass(frozen=True)
class _Candidate:
    path: str
    meta: tuple[tuple[str, str], ...] = ()
    rt60_s: float | None = None


def _visible(rel: Path) -> bool:
    return not any(part.startswith(".") for part in rel.parts)


def _audio_files(d: Path, root: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*") if p.suffix.lower() in AUDIO_SUFFIXES and p.is_file() and _visible(p.relative_to(root)))


def detect_layout(root: Path) -> str:
    """``musan`` when the folder has MUSAN's parts, ``rirs_noises`` when it has RIRS_NOISES's, else ``plain``."""
    if any((root / p).is_dir() for p in RIRS_PARTS):
        return "rirs_noises"
    if any((root / p).is_dir() for p in MUSAN_PARTS) and any(
        (root / p / s / n).is_file()
        for p in MUSAN_PARTS
        if (root / p).is_dir()
        for s in os.listdir(root / p)
        for n in ("ANNOTATIONS", "LICENSE")
    ):
        return "musan"
    return "plain"


def _subset_dirs(spec: BankSpec, root: Path, layout: str, where: str) -> tuple[tuple[str, ...], list[Path]]:
    role = spec.role
    if layout == "musan" and role == "rir":
        raise ConfigError(
            f"{where}.folder: {root} is a MUSAN folder (music, speech and noise recordings), which holds no room impulse "
            f"responses; point a room family at RIRS_NOISES or a folder of impulse responses"
        )
    subsets = spec.subsets or tuple(x for x in DEFAULT_SUBSETS.get((layout, role), ()) if (root / x).is_dir())  # the parts it has
    dirs: list[Path] = []
    if not subsets:
        return (), [root]
    parts = MUSAN_PARTS if layout == "musan" else RIRS_PARTS if layout == "rirs_noises" else ()
    for i, sub in enumerate(subsets):
        rel = Path(sub)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise ConfigError(f"{where}.subsets[{i}]: '{sub}' must be a folder inside {root}, written relative to it")
        if parts and rel.parts[0] not in parts:
            raise ConfigError(f"{where}.subsets[{i}]: '{sub}' is not a part of the {layout} layout (parts: {', '.join(parts)})")
        if layout == "rirs_noises" and rel.parts[0] in _RIRS_WITHOUT[role]:
            what = "room impulse responses" if role == "rir" else "noise recordings"
            raise ConfigError(f"{where}.subsets[{i}]: {rel.parts[0]} holds no {what}")
        d = root / rel
        if not d.is_dir():
            have = sorted(p.name for p in root.iterdir() if p.is_dir() and _visible(Path(p.name)))
            raise ConfigError(f"{where}.subsets[{i}]: no folder '{sub}' in {root} (it has: {', '.join(have) or 'no folders'})")
        dirs.append(d)
    return tuple(subsets), dirs


def _norm(p: Path) -> Path:
    """``p`` with ``.`` and ``..`` folded away, symlinks kept (a file is named where the folder shows it)."""
    return Path(os.path.normpath(p))


def _resolve_listed(loc: str, list_dir: Path, root: Path) -> Path | None:
    """The listed file inside ``root``: as written (from the folder, the list's folder or the folder above, as Kaldi's lists
    write ``RIRS_NOISES/...``), else its path with leading folders dropped (a copy under another name)."""
    p = Path(loc)
    if p.is_absolute():
        cands = [p]
    else:
        cands = [root / p, list_dir / p, root.parent / p]
        for k in range(1, len(p.parts)):
            cands += [root.joinpath(*p.parts[k:]), list_dir.joinpath(*p.parts[k:])]
    for c in cands:
        c = _norm(c)
        if c.is_relative_to(root) and c.is_file():
            return c
    return None


def read_list(path: Path, root: Path, where: str) -> list[tuple[Path, dict[str, str]]]:
    """A Kaldi ``rir_list``/``noise_list``: ``--key value`` options and one file per line (errors name file and line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}.folder: cannot read {path} ({exc})") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        toks = line.split()
        if not toks or toks[0].startswith("#"):
            continue
        opts: dict[str, str] = {}
        locs: list[str] = []
        j = 0
        while j < len(toks):
            if toks[j].startswith("--"):
                if j + 1 >= len(toks):
                    raise ConfigError(f"{where}.folder: {path}, line {n}: option {toks[j]} has no value")
                opts[toks[j][2:]] = toks[j + 1]
                j += 2
            else:
                locs.append(toks[j])
                j += 1
        if len(locs) != 1 or "|" in line:
            raise ConfigError(
                f"{where}.folder: {path}, line {n}: expected '--key value' options and one file path, got {line.strip()!r} "
                f"(Kaldi pipes are not read: list plain file paths)"
            )
        found = _resolve_listed(locs[0], path.parent, root)
        if found is None:
            raise ConfigError(f"{where}.folder: {path}, line {n}: {locs[0]} is not a file inside {root}")
        out.append((found, opts))
    return out


def _rt60_option(opts: Mapping[str, str], path: Path, where: str) -> float | None:
    raw = opts.get("rt60", opts.get("rt-60"))
    if raw is None:
        return None
    try:
        x = float(raw)
    except ValueError:
        x = float("nan")
    if not math.isfinite(x) or x <= 0:
        raise ConfigError(f"{where}.folder: {path}: --rt60 {raw!r} is not a positive number of seconds")
    return x


def _room_info(d: Path) -> dict[str, dict[str, str]]:
    """``room_info`` of Kaldi's RIR simulation: ``RoomNNN x y z mic_x mic_y mic_z absorption`` per line."""
    out: dict[str, dict[str, str]] = {}
    for info in d.rglob("room_info"):
        for line in info.read_text(encoding="utf-8", errors="replace").splitlines():
            f = line.split()
            if len(f) >= 8:
                out[str(info.parent / f[0])] = {"room_size_m": " ".join(f[1:4]), "mic_position_m": " ".join(f[4:7]), "absorption": f[7]}
    return out


def _music_annotations(d: Path) -> dict[str, dict[str, str]]:
    """MUSAN ``music/*/ANNOTATIONS``: ``id genres vocals musician`` per line, by file stem."""
    out: dict[str, dict[str, str]] = {}
    for ann in d.rglob("ANNOTATIONS"):
        for line in ann.read_text(encoding="utf-8", errors="replace").splitlines():
            f = line.split()
            if len(f) >= 3:
                out[f[0]] = {"genres": f[1], "vocals": f[2], **({"musician": f[3]} if len(f) >= 4 else {})}
    return out


def _candidates(spec: BankSpec, root: Path, layout: str, dirs: list[Path], where: str) -> tuple[list[_Candidate], list[tuple[str, str]]]:
    role = spec.role
    list_name = LIST_NAMES[role]
    found: dict[str, _Candidate] = {}
    excluded: list[tuple[str, str]] = []
    for d in dirs:
        lists = sorted({p for p in d.rglob(list_name) if p.is_file() and _visible(p.relative_to(root))})
        covered = {p.parent for p in lists}  # as rglob spells them, like the audio files below
        rooms = _room_info(d) if layout == "rirs_noises" and role == "rir" else {}
        for lst in lists:
            for f, opts in read_list(lst, root, where):
                if not f.is_relative_to(d):
                    continue  # a list may name files of other parts
                rel = f.relative_to(root).as_posix()
                meta = {k: v for k, v in opts.items() if k not in ("rt60", "rt-60", "probability")}
                meta.update(rooms.get(str(f.parent), {}))
                meta["list"] = lst.relative_to(root).as_posix()
                found[rel] = _Candidate(rel, tuple(sorted(meta.items())), _rt60_option(opts, lst, where))
        for f in _audio_files(d, root):
            if covered and any(parent in covered for parent in f.parents):
                continue  # its folder's list says what it is
            rel = f.relative_to(root).as_posix()
            if layout == "rirs_noises" and f.relative_to(root).parts[0] == "real_rirs_isotropic_noises" and role not in f.stem.lower():
                continue
            meta = dict(rooms.get(str(f.parent), {})) if rooms else {}
            found.setdefault(rel, _Candidate(rel, tuple(sorted(meta.items()))))
    if layout == "musan" and role == "noise":
        notes = _music_annotations(root / "music") if (root / "music").is_dir() else {}
        kept: dict[str, _Candidate] = {}
        for rel, c in found.items():
            if rel.startswith("music/"):
                ann = notes.get(Path(rel).stem)
                if not spec.music_vocals and (ann is None or ann.get("vocals") != "N"):
                    excluded.append((rel, "music with vocals" if ann else "music not in ANNOTATIONS (vocals unknown)"))
                    continue
                c = _Candidate(rel, tuple(sorted({**dict(c.meta), **(ann or {})}.items())), c.rt60_s)
            kept[rel] = c
        found = kept
    return [found[k] for k in sorted(found)], excluded


# ---------------------------------------------------------------- scanning


def _license_for(path: Path, root: Path, cache: dict[Path, str | None]) -> str | None:
    d = path.parent
    chain = []
    while True:
        if d in cache:
            hit = cache[d]
            break
        chain.append(d)
        names = sorted(n for n in os.listdir(d) if n.lower().startswith(LICENSE_PREFIXES) and (d / n).is_file())
        if names:
            hit = (d / names[0]).relative_to(root).as_posix()
            break
        if d == root or d.parent == d:
            hit = None
            break
        d = d.parent
    for c in chain:
        cache[c] = hit
    return hit


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _scan_file(root: Path, cand: _Candidate, spec: BankSpec, licenses: dict[Path, str | None]) -> tuple[BankFile | None, str]:
    """The file's entry, or None and why it cannot serve (an RIR without a measurable RT60)."""
    import soundfile as sf

    from engine.perturb import ops

    where = spec.where
    path = root / cand.path
    try:
        info = sf.info(str(path))
    except Exception as exc:  # OSError, libsndfile's errors: the file is what is wrong
        raise ConfigError(
            f"{where}.folder: {cand.path} in {root} cannot be read as audio ({exc}); remove it or re-encode it as WAV or FLAC"
        ) from None
    if info.frames <= 0 or info.samplerate <= 0 or info.frames >= 1 << 62:
        raise ConfigError(f"{where}.folder: {cand.path} in {root} has no samples (or a header that does not state its length)")
    if info.channels > MAX_CHANNELS or info.samplerate > MAX_SAMPLE_RATE:
        raise ConfigError(
            f"{where}.folder: {cand.path} in {root} has {info.channels} channels at {info.samplerate} Hz, over the limits "
            f"({MAX_CHANNELS} channels, {MAX_SAMPLE_RATE} Hz)"
        )
    duration = info.frames / info.samplerate
    if spec.role == "rir" and duration > spec.max_rir_s:
        raise ConfigError(
            f"{where}.max_rir_s: {cand.path} in {root} is {duration:.2f} s long, over max_rir_s = {spec.max_rir_s:g} s; "
            f"is this a folder of room impulse responses? (raise max_rir_s, or leave the file out with subsets)"
        )
    try:
        data = path.read_bytes() if spec.role == "rir" else None
        digest = hashlib.sha256(data).hexdigest() if data is not None else _sha256(path)
    except OSError as exc:
        raise ConfigError(f"{where}.folder: {cand.path} in {root} cannot be read ({exc})") from None
    f = BankFile(
        cand.path, digest, int(info.samplerate), int(info.frames), int(info.channels), _license_for(path, root, licenses), cand.meta
    )
    if data is None:
        return f, ""
    h = _decode_channel0(io.BytesIO(data), f"{cand.path} in {root}", where)
    if cand.rt60_s is not None:
        return replace(f, rt60_s=cand.rt60_s, rt60_source="rir_list --rt60"), ""
    rt = ops.rt60_t20(h, f.sample_rate)
    if rt is None:
        return None, "RT60 not measurable (less than 35 dB between the peak and the noise floor, or a decay under 25 dB)"
    return replace(f, rt60_s=float(rt), rt60_source="T20 of the Schroeder curve"), ""


def _decode_channel0(src: Any, name: str, where: str) -> np.ndarray:
    import soundfile as sf

    try:
        data, _ = sf.read(src, dtype="float64", always_2d=True)
    except Exception as exc:
        raise ConfigError(f"{where}.folder: {name} cannot be decoded ({exc})") from None
    h = data[:, 0]
    if not np.all(np.isfinite(h)) or not np.any(h):
        raise ConfigError(f"{where}.folder: {name} is silent or holds NaN/Inf samples; it cannot be a room impulse response")
    return np.asarray(h)


_MEMO: dict[Any, Bank] = {}
_MEMO_SIZE = 16


def scan_bank(spec: BankSpec) -> Bank:
    """The bank of ``spec``'s folder (every file read and hashed; the same folder unchanged is scanned once per process)."""
    where = spec.where or "perturbations"
    root = _norm(Path(spec.folder).absolute())
    if not root.exists():
        raise ConfigError(f"{where}.folder: {root} does not exist")
    if not root.is_dir():
        raise ConfigError(f"{where}.folder: {root} is a file, not a folder of recordings")
    if spec.layout not in LAYOUTS:
        raise ConfigError(f"{where}.layout: unknown layout '{spec.layout}' (known: {', '.join(LAYOUTS)})")
    detected = detect_layout(root)
    layout = detected if spec.layout == "auto" else spec.layout
    if layout != "plain" and detected != layout:
        want = MUSAN_PARTS if layout == "musan" else RIRS_PARTS
        raise ConfigError(f"{where}.layout: {root} is not in the {layout} layout (no {', '.join(want)} folder); use layout: auto or plain")
    subsets, dirs = _subset_dirs(spec, root, layout, where)
    cands, excluded = _candidates(spec, root, layout, dirs, where)
    if not cands:
        others = sorted({p.suffix.lower() for d in dirs for p in d.rglob("*") if p.is_file() and p.suffix})
        what = "room impulse responses" if spec.role == "rir" else "noise recordings"
        hint = f" (found only {', '.join(others)} files)" if others else ""
        raise ConfigError(f"{where}.folder: no WAV or FLAC {what} in {root}{' under ' + ', '.join(subsets) if subsets else ''}{hint}")
    stats = []
    for c in cands:
        st = (root / c.path).stat()
        stats.append((c, st.st_size, st.st_mtime_ns, st.st_ino))
    memo_key = (spec, layout, tuple(stats))
    if memo_key in _MEMO:
        return _MEMO[memo_key]
    licenses: dict[Path, str | None] = {}
    files: list[BankFile] = []
    total = len(cands) + len(excluded)
    for c in cands:
        f, why = _scan_file(root, c, spec, licenses)
        if f is None:
            excluded.append((c.path, why))
        else:
            files.append(f)
    if excluded:
        log.warning("%s: %d of %d file(s) in %s left out (%s ...)", where, len(excluded), total, root, excluded[0][1])
    if not files:
        raise ConfigError(
            f"{where}.folder: none of the {len(excluded)} candidate file(s) in {root} can serve: {excluded[0][0]}: {excluded[0][1]}"
        )
    blob = json.dumps(
        {"role": spec.role, "layout": layout, "files": [[f.path, f.sha256, list(f.meta), f.rt60_s] for f in files]}, sort_keys=True
    )
    bank = Bank(spec, layout, subsets, tuple(files), tuple(excluded), hashlib.sha256(blob.encode()).hexdigest()[:32])
    if len(_MEMO) >= _MEMO_SIZE:
        _MEMO.pop(next(iter(_MEMO)))
    _MEMO[memo_key] = bank
    log.info("%s: %d %s file(s) from %s (%s layout), digest %s", where, len(files), spec.role, root, layout, bank.digest[:12])
    return bank


# ---------------------------------------------------------------- choosing and reading


def pick_index(n: int, *parts: Any) -> int:
    """A uniform index in ``range(n)`` from a hash of ``parts`` (the clip's identity, the seed, the family ...)."""
    h = hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).digest()
    return int.from_bytes(h[:8], "little") % n


_BANDS: dict[tuple[str, float, float], tuple[BankFile, ...]] = {}


def band(bank: Bank, lo: float, hi: float) -> tuple[BankFile, ...]:
    """The responses whose RT60 lies in ``(lo, hi]`` seconds."""
    key = (bank.digest, lo, hi)
    if key not in _BANDS:
        _BANDS[key] = tuple(f for f in bank.files if f.rt60_s is not None and lo < f.rt60_s <= hi)
    return _BANDS[key]


def _resample(x: np.ndarray, sr_in: int, sr_out: int) -> np.ndarray:
    if sr_in == sr_out:
        return np.asarray(x, dtype=np.float64)
    import soxr

    return np.asarray(soxr.resample(np.asarray(x, dtype=np.float64), sr_in, sr_out, quality="HQ"), dtype=np.float64)


def read_noise(bank: Bank, f: BankFile, n: int, sr: int, rng: np.random.Generator) -> tuple[np.ndarray, dict[str, Any]]:
    """``n`` samples at ``sr`` of the recording ``f``: a window at a seeded offset, or the whole file repeated.

    A recording at least as long as the clip gives a window of the clip's length starting at an
    offset drawn uniformly from ``rng`` (a window of digital silence is redrawn, up to
    ``SILENT_WINDOW_TRIES`` times); a shorter one is repeated end to end from its start and cut
    (as Kaldi's ``wav-reverberate --duration`` and audiomentations' ``AddBackgroundNoise`` do).
    Channel 0 is used; the window is resampled to ``sr`` (soxr, high quality).
    """
    import soundfile as sf

    path = bank.root / f.path
    need = int(math.ceil(n * f.sample_rate / sr))
    rec = f.record(bank.layout)
    try:
        if f.frames >= need:
            for attempt in range(SILENT_WINDOW_TRIES):
                offset = int(rng.integers(0, f.frames - need + 1))
                data, _ = sf.read(str(path), start=offset, frames=need, dtype="float64", always_2d=True)
                native = data[:, 0]
                if np.any(native):
                    break
            else:
                raise AudioError(
                    f"noise file {f.path} in {bank.root} is digitally silent in {SILENT_WINDOW_TRIES} windows of "
                    f"{need / f.sample_rate:.2f} s; remove or trim it"
                )
            rec.update(
                {
                    "offset_s": round(offset / f.sample_rate, 6),
                    "offset_frames": offset,
                    "frames_used": need,
                    "looped": False,
                    "silent_windows_skipped": attempt,
                }
            )
        else:
            data, _ = sf.read(str(path), dtype="float64", always_2d=True)
            whole = data[:, 0]
            if not np.any(whole):
                raise AudioError(f"noise file {f.path} in {bank.root} is digitally silent; remove it")
            native = np.tile(whole, -(-need // len(whole)))[:need]
            rec.update({"offset_s": 0.0, "offset_frames": 0, "frames_used": need, "looped": True, "repeats": round(need / len(whole), 4)})
    except AudioError:
        raise
    except Exception as exc:
        raise AudioError(f"noise file {f.path} in {bank.root} cannot be read ({exc})") from None
    y = _resample(native, f.sample_rate, sr)
    y = y[:n] if len(y) >= n else np.pad(y, (0, n - len(y)), mode="wrap")
    return y, rec


@lru_cache(maxsize=256)
def _rir_at(folder: str, rel: str, sha256: str, sr_in: int, sr: int) -> np.ndarray:
    h = _decode_channel0(str(Path(folder) / rel), rel, folder)
    out = _resample(h, sr_in, sr)
    out.setflags(write=False)
    return out


def read_rir(bank: Bank, f: BankFile, sr: int) -> tuple[np.ndarray, dict[str, Any]]:
    """The response ``f``, channel 0 (as Kaldi's ``--rir-channel`` and Lhotse's default), resampled to ``sr``."""
    try:
        return _rir_at(bank.spec.folder, f.path, f.sha256, f.sample_rate, sr), f.record(bank.layout)
    except ConfigError as exc:
        raise AudioError(str(exc)) from None


def lower_edge(levels: Iterable[float], level: float) -> float:
    """The RT60 band of ``level``: from the next lower level of the family (0 for the lowest) up to ``level``."""
    below = [lv for lv in levels if lv < level]
    return max(below) if below else 0.0


def apply(
    x: np.ndarray, sr: int, kind: str, bank: Bank, levels: Iterable[float], level: float, pick: int
) -> tuple[np.ndarray, dict[str, Any]]:
    """One clip with a file of ``bank``: recorded noise at ``level`` dB SNR (``kind == "noise"``) or a room of RT60 band ``level``.

    ``pick`` stands for the clip's identity, the family and the seed (never its batch or its
    position): it chooses the file uniformly among the bank's (the RIRs of the level's band for a
    room) and the noise's offset. The noise file and offset do not depend on the level, so a
    clip's SNR ladder changes only the SNR.
    """
    from engine.perturb import ops

    if kind == "noise":
        f = bank.files[pick_index(len(bank.files), pick, "file")]
        bg, rec = read_noise(bank, f, len(x), sr, np.random.default_rng(pick_index(1 << 62, pick, "offset")))
        y, info = ops.mix_recorded(x, sr, bg, level)
    elif kind == "room":
        lo = lower_edge(levels, level)
        files = band(bank, lo, level)
        if not files:
            raise AudioError(f"no room impulse response in {bank.root} has an RT60 in ({lo:g}, {level:g}] s")
        f = files[pick_index(len(files), pick, f"{level:g}")]
        h, rec = read_rir(bank, f, sr)
        y, info = ops.convolve_rir(x, sr, h)
        rec["band_s"] = [lo, float(level)]
    else:
        raise ValueError(f"a folder of recordings serves noise and room families, not '{kind}'")
    info["file"] = rec
    return y, info


class SourceTally:
    """The files derived clips used, per family: counts for summary.json, every file for ``sources.json``."""

    def __init__(self, banks: Mapping[str, Bank]) -> None:
        self.banks = dict(banks)
        self.used: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in self.banks}

    def add(self, derivation: Mapping[str, Any] | None) -> None:
        p = (derivation or {}).get("perturbation") or {}
        rec, fam = p.get("file"), p.get("family")
        if not isinstance(rec, Mapping) or fam not in self.used:
            return
        entry = self.used[fam].setdefault(
            rec["path"], {"path": rec["path"], "sha256": rec["sha256"], "license": rec.get("license"), "clips": 0}
        )
        entry["clips"] += 1

    def manifest(self) -> dict[str, Any]:
        """Every file used, per family, with its digest, license file and number of derived clips."""
        return {
            name: {**self.banks[name].describe(), "files_used": sorted(self.used[name].values(), key=lambda e: e["path"])}
            for name in self.banks
        }

    def summary(self, manifest_path: str) -> dict[str, Any]:
        """Per family: the bank, how many of its files were used by how many clips, and the license files that cover them."""
        out = {}
        for name, bank in self.banks.items():
            used = self.used[name].values()
            lic: dict[str, dict[str, int]] = {}
            for e in used:
                slot = lic.setdefault(e["license"] or "", {"files": 0, "clips": 0})
                slot["files"] += 1
                slot["clips"] += e["clips"]
            out[name] = {
                **bank.describe(),
                "files_used": len(self.used[name]),
                "clips": sum(e["clips"] for e in used),
                "licenses": [{"license_file": k or None, **v} for k, v in sorted(lic.items())],
                "manifest": manifest_path,
            }
        return out
