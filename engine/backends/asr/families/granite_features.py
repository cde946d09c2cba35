"""Granite Speech's input features computed with torch alone (no torchaudio).

transformers' ``GraniteSpeechFeatureExtractor`` builds ``torchaudio.transforms.MelSpectrogram``
in its constructor, so its processor cannot even be created without torchaudio, whose native
build has to match torch's exactly (version and CPU/CUDA variant) and often is not published for
the torch in use. The features themselves are plain arithmetic, reproduced here step by step:

1. clips zero-padded to the longest in the batch (as the extractor collates them);
2. power spectrogram: ``torch.stft`` with a periodic Hann window of ``win_length`` centred in
   ``n_fft``, ``center=True``, reflect padding, one-sided, ``|X|^2`` (torchaudio's ``Spectrogram``
   defaults: ``power=2``, ``normalized=False``);
3. mel: an HTK-scale triangular filter bank with no area normalisation from 0 Hz to
   ``sampling_rate // 2`` (torchaudio's ``melscale_fbanks(norm=None, mel_scale="htk")``, built by
   ``transformers.audio_utils.mel_filter_bank``, which implements the same construction);
4. the extractor's own post-processing: ``log10(max(mel, 1e-10))``, floor at the clip's maximum
   minus 8, ``/4 + 1``, the last frame dropped if the count is odd, pairs of frames stacked
   (``2 * n_mels`` values per encoder frame);
5. audio tokens per clip: ``ceil((len // hop + 1) // 2 / window) * (window // downsample)``, and the
   mask of real (not padded) projector outputs.

tests/test_speech_llm_extras.py holds the spectrogram against librosa's independent
implementation of the same definition and, where torchaudio is installed, the whole result
against transformers' extractor.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import ConfigError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GraniteFeatureConfig:
    """The fields of a Granite Speech ``preprocessor_config.json`` the features depend on."""

    sampling_rate: int = 16000
    n_fft: int = 512
    win_length: int = 400
    hop_length: int = 160
    n_mels: int = 80
    projector_window_size: int = 15
    projector_downsample_rate: int = 5

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str = "preprocessor_config.json") -> GraniteFeatureConfig:
        """Read a saved extractor config the way transformers does: the constructor's own keys, else
        their defaults. A saved ``melspec_kwargs`` is not read back by transformers (its constructor
        rebuilds it), so one that disagrees is only reported."""
        kwargs: dict[str, int] = {}
        for field in cls.__dataclass_fields__:
            raw = values.get(field)
            if raw is None:
                continue
            if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
                raise ConfigError(f"{source}: '{field}' must be a positive integer, got {raw!r}")
            kwargs[field] = raw
        cfg = cls(**kwargs)
        if cfg.win_length > cfg.n_fft:
            raise ConfigError(f"{source}: win_length ({cfg.win_length}) must not exceed n_fft ({cfg.n_fft})")
        saved = values.get("melspec_kwargs")
        if isinstance(saved, Mapping):
            used = {
                "sample_rate": cfg.sampling_rate,
                "n_fft": cfg.n_fft,
                "win_length": cfg.win_length,
                "hop_length": cfg.hop_length,
                "n_mels": cfg.n_mels,
            }
            differ = {k: v for k, v in saved.items() if k in used and v != used[k]}
            if differ:
                log.warning(
                    "%s: melspec_kwargs %s differ from the values transformers' extractor uses (%s); using the latter", source, differ, used
                )
        return cfg


class GraniteLogMel:
    """Batch features for ``GraniteSpeechForConditionalGeneration``, equal to the extractor's."""

    def __init__(self, config: GraniteFeatureConfig, torch: Any) -> None:
        from transformers.audio_utils import mel_filter_bank

        self.config = config
        self.torch = torch
        self.window = torch.hann_window(config.win_length)  # periodic, torchaudio's default window_fn
        bank = mel_filter_bank(
            num_frequency_bins=config.n_fft // 2 + 1,
            num_mel_filters=config.n_mels,
            min_frequency=0.0,
            max_frequency=float(config.sampling_rate // 2),
            sampling_rate=config.sampling_rate,
            norm=None,
            mel_scale="htk",
        )
        self.bank = torch.from_numpy(np.asarray(bank, dtype=np.float32))  # (n_freqs, n_mels)

    def mel(self, audio: Any) -> Any:
        """Mel power spectrogram of a ``(batch, samples)`` tensor: ``(batch, n_mels, frames)``."""
        torch, cfg = self.torch, self.config
        spec = (
            torch.stft(
                audio.float(),
                n_fft=cfg.n_fft,
                hop_length=cfg.hop_length,
                win_length=cfg.win_length,
                window=self.window,
                center=True,
                pad_mode="reflect",
                normalized=False,
                onesided=True,
                return_complex=True,
            )
            .abs()
            .pow(2.0)
        )
        return torch.matmul(spec.transpose(-1, -2), self.bank).transpose(-1, -2)

    def embed_sizes(self, lengths: Sequence[int]) -> list[int]:
        """Audio tokens per clip (the projector's output length for each raw length)."""
        cfg = self.config
        per_block = cfg.projector_window_size // cfg.projector_downsample_rate
        sizes = []
        for n in lengths:
            encoder_frames = (int(n) // cfg.hop_length + 1) // 2
            sizes.append(math.ceil(encoder_frames / cfg.projector_window_size) * per_block)
        return sizes

    def __call__(self, clips: Sequence[np.ndarray]) -> dict[str, Any]:
        """``input_features``, ``input_features_mask`` and ``audio_embed_sizes`` for a batch of clips."""
        torch = self.torch
        tensors = [torch.from_numpy(np.asarray(c, dtype=np.float32)) for c in clips]
        audio = torch.nn.utils.rnn.pad_sequence(tensors, batch_first=True, padding_value=0.0)
        with torch.no_grad():
            logmel = self.mel(audio).transpose(-1, -2).clamp(min=1e-10).log10()
            peak = logmel.amax(dim=(-2, -1), keepdim=True)
            logmel = torch.maximum(logmel, peak - 8.0) / 4 + 1
            if logmel.shape[1] % 2 == 1:
                logmel = logmel[:, :-1]
            features = logmel.reshape(len(tensors), -1, 2 * logmel.shape[-1])
        sizes = self.embed_sizes([t.shape[-1] for t in tensors])
        mask = torch.arange(max(sizes)).view(1, -1) < torch.tensor(sizes).view(-1, 1)
        return {"input_features": features, "input_features_mask": mask, "audio_embed_sizes": sizes}
