"""scripts/compare_runs.py: timings are ignored, any other difference is reported by its path."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import compare_runs  # noqa: E402


def _run(d: Path, wer: float, rtfx: float, hyp: str, infer_s: float) -> Path:
    d.mkdir()
    summary = {"created_at": str(rtfx), "models": {"m": {"wer": wer, "rtfx": rtfx, "slices": {"a=b": {"wer": wer, "rtfx": rtfx}}}}}
    (d / "summary.json").write_text(json.dumps(summary))
    pd.DataFrame([{"model": "m", "utt_id": "u1", "hyp_raw": hyp, "infer_s": infer_s}]).to_parquet(d / "utterances.parquet")
    (d / "report.md").write_text(f"- created: {rtfx}\n| slice | WER % | RTFx |\n|---|---:|---:|\n| a=b | {100 * wer:.1f} | {rtfx:.1f} |\n")
    return d


def test_timings_are_ignored(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", 0.25, 6.1, "hello", 0.5)
    b = _run(tmp_path / "b", 0.25, 9.9, "hello", 0.7)
    assert compare_runs.compare(a, b) == []


def test_result_differences_are_reported(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", 0.25, 6.1, "hello", 0.5)
    b = _run(tmp_path / "b", 0.30, 6.1, "hullo", 0.5)
    diffs = compare_runs.compare(a, b)
    assert any(d.startswith("$.models.m.wer") for d in diffs)
    assert any("$.models.m.slices.a=b.wer" in d for d in diffs)
    assert any("hyp_raw" in d for d in diffs)
    assert any(d.startswith("report.md line") for d in diffs)


def test_key_order_is_compared_and_named_figures_can_be_left_out(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", 0.25, 6.1, "hello", 0.5)
    b = _run(tmp_path / "b", 0.25, 6.1, "hello", 0.5)
    summary = json.loads((b / "summary.json").read_text())
    m = summary["models"]["m"]
    summary["models"]["m"] = {"slices": m["slices"], "wer": m["wer"], "rtfx": m["rtfx"], "new_rate": 0.5}
    (b / "summary.json").write_text(json.dumps(summary))
    (b / "report.md").write_text("- created: 1\n| slice | WER % | new % | RTFx |\n|---|---:|---:|---:|\n| a=b | 25.0 | 50.0 | 6.1 |\n")
    diffs = compare_runs.compare(a, b, compare_runs.TIMING_KEYS | {"new_rate"})
    assert any("$.models.m: keys in another order" in d for d in diffs)
    assert not any("new_rate" in d for d in diffs) and any(d.startswith("report.md line") for d in diffs)
    summary["models"]["m"] = {"wer": m["wer"], "rtfx": m["rtfx"], "new_rate": 0.5, "slices": m["slices"]}
    (b / "summary.json").write_text(json.dumps(summary))
    assert compare_runs.compare(a, b, compare_runs.TIMING_KEYS | {"new_rate"}, frozenset({"new %"})) == []


def test_export_tables_are_compared_less_timings(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", 0.25, 6.1, "hello", 0.5)
    b = _run(tmp_path / "b", 0.25, 9.9, "hello", 0.5)
    for d, wer, rtfx in ((a, 0.25, 6.1), (b, 0.25, 9.9)):
        (d / "exports").mkdir()
        pd.DataFrame([{"model": "m", "wer": wer, "rtfx": rtfx}]).to_csv(d / "exports" / "slices.csv", index=False)
    assert compare_runs.compare(a, b) == []
    pd.DataFrame([{"model": "m", "wer": 0.3, "rtfx": 9.9}]).to_csv(b / "exports" / "slices.csv", index=False)
    assert any(d.startswith("exports/slices.csv row 0 wer") for d in compare_runs.compare(a, b))
    (b / "exports" / "extra.csv").write_text("x\n1\n")
    assert "exports/extra.csv: only in the second run" in compare_runs.compare(a, b)
