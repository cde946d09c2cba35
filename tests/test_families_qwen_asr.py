"""Qwen3-ASR through the ``qwen-asr`` package, proven on a tiny random Qwen3ASRForConditionalGeneration
saved in the real checkpoint's layout and run through ``audit run`` (see tests/test_families.py).

``qwen-asr`` pins transformers 4.57, so this runs in its own environment: ``make test-families``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests import tiny_families as tiny

pytestmark = [
    pytest.mark.families,
    pytest.mark.skipif(importlib.util.find_spec("qwen_asr") is None, reason="qwen-asr is not installed here: run make test-families"),
]


def test_qwen3_asr_runs_through_audit_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tiny.build_qwen3_asr(tmp_path / "qwen3-asr")
    expect = {"prompt": "qwen-asr chat prompt: system=context, user=<audio>; assistant prefix 'language English<asr_text>'",
        "max_new_tokens": 5}
    manifest = tiny.two_clips(tmp_path)
    tiny.assert_family_runs(tmp_path, monkeypatch, manifest, "qwen3-asr", "qwen3-asr", folder, {"max_new_tokens": 5}, expect)
