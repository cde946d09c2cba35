"""Offline diarization baseline: Silero VAD + GE2E speaker embeddings (the resemblyzer encoder
that ships in its package) + average-linkage agglomerative clustering on cosine distance.

1. Silero VAD (``engine.audio.segmentation``) finds speech regions.
2. Each region is embedded with resemblyzer's sliding 1.6 s partial windows (``rate`` windows per
   second), giving one d-vector per window, stamped at the window's centre.
3. The windows of the whole recording are clustered (scipy average linkage, cosine distance);
   the tree is cut at ``threshold`` (tuned on the demo conversation set, see
   docs/conversation.md), or into ``num_speakers`` clusters when the caller knows the count.
4. Every 0.1 s speech frame takes the label of the nearest window centre in its region, labels
   are median-smoothed, and runs of one label become turns.

The baseline gives one speaker per instant: overlapped speech is attributed to one of the
talkers, so its missed-speech share of DER is at least the overlap share of the reference.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from engine.backends.availability import Availability, install_hint
from engine.backends.base import BackendInfo, BackendOptions, DiarizationBackend, SpeakerTurn, package_versions
from engine.backends.bundled import verify_package_weights
from engine.backends.device import resolve_device
from engine.data import SAMPLE_RATE
from engine.errors import AudioError, BackendUnavailable
from engine.options import option

log = logging.getLogger(__name__)

#: Cosine-distance cut of the average-linkage tree: chosen on the dev half of a 32-recording build
#: of the demo conversation set (seed 1), DER 15.2 % on the held-out half (docs/conversation.md).
DEFAULT_THRESHOLD = 0.35
FRAME_S = 0.1


@dataclass(frozen=True)
class RecordingEmbeddings:
    """One recording's speech regions and the d-vectors of its sliding windows (with each
    window's centre time and the index of the region it belongs to)."""

    regions: list[tuple[float, float]]
    embeddings: np.ndarray
    centres: np.ndarray
    owner: np.ndarray


@dataclass(frozen=True)
class VadResemblyzerOptions(BackendOptions):
    """The baseline diarizer's options (checked when the recipe is parsed)."""

    numbers_as_given: ClassVar[bool] = False

    threshold: float = option(DEFAULT_THRESHOLD, "cosine distance that joins two windows' speakers", gt=0, lt=2)
    rate: float = option(2.0, "embedding windows per second", ge=0.625, le=100)
    min_silence_s: float = option(0.3, "VAD pause that splits regions", ge=0, le=60)
    smooth_frames: int = option(5, "median filter width in 0.1 s frames", ge=1, le=1000)
    weights: str | None = option(None, "a custom resemblyzer pretrained.pt")
    device: str = option("auto", "torch device; auto is resolved at load")


class VadResemblyzerDiarizer(DiarizationBackend):
    """Silero VAD regions, resemblyzer d-vectors and average-linkage clustering (options: :class:`VadResemblyzerOptions`)."""

    name = "vad-resemblyzer"
    OPTIONS = VadResemblyzerOptions
    options: VadResemblyzerOptions
    requires = ("resemblyzer", "onnxruntime", "scipy")
    extra = "speaker"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        o = self.options
        self.threshold = o.threshold
        self.rate = o.rate
        self.min_silence_s = o.min_silence_s
        self.smooth = o.smooth_frames
        self.device = o.device  # resolved at load (engine/backends/device.py)
        self.weights = o.weights
        self._encoder: Any = None
        self._vad: Any = None

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        return Availability(True, "weights ship inside the resemblyzer and faster-whisper packages")

    def load(self) -> None:
        self.device = resolve_device(self.device)
        from engine.audio.segmentation import SileroVAD

        try:
            from resemblyzer import VoiceEncoder
        except ImportError as exc:
            raise BackendUnavailable(f"resemblyzer cannot be imported ({exc}); fix: {install_hint('speaker')}") from exc
        if self.weights is None:
            verify_package_weights("resemblyzer")  # the bundled pretrained.pt, as recorded for the pinned release
        self._encoder = VoiceEncoder(device=self.device, verbose=False, weights_fpath=self.weights)
        self._vad = SileroVAD()

    def info(self) -> BackendInfo:
        return BackendInfo(
            backend=self.name,
            model_id="silero-vad + resemblyzer GE2E + average-linkage AHC",
            device=self.device,
            extra={
                "threshold": self.threshold,
                "rate": self.rate,
                "min_silence_s": self.min_silence_s,
                "smooth_frames": self.smooth,
                **package_versions("resemblyzer", "onnxruntime", "scipy"),
            },
        )

    def _embed(self, audio: np.ndarray, regions: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """d-vectors of sliding windows, their centre times, and their region index."""
        from resemblyzer.audio import normalize_volume
        from resemblyzer.hparams import audio_norm_target_dBFS

        embs, centres, owner = [], [], []
        for k, (s, e) in enumerate(regions):
            wav = audio[int(s * SAMPLE_RATE) : int(e * SAMPLE_RATE)]
            wav = normalize_volume(wav, audio_norm_target_dBFS, increase_only=True)
            _, partials, slices = self._encoder.embed_utterance(wav, return_partials=True, rate=self.rate, min_coverage=0.5)
            for emb, sl in zip(partials, slices):
                mid = (sl.start + min(sl.stop, len(wav))) / 2 / SAMPLE_RATE
                embs.append(np.asarray(emb, dtype=np.float32))
                centres.append(s + mid)
                owner.append(k)
        return np.stack(embs), np.asarray(centres), np.asarray(owner)

    def cluster(self, embeddings: np.ndarray, num_speakers: int | None = None) -> np.ndarray:
        """Average-linkage clusters on cosine distance (labels 0..k-1 by first appearance)."""
        from scipy.cluster.hierarchy import fcluster, linkage

        if len(embeddings) == 1:
            return np.zeros(1, dtype=int)
        tree = linkage(embeddings.astype(np.float64), method="average", metric="cosine")
        if num_speakers:
            raw = fcluster(tree, t=num_speakers, criterion="maxclust")
        else:
            raw = fcluster(tree, t=self.threshold, criterion="distance")
        order = {lab: i for i, lab in enumerate(dict.fromkeys(raw.tolist()))}
        return np.asarray([order[x] for x in raw.tolist()], dtype=int)

    def analyse(self, audio: np.ndarray, sample_rate: int = SAMPLE_RATE) -> RecordingEmbeddings:
        """The threshold-independent part of :meth:`diarize`: speech regions and window
        d-vectors. Kept separate so a threshold sweep embeds each recording once."""
        from engine.audio.segmentation import SegmentationConfig, speech_regions

        if self._encoder is None:
            self.load()
        if sample_rate != SAMPLE_RATE:
            raise AudioError(f"{self.name} expects {SAMPLE_RATE} Hz audio, got {sample_rate}")
        x = np.asarray(audio, dtype=np.float32).reshape(-1)
        cfg = SegmentationConfig(min_silence_s=self.min_silence_s, min_speech_s=0.2)
        regions = speech_regions(self._vad.probabilities(x), cfg, len(x) / SAMPLE_RATE)
        if not regions:
            empty = np.zeros(0)
            return RecordingEmbeddings([], np.zeros((0, 256), dtype=np.float32), empty, empty.astype(int))
        embs, centres, owner = self._embed(x, regions)
        return RecordingEmbeddings(regions, embs, centres, owner)

    def turns(self, rec: RecordingEmbeddings, num_speakers: int | None = None) -> list[SpeakerTurn]:
        """Cluster the windows (at the current ``threshold``, or into ``num_speakers``) and turn
        the per-frame labels into speaker turns."""
        from scipy.ndimage import median_filter

        if not rec.regions:
            return []
        labels = self.cluster(rec.embeddings, num_speakers)
        turns: list[SpeakerTurn] = []
        for k, (s, e) in enumerate(rec.regions):
            mine = np.flatnonzero(rec.owner == k)
            times = s + FRAME_S * (np.arange(max(1, int(round((e - s) / FRAME_S)))) + 0.5)
            nearest = mine[np.abs(rec.centres[mine][None, :] - times[:, None]).argmin(axis=1)]
            frame_labels = labels[nearest]
            if self.smooth > 1 and len(frame_labels) > self.smooth:
                frame_labels = median_filter(frame_labels, size=self.smooth, mode="nearest")
            run_start = 0
            for i in range(1, len(frame_labels) + 1):
                if i == len(frame_labels) or frame_labels[i] != frame_labels[run_start]:
                    t0 = s + run_start * FRAME_S
                    t1 = e if i == len(frame_labels) else s + i * FRAME_S
                    turns.append(SpeakerTurn(round(t0, 3), round(t1, 3), f"spk{int(frame_labels[run_start])}"))
                    run_start = i
        return turns

    def diarize(self, audio: np.ndarray, sample_rate: int = SAMPLE_RATE, num_speakers: int | None = None) -> list[SpeakerTurn]:
        return self.turns(self.analyse(audio, sample_rate), num_speakers)

    def close(self) -> None:
        self._encoder = None
        self._vad = None
