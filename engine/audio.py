"""Audio decoding: soundfile for the container, soxr for resampling, mono down-mix.

Every problem with one clip becomes an ``AudioError`` with a message that names the clip and
the fix; the caller records it in that clip's result row and the run goes on.
"""

from __future__ import annotations

import io
import logging
import os
from pathlib import Path

import numpy as np

from engine.data import DEFAULT_MAX_DURATION_S, SAMPLE_RATE, DecodedAudio, Utterance
from engine.errors import AudioError

log = logging.getLogger(__name__)

SILENCE_PEAK = 1e-4  # peak amplitude below which a clip counts as silent (-80 dBFS)
UNKNOWN_LENGTH_FRAMES = 1 << 62  # libsndfile reports SF_COUNT_MAX frames when the header leaves the length open


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
    if os.path.getsize(path) == 0:
        raise AudioError(f"audio file is empty (0 bytes): '{path}'")
    return path


def _check_wav_truncation(src: Path | io.BytesIO) -> None:
    """libsndfile quietly reads what is there; a WAV whose data chunk is cut short is corrupt."""
    import struct

    if isinstance(src, io.BytesIO):
        head = src.getvalue()
        size = len(head)
    else:
        size = os.path.getsize(src)
        with open(src, "rb") as fh:
            head = fh.read(4096)
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return
    pos = 12
    while pos + 8 <= len(head):
        cid, clen = head[pos : pos + 4], struct.unpack("<I", head[pos + 4 : pos + 8])[0]
        if cid == b"data":
            available = size - (pos + 8)
            if clen != 0xFFFFFFFF and clen > available:
                raise AudioError(f"WAV file is truncated: header declares {clen} bytes of audio, the file holds {available}")
            return
        pos += 8 + clen + (clen & 1)


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
    try:
        data, sr = sf.read(src, dtype="float32", always_2d=True)  # type: ignore[arg-type]
    except Exception as exc:
        raise AudioError(f"audio is truncated or corrupt: {exc}") from None
    if data.shape[0] == 0:
        raise AudioError("audio has 0 samples (0-length clip)")
    if not np.isfinite(data).all():
        n_bad = int((~np.isfinite(data)).sum())
        raise AudioError(f"audio contains {n_bad} NaN/Inf samples")
    mono = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
    if sr != target_sr:
        import soxr

        mono = soxr.resample(mono, sr, target_sr, quality="HQ").astype(np.float32)
    peak = float(np.max(np.abs(mono))) if mono.size else 0.0
    if peak < SILENCE_PEAK:
        raise AudioError(f"audio is silent (peak amplitude {peak:.2g}, below {SILENCE_PEAK:g})")
    return np.ascontiguousarray(mono, dtype=np.float32)
