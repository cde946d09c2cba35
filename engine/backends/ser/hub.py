"""Hub-hosted speech-emotion models: any transformers audio classifier, audEERING's dimensional
wav2vec2 regressor, and emotion2vec through funasr. All optional extras, imported in ``load()``.

What they measure: ``transformers-ser`` and ``emotion2vec`` give posteriors over the label set
their checkpoint was trained on (acted or podcast emotion categories; raw label names, mapped to
a common set only at scoring time). ``audeering-dim`` gives arousal, dominance and valence
regressed on MSP-Podcast ratings (roughly 0..1), not categories.
"""

from __future__ import annotations

import functools
import logging
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from engine.backends.base import BackendOptions, EmotionOutput, SERBackend
from engine.backends.device import resolve_device
from engine.backends.sv.hub import HubSEROptions, HubWeights, import_optional, model_id_option, prepare_clips, unreachable
from engine.data import SAMPLE_RATE
from engine.errors import BackendUnavailable
from engine.options import option

log = logging.getLogger(__name__)


class _HubSER(HubWeights, SERBackend):
    """An emotion model with hub weights (see :class:`~engine.backends.sv.hub.HubWeights`)."""

    OPTIONS: ClassVar[type[BackendOptions] | None] = HubSEROptions

    def predict_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[EmotionOutput]:
        if self._model is None:
            self.load()
        clips = prepare_clips(audios, sample_rate, self.min_duration_s, self.name)
        return self._predict(clips) if clips else []

    @abstractmethod
    def _predict(self, clips: list[np.ndarray]) -> list[EmotionOutput]:
        """Run the loaded model on prepared clips (each subclass knows its model)."""

    def _forward_logits(self, clips: list[np.ndarray]) -> np.ndarray:
        """Model logits for a batch; clip by clip for group-norm encoders, where padding is signal."""
        import torch

        if getattr(self._model.config, "feat_extract_norm", "layer") == "group" and len(clips) > 1:
            return np.concatenate([self._forward_logits([c]) for c in clips])
        feats = self._extractor(clips, sampling_rate=SAMPLE_RATE, padding=True, return_attention_mask=True, return_tensors="pt")
        feats = {k: v.to(self.device) for k, v in feats.items() if k in ("input_values", "attention_mask", "input_features")}
        with torch.inference_mode():
            out = self._model(**feats)
        logits = out.logits if hasattr(out, "logits") else out[1]
        return logits.float().cpu().numpy()


def _label_names(config: Any, n: int) -> list[str]:
    id2label = getattr(config, "id2label", None) or {}
    return [str(id2label.get(i, id2label.get(str(i), f"LABEL_{i}"))) for i in range(n)]


SUPERB_ER = "superb/wav2vec2-base-superb-er"
AUDEERING_DIM = "audeering/wav2vec2-large-robust-12-ft-emotion-msp-dim"
EMOTION2VEC = "emotion2vec/emotion2vec_plus_large"


@dataclass(frozen=True)
class TransformersSEROptions(HubSEROptions):
    """A transformers audio classifier's checkpoint, device, download folder and shortest clip."""

    model_id: str | None = model_id_option(SUPERB_ER)


@dataclass(frozen=True)
class AudeeringDimOptions(HubSEROptions):
    """The audEERING dimensional regressor's checkpoint, device, download folder and shortest clip."""

    model_id: str | None = model_id_option(AUDEERING_DIM)


class TransformersSER(_HubSER):
    """Any Hugging Face audio-classification checkpoint (e.g. a SUPERB ER or IEMOCAP model).

    Single-label classifiers give softmax posteriors over their own labels; checkpoints whose
    config says ``problem_type == "regression"`` give their outputs as dimensions instead.
    """

    name = "transformers-ser"
    default_model = SUPERB_ER
    OPTIONS = TransformersSEROptions
    install_hint = "pip install transformers torch"

    def load(self) -> None:
        self.device = resolve_device(self.device)
        transformers = import_optional("transformers", self.install_hint)
        try:
            self._extractor = transformers.AutoFeatureExtractor.from_pretrained(self.model_id, cache_dir=self.cache_dir)
            self._model = transformers.AutoModelForAudioClassification.from_pretrained(self.model_id, cache_dir=self.cache_dir)
        except (OSError, ValueError) as exc:
            raise unreachable(self.model_id, exc) from exc
        self._model.to(self.device).eval()

    def _predict(self, clips: list[np.ndarray]) -> list[EmotionOutput]:
        logits = self._forward_logits(clips)
        names = _label_names(self._model.config, logits.shape[1])
        if getattr(self._model.config, "problem_type", None) == "regression":
            return [EmotionOutput(dimensions={n: float(v) for n, v in zip(names, row, strict=True)}) for row in logits]
        z = logits - logits.max(axis=1, keepdims=True)
        probs = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        return [EmotionOutput(posteriors={n: float(p) for n, p in zip(names, row, strict=True)}) for row in probs]


@functools.lru_cache(maxsize=1)
def audeering_model_class() -> Any:
    """The wav2vec2 + regression-head module of the audEERING MSP-Podcast checkpoints.

    Built on first use so that importing this module needs neither torch nor transformers.
    Parameter names (``wav2vec2.*``, ``classifier.dense``, ``classifier.out_proj``) match the
    published checkpoint; the head is applied to the time-averaged last hidden state.
    """
    import torch
    from torch import nn
    from transformers.models.wav2vec2.modeling_wav2vec2 import Wav2Vec2Model, Wav2Vec2PreTrainedModel

    class DimHead(nn.Module):
        def __init__(self, config: Any) -> None:
            super().__init__()
            self.dense = nn.Linear(config.hidden_size, config.hidden_size)
            self.dropout = nn.Dropout(config.final_dropout)
            self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

        def forward(self, pooled: torch.Tensor) -> torch.Tensor:
            return self.out_proj(self.dropout(torch.tanh(self.dense(self.dropout(pooled)))))

    class Wav2Vec2DimensionalRegressor(Wav2Vec2PreTrainedModel):
        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self.wav2vec2 = Wav2Vec2Model(config)
            self.classifier = DimHead(config)
            self.post_init()

        def forward(self, input_values: torch.Tensor, attention_mask: torch.Tensor | None = None) -> tuple[Any, Any]:
            hidden = self.wav2vec2(input_values, attention_mask=attention_mask)[0]
            if attention_mask is None:
                pooled = hidden.mean(dim=1)
            else:
                mask = self.wav2vec2._get_feature_vector_attention_mask(hidden.shape[1], attention_mask)  # type: ignore[arg-type]  # stubs say LongTensor
                mask = mask.unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
            return pooled, self.classifier(pooled)

    return Wav2Vec2DimensionalRegressor


class AudeeringDim(_HubSER):
    """audEERING wav2vec2-large-robust MSP-Podcast regressor: arousal, dominance, valence (~0..1)."""

    name = "audeering-dim"
    default_model = AUDEERING_DIM
    OPTIONS = AudeeringDimOptions
    install_hint = "pip install transformers torch"

    def load(self) -> None:
        self.device = resolve_device(self.device)
        transformers = import_optional("transformers", self.install_hint)
        cls = audeering_model_class()
        try:
            self._extractor = transformers.AutoFeatureExtractor.from_pretrained(self.model_id, cache_dir=self.cache_dir)
            self._model = cls.from_pretrained(self.model_id, cache_dir=self.cache_dir)
        except (OSError, ValueError) as exc:
            raise unreachable(self.model_id, exc) from exc
        self._model.to(self.device).eval()

    def _predict(self, clips: list[np.ndarray]) -> list[EmotionOutput]:
        values = self._forward_logits(clips)
        names = _label_names(self._model.config, values.shape[1])
        return [EmotionOutput(dimensions={n: float(v) for n, v in zip(names, row, strict=True)}) for row in values]


@dataclass(frozen=True)
class Emotion2VecOptions(HubSEROptions):
    """emotion2vec's checkpoint, device, download folder, shortest clip and the hub funasr loads it from."""

    model_id: str | None = model_id_option(EMOTION2VEC)
    hub: Literal["hf", "ms"] = option("hf", "hf: Hugging Face, ms: ModelScope")


class Emotion2Vec(_HubSER):
    """emotion2vec (e.g. emotion2vec_plus_large) through funasr: 9-way categorical posteriors.

    Labels like ``"生气/angry"`` are reported by their English part (``"angry"``). Options:
    :class:`Emotion2VecOptions`.
    """

    name = "emotion2vec"
    default_model = EMOTION2VEC
    OPTIONS = Emotion2VecOptions
    options: Emotion2VecOptions
    install_hint = "pip install funasr modelscope"

    def load(self) -> None:
        self.device = resolve_device(self.device)
        funasr = import_optional("funasr", self.install_hint)
        hub = self.options.hub
        try:
            self._model = funasr.AutoModel(model=self.model_id, hub=hub, device=self.device, disable_update=True)
        except Exception as exc:  # funasr wraps hub and file errors in assorted types
            raise unreachable(self.model_id, exc) from exc
        if self._model is None:
            raise BackendUnavailable(f"funasr returned no model for {self.model_id!r}")

    def _predict(self, clips: list[np.ndarray]) -> list[EmotionOutput]:
        outs: list[EmotionOutput] = []
        for clip in clips:
            res = self._model.generate(clip, granularity="utterance", extract_embedding=False, disable_pbar=True)
            item = res[0] if isinstance(res, list) else res
            labels = [str(lab).rsplit("/", 1)[-1] for lab in item["labels"]]
            scores = [float(s) for s in item["scores"]]
            outs.append(EmotionOutput(posteriors=dict(zip(labels, scores, strict=True))))
        return outs
