"""CTC encoders in transformers: wav2vec2, HuBERT, data2vec-audio, WavLM, MMS (with its language adapter).

One padded forward pass per batch with an attention mask; each clip's logits are cut to its own
frame count before greedy decoding, so a clip's text does not depend on its batch. Where padding
reaches a clip's valid frames, each clip gets a forward pass of its own instead: a feature encoder
with a GroupNorm over time (``feat_extract_norm: group``: wav2vec2-base, HuBERT-base) counts the
padding in its statistics; checkpoints trained without an attention mask (wav2vec2-base again,
which expects zero padding and no mask) attend to it; data2vec-audio's stack of positional
convolutions (each followed by a layer norm) carries it into the valid frames.
MMS (facebook/mms-1b-all) follows its model card: ``tokenizer.set_target_lang(lang)`` and
``model.load_adapter(lang)`` with the entry's ``target_lang`` (ISO 639-3, e.g. ``eng``; the
leaderboard loads the checkpoint as published, whose default adapter and vocabulary are English).
Decoding is the leaderboard's: argmax, then ``decode`` without ``skip_special_tokens`` (the blank
is the pad token, dropped after repeats collapse). The leaderboard decodes a batch's padded
frames too; here each clip's logits are cut to its own frames (the leaderboard at batch 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from engine.backends.asr.families.base import FamilyLoader
from engine.data import SAMPLE_RATE
from engine.errors import BackendUnavailable

#: Architectures whose encoder mixes padding into valid frames: one clip per forward pass.
_PADDING_LEAKS = frozenset({"data2vec-audio"})


class CTCFamily(FamilyLoader):
    """Greedy CTC over a padded batch, cut per clip."""

    name = "ctc"

    @classmethod
    def drives(cls, model_type: str) -> bool:
        from transformers.models.auto.modeling_auto import MODEL_FOR_CTC_MAPPING_NAMES

        return model_type in MODEL_FOR_CTC_MAPPING_NAMES

    def load(self, source: str, config: Any, common: Mapping[str, Any], model_kwargs: Mapping[str, Any]) -> None:
        import transformers

        self.check_type(config)
        self.model = transformers.AutoModelForCTC.from_pretrained(source, **model_kwargs)
        self.processor = transformers.AutoProcessor.from_pretrained(self.processor_source(source), **common)
        lang = self.options.target_lang
        if lang:
            tokenizer = getattr(self.processor, "tokenizer", None)
            if tokenizer is None or not hasattr(tokenizer, "set_target_lang") or not hasattr(self.model, "load_adapter"):
                raise BackendUnavailable(
                    f"option target_lang={lang!r} needs an MMS-style checkpoint with language adapters; {source} has none"
                )
            try:
                tokenizer.set_target_lang(lang)
                self.model.load_adapter(lang)
            except (OSError, ValueError) as exc:
                raise BackendUnavailable(f"{source}: no language adapter '{lang}' ({exc}); MMS uses ISO 639-3 codes such as 'eng'") from exc
        self.place()

    def _padding_leaks(self) -> bool:
        """Whether a clip's valid frames would see its batch's padding (see the module docstring)."""
        extractor = getattr(self.processor, "feature_extractor", self.processor)
        return (
            self.model_type in _PADDING_LEAKS
            or getattr(self.model.config, "feat_extract_norm", None) == "group"
            or not getattr(extractor, "return_attention_mask", True)
        )

    def token_ids(self, clips: Sequence[np.ndarray]) -> list[list[list[int]]]:
        if len(clips) > 1 and self._padding_leaks():
            return [self._forward([c])[0] for c in clips]
        return self._forward(clips)

    def _forward(self, clips: Sequence[np.ndarray]) -> list[list[list[int]]]:
        """Greedy (argmax) ids of each clip's own frames: one row per clip."""
        extractor = getattr(self.processor, "feature_extractor", self.processor)
        inputs = extractor(list(clips), sampling_rate=SAMPLE_RATE, padding=True, return_attention_mask=True, return_tensors="pt")
        attention = inputs.get("attention_mask")
        model_inputs = self.to_device(inputs)
        if not getattr(extractor, "return_attention_mask", True) and "input_values" in model_inputs:
            # checkpoints trained without a mask (wav2vec2-base) expect zero padding and no mask
            model_inputs.pop("attention_mask", None)
        logits = self.model(**model_inputs).logits
        ids = logits.argmax(dim=-1).cpu()
        if attention is not None and hasattr(self.model, "_get_feat_extract_output_lengths"):
            lengths = self.model._get_feat_extract_output_lengths(attention.sum(-1)).tolist()
        else:
            lengths = [ids.shape[1]] * ids.shape[0]
        return [[row[: int(n)].tolist()] for row, n in zip(ids, lengths)]

    def texts(self, ids: Sequence[Sequence[Sequence[int]]]) -> list[str]:
        # batch_decode without skip_special_tokens, as the leaderboard: skipping them first would merge doubled letters
        tokenizer = getattr(self.processor, "tokenizer", self.processor)
        return [str(tokenizer.decode(list(rows[0]))) for rows in ids]

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "prompt": None,
            "decoding": "greedy CTC",
            "post_processing": "collapse repeats, drop blanks (tokenizer.decode), cut to each clip's frames, strip",
        }
        out["batching"] = (
            "one clip per forward pass (padding would reach valid frames: group norm, no attention mask or positional convolutions)"
            if self._padding_leaks()
            else "padded batch with attention mask, logits cut per clip"
        )
        if self.options.target_lang:
            out["target_lang"] = self.options.target_lang
            out["adapter"] = f"load_adapter({self.options.target_lang!r})"
        return out
