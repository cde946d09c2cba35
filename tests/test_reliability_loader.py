"""Reliability class 13: results trusted without their digest.

``api.load``, ``api.compare``, ``audit report``, ``audit query`` and ``audit tracks`` read a run
through one reader (``audits.run_dir.read_run``) that checks summary.json against the digest of
its own content and against the digest of the rows it was scored from. An edited summary, rows
changed after scoring, or a summary without its digests is refused by the API, merges and tracks,
naming the file; the report-only commands read it and warn loudly. Truncated or corrupt files give
the engine's errors naming the file, never a parser's traceback. ``api.run(models=[])`` is an error.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from audits import api
from audits.run_dir import RunIntegrityError, read_run, summary_digest
from engine.errors import ConfigError
from tests.reliability_env import Env, audit, speech_clips, write_dataset


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One finished run of two simulated models, and its recipe and dataset (run once for the module)."""
    tmp = tmp_path_factory.mktemp("loader")
    mp = pytest.MonkeyPatch()
    try:
        env = Env(tmp, mp)
        data = write_dataset(tmp / "data", speech_clips(6, 0))
        recipe = env.recipe(data, models="[sim-a, sim-b]")
        out = tmp / "run"
        res = audit("run", recipe, "--out", out)
        assert res.exit_code == 0, res.output
    finally:
        mp.undo()
    return {"run": out, "tmp": tmp, "recipe": recipe, "data": data}


def _copy(made: dict[str, Path], name: str) -> Path:
    dst = made["tmp"] / name
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(made["run"], dst)
    return dst


def _edit_wer(run: Path, wer: float = 0.01) -> None:
    """What a hand edit does: a figure changed, the digest left as the run wrote it."""
    s = json.loads((run / "summary.json").read_text())
    s["models"]["sim-a"]["wer"] = wer
    (run / "summary.json").write_text(json.dumps(s, indent=2))


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_fresh_run_reads_back_with_both_digests(made: dict[str, Path]) -> None:
    loaded = read_run(made["run"])
    assert loaded.problems == ()
    s = loaded.summary
    assert s["digest"]["sha256"] == summary_digest(s) and len(s["rows"]["sha256"]) == 64
    assert api.load(made["run"]).summary == s


def test_api_load_refuses_an_edited_summary(made: dict[str, Path]) -> None:
    run = _copy(made, "edited")
    _edit_wer(run)
    with pytest.raises(RunIntegrityError, match=r"summary.json was changed after the run wrote it"):
        api.load(run)


def test_api_load_and_compare_refuse_rows_changed_after_scoring(made: dict[str, Path]) -> None:
    run = _copy(made, "rows-changed")
    table = pq.read_table(run / "utterances.parquet").to_pandas()
    table.loc[0, "hyp_raw"] = "a b c"  # a perfect transcript, after the fact
    table.to_parquet(run / "utterances.parquet", index=False)
    with pytest.raises(RunIntegrityError, match=r"utterances.parquet changed after the run was scored"):
        api.load(run)
    with pytest.raises(RunIntegrityError, match=r"utterances.parquet changed after the run was scored"):
        api.compare([made["run"], run])


def test_a_summary_without_its_digest_is_refused(made: dict[str, Path]) -> None:
    run = _copy(made, "no-digest")
    s = json.loads((run / "summary.json").read_text())
    del s["digest"]
    (run / "summary.json").write_text(json.dumps(s))
    with pytest.raises(RunIntegrityError, match="has no digest of its content"):
        api.load(run)


def test_report_and_query_read_an_edited_run_with_a_loud_warning(made: dict[str, Path]) -> None:
    run = _copy(made, "edited-report")
    _edit_wer(run, 0.01)
    res = audit("report", run, "--quiet")
    assert res.exit_code == 0, res.output
    assert "WARNING: the figures below may not be the run's own" in _flat(res.output)
    assert "summary.json was changed after the run wrote it" in _flat(res.output)
    res = audit("query", run, "SELECT model, wer FROM models ORDER BY model", "--format", "csv")
    assert res.exit_code == 0, res.output
    assert "WARNING" in res.output and "sim-a,0.01" in res.output


def test_tracks_and_merges_refuse_an_edited_run(made: dict[str, Path]) -> None:
    run = _copy(made, "edited-tracks")
    other = _copy(made, "other-track")
    _edit_wer(run)
    out = made["tmp"] / "tracks-out"
    res = audit("tracks", f"a={other}", f"b={run}", "--out", out, "--n-boot", "10")
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "summary.json was changed after the run wrote it" in _flat(res.output)
    res = audit("report", other, run, "--out", made["tmp"] / "merged-bad", "--quiet")
    assert res.exit_code == 2 and "changed after the run wrote it" in _flat(res.output)


def test_a_merged_report_is_a_sealed_run_of_its_own(made: dict[str, Path]) -> None:
    b = _copy(made, "copy-for-merge")
    out = made["tmp"] / "merged"
    res = audit("report", made["run"], b, "--out", out, "--quiet")
    assert res.exit_code == 0, res.output
    merged = api.load(out)  # both digests recorded for the merged rows and summary
    assert merged.summary["rows"]["sha256"] and merged.summary["digest"]["sha256"] == summary_digest(merged.summary)


@pytest.mark.parametrize("damage", ["truncated", "not-an-object", "binary"])
def test_a_corrupt_summary_is_an_engine_error_naming_the_file(made: dict[str, Path], damage: str) -> None:
    run = _copy(made, f"bad-summary-{damage}")
    path = run / "summary.json"
    if damage == "truncated":
        path.write_text(path.read_text()[:200])
    elif damage == "not-an-object":
        path.write_text("[1, 2, 3]")
    else:
        path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match=r"summary.json: not"):
        api.load(run)
    for args in (("report", run, "--quiet"), ("query", run, "SELECT 1")):
        res = audit(*args)
        assert res.exit_code == 2 and "Traceback" not in res.output and "summary.json: not" in _flat(res.output), res.output


def test_truncated_rows_are_an_engine_error_naming_the_file(made: dict[str, Path]) -> None:
    run = _copy(made, "bad-rows")
    rows = run / "utterances.parquet"
    rows.write_bytes(rows.read_bytes()[:100])
    with pytest.raises(ConfigError, match=r"utterances.parquet"):
        api.load(run)
    res = audit("query", run, "SELECT count(*) FROM utterances")  # report-only: past the digest warning, the file itself
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "utterances.parquet: not a readable Parquet table" in _flat(res.output)


def test_api_run_with_an_empty_model_list_is_an_error(made: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env(tmp_path, monkeypatch)
    data = write_dataset(tmp_path / "data", speech_clips(2, 0))
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="models: an empty list names no model"):
        api.run(str(env.recipe(data)), models=[], out=out)
    assert env.loads() == 0 and not out.exists()


def test_a_corrupt_run_record_is_an_engine_error_on_resume(made: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Resuming into a folder whose run.json is truncated: an error naming the file, not a JSON traceback."""
    run = _copy(made, "bad-run-json")
    (run / "run.json").write_text('{"recipe": "r", "dataset_fing')
    monkeypatch.setenv("AUDIT_CONFIG_DIR", str(made["tmp"] / "configs"))  # the registry the run was made with
    res = audit("run", made["recipe"], "--out", run)
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "run.json cannot be read" in _flat(res.output)
