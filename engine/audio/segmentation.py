"""Long-form transcription for any ASR backend: Silero VAD finds speech, speech regions are
merged into chunks of at most ``max_chunk_s`` with padding, chunks are transcribed in batches
by any :class:`~engine.backends.base.ASRBackend`, and the texts are stitched back per recording
with their times.

Chunks never overlap (padding stops half-way to the neighbouring chunk), so each stretch of
audio is heard by exactly one chunk: stitching is concatenation in time order, and no word can
be duplicated at a border. A speech region longer than ``max_chunk_s`` is split at its least
speech-like frame within the last half of the allowed length, to avoid cutting inside a word.

The Silero VAD model is the ONNX file that ships inside the faster-whisper package; onnxruntime
runs it on CPU. The settings are returned by :meth:`SegmentationConfig.as_dict` and recorded
with every long-form result.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.data import SAMPLE_RATE
from engine.errors import BackendUnavailable, ConfigError
from engine.options import Options, option

log = logging.getLogger(__name__)

WINDOW = 512  # Silero VAD v5/v6 frame at 16 kHz (32 ms)
CONTEXT = 64  # samples of the previous frame the model sees
FRAME_S = WINDOW / SAMPLE_RATE
MIN_STEP_S = 0.5  # shortest allowed max_chunk_s - 2 * pad_s (the step long regions are split in)


@dataclass(frozen=True)
class SegmentationConfig(Options):
    """How long recordings are cut. Times in seconds."""

    threshold: float = option(0.5, "speech starts when P(speech) reaches this", gt=0, lt=1)
    neg_threshold: float = option(0.35, "speech ends when P(speech) falls below this (<= threshold)", gt=0, lt=1)
    min_speech_s: float = option(0.25, "shorter speech regions are dropped as clicks", ge=0, le=3600)
    min_silence_s: float = option(0.3, "shorter pauses do not end a region", ge=0, le=3600)
    pad_s: float = option(0.2, "seconds added each side of a chunk; max_chunk_s - 2 * pad_s must be >= 0.5", ge=0, le=3600)
    max_chunk_s: float = option(30.0, "regions merge up to this length; longer ones are split", ge=1, le=3600)
    batch_size: int = option(8, "chunks per transcribe_batch call", ge=1, le=4096)

    def __post_init__(self) -> None:
        self.validate("segmentation")  # a record built in code obeys the cross-field rules too

    def validate(self, where: str) -> None:
        if not 0.0 < self.neg_threshold <= self.threshold < 1.0:
            raise ConfigError(f"{where}: need 0 < neg_threshold ({self.neg_threshold}) <= threshold ({self.threshold}) < 1")
        if self.max_chunk_s < 1.0:
            raise ConfigError(f"{where}: max_chunk_s {self.max_chunk_s} is below 1 s")
        if min(self.min_speech_s, self.min_silence_s, self.pad_s) < 0 or self.batch_size < 1:
            raise ConfigError(f"{where}: min_speech_s, min_silence_s and pad_s must be >= 0 and batch_size >= 1")
        if self.max_chunk_s - 2 * self.pad_s < MIN_STEP_S:
            # long regions are split in steps of max_chunk_s - 2 * pad_s: a step of 0 never advances
            raise ConfigError(
                f"{where}: pad_s ({self.pad_s:g}) must be less than max_chunk_s / 2 with at least {MIN_STEP_S:g} s to spare "
                f"(max_chunk_s - 2 * pad_s >= {MIN_STEP_S:g}); lower pad_s to at most {(self.max_chunk_s - MIN_STEP_S) / 2:g} or raise "
                f"max_chunk_s"
            )

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None, where: str = "segmentation") -> SegmentationConfig:
        """Build from a recipe block through the typed option layer (unknown keys, strings for
        numbers, NaN and out-of-range values are refused, naming the key), then the cross-field rules."""
        try:
            return cls.parse(raw, where)
        except ConfigError as exc:
            msg = str(exc)
            if msg.startswith("segmentation: "):  # a cross-field rule, checked while the record was built
                raise ConfigError(f"{where}: {msg.removeprefix('segmentation: ')}") from None
            raise

    def as_dict(self) -> dict[str, Any]:
        return {"vad": "silero (faster-whisper assets, onnxruntime)", **asdict(self)}  # recorded beside the results


@dataclass(frozen=True)
class Chunk:
    """A stretch of one recording sent to the model, and what the model said."""

    start: float
    end: float
    text: str = ""


def silero_model_path() -> Path:
    """The Silero VAD ONNX file bundled with faster-whisper."""
    try:
        import faster_whisper
    except ImportError as exc:
        raise BackendUnavailable(
            f"Silero VAD ships inside faster-whisper, which cannot be imported ({exc}): pip install faster-whisper"
        ) from exc
    assets = Path(faster_whisper.__file__).parent / "assets"
    found = sorted(assets.glob("silero_vad*.onnx"))
    if not found:
        raise BackendUnavailable(f"no silero_vad*.onnx under {assets}; reinstall faster-whisper>=1.1")
    return found[-1]


class SileroVAD:
    """Frame-level speech probabilities from the Silero VAD ONNX model (16 kHz, 32 ms frames)."""

    def __init__(self, model_path: str | Path | None = None, num_threads: int = 1) -> None:
        try:
            import onnxruntime
        except ImportError as exc:
            raise BackendUnavailable(f"Silero VAD needs onnxruntime ({exc}): pip install onnxruntime") from exc
        self.path = Path(model_path) if model_path else silero_model_path()
        opts = onnxruntime.SessionOptions()
        opts.intra_op_num_threads = num_threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 4
        self._session = onnxruntime.InferenceSession(str(self.path), sess_options=opts, providers=["CPUExecutionProvider"])

    def probabilities(self, audio: np.ndarray) -> np.ndarray:
        """P(speech) for each 512-sample frame; the model's recurrent state runs through the file."""
        x = np.asarray(audio, dtype=np.float32).reshape(-1)
        n = int(np.ceil(len(x) / WINDOW)) if len(x) else 0
        if n == 0:
            return np.zeros(0, dtype=np.float32)
        flat = np.zeros(n * WINDOW, dtype=np.float32)
        flat[: len(x)] = x
        frames = flat.reshape(n, WINDOW)
        context = np.zeros((n, CONTEXT), dtype=np.float32)
        context[1:] = frames[:-1, -CONTEXT:]
        batch = np.concatenate([context, frames], axis=1)
        h = np.zeros((1, 1, 128), dtype=np.float32)
        c = np.zeros((1, 1, 128), dtype=np.float32)
        out = []
        for i in range(0, n, 4096):
            probs, h, c = self._session.run(None, {"input": batch[i : i + 4096], "h": h, "c": c})
            out.append(np.asarray(probs, dtype=np.float32).reshape(-1))
        return np.concatenate(out)


def speech_regions(probs: np.ndarray, cfg: SegmentationConfig, duration_s: float) -> list[tuple[float, float]]:
    """Hysteresis over frame probabilities -> ``[(start_s, end_s)]`` of speech, unpadded."""
    regions: list[tuple[float, float]] = []
    start: int | None = None
    silence_from: int | None = None
    min_sil = max(1, int(round(cfg.min_silence_s / FRAME_S)))
    for i, p in enumerate(probs):
        if start is None:
            if p >= cfg.threshold:
                start, silence_from = i, None
            continue
        if p >= cfg.threshold:
            silence_from = None
        elif p < cfg.neg_threshold:
            if silence_from is None:
                silence_from = i
            elif i - silence_from >= min_sil:
                regions.append((start * FRAME_S, silence_from * FRAME_S))
                start, silence_from = None, None
    if start is not None:
        regions.append((start * FRAME_S, (silence_from if silence_from is not None else len(probs)) * FRAME_S))
    return [(s, min(e, duration_s)) for s, e in regions if e - s >= cfg.min_speech_s and s < duration_s]


def _split_long(start: float, end: float, cfg: SegmentationConfig, probs: np.ndarray | None) -> list[tuple[float, float]]:
    """Cut a region longer than the chunk limit at its quietest frame in the allowed window."""
    limit = cfg.max_chunk_s - 2 * cfg.pad_s
    out: list[tuple[float, float]] = []
    while end - start > limit:
        cut = start + limit
        if probs is not None and len(probs):
            lo, hi = int((start + limit / 2) / FRAME_S), min(int(cut / FRAME_S), len(probs))
            if hi > lo:
                cut = (lo + int(np.argmin(probs[lo:hi]))) * FRAME_S
        if cut <= start:  # frame rounding must never stall the split
            cut = start + limit
        out.append((start, cut))
        start = cut
    out.append((start, end))
    return out


def plan_chunks(
    regions: Sequence[tuple[float, float]], duration_s: float, cfg: SegmentationConfig, probs: np.ndarray | None = None
) -> list[tuple[float, float]]:
    """Merge speech regions into padded chunks of at most ``max_chunk_s``.

    Guarantees (tested as properties): chunks are sorted and pairwise disjoint; every instant of
    every speech region lies in exactly one chunk; each chunk is at most ``max_chunk_s`` long;
    all lie within ``[0, duration_s]``.
    """
    pieces: list[tuple[float, float]] = []
    for s, e in sorted(regions):
        s, e = max(0.0, s), min(duration_s, e)
        if e > s:
            pieces.extend(_split_long(s, e, cfg, probs))
    merged: list[list[float]] = []
    limit = cfg.max_chunk_s - 2 * cfg.pad_s
    for s, e in pieces:
        if merged and max(e, merged[-1][1]) - merged[-1][0] <= limit:
            merged[-1][1] = max(merged[-1][1], e)
        elif merged and s < merged[-1][1]:  # overlapping regions that cannot merge: start after it
            merged.append([merged[-1][1], e])
        else:
            merged.append([s, e])
    out: list[tuple[float, float]] = []
    for i, (s, e) in enumerate(merged):
        left = 0.0 if i == 0 else (merged[i - 1][1] + s) / 2
        right = duration_s if i == len(merged) - 1 else (e + merged[i + 1][0]) / 2
        out.append((max(left, s - cfg.pad_s), min(right, e + cfg.pad_s)))
    return [(s, e) for s, e in out if e > s]


def stitch(chunks: Sequence[Chunk]) -> str:
    """One recording's text: chunk texts in time order (chunks are disjoint, so nothing repeats)."""
    return " ".join(c.text.strip() for c in sorted(chunks, key=lambda c: c.start) if c.text.strip())


@dataclass
class LongFormResult:
    """Per recording: the chunks with their texts, the stitched text, and the timings."""

    chunks: dict[str, list[Chunk]]
    infer_s: float
    vad_s: float

    def text(self, rec_id: str) -> str:
        return stitch(self.chunks.get(rec_id, []))


def segment_recordings(
    audios: Mapping[str, np.ndarray], cfg: SegmentationConfig, vad: SileroVAD | None = None
) -> tuple[dict[str, list[tuple[float, float]]], float]:
    """Chunk plan per recording, and the VAD seconds spent."""
    vad = vad or SileroVAD()
    t0 = time.perf_counter()
    plans: dict[str, list[tuple[float, float]]] = {}
    for rec_id, audio in audios.items():
        dur = len(audio) / SAMPLE_RATE
        probs = vad.probabilities(audio)
        plans[rec_id] = plan_chunks(speech_regions(probs, cfg, dur), dur, cfg, probs)
    return plans, time.perf_counter() - t0


def transcribe_chunks(
    transcribe_batch: Callable[[list[np.ndarray]], list[str]],
    audios: Mapping[str, np.ndarray],
    plans: Mapping[str, Sequence[tuple[float, float]]],
    batch_size: int,
) -> tuple[dict[str, list[Chunk]], float]:
    """Cut every planned chunk out of its recording and transcribe them in batches (across
    recordings, so short recordings still fill batches). Returns chunks per recording and the
    inference seconds."""
    jobs = [(rec, s, e) for rec, plan in plans.items() for s, e in plan]
    out: dict[str, list[Chunk]] = {rec: [] for rec in plans}
    infer = 0.0
    for i in range(0, len(jobs), batch_size):
        batch = jobs[i : i + batch_size]
        clips = [np.ascontiguousarray(audios[r][int(s * SAMPLE_RATE) : int(e * SAMPLE_RATE)], dtype=np.float32) for r, s, e in batch]
        t0 = time.perf_counter()
        texts = transcribe_batch(clips)
        infer += time.perf_counter() - t0
        if len(texts) != len(batch):
            raise RuntimeError(f"backend returned {len(texts)} texts for a batch of {len(batch)} chunks")
        for (rec, s, e), text in zip(batch, texts):
            out[rec].append(Chunk(s, e, text))
    return out, infer


def transcribe_long(
    backend: Any, audios: Mapping[str, np.ndarray], cfg: SegmentationConfig, vad: SileroVAD | None = None
) -> LongFormResult:
    """VAD-segment, batch-transcribe with ``backend.transcribe_batch`` and stitch, per recording."""
    plans, vad_s = segment_recordings(audios, cfg, vad)
    chunks, infer = transcribe_chunks(backend.transcribe_batch, audios, plans, cfg.batch_size)
    log.info("long-form: %d recordings, %d chunks, vad %.1f s, inference %.1f s", len(audios), sum(map(len, chunks.values())), vad_s, infer)
    return LongFormResult(chunks, infer, vad_s)
