"""Storage every writer of a run shares: atomic text writes (through the secret scrubber) and
collision-free file names.

The shard-pass store (``engine/run/store.py``), the keyed-unit store (``engine/keyed/unit_store.py``),
derived audio and every report and export write through these, so a crash never leaves a
half-written file under its final name and no configured secret reaches a file.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Iterable

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
