"""Storage every writer of a run shares: atomic text writes (through the secret scrubber),
collision-free file names, and files fingerprinted while they are written.

The shard-pass store (``engine/run/store.py``), the keyed-unit store (``engine/keyed/unit_store.py``),
derived audio and every report and export write through these, so a crash never leaves a
half-written file under its final name and no configured secret reaches a file.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable

from engine.backends.hosted.scrub import scrubber
from engine.errors import ConfigError, StoreWriteError

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_NAME = 100  # characters kept from a long name (file names are limited to 255 bytes)


def safe_name(name: str) -> str:
    """File-system safe form of a model or shard name that stays distinct for distinct names.

    Characters outside ``[A-Za-z0-9._-]`` become ``_``. When that changes the name, or the name
    has upper-case letters (which share a file with their lower-case form on case-insensitive
    file systems) or is long, the first 8 hex digits of the name's SHA-1 are appended: escaping
    alone sent ``a b`` and ``a_b`` (or ``tiny/a`` and ``tiny_a``) to one file, and one of them
    silently lost its rows. Plain names (registry names, ``s00012``) are kept as they are. Names
    stay intact inside the rows.
    """
    escaped = _SAFE.sub("_", name).strip("._") or "_"
    if escaped == name and name == name.lower() and len(name) <= _MAX_NAME:
        return name
    return f"{escaped[:_MAX_NAME]}-{hashlib.sha1(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def check_distinct_paths(names: Iterable[str], what: str) -> None:
    """Refuse names that would share a file (equal after ``safe_name``, ignoring case) or repeat.

    ``safe_name`` makes this practically impossible for different names; the check makes it
    impossible, so no unit can overwrite another's results.
    """
    seen: dict[str, str] = {}
    clashes: list[str] = []
    repeated: list[str] = []
    for name in names:
        key = safe_name(name).casefold()
        if key in seen:
            if seen[key] == name:
                repeated.append(name)
            else:
                clashes.append(f"'{seen[key]}' and '{name}' (both '{safe_name(name)}')")
        else:
            seen[key] = name
    if repeated:
        raise ConfigError(f"{what} names must be unique in a run; repeated: {', '.join(sorted(set(repeated)))}")
    if clashes:
        raise ConfigError(f"{what} names that would share one result file: {'; '.join(clashes)}; rename one of each pair")


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file, fsync it, and rename it over ``path``.

    Every text artefact of a run is written here, so the secret scrubber runs here: no form of a
    configured API key reaches a file (engine/backends/hosted/scrub.py).
    """
    text = scrubber()(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)  # never leave a half-written temporary file behind
        raise StoreWriteError(
            f"cannot write {path}: {exc.strerror or exc}; nothing already written was changed: "
            "free disk space or fix permissions, then re-run the same command"
        ) from exc


class _HashingFile:
    """A binary file being written that hashes every byte on its way through (what ``write_hashed`` hands out)."""

    def __init__(self, fh: BinaryIO) -> None:
        self._fh = fh
        self.sha256 = hashlib.sha256()

    def write(self, data: Any) -> int:
        self.sha256.update(data)
        return self._fh.write(data)

    def flush(self) -> None:
        self._fh.flush()

    def tell(self) -> int:
        return self._fh.tell()

    @property
    def closed(self) -> bool:
        return self._fh.closed

    def close(self) -> None:
        """The caller of ``write_hashed`` closes the file; a writer that closes its sink changes nothing."""


def write_hashed(path: Path, write: Callable[[Any], None]) -> str:
    """Write ``path`` atomically through ``write`` (handed a binary file object) and return the SHA-256 of
    the bytes written, taken as they pass: a file written to be fingerprinted is never read back.

    The bytes are those ``write`` would have put in a file it opened itself (pyarrow's and pandas'
    Parquet writers write the same bytes to a path and to a file object), so the digest equals the
    file's SHA-256.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            sink = _HashingFile(fh)
            write(sink)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # never leave a half-written temporary file behind
        raise
    return sink.sha256.hexdigest()
