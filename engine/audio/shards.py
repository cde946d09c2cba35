"""Parquet shards of utterances (audio embedded as WAV/FLAC bytes) and NeMo-style manifests.

Shard schema (one row per utterance): ``utt_id``, ``audio`` (struct ``{bytes, path}`` in the
Hugging Face style), ``duration_s``, ``text`` (raw reference), ``speaker``, ``parent_id``,
``derivation`` (JSON string), ``offset`` (only when a row is a segment of its audio: seconds
from the start, with ``duration_s`` its length), then one string column per slice label.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine.data import Utterance

BASE_FIELDS: tuple[str, ...] = ("utt_id", "audio", "duration_s", "text", "speaker", "parent_id", "derivation")
#: Written only when a row is a segment of its audio (``Utterance.offset_s``): the span starts at
#: ``offset`` seconds and lasts ``duration_s``, so the row is read as that span, not the whole audio.
OFFSET_FIELD = "offset"


def encode_audio(samples: np.ndarray, sample_rate: int, fmt: str = "FLAC") -> bytes:
    """Encode mono float samples as FLAC (16-bit) or WAV bytes."""
    import soundfile as sf

    buf = io.BytesIO()
    subtype = "PCM_16"
    sf.write(buf, np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0), sample_rate, format=fmt, subtype=subtype)
    return buf.getvalue()


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _atomic_write_table(table: pa.Table, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def _digest_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def record_shard_digest(path: Path) -> None:
    """Record a cached shard's SHA-256 and size beside it, after the shard itself is in place (so a crash leaves no digest)."""
    _atomic_write_text(_digest_path(path), json.dumps({"file": path.name, "bytes": path.stat().st_size, "sha256": _file_sha256(path)}))


def verified_shard(path: Path) -> bool:
    """Whether a cached shard is exactly the one written: its recorded size and SHA-256 match.

    A shard with no digest (an interrupted build, an older version), a truncated or edited one is
    not reused: whoever built it builds it again rather than trust it (derived data is made
    deterministically), and a reader never meets a raw Parquet error on a damaged cache.
    """
    try:
        rec = json.loads(_digest_path(path).read_text(encoding="utf-8"))
        return bool(path.is_file() and path.stat().st_size == rec["bytes"] and _file_sha256(path) == rec["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return False


def utterances_to_table(utts: Sequence[Utterance], label_keys: Sequence[str] | None = None) -> pa.Table:
    """Arrow table in the shard schema; label columns are the union of labels (sorted)."""
    if label_keys is None:
        label_keys = sorted({k for u in utts for k in u.labels})
    cols: dict[str, list[object]] = {k: [] for k in BASE_FIELDS}
    for k in label_keys:
        cols[k] = []
    for u in utts:
        cols["utt_id"].append(u.utt_id)
        cols["audio"].append({"bytes": u.audio_bytes, "path": u.audio_path})
        cols["duration_s"].append(u.duration_s)
        cols["text"].append(u.reference)
        cols["speaker"].append(u.speaker)
        cols["parent_id"].append(u.parent_id)
        cols["derivation"].append(u.derivation_json())
        for k in label_keys:
            v = u.labels.get(k)
            cols[k].append(None if v is None else str(v))
    audio_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    arrays = {
        "utt_id": pa.array(cols["utt_id"], pa.string()),
        "audio": pa.array(cols["audio"], audio_type),
        "duration_s": pa.array(cols["duration_s"], pa.float64()),
        "text": pa.array(cols["text"], pa.string()),
        "speaker": pa.array(cols["speaker"], pa.string()),
        "parent_id": pa.array(cols["parent_id"], pa.string()),
        "derivation": pa.array(cols["derivation"], pa.string()),
    }
    if any(u.offset_s is not None for u in utts):
        arrays[OFFSET_FIELD] = pa.array([u.offset_s for u in utts], pa.float64())
    for k in label_keys:
        arrays[k] = pa.array(cols[k], pa.string())
    return pa.table(arrays)


def write_shards(
    utts: Iterable[Utterance],
    out_dir: Path | str,
    shard_size: int = 64,
    prefix: str = "shard",
) -> list[Path]:
    """Write utterances to ``out_dir/{prefix}-NNNNN.parquet`` files of ``shard_size`` rows."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    utts = list(utts)
    label_keys = sorted({k for u in utts for k in u.labels})
    paths: list[Path] = []
    for i in range(0, len(utts), shard_size):
        path = out / f"{prefix}-{i // shard_size:05d}.parquet"
        _atomic_write_table(utterances_to_table(utts[i : i + shard_size], label_keys), path)
        paths.append(path)
    return paths


def write_manifest(utts: Iterable[Utterance], path: Path | str) -> Path:
    """NeMo-style JSONL: ``audio_filepath``, ``duration``, ``text``, ``utt_id``, ``speaker``, ``parent_id``, ``derivation``,
    ``offset`` of a segment, then the labels."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        for u in utts:
            rec: dict[str, object] = {
                "audio_filepath": u.audio_path,
                "duration": u.duration_s,
                "text": u.reference,
                "utt_id": u.utt_id,
            }
            if u.speaker is not None:
                rec["speaker"] = u.speaker
            if u.parent_id is not None:
                rec["parent_id"] = u.parent_id
            if u.derivation is not None:  # derived audio records its derivation (readers require it beside parent_id)
                rec["derivation"] = dict(u.derivation)
            if u.offset_s is not None:
                rec[OFFSET_FIELD] = u.offset_s
            rec.update(u.labels)
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


def iter_table_utterances(table: pa.Table, source: str) -> Iterator[Utterance]:
    """Rows of a shard-schema table as Utterances (used by the Parquet reader)."""
    names = table.column_names
    label_cols = [c for c in names if c not in BASE_FIELDS and c != OFFSET_FIELD]
    for i, row in enumerate(table.to_pylist()):
        audio = row.get("audio") or {}
        deriv = row.get("derivation")
        yield Utterance(
            utt_id=str(row["utt_id"]),
            reference=row.get("text"),
            audio_path=audio.get("path"),
            audio_bytes=audio.get("bytes"),
            duration_s=row.get("duration_s"),
            speaker=row.get("speaker"),
            labels={k: str(row[k]) for k in label_cols if row.get(k) is not None},
            parent_id=row.get("parent_id"),
            derivation=json.loads(deriv) if deriv else None,
            source=f"{source}:row {i}",
            offset_s=row.get(OFFSET_FIELD),
        )
