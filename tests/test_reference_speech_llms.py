"""The speech-LLM loaders against their reference procedures, token for token.

Each case builds a tiny random model in the real checkpoint's layout with the real checkpoint's
preprocessing (chat template, special tokens, feature extractor, 30 s windows, audio-token counts;
see tests/tiny_speech_llms.py and tests/tiny_families.py), takes the line-up's registry entry
(audit_configs/models/rweq.yaml) as the engine would, and runs the same clips, shorter and longer than
the model's 30 s window, through

* the reference procedure written from the script that defines how the checkpoint is run
  (tests/reference_speech_llms.py: the Open ASR Leaderboard's scripts, the granite-4.0 card), and
* the engine's transformers backend (``TransformersBackend`` -> ``SpeechLLMFamily``),

at batch 1 and batch 4, and asserts the same generated token ids and the same text per clip. The
loaders' own caps (``max_new_tokens`` as the leaderboard sets them) and precision are asserted
separately; the token comparison runs with a small cap so the suite stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("transformers")

from engine.config import load_yaml  # noqa: E402
from engine.errors import ConfigError  # noqa: E402
from tests import reference_speech_llms as ref  # noqa: E402
from tests import tiny_families as tiny  # noqa: E402
from tests import tiny_speech_llms as tiny_llm  # noqa: E402
from tests.reference_clips import clips  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NEW_TOKENS = 6


def registry_options(name: str) -> dict[str, Any]:
    """The entry's options as audit_configs/models/rweq.yaml gives them (the model and hub revision are
    replaced by the tiny folder)."""
    entry = load_yaml(ROOT / "audit_configs" / "models" / "rweq.yaml")["models"][name]
    assert entry["family"] == "speech-llm", entry
    return {k: v for k, v in entry["options"].items() if k not in ("model", "revision")}


def _granite33(p: Path) -> Path:
    return tiny_llm.build_granite_speech(p, template="3.3")


def _granite40(p: Path) -> Path:
    return tiny_llm.build_granite_speech(p, template="4.0")


# case: (builder, registry entry, reference, leaderboard/card max_new_tokens, the model's window in seconds:
# Granite's encoder attends in blocks of 200 frames (4 s); Voxtral and GLM-ASR cut audio into 30 s windows,
# Phi-4-multimodal's extractor takes the clip whole (30 s clips as for the others))
CASES: dict[str, tuple[Callable[[Path], Path], str, Callable[..., list[ref.Answer]], int, float]] = {
    "granite-speech-3.3": (
        _granite33,
        "granite-speech-3.3-2b",
        lambda f, c, n: ref.granite(f, c, ref.LEADERBOARD_GRANITE_SYSTEM, n, attn="eager"),
        200,
        4.0,
    ),
    "granite-4.0-1b-speech": (_granite40, "granite-4.0-1b-speech", lambda f, c, n: ref.granite(f, c, None, n), 200, 4.0),
    "voxtral-mini-3b": (tiny.build_voxtral, "voxtral-mini-3b", ref.voxtral, 500, 30.0),
    "phi-4-multimodal": (tiny.build_phi4_multimodal, "phi-4-multimodal", ref.phi4, 128, 30.0),
    "glm-asr-nano-2512": (tiny.build_glmasr, "glm-asr-nano-2512", ref.glmasr, 500, 30.0),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {}


def _folder(case: str, models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    if case not in models:
        models[case] = CASES[case][0](tmp_path_factory.mktemp(case))
    return models[case]


def _engine(folder: Path, entry: str, **options: Any) -> Any:
    from engine.backends.asr.transformers import TransformersBackend

    merged = {**registry_options(entry), **options}
    return TransformersBackend(model=str(folder), family="speech-llm", device="cpu", local_files_only=True, **merged)


def engine_answers(backend: Any, audio: list[np.ndarray], stops: list[int]) -> tuple[list[ref.Answer], list[str]]:
    """Run the engine and read back, besides its texts, the token ids its ``generate`` produced
    (a pass-through wrapper records each call's prompt length and output)."""
    family = backend._family
    calls: list[tuple[int, Any]] = []
    real = family.model.generate

    def recording(**kwargs: Any) -> Any:
        out = real(**kwargs)
        calls.append((int(kwargs["input_ids"].shape[1]), out))
        return out

    family.model.generate = recording
    try:
        texts = backend.transcribe_batch(audio)
    finally:
        family.model.generate = real
    answers = []
    for prompt_len, out in calls:
        for row in out[:, prompt_len:].tolist():
            cut = next((i for i, t in enumerate(row) if t in stops), len(row))
            answers.append(ref.Answer(tuple(row[:cut]), ""))
    return answers, texts


def _stops(backend: Any) -> list[int]:
    family = backend._family
    if family.model_type == "phi4_multimodal":  # the leaderboard's stop tokens: the turn end and eos
        return [family.tokenizer.convert_tokens_to_ids("<|end|>"), family.tokenizer.eos_token_id]
    eos = family.model.generation_config.eos_token_id
    return list(eos) if isinstance(eos, list) else [int(eos)]


@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("case", list(CASES))
def test_engine_matches_reference_token_for_token(
    case: str, batch: int, models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = _folder(case, models, tmp_path_factory)
    _, entry, reference, _, window = CASES[case]
    audio = clips(window)
    expected: list[ref.Answer] = []
    for start in range(0, len(audio), batch):
        expected += reference(folder, audio[start : start + batch], NEW_TOKENS)
    backend = _engine(folder, entry, max_new_tokens=NEW_TOKENS, batch_size=batch)
    backend.load()
    got, texts = engine_answers(backend, audio, _stops(backend))
    assert [a.ids for a in got] == [a.ids for a in expected], case
    assert texts == [a.text for a in expected], case
    assert any(a.ids for a in expected), "the tiny model generated nothing: the comparison would prove little"


@pytest.mark.parametrize("case", list(CASES))
def test_registry_entry_runs_with_the_reference_settings(
    case: str, models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Without overrides the entry decodes greedily with the script's token cap, and on CUDA
    ``dtype: auto`` would load bfloat16 (the cards' and the leaderboard's precision)."""
    from engine.backends.asr.families.speechllm import SpeechLLMFamily
    from engine.backends.device import dtype_name_for

    folder = _folder(case, models, tmp_path_factory)
    _, entry, _, cap, _ = CASES[case]
    backend = _engine(folder, entry)
    backend.load()
    settings = backend.info().extra["generate_kwargs"]
    assert settings["max_new_tokens"] == cap and settings["num_beams"] == 1 and settings["do_sample"] is False, settings
    assert backend.info().dtype == "float32"  # on the CPU
    assert dtype_name_for("cuda", SpeechLLMFamily.cuda_dtype, backend.options.dtype) == "bfloat16"


def test_granite_33_system_turn_is_the_leaderboards(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> None:
    """The registry gives granite-speech-3.3 the leaderboard's system turn, and the prompt the model
    reads holds it (not a default turn dated the day of the run)."""
    from engine.backends.asr.families.speechllm import LEADERBOARD_GRANITE_SYSTEM

    assert LEADERBOARD_GRANITE_SYSTEM == ref.LEADERBOARD_GRANITE_SYSTEM
    for entry in ("granite-speech-3.3-2b", "granite-speech-3.3-8b"):
        assert registry_options(entry)["system_prompt"] == ref.LEADERBOARD_GRANITE_SYSTEM, entry
    backend = _engine(_folder("granite-speech-3.3", models, tmp_path_factory), "granite-speech-3.3-2b")
    backend.load()
    tokenizer = backend._family.tokenizer
    ids = backend._family._inputs(clips()[:1])["input_ids"][0].tolist()
    system = tokenizer(
        "<|start_of_role|>system<|end_of_role|>" + ref.LEADERBOARD_GRANITE_SYSTEM + "<|end_of_text|>", add_special_tokens=False
    )["input_ids"]
    assert tokenizer.unk_token_id not in system  # the tiny vocabulary holds every word of it
    assert any(ids[i : i + len(system)] == system for i in range(len(ids))), tokenizer.decode(ids)
    assert ids.count(tokenizer.convert_tokens_to_ids("<|start_of_role|>")) == 3  # system, user, assistant


def test_granite_template_with_todays_date_needs_a_system_prompt(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> None:
    """Granite 3.3's template dates a default system turn with the day of the run: without a
    ``system_prompt`` the loader refuses, naming the option and the leaderboard's text."""
    backend = _engine(_folder("granite-speech-3.3", models, tmp_path_factory), "granite-4.0-1b-speech")
    with pytest.raises(ConfigError, match=r"writes today's date.*set the option 'system_prompt'.*December 19, 2024"):
        backend.load()
