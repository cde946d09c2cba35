"""Audio encoder-decoders in transformers: Moonshine (incl. streaming), Kyutai STT, Cohere Transcribe.

Each does what its reference inference does (docs/loaders.md has the table per model):

* Moonshine / Moonshine streaming (Open ASR Leaderboard ``transformers/run_eval.py``): the
  processor pads the batch (streaming: to a multiple of 80 samples) with an attention mask;
  ``generate`` with a cap of ``len(clip) * 6.5 // 16000 + 2`` new tokens per clip (the leaderboard
  generates to the batch's largest cap and replaces tokens past each clip's own cap with eos;
  here each row is cut at its cap, which is the same text). Each clip gets a ``generate`` of its
  own: padding reaches a shorter clip's encoder frames (Moonshine's GroupNorm after the first
  convolution takes its statistics over the whole padded length; the streaming encoder's last
  frames see it), so in a batch its words would depend on the batch's longest clip.
* Kyutai STT (``kyutai/stt-*-trfs``; transformers docs; the leaderboard's moshi script): clips are
  resampled to the 24 kHz of the Mimi codec; the feature extractor adds the checkpoint's silence
  prefix (1 s for stt-2.6b-en) before the audio and its text delay plus one second (2.5 + 1 s)
  after it, and ``generate`` runs one text step per 80 ms frame of all that. The text stream lags
  the audio by the delay, so every frame up to the end of the delay padding is kept: a clip's
  row is cut at ``1 + (prefix + clip + delay padding) // frame`` tokens (the start token and one
  per frame), which is what the clip yields alone; later steps of a batch only saw padding.
* Cohere Transcribe (model card; leaderboard ``run_eval.py``): ``processor(audio, language,
  punctuation)`` builds the decoder prompt and splits clips over 30 s (``max_audio_clip_s`` 35 -
  ``overlap_chunk_second`` 5) at the quietest point into chunks of up to 35 s; every chunk is a
  row of one ``generate`` (``max_new_tokens`` 500, as the leaderboard); the chunks' texts are
  joined per clip as ``CohereAsrProcessor.decode(audio_chunk_index=...)`` does, and brackets are
  replaced by spaces as the leaderboard does (its normalizer would delete their content).
  Punctuation is off by default, as the leaderboard runs it. The model class is transformers'
  own (``cohere_asr``); the repository's ``auto_map`` remote code is not run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from engine.backends.asr.families.base import FamilyLoader, trim_at
from engine.data import SAMPLE_RATE

_MOONSHINE = frozenset({"moonshine", "moonshine_streaming"})
_TOKENS_PER_S = 6.5  # Moonshine: 6.5 tokens per second of audio (+2 for the start and end tokens)
_COHERE_MAX_NEW_TOKENS = 500  # leaderboard transformers/run_cohere.sh and submit_jobs_cohere.sh
_NO_SPACE_LANGUAGES = frozenset({"ja", "zh"})  # CohereAsrProcessor joins their chunks without a space


def moonshine_token_cap(n_samples: int) -> int:
    """New tokens a Moonshine clip may produce: the leaderboard's ``int(len(clip) * 6.5 // 16000 + 2)``."""
    return int(n_samples * _TOKENS_PER_S // SAMPLE_RATE + 2)


def remove_brackets(text: str) -> str:
    """The leaderboard's Cohere post-processing: parentheses become spaces, runs of whitespace one space."""
    return re.sub(r"\s+", " ", text.replace("(", " ").replace(")", " "))


class EncoderDecoderFamily(FamilyLoader):
    """Processor features, encoder-decoder ``generate``, per-clip rows, decode."""

    name = "encoder-decoder"
    model_types = frozenset({"moonshine", "moonshine_streaming", "kyutai_speech_to_text", "cohere_asr"})

    @classmethod
    def cuda_dtype_for(cls, model_type: str) -> str:
        # the leaderboard runs Moonshine in float16 (run_moonshine.sh), Kyutai (moshi script) and Cohere in bfloat16
        return "float16" if model_type in _MOONSHINE else "bfloat16"

    def load(self, source: str, config: Any, common: Mapping[str, Any], model_kwargs: Mapping[str, Any]) -> None:
        import transformers

        self.check_type(config)
        if self.model_type == "kyutai_speech_to_text":
            self.model = transformers.KyutaiSpeechToTextForConditionalGeneration.from_pretrained(source, **model_kwargs)
        else:
            self.model = transformers.AutoModelForSpeechSeq2Seq.from_pretrained(source, **model_kwargs)
        self.processor = transformers.AutoProcessor.from_pretrained(self.processor_source(source), **common)
        self.place()

    # -- generate rows ---------------------------------------------------------------------------
    def token_ids(self, clips: Sequence[np.ndarray]) -> list[list[list[int]]]:
        if self.model_type == "kyutai_speech_to_text":
            return self._kyutai(clips)
        if self.model_type == "cohere_asr":
            return self._cohere(clips)
        if len(clips) > 1:  # padding reaches a shorter clip's encoder frames: one generate per clip
            return [self._moonshine([c])[0] for c in clips]
        return self._moonshine(clips)

    def _generate(self, inputs: Mapping[str, Any], defaults: Mapping[str, Any]) -> list[list[int]]:
        kwargs = self.generate_kwargs({"num_beams": 1, "do_sample": False, **defaults})
        return [list(map(int, row)) for row in self.model.generate(**self.to_device(inputs), **kwargs).cpu().tolist()]

    def _eos(self) -> int | None:
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        if isinstance(eos, list):
            eos = eos[0] if eos else None
        return None if eos is None else int(eos)

    def _moonshine(self, clips: Sequence[np.ndarray]) -> list[list[list[int]]]:
        inputs = self.processor(
            audio=list(clips), sampling_rate=SAMPLE_RATE, padding="longest", return_attention_mask=True, return_tensors="pt"
        )
        caps = [moonshine_token_cap(c.shape[0]) for c in clips]
        user_cap = self.options.max_new_tokens
        rows = self._generate(inputs, {"max_new_tokens": max(caps)} if not user_cap else {})
        eos = self._eos()
        # the start token, then at most the clip's own cap (tokens past it were the batch's, not the clip's)
        return [[trim_at(row[: 1 + (int(user_cap) if user_cap else cap)], eos)] for row, cap in zip(rows, caps)]

    def _kyutai(self, clips: Sequence[np.ndarray]) -> list[list[list[int]]]:
        import soxr

        extractor = self.processor.feature_extractor
        rate = int(extractor.sampling_rate)
        if rate != SAMPLE_RATE:  # the Mimi codec runs at 24 kHz
            clips = [np.asarray(soxr.resample(c, SAMPLE_RATE, rate), dtype=np.float32) for c in clips]
        inputs = self.processor(audio=list(clips), sampling_rate=rate, padding=True, return_tensors="pt")
        # what the feature extractor adds around every clip: the silence prefix, and the delay + 1 s
        padding = int(self._silence_prefix_s() * rate) + int((self._delay_s() + 1.0) * rate)
        frame = int(self.model.config.codec_config.frame_size)
        rows = self._generate(inputs, {})
        return [[row[: 1 + (c.shape[0] + padding) // frame]] for row, c in zip(rows, clips)]

    def _silence_prefix_s(self) -> float:
        return float(getattr(self.processor.feature_extractor, "audio_silence_prefix_seconds", 0.0) or 0.0)

    def _delay_s(self) -> float:
        return float(getattr(self.processor.feature_extractor, "audio_delay_seconds", 0.0) or 0.0)

    def _language(self) -> str:
        return self.options.language or "en"

    def _cohere(self, clips: Sequence[np.ndarray]) -> list[list[list[int]]]:
        inputs = self.processor(
            audio=list(clips),
            sampling_rate=SAMPLE_RATE,
            language=self._language(),
            punctuation=self.options.punctuation,
            return_tensors="pt",
        )  # a boolean: the typed option layer checked it
        chunk_index = list(inputs.pop("audio_chunk_index"))
        rows = self._generate(inputs, {"max_new_tokens": _COHERE_MAX_NEW_TOKENS})
        eos = self._eos()
        per_clip: list[list[tuple[int, list[int]]]] = [[] for _ in clips]
        for (sample, chunk), row in zip(chunk_index, rows):
            per_clip[int(sample)].append((0 if chunk is None else int(chunk), trim_at(row, eos)))
        return [[row for _, row in sorted(chunks, key=lambda item: item[0])] for chunks in per_clip]

    # -- text --------------------------------------------------------------------------------------
    def texts(self, ids: Sequence[Sequence[Sequence[int]]]) -> list[str]:
        if self.model_type == "cohere_asr":
            return [remove_brackets(self._join_chunks([self._decode(r) for r in rows])) for rows in ids]
        if self.model_type == "kyutai_speech_to_text":  # the row's first token is the text start token, not text
            return [self._decode(rows[0][1:]) for rows in ids]
        return [self._decode(rows[0]) for rows in ids]

    def _decode(self, row: Sequence[int]) -> str:
        return str(self.processor.batch_decode([list(row)], skip_special_tokens=True)[0])

    def _join_chunks(self, parts: list[str]) -> str:
        """One text per clip from its chunks' texts, as ``CohereAsrProcessor._reassemble_chunk_texts``
        joins them: empty chunks dropped, the first right-stripped, the others stripped, joined by a
        space (no space for Japanese and Chinese). A clip whose chunks are all empty is ''."""
        if len(parts) == 1:
            return parts[0]
        kept = [p for p in parts if p and p.strip()]
        if not kept:
            return ""
        separator = "" if self._language() in _NO_SPACE_LANGUAGES else " "
        return separator.join([kept[0].rstrip()] + [p.strip() for p in kept[1:]])

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {"decoding": "greedy"}
        if self.model_type in _MOONSHINE:
            out["prompt"] = None
            out["generate_kwargs"] = self.generate_kwargs({"num_beams": 1, "do_sample": False})
            out["length_cap"] = "len(clip) * 6.5 // 16000 + 2 new tokens per clip (Open ASR Leaderboard run_eval.py)"
            out["post_processing"] = "cut at the clip's cap and first eos, batch_decode(skip_special_tokens=True), strip"
            out["batching"] = "one clip per generate (padding would reach a clip's encoder frames)"
        elif self.model_type == "cohere_asr":
            out["prompt"] = f"decoder prompt for language={self._language()}, punctuation={self.options.punctuation}"
            out["generate_kwargs"] = self.generate_kwargs({"num_beams": 1, "do_sample": False, "max_new_tokens": _COHERE_MAX_NEW_TOKENS})
            out["long_form"] = (
                "clips over max_audio_clip_s - overlap_chunk_second (30 s) are split by the processor at the quietest "
                "point into chunks of up to 35 s, decoded as rows of one generate and joined per clip"
            )
            out["post_processing"] = (
                "decode(skip_special_tokens=True) per chunk, chunks joined as CohereAsrProcessor does, "
                "brackets replaced by spaces (leaderboard remove_brackets), strip"
            )
        else:
            out["prompt"] = None
            out["generate_kwargs"] = self.generate_kwargs({"num_beams": 1, "do_sample": False})
            out["resampled_to_hz"] = int(getattr(self.processor.feature_extractor, "sampling_rate", 24000)) if self.processor else 24000
            out["silence_prefix_s"] = self._silence_prefix_s() if self.processor else None
            out["delay_s"] = self._delay_s() if self.processor else None
            out["length_cap"] = "one text token per codec frame of silence prefix + clip + delay + 1 s (the clip alone's length)"
            out["post_processing"] = "drop the start token, batch_decode(skip_special_tokens=True), strip"
        return out
