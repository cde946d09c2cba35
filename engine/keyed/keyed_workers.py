"""Workers of keyed passes (``engine/keyed/keyed_pass.py``) that work on whole recordings.

* :class:`DiarizeWorker`: one diarizer (``engine.backends.DIAR_BACKENDS``), one recording per unit;
  the result is the recording's turns.
* :class:`LongformWorker`: one ASR model, one recording per unit: Silero VAD chunks transcribed
  and kept with their times (long-form), and the given diarization turns transcribed as chunks
  (speaker-attributed).

Both read the recording's audio themselves from the path in the unit's payload, so on Ray the
driver never holds audio. Their results are the JSON the conversation section stores and scores.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.data import ModelSpec, Utterance
from engine.errors import AudioError


def load_recording(path: str) -> np.ndarray:
    """A recording as mono float32 at 16 kHz, read by the clip decoder (``engine.audio.decoding.decode``).

    One rule for what audio is acceptable in every section: the same header checks (channels,
    rate, stated length, WAV data chunk), NaN/Inf samples and silence refused, channels averaged,
    soxr resampling, long recordings read block by block. Recordings are whole conversations, so
    no duration cap applies (the clip cap is a setting of clip datasets).
    """
    from engine.audio.decoding import decode

    d = decode(Utterance(os.path.basename(path), None, audio_path=path), max_duration_s=math.inf)
    if d.error is not None or d.samples is None:
        raise AudioError(f"{path}: {d.error}")
    return np.asarray(d.samples, dtype=np.float32)


def _holds_gpu() -> bool:
    """Whether this process was given a GPU (a Ray actor with num_gpus sees it in CUDA_VISIBLE_DEVICES)."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "") not in ("", "-1")


class DiarizeWorker:
    """Diarizes one recording per unit with one diarizer (loaded once)."""

    def __init__(self, backend: str, options: Mapping[str, Any] | None = None) -> None:
        from engine.backends import DIAR_BACKENDS

        self.name = backend
        self.diarizer: Any = DIAR_BACKENDS.get(backend)(**dict(options or {}))

    def load(self) -> dict[str, Any]:
        self.diarizer.load()
        return dict(self.diarizer.info().as_dict())

    def run(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """``payload``: ``recording``, ``path`` and ``num_speakers`` (None unless the reference count is given)."""
        audio = load_recording(str(payload["path"]))
        t0 = time.perf_counter()
        turns = self.diarizer.diarize(audio, num_speakers=payload.get("num_speakers"))
        return {
            "recording": payload["recording"],
            "seconds": time.perf_counter() - t0,
            "turns": [{"start": t.start, "end": t.end, "speaker": t.speaker} for t in turns],
        }

    def facts(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        self.diarizer.close()


class LongformWorker:
    """Transcribes one recording per unit with one ASR model: VAD chunks (long-form) and diarization turns (attributed)."""

    def __init__(self, spec: ModelSpec, segmentation: Mapping[str, Any]) -> None:
        from engine.audio.segmentation import SegmentationConfig

        self.spec = spec
        self.cfg = SegmentationConfig(**{k: v for k, v in segmentation.items() if k != "vad"})
        self.backend: Any = None
        self.vad: Any = None

    def load(self) -> dict[str, Any]:
        from dataclasses import replace

        from engine.audio.segmentation import SileroVAD
        from engine.backends import build_backend
        from engine.run.ray_setup import accepts_option

        spec = self.spec
        if _holds_gpu() and "device" not in spec.options and accepts_option(spec, "device", "cuda"):
            spec = replace(spec, options={**dict(spec.options), "device": "cuda"})  # as the ASR pass's GPU actors do
        self.backend = build_backend(spec)
        self.backend.load()
        self.vad = SileroVAD()
        return dict(self.backend.info().as_dict())

    def run(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """``payload``: ``recording``, ``path`` and ``turns`` (``[start, end, speaker]`` chunks of the diarization)."""
        from engine.audio.segmentation import segment_recordings, transcribe_chunks

        rec = str(payload["recording"])
        x = {rec: load_recording(str(payload["path"]))}
        plans, vad_s = segment_recordings(x, self.cfg, self.vad)
        chunks, infer_lf = transcribe_chunks(self.backend.transcribe_batch, x, plans, self.cfg.batch_size)
        tplans = [(float(s), float(e), str(spk)) for s, e, spk in payload["turns"]]
        tchunks, infer_sa = transcribe_chunks(self.backend.transcribe_batch, x, {rec: [(s, e) for s, e, _ in tplans]}, self.cfg.batch_size)
        return {
            "recording": rec,
            "model": self.spec.name,
            "vad_s": vad_s,
            "infer_longform_s": infer_lf,
            "infer_attributed_s": infer_sa,
            "longform": [{"start": c.start, "end": c.end, "text": c.text} for c in chunks[rec]],
            "attributed": [
                {"start": c.start, "end": c.end, "text": c.text, "speaker": spk} for c, (_, _, spk) in zip(tchunks[rec], tplans)
            ],
        }

    def facts(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()
            self.backend = None


__all__ = ["DiarizeWorker", "LongformWorker", "load_recording"]
