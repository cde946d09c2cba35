"""The Dataset abstraction: a named, fingerprinted list of shards of utterances.

Readers validate the whole manifest before any model loads: structural problems (bad JSON,
missing column, duplicate ids) raise ``ManifestError`` naming file, line and field; problems of
one clip (missing audio, no reference) are kept on the record and become that row's error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Sequence

from engine.data import RESERVED_LABELS, Shard, Utterance, check_derivation_link, check_label_names
from engine.datasets.segments import check_segments, segment_stamp
from engine.errors import ConfigError, ManifestError
from engine.options import Field, Options

log = logging.getLogger(__name__)

EDGE_BYTES = 64 * 1024  # how much of each end of an audio file the cheap stamp hashes
_STAMP_THREADS = 8  # stat + two small reads per clip is I/O bound: overlap them


@dataclass(frozen=True)
class ShardIndex:
    """What one shard holds, in shard order: its utt_ids and a content digest per clip.

    Markers record the digests of these tuples, so resume can tell whether a stored part holds
    exactly the utterances (ids, references, labels, audio) that the current plan puts in the unit.
    """

    utt_ids: tuple[str, ...]
    clips: tuple[str, ...]


@dataclass
class Dataset:
    """Shards of utterances plus where they came from.

    ``shard_ids`` are stable; ``load_shard`` may read lazily (Parquet shards are read on demand,
    so memory does not grow with the dataset). ``fingerprint`` identifies the content (see
    ``fingerprint_utterances``); ``index`` holds each shard's utt_ids and clip digests, which the
    runners' plan and the store's markers use to check what a unit holds (a few dozen bytes per
    utterance); ``shard_size`` is the layout's, for messages.
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
    shard_size: int | None = None
    index: dict[str, ShardIndex] = field(default_factory=dict, repr=False)

    def load_shard(self, shard_id: str) -> Shard:
        return self._loader(shard_id)

    def shard_index(self, shard_id: str) -> ShardIndex:
        """Ids and clip digests of one shard; readers fill ``index`` at open, else the shard is read once."""
        got = self.index.get(shard_id)
        if got is None:
            utts = self.load_shard(shard_id).utterances
            stamps = audio_stamps(utts, self.root) if self.has_audio else [_NO_AUDIO] * len(utts)
            got = ShardIndex(tuple(u.utt_id for u in utts), tuple(clip_digest(u, st) for u, st in zip(utts, stamps)))
            self.index[shard_id] = got
        return got

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


def check_reserved_columns(utts: Sequence[Utterance], source: str) -> None:
    """Columns the engine writes (``engine.data.RESERVED_LABELS``, ``parent_id`` without a derivation
    record) are refused when a dataset already has them: stop before any model loads or anything is written."""
    for u in utts:
        problem = check_label_names(u.labels, source)
        field_name = next((k for k in u.labels if k in RESERVED_LABELS), None)
        if problem is None:
            problem, field_name = check_derivation_link(u.parent_id, u.derivation, source), "parent_id"
        if problem is not None:
            where = u.source or source
            path, _, line = where.rpartition(":")
            raise ManifestError(
                path if line.isdigit() else where,
                f"utterance '{u.utt_id}': {problem}",
                line=int(line) if line.isdigit() else None,
                field=field_name,
            )


def check_limit(limit: Any) -> None:
    """``limit`` keeps the first N utterances: N must be a positive integer (a slice with -1 would drop the last clip)."""
    if limit is None:
        return
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigError(f"limit must be >= 1 or absent (use every utterance), got {limit!r}")


# (content, mtime) of a clip without audio: predictions-only datasets, records with no audio path
_NO_AUDIO: tuple[str, str] = ("none", "")


def audio_path_of(utt: Utterance, root: Path | None) -> Path | None:
    """Where the decoder will read a clip's audio from (relative paths against the dataset root)."""
    if not utt.audio_path:
        return None
    path = Path(utt.audio_path)
    return root / path if not path.is_absolute() and root is not None else path


def file_stamp(path: Path, full: bool = False) -> tuple[str, str]:
    """``(content, mtime)`` of one file: size plus SHA-256 of its first and last 64 KiB (all of it when ``full``).

    Reading 128 KiB per clip keeps a 100k-clip dataset's stamp to seconds; ``full`` reads every byte
    for an exact check on request. Problems (missing file, a directory) are stamped, not raised: the
    decoder reports them in that clip's row.
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        return (f"unreadable:{type(exc).__name__}", "")
    if not os.path.isfile(path):
        return ("not-a-file", str(st.st_mtime_ns))
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            if full or st.st_size <= 2 * EDGE_BYTES:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            else:
                h.update(fh.read(EDGE_BYTES))
                fh.seek(st.st_size - EDGE_BYTES)
                h.update(fh.read(EDGE_BYTES))
    except OSError as exc:
        return (f"unreadable:{type(exc).__name__}", str(st.st_mtime_ns))
    kind = "full" if full else "edges"
    return (f"{st.st_size}:{kind}:{h.hexdigest()[:20]}", str(st.st_mtime_ns))


def audio_stamp(utt: Utterance, root: Path | None, full: bool = False) -> tuple[str, str]:
    """``(content, mtime)`` stamp of one clip: its file's (see ``file_stamp``) or a hash of its in-memory bytes,
    with the span of a segment (``engine.datasets.segments.segment_stamp``)."""
    if utt.audio_bytes is not None:
        return segment_stamp((f"bytes:{len(utt.audio_bytes)}:{hashlib.sha256(utt.audio_bytes).hexdigest()[:20]}", ""), utt)
    path = audio_path_of(utt, root)
    return _NO_AUDIO if path is None else segment_stamp(file_stamp(path, full), utt)


def audio_stamps(utts: Sequence[Utterance], root: Path | None, full: bool = False) -> list[tuple[str, str]]:
    """``audio_stamp`` of every clip, in order; each file is read once, and reads overlap on a few threads."""
    paths = {p for u in utts if u.audio_bytes is None and (p := audio_path_of(u, root)) is not None}
    if len(paths) < 32:
        by_path = {p: file_stamp(p, full) for p in paths}
    else:
        with ThreadPoolExecutor(max_workers=_STAMP_THREADS, thread_name_prefix="audit-stamp") as pool:
            ordered = sorted(paths)
            by_path = dict(zip(ordered, pool.map(lambda p: file_stamp(p, full), ordered)))
    out: list[tuple[str, str]] = []
    for u in utts:
        if u.audio_bytes is not None:
            out.append(audio_stamp(u, root, full))
        else:
            path = audio_path_of(u, root)
            out.append(_NO_AUDIO if path is None else segment_stamp(by_path[path], u))
    return out


def clip_digest(u: Utterance, stamp: tuple[str, str]) -> str:
    """Digest of everything a result row takes from its utterance: id, reference, labels, audio stamp (with mtime).

    A marker keeps these per clip; a clip whose digest changed since its unit was written (audio
    replaced or touched, reference or labels edited) makes that unit stale, so it is redone.
    """
    record = [
        u.utt_id,
        u.reference,
        stamp[0],
        stamp[1],
        u.speaker,
        u.parent_id,
        sorted((str(k), str(v)) for k, v in u.labels.items()),
        u.duration_s,
        u.problem,
        u.hyp_raw,
    ]
    return hashlib.sha256(json.dumps(record, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def fingerprint_utterances(
    utts: Sequence[Utterance],
    root: Path | None = None,
    stamps: Sequence[tuple[str, str]] | None = None,
    full: bool = False,
) -> str:
    """Stable content id of a dataset, for run-directory and merge checks.

    Covers: the set of utt_ids, each one's raw reference and each clip's audio content (file size
    plus SHA-256 of its first and last 64 KiB, or of every byte with ``full=True``; SHA-256 of the
    bytes for in-memory audio; for Parquet shards, the shard file's stamp). Ids are sorted, so
    line order and sharding do not change it: which unit holds which utterance is checked by the
    markers instead (ids and per-clip digests). Not covered: labels and file modification times,
    so that copies of one dataset on two machines have one fingerprint and their runs merge; both
    are in the per-clip digests that markers record, so a clip touched or edited between a crash
    and a resume gets its unit redone.
    """
    if stamps is None:
        stamps = audio_stamps(utts, root, full)
    h = hashlib.sha256()
    for u, st in sorted(zip(utts, stamps), key=lambda p: p[0].utt_id):
        h.update(u.utt_id.encode("utf-8", "replace"))
        h.update(b"\x00")
        h.update((u.reference or "").encode("utf-8", "replace"))
        h.update(b"\x01")
        h.update(st[0].encode("ascii", "replace"))
        h.update(b"\x02")
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
    """Chunk an in-memory list of utterances into shards of ``shard_size`` (in list order)."""
    if shard_size < 1:
        raise ValueError("shard_size must be >= 1")
    check_limit(limit)
    utts = list(utts)[:limit] if limit is not None else list(utts)
    check_unique_ids(utts, source)
    check_reserved_columns(utts, source)
    if has_audio:
        check_segments(utts, root, source)  # a span outside its file: refused before any model loads
    stamps = audio_stamps(utts, root) if has_audio else [_NO_AUDIO] * len(utts)
    shards: dict[str, Shard] = {}
    index: dict[str, ShardIndex] = {}
    for i in range(0, len(utts), shard_size):
        sid = f"s{i // shard_size:05d}"
        chunk = utts[i : i + shard_size]
        shards[sid] = Shard(sid, tuple(chunk))
        index[sid] = ShardIndex(
            tuple(u.utt_id for u in chunk), tuple(clip_digest(u, st) for u, st in zip(chunk, stamps[i : i + shard_size]))
        )
    return Dataset(
        name=name,
        source=source,
        reader=reader,
        shard_ids=list(shards),
        _loader=shards.__getitem__,
        root=root,
        has_audio=has_audio,
        n_utts=len(utts),
        fingerprint=fingerprint_utterances(utts, root, stamps),
        meta=dict(meta or {}),
        shard_size=shard_size,
        index=index,
    )


SNIFF_SHARDS, SNIFF_CONTENT, SNIFF_LAYOUT, SNIFF_NAME, SNIFF_GUESS = 5, 4, 3, 2, 1
"""How sure a reader's ``sniff`` is: a folder of parquet shards (whatever else lies beside them), the
file's content says so, a folder's marker files, the file name's suffix, a guess from the path's
shape (a hub id); 0: not this reader's format."""


def detect_reader(path: str | Path) -> str:
    """Pick a reader by asking every registered reader's ``sniff(path)`` how sure it is that the path is
    its format (``SNIFF_*``); the surest wins, and a tie or no taker is an error asking for ``--reader``.
    An explicit ``reader:`` always wins. A plug-in reader takes part by defining ``sniff`` (a classmethod)."""
    from engine.datasets import DATASET_READERS

    p = Path(path)
    scores: dict[str, int] = {}
    for name in DATASET_READERS.names():
        sniff = getattr(DATASET_READERS.get(name), "sniff", None)
        score = int(sniff(p)) if callable(sniff) else 0
        if score > 0:
            scores[name] = score
    what = "the dataset format of this directory" if p.is_dir() else "the dataset format from the file name"
    if not scores:
        raise ManifestError(p, f"cannot tell {what}; pass --reader ({', '.join(DATASET_READERS.names())})")
    best = max(scores.values())
    top = [n for n, s in scores.items() if s == best]
    if len(top) > 1:
        raise ManifestError(p, f"cannot tell {what}: readers {', '.join(top)} all recognize it; pass --reader")
    return top[0]


def looks_like_predictions(path: Path) -> bool:
    """Whether the first line of a JSONL file is an Open ASR Leaderboard prediction (has ``pred_text``)."""
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
    """Open a dataset with the named reader (or the detected one).

    A reader that declares its options (``OPTIONS``, a frozen :class:`engine.options.Options` record)
    gets them checked first: an unknown key is an error naming it, with close matches, before anything is read."""
    from engine.datasets import DATASET_READERS

    check_limit(limit)
    name = detect_reader(path) if reader == "auto" else reader
    cls = DATASET_READERS.get(name)
    checked = reader_options(cls, name, options)
    made = cls(checked) if isinstance(checked, Options) else cls(**checked)
    return made.open(str(path), shard_size=shard_size, limit=limit)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class NoReaderOptions(Options):
    """A reader without options: its layout names every field."""


class DatasetReader:
    """Base of the built-in readers: ``OPTIONS`` declares their options once, as a frozen record, and
    ``self.options`` holds the checked record (``open_dataset`` parses the mapping given into it).

    A reader from another package need not derive from it: one that declares no ``OPTIONS`` is built
    with its options as keyword arguments, unchecked (its own)."""

    OPTIONS: ClassVar[type[Options]] = NoReaderOptions

    def __init__(self, options: Options | None = None) -> None:
        self.options = options if options is not None else self.OPTIONS()


def declared_reader_options(cls: Any, name: str) -> type[Options] | None:
    """The options record the reader ``cls`` declares (None: a plug-in reader that declares none)."""
    record = getattr(cls, "OPTIONS", None)
    if record is None:
        return None
    if not (isinstance(record, type) and issubclass(record, Options)):
        raise ConfigError(
            f"dataset reader '{name}' declares OPTIONS as a {type(record).__name__}, not an options record: "
            "declare a frozen dataclass deriving from engine.options.Options (fields made with engine.options.option)"
        )
    return record


def reader_option_fields(cls: Any, name: str) -> dict[str, Field]:
    """The options the reader declares, by key (none for a plug-in reader that declares no record)."""
    record = declared_reader_options(cls, name)
    return {} if record is None else record.declared()


def reader_options(cls: Any, name: str, options: Mapping[str, Any]) -> Options | dict[str, Any]:
    """``options`` parsed into the reader's declared record (as given when it declares none: a plug-in's own)."""
    record = declared_reader_options(cls, name)
    if record is None:
        return dict(options)
    if not record.declared() and options:
        raise ConfigError(f"dataset reader '{name}' takes no options (got {', '.join(sorted(options))}): its layout names every field")
    return record.parse(dict(options), f"dataset reader '{name}' options")
