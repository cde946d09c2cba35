"""Segments of longer files: a record's ``offset``/``duration`` read, checked and stamped.

A NeMo manifest (or a CSV/TSV/Parquet/Hugging Face table with the same columns) may describe
each clip as a span of a longer recording: ``offset`` (seconds from the start of the file) and
``duration`` (seconds). Such a record is a segment (``Utterance.offset_s``): every decode reads
only that span (``engine.audio.decoding.span_frames``). A record without ``offset`` is the whole file, and
its ``duration`` stays a note, as before.

Why here and before any model loads: a segment read as its whole file scores every span against
the whole recording (hundreds of per cent WER, no error). So the reader refuses a malformed
segment (offset not a number, negative, missing or non-positive duration) with the manifest's
file, line and field, and ``check_segments`` reads each segmented file's header once at open
and refuses a segment outside its file with the same rule the decoder applies.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.data import Utterance
from engine.errors import AudioError, ManifestError, SegmentError

#: The record key that makes a record a segment (NeMo's name).
OFFSET_KEY = "offset"


def _seconds(value: Any, file: str, line: int | None, key: str) -> float:
    if isinstance(value, bool):
        raise ManifestError(file, f"{key} must be a number of seconds, got {value!r}", line=line, field=key)
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ManifestError(file, f"{key} must be a number of seconds, got {value!r}", line=line, field=key) from None
    if not math.isfinite(x):
        raise ManifestError(file, f"{key} must be a finite number of seconds, got {value!r}", line=line, field=key)
    return x


def read_segment(row: Mapping[str, Any], file: str, line: int | None) -> tuple[float, float] | None:
    """``(offset_s, duration_s)`` of a record with an ``offset``, None without one; a malformed one raises ``ManifestError``."""
    raw = row.get(OFFSET_KEY)
    if raw is None or raw == "" or (isinstance(raw, float) and math.isnan(raw)):
        return None
    offset = _seconds(raw, file, line, OFFSET_KEY)
    if offset < 0:
        raise ManifestError(
            file, f"offset {offset:g} s is negative; a segment starts at or after the start of its file", line=line, field=OFFSET_KEY
        )
    dur_key = "duration" if "duration" in row else "duration_s"
    raw_d = row.get(dur_key)
    if raw_d is None or raw_d == "":
        raise ManifestError(
            file, f"a segment (offset {offset:g} s) needs its duration in seconds; add 'duration'", line=line, field="duration"
        )
    duration = _seconds(raw_d, file, line, dur_key)
    if duration <= 0:
        raise ManifestError(file, f"segment duration {duration:g} s must be > 0", line=line, field=dur_key)
    return offset, duration


def segment_stamp(stamp: tuple[str, str], utt: Utterance) -> tuple[str, str]:
    """A clip's audio stamp with its span: two segments of one file (or one segment moved) never share a stamp."""
    seg = utt.segment
    if seg is None:
        return stamp
    return (f"{stamp[0]}@{seg[0]!r}+{seg[1]!r}", stamp[1])


def _where(u: Utterance, fallback: str) -> tuple[str, int | None]:
    """(file, line) of a record from its ``source`` ("file:line" or "file:row i")."""
    src = u.source or fallback
    head, _, tail = src.rpartition(":")
    if tail.isdigit():
        return head, int(tail)
    if tail.startswith("row ") and tail[4:].isdigit():
        return head, int(tail[4:])
    return src, None


def check_segments(
    utts: Sequence[Utterance], root: Path | None, source: str, audio: Mapping[str, bytes | str | None] | None = None
) -> None:
    """Refuse, before any model loads, a segment that does not lie inside its audio.

    Each file holding a segment has its header read once (``engine.audio.decoding.inspect``, no samples).
    ``audio`` gives the audio of records read without it (Parquet and Hugging Face rows: utt_id ->
    bytes or path). A file that cannot be read is left to the decoder, which makes it that clip's
    error row as for a whole file.
    """
    from engine.audio.decoding import AudioHeader, inspect, span_frames

    headers: dict[Any, AudioHeader | None] = {}
    for u in utts:
        seg = u.segment
        if seg is None:
            continue
        probe = u
        if audio is not None and u.utt_id in audio:
            held = audio[u.utt_id]
            probe = Utterance(
                u.utt_id, None, audio_bytes=held if isinstance(held, bytes) else None, audio_path=held if isinstance(held, str) else None
            )
        key: Any = ("bytes", id(probe.audio_bytes)) if probe.audio_bytes is not None else ("path", probe.audio_path)
        if key not in headers:
            try:
                headers[key] = inspect(probe, root)
            except AudioError:
                headers[key] = None
        header = headers[key]
        if header is None:
            continue
        try:
            span_frames(seg, header)
        except SegmentError as exc:
            file, line = _where(u, source)
            where = probe.audio_path or "its embedded audio"
            raise ManifestError(
                file, f"utterance '{u.utt_id}': {exc} (audio: {where}); a segment must lie inside its file", line=line, field=exc.field
            ) from None


def bytes_source(value: Any) -> bytes | str | None:
    """The audio of a Parquet/Hugging Face cell (``{bytes, path}``, bytes or a path) as ``check_segments`` takes it."""
    if isinstance(value, Mapping):
        b = value.get("bytes")
        return bytes(b) if b is not None else (str(value["path"]) if value.get("path") else None)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str) and value:
        return value
    return None


__all__ = ["OFFSET_KEY", "bytes_source", "check_segments", "read_segment", "segment_stamp"]
