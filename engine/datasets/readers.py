"""The built-in dataset readers (NeMo JSONL, CSV/TSV, Parquet, Hugging Face, OASR predictions)."""

from __future__ import annotations

import csv
import json
import logging
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from engine.data import (
    RESERVED_KEYS,
    RESERVED_LABELS,
    SPEECH_FREE_LABEL,
    SPEECH_FREE_VALUE,
    Shard,
    Utterance,
    check_derivation_link,
    check_label_names,
    is_speech_free,
)
from engine.datasets.base import (
    SNIFF_CONTENT,
    SNIFF_GUESS,
    SNIFF_LAYOUT,
    SNIFF_NAME,
    SNIFF_SHARDS,
    Dataset,
    DatasetReader,
    NoReaderOptions,
    ShardIndex,
    check_limit,
    check_unique_ids,
    clip_digest,
    file_stamp,
    fingerprint_utterances,
    in_memory_dataset,
    looks_like_predictions,
)
from engine.datasets.segments import bytes_source, check_segments, read_segment, segment_stamp
from engine.errors import ConfigError, ManifestError
from engine.options import Options, option

log = logging.getLogger(__name__)

AUDIO_KEYS = ("audio_filepath", "audio_path", "path", "file", "audio")
TEXT_KEYS = ("text", "reference", "sentence", "transcript", "transcription")
ID_KEYS = ("utt_id", "id")
SPEAKER_KEYS = ("speaker", "speaker_id", "client_id", "spk")
"""Speaker columns by convention: ours and NeMo's, Common Voice's ``client_id``, Kaldi's and Lhotse's short ``spk``."""


@dataclass(frozen=True)
class ColumnOptions(Options):
    """Reader options naming a dataset's columns; a named column replaces the conventional list for its role."""

    text_column: str | None = option(None, "the reference text column (default: the first of text, reference, sentence, ...)")
    audio_column: str | None = option(None, "the audio column (default: the first of audio_filepath, audio_path, path, file, audio)")
    speaker_column: str | None = option(None, "the speaker column (default: the first of speaker, speaker_id, client_id, spk)")


@dataclass(frozen=True)
class HuggingFaceOptions(ColumnOptions):
    """The ``hf`` reader's options: the split and configuration to read, and the column names."""

    split: str = option("test", "the split to read")
    config: str | None = option(None, "the hub dataset's configuration (subset) name")


@dataclass(frozen=True)
class Columns:
    """Which record keys hold the audio, the reference and the speaker: the conventional lists, or the one
    column a reader option names (then only that column is used, and a record without it says so)."""

    audio: tuple[str, ...] = AUDIO_KEYS
    text: tuple[str, ...] = TEXT_KEYS
    speaker: tuple[str, ...] = SPEAKER_KEYS

    @classmethod
    def from_options(cls, options: ColumnOptions) -> Columns:
        return cls(
            audio=(options.audio_column,) if options.audio_column else AUDIO_KEYS,
            text=(options.text_column,) if options.text_column else TEXT_KEYS,
            speaker=(options.speaker_column,) if options.speaker_column else SPEAKER_KEYS,
        )

    def check_header(self, names: Iterable[str], where: Path | str, line: int | None = None) -> None:
        """A structural check before any row: the header has an audio column and a text column."""
        have = dict.fromkeys(names)
        if _first(have, self.audio)[0] is None:
            raise ManifestError(
                where, f"no audio column (expected {' or '.join(self.audio)}); columns: {list(have)}", line=line, field=self.audio[0]
            )
        if _first(have, self.text)[0] is None:
            raise ManifestError(
                where, f"no reference text column (expected {' or '.join(self.text)}); columns: {list(have)}", line=line, field=self.text[0]
            )


DEFAULT_COLUMNS = Columns()


def _first(row: Mapping[str, Any], keys: Iterable[str]) -> tuple[str | None, Any]:
    for k in keys:
        if k in row:
            return k, row[k]
    return None, None


def _label_value(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return str(v)


def _derivation(value: Any, source: str, index: int) -> Mapping[str, Any] | None:
    """A record's ``derivation`` (how derived audio was made): a mapping, or JSON text of one."""
    if value in (None, ""):
        return None
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    raise ManifestError(
        source.rsplit(":", 1)[0], f"derivation must be a JSON object, got {str(value)[:60]!r}", line=index, field="derivation"
    )


def record_to_utterance(row: Mapping[str, Any], source: str, index: int, default_id: str, columns: Columns = DEFAULT_COLUMNS) -> Utterance:
    """Map a flat record to an Utterance; per-record problems go to ``problem``."""
    problem: str | None = None
    _, uid = _first(row, ID_KEYS)
    utt_id = str(uid) if uid not in (None, "") else default_id
    akey, audio = _first(row, columns.audio)
    audio_path: str | None = None
    audio_bytes: bytes | None = None
    if isinstance(audio, Mapping):
        audio_bytes = audio.get("bytes")
        audio_path = audio.get("path")
    elif isinstance(audio, (bytes, bytearray)):
        audio_bytes = bytes(audio)
    elif audio not in (None, ""):
        audio_path = str(audio)
    if audio_path is None and audio_bytes is None:
        problem = "no audio: the record has no audio path (expected one of: " + ", ".join(columns.audio) + ")"
    tkey, text = _first(row, columns.text)
    reference: str | None
    if text is None or (isinstance(text, float) and math.isnan(text)):
        reference = None
        problem = problem or "no reference text (expected one of: " + ", ".join(columns.text) + ")"
    elif isinstance(text, bool) or not isinstance(text, (str, int, float)):
        reference = None  # str() of a list or a dict would be scored as if it were the transcript
        problem = problem or f"reference must be text, got {type(text).__name__} ({str(text)[:60]!r})"
    else:
        reference = str(text)
        if "\ufffd" in reference:
            problem = problem or "reference is not valid UTF-8 (replacement characters after decoding)"
        elif not reference.strip() and not is_speech_free(row):
            problem = problem or (
                f"reference is empty; a clip with no speech in it must say so with '{SPEECH_FREE_LABEL}: {SPEECH_FREE_VALUE}'"
            )
        elif reference.strip() and is_speech_free(row):
            problem = problem or f"'{SPEECH_FREE_LABEL}: {SPEECH_FREE_VALUE}' but the reference is not empty"
    skey, spk = _first(row, columns.speaker)
    duration = row.get("duration", row.get("duration_s"))
    try:
        duration_f = float(duration) if duration not in (None, "") else None
    except (TypeError, ValueError):
        raise ManifestError(source.rsplit(":", 1)[0], f"duration '{duration}' is not a number", line=index, field="duration") from None
    segment = read_segment(row, source.rsplit(":", 1)[0], index)  # offset/duration: a span of a longer file
    taken = {akey, tkey, skey}  # the columns a reader option named, or client_id/spk used as the speaker: not labels
    labels = {
        k: lv
        for k, v in row.items()
        if k not in RESERVED_KEYS and k not in AUDIO_KEYS and k not in taken and (lv := _label_value(v)) is not None
    }
    file = source.rsplit(":", 1)[0]
    clash = check_label_names(labels, file)
    if clash:
        raise ManifestError(file, clash, line=index, field=next(k for k in labels if k in RESERVED_LABELS))
    derivation = _derivation(row.get("derivation"), source, index)
    link = check_derivation_link(row.get("parent_id"), derivation, file)
    if link:
        raise ManifestError(file, link, line=index, field="parent_id")
    return Utterance(
        utt_id=utt_id,
        reference=reference,
        audio_path=audio_path,
        audio_bytes=audio_bytes,
        duration_s=duration_f if segment is None else segment[1],
        speaker=None if spk in (None, "") else str(spk),
        labels=labels,
        parent_id=row.get("parent_id") or None,
        derivation=derivation,
        source=source,
        problem=problem,
        offset_s=None if segment is None else segment[0],
    )


class NemoManifestReader(DatasetReader):
    """NeMo JSONL manifest: ``audio_filepath``, ``duration``, ``text``; other keys become labels.

    Relative audio paths are resolved against the manifest's folder.
    """

    @classmethod
    def sniff(cls, path: Path) -> int:
        """A ``.jsonl``/``.json`` file, or a folder with ``manifest.jsonl`` (``engine.datasets.base.detect_reader``)."""
        if path.is_dir():
            return SNIFF_LAYOUT if (path / "manifest.jsonl").is_file() else 0
        return SNIFF_NAME if path.suffix.lower() in (".jsonl", ".json") else 0

    OPTIONS = ColumnOptions
    options: ColumnOptions

    def __init__(self, options: ColumnOptions | None = None) -> None:
        super().__init__(options)
        self.columns = Columns.from_options(self.options)

    def read(self, path: Path) -> list[Utterance]:
        if not path.exists():
            raise ManifestError(path, "manifest not found")
        utts: list[Utterance] = []
        with open(path, "rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                text = raw.decode("utf-8", errors="replace")
                try:
                    row = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise ManifestError(path, f"invalid JSON ({exc.msg} at column {exc.colno})", line=lineno) from None
                if not isinstance(row, dict):
                    raise ManifestError(path, f"each line must be a JSON object, got {type(row).__name__}", line=lineno)
                if _first(row, self.columns.audio)[0] is None:
                    raise ManifestError(path, "missing the audio path column", line=lineno, field=self.columns.audio[0])
                utts.append(record_to_utterance(row, f"{path}:{lineno}", lineno, f"{path.stem}-{lineno:06d}", self.columns))
        if not utts:
            raise ManifestError(path, "manifest has no records")
        return utts

    def open(self, path: str, shard_size: int = 64, limit: int | None = None) -> Dataset:
        p = Path(path)
        if p.is_dir():
            p = p / "manifest.jsonl"
        utts = self.read(p)
        return in_memory_dataset(p.parent.name or p.stem, str(p), "nemo", utts, shard_size, p.parent, limit=limit)


class CsvReader(DatasetReader):
    """CSV (or TSV) with a header: an audio path column and a text column; others become labels."""

    delimiter = ","
    suffix = ".csv"

    @classmethod
    def sniff(cls, path: Path) -> int:
        """A file whose suffix is the reader's own (``.csv``; ``.tsv`` for the TSV reader)."""
        return SNIFF_NAME if not path.is_dir() and path.suffix.lower() == cls.suffix else 0

    OPTIONS = ColumnOptions
    options: ColumnOptions

    def __init__(self, options: ColumnOptions | None = None) -> None:
        super().__init__(options)
        self.columns = Columns.from_options(self.options)

    def open(self, path: str, shard_size: int = 64, limit: int | None = None) -> Dataset:
        p = Path(path)
        if not p.exists():
            raise ManifestError(p, "file not found")
        utts: list[Utterance] = []
        with open(p, encoding="utf-8", errors="replace", newline="") as fh:
            reader = csv.DictReader(fh, delimiter=self.delimiter)
            header = reader.fieldnames or []
            self.columns.check_header(header, p, line=1)
            for lineno, row in enumerate(reader, start=2):
                if None in row:
                    raise ManifestError(p, f"row has {len(header) + len(row[None])} fields, header has {len(header)}", line=lineno)
                clean = {k: (v if v != "" else None) for k, v in row.items()}
                if clean.get(_first(row, self.columns.text)[0] or "") is None:
                    clean[_first(row, self.columns.text)[0] or "text"] = ""  # present but empty: row-level problem
                utts.append(record_to_utterance(clean, f"{p}:{lineno}", lineno, f"{p.stem}-{lineno:06d}", self.columns))
        if not utts:
            raise ManifestError(p, "file has no rows")
        return in_memory_dataset(p.stem, str(p), "csv" if self.delimiter == "," else "tsv", utts, shard_size, p.parent, limit=limit)


class TsvReader(CsvReader):
    delimiter = "\t"
    suffix = ".tsv"


class ParquetReader(DatasetReader):
    """Parquet shards: our shard schema or a Hugging Face style ``audio`` column ``{bytes, path}``.

    Each file is one shard, read only when its unit runs (memory stays flat on big datasets). The
    audio of a row is stamped with its file's stamp (size, mtime, first and last 64 KiB), so
    opening never reads the audio column.
    """

    @classmethod
    def sniff(cls, path: Path) -> int:
        """Our own shard layout (a folder with ``shards/``), a folder of ``.parquet`` files, or a ``.parquet`` file."""
        if path.is_dir():
            return SNIFF_SHARDS if (path / "shards").is_dir() or any(path.glob("*.parquet")) else 0
        return SNIFF_NAME if path.suffix.lower() == ".parquet" else 0

    OPTIONS = ColumnOptions
    options: ColumnOptions

    def __init__(self, options: ColumnOptions | None = None) -> None:
        super().__init__(options)
        self.columns = Columns.from_options(self.options)

    def open(self, path: str, shard_size: int = 64, limit: int | None = None) -> Dataset:
        import pyarrow.parquet as pq

        check_limit(limit)
        p = Path(path)
        if p.is_dir():
            files = sorted((p / "shards").glob("*.parquet")) if (p / "shards").is_dir() else sorted(p.glob("*.parquet"))
            root = p
        else:
            files = [p]
            root = p.parent
        if not files:
            raise ManifestError(p, "no .parquet files found")
        meta: dict[str, Any] = {}
        corpus_json = root / "corpus.json"
        if corpus_json.exists():
            meta["corpus"] = json.loads(corpus_json.read_text())
        light: list[Utterance] = []
        stamps: list[tuple[str, str]] = []
        spans: dict[str, tuple[Path, int]] = {}
        index: dict[str, ShardIndex] = {}
        remaining = limit
        for f in files:
            try:
                schema = pq.read_schema(f)
            except Exception as exc:
                raise ManifestError(f, f"not a readable Parquet file: {exc}") from None
            names = schema.names
            self.columns.check_header(names, f)
            akey = _first(dict.fromkeys(names), self.columns.audio)[0] or "audio"
            cols = [c for c in names if c not in AUDIO_KEYS and c != akey]
            table = pq.read_table(f, columns=cols)
            rows = table.to_pylist()
            if remaining is not None:
                rows = rows[:remaining]
                remaining -= len(rows)
            stamp = file_stamp(f)
            first = len(light)
            for i, row in enumerate(rows):
                row = dict(row)
                row[akey] = "<parquet>"
                light.append(record_to_utterance(row, f"{f}:row {i}", i, f"{f.stem}-{i:06d}", self.columns))
                stamps.append(segment_stamp(stamp, light[-1]))
            if rows:
                spans[f.stem] = (f, len(rows))
                mine = light[first:]
                if any(u.segment is not None for u in mine):  # segments: their spans are checked against the embedded audio
                    cells = pq.read_table(f, columns=[akey]).column(akey).to_pylist()[: len(mine)]
                    check_segments(mine, root, str(f), {u.utt_id: bytes_source(c) for u, c in zip(mine, cells) if u.segment is not None})
                index[f.stem] = ShardIndex(tuple(u.utt_id for u in mine), tuple(clip_digest(u, st) for u, st in zip(mine, stamps[first:])))
            if remaining is not None and remaining <= 0:
                break
        check_unique_ids(light, str(p))

        def load(shard_id: str) -> Shard:
            f, n = spans[shard_id]
            table = pq.read_table(f).slice(0, n)
            out = []
            for i, row in enumerate(table.to_pylist()):
                out.append(record_to_utterance(row, f"{f}:row {i}", i, f"{f.stem}-{i:06d}", self.columns))
            return Shard(shard_id, tuple(out))

        return Dataset(
            name=(meta.get("corpus") or {}).get("name", p.stem),
            source=str(p),
            reader="parquet",
            shard_ids=list(spans),
            _loader=load,
            root=root,
            n_utts=len(light),
            fingerprint=fingerprint_utterances(light, root, stamps),
            meta=meta,
            index=index,
        )


class HuggingFaceReader(DatasetReader):
    """A local ``datasets`` directory (``save_to_disk``) or a hub id (needs the ``datasets`` extra).

    Options: ``split`` (default 'test'), ``config`` (hub config name), and the column names.
    """

    OPTIONS = HuggingFaceOptions
    options: HuggingFaceOptions

    def __init__(self, options: HuggingFaceOptions | None = None) -> None:
        super().__init__(options)
        self.columns = Columns.from_options(self.options)
        self._audio_col = "audio"

    @classmethod
    def sniff(cls, path: Path) -> int:
        """A ``save_to_disk`` folder (its marker files), or a path that does not exist and looks like a hub id (``org/name``)."""
        if path.is_dir():
            return SNIFF_LAYOUT if any((path / f).exists() for f in ("dataset_info.json", "dataset_dict.json", "state.json")) else 0
        text = str(path)
        return SNIFF_GUESS if not path.exists() and "/" in text and not text.startswith((".", "/")) else 0

    def open(self, path: str, shard_size: int = 64, limit: int | None = None) -> Dataset:
        try:
            import datasets  # type: ignore[import-not-found]
        except ImportError:
            raise ConfigError(
                f"reading '{path}' needs the Hugging Face 'datasets' package: pip install '.[hf]'. "
                "Without network access, copy the data here (datasets.load_dataset(...).save_to_disk(DIR), or Parquet/JSONL "
                "with audio) and pass --dataset DIR"
            ) from None
        p = Path(path)
        try:
            if p.exists():
                ds = datasets.load_from_disk(str(p))
                if isinstance(ds, datasets.DatasetDict):
                    if self.options.split not in ds:
                        raise ConfigError(f"{p}: split '{self.options.split}' not found (splits: {list(ds)})")
                    ds = ds[self.options.split]
            else:
                ds = datasets.load_dataset(path, self.options.config, split=self.options.split)
        except ConfigError:
            raise
        except Exception as exc:
            raise ConfigError(
                f"cannot load Hugging Face dataset '{path}' (split '{self.options.split}'): {type(exc).__name__}: {exc}. "
                "Without network access, download it elsewhere with datasets.load_dataset(...).save_to_disk(DIR) "
                "(or export Parquet/JSONL) and pass --dataset DIR"
            ) from None
        check_limit(limit)
        candidates = self.columns.audio if self.columns.audio != AUDIO_KEYS else ("audio", "audio_filepath", "path", "file")
        audio_col = next((c for c in candidates if c in ds.column_names), None)
        if audio_col is None:
            raise ConfigError(f"dataset '{path}' has no audio column (expected {' or '.join(candidates)}); columns: {ds.column_names}")
        if self.options.text_column and self.options.text_column not in ds.column_names:
            raise ConfigError(f"dataset '{path}': text_column '{self.options.text_column}' is not a column; columns: {ds.column_names}")
        self._audio_col = audio_col
        # the column chosen is the audio, whatever else the table has (Common Voice's 'path' names the file in its archive)
        self.columns = replace(self.columns, audio=(audio_col,))
        if isinstance(ds.features.get(audio_col), datasets.Audio) or audio_col == "audio":
            try:
                ds = ds.cast_column(audio_col, datasets.Audio(decode=False))
            except Exception as exc:  # older datasets versions: rows then carry decoded arrays
                log.warning("%s: could not read the audio column undecoded (%s); using decoded audio", path, exc)
        if limit:
            ds = ds.select(range(min(limit, len(ds))))
        if isinstance(ds.features.get(audio_col), datasets.Audio) or audio_col == "audio":
            return self._streamed(ds, path, shard_size, p if p.exists() else None)
        utts = [self._utterance(dict(row), path, i) for i, row in enumerate(ds)]  # paths only: no audio held
        return in_memory_dataset(str(path), str(path), "hf", utts, shard_size, p if p.exists() else None)

    def _utterance(self, row: dict[str, Any], path: str, i: int) -> Utterance:
        return record_to_utterance(row, f"{path}:row {i}", i, f"{Path(str(path)).name}-{i:06d}", self.columns)

    def _streamed(self, ds: Any, path: str, shard_size: int, root: Path | None) -> Dataset:
        """Audio stays in the dataset's memory-mapped Arrow files until its shard runs: opening
        reads every column but ``audio``, and each shard reads its own rows' bytes when loaded, so
        the driver's memory does not grow with the dataset's audio."""
        stamp = _arrow_stamp(ds)
        audio_col = self._audio_col
        light_ds = ds.remove_columns([audio_col])
        light: list[Utterance] = []
        for i, row in enumerate(light_ds):
            row = dict(row)
            row[audio_col] = "<hf>"
            light.append(self._utterance(row, path, i))
        check_unique_ids(light, str(path))
        seg_rows = [i for i, u in enumerate(light) if u.segment is not None]
        if seg_rows:  # segments: their spans are checked against the rows' audio before any model loads
            cells = ds.select(seg_rows)[audio_col]
            check_segments(
                [light[i] for i in seg_rows], root, str(path), {light[i].utt_id: bytes_source(c) for i, c in zip(seg_rows, cells)}
            )
        spans: dict[str, tuple[int, int]] = {}
        index: dict[str, ShardIndex] = {}
        for start in range(0, len(light), shard_size):
            sid = f"s{start // shard_size:05d}"
            mine = light[start : start + shard_size]
            spans[sid] = (start, len(mine))
            index[sid] = ShardIndex(tuple(u.utt_id for u in mine), tuple(clip_digest(u, segment_stamp(stamp, u)) for u in mine))

        def load(shard_id: str) -> Shard:
            start, n = spans[shard_id]
            rows = ds.select(range(start, start + n))
            return Shard(shard_id, tuple(self._utterance(dict(row), path, start + j) for j, row in enumerate(rows)))

        return Dataset(
            name=str(path),
            source=str(path),
            reader="hf",
            shard_ids=list(spans),
            _loader=load,
            root=root,
            n_utts=len(light),
            fingerprint=fingerprint_utterances(light, root, [segment_stamp(stamp, u) for u in light]),
            shard_size=shard_size,
            index=index,
        )


def _arrow_stamp(ds: Any) -> tuple[str, str]:
    """One stamp for a ``datasets`` table: the stamps of its Arrow cache files, combined."""
    import hashlib

    files = [Path(f["filename"]) for f in getattr(ds, "cache_files", []) or [] if f.get("filename")]
    if not files:
        return (f"in-memory:{getattr(ds, '_fingerprint', '')}", "")
    parts = [file_stamp(f) for f in files]
    content = hashlib.sha256("|".join(c for c, _ in parts).encode()).hexdigest()[:32]
    return (content, "|".join(m for _, m in parts))


class OasrPredictionsReader(DatasetReader):
    """Open ASR Leaderboard prediction JSONL (``audio_filepath``, ``text``, ``pred_text``), no audio.

    A directory holds one file per model (model name = file stem); the references come from the
    first file and must agree across files.
    """

    OPTIONS = NoReaderOptions

    @classmethod
    def sniff(cls, path: Path) -> int:
        """A JSONL file (or a folder's first one, by name) whose first line has ``pred_text``."""
        if path.is_dir():
            files = sorted(path.glob("*.jsonl"))
            return SNIFF_CONTENT if files and looks_like_predictions(files[0]) else 0
        return SNIFF_CONTENT if path.suffix.lower() in (".jsonl", ".json") and path.is_file() and looks_like_predictions(path) else 0

    def read_file(self, path: Path) -> list[Utterance]:
        utts = []
        with open(path, "rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                try:
                    row = json.loads(raw.decode("utf-8", errors="replace"))
                except json.JSONDecodeError as exc:
                    raise ManifestError(path, f"invalid JSON ({exc.msg})", line=lineno) from None
                if not isinstance(row, dict):
                    raise ManifestError(path, f"expected a JSON object per line, got {type(row).__name__} ({str(row)[:40]})", line=lineno)
                for key in ("audio_filepath", "text", "pred_text"):
                    if key not in row:
                        raise ManifestError(path, f"missing '{key}'", line=lineno, field=key)
                    if not isinstance(row[key], str):
                        raise ManifestError(path, f"'{key}' must be a string, got {type(row[key]).__name__}", line=lineno, field=key)
                duration = row.get("duration")
                if duration is not None and (isinstance(duration, bool) or not isinstance(duration, (int, float))):
                    raise ManifestError(path, f"'duration' must be a number of seconds, got {duration!r}", line=lineno, field="duration")
                labels = {
                    k: lv
                    for k, v in row.items()
                    if k not in ("audio_filepath", "text", "pred_text", "duration", "time") and (lv := _label_value(v)) is not None
                }
                clash = check_label_names(labels, path.name)
                if clash:
                    raise ManifestError(path, clash, line=lineno, field=next(k for k in labels if k in RESERVED_LABELS))
                utts.append(
                    Utterance(
                        utt_id=str(row["audio_filepath"]),
                        reference=str(row["text"]),
                        duration_s=float(row["duration"]) if row.get("duration") is not None else None,
                        hyp_raw=str(row["pred_text"]),
                        labels=labels,
                        source=f"{path}:{lineno}",
                    )
                )
        check_unique_ids(utts, str(path))
        return utts

    def open(self, path: str, shard_size: int = 64, limit: int | None = None) -> Dataset:
        p = Path(path)
        files = sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
        if not files:
            raise ManifestError(p, "no .jsonl prediction files found")
        preds: dict[str, dict[str, str]] = {}
        base: list[Utterance] | None = None
        for f in files:
            utts = self.read_file(f)
            preds[f.stem] = {u.utt_id: u.hyp_raw or "" for u in utts}
            if base is None:
                base = [Utterance(u.utt_id, u.reference, duration_s=u.duration_s, labels=u.labels, source=u.source) for u in utts]
        assert base is not None
        ds = in_memory_dataset(
            p.stem, str(p), "oasr-predictions", base, shard_size, p if p.is_dir() else p.parent, has_audio=False, limit=limit
        )
        ds.predictions = preds
        return ds
