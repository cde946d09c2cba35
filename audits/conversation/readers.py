"""Readers for speaker-attributed annotations: RTTM, STM, SegLST (meeteval's JSON) and NeMo
manifests with offsets. Every reader returns :class:`Segment` records that remember their file
and line, so that a later check (a recording without audio, audio shorter than its annotation,
a hypothesis speaker nobody knows) can name the exact place to fix.

Structural problems (a line with the wrong number of fields, a negative duration, a missing key)
raise :class:`engine.errors.ManifestError` at once. Problems that leave the file usable but
must not pass unnoticed (one speaker's segments overlapping each other) are returned as counted
``problems`` in :class:`Annotations` and end up in the report; nothing is dropped silently.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import ManifestError

#: Two times closer than this (seconds) are equal: annotation files carry millisecond precision.
TIME_EPS = 1e-3


@dataclass(frozen=True)
class Segment:
    """One speaker turn: who spoke when, and (for transcripts) what was said."""

    session_id: str
    speaker: str
    start: float
    end: float
    words: str = ""
    source: str = ""  # "file:line" (or "file[index]" for JSON lists), for messages

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass
class Annotations:
    """Segments of one file plus the counted, non-fatal problems found while reading it."""

    segments: list[Segment]
    problems: list[str] = field(default_factory=list)

    def sessions(self) -> list[str]:
        return sorted({s.session_id for s in self.segments})

    def by_session(self) -> dict[str, list[Segment]]:
        out: dict[str, list[Segment]] = defaultdict(list)
        for seg in self.segments:
            out[seg.session_id].append(seg)
        return {k: sorted(v, key=lambda s: (s.start, s.end, s.speaker)) for k, v in out.items()}

    def speakers(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = defaultdict(set)
        for seg in self.segments:
            out[seg.session_id].add(seg.speaker)
        return dict(out)


def _float(path: Path, line: int, name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ManifestError(path, f"{name} {text!r} is not a number", line=line, field=name) from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ManifestError(path, f"{name} {text!r} is not a finite number", line=line, field=name)
    return value


def _check_times(path: Path, line: int, start: float, end: float) -> None:
    if start < 0:
        raise ManifestError(path, f"start {start} is negative", line=line, field="start")
    if end < start:
        raise ManifestError(path, f"end {end} is before start {start} (negative duration)", line=line, field="end")


def read_rttm(path: str | Path) -> Annotations:
    """NIST RTTM: ``SPEAKER <file> <chan> <start> <dur> <NA> <NA> <speaker> <NA> <NA>`` per line.
    Lines of other types (``SPKR-INFO``, ``LEXEME``...) carry no turns and are counted as skipped."""
    path = Path(path)
    segs: list[Segment] = []
    skipped: dict[str, int] = defaultdict(int)
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith(";;"):
            continue
        parts = line.split()
        if parts[0] != "SPEAKER":
            skipped[parts[0]] += 1
            continue
        if len(parts) < 8:
            raise ManifestError(
                path, f"RTTM SPEAKER line needs at least 8 fields (type file chan start dur ortho stype name), got {len(parts)}", line=n
            )
        start = _float(path, n, "start", parts[3])
        dur = _float(path, n, "duration", parts[4])
        if dur < 0:
            raise ManifestError(path, f"duration {dur} is negative", line=n, field="duration")
        _check_times(path, n, start, start + dur)
        segs.append(Segment(parts[1], parts[7], start, start + dur, source=f"{path.name}:{n}"))
    problems = [f"{path.name}: {count} '{kind}' line(s) carry no speaker turn and were not used" for kind, count in sorted(skipped.items())]
    return Annotations(segs, problems + self_overlaps(segs))


def read_stm(path: str | Path) -> Annotations:
    """NIST STM: ``<file> <channel> <speaker> <start> <end> [<labels>] transcript``; ``;;`` starts
    a comment. Segments marked ``ignore_time_segment_in_scoring`` are counted as skipped."""
    path = Path(path)
    segs: list[Segment] = []
    ignored = 0
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(";;"):
            continue
        parts = line.split(maxsplit=5)
        if len(parts) < 5:
            raise ManifestError(path, f"STM line needs at least 5 fields (file channel speaker start end), got {len(parts)}", line=n)
        start = _float(path, n, "start", parts[3])
        end = _float(path, n, "end", parts[4])
        _check_times(path, n, start, end)
        text = parts[5] if len(parts) > 5 else ""
        if text.startswith("<"):
            close = text.find(">")
            if close < 0:
                raise ManifestError(path, "label field opens with '<' but has no closing '>'", line=n, field="labels")
            text = text[close + 1 :].strip()
        if text == "ignore_time_segment_in_scoring" or parts[2] == "inter_segment_gap":
            ignored += 1
            continue
        segs.append(Segment(parts[0], parts[2], start, end, text, source=f"{path.name}:{n}"))
    problems = [f"{path.name}: {ignored} segment(s) marked not to be scored were not used"] if ignored else []
    return Annotations(segs, problems + self_overlaps(segs))


_SEGLST_KEYS = ("session_id", "speaker", "start_time", "end_time", "words")


def read_seglst(path: str | Path) -> Annotations:
    """SegLST (meeteval / CHiME-7/8): a JSON list of ``{session_id, speaker, start_time,
    end_time, words}`` objects; other keys are allowed and ignored."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ManifestError(path, f"not valid JSON: {exc.msg}", line=exc.lineno) from None
    if not isinstance(data, list):
        raise ManifestError(path, f"SegLST must be a JSON list of segments, got {type(data).__name__}")
    return Annotations(*_seglst_segments(path, data))


def _seglst_segments(path: Path, data: Sequence[Any]) -> tuple[list[Segment], list[str]]:
    segs: list[Segment] = []
    for i, item in enumerate(data):
        where = f"segment {i}"
        if not isinstance(item, Mapping):
            raise ManifestError(path, f"{where} is not a JSON object")
        missing = [k for k in _SEGLST_KEYS if k not in item]
        if missing:
            raise ManifestError(path, f"{where} lacks key(s) {', '.join(missing)} (SegLST needs {', '.join(_SEGLST_KEYS)})")
        for key in ("start_time", "end_time"):
            value = item[key]
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise ManifestError(path, f"{where}: {key} must be a number of seconds, got {type(value).__name__} {value!r}", field=key)
        try:
            start, end = float(item["start_time"]), float(item["end_time"])
        except (TypeError, ValueError):
            raise ManifestError(path, f"{where}: start_time/end_time must be numbers") from None
        for key, value in (("start_time", start), ("end_time", end)):
            if not math.isfinite(value):  # json reads NaN and Infinity; every comparison with NaN is False
                raise ManifestError(path, f"{where}: {key} {item[key]!r} is not a finite number of seconds", field=key)
        if start < 0 or end < start:
            raise ManifestError(path, f"{where}: times {start}..{end} are negative or reversed")
        if not isinstance(item["words"], str):
            raise ManifestError(path, f"{where}: words must be a string")
        segs.append(Segment(str(item["session_id"]), str(item["speaker"]), start, end, item["words"], source=f"{path.name}[{i}]"))
    return segs, self_overlaps(segs)


def iter_json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSONL file; a line that is not a JSON
    object is an error naming the file and line."""
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ManifestError(path, f"not valid JSON: {exc.msg}", line=n) from None
        if not isinstance(row, dict):
            raise ManifestError(path, "each line must be a JSON object", line=n)
        yield n, row


def read_nemo_offsets(path: str | Path) -> Annotations:
    """A NeMo manifest whose lines cut long recordings: ``audio_filepath`` (the session),
    ``offset``, ``duration``, ``text`` and ``speaker``. The session id is the file's stem."""
    path = Path(path)
    segs: list[Segment] = []
    for n, row in iter_json_lines(path):
        for key in ("audio_filepath", "offset", "duration"):
            if key not in row:
                raise ManifestError(
                    path, f"missing key '{key}' (a manifest with offsets needs audio_filepath, offset, duration)", line=n, field=key
                )
        start = _float(path, n, "offset", str(row["offset"]))
        dur = _float(path, n, "duration", str(row["duration"]))
        _check_times(path, n, start, start + dur)
        if "speaker" not in row:
            raise ManifestError(path, "missing key 'speaker' (needed for speaker-attributed scoring)", line=n, field="speaker")
        session = Path(str(row["audio_filepath"])).stem
        segs.append(Segment(session, str(row["speaker"]), start, start + dur, str(row.get("text", "")), source=f"{path.name}:{n}"))
    return Annotations(segs, self_overlaps(segs))


def read_annotations(path: str | Path) -> Annotations:
    """Pick the reader from the file's suffix: .rttm, .stm, .json (SegLST), .jsonl (NeMo)."""
    path = Path(path)
    readers = {".rttm": read_rttm, ".stm": read_stm, ".json": read_seglst, ".jsonl": read_nemo_offsets}
    if not path.exists():
        raise ManifestError(path, "file does not exist")
    reader = readers.get(path.suffix.lower())
    if reader is None:
        raise ManifestError(path, f"unknown annotation format '{path.suffix}'; use one of {', '.join(readers)}")
    if not path.is_file():
        raise ManifestError(path, "is not a file")
    try:
        return reader(path)
    except UnicodeDecodeError as exc:
        raise ManifestError(path, f"not valid UTF-8 text (byte {exc.start}); save the file as UTF-8") from None


def self_overlaps(segments: Iterable[Segment]) -> list[str]:
    """One problem per pair of overlapping segments of the same speaker in the same session
    (a person cannot say two things at once: usually a labelling error). Kept, not dropped."""
    per: dict[tuple[str, str], list[Segment]] = defaultdict(list)
    for seg in segments:
        per[(seg.session_id, seg.speaker)].append(seg)
    out: list[str] = []
    for (session, speaker), segs in sorted(per.items()):
        segs.sort(key=lambda s: (s.start, s.end))
        last = segs[0]
        for seg in segs[1:]:
            if seg.start < last.end - TIME_EPS:
                out.append(
                    f"{seg.source}: speaker '{speaker}' of '{session}' overlaps itself "
                    f"({last.start:.3f}-{last.end:.3f} s at {last.source} and {seg.start:.3f}-{seg.end:.3f} s)"
                )
            if seg.end > last.end:
                last = seg
    return out


def check_recordings(annotations: Annotations, recordings: Iterable[str], what: str) -> None:
    """Every annotated session must have a recording and every recording an annotation;
    a mismatch names both sides (a wrong file stem is the usual cause)."""
    rec = set(recordings)
    ann = set(annotations.sessions())
    no_audio = sorted(ann - rec)
    no_ann = sorted(rec - ann)
    if no_audio:
        first = next(s.source for s in annotations.segments if s.session_id == no_audio[0])
        raise ManifestError(
            first.split(":")[0] if ":" in first else what,
            f"{what} names recording(s) with no audio in the dataset: {', '.join(no_audio[:5])}"
            f"{' ...' if len(no_audio) > 5 else ''} (first at {first}); check the session ids against the audio file stems",
        )
    if no_ann:
        raise ManifestError(what, f"recording(s) {', '.join(no_ann[:5])} have no segment in {what}; add them or remove the audio")


def check_durations(annotations: Annotations, durations: Mapping[str, float], tolerance_s: float = 0.05) -> None:
    """Raise when a segment ends after its recording does (audio shorter than its annotation:
    a truncated file or a wrong sample rate); a segment past the end would be scored as missed."""
    for seg in annotations.segments:
        dur = durations.get(seg.session_id)
        if dur is not None and seg.end > dur + tolerance_s:
            raise ManifestError(
                seg.source,
                f"segment of '{seg.speaker}' ends at {seg.end:.3f} s but recording '{seg.session_id}' lasts only "
                f"{dur:.3f} s; the audio is truncated or the annotation belongs to another file",
            )


def check_speakers(hypothesis: Annotations, known: Mapping[str, set[str]], what: str) -> None:
    """Raise when ``hypothesis`` uses a speaker label outside ``known[session]`` (for a per-speaker
    reference SegLST checked against the RTTM of the same set)."""
    for seg in hypothesis.segments:
        allowed = known.get(seg.session_id, set())
        if seg.speaker not in allowed:
            raise ManifestError(
                seg.source,
                f"speaker '{seg.speaker}' is unknown for session '{seg.session_id}' in {what} "
                f"(known: {', '.join(sorted(allowed)) or 'none'})",
            )


def write_rttm(segments: Iterable[Segment], path: str | Path) -> None:
    """Write segments as RTTM (3 decimals, like most tools)."""
    lines = [
        f"SPEAKER {s.session_id} 1 {s.start:.3f} {s.duration:.3f} <NA> <NA> {s.speaker} <NA> <NA>"
        for s in sorted(segments, key=lambda s: (s.session_id, s.start, s.speaker))
    ]
    Path(path).write_text("\n".join(lines) + ("\n" if lines else ""), encoding="utf-8")


def to_seglst_dicts(segments: Iterable[Segment]) -> list[dict[str, Any]]:
    """Segments as SegLST objects (the meeteval JSON)."""
    return [
        {"session_id": s.session_id, "speaker": s.speaker, "start_time": round(s.start, 3), "end_time": round(s.end, 3), "words": s.words}
        for s in sorted(segments, key=lambda s: (s.session_id, s.start, s.speaker))
    ]


def write_seglst(segments: Iterable[Segment], path: str | Path) -> None:
    Path(path).write_text(json.dumps(to_seglst_dicts(segments), indent=1), encoding="utf-8")
