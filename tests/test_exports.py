"""Exports (OASR JSONL, slices CSV, DuckDB) read back and re-scored give the run's numbers; SQL views work."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import duckdb
import jiwer
import pandas as pd
import pytest

from audits.asr.results import SliceFigures, report_columns
from audits.asr.scoring import ScoringOptions, score_table, summarize_models
from audits.asr.summary import load_summary
from audits.normalizing import get_normalizer
from audits.reports.exports import safe_filename, write_exports
from audits.reports.merge import load_run
from audits.reports.query import QueryError, query
from engine.datasets.readers import OasrPredictionsReader
from engine.errors import ConfigError
from tests.test_report_html import make_run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    d = make_run(tmp_path_factory.mktemp("exp"), extras=True)
    summary, table = load_run(d)
    written = write_exports(summary, table, d)
    assert set(written) == {"oasr", "slices_csv", "duckdb"}
    return d, summary


def test_oasr_jsonl_has_leaderboard_keys(run: tuple[Path, dict]) -> None:
    d, summary = run
    table = pd.read_parquet(d / "utterances.parquet")
    index = json.loads((d / "exports" / "oasr" / "index.json").read_text())
    for model in summary["models"]:
        lines = (d / "exports" / "oasr" / f"{model}.jsonl").read_text(encoding="utf-8").splitlines()
        recs = [json.loads(x) for x in lines]
        g = table[(table["model"] == model) & table["error"].isna()].set_index("utt_id")
        assert len(recs) == len(g) == index[model]["n_rows"]
        for r in recs:
            assert {"audio_filepath", "duration", "time", "text", "pred_text"} <= set(r)
            row = g.loc[r["audio_filepath"]]
            assert r["text"] == row["ref_raw"] and r["pred_text"] == row["hyp_raw"]
            assert r["duration"] == pytest.approx(row["duration_s"]) and r["time"] == pytest.approx(row["infer_s"])
            assert r["accent_group"] == row["accent_group"]
    assert index["beta"]["n_failed_left_out"] == 1 and index["alpha"]["n_failed_left_out"] == 0


def test_oasr_export_rescored_gives_the_same_wer(run: tuple[Path, dict]) -> None:
    d, summary = run
    norm = get_normalizer(summary["normalizer"]["name"])
    reader = OasrPredictionsReader()
    for model, entry in summary["models"].items():
        path = d / "exports" / "oasr" / f"{model}.jsonl"
        # independent: jiwer on normalized text, corpus-level
        recs = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
        refs = [norm(r["text"]) for r in recs]
        hyps = [norm(r["pred_text"]) for r in recs]
        assert jiwer.wer(refs, hyps) == pytest.approx(entry["wer"], abs=1e-12)
        # the project's own reader + scorer, slices included (labels travel as extra keys)
        utts = reader.read_file(path)
        rows = pd.DataFrame(
            [
                {
                    "utt_id": u.utt_id,
                    "model": model,
                    "hyp_raw": u.hyp_raw,
                    "ref_raw": u.reference,
                    "duration_s": u.duration_s,
                    "infer_s": None,
                    "error": None,
                    "speaker": None,
                    "shard": "x",
                    "parent_id": None,
                    **u.labels,
                }
                for u in utts
            ]
        )
        rescored = summarize_models(score_table(rows, norm), ScoringOptions(n_boot=20))[model]
        assert rescored["wer"] == entry["wer"]
        assert rescored["n_words"] == entry["n_words"]
        for key, s in entry["slices"].items():
            assert rescored["slices"][key]["wer"] == s["wer"], key


def test_slices_csv_matches_summary(run: tuple[Path, dict]) -> None:
    d, summary = run
    with open(d / "exports" / "slices.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    declared = [c.name for c in report_columns(SliceFigures)]  # the figures the records declare for the tables, after CER
    assert "exact_match_rate" in declared
    assert rows and list(rows[0])[: 11 + len(declared)] == [
        "model",
        "slice",
        "label",
        "value",
        "wer",
        "ci_lo",
        "ci_hi",
        "cer",
        "cer_ci_lo",
        "cer_ci_hi",
        *declared,
        "n_utts",
    ]
    n = sum(len(m["slices"]) for m in summary["models"].values())
    assert len(rows) == n
    for r in rows:
        s = summary["models"][r["model"]]["slices"][r["slice"]]
        assert r["slice"] == f"{r['label']}={r['value']}"
        assert float(r["wer"]) == s["wer"] and float(r["ci_lo"]) == s["ci95"][0] and float(r["ci_hi"]) == s["ci95"][1]
        assert int(r["n_utts"]) == s["n_utts"] and int(r["n_words"]) == s["n_words"]
        assert all(float(r[name]) == s[name] if s.get(name) is not None else r[name] == "" for name in declared)


def test_duckdb_file_has_the_tables(run: tuple[Path, dict]) -> None:
    d, summary = run
    con = duckdb.connect(str(d / "exports" / "results.duckdb"), read_only=True)
    try:
        names = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        assert {"utterances", "models", "slices", "gaps", "probes"} <= names
        got = dict(con.execute("SELECT model, wer FROM models").fetchall())
        assert got == {m: e["wer"] for m, e in summary["models"].items()}
        # the scored rows: corpus WER per model from them is the summary's (failed rows are not ok and count no words)
        assert "scored" in names
        scored = dict(con.execute("SELECT model, sum(word_errors) / sum(n_words) FROM scored WHERE ok GROUP BY model").fetchall())
        assert scored == pytest.approx({m: e["wer"] for m, e in summary["models"].items()}, abs=1e-12)
        n_rows = con.execute("SELECT count(*) FROM scored").fetchone()
        assert n_rows is not None and n_rows[0] == con.execute("SELECT count(*) FROM utterances").fetchone()[0]  # type: ignore[index]
    finally:
        con.close()


def test_query_views(run: tuple[Path, dict]) -> None:
    d, summary = run
    # "WER by accent for models under 1 B parameters"
    df = query(
        d,
        "SELECT model, value AS accent, slices.wer FROM slices JOIN models USING (model) "
        "WHERE label = 'accent_group' AND params_m < 1000 ORDER BY model, accent",
    )
    assert sorted(set(df["model"])) == ["beta", "gamma"]  # alpha has 1550 M parameters
    for r in df.itertuples():
        assert r.wer == summary["models"][r.model]["slices"][f"accent_group={r.accent}"]["wer"]
    n = query(d, "SELECT count(*) AS n FROM utterances")["n"][0]
    assert n == 3 * 32
    # corpus WER from per-row counts equals the summary's
    w = query(d, "SELECT model, sum(word_errors) / sum(n_words) AS wer FROM scored WHERE ok GROUP BY model")
    for r in w.itertuples():
        assert r.wer == pytest.approx(summary["models"][r.model]["wer"], abs=1e-12)
    gaps = query(d, "SELECT model, label, gap FROM gaps WHERE excludes_zero")
    assert ("gamma", "accent_group") in set(zip(gaps["model"], gaps["label"]))
    probes = query(d, "SELECT model, rate, k, n FROM probes WHERE probe = 'bad_reference' ORDER BY rate DESC")
    assert probes["model"][0] == "memorizer" and probes["k"][0] == 19 and probes["n"][0] == 20


def test_query_errors_say_what_exists(run: tuple[Path, dict], tmp_path: Path) -> None:
    d, _ = run
    with pytest.raises(QueryError, match="views: utterances, models, slices"):
        query(d, "SELECT * FROM nope")
    with pytest.raises(ConfigError, match="no summary.json"):
        query(tmp_path, "SELECT 1")
    with pytest.raises(ConfigError, match="empty SQL"):
        query(d, "  ")


def test_query_over_several_runs_merges(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", models={"alpha": 0.04}, extras=False)
    b = make_run(tmp_path / "b", models={"beta": 0.12}, extras=False)
    df = query([a, b], "SELECT model, wer FROM models ORDER BY model")
    assert list(df["model"]) == ["alpha", "beta"]
    assert df["wer"][0] == load_summary(a)["models"]["alpha"]["wer"]


def test_safe_filename() -> None:
    assert safe_filename("openai/whisper-large-v3") == "openai_whisper-large-v3"
    assert safe_filename("../../etc") == "etc"
    assert safe_filename("a b:c") == "a_b_c"
