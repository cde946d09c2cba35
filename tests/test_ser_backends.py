"""Hub SER backends on tiny locally built checkpoints; clear errors for missing extras."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from engine.backends.ser.hub import AudeeringDim, Emotion2Vec, TransformersSER, audeering_model_class
from engine.errors import AudioError, BackendUnavailable

SR = 16_000
EMOTIONS = {0: "neu", 1: "hap", 2: "ang", 3: "sad"}


def _tiny_config(norm: str = "layer", **extra: object) -> object:
    from transformers import Wav2Vec2Config

    return Wav2Vec2Config(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        conv_dim=(32, 32, 32),
        conv_stride=(5, 4, 4),
        conv_kernel=(10, 4, 4),
        feat_extract_norm=norm,
        do_stable_layer_norm=norm == "layer",
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        classifier_proj_size=16,
        **extra,
    )


def _save_extractor(path: Path) -> None:
    from transformers import Wav2Vec2FeatureExtractor

    Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=SR, padding_value=0.0, do_normalize=True, return_attention_mask=True
    ).save_pretrained(path)


def _clips() -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.normal(0, 0.1, n).astype(np.float32) for n in (6000, 9000, 16000)]


@pytest.mark.parametrize("norm", ["layer", "group"])
def test_transformers_ser_on_tiny_classifier(tmp_path: Path, norm: str) -> None:
    import torch
    from transformers import Wav2Vec2ForSequenceClassification

    torch.manual_seed(0)
    cfg = _tiny_config(norm, num_labels=4, id2label=EMOTIONS, label2id={v: k for k, v in EMOTIONS.items()})
    model_dir = tmp_path / f"tiny-ser-{norm}"
    Wav2Vec2ForSequenceClassification(cfg).save_pretrained(model_dir)
    _save_extractor(model_dir)
    backend = TransformersSER(model_id=str(model_dir))
    outs = backend.predict_batch(_clips())
    assert len(outs) == 3
    for o in outs:
        assert set(o.posteriors) == set(EMOTIONS.values())
        assert sum(o.posteriors.values()) == pytest.approx(1.0, abs=1e-5)
        assert o.label in EMOTIONS.values()
    alone = backend.predict_batch(_clips()[:1])[0]
    for k, v in alone.posteriors.items():
        assert v == pytest.approx(outs[0].posteriors[k], abs=1e-4)  # padding does not leak into a clip
    with pytest.raises(AudioError, match="transformers-ser needs at least"):
        backend.predict_batch([np.zeros(100, dtype=np.float32)])


def test_audeering_dim_on_tiny_regressor(tmp_path: Path) -> None:
    import torch

    torch.manual_seed(0)
    dims = {0: "arousal", 1: "dominance", 2: "valence"}
    cfg = _tiny_config(num_labels=3, id2label=dims, label2id={v: k for k, v in dims.items()}, final_dropout=0.1)
    model = audeering_model_class()(cfg).eval()
    names = set(model.state_dict())
    # the parameter names of the published checkpoint's head
    assert {"classifier.dense.weight", "classifier.dense.bias", "classifier.out_proj.weight"} <= names
    assert any(n.startswith("wav2vec2.encoder.") for n in names)
    model_dir = tmp_path / "tiny-dim"
    model.save_pretrained(model_dir)
    _save_extractor(model_dir)

    backend = AudeeringDim(model_id=str(model_dir))
    clip = _clips()[2]
    out = backend.predict_batch([clip])[0]
    assert set(out.dimensions) == {"arousal", "dominance", "valence"} and out.posteriors == {}
    x = (clip - clip.mean()) / np.sqrt(clip.var() + 1e-7)
    with torch.inference_mode():
        _, ref = model(torch.from_numpy(x)[None])
    assert [out.dimensions[d] for d in ("arousal", "dominance", "valence")] == pytest.approx(ref[0].tolist(), abs=1e-4)


def test_hub_ser_offline_or_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BackendUnavailable, match="local directory"):
        TransformersSER(model_id=str(empty)).load()
    with pytest.raises(BackendUnavailable, match="local directory"):
        AudeeringDim(model=str(empty)).load()
    monkeypatch.setitem(sys.modules, "funasr", None)
    e2v = Emotion2Vec()
    assert e2v.model_id == Emotion2Vec.default_model
    with pytest.raises(BackendUnavailable, match="pip install funasr"):
        e2v.load()
