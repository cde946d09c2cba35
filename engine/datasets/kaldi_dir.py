"""Kaldi data folders: ``wav.scp``, ``text``, ``utt2spk`` and, for spans of longer recordings, ``segments``.

The files are Kaldi's tables, one entry a line, the key first (``utils/validate_data_dir.sh``):

* ``wav.scp``: ``<recording-id> <path>``; without ``segments`` the recording id is the utterance id;
* ``segments``: ``<utterance-id> <recording-id> <start> <end>`` in seconds (``end`` of -1: to the end
  of the recording), read as segments exactly as NeMo offsets are;
* ``text``: ``<utterance-id> <transcript>``, the reference (an utterance without a line is that
  clip's problem row, "no reference text");
* ``utt2spk``: ``<utterance-id> <speaker-id>``; ``spk2gender`` (``<speaker-id> m|f``) and
  ``utt2lang`` become the slice labels ``gender`` and ``language``.

A ``wav.scp`` entry that is a command (``... |``) is run by Kaldi through a shell; the engine never
runs one. Two forms that only decode a file are read as that file (soundfile reads FLAC and WAV
itself): ``flac -c -d -s FILE |`` and ``sox FILE -t wav - |``. Any other command, and an archive
offset (``file.ark:123``), is refused naming the file and line, with the fix (write the audio to
files). Relative paths are taken as Kaldi takes them, from the folder the recipe runs in: the
working directory when the file is there, else the recipe folder two levels up (``s5`` of
``s5/data/test``), else the folder above the data folder, else the data folder itself.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from engine.data import Utterance
from engine.datasets.base import SNIFF_LAYOUT, Dataset, DatasetReader, NoReaderOptions, in_memory_dataset
from engine.datasets.readers import record_to_utterance
from engine.errors import ManifestError

REQUIRED = ("wav.scp", "text")
#: the decode-only commands read as the file they decode (the whole command, nothing else)
_SAFE_COMMANDS = (
    re.compile(r"^flac\s+-c\s+-d\s+-s\s+(\S+)\s*\|$"),
    re.compile(r"^sox\s+(\S+)\s+-t\s+wav\s+-\s*\|$"),
)


def _table(path: Path, min_fields: int = 2) -> dict[str, tuple[str, int]]:
    """A Kaldi table: key -> (the rest of the line, line number); a repeated key is an error naming both lines."""
    out: dict[str, tuple[str, int]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise ManifestError(path, f"not valid UTF-8 text (byte {exc.start}); Kaldi tables are UTF-8") from None
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        parts = line.strip().split(maxsplit=1)
        key, rest = parts[0], (parts[1] if len(parts) > 1 else "")
        if min_fields > 1 and not rest:
            raise ManifestError(path, f"'{key}' has no value (expected '<key> <value>')", line=lineno)
        if key in out:
            raise ManifestError(
                path, f"'{key}' appears twice (first at line {out[key][1]}); Kaldi tables have one line per key", line=lineno
            )
        out[key] = (rest, lineno)
    return out


def _audio_path(value: str, path: Path, line: int, base: Path) -> str:
    """The file a ``wav.scp`` value names, or a ManifestError for a command or an archive offset."""
    value = value.strip()
    if value.endswith("|"):
        for pattern in _SAFE_COMMANDS:
            m = pattern.match(value)
            if m and not set(m.group(1)) & set("|;&$`<>(){}*?"):
                return _resolve(shlex.split(m.group(1))[0], base)
        raise ManifestError(
            path,
            f"the entry is a shell command ({value[:80]!r}); the engine runs no commands from a dataset: write the audio to files "
            "(e.g. run the command into a .wav file) and list their paths",
            line=line,
        )
    if re.search(r"\.ark:\d+$", value):
        raise ManifestError(
            path, f"the entry is an offset into an archive ({value!r}); write the audio to files and list their paths", line=line
        )
    return _resolve(value, base)


def _resolve(value: str, base: Path) -> str:
    p = Path(value)
    if p.is_absolute():
        return str(p)
    for root in (Path.cwd(), base.parent.parent, base.parent, base):
        if (root / p).exists():
            return str((root / p).resolve())
    return str(base / p)  # missing: the clip's error row names it


def _seconds(value: str, path: Path, line: int, field: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ManifestError(path, f"{field} {value!r} is not a number of seconds", line=line, field=field) from None


class KaldiDataDirReader(DatasetReader):
    """A Kaldi data folder (``wav.scp`` and ``text``; ``segments``, ``utt2spk``, ``spk2gender``, ``utt2lang`` when present)."""

    OPTIONS = NoReaderOptions

    @staticmethod
    def sniff(path: Path) -> int:
        """A folder holding the required tables (``wav.scp`` and ``text``)."""
        return SNIFF_LAYOUT if path.is_dir() and all((path / f).is_file() for f in REQUIRED) else 0

    def open(self, path: str, shard_size: int = 64, limit: int | None = None) -> Dataset:
        d = Path(path)
        if not d.is_dir():
            raise ManifestError(d, "a Kaldi data folder is a directory holding wav.scp and text")
        for name in REQUIRED:
            if not (d / name).is_file():
                raise ManifestError(d / name, f"missing: a Kaldi data folder needs {' and '.join(REQUIRED)}")
        wav = _table(d / "wav.scp")
        text = _table(d / "text", min_fields=1)
        utt2spk = _table(d / "utt2spk") if (d / "utt2spk").is_file() else {}
        spk2gender = _table(d / "spk2gender") if (d / "spk2gender").is_file() else {}
        utt2lang = _table(d / "utt2lang") if (d / "utt2lang").is_file() else {}
        records: list[tuple[dict[str, object], str, int]] = []
        if (d / "segments").is_file():
            seg_file = d / "segments"
            for utt, (rest, line) in _table(seg_file).items():
                fields = rest.split()
                if len(fields) != 3:
                    raise ManifestError(seg_file, f"'{utt}': expected '<utterance-id> <recording-id> <start> <end>'", line=line)
                rec, start_s, end_s = fields
                if rec not in wav:
                    raise ManifestError(seg_file, f"'{utt}': recording '{rec}' is not in wav.scp", line=line, field="recording-id")
                start, end = _seconds(start_s, seg_file, line, "start"), _seconds(end_s, seg_file, line, "end")
                audio = _audio_path(wav[rec][0], d / "wav.scp", wav[rec][1], d)
                if end == -1:
                    length = self._length(audio)
                    if length is None:
                        raise ManifestError(
                            seg_file, f"'{utt}': end -1 runs to the end of {audio}, which cannot be read", line=line, field="end"
                        )
                    end = length
                if end <= start:
                    raise ManifestError(seg_file, f"'{utt}': end {end_s} is not after start {start_s}", line=line, field="end")
                records.append(({"id": utt, "audio_filepath": audio, "offset": start, "duration": end - start}, str(seg_file), line))
        else:
            for utt, (value, line) in wav.items():
                records.append(({"id": utt, "audio_filepath": _audio_path(value, d / "wav.scp", line, d)}, str(d / "wav.scp"), line))
        ids = {str(r["id"]) for r, _, _ in records}
        for utt, (_, line) in text.items():
            if utt not in ids:
                where = "segments" if (d / "segments").is_file() else "wav.scp"
                raise ManifestError(d / "text", f"utterance '{utt}' has a transcript but no audio (not in {where})", line=line)
        utts: list[Utterance] = []
        for row, file, line in records[:limit] if limit is not None else records:
            utt = str(row["id"])
            if utt in text:
                row["text"] = text[utt][0]
            if utt in utt2spk:
                row["speaker"] = utt2spk[utt][0]
                if utt2spk[utt][0] in spk2gender:
                    row["gender"] = spk2gender[utt2spk[utt][0]][0]
            if utt in utt2lang:
                row["language"] = utt2lang[utt][0]
            utts.append(record_to_utterance(row, f"{file}:{line}", line, utt))
        if not utts:
            raise ManifestError(d / "wav.scp", "the data folder has no utterances")
        return in_memory_dataset(d.name, str(d), "kaldi", utts, shard_size, d, limit=limit)

    @staticmethod
    def _length(audio: str) -> float | None:
        """A recording's length in seconds (a segment ending at -1 runs to it); None when unreadable."""
        import soundfile as sf

        try:
            info = sf.info(audio)
        except Exception:  # noqa: BLE001 - any unreadable file: the caller names it
            return None
        return float(info.frames) / float(info.samplerate)
