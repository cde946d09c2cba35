"""Hugging Face transformers backend: any speech-recognition model id or local directory.

Three paths, chosen from the model's config:

* CTC models (wav2vec2, HuBERT, WavLM, MMS, Parakeet-CTC, ...): one padded forward pass per
  batch with an attention mask; each clip's logits are cut to its own frame count before greedy
  decoding, so a clip's text does not depend on what it was batched with.
* Whisper: batched ``generate`` on 30 s log-Mel windows; longer clips use Whisper's long-form
  generation (sequential windows with timestamps) one clip at a time.
* Everything else (speech-LLMs, other encoder-decoders): the ``automatic-speech-recognition``
  pipeline, which knows each model family's pre- and post-processing.

``transformers`` and ``torch`` are an optional extra, imported only in ``load()``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.availability import Availability, local_or_cached
from engine.backends.base import ASRBackend, BackendInfo, package_versions
from engine.backends.bundled import check_audio_batch, check_batch_size, check_options
from engine.data import SAMPLE_RATE
from engine.errors import BackendUnavailable, ConfigError

log = logging.getLogger(__name__)

_INSTALL_HINT = 'pip install ".[transformers]"'
_WHISPER_WINDOW_S = 30.0

_DEFAULTS: dict[str, Any] = {
    "model": None,
    "device": "auto",  # 'auto' | 'cpu' | 'cuda' | 'cuda:N' | 'mps'
    "dtype": "auto",  # 'auto' (float16 on CUDA, float32 elsewhere) | 'float32' | 'float16' | 'bfloat16'
    "batch_size": None,  # None: one forward pass per batch the caller passes
    "language": None,  # Whisper-style generation language, e.g. 'en'
    "task": None,  # 'transcribe' | 'translate' for multitask models
    "num_beams": 1,
    "max_new_tokens": None,
    "generate_kwargs": None,  # extra keyword arguments for generate()
    "revision": None,
    "local_files_only": False,
    "trust_remote_code": False,
    "attn_implementation": None,
}


class TransformersBackend(ASRBackend):
    """Any transformers ASR checkpoint: hub id (downloaded or cached) or local directory."""

    name = "transformers"
    requires = ("transformers", "torch")
    extra = "transformers"

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        model = str(options.get("model") or "")
        return local_or_cached(model, model, lambda p: (p / "config.json").is_file())

    def __init__(self, **options: Any) -> None:
        check_options(self.name, options, _DEFAULTS)
        merged = {**_DEFAULTS, **options}
        if not merged["model"]:
            raise ConfigError(f"{self.name} backend needs option 'model' (a hub id or a local model directory)")
        check_batch_size(self.name, merged["batch_size"])
        for key in ("num_beams",):
            value = merged[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{self.name}: option '{key}' must be a positive integer, got {value!r}")
        if merged["dtype"] not in ("auto", "float32", "float16", "bfloat16"):
            raise ConfigError(f"{self.name}: option 'dtype' must be auto, float32, float16 or bfloat16, got {merged['dtype']!r}")
        if merged["generate_kwargs"] is not None and not isinstance(merged["generate_kwargs"], Mapping):
            raise ConfigError(f"{self.name}: option 'generate_kwargs' must be a mapping")
        super().__init__(**merged)
        self._kind: str | None = None  # 'ctc' | 'whisper' | 'pipeline'
        self._model: Any = None
        self._processor: Any = None
        self._pipeline: Any = None
        self._device: str | None = None
        self._dtype_name: str | None = None
        self._torch: Any = None
        self._largest_batch = 0

    # -- loading -----------------------------------------------------------------------------
    def _source(self) -> str:
        model = str(self.options["model"])
        path = Path(model).expanduser()
        if path.exists():
            if not (path / "config.json").is_file():
                raise BackendUnavailable(f"{path} is not a transformers model directory (no config.json)")
            return str(path)
        if model.startswith((".", "/", "~")):
            raise BackendUnavailable(f"transformers model directory {path} does not exist")
        return model

    def _unavailable(self, source: str, exc: Exception) -> BackendUnavailable:
        if Path(source).is_dir():
            return BackendUnavailable(f"cannot load transformers model from {source}: {exc}")
        offline = os.environ.get("HF_HUB_OFFLINE") or self.options["local_files_only"]
        how = "the hub is switched off (HF_HUB_OFFLINE / local_files_only)" if offline else "it may be offline"
        return BackendUnavailable(
            f"cannot load '{source}' from the Hugging Face hub and it is not in the local cache ({how}): "
            f"download it where the hub is reachable (huggingface-cli download {source} --local-dir DIR) "
            f"and pass DIR as 'model'. Cause: {exc}"
        )

    def load(self) -> None:
        """Pick the device and dtype, read the config, and load model + processor for its family."""
        try:
            import torch
            import transformers
        except ImportError as exc:
            raise BackendUnavailable(f"transformers backend needs transformers and torch: {_INSTALL_HINT}") from exc
        self._torch = torch
        device = str(self.options["device"])
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype_name = str(self.options["dtype"])
        if dtype_name == "auto":
            dtype_name = "float16" if device.startswith("cuda") else "float32"
        dtype = getattr(torch, dtype_name)
        source = self._source()
        common: dict[str, Any] = {
            "revision": self.options["revision"],
            "local_files_only": bool(self.options["local_files_only"]),
            "trust_remote_code": bool(self.options["trust_remote_code"]),
        }
        try:
            config = transformers.AutoConfig.from_pretrained(source, **common)
        except (OSError, ValueError) as exc:
            raise self._unavailable(source, exc) from exc
        from transformers.models.auto.modeling_auto import MODEL_FOR_CTC_MAPPING_NAMES

        model_kwargs: dict[str, Any] = dict(common, dtype=dtype)
        if self.options["attn_implementation"]:
            model_kwargs["attn_implementation"] = self.options["attn_implementation"]
        try:
            if config.model_type in MODEL_FOR_CTC_MAPPING_NAMES:
                self._kind = "ctc"
                self._model = transformers.AutoModelForCTC.from_pretrained(source, **model_kwargs)
                self._processor = transformers.AutoProcessor.from_pretrained(source, **common)
            elif config.model_type == "whisper":
                self._kind = "whisper"
                self._model = transformers.AutoModelForSpeechSeq2Seq.from_pretrained(source, **model_kwargs)
                self._processor = transformers.AutoProcessor.from_pretrained(source, **common)
            else:
                self._kind = "pipeline"
                self._pipeline = transformers.pipeline(
                    "automatic-speech-recognition",
                    model=source,
                    device=device,
                    dtype=dtype,
                    model_kwargs={k: v for k, v in model_kwargs.items() if k not in ("dtype",) + tuple(common)},
                    **common,
                )
                self._model = self._pipeline.model
        except (OSError, ValueError) as exc:
            raise self._unavailable(source, exc) from exc
        if self._kind != "pipeline":
            # transformers releases before 'dtype' replaced 'torch_dtype' ignore the keyword: cast here
            # so the requested precision holds on every version
            self._model.to(device=device, dtype=dtype)
        self._model.eval()
        self._device = device
        # record the precision the weights really have, not the one asked for
        self._dtype_name = str(getattr(self._model, "dtype", dtype_name)).replace("torch.", "")
        log.info("loaded transformers %s (%s path) on %s/%s", source, self._kind, device, dtype_name)

    # -- transcription -----------------------------------------------------------------------
    def transcribe_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[str]:
        """Raw text per clip, ``batch_size`` clips per forward pass."""
        clips = check_audio_batch(audios, sample_rate, self.name)
        if self._model is None:
            raise BackendUnavailable(f"{self.name}: call load() before transcribing")
        size = int(self.options["batch_size"] or max(1, len(clips)))
        self._largest_batch = max(self._largest_batch, min(size, len(clips)))
        texts: list[str] = []
        with self._torch.inference_mode():
            for start in range(0, len(clips), size):
                chunk = clips[start : start + size]
                if self._kind == "ctc":
                    texts.extend(self._ctc(chunk))
                elif self._kind == "whisper":
                    texts.extend(self._whisper(chunk))
                else:
                    texts.extend(self._pipe(chunk))
        return [t.strip() for t in texts]

    def _ctc(self, clips: Sequence[np.ndarray]) -> list[str]:
        extractor = getattr(self._processor, "feature_extractor", self._processor)
        inputs = extractor(list(clips), sampling_rate=SAMPLE_RATE, padding=True, return_attention_mask=True, return_tensors="pt")
        attention = inputs.get("attention_mask")
        model_inputs = {k: v.to(self._device) for k, v in inputs.items()}
        for key, value in model_inputs.items():
            if value.is_floating_point():
                model_inputs[key] = value.to(self._model.dtype)
        if not getattr(extractor, "return_attention_mask", True) and "input_values" in model_inputs:
            # checkpoints trained without a mask (wav2vec2-base) expect zero padding and no mask
            model_inputs.pop("attention_mask", None)
        logits = self._model(**model_inputs).logits
        ids = logits.argmax(dim=-1).cpu()
        if attention is not None and hasattr(self._model, "_get_feat_extract_output_lengths"):
            lengths = self._model._get_feat_extract_output_lengths(attention.sum(-1)).tolist()
        else:
            lengths = [ids.shape[1]] * ids.shape[0]
        tokenizer = getattr(self._processor, "tokenizer", self._processor)
        return [tokenizer.decode(row[: int(n)].tolist()) for row, n in zip(ids, lengths)]

    def _generate_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"num_beams": int(self.options["num_beams"])}
        if self.options["max_new_tokens"]:
            kwargs["max_new_tokens"] = int(self.options["max_new_tokens"])
        if self.options["language"]:
            kwargs["language"] = self.options["language"]
        if self.options["task"]:
            kwargs["task"] = self.options["task"]
        kwargs.update(dict(self.options["generate_kwargs"] or {}))
        return kwargs

    def _whisper(self, clips: Sequence[np.ndarray]) -> list[str]:
        extractor = self._processor.feature_extractor
        window = int(_WHISPER_WINDOW_S * SAMPLE_RATE)
        short = [i for i, c in enumerate(clips) if c.shape[0] <= window]
        texts: list[str] = [""] * len(clips)
        kwargs = self._generate_kwargs()
        if short:
            feats = extractor([clips[i] for i in short], sampling_rate=SAMPLE_RATE, return_attention_mask=True, return_tensors="pt")
            ids = self._model.generate(
                feats.input_features.to(self._device, self._model.dtype),
                attention_mask=feats.attention_mask.to(self._device),
                **kwargs,
            )
            for i, text in zip(short, self._processor.batch_decode(ids, skip_special_tokens=True)):
                texts[i] = text
        for i, clip in enumerate(clips):
            if clip.shape[0] > window:
                feats = extractor(
                    [clip],
                    sampling_rate=SAMPLE_RATE,
                    truncation=False,
                    padding="longest",
                    return_attention_mask=True,
                    return_tensors="pt",
                )
                ids = self._model.generate(
                    feats.input_features.to(self._device, self._model.dtype),
                    attention_mask=feats.attention_mask.to(self._device),
                    return_timestamps=True,
                    **kwargs,
                )
                texts[i] = self._processor.batch_decode(ids, skip_special_tokens=True)[0]
        return texts

    def _pipe(self, clips: Sequence[np.ndarray]) -> list[str]:
        inputs = [{"raw": c, "sampling_rate": SAMPLE_RATE} for c in clips]
        outputs = self._pipeline(inputs, batch_size=len(clips), generate_kwargs=self._generate_kwargs() or None)
        return [str(o["text"]) for o in outputs]

    # -- bookkeeping -------------------------------------------------------------------------
    def info(self) -> BackendInfo:
        """Model, path taken, device/dtype, decoding settings and library versions."""
        extra: dict[str, Any] = {"path": self._kind, "num_beams": self.options["num_beams"]}
        if self._kind == "ctc":
            extra["decoding"] = "greedy CTC"
        else:
            extra["decoding"] = "greedy" if self.options["num_beams"] == 1 else f"beam search ({self.options['num_beams']})"
        if self.options["language"]:
            extra["language"] = self.options["language"]
        extra.update(package_versions("transformers", "torch"))
        return BackendInfo(
            backend=self.name,
            model_id=str(self.options["model"]),
            device=self._device or str(self.options["device"]),
            dtype=self._dtype_name or str(self.options["dtype"]),
            batch_size=int(self.options["batch_size"] or self._largest_batch or 1),
            extra=extra,
        )

    def close(self) -> None:
        """Drop the model and free accelerator memory."""
        self._model = self._processor = self._pipeline = None
        torch = self._torch
        if torch is not None and self._device and self._device.startswith("cuda"):
            torch.cuda.empty_cache()

    def __repr__(self) -> str:
        return f"TransformersBackend(model={self.options['model']!r}, device={self._device or self.options['device']!r})"
