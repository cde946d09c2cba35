"""The Dataset abstraction: a named, fingerprinted list of shards of utterances.

Readers validate the whole manifest before any model loads: structural problems (bad JSON,
missing column, duplicate ids) raise ``ManifestError`` naming file, line and field; problems of
one clip (missing audio, no reference) are kept on the record and become that row's error.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from engine.data import Shard, Utterance
from engine.errors import ManifestError

log = logging.getLogger(__name__)


@dataclass
class Dataset:
    """Shards of utterances plus where they came from.

    ``shard_ids`` are stable; ``load_shard`` may read lazily (Parquet shards are read on demand,
    so memory does not grow with the dataset).
    """

    name: str
    source: str
    reader: str
    shard_ids: list[str]
    _loader: Callable[[str], Shard] = field(repr=False)
    root: Path | None = None
    has_audio: bool = True
    n_utts: int = 0
    fingerprint: str = ""
    #: Small, JSON-able provenance (what built the dataset); it goes into summary.json as is.
    meta: dict[str, Any] = field(default_factory=dict)
    #: Predictions-only datasets: model -> utt_id -> raw hypothesis. Rows, never provenance:
    #: kept out of ``describe()`` so summary.json does not grow with the dataset.
    predictions: Mapping[str, Mapping[str, str]] = field(default_factory=dict, repr=False)

    def load_shard(self, shard_id: str) -> Shard:
        return self._loader(shard_id)

    def iter_shards(self):  # type: ignore[no-untyped-def]
        for sid in self.shard_ids:
            yield self.load_shard(sid)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "reader": self.reader,
            "n_utts": self.n_utts,
            "n_shards": len(self.shard_ids),
            "fingerprint": self.fingerprint,
            **({"prediction_models": sorted(self.predictions)} if self.predictions else {}),
            **self.meta,
        }


def check_unique_ids(utts: Sequence[Utterance], source: str) -> None:
    """Duplicate ids would make results ambiguous: stop before any model loads."""
    seen: dict[str, str | None] = {}
    for u in utts:
        if u.utt_id in seen:
            raise ManifestError(
                source,
                f"duplicate utt_id '{u.utt_id}' (first at {seen[u.utt_id]}, again at {u.source}); ids must be unique",
                field="utt_id",
            )
        seen[u.utt_id] = u.source


def fingerprint_utterances(utts: Sequence[Utterance]) -> str:
    """Stable content id of a dataset's ids and references (not audio), for merge checks."""
    h = hashlib.sha256()
    for u in sorted(utts, key=lambda x: x.utt_id):
        h.update(u.utt_id.encode("utf-8", "replace"))
        h.update(b"\x00")
        h.update((u.reference or "").encode("utf-8", "replace"))
        h.update(b"\x01")
    return h.hexdigest()[:16]


def in_memory_dataset(
    name: str,
    source: str,
    reader: str,
    utts: Sequence[Utterance],
    shard_size: int,
    root: Path | None,
    has_audio: bool = True,
    limit: int | None = None,
    meta: Mapping[str, Any] | None = None,
) -> Dataset:
    """Chunk an in-memory list of utterances into shards of ``shard_size``."""
    if shard_size < 1:
        raise ValueError("shard_size must be >= 1")
    utts = list(utts)[:limit] if limit else list(utts)
    check_unique_ids(utts, source)
    shards = {
        f"s{i // shard_size:05d}": Shard(f"s{i // shard_size:05d}", tuple(utts[i : i + shard_size]))
        for i in range(0, len(utts), shard_size)
    }
    return Dataset(
        name=name,
        source=source,
        reader=reader,
        shard_ids=list(shards),
        _loader=shards.__getitem__,
        root=root,
        has_audio=has_audio,
        n_utts=len(utts),
        fingerprint=fingerprint_utterances(utts),
        meta=dict(meta or {}),
    )


def detect_reader(path: str | Path) -> str:
    """Pick a reader from what the path looks like; explicit ``reader:`` always wins."""
    p = Path(path)
    if p.is_dir():
        if (p / "shards").is_dir() or any(p.glob("*.parquet")):
            return "parquet"
        if (p / "dataset_info.json").exists() or (p / "dataset_dict.json").exists() or (p / "state.json").exists():
            return "hf"
        if any(p.glob("*.jsonl")):
            jsonls = sorted(p.glob("*.jsonl"))
            if _looks_like_predictions(jsonls[0]):
                return "oasr-predictions"
            if (p / "manifest.jsonl").exists():
                return "nemo"
        raise ManifestError(p, "cannot tell the dataset format of this directory; pass --reader (nemo, csv, tsv, parquet, hf, oasr-predictions)")
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".json"):
        if p.exists() and _looks_like_predictions(p):
            return "oasr-predictions"
        return "nemo"
    if suffix == ".csv":
        return "csv"
    if suffix == ".tsv":
        return "tsv"
    if suffix == ".parquet":
        return "parquet"
    if not p.exists() and "/" in str(path) and not str(path).startswith((".", "/")):
        return "hf"  # looks like a hub id such as 'org/name'
    raise ManifestError(p, "cannot tell the dataset format from the file name; pass --reader")


def _looks_like_predictions(path: Path) -> bool:
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            first = fh.readline()
        return "pred_text" in json.loads(first)
    except Exception:
        return False


def open_dataset(
    path: str | Path,
    reader: str = "auto",
    shard_size: int = 64,
    limit: int | None = None,
    **options: Any,
) -> Dataset:
    """Open a dataset with the named reader (or the detected one)."""
    from engine.datasets import DATASET_READERS

    name = detect_reader(path) if reader == "auto" else reader
    cls = DATASET_READERS.get(name)
    return cls(**options).open(str(path), shard_size=shard_size, limit=limit)
