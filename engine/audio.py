"""Audio decoding: soundfile for the container, soxr for resampling, mono down-mix.

Every problem with one clip becomes an ``AudioError`` with a message that names the clip and
the fix; the caller records it in that clip's result row and the run goes on.
"""

from __future__ import annotations

import io
import logging
import os
import re
import struct
from pathlib import Path
from typing import Callable

import numpy as np

from engine.data import DEFAULT_MAX_DURATION_S, SAMPLE_RATE, SPEECH_FREE_LABEL, SPEECH_FREE_VALUE, DecodedAudio, Utterance
from engine.errors import AudioError

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


def decode(
    utt: Utterance,
    root: Path | None = None,
    target_sr: int = SAMPLE_RATE,
    max_duration_s: float = DEFAULT_MAX_DURATION_S,
    allow_outside_root: bool = True,
) -> DecodedAudio:
    """Decode one utterance to mono float32 at ``target_sr``; errors are returned, not raised."""
    try:
        return DecodedAudio(utt.utt_id, _decode(utt, root, target_sr, max_duration_s, allow_outside_root), target_sr)
    except AudioError as exc:
        return DecodedAudio(utt.utt_id, None, target_sr, error=str(exc))
    except Exception as exc:  # any decoder failure is one clip's problem, not the run's
        return DecodedAudio(utt.utt_id, None, target_sr, error=f"cannot decode audio: {type(exc).__name__}: {exc}")


def _decode(
    utt: Utterance, root: Path | None, target_sr: int, max_duration_s: float, allow_outside_root: bool
) -> np.ndarray:
    import soundfile as sf

    src = _open_source(utt, root, allow_outside_root)
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
    duration = info.frames / info.samplerate
    if duration > max_duration_s:
        raise AudioError(
            f"clip is {duration:.0f} s long, over the limit of {max_duration_s:.0f} s; split it into segments "
            "or raise dataset.max_duration_s in the recipe"
        )
    if info.channels > MAX_CHANNELS:
        raise AudioError(f"audio has {info.channels} channels, over the limit of {MAX_CHANNELS}; down-mix it first (e.g. `sox in.wav -c 1 "
            f"out.wav`)")
    if info.samplerate > MAX_SOURCE_RATE:
        raise AudioError(
            f"audio is sampled at {info.samplerate} Hz, over the limit of {MAX_SOURCE_RATE} Hz; resample it first (e.g. `sox in.flac -r "
                f"48000 out.flac`)"
        )
    if info.frames * info.channels > STREAM_SAMPLES:
        mono = _decode_blocks(src, info.samplerate, target_sr)
    else:
        try:
            data, sr = sf.read(src, dtype="float32", always_2d=True)  # type: ignore[arg-type]
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
    if peak < SILENCE_PEAK and utt.labels.get(SPEECH_FREE_LABEL) != SPEECH_FREE_VALUE:
        # digital silence is a valid clip when labelled speech-free (the classic test of a model
        # transcribing silence); a silent clip said to hold speech is a broken file
        raise AudioError(f"audio is silent (peak amplitude {peak:.2g}, below {SILENCE_PEAK:g})")
    return np.ascontiguousarray(mono, dtype=np.float32)


def _check_finite(data: np.ndarray) -> None:
    if not np.isfinite(data).all():
        n_bad = int((~np.isfinite(data)).sum())
        raise AudioError(f"audio contains {n_bad} NaN/Inf samples")


def _decode_blocks(src: Path | io.BytesIO, source_rate: int, target_sr: int) -> np.ndarray:
    """Read, down-mix and resample a long clip block by block (bounded memory; same filter as the
    one-shot path up to the edges of blocks, where a streaming resampler keeps its state)."""
    import soundfile as sf
    import soxr

    stream = soxr.ResampleStream(source_rate, target_sr, 1, dtype="float32", quality="HQ") if source_rate != target_sr else None
    parts: list[np.ndarray] = []
    n_read = 0
    try:
        with sf.SoundFile(src) as fh:  # type: ignore[arg-type]
            for block in fh.blocks(blocksize=_BLOCK_FRAMES, dtype="float32", always_2d=True):
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
