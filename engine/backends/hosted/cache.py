"""On-disk cache of hosted-API answers, so that a resumed or repeated sweep never pays twice.

Key: (backend and model, digest of the options that change the answer, SHA-256 of the exact audio
bytes sent). One JSON file per answer under ``<root>/<backend>/<key[:2]>/<key>.json``, written to
a temporary file and renamed into place, so a killed process leaves either the whole answer or
nothing. The record holds the text, the raw vendor answer, the audio duration and the original
request's wall time (so API RTFx stays the request's, not the cache's), and what it answered:
backend, model, options digest and audio digest. An entry is served only when those match the
request (a copied, stale or tampered file is a miss, paid for again, never a wrong answer).
Never a credential: the record passes the secret scrubber before it is written.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.backends.hosted.scrub import scrubber

log = logging.getLogger(__name__)

CACHE_VERSION = 1


def options_digest(options: Mapping[str, Any]) -> str:
    """Stable digest of the options that change a transcript (sorted JSON, SHA-256)."""
    blob = json.dumps({k: options[k] for k in sorted(options)}, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def audio_digest(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


class ResponseCache:
    """Atomic get/put of answers; unreadable entries count as misses (and are paid for again)."""

    def __init__(self, root: Path, namespace: str) -> None:
        self.root = Path(root)
        self.namespace = "".join(c if c.isalnum() or c in "-_." else "_" for c in namespace)

    def key(self, model: str, digest: str, audio_sha256: str) -> str:
        return hashlib.sha256(f"v{CACHE_VERSION}\0{self.namespace}\0{model}\0{digest}\0{audio_sha256}".encode()).hexdigest()

    def path(self, key: str) -> Path:
        return self.root / self.namespace / key[:2] / f"{key}.json"

    def get(self, key: str, expect: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        """The entry under ``key`` when it records exactly ``expect`` (backend, model, digests).

        An entry written before these fields were recorded is served when its backend and model
        match (its key already holds the digests).
        """
        path = self.path(key)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("response cache entry %s is unreadable (%s); asking the API again", path, exc)
            return None
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            log.warning("response cache entry %s has no text; asking the API again", path)
            return None
        for field, want in (expect or {}).items():
            legacy = field not in record and field not in ("backend", "model")
            if not legacy and record.get(field) != want:
                log.warning(
                    "response cache entry %s was recorded for %s=%r, not %r as this request asks; asking the API again",
                    path,
                    field,
                    record.get(field),
                    want,
                )
                return None
        return record

    def put(self, key: str, record: Mapping[str, Any]) -> None:
        """Write one answer atomically, secrets scrubbed; a failed write is logged, never fatal (the answer is in hand)."""
        path = self.path(key)
        record = scrubber().value(dict(record))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump({**dict(record), "cached_at": time.time(), "cache_version": CACHE_VERSION}, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            log.warning("cannot write response cache entry %s (%s); this clip will be paid for again next time", path, exc)
