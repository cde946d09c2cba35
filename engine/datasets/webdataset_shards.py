"""WebDataset tar shards: one ``.tar`` file (or a folder of them), each a run of samples grouped by key.

The layout is WebDataset's: a sample is the consecutive members sharing a key, the member's path
up to the first dot of its file name (``utt-0001.flac``, ``utt-0001.txt``, ``utt-0001.json``;
a folder inside the tar is part of the key). Per sample:

* the audio: one member ending ``.wav``, ``.flac``, ``.mp3`` or ``.ogg`` (two audio members for one
  key are an error naming the shard and the key);
* the reference: the ``.txt`` member (UTF-8), else the ``.json`` member's text field (the same
  names as other readers: ``text``, ``sentence``, ...);
* the ``.json`` member's other fields: the speaker (``speaker``, ``speaker_id``, ``client_id``,
  ``spk``), an id, and slice labels.

Each tar file is one shard, read only when its units run; opening reads the small ``.txt`` and
``.json`` members and skips the audio, so memory stays flat. A clip's audio is stamped with its
tar file's stamp (size, mtime, first and last 64 KiB), as Parquet shards are.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any, Iterator

from engine.data import Shard, Utterance
from engine.datasets.base import (
    SNIFF_LAYOUT,
    SNIFF_NAME,
    Dataset,
    DatasetReader,
    NoReaderOptions,
    ShardIndex,
    check_limit,
    check_unique_ids,
    clip_digest,
    file_stamp,
    fingerprint_utterances,
)
from engine.datasets.readers import record_to_utterance
from engine.datasets.segments import segment_stamp
from engine.errors import ManifestError

AUDIO_EXTENSIONS = ("wav", "flac", "mp3", "ogg")
TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz")


def _split(name: str) -> tuple[str, str]:
    """(key, extension) of a member as WebDataset splits it: the extension starts at the first dot of the file name."""
    folder, _, base = name.rpartition("/")
    stem, dot, ext = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), (ext.lower() if dot else "")


def _samples(path: Path, with_audio: bool) -> Iterator[tuple[str, dict[str, Any]]]:
    """(key, {extension: bytes, or the member name for audio when ``with_audio`` is false}) per sample, in tar order."""
    try:
        tar = tarfile.open(path, "r:*")
    except (tarfile.TarError, OSError) as exc:
        raise ManifestError(path, f"not a readable tar file ({exc})") from None
    with tar:
        key: str | None = None
        parts: dict[str, Any] = {}
        try:
            for member in tar:
                if not member.isfile() or member.name.startswith("__") or "/__" in member.name:
                    continue
                k, ext = _split(member.name)
                if not ext:
                    continue
                if k != key:
                    if key is not None:
                        yield key, parts
                    key, parts = k, {}
                if ext in parts:
                    raise ManifestError(path, f"sample '{k}' has two '.{ext}' members", field=member.name)
                if ext in AUDIO_EXTENSIONS and not with_audio:
                    parts[ext] = member.name
                    continue
                fh = tar.extractfile(member)
                parts[ext] = fh.read() if fh is not None else b""
        except tarfile.TarError as exc:
            raise ManifestError(path, f"the tar file is damaged or cut short ({exc})") from None
        if key is not None:
            yield key, parts


def _record(key: str, parts: dict[str, Any], path: Path) -> dict[str, Any]:
    """A sample as the flat record ``record_to_utterance`` reads."""
    row: dict[str, Any] = {}
    if "json" in parts:
        try:
            meta = json.loads(parts["json"].decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ManifestError(path, f"sample '{key}': {key}.json is not valid JSON ({exc})", field=f"{key}.json") from None
        if not isinstance(meta, dict):
            raise ManifestError(path, f"sample '{key}': {key}.json must hold a JSON object", field=f"{key}.json")
        row.update(meta)
    row.setdefault("id", key)
    if "txt" in parts:
        for k in ("text", "reference", "sentence", "transcript", "transcription"):
            row.pop(k, None)
        row["text"] = parts["txt"].decode("utf-8", errors="replace").strip()
    audio = [e for e in AUDIO_EXTENSIONS if e in parts]
    if len(audio) > 1:
        raise ManifestError(path, f"sample '{key}' has {len(audio)} audio members ({', '.join(audio)}); keep one", field=key)
    if audio:
        value = parts[audio[0]]
        row["audio"] = {"bytes": value, "path": f"{key}.{audio[0]}"} if isinstance(value, bytes) else "<webdataset>"
    return row


def tar_shards(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.name.endswith(TAR_SUFFIXES) and p.is_file())
    return [path]


class WebDatasetReader(DatasetReader):
    """WebDataset tar shards: a ``.tar`` file or a folder of them (audio + ``.txt``/``.json`` per key)."""

    OPTIONS = NoReaderOptions

    @staticmethod
    def sniff(path: Path) -> int:
        """A folder of tar shards, or a tar file by its name."""
        if path.is_dir():
            return SNIFF_LAYOUT if tar_shards(path) else 0
        return SNIFF_NAME if path.name.endswith(TAR_SUFFIXES) else 0

    def open(self, path: str, shard_size: int = 64, limit: int | None = None) -> Dataset:
        check_limit(limit)
        p = Path(path)
        files = tar_shards(p)
        if not files or not files[0].exists():
            raise ManifestError(p, "no WebDataset tar shards found (.tar files)")
        light: list[Utterance] = []
        stamps: list[tuple[str, str]] = []
        spans: dict[str, tuple[Path, int]] = {}
        index: dict[str, ShardIndex] = {}
        remaining = limit
        for f in files:
            stamp, first = file_stamp(f), len(light)
            for i, (key, parts) in enumerate(_samples(f, with_audio=False)):
                if remaining is not None and len(light) - first >= remaining:
                    break
                light.append(record_to_utterance(_record(key, parts, f), f"{f}:{key}", i, key))
                stamps.append(segment_stamp(stamp, light[-1]))
            n = len(light) - first
            if n:
                sid = f.name.split(".")[0]
                if sid in spans:
                    raise ManifestError(f, f"two shards are named '{sid}' (also {spans[sid][0]}); shard names must differ")
                spans[sid] = (f, n)
                mine = light[first:]
                index[sid] = ShardIndex(tuple(u.utt_id for u in mine), tuple(clip_digest(u, st) for u, st in zip(mine, stamps[first:])))
            if remaining is not None:
                remaining -= n
                if remaining <= 0:
                    break
        if not light:
            raise ManifestError(p, "the tar shards hold no samples")
        check_unique_ids(light, str(p))
        root = p if p.is_dir() else p.parent

        def load(shard_id: str) -> Shard:
            f, n = spans[shard_id]
            out = []
            for i, (key, parts) in enumerate(_samples(f, with_audio=True)):
                if i >= n:
                    break
                out.append(record_to_utterance(_record(key, parts, f), f"{f}:{key}", i, key))
            return Shard(shard_id, tuple(out))

        return Dataset(
            name=p.name.split(".")[0],
            source=str(p),
            reader="webdataset",
            shard_ids=list(spans),
            _loader=load,
            root=root,
            n_utts=len(light),
            fingerprint=fingerprint_utterances(light, root, stamps),
            index=index,
            shard_size=shard_size,
        )
