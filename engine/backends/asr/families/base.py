"""The one interface every family inside the ``transformers`` backend implements.

The backend reads the checkpoint's config, picks the family, the device and the precision (the
family declares its reference's CUDA precision, ``cuda_dtype_for``; ``engine/backends/device.py``
makes the one decision) and hands the family its options; the family loads model and processor
the way its reference inference does, transcribes a batch, and says which prompt, decoding
settings and post-processing it used (``settings()``, recorded in ``backend_info`` beside every
result).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from engine.backends.base import BackendOptions
from engine.backends.device import DTYPE_CHOICES
from engine.errors import BackendUnavailable
from engine.options import option

FAMILIES = ("whisper", "ctc", "encoder-decoder", "speech-llm", "seq2seq-pipeline")
"""The family loaders the transformers backend knows (``family: auto`` picks one from config.model_type)."""


@dataclass(frozen=True)
class TransformersOptions(BackendOptions):
    """The transformers backend's options: the checkpoint, where it runs, and the family's decoding overrides."""

    model: str = option(doc="hub id or local model directory")
    device: str = option("auto", "auto, cpu, cuda, cuda:N or mps")
    dtype: str = option("auto", "auto: the family's reference precision on CUDA, float32 elsewhere", choices=("auto", *DTYPE_CHOICES))
    batch_size: int | None = option(None, "clips per forward pass; null: the batch the caller passes", ge=1, le=100_000)
    language: str | None = option(None, "generation language (Whisper: for multilingual checkpoints; Cohere: its prompt language)")
    task: Literal["transcribe", "translate"] | None = option(None, "Whisper task for multilingual checkpoints")
    num_beams: int | None = option(None, "beams; null: the family's reference setting (greedy for most)", ge=1, le=64)
    max_new_tokens: int | None = option(None, "cap on generated tokens; null: the family's reference cap", ge=1, le=100_000)
    generate_kwargs: dict[str, Any] | None = option(None, "extra keyword arguments for generate()")
    revision: str | None = option(None, "hub revision (branch, tag or commit)")
    local_files_only: bool = option(False, "never contact the hub")
    trust_remote_code: bool = option(False, "set by the registry from the entry's trust_remote_code: true")
    attn_implementation: str | None = option(None, "transformers attention implementation (sdpa, eager, ...)")
    family: str = option("auto", "the family loader; auto picks it from config.model_type", choices=("auto", *FAMILIES))
    processor: str | None = option(None, "processor source when the checkpoint ships none (lite-whisper: its base Whisper)")
    prompt: str | None = option(None, "speech-LLMs: replaces the reference instruction")
    system_prompt: str | None = option(None, "speech-LLMs with a system turn (Granite Speech 3.3): its text; null: no system turn")
    target_lang: str | None = option(None, "MMS: language adapter (ISO 639-3, e.g. eng)")
    punctuation: bool = option(False, "Cohere Transcribe: punctuation and casing on (false: off, as the leaderboard runs it)")


class FamilyLoader(ABC):
    """Load, prompt, decode and post-process one model family in transformers."""

    name: ClassVar[str] = "family"
    #: ``config.model_type`` values this family drives (``auto`` picks the family from them).
    model_types: ClassVar[frozenset[str]] = frozenset()
    #: precision on CUDA under ``dtype: auto``: the Open ASR Leaderboard's transformers script loads
    #: every checkpoint in bfloat16 unless its run script says otherwise (families override per model)
    cuda_dtype: ClassVar[str] = "bfloat16"

    def __init__(self, options: TransformersOptions, torch: Any, device: str, dtype: Any) -> None:
        self.options = options
        self.torch = torch
        self.device = device
        self.dtype = dtype
        self.model: Any = None
        self.processor: Any = None
        self.model_type = ""

    @classmethod
    def drives(cls, model_type: str) -> bool:
        return model_type in cls.model_types

    @classmethod
    def cuda_dtype_for(cls, model_type: str) -> str:
        """The precision the reference inference of ``model_type`` uses on CUDA (``dtype: auto``)."""
        return cls.cuda_dtype

    @abstractmethod
    def load(self, source: str, config: Any, common: Mapping[str, Any], model_kwargs: Mapping[str, Any]) -> None:
        """Load model and processor from ``source``; raise ``BackendUnavailable`` with the fix."""

    def transcribe(self, clips: Sequence[np.ndarray]) -> list[str]:
        """Raw text per clip, one forward (or generate) call for the whole batch."""
        return self.texts(self.token_ids(clips))

    def token_ids(self, clips: Sequence[np.ndarray]) -> list[list[list[int]]]:
        """Per clip, the token ids of every model output row that is the clip's (one row; a clip
        split into chunks, one row per chunk), cut to what the clip alone would produce. The
        reference tests compare these with the reference inference token for token."""
        raise NotImplementedError(f"family '{self.name}' does not expose token ids; it overrides transcribe()")

    def texts(self, ids: Sequence[Sequence[Sequence[int]]]) -> list[str]:
        """The text of each clip from its :meth:`token_ids` rows (decoding and post-processing)."""
        raise NotImplementedError(f"family '{self.name}' does not expose token ids; it overrides transcribe()")

    def settings(self) -> dict[str, Any]:
        """Prompt, decoding settings and post-processing as used (recorded with every result)."""
        return {}

    # -- helpers the families share ------------------------------------------------------------
    def processor_source(self, source: str) -> str:
        """Where the processor comes from: the checkpoint, or the option ``processor`` (lite-whisper
        ships weights only and uses its base model's processor, per its model card)."""
        return self.options.processor or source

    def generate_kwargs(self, defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The family's model-card decoding settings, overridden by the entry's options."""
        kwargs: dict[str, Any] = dict(defaults or {})
        if self.options.num_beams is not None:
            kwargs["num_beams"] = self.options.num_beams
        if self.options.max_new_tokens:
            kwargs["max_new_tokens"] = self.options.max_new_tokens
        kwargs.update(self.options.generate_kwargs or {})
        return kwargs

    def to_device(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """Move a processor's output to the model's device; floating tensors take the model's dtype."""
        out: dict[str, Any] = {}
        for key, value in inputs.items():
            if hasattr(value, "to"):
                value = value.to(self.device)
                if value.is_floating_point():
                    value = value.to(self.model.dtype)
            out[key] = value
        return out

    def place(self) -> None:
        """Cast to the requested device/dtype (older releases ignore ``dtype=`` at load) and set eval."""
        self.model.to(device=self.device, dtype=self.dtype)
        self.model.eval()

    def check_type(self, config: Any) -> None:
        if not self.drives(str(config.model_type)):
            raise BackendUnavailable(
                f"family '{self.name}' does not drive model_type '{config.model_type}' "
                f"(it drives {', '.join(sorted(self.model_types))}): fix 'family' in the registry entry or use family: auto"
            )
        self.model_type = str(config.model_type)


def trim_at(row: Sequence[int], eos: int | None, keep_eos: bool = True) -> list[int]:
    """``row`` up to its first ``eos`` (what follows is a batch's padding), else whole; the eos
    itself kept unless ``keep_eos`` is false (Whisper's generate drops a clip's final eos)."""
    out = list(row)
    if eos is not None and eos in out:
        return out[: out.index(eos) + (1 if keep_eos else 0)]
    return out
