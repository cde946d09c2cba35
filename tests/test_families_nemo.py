"""NeMo ``ASRModel`` (the nemo-asr family), proven on a tiny random ``EncDecCTCModel`` saved as a
``.nemo`` file and run through ``audit run`` (see tests/test_families.py).

NeMo is too heavy for ``make test``; ``make test-families`` installs it in its own environment.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests import tiny_families as tiny

pytestmark = [
    pytest.mark.families,
    pytest.mark.skipif(importlib.util.find_spec("nemo") is None, reason="NeMo is not installed here: run make test-families"),
]


def test_nemo_asr_model_runs_through_audit_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tiny.build_nemo_ctc(tmp_path / "tiny-ctc.nemo")
    manifest = tiny.two_clips(tmp_path)
    expect = {"decoding": "the model's default decoder (CTC greedy / RNNT-TDT greedy batch / Canary beam from its config)"}
    tiny.assert_family_runs(tmp_path, monkeypatch, manifest, "nemo", "nemo-asr", model, {}, expect)


def test_nemo_transducer_runs_through_audit_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tiny.build_nemo_rnnt(tmp_path / "tiny-rnnt.nemo")
    manifest = tiny.two_clips(tmp_path)
    tiny.assert_family_runs(tmp_path, monkeypatch, manifest, "nemo", "nemo-asr", model, {}, {"family": "nemo-asr", "prompt": None})
