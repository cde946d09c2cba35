"""Whisper in transformers (openai/whisper-*, distil-whisper, CrisperWhisper, lite-whisper).

Each checkpoint runs as the Open ASR Leaderboard runs it (docs/loaders.md has the table per model):

* Whisper, distil-whisper, CrisperWhisper (leaderboard ``transformers/run_eval.py``): the
  generation config's ``forced_decoder_ids``, ``suppress_tokens`` and ``begin_suppress_tokens``
  are cleared; ``language`` and ``task`` are passed only to multilingual checkpoints
  (``generation_config.is_multilingual``); no token cap beyond the generation config's
  ``max_length``. Clips up to 30 s: the feature extractor with ``padding="longest"``, i.e. log-Mel
  features of the clip's own length, which ``generate`` pads with zeros to the 3000-frame window.
  The leaderboard computes them over the batch padded to its longest clip, which makes a clip's
  text depend on its batch; here each clip's features are computed alone (the leaderboard at
  batch 1), then stacked, so one ``generate`` still serves the batch.
* lite-whisper (leaderboard ``liteASR/run_eval.py`` and its model card): loaded through
  ``AutoModel`` with its own code (``trust_remote_code``) and the base Whisper processor; features
  of the audio padded to 30 s (the processor's default); English transcription forced (the
  script's ``forced_decoder_ids``; ``language``/``task`` give the same prompt tokens); the
  checkpoint's suppressed tokens kept; at most 224 new tokens.

Clips over 30 s use Whisper's sequential long-form generation with timestamps, one clip at a time
(the leaderboard's ``--longform`` mode; its short-form runs would cut such a clip at 30 s).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.backends.asr.families.base import FamilyLoader, trim_at
from engine.data import SAMPLE_RATE

_WINDOW_S = 30.0
_WINDOW_FRAMES = 3000  # log-Mel frames in Whisper's 30 s window


@dataclass(frozen=True)
class WhisperReference:
    """What a Whisper checkpoint's reference inference does differently from the others."""

    script: str
    #: features of the audio padded to 30 s (the processor's default) rather than of the clip's own length
    pad_audio_to_window: bool
    #: clear the generation config's forced_decoder_ids, suppress_tokens and begin_suppress_tokens
    clear_suppression: bool
    #: new-token cap (None: the generation config's max_length)
    max_new_tokens: int | None
    #: the model class it loads through
    auto_class: str


_REFERENCES = {
    "whisper": WhisperReference("Open ASR Leaderboard transformers/run_eval.py", False, True, None, "AutoModelForSpeechSeq2Seq"),
    "lite-whisper": WhisperReference("Open ASR Leaderboard liteASR/run_eval.py; lite-whisper model card", True, False, 224, "AutoModel"),
}


class WhisperFamily(FamilyLoader):
    """Batched Whisper generate on 30 s windows; long-form for longer clips."""

    name = "whisper"
    # lite-whisper (efficient-speech/lite-whisper-*) is remote code whose config says 'lite-whisper'
    model_types = frozenset({"whisper", "lite-whisper"})

    @classmethod
    def cuda_dtype_for(cls, model_type: str) -> str:
        # the leaderboard's liteASR script loads lite-whisper in float16; its transformers script, Whisper in bfloat16
        return "float16" if model_type == "lite-whisper" else "bfloat16"

    @property
    def reference(self) -> WhisperReference:
        return _REFERENCES.get(self.model_type, _REFERENCES["whisper"])

    def load(self, source: str, config: Any, common: Mapping[str, Any], model_kwargs: Mapping[str, Any]) -> None:
        import transformers

        self.check_type(config)
        # lite-whisper's auto_map names only AutoConfig and AutoModel: its card loads it through AutoModel
        self.model = getattr(transformers, self.reference.auto_class).from_pretrained(source, **model_kwargs)
        self.processor = transformers.AutoProcessor.from_pretrained(self.processor_source(source), **common)
        if self.reference.clear_suppression:
            generation = self.model.generation_config
            generation.forced_decoder_ids = None
            generation.suppress_tokens = []
            generation.begin_suppress_tokens = []
        self.place()

    def _multilingual(self) -> bool:
        return bool(getattr(self.model.generation_config, "is_multilingual", False)) if self.model is not None else True

    def _kwargs(self) -> dict[str, Any]:
        defaults: dict[str, Any] = {"num_beams": 1}
        if self.reference.max_new_tokens:
            defaults["max_new_tokens"] = self.reference.max_new_tokens
        kwargs = self.generate_kwargs(defaults)
        if self._multilingual():  # English-only checkpoints take no language or task (the leaderboard's rule)
            for key, value in (("language", self.options.language), ("task", self.options.task)):
                if value:
                    kwargs[key] = value
        return kwargs

    def token_ids(self, clips: Sequence[np.ndarray]) -> list[list[list[int]]]:
        import torch

        window = int(_WINDOW_S * SAMPLE_RATE)
        extractor = self.processor.feature_extractor
        kwargs = self._kwargs()
        rows: list[list[list[int]]] = [[] for _ in clips]
        short = [i for i, c in enumerate(clips) if c.shape[0] <= window]
        if short:
            if self.reference.pad_audio_to_window:
                feats = extractor([clips[i] for i in short], sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
            else:  # each clip's own log-Mel frames, zero-padded to the window as generate() pads them
                own = [extractor(clips[i], sampling_rate=SAMPLE_RATE, padding="longest", return_tensors="pt").input_features for i in short]
                feats = torch.cat([torch.nn.functional.pad(f, (0, _WINDOW_FRAMES - f.shape[-1])) for f in own])
            out = self.model.generate(feats.to(self.device, self.model.dtype), **kwargs).cpu().tolist()
            eos = self._eos()
            for i, row in zip(short, out):  # generate drops each row's final eos; a batch pads shorter rows with it
                rows[i] = [trim_at(row, eos, keep_eos=False)]
        for i, clip in enumerate(clips):
            if clip.shape[0] > window:
                feats = extractor(
                    clip, sampling_rate=SAMPLE_RATE, truncation=False, padding="longest", return_attention_mask=True, return_tensors="pt"
                )
                out = self.model.generate(
                    feats.input_features.to(self.device, self.model.dtype),
                    attention_mask=feats.attention_mask.to(self.device),
                    return_timestamps=True,
                    **kwargs,
                )
                rows[i] = [list(map(int, out[0].cpu().tolist()))]
        return rows

    def _eos(self) -> int | None:
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        if isinstance(eos, list):
            eos = eos[0] if eos else None
        return None if eos is None else int(eos)

    def texts(self, ids: Sequence[Sequence[Sequence[int]]]) -> list[str]:
        return [str(self.processor.batch_decode([list(rows[0])], skip_special_tokens=True)[0]) for rows in ids]

    def settings(self) -> dict[str, Any]:
        kwargs = self._kwargs()
        beams = int(kwargs.get("num_beams", 1))
        ref = self.reference
        forced = [f"<|{kwargs[k]}|>" for k in ("language", "task") if k in kwargs]
        return {
            "reference": ref.script,
            "prompt": "decoder prompt <|startoftranscript|>" + "".join(forced) + " (the rest from the checkpoint's generation_config)",
            "language_forced": "language" in kwargs,
            "decoding": "greedy" if beams == 1 else f"beam search ({beams})",
            "generate_kwargs": {k: v for k, v in kwargs.items() if isinstance(v, (int, float, str, bool))},
            "features": "audio padded to 30 s" if ref.pad_audio_to_window else "the clip's own log-Mel frames, zero-padded to 3000",
            "suppression": "cleared (forced_decoder_ids, suppress_tokens, begin_suppress_tokens)"
            if ref.clear_suppression
            else "the checkpoint's generation_config",
            "long_form": "clips over 30 s: sequential long-form generate with timestamps, one clip at a time",
            "post_processing": "cut before the first eos (a batch's padding), batch_decode(skip_special_tokens=True), strip",
        }
