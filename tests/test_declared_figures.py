"""A figure the ASR records declare with ``report`` reaches every table: report.md, report.html, the CSV exports,
DuckDB and the JSON Schema, read from the declarations (``audits.asr.results.report_columns``), no writer listing it."""

from __future__ import annotations

import csv
import dataclasses
import json
import re
from pathlib import Path
from types import MappingProxyType
from typing import Any

import duckdb
import pytest

from audits.asr.results import ModelFigures, SliceFigures, report_columns
from audits.json_schemas import summary_schema
from audits.pipeline import run_recipe
from audits.recipes import parse_recipe

REFS = [
    "the cat sat on the mat",
    "a dog ran home",
    "hello there",
    "one two three four",
    "we met at noon",
    "open the door please",
    "it is raining today",
    "the train was late",
]
HYPS = {
    "alpha": REFS[:3] + ["one two tree four", "we met at moon", "open the door please", "it is raining", "the train was late"],
    "beta": ["the cat sat on a mat", "a dog ran home", "hello", "one two three four", "we met at noon", "open door please"]
    + ["it is raining to day", "the train was late"],
}


def _predictions(folder: Path) -> Path:
    """Two models' predictions (OASR JSON lines) with accent labels, so the run has slices."""
    folder.mkdir(parents=True)
    for model, hyps in HYPS.items():
        lines = [
            json.dumps(
                {
                    "audio_filepath": f"u{i}",
                    "text": ref,
                    "pred_text": hyp,
                    "duration": 1.0 + i,
                    "accent_group": "native" if i % 2 else "non-native",
                }
            )
            for i, (ref, hyp) in enumerate(zip(REFS, hyps))
        ]
        (folder / f"{model}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def _run(tmp_path: Path) -> Path:
    recipe = parse_recipe(
        {
            "name": "declared",
            "dataset": {"path": str(_predictions(tmp_path / "preds")), "reader": "oasr-predictions"},
            "models": [],
            "scoring": {"n_boot": 20, "seed": 0},
        },
        "declared.yaml",
    )
    out = tmp_path / "run"
    run_recipe(recipe, out)
    return out


def _page_data(page: str) -> dict[str, Any]:
    found = re.search(r"<script type='application/json' id='report-data'>(.*?)</script>", page, flags=re.S)
    assert found, "report.html embeds its data"
    return dict(json.loads(found.group(1)))


def _cell(value: Any, fmt: str) -> str:
    return "—" if value is None else f"{100 * value:.1f}" if fmt == "pct" else format(value, fmt)


def test_every_declared_figure_reaches_every_table(tmp_path: Path) -> None:
    out = _run(tmp_path)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    models = summary["models"]
    model_cols, slice_cols = report_columns(ModelFigures), report_columns(SliceFigures)
    assert "exact_match_rate" in {c.name for c in slice_cols} and {c.name for c in slice_cols} <= {c.name for c in model_cols}
    # alpha: u0, u1, u2, u5 and u7 exact; beta: u1, u3, u4 and u7; native clips are u1, u3, u5 and u7
    assert models["alpha"]["exact_match_rate"] == 0.625 and models["beta"]["exact_match_rate"] == 0.5
    assert models["alpha"]["slices"]["accent_group=native"]["exact_match_rate"] == 0.75
    md = (out / "report.md").read_text(encoding="utf-8")
    header = next(line for line in md.splitlines() if line.startswith("| model | status |"))
    heads = [h.strip() for h in header.strip("|").split("|")]
    page = (out / "report.html").read_text(encoding="utf-8")
    data = _page_data(page)
    con = duckdb.connect(str(out / "exports" / "results.duckdb"), read_only=True)
    try:
        db_models = {r[0]: r[1:] for r in con.execute(f"SELECT model, {', '.join(c.name for c in model_cols)} FROM models").fetchall()}
        db_slices = {
            (r[0], r[1]): r[2:] for r in con.execute(f"SELECT model, slice, {', '.join(c.name for c in slice_cols)} FROM slices").fetchall()
        }
    finally:
        con.close()
    with open(out / "exports" / "slices.csv", encoding="utf-8", newline="") as fh:
        csv_rows = {(r["model"], r["slice"]): r for r in csv.DictReader(fh)}
    schema = summary_schema()
    model_schema = schema["properties"]["models"]["additionalProperties"]
    defs = schema.get("$defs", {})
    for i, col in enumerate(model_cols):
        assert col.heading in heads, f"report.md's model table lacks {col.heading!r}"
        assert f"<th class=''>{col.heading}</th>" in page, f"report.html's model table lacks {col.heading!r}"
        assert col.name in json.dumps(model_schema) + json.dumps(defs)
        for name, m in models.items():
            row = next(line for line in md.splitlines() if line.startswith(f"| {name} |"))
            assert row.strip("|").split("|")[heads.index(col.heading)].strip() == _cell(m.get(col.name), col.fmt)
            assert f'data-figure="{col.name}" data-sort=' in page
            assert data["models"][name][col.name] == m[col.name]
            assert db_models[name][i] == pytest.approx(m[col.name])
    assert len(csv_rows) == len(db_slices) > 0
    for i, col in enumerate(slice_cols):
        assert re.search(rf"<th>[^<]*<br><span class='n'>WER % \[95% CI\] · utts[^<]* · {re.escape(col.heading)}[ <]", page), col.heading
        for name, m in models.items():
            for key, s in m["slices"].items():
                assert data["slices"][name][key][col.name] == s[col.name]
                assert db_slices[(name, key)][i] == pytest.approx(s[col.name])
                assert float(csv_rows[(name, key)][col.name]) == pytest.approx(s[col.name])


def test_a_new_declaration_is_a_new_column_everywhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Declaring ``report`` on a figure that had none (here ``word_errors``) is all a new column takes."""
    from audits.reports.exports import write_slices_csv
    from audits.reports.html import render_html
    from audits.reports.markdown import render_markdown
    from audits.reports.tables import summary_frames

    out = _run(tmp_path)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    before = render_markdown(summary)
    field = {f.name: f for f in dataclasses.fields(SliceFigures)}["word_errors"]
    monkeypatch.setattr(field, "metadata", MappingProxyType({**field.metadata, "report": ("word errors", "d")}))
    assert "word_errors" in [c.name for c in report_columns(ModelFigures)] and "word_errors" in [
        c.name for c in report_columns(SliceFigures)
    ]
    md = render_markdown(summary)
    assert "| word errors |" in md and "| word errors |" not in before
    alpha = summary["models"]["alpha"]
    assert re.search(rf"\| alpha \|.*\| {alpha['word_errors']} \|", md)
    page = render_html(summary, None)
    assert "<th class=''>word errors</th>" in page and re.search(r"<span class='n'>WER % \[95% CI\] · utts · word errors · ", page)
    assert (
        _page_data(page)["slices"]["alpha"]["accent_group=native"]["word_errors"] == alpha["slices"]["accent_group=native"]["word_errors"]
    )
    frames = summary_frames(summary)
    assert frames["models"].set_index("model").loc["alpha", "word_errors"] == alpha["word_errors"]
    assert "word_errors" in frames["slices"].columns
    path = write_slices_csv(summary, tmp_path / "slices.csv")
    assert "word_errors" in path.read_text(encoding="utf-8").splitlines()[0].split(",")
