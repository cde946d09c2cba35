"""What the speech-LLM family needs beyond its tiny end-to-end runs (tests/test_families.py):

- Granite Speech's features without torchaudio (engine/backends/asr/families/granite_features.py):
  the mel spectrogram against librosa's independent implementation of the same definition, the
  post-processing and audio-token counts against transformers' own extractor code, and the whole
  extractor where torchaudio is installed;
- the speech LoRA adapters of Granite Speech 3.3 and Phi-4-multimodal: transformers loads them only
  through peft >= its MIN_PEFT_VERSION; without that the checkpoint is refused before loading,
  naming peft, the version and the install command; with it the adapter is loaded and recorded.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from engine.backends import ASR_BACKENDS  # noqa: E402
from engine.backends.asr.families.granite_features import GraniteFeatureConfig, GraniteLogMel  # noqa: E402
from engine.errors import BackendUnavailable, ConfigError  # noqa: E402
from tests import tiny_families as tiny  # noqa: E402
from tests import tiny_speech_llms as tiny_llm  # noqa: E402


def _clips() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    t = np.arange(29_000) / 16000
    tone = (0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(t.size)).astype(np.float32)
    return [tone, (0.1 * rng.standard_normal(12_345)).astype(np.float32)]


def test_mel_matches_librosa_htk_mel_without_norm() -> None:
    librosa = pytest.importorskip("librosa")
    mel = GraniteLogMel(GraniteFeatureConfig(), torch)
    for clip in _clips():
        ours = mel.mel(torch.from_numpy(clip)[None])[0].numpy()
        ref = librosa.feature.melspectrogram(
            y=clip.astype(np.float64),
            sr=16000,
            n_fft=512,
            hop_length=160,
            win_length=400,
            window="hann",
            center=True,
            pad_mode="reflect",
            power=2.0,
            n_mels=80,
            fmin=0.0,
            fmax=8000.0,
            htk=True,
            norm=None,
        )
        assert ours.shape == ref.shape
        assert np.abs(ours - ref).max() <= 1e-5 * ref.max()
        floor = 1e-10  # the extractor's clip before log10
        assert np.abs(np.log10(np.maximum(ours, floor)) - np.log10(np.maximum(ref, floor))).max() < 1e-3


def _upstream_self(cfg: GraniteFeatureConfig, mel: GraniteLogMel) -> Any:
    """The attributes transformers' extractor methods read, with our mel in place of torchaudio's."""
    return SimpleNamespace(
        melspec_kwargs={"hop_length": cfg.hop_length},
        projector_window_size=cfg.projector_window_size,
        projector_downsample_rate=cfg.projector_downsample_rate,
        mel_filters=mel.mel,
    )


def test_post_processing_and_token_counts_are_transformers_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers' own extractor methods, fed our mel in place of torchaudio's (their torchaudio
    check switched off), give our features bit for bit and our audio-token counts."""
    from transformers import GraniteSpeechFeatureExtractor as Upstream
    from transformers.models.granite_speech import feature_extraction_granite_speech as upstream_module

    monkeypatch.setattr(upstream_module, "requires_backends", lambda *args, **kwargs: None)

    cfg = GraniteFeatureConfig()
    mel = GraniteLogMel(cfg, torch)
    fake = _upstream_self(cfg, mel)
    clips = _clips()
    ours = mel(clips)
    padded = torch.nn.utils.rnn.pad_sequence([torch.from_numpy(c) for c in clips], batch_first=True)
    theirs = Upstream._extract_mel_spectrograms(fake, padded, device=None)
    assert torch.allclose(ours["input_features"], theirs, atol=1e-6)
    lengths = [1, 159, 160, 4_799, 4_800, 16_000, 29_000, 480_000]
    assert mel.embed_sizes(lengths) == list(Upstream._get_num_audio_features(fake, lengths))
    sizes = ours["audio_embed_sizes"]
    assert ours["input_features_mask"].sum(dim=1).tolist() == sizes and ours["input_features_mask"].shape == (2, max(sizes))


def test_whole_extractor_matches_where_torchaudio_is_installed() -> None:
    pytest.importorskip("torchaudio", reason="torchaudio is not installed (no build for this torch): the parts are checked above")
    from transformers import GraniteSpeechFeatureExtractor

    clips = _clips()
    ours, theirs = GraniteLogMel(GraniteFeatureConfig(), torch)(clips), GraniteSpeechFeatureExtractor()(clips)
    assert ours["audio_embed_sizes"] == list(theirs["audio_embed_sizes"])
    assert torch.equal(ours["input_features_mask"], theirs["input_features_mask"])
    assert torch.allclose(ours["input_features"], theirs["input_features"], atol=1e-5)


def test_feature_config_reads_like_transformers(caplog: pytest.LogCaptureFixture) -> None:
    saved = {
        "feature_size": 80,
        "sampling_rate": 16000,
        "projector_window_size": 15,
        "projector_downsample_rate": 5,
        "melspec_kwargs": {"n_fft": 512, "win_length": 400, "hop_length": 160, "n_mels": 80, "sample_rate": 16000},
    }
    assert GraniteFeatureConfig.from_dict(saved) == GraniteFeatureConfig()
    with caplog.at_level(logging.WARNING):
        GraniteFeatureConfig.from_dict({**saved, "melspec_kwargs": {"n_fft": 400}}, "x/preprocessor_config.json")
    assert "melspec_kwargs {'n_fft': 400} differ" in caplog.text
    with pytest.raises(ConfigError, match="x: 'hop_length' must be a positive integer, got 0"):
        GraniteFeatureConfig.from_dict({"hop_length": 0}, "x")
    with pytest.raises(ConfigError, match=r"win_length \(600\) must not exceed n_fft \(512\)"):
        GraniteFeatureConfig.from_dict({"win_length": 600}, "x")


def _backend(folder: Path, **options: Any) -> Any:
    return ASR_BACKENDS.get("transformers")(model=str(folder), family="speech-llm", device="cpu", local_files_only=True, **options)


def test_granite_prompt_without_the_audio_token_is_refused(tmp_path: Path) -> None:
    folder = tiny_llm.build_granite_speech(tmp_path / "granite")
    with pytest.raises(ConfigError, match=r"must hold the audio token <\|audio\|> exactly once.*fix the option 'prompt'"):
        _backend(folder, prompt="transcribe this").load()


def _peft_ok() -> bool:
    from engine.backends.asr.families.speechllm import _older, _peft_versions

    need, have = _peft_versions()
    return have is not None and not _older(have, need)


def _granite_with_lora(out: Path) -> Path:
    return tiny_llm.build_granite_speech(out, lora=True)


def _phi4_with_speech_lora(out: Path) -> Path:
    import transformers

    folder = tiny.build_phi4_multimodal(out)
    model = transformers.Phi4MultimodalForCausalLM.from_pretrained(folder)
    tiny_llm.write_lora(folder / "speech-lora", model, ["qkv_proj", "o_proj"], base=str(folder), prefix="model.layers.")
    return folder


ADAPTERS = {
    "granite-3.3": (_granite_with_lora, "adapter_config.json beside the weights", "adapter beside the weights"),
    "phi4-multimodal": (_phi4_with_speech_lora, "speech-lora/adapter_config.json", "speech-lora"),
}


@pytest.mark.parametrize("case", ADAPTERS)
def test_speech_lora_needs_peft_and_says_so(case: str, tmp_path: Path) -> None:
    """Where peft is missing or older than transformers needs: refused before any weights load."""
    if _peft_ok():
        pytest.skip("peft is new enough here: test_speech_lora_is_loaded_and_recorded covers this checkpoint")
    from transformers.integrations.peft import MIN_PEFT_VERSION

    build, where, _ = ADAPTERS[case]
    folder = build(tmp_path / case)
    with pytest.raises(BackendUnavailable) as err:
        _backend(folder).load()
    message = str(err.value)
    assert f"ships its speech LoRA adapter ({where})" in message
    assert f"peft >= {MIN_PEFT_VERSION}" in message and f"Fix: pip install 'peft>={MIN_PEFT_VERSION}'" in message


@pytest.mark.parametrize("case", ADAPTERS)
def test_speech_lora_is_loaded_and_recorded(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where peft is new enough: the adapter loads, is active, and backend_info names it."""
    if not _peft_ok():
        pytest.skip("peft >= transformers' MIN_PEFT_VERSION is not installed: the refusal is tested instead")
    build, _, recorded = ADAPTERS[case]
    folder = build(tmp_path / case)
    backend = _backend(folder, max_new_tokens=3)
    backend.load()
    assert backend._model._hf_peft_config_loaded and backend.info().extra["speech_adapter"] == recorded
    clips = tiny.two_clips(tmp_path / "clips")
    tiny.assert_family_runs(
        tmp_path / "run", monkeypatch, clips, "transformers", "speech-llm", folder, {"max_new_tokens": 3}, {"speech_adapter": recorded}
    )
