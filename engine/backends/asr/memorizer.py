"""``memorizer``: the positive control for benchmark-optimization probes.

It indexes a dataset's audio and references, and for audio that is close to an indexed clip —
the clip itself, the clip with a word silenced, attenuated or covered by noise — answers with the
stored reference; for anything else it defers to a real ASR backend. A model that has learned a
benchmark behaves like this; every probe must flag it, and must not flag an honest model.

The fingerprint is a coarse log-mel spectrogram (32 bands, 20 ms hop). Two clips match when their
lengths agree within 3 % and the median per-frame cosine similarity of their mean-removed
log-mel frames, over frames where both clips have energy, exceeds a threshold (0.85). Each band's
median over the clip's voiced frames is removed first (cepstral mean normalization), so that a
stationary background (pink noise, a channel colouring) does not make two different clips alike.
Silencing a word removes frames from the comparison but leaves the rest identical, and a word
covered by noise spoils only its own frames, so masked clips still match (median cosine >= 0.87 on
the demo corpus with 0.7 s of noise, though noise over a third or more of a clip's speech can
push it below the threshold; >= 0.9 with white noise at 30 dB SNR over the whole clip, though
not at 20 dB, which swamps the high bands of quiet synthetic speech); unrelated clips of the demo corpus stay below 0.76 and
re-synthesized speech (another voice) near 0.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.availability import Availability, require_modules
from engine.backends.base import ASRBackend, AsrCapabilities, BackendInfo, BackendOptions
from engine.data import SAMPLE_RATE, ModelSpec
from engine.errors import ConfigError
from engine.options import option

log = logging.getLogger(__name__)

N_MELS = 32
HOP = 320  # 20 ms at 16 kHz
WIN = 640
VOICED_RANGE = 6.0  # natural-log power: frames within ~26 dB of the loudest frame count as voiced
DEFAULT_THRESHOLD = 0.85


def _mel_filterbank(n_fft: int, n_mels: int, sr: int) -> np.ndarray:
    """Triangular filters on the HTK mel scale from 60 Hz to 95 % of Nyquist (librosa), peak 1."""
    import librosa

    return np.asarray(
        librosa.filters.mel(sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=60.0, fmax=sr / 2 * 0.95, htk=True, norm=None), dtype=np.float64
    )


_FB = _mel_filterbank(WIN, N_MELS, SAMPLE_RATE)


def fingerprint(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(frames x bands normalized log-mel, per-frame log energy).

    Log-mel minus each band's median over the voiced frames (removes stationary background and
    channel), then minus each frame's mean across bands, scaled to unit norm.
    """
    x = np.asarray(x, dtype=np.float32)
    if x.size < WIN:
        x = np.pad(x, (0, WIN - x.size))
    n = 1 + (x.size - WIN) // HOP
    idx = np.arange(WIN)[None, :] + HOP * np.arange(n)[:, None]
    frames = x[idx] * np.hanning(WIN)[None, :]
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    mel = np.log(power @ _FB.T + 1e-8)
    energy = np.log(power.sum(axis=1) + 1e-10)
    voiced = energy > energy.max() - VOICED_RANGE
    mel = mel - np.median(mel[voiced], axis=0, keepdims=True)
    feat = mel - mel.mean(axis=1, keepdims=True)
    feat /= np.linalg.norm(feat, axis=1, keepdims=True) + 1e-8
    return feat.astype(np.float32), energy


def similarity(query: tuple[np.ndarray, np.ndarray], ref: tuple[np.ndarray, np.ndarray]) -> float:
    """Median frame cosine over frames voiced in both clips (frames aligned from the start).

    Frames the query lost (a silenced word) or the reference never had (pauses, now filled by
    background noise in the query) are left out; what remains is the speech both share.
    """
    qf, qe = query
    rf, re_ = ref
    n = min(len(qf), len(rf))
    if n == 0:
        return 0.0
    qf, qe, rf, re_ = qf[:n], qe[:n], rf[:n], re_[:n]
    voiced = (qe > (qe.max() - VOICED_RANGE)) & (re_ > (re_.max() - VOICED_RANGE))
    if voiced.sum() < 5:
        return 0.0
    cos = np.sum(qf[voiced] * rf[voiced], axis=1)
    return float(np.median(cos))


def _fallback_spec(value: Any, where: str) -> Any:
    """A registry model's name, or the ``{name, backend, options}`` spec the registry resolves it to."""
    if value is None:
        return None
    if not isinstance(value, (str, Mapping)):
        raise ConfigError(f"{where}: expected a registry model's name or a mapping with 'backend', got {type(value).__name__} {value!r}")
    return dict(value) if isinstance(value, Mapping) else value


@dataclass(frozen=True)
class MemorizerOptions(BackendOptions):
    """What the positive control memorizes, how close a clip must be, and whom it defers to."""

    index: str | None = option(None, "the dataset to memorize; set by the recipe to the run's own dataset unless given")
    index_reader: str = option("auto", "the reader of index")
    index_reader_options: dict[str, Any] | None = option(None, "the reader's options")
    index_limit: int | None = option(None, "memorize only the first N utterances", ge=1)
    fallback: Any = option(
        None,
        "a registry model answering what is not memorized (the registry resolves it to {name, backend, options})",
        parse=_fallback_spec,
        kind_doc="text or mapping or null",
    )
    threshold: float = option(DEFAULT_THRESHOLD, "median frame cosine at which a clip counts as memorized", ge=-1, le=1)
    length_tolerance: float = option(0.03, "relative length difference a memorized clip may have", ge=0, le=10)


class MemorizerBackend(ASRBackend):
    """Indexes ``index`` and answers its references for audio close to an indexed clip (options: :class:`MemorizerOptions`)."""

    name = "memorizer"
    OPTIONS = MemorizerOptions
    options: MemorizerOptions
    model_options = ("fallback",)
    capabilities = AsrCapabilities(positive_control=True)
    requires = ("librosa",)  # its mel filterbank
    extra = "demo"

    @classmethod
    def bind_dataset(
        cls, options: Mapping[str, Any], source: str, reader: str, reader_options: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The positive control memorizes the run's own dataset, read as the run reads it (the
        reader's options too: VoxPopuli's text is ``raw_text``), unless its options name another index."""
        if "index" in options:
            return dict(options)
        bound = {**dict(options), "index": source, "index_reader": reader}
        if reader_options:
            bound["index_reader_options"] = dict(reader_options)
        return bound

    @classmethod
    def rebind_dataset(cls, options: Mapping[str, Any], old_source: str, new_source: str, new_reader: str) -> dict[str, Any]:
        """A memorizer of the run's dataset memorizes the derived copy instead (what a benchmark learner would have seen)."""
        if str(options.get("index")) != str(old_source):
            return dict(options)
        rebound = {**dict(options), "index": new_source, "index_reader": new_reader}
        rebound.pop("index_reader_options", None)  # the derived copy is read with its own reader's defaults
        return rebound

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        fallback = cls.parse_options(options).fallback
        name = fallback.get("name", "a model") if isinstance(fallback, Mapping) else (fallback or "nothing")
        return Availability(True, f"positive control: indexes the run's dataset, defers to {name}")

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.threshold = float(self.options.threshold)
        self.tol = float(self.options.length_tolerance)
        self._index: list[tuple[str, int, tuple[np.ndarray, np.ndarray], str]] = []
        self._fallback: ASRBackend | None = None
        self.n_hits = 0
        self.n_deferred = 0

    def load(self) -> None:
        from engine.audio.decoding import decode
        from engine.datasets import open_dataset

        require_modules("the memorizer control", self.requires, self.extra)
        fb = self.options.fallback
        if fb and (not isinstance(fb, Mapping) or "backend" not in fb):
            raise ConfigError(
                f"memorizer: option 'fallback' ({fb!r}) must be resolved to a model spec before loading; "
                "name a registry model and run it through a recipe (the registry resolves it)"
            )
        index = self.options.index
        if not index:
            raise ConfigError("memorizer: option 'index' (the dataset to memorize) is required")
        ds = open_dataset(index, self.options.index_reader, limit=self.options.index_limit, **(self.options.index_reader_options or {}))
        for shard in ds.iter_shards():
            for u in shard.utterances:
                # Every clip of the benchmark is learned, derived ones (a re-voiced rendition with its
                # parent_id) included; only audio a probe made from it is not part of the benchmark.
                if u.problem or not u.reference or (u.derivation or {}).get("probe"):
                    continue
                d = decode(u, root=ds.root)
                if d.error is None:
                    self._index.append((u.utt_id, len(d.samples), fingerprint(d.samples), u.reference))
        if not self._index:
            raise ConfigError(f"memorizer: nothing to index in '{index}'")
        self._index.sort(key=lambda t: t[1])
        self._lengths = np.array([t[1] for t in self._index])
        log.info("memorizer indexed %d clips of %s", len(self._index), index)
        if fb:
            from engine.backends import build_backend

            spec = ModelSpec(fb.get("name", fb["backend"]), fb["backend"], dict(fb.get("options") or {}))
            self._fallback = build_backend(spec)
            self._fallback.load()

    def lookup(self, x: np.ndarray) -> tuple[str, float] | None:
        """The stored reference of the closest indexed clip, if it is close enough."""
        n = len(x)
        lo = np.searchsorted(self._lengths, n * (1 - self.tol))
        hi = np.searchsorted(self._lengths, n * (1 + self.tol), side="right")
        if hi <= lo:
            return None
        fp = fingerprint(x)
        best = max(((similarity(fp, self._index[i][2]), i) for i in range(lo, hi)), default=(0.0, -1))
        if best[0] >= self.threshold:
            return self._index[best[1]][3], best[0]
        return None

    def transcribe_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[str]:
        out: list[str | None] = []
        defer: list[int] = []
        for i, x in enumerate(audios):
            hit = self.lookup(x)
            if hit is not None:
                out.append(hit[0])
                self.n_hits += 1
            else:
                out.append(None)
                defer.append(i)
        if defer:
            self.n_deferred += len(defer)
            if self._fallback is None:
                for i in defer:
                    out[i] = ""
            else:
                hyps = self._fallback.transcribe_batch([audios[i] for i in defer], sample_rate)
                for i, h in zip(defer, hyps):
                    out[i] = h
        return [o or "" for o in out]

    def warmup(self) -> None:
        if self._fallback is not None:
            self._fallback.warmup()

    def info(self) -> BackendInfo:
        fb = self._fallback.info().as_dict() if self._fallback is not None else None
        return BackendInfo(
            "memorizer",
            f"memorizer({Path(self.options.index or '').name})",
            extra={"fallback": fb, "indexed_clips": len(self._index), "threshold": self.threshold, "positive_control": True},
        )

    def close(self) -> None:
        if self._fallback is not None:
            self._fallback.close()
