"""Merging run directories: same dataset and normalizer only, numbers carried over or re-scored exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from audits.asr.scoring import ScoringOptions, score_table, summarize_models
from audits.asr.summary import load_summary, write_summary
from audits.normalizing import get_normalizer
from audits.reports.html import write_html_report
from audits.reports.merge import merge_runs
from engine.errors import ConfigError
from tests.test_report_html import make_run, make_table


def _edit_summary(run: Path, **changes: dict) -> None:
    """The run as if written with other settings: changed, then sealed again as a run seals it (not a tampered file)."""
    s = load_summary(run)
    for key, sub in changes.items():
        s[key] = dict(s.get(key) or {}, **sub)
    write_summary(run, s)


def test_merge_sweep_split_by_models(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", models={"alpha": 0.04, "beta": 0.12})
    b = make_run(tmp_path / "b", models={"gamma": 0.30}, extras=False)
    summary, table = merge_runs([a, b])
    sa, sb = load_summary(a), load_summary(b)
    assert sorted(summary["models"]) == ["alpha", "beta", "gamma"]
    for m, src in (("alpha", sa), ("beta", sa), ("gamma", sb)):
        e = summary["models"][m]
        assert e["wer"] == src["models"][m]["wer"] and e["ci95"] == src["models"][m]["ci95"]
        assert e["slices"] == src["models"][m]["slices"]

        def same(g: dict) -> dict:  # Holm is redone over the merged family of gaps
            return {k: v for k, v in g.items() if k not in ("p_holm", "significant")}

        assert [same(g) for g in e["gaps"]] == [same(g) for g in src["models"][m]["gaps"]]
        assert all(g["p_holm"] >= g["p_value"] for g in e["gaps"] if g.get("p_value") is not None)
        assert e["run"] == str(a if src is sa else b)
    assert len(table) == 3 * 32 and set(table["model"]) == {"alpha", "beta", "gamma"}
    assert [r["dir"] for r in summary["merged_from"]] == [str(a), str(b)]
    assert summary["probes"] == sa["probes"]  # sections carried from the run that had them
    assert summary["dataset"]["fingerprint"] == sa["dataset"]["fingerprint"]
    pairs = {(p["a"], p["b"]) for p in summary["comparisons"]["pairs"]}  # pairs across the runs
    assert pairs == {("alpha", "beta"), ("alpha", "gamma"), ("beta", "gamma")}


def test_merged_report_over_two_runs(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", models={"alpha": 0.04}, extras=False)
    b = make_run(tmp_path / "b", models={"gamma": 0.30}, extras=False)
    out = write_html_report([a, b], tmp_path / "merged")
    text = out.read_text(encoding="utf-8")
    assert text.count("class='merged-run'") == 2
    assert 'data-model="alpha"' in text and 'data-model="gamma"' in text
    data = json.loads(text.split("id='report-data'>", 1)[1].split("</script>", 1)[0])
    assert data["models"]["alpha"]["wer"] == load_summary(a)["models"]["alpha"]["wer"]
    assert data["models"]["gamma"]["wer"] == load_summary(b)["models"]["gamma"]["wer"]


def test_refuses_a_different_dataset(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", models={"alpha": 0.04}, extras=False)
    b = make_run(tmp_path / "b", models={"beta": 0.12}, extras=False, fingerprint="other-fp")
    with pytest.raises(ConfigError, match="different datasets.*other-fp"):
        merge_runs([a, b])


def test_refuses_a_different_normalizer(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", models={"alpha": 0.04}, extras=False)
    b = make_run(tmp_path / "b", models={"beta": 0.12}, extras=False, normalizer="basic")
    assert load_summary(b)["normalizer"]["name"] != load_summary(a)["normalizer"]["name"]
    with pytest.raises(ConfigError, match="different normalizers"):
        merge_runs([a, b])


def test_refuses_a_different_normalizer_version(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", models={"alpha": 0.04}, extras=False)
    b = make_run(tmp_path / "b", models={"beta": 0.12}, extras=False)
    _edit_summary(b, normalizer={"version": "whisper-normalizer==0.0.1"})
    with pytest.raises(ConfigError, match="version whisper-normalizer==0.0.1"):
        merge_runs([a, b])


def test_refuses_a_run_without_fingerprint_and_repeated_dirs(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", models={"alpha": 0.04}, extras=False)
    b = make_run(tmp_path / "b", models={"beta": 0.12}, extras=False)
    _edit_summary(b, dataset={"fingerprint": None})
    with pytest.raises(ConfigError, match="no dataset fingerprint"):
        merge_runs([a, b])
    with pytest.raises(ConfigError, match="listed twice"):
        merge_runs([a, a])
    with pytest.raises(ConfigError, match="no run directories"):
        merge_runs([])


def test_refuses_two_different_results_for_one_utterance(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", models={"alpha": 0.04}, extras=False)
    t = make_table({"alpha": 0.30})  # same model, same utterances, other hypotheses
    b = make_run(tmp_path / "b", extras=False, table=t)
    with pytest.raises(ConfigError, match="transcribed utterance .* differently"):
        merge_runs([a, b])


def test_identical_repeated_rows_are_merged_once(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", models={"alpha": 0.04}, extras=False)
    t = make_table({"alpha": 0.04, "beta": 0.12})
    b = make_run(tmp_path / "b", extras=False, table=t)
    summary, table = merge_runs([a, b])
    assert len(table) == 2 * 32
    assert summary["models"]["alpha"]["wer"] == load_summary(a)["models"]["alpha"]["wer"]


def test_model_split_by_shards_is_rescored_exactly(tmp_path: Path) -> None:
    full = make_table({"alpha": 0.04, "gamma": 0.30}, failed=False)
    first = full["speaker"].isin(["spk0", "spk1", "spk2", "spk3"])
    a = make_run(tmp_path / "a", extras=False, table=full[first].reset_index(drop=True))
    b = make_run(tmp_path / "b", extras=False, table=full[~first].reset_index(drop=True))
    summary, table = merge_runs([a, b])
    assert len(table) == len(full)
    opts = ScoringOptions(
        n_boot=200,
        seed=0,
        slice_columns=["accent_group", "background", "emotion", "room"],
        gaps=[
            ("accent_group", "non-native", "native"),
            ("background", "noise-5db", "clean"),
            ("emotion", "positive-high-arousal", "neutral"),
        ],
    )
    expected = summarize_models(score_table(full, get_normalizer("whisper-english")), opts)
    for m in ("alpha", "gamma"):
        e = summary["models"][m]
        assert e["rescored_on_merge"] is True and e["run"] == [str(a), str(b)]
        assert e["wer"] == expected[m]["wer"] and e["n_words"] == expected[m]["n_words"]
        assert e["ci95"] == expected[m]["ci95"]  # same options, same seeds as one run over everything
        for key, s in expected[m]["slices"].items():
            assert e["slices"][key]["wer"] == s["wer"]
        assert e["batch_size"] == 8 and e["device"] == "cpu"  # run facts kept
    pd.testing.assert_frame_equal(
        table.sort_values(["model", "utt_id"]).reset_index(drop=True)[["utt_id", "model", "hyp_raw"]],
        full.sort_values(["model", "utt_id"]).reset_index(drop=True)[["utt_id", "model", "hyp_raw"]],
    )


def _flat(text: str) -> str:
    """Rich wraps long messages to the terminal width; compare with whitespace collapsed."""
    return " ".join(text.split())


def _cli():  # the commands as the lead registers them in audits/cli/main.py
    import typer

    from audits.cli.report import query_command, report_command

    app = typer.Typer()
    app.command("report")(report_command)
    app.command("query")(query_command)
    return app


def test_cli_report_merges_into_out_and_query_reads_it(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    a = make_run(tmp_path / "a", models={"alpha": 0.04}, extras=False)
    b = make_run(tmp_path / "b", models={"beta": 0.12}, extras=False)
    runner = CliRunner()
    res = runner.invoke(_cli(), ["report", str(a), str(b)])
    assert res.exit_code == 2 and "--out" in _flat(res.output)
    res = runner.invoke(_cli(), ["report", str(a), str(b), "--out", str(a)])
    assert res.exit_code == 2 and "one of the runs" in _flat(res.output)
    out = tmp_path / "merged"
    res = runner.invoke(_cli(), ["report", str(a), str(b), "--out", str(out)])
    assert res.exit_code == 0, res.output
    for f in (
        "report.html",
        "report.md",
        "summary.json",
        "utterances.parquet",
        "exports/slices.csv",
        "exports/oasr/alpha.jsonl",
        "exports/oasr/beta.jsonl",
        "exports/results.duckdb",
    ):
        assert (out / f).exists(), f
    md = (out / "report.md").read_text()
    assert "relative to the evaluated cohort" in md and "| alpha |" in md and "| beta |" in md
    res = runner.invoke(_cli(), ["query", str(out), "SELECT model, wer FROM models ORDER BY model", "--format", "csv"])
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    assert lines[0] == "model,wer" and lines[1].startswith("alpha,") and lines[2].startswith("beta,")
    assert float(lines[1].split(",")[1]) == load_summary(a)["models"]["alpha"]["wer"]
    res = runner.invoke(_cli(), ["query", str(out), "SELECT * FROM missing_view"])
    assert res.exit_code == 2 and "views:" in _flat(res.output)
    c = make_run(tmp_path / "c", models={"gamma": 0.3}, extras=False, fingerprint="elsewhere")
    res = runner.invoke(_cli(), ["report", str(a), str(c), "--out", str(tmp_path / "bad")])
    assert res.exit_code == 2 and "different datasets" in _flat(res.output)
