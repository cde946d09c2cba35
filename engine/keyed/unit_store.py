"""Keyed units: the unit contract of ``engine/run/store.py`` for results that are one JSON object per unit.

Some passes produce one small structured result per ``(pass, backend, unit)`` rather than rows
per clip: the conversation section's diarization and long-form ASR per recording. They keep the
same promises as the Parquet units:

* **Hashed safe names.** Files are ``<root>/units/<pass>/<safe_name(backend)>/<safe_name(unit)>.json``
  (``engine.storage.safe_name``), so ids ``a/b`` and ``a_b`` (or models ``sim x`` and ``sim_x``)
  never share a file; names that would still collide are refused before anything runs.
* **Markers with fingerprints.** Beside each result, ``<root>/markers/<pass>/...json`` records the
  unit's ``inputs`` (fingerprints of what it read: audio stamp, reference facts, upstream results)
  and ``settings``, each with a digest, and the digest of the result text. A unit is reused only
  when its marker matches the current inputs and settings exactly and the result is the one the
  marker describes; otherwise it is recomputed (never silently reused).
* **Atomic writes.** The result is written under a temporary name and renamed, then the marker
  the same way; an interrupted unit has no marker and is redone.

Work folders keyed by settings (``keyed_workspace``) extend the same contract to passes that
build a whole derived store (a section's masked or re-voiced audio and the runs on it): the folder
is named by the digest of its settings and carries a marker, so two configurations never share a
folder and a folder is reused only by the configuration its marker records.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from engine.errors import ResultIntegrityError
from engine.storage import atomic_write_text, check_distinct_paths, safe_name

log = logging.getLogger(__name__)

KEYED_VERSION = 1


def digest(obj: Any) -> str:
    """Stable digest of a JSON-able object (keys sorted)."""
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class KeyedUnitStore:
    """JSON results of one pass, one per ``(backend, unit)``, each vouched for by a marker."""

    def __init__(self, root: Path | str, pass_name: str) -> None:
        self.root = Path(root)
        self.pass_name = pass_name

    def result_path(self, backend: str, unit: str) -> Path:
        return self.root / "units" / safe_name(self.pass_name) / safe_name(backend) / f"{safe_name(unit)}.json"

    def marker_path(self, backend: str, unit: str) -> Path:
        return self.root / "markers" / safe_name(self.pass_name) / safe_name(backend) / f"{safe_name(unit)}.json"

    @staticmethod
    def check_names(backends: Iterable[str], units: Iterable[str]) -> None:
        """Refuse backend or unit names that would share a file (before anything runs)."""
        check_distinct_paths(list(backends), "backend")
        check_distinct_paths(list(units), "recording")

    def problem(self, backend: str, unit: str, inputs: Mapping[str, Any], settings: Mapping[str, Any]) -> str | None:
        """Why the stored result of ``(backend, unit)`` cannot be reused now; None when it can."""
        marker = self.marker_path(backend, unit)
        if not marker.exists():
            return "no marker"
        try:
            info = json.loads(marker.read_text())
            text = self.result_path(backend, unit).read_text(encoding="utf-8")
        except (OSError, ValueError) as exc:
            return f"marker or result unreadable ({exc})"
        if info.get("v") != KEYED_VERSION or info.get("backend") != backend or info.get("unit") != unit:
            return "marker of another unit or version"
        if info.get("result_digest") != hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]:
            return "result file is not the one its marker describes"
        if info.get("inputs_digest") != digest(dict(inputs)):
            changed = sorted(k for k in set(inputs) | set(info.get("inputs") or {}) if (info.get("inputs") or {}).get(k) != inputs.get(k))
            return f"inputs changed since it was computed ({', '.join(changed) or 'unknown'})"
        if info.get("settings_digest") != digest(dict(settings)):
            return "settings changed since it was computed"
        return None

    def get(self, backend: str, unit: str, inputs: Mapping[str, Any], settings: Mapping[str, Any]) -> Any | None:
        """The stored result when its marker matches ``inputs`` and ``settings``; None (and a log line) otherwise."""
        why = self.problem(backend, unit, inputs, settings)
        if why is not None:
            if why != "no marker":
                log.info("%s %s / %s: %s; it is recomputed", self.pass_name, backend, unit, why)
            return None
        return json.loads(self.result_path(backend, unit).read_text(encoding="utf-8"))

    def require(self, backend: str, unit: str, inputs: Mapping[str, Any], settings: Mapping[str, Any]) -> Any:
        """The stored result, or ``ResultIntegrityError`` naming the unit (scoring never uses an unvouched result)."""
        why = self.problem(backend, unit, inputs, settings)
        if why is not None:
            raise ResultIntegrityError(
                f"{self.pass_name} result of {backend} for '{unit}' under {self.root} cannot be used ({why}); "
                "nothing was scored: re-run the same command to recompute it"
            )
        return json.loads(self.result_path(backend, unit).read_text(encoding="utf-8"))

    def put(self, backend: str, unit: str, inputs: Mapping[str, Any], settings: Mapping[str, Any], result: Any) -> None:
        """Write the result atomically, then its marker (inputs, settings, their digests, the result's digest)."""
        text = json.dumps(result, indent=1, sort_keys=True, default=str)
        atomic_write_text(self.result_path(backend, unit), text)
        marker = {
            "v": KEYED_VERSION,
            "pass": self.pass_name,
            "backend": backend,
            "unit": unit,
            "inputs": json.loads(json.dumps(dict(inputs), sort_keys=True, default=str)),
            "inputs_digest": digest(dict(inputs)),
            "settings": json.loads(json.dumps(dict(settings), sort_keys=True, default=str)),
            "settings_digest": digest(dict(settings)),
            "result_digest": hashlib.sha256(text.encode("utf-8")).hexdigest()[:16],
        }
        atomic_write_text(self.marker_path(backend, unit), json.dumps(marker, sort_keys=True))


WORKSPACE_MARKER = "workspace.json"


def keyed_workspace(parent: Path | str, name: str, settings: Mapping[str, Any]) -> Path:
    """The work folder of ``name`` for exactly these ``settings``: ``<parent>/<safe_name(name)>/<digest>``.

    Why: a section's derived store (audio it made, the runs on it) must never be reused under
    other settings, and never be thrown away when settings change (a later run with the old
    settings resumes it). The folder's marker records the settings and their digest; a folder
    whose marker is missing, unreadable or records other settings holds nothing vouched for and
    is emptied before use. The runs inside keep their own unit markers, so resume stays exact.
    """
    key = digest(dict(settings))
    folder = Path(parent) / safe_name(name) / key
    marker = folder / WORKSPACE_MARKER
    info: Any = None
    if marker.exists():
        try:
            info = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            info = None
    ok = isinstance(info, dict) and info.get("v") == KEYED_VERSION and info.get("name") == name and info.get("settings_digest") == key
    if not ok:
        if folder.exists() and any(folder.iterdir()):
            log.info("%s: work folder %s is not vouched for by its marker; it is started afresh", name, folder)
            shutil.rmtree(folder)
        folder.mkdir(parents=True, exist_ok=True)
        record = {
            "v": KEYED_VERSION,
            "name": name,
            "settings": json.loads(json.dumps(dict(settings), sort_keys=True, default=str)),
            "settings_digest": key,
        }
        atomic_write_text(marker, json.dumps(record, indent=1, sort_keys=True))
    return folder


__all__ = ["KEYED_VERSION", "WORKSPACE_MARKER", "KeyedUnitStore", "digest", "keyed_workspace"]
