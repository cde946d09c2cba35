"""Clear errors instead of tracebacks, and nothing computed lost (red-team findings).

Each case once ended in a stack trace, a misleading message, a stray temporary file, or a
label that silently overwrote a result column.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest

from audits.pipeline import run_recipe
from audits.recipes import load_recipe, with_overrides
from engine.datasets import open_dataset
from engine.errors import AuditError, ConfigError, ManifestError, StoreWriteError
from engine.storage import atomic_write_text

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "voxpopuli-150-predictions"


def _preds(tmp_path: Path, lines: list[str]) -> Path:
    d = tmp_path / "preds"
    d.mkdir()
    (d / "m.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return d


@pytest.mark.parametrize(
    "line, expected",
    [
        ("42", "line 1: expected a JSON object per line, got int"),
        ('{"audio_filepath": "a", "text": "x", "pred_text": "y", "duration": "long"}', "'duration' must be a number of seconds"),
        ('{"audio_filepath": "a", "text": "x", "pred_text": 7}', "'pred_text' must be a string"),
        ('{"audio_filepath": "a", "text": "x", "pred_text": "y", "ok": "yes"}', "column 'ok' is reserved"),
        ('{"audio_filepath": "a", "text": "x", "pred_text": "y", "model": "other"}', "column 'model' is reserved"),
    ],
)
def test_prediction_file_problems_name_file_and_line(tmp_path: Path, line: str, expected: str) -> None:
    with pytest.raises(ManifestError, match="m.jsonl") as err:
        open_dataset(_preds(tmp_path, [line]), "oasr-predictions")
    assert expected in str(err.value)


@pytest.mark.parametrize("column", ["pred_text", "word_errors", "n_words", "error", "time"])
def test_manifest_labels_may_not_shadow_result_columns(tmp_path: Path, column: str) -> None:
    wav = tmp_path / "a.wav"
    wav.write_bytes(b"RIFF")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio_filepath": "a.wav", "text": "hello", "duration": 1.0, column: "x"}) + "\n")
    with pytest.raises(ManifestError, match=f"m.jsonl, line 1, field '{column}': column '{column}' is reserved"):
        open_dataset(manifest, "nemo")


def test_out_pointing_at_a_file_is_a_clear_error(tmp_path: Path) -> None:
    target = tmp_path / "not-a-dir"
    target.write_text("x")
    recipe = with_overrides(load_recipe("score-predictions"), dataset=str(FIXTURE), limit=5)
    with pytest.raises(ConfigError, match="is an existing file, not a directory"):
        run_recipe(recipe, target)


def test_disk_full_names_the_file_and_leaves_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StoreWriteError, match=r"cannot write .*summary.json: No space left on device.*re-run the same command"):
        atomic_write_text(tmp_path / "summary.json", "{}")
    assert list(tmp_path.iterdir()) == []


def test_a_stray_corrupt_marker_does_not_break_later_runs(tmp_path: Path) -> None:
    recipe = with_overrides(load_recipe("score-predictions"), dataset=str(FIXTURE), limit=6)
    out = tmp_path / "run"
    first = run_recipe(recipe, out)
    model_dir = next(p for p in (out / "markers").iterdir() if p.is_dir())
    (model_dir / "no-such-shard.json").write_text("{not json")
    shutil.copy(model_dir / "no-such-shard.json", model_dir / "zz.json")
    again = run_recipe(recipe, out)
    assert {m: e["wer"] for m, e in again["models"].items()} == {m: e["wer"] for m, e in first["models"].items()}


def test_unknown_normalizer_on_a_built_recipe_is_a_config_error(tmp_path: Path) -> None:
    from dataclasses import replace

    recipe = replace(with_overrides(load_recipe("score-predictions"), dataset=str(FIXTURE), limit=2), normalizer="nope")
    with pytest.raises(AuditError, match="unknown normalizer 'nope'"):
        run_recipe(recipe, tmp_path / "run")
