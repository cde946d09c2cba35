"""Audio decoding: soundfile for the container, soxr for resampling, mono down-mix.

Every problem with one clip becomes an ``AudioError`` with a message that names the clip and
the fix; the caller records it in that clip's result row and the run goes on.
"""

from __future__ import annotations

import io
import logging
import math
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from engine.data import DEFAULT_MAX_DURATION_S, SAMPLE_RATE, DecodedAudio, Utterance, is_speech_free
from engine.errors import AudioError, SegmentError

log = logging.getLogger(__name__)

SILENCE_PEAK = 1e-4  # peak amplitude below which a clip counts as silent (-80 dBFS)
UNKNOWN_LENGTH_FRAMES = 1 << 62  # libsndfile reports SF_COUNT_MAX frames when the header leaves the length open
#: Header limits checked before any sample is decoded: a few hundred KB of FLAC can declare
#: minutes of 8-channel audio at 655 kHz, which would take gigabytes to decode at once.
MAX_CHANNELS = 32
MAX_SOURCE_RATE = 384_000
#: Clips with more source samples (frames x channels) than this are decoded block by block:
#: down-mixed and resampled per block, so memory stays near the 16 kHz mono result.
STREAM_SAMPLES = 1 << 22
_BLOCK_FRAMES = 1 << 16
#: How far past the end of its audio a segment may end and still be read (to the end): manifests
#: round durations (to 0.01 s, say), so a last segment's end can pass the file's by a few ms.
SEGMENT_END_TOLERANCE_S = 0.01


def _open_source(utt: Utterance, root: Path | None, allow_outside_root: bool) -> Path | io.BytesIO:
    if utt.audio_bytes is not None:
        if len(utt.audio_bytes) == 0:
            raise AudioError("audio bytes are empty (0-byte clip)")
        return io.BytesIO(utt.audio_bytes)
    if not utt.audio_path:
        raise AudioError("no audio: the record has neither an audio path nor audio bytes")
    path = Path(utt.audio_path)
    if not path.is_absolute() and root is not None:
        path = root / path
    if root is not None and not allow_outside_root:
        try:
            path.resolve().relative_to(root.resolve())
        except ValueError:
            raise AudioError(
                f"audio path '{utt.audio_path}' lies outside the dataset root '{root}' "
                "(the recipe forbids it: set dataset.allow_outside_root: true to permit)"
            ) from None
    if not path.exists():
        raise AudioError(f"audio file not found: '{path}'")
    if path.is_dir():
        raise AudioError(f"audio path is a directory, not a file: '{path}'")
    if not path.is_file():
        raise AudioError(f"audio path is not a regular file (a FIFO, device or socket): '{path}'")
    if os.path.getsize(path) == 0:
        raise AudioError(f"audio file is empty (0 bytes): '{path}'")
    return path


_CHUNK_ID = re.compile(rb"[A-Za-z0-9 _-]{4}")
_MAX_CHUNKS = 256


def _check_wav_truncation(src: Path | io.BytesIO) -> None:
    """Refuse a WAV whose data chunk size disagrees with the file: libsndfile trusts the header.

    Cut short (the header declares more audio than the file holds): the file is truncated.
    Audio beyond the declared data chunk (the header declares, say, a quarter of what follows,
    as a writer that never updated the size leaves it): libsndfile would read the declared part
    only and the clip would be scored on a fraction of its audio with no error. The bytes after
    the data chunk must be RIFF chunks (LIST, id3, ...) or zero padding; anything else makes this
    clip's error row, which names both sizes and the fix. Nothing is read past the header otherwise.
    """
    if isinstance(src, io.BytesIO):
        data = src.getvalue()

        def read_at(pos: int, n: int) -> bytes:
            return data[pos : pos + n]

        _check_riff(read_at, len(data))
        return
    size = os.path.getsize(src)
    with open(src, "rb") as fh:

        def read_file_at(pos: int, n: int) -> bytes:
            fh.seek(pos)
            return fh.read(n)

        _check_riff(read_file_at, size)


def _check_riff(read_at: Callable[[int, int], bytes], size: int) -> None:
    head = read_at(0, 12)
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return
    pos = 12
    for _ in range(_MAX_CHUNKS):
        hdr = read_at(pos, 8)
        if len(hdr) < 8:
            return
        cid, clen = hdr[:4], struct.unpack("<I", hdr[4:8])[0]
        if cid == b"data":
            available = size - (pos + 8)
            if clen == 0xFFFFFFFF:  # streaming writers: length left open
                return
            if clen > available:
                raise AudioError(f"WAV file is truncated: header declares {clen} bytes of audio, the file holds {available}")
            _check_after_data(read_at, size, pos + 8 + clen + (clen & 1), clen, available)
            return
        pos += 8 + clen + (clen & 1)


def _check_after_data(read_at: Callable[[int, int], bytes], size: int, pos: int, clen: int, available: int) -> None:
    """Bytes after the data chunk must be well-formed chunks or zero padding (see ``_check_wav_truncation``)."""
    for _ in range(_MAX_CHUNKS):
        rest = size - pos
        if rest <= 0:
            return
        hdr = read_at(pos, 8)
        if len(hdr) == 8 and _CHUNK_ID.fullmatch(hdr[:4]):
            n = struct.unpack("<I", hdr[4:8])[0]
            if pos + 8 + n <= size + 1:  # a chunk (a missing final pad byte is tolerated)
                pos += 8 + n + (n & 1)
                continue
        tail = read_at(pos, min(rest, 1 << 16))
        if rest <= 1 << 16 and not tail.strip(b"\x00"):
            return  # zero padding
        raise AudioError(
            f"WAV header is wrong: its data chunk declares {clen} bytes of audio but {available - clen} more bytes follow "
            f"that are not RIFF chunks (the file holds {available} bytes after the data chunk header); the clip was not read, "
            "since libsndfile would score only the declared part. Rewrite the header from the real length, "
            "e.g. `ffmpeg -ignore_length 1 -i in.wav out.wav` or `sox --ignore-length in.wav out.wav`"
        )


@dataclass(frozen=True)
class AudioHeader:
    """What a clip's header says, after the one set of checks every section applies (``read_header``)."""

    frames: int
    samplerate: int
    channels: int

    @property
    def duration_s(self) -> float:
        return self.frames / self.samplerate


def read_header(src: Path | io.BytesIO) -> AudioHeader:
    """The header of one audio source, refused by the rules every section shares.

    One rule for what audio is acceptable, used by the clip decoder (every runner and section)
    and by the conversation section's reader and workers: a WAV whose data chunk disagrees with
    the file, an unreadable container, a length the header leaves open, zero samples, more than
    ``MAX_CHANNELS`` channels or a rate above ``MAX_SOURCE_RATE`` each raise ``AudioError`` naming
    the fix. Nothing past the header is read.
    """
    import soundfile as sf

    _check_wav_truncation(src)
    try:
        info = sf.info(src)  # type: ignore[arg-type]
    except Exception as exc:
        raise AudioError(f"unreadable or unsupported audio ({exc}); supported: WAV, FLAC, OGG, MP3 via libsndfile") from None
    if isinstance(src, io.BytesIO):
        src.seek(0)
    if info.frames >= UNKNOWN_LENGTH_FRAMES:
        raise AudioError(
            "the header does not state the clip's length (written by a streaming encoder, e.g. ffmpeg to a pipe); "
            "re-encode it to a file so the length is recorded, e.g. `ffmpeg -i in.flac out.flac`"
        )
    if info.frames == 0 or info.samplerate <= 0:
        raise AudioError("audio has 0 samples (0-length clip)")
    if info.channels > MAX_CHANNELS:
        raise AudioError(
            f"audio has {info.channels} channels, over the limit of {MAX_CHANNELS}; down-mix it first (e.g. `sox in.wav -c 1 out.wav`)"
        )
    if info.samplerate > MAX_SOURCE_RATE:
        raise AudioError(
            f"audio is sampled at {info.samplerate} Hz, over the limit of {MAX_SOURCE_RATE} Hz; resample it first (e.g. `sox in.flac -r "
            f"48000 out.flac`)"
        )
    return AudioHeader(int(info.frames), int(info.samplerate), int(info.channels))


def inspect(utt: Utterance, root: Path | None = None, allow_outside_root: bool = True) -> AudioHeader:
    """The checked header of one clip's audio (``read_header``), or ``AudioError``; reads no samples."""
    return read_header(_open_source(utt, root, allow_outside_root))


def _frames(seconds: float, rate: int) -> int:
    # NeMo reads int(seconds * rate) frames; the epsilon keeps float error (4799.999999 for 4800) from losing a frame
    return int(math.floor(seconds * rate + 1e-6))


def span_frames(segment: tuple[float, float], header: AudioHeader) -> tuple[int, int]:
    """``(first frame, number of frames)`` of a segment ``(offset_s, duration_s)`` in audio with ``header``.

    The start is ``floor(offset x rate)`` and the length ``floor(duration x rate)`` frames, as NeMo
    reads a segment. A segment must lie inside its audio: an offset at or past the end, or an end
    more than ``SEGMENT_END_TOLERANCE_S`` past it, raises ``SegmentError`` naming the field; an end
    within the tolerance (a duration rounded up in the manifest) stops at the end of the audio.
    """
    offset, duration = segment
    if not (math.isfinite(offset) and offset >= 0):
        raise SegmentError(f"segment offset must be a finite number of seconds >= 0, got {offset!r}", "offset")
    if not (math.isfinite(duration) and duration > 0):
        raise SegmentError(f"segment duration must be a finite number of seconds > 0, got {duration!r}", "duration")
    length = header.duration_s
    start = _frames(offset, header.samplerate)
    if start >= header.frames:
        raise SegmentError(f"segment offset {offset:g} s lies at or past the end of its audio ({length:.3f} s long)", "offset")
    n = _frames(duration, header.samplerate)
    if n == 0:
        raise SegmentError(f"segment duration {duration:g} s is shorter than one sample at {header.samplerate} Hz", "duration")
    if offset + duration > length + SEGMENT_END_TOLERANCE_S:
        raise SegmentError(
            f"segment [{offset:g}, {offset + duration:g}] s ends {offset + duration - length:.3f} s past the end of its audio "
            f"({length:.3f} s long); fix the offset or duration",
            "duration",
        )
    return start, min(n, header.frames - start)


def decode(
    utt: Utterance,
    root: Path | None = None,
    target_sr: int = SAMPLE_RATE,
    max_duration_s: float = DEFAULT_MAX_DURATION_S,
    allow_outside_root: bool = True,
) -> DecodedAudio:
    """Decode one utterance to mono float32 at ``target_sr``; errors are returned, not raised.

    A segment (``utt.offset_s`` set) is exactly its span of the file: only those frames are read,
    then down-mixed and resampled, so its samples equal those of the span cut to a file of its own.
    """
    try:
        return DecodedAudio(utt.utt_id, _decode(utt, root, target_sr, max_duration_s, allow_outside_root), target_sr)
    except AudioError as exc:
        return DecodedAudio(utt.utt_id, None, target_sr, error=str(exc))
    except Exception as exc:  # any decoder failure is one clip's problem, not the run's
        return DecodedAudio(utt.utt_id, None, target_sr, error=f"cannot decode audio: {type(exc).__name__}: {exc}")


def _decode(utt: Utterance, root: Path | None, target_sr: int, max_duration_s: float, allow_outside_root: bool) -> np.ndarray:
    import soundfile as sf

    src = _open_source(utt, root, allow_outside_root)
    info = read_header(src)
    segment = utt.segment
    start, frames = span_frames(segment, info) if segment is not None else (0, info.frames)
    duration = frames / info.samplerate
    if duration > max_duration_s:
        raise AudioError(
            f"clip is {duration:.0f} s long, over the limit of {max_duration_s:.0f} s; split it into segments "
            "or raise dataset.max_duration_s in the recipe"
        )
    if frames * info.channels > STREAM_SAMPLES:
        mono = _decode_blocks(src, info.samplerate, target_sr, start, frames)
    else:
        try:
            data, sr = sf.read(src, dtype="float32", always_2d=True, start=start, frames=frames)  # type: ignore[arg-type]
        except Exception as exc:
            raise AudioError(f"audio is truncated or corrupt: {exc}") from None
        if data.shape[0] == 0:
            raise AudioError("audio has 0 samples (0-length clip)")
        _check_finite(data)
        mono = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
        if sr != target_sr:
            import soxr

            mono = soxr.resample(mono, sr, target_sr, quality="HQ").astype(np.float32)
    peak = float(np.max(np.abs(mono))) if mono.size else 0.0
    if peak < SILENCE_PEAK and not is_speech_free(utt.labels):
        # digital silence is a valid clip when labelled speech-free (the classic test of a model
        # transcribing silence); a silent clip said to hold speech is a broken file
        raise AudioError(f"audio is silent (peak amplitude {peak:.2g}, below {SILENCE_PEAK:g})")
    return np.ascontiguousarray(mono, dtype=np.float32)


def _check_finite(data: np.ndarray) -> None:
    if not np.isfinite(data).all():
        n_bad = int((~np.isfinite(data)).sum())
        raise AudioError(f"audio contains {n_bad} NaN/Inf samples")


def _decode_blocks(src: Path | io.BytesIO, source_rate: int, target_sr: int, start: int = 0, frames: int = -1) -> np.ndarray:
    """Read, down-mix and resample a long clip block by block (bounded memory; same filter as the
    one-shot path up to the edges of blocks, where a streaming resampler keeps its state)."""
    import soundfile as sf
    import soxr

    stream = soxr.ResampleStream(source_rate, target_sr, 1, dtype="float32", quality="HQ") if source_rate != target_sr else None
    parts: list[np.ndarray] = []
    n_read = 0
    try:
        with sf.SoundFile(src) as fh:  # type: ignore[arg-type]
            if start:
                fh.seek(start)
            for block in fh.blocks(blocksize=_BLOCK_FRAMES, dtype="float32", always_2d=True, frames=frames):
                _check_finite(block)
                n_read += block.shape[0]
                mono = block.mean(axis=1) if block.shape[1] > 1 else block[:, 0].copy()
                parts.append(stream.resample_chunk(mono) if stream is not None else mono)
    except AudioError:
        raise
    except Exception as exc:
        raise AudioError(f"audio is truncated or corrupt: {exc}") from None
    if n_read == 0:
        raise AudioError("audio has 0 samples (0-length clip)")
    if stream is not None:
        parts.append(stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True))
    return np.concatenate(parts).astype(np.float32, copy=False)
