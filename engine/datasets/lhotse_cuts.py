"""Lhotse cut manifests: a ``CutSet`` saved as JSONL (``cuts.jsonl`` or ``cuts.jsonl.gz``), as ``CutSet.to_file`` writes it.

Each line is one ``MonoCut`` (``"type": "MonoCut"``): its ``id``, ``start`` and ``duration`` (a span
of its recording, in seconds), the ``recording`` it cuts (``id``, ``sources`` of type ``file``,
``sampling_rate``, ``num_samples``, ``duration``, ``channel_ids``) and its ``supervisions`` (``text``,
``speaker``, ``language``, ``gender``, ``custom``, each with its own start relative to the cut).
A cut becomes one clip: the span of its recording (read as a segment, exactly as NeMo offsets
are), the texts of its supervisions joined in time order as the reference, the supervisions'
speaker when they agree, and ``language``, ``gender`` and the ``custom`` fields of cut and
supervisions as slice labels.

What the engine would have to guess at is refused with the file, line and field: mixed or padded
cuts, recordings of several sources or of audio not in a file (``url``, ``command``, ``memory``,
``shar``), and a cut that picks one channel of a multi-channel recording (the engine reads a
file down-mixed to mono). Relative source paths resolve against the manifest's folder.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from engine.data import Utterance
from engine.datasets.base import SNIFF_CONTENT, Dataset, DatasetReader, in_memory_dataset
from engine.datasets.readers import record_to_utterance
from engine.errors import ManifestError
from engine.options import Options, option

CUT_TYPES = ("MonoCut",)
"""Cut types read as clips; Lhotse's MixedCut and PaddingCut are synthetic mixtures, not recorded clips."""
MANIFEST_SUFFIXES = (".jsonl", ".jsonl.gz")


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                if raw.strip():
                    yield lineno, raw
    except (OSError, EOFError) as exc:  # gzip: a truncated or not-gzip file
        raise ManifestError(path, f"cannot be read ({type(exc).__name__}: {exc})") from None


def looks_like_cuts(path: Path) -> bool:
    """Whether the first record of a JSONL(.gz) file is a Lhotse cut (what ``detect_reader`` asks)."""
    try:
        for _, raw in _lines(path):
            row = json.loads(raw)
            return isinstance(row, dict) and (
                row.get("type") in (*CUT_TYPES, "MixedCut", "PaddingCut") or ("recording" in row and "supervisions" in row)
            )
    except (ManifestError, ValueError):
        return False
    return False


def cut_manifests(folder: Path) -> list[Path]:
    """The cut manifests of a folder (Lhotse recipes name them ``*cuts*.jsonl.gz``)."""
    return sorted(p for p in folder.iterdir() if "cuts" in p.name and p.name.endswith(MANIFEST_SUFFIXES))


def _file_source(rec: Mapping[str, Any], path: Path, line: int) -> str:
    sources = rec.get("sources")
    if not isinstance(sources, list) or len(sources) != 1 or not isinstance(sources[0], Mapping):
        n = len(sources) if isinstance(sources, list) else 0
        raise ManifestError(
            path,
            f"recording '{rec.get('id')}' has {n} audio sources; the engine reads a recording held in one file",
            line=line,
            field="recording.sources",
        )
    src = sources[0]
    if src.get("type") != "file" or not isinstance(src.get("source"), str):
        raise ManifestError(
            path,
            f"recording '{rec.get('id')}' has a source of type {src.get('type')!r}; only 'file' sources are read (write the audio to "
            "files, e.g. with CutSet.save_audios, and save the manifest again)",
            line=line,
            field="recording.sources",
        )
    return str(src["source"])


def _channel(cut: Mapping[str, Any], rec: Mapping[str, Any], path: Path, line: int) -> None:
    channels = rec.get("channel_ids") or [0]
    if isinstance(channels, list) and len(channels) > 1:
        picked = cut.get("channel")
        if not (isinstance(picked, list) and sorted(picked) == sorted(channels)):
            raise ManifestError(
                path,
                f"cut '{cut.get('id')}' takes channel {picked!r} of a {len(channels)}-channel recording; the engine reads files down-mixed "
                "to mono, so it would score other channels too: write that channel to a file of its own",
                line=line,
                field="channel",
            )


def _label(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def cut_record(cut: Mapping[str, Any], path: Path, line: int) -> dict[str, Any]:
    """A cut as the flat record ``record_to_utterance`` reads (id, audio, span, reference, speaker, labels)."""
    kind = cut.get("type", "MonoCut")
    if kind not in CUT_TYPES:
        raise ManifestError(
            path, f"cut '{cut.get('id')}' is a {kind}; only MonoCut (a span of one recording) is read as a clip", line=line, field="type"
        )
    rec = cut.get("recording")
    if not isinstance(rec, Mapping):
        raise ManifestError(
            path, f"cut '{cut.get('id')}' has no recording (features-only cuts hold no audio)", line=line, field="recording"
        )
    audio = _file_source(rec, path, line)
    _channel(cut, rec, path, line)
    for key in ("id", "start", "duration"):
        if key not in cut:
            raise ManifestError(path, f"cut has no '{key}'", line=line, field=key)
    sups = cut.get("supervisions") or []
    if not isinstance(sups, list) or not all(isinstance(s, Mapping) for s in sups):
        raise ManifestError(path, f"cut '{cut['id']}': supervisions must be a list of objects", line=line, field="supervisions")
    sups = sorted(sups, key=lambda s: float(s.get("start") or 0.0))
    texts = [s.get("text") for s in sups]
    row: dict[str, Any] = {"id": str(cut["id"]), "audio_filepath": audio}
    if sups and all(isinstance(t, str) for t in texts):
        row["text"] = " ".join(str(t).strip() for t in texts if str(t).strip())
    speakers = {s.get("speaker") for s in sups if s.get("speaker") is not None}
    if len(speakers) == 1:
        row["speaker"] = str(next(iter(speakers)))
    elif len(speakers) > 1:
        row["speakers"] = ",".join(sorted(str(s) for s in speakers))  # several talkers: a label, no single speaker
    for key in ("language", "gender"):
        values = {s.get(key) for s in sups if s.get(key) is not None}
        if len(values) == 1:
            row[key] = _label(next(iter(values)))
    for custom in [cut.get("custom") or {}, *[s.get("custom") or {} for s in sups]]:
        if isinstance(custom, Mapping):
            for k, v in custom.items():
                if (lv := _label(v)) is not None:
                    row.setdefault(str(k), lv)
    start, duration = float(cut["start"]), float(cut["duration"])
    whole = rec.get("duration")
    if start > 0 or (whole is not None and abs(float(whole) - duration) > 1e-3):
        row["offset"] = start  # a span of its recording: read as a segment
    row["duration"] = duration
    return row


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for lineno, raw in _lines(path):
        try:
            row = json.loads(raw)
        except ValueError as exc:
            raise ManifestError(path, f"invalid JSON ({exc})", line=lineno) from None
        if not isinstance(row, dict):
            raise ManifestError(path, f"each line must be a JSON object, got {type(row).__name__}", line=lineno)
        yield lineno, row


def manifest_pairs(folder: Path, split: str | None = None) -> list[tuple[Path, Path]]:
    """(recordings, supervisions) manifests of a folder as ``lhotse prepare`` writes them
    (``<corpus>_recordings_<part>.jsonl.gz`` beside ``<corpus>_supervisions_<part>.jsonl.gz``); ``split``: that part only."""
    pairs = []
    for sup in sorted(folder.iterdir()):
        if "_supervisions" not in sup.name or not sup.name.endswith(MANIFEST_SUFFIXES):
            continue
        if split is not None and not sup.name.split(".")[0].endswith(f"_{split}"):
            continue
        rec = sup.with_name(sup.name.replace("_supervisions", "_recordings", 1))
        if rec.is_file():
            pairs.append((rec, sup))
    return pairs


def _wanted(files: list[Path], split: str | None) -> list[Path]:
    return [f for f in files if split is None or f.name.split(".")[0].endswith(f"_{split}")]


@dataclass(frozen=True)
class LhotseOptions(Options):
    """The ``lhotse`` reader's options."""

    split: str | None = option(None, "in a folder: only the manifests of this part (<corpus>_cuts_<split>.jsonl.gz, ...)")


class LhotseCutsReader(DatasetReader):
    """A Lhotse ``CutSet`` JSONL(.gz) manifest, a folder of them (``*cuts*.jsonl[.gz]``), or a folder of
    recording and supervision manifests as ``lhotse prepare`` writes them (one clip per supervision)."""

    OPTIONS = LhotseOptions
    options: LhotseOptions

    @staticmethod
    def sniff(path: Path) -> int:
        """A cut manifest (its first record says so: this outranks a ``.jsonl`` suffix), or a folder holding cut
        manifests or recording + supervision manifests."""
        if path.is_dir():
            found = any(looks_like_cuts(p) for p in cut_manifests(path)[:1]) or bool(manifest_pairs(path))
        else:
            found = path.name.endswith(MANIFEST_SUFFIXES) and path.is_file() and looks_like_cuts(path)
        return SNIFF_CONTENT if found else 0

    def _cuts(self, p: Path) -> Iterator[tuple[Path, int, dict[str, Any]]]:
        """(file, line, cut) for every cut: read from cut manifests, or made from supervisions (one cut each)."""
        files = _wanted(cut_manifests(p), self.options.split) if p.is_dir() else [p]
        if files:
            for f in files:
                if not f.is_file():
                    raise ManifestError(f, "manifest not found")
                for lineno, cut in _records(f):
                    yield f, lineno, cut
            return
        pairs = manifest_pairs(p, self.options.split) if p.is_dir() else []
        if not pairs:
            raise ManifestError(
                p,
                "no Lhotse manifest found (a cuts.jsonl[.gz] file, a folder of *cuts*.jsonl[.gz], or *_recordings_*/*_supervisions_* "
                f"manifests{'' if self.options.split is None else f' of split {self.options.split!r}'})",
            )
        for rec_file, sup_file in pairs:
            recordings = {str(r.get("id")): r for _, r in _records(rec_file)}
            for lineno, sup in _records(sup_file):
                rid = str(sup.get("recording_id"))
                if rid not in recordings:
                    raise ManifestError(sup_file, f"recording '{rid}' is not in {rec_file.name}", line=lineno, field="recording_id")
                for key in ("id", "start", "duration"):
                    if key not in sup:
                        raise ManifestError(sup_file, f"supervision has no '{key}'", line=lineno, field=key)
                cut = {
                    "id": sup["id"],
                    "start": sup["start"],
                    "duration": sup["duration"],
                    "channel": sup.get("channel", 0),
                    "supervisions": [{**sup, "start": 0.0}],
                    "recording": recordings[rid],
                    "type": "MonoCut",
                }
                yield sup_file, lineno, cut

    def open(self, path: str, shard_size: int = 64, limit: int | None = None) -> Dataset:
        p = Path(path)
        if not p.exists():
            raise ManifestError(p, "not found")
        utts: list[Utterance] = []
        for f, lineno, cut in self._cuts(p):
            if limit is not None and len(utts) >= limit:
                break
            utts.append(record_to_utterance(cut_record(cut, f, lineno), f"{f}:{lineno}", lineno, f"{f.name}-{lineno:06d}"))
        if not utts:
            raise ManifestError(p, "the manifest has no cuts")
        root = p if p.is_dir() else p.parent
        name = root.name if p.is_dir() else p.name.split(".")[0]
        return in_memory_dataset(name, str(p), "lhotse", utts, shard_size, root, limit=limit)
