"""The one precision decision (engine/backends/device.py) and the transformers families' CUDA defaults."""

from __future__ import annotations

import pytest

from engine.backends.device import dtype_name_for, torch_dtype_for
from engine.errors import ConfigError


def test_auto_is_the_reference_precision_on_cuda_and_float32_elsewhere() -> None:
    assert dtype_name_for("cuda", "bfloat16", "auto") == "bfloat16"
    assert dtype_name_for("cuda:1", "float16", None) == "float16"
    assert dtype_name_for("cpu", "bfloat16", "auto") == "float32"
    assert dtype_name_for("mps", "bfloat16", None) == "float32"
    assert dtype_name_for("cpu", "bfloat16", "float16") == "float16"  # an explicit request always wins
    assert dtype_name_for("cuda", "bfloat16", "float32") == "float32"


@pytest.mark.parametrize("bad", ["float8", "fp16", "", 16])
def test_unknown_precisions_are_refused(bad: object) -> None:
    with pytest.raises(ConfigError, match="dtype"):
        dtype_name_for("cuda", "bfloat16", bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="CUDA default"):
        dtype_name_for("cuda", bad, None)  # type: ignore[arg-type]


def test_torch_dtype_for_returns_the_torch_dtype() -> None:
    torch = pytest.importorskip("torch")
    assert torch_dtype_for("cuda", "bfloat16", None) is torch.bfloat16
    assert torch_dtype_for("cpu", "bfloat16", None) is torch.float32


def test_families_declare_their_reference_cuda_precision() -> None:
    pytest.importorskip("transformers")
    from engine.backends.asr.families import family_loader

    whisper, encdec, ctc = family_loader("whisper"), family_loader("encoder-decoder"), family_loader("ctc")
    assert whisper.cuda_dtype_for("whisper") == "bfloat16"  # leaderboard transformers/run_eval.py default
    assert whisper.cuda_dtype_for("lite-whisper") == "float16"  # leaderboard liteASR/run_eval.py
    assert encdec.cuda_dtype_for("moonshine_streaming") == "float16"  # leaderboard run_moonshine.sh
    assert encdec.cuda_dtype_for("kyutai_speech_to_text") == "bfloat16"  # leaderboard kyutai/run_eval.py
    assert encdec.cuda_dtype_for("cohere_asr") == "bfloat16"
    assert ctc.cuda_dtype_for("wav2vec2") == "bfloat16"
