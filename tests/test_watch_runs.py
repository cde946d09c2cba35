"""Sweeps you can watch: ``run.log`` in the run directory (appended on resume, secrets scrubbed), the pass
and its pending units in the runner's ``start`` event, and ``audit report --partial`` / ``audit query
--partial`` over the units finished so far, marked PARTIAL and never written as summary.json.

Audio: six Flite clips in three shards; models: two ``simulated`` ASR backends (a temporary registry).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from audits.cli.main import app
from audits.pipeline import run_audit
from audits.recipes import parse_recipe
from audits.reports.partial import partial_result
from engine.run.run_log import RunLogHandler
from tests.flite_corpus import build_flite_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_flite_corpus(tmp_path_factory.mktemp("watch-corpus"), lambda v, k: f"{v}-{k}")


@pytest.fixture()
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "configs" / "models"
    cfg.mkdir(parents=True)
    (cfg / "sim.yaml").write_text(
        "models:\n"
        "  sim-a: {backend: simulated, options: {rtfx: 1000}, batch_size: 2, params_m: 10}\n"
        "  sim-b: {backend: simulated, options: {rtfx: 500, seed: 1}, batch_size: 2, params_m: 20}\n"
    )
    monkeypatch.setenv("AUDIT_CONFIG_DIR", str(tmp_path / "configs"))


def _recipe(corpus: Path) -> Any:
    return parse_recipe(
        {"name": "watch", "dataset": str(corpus), "models": ["sim-a", "sim-b"], "shard_size": 2, "scoring": {"n_boot": 10}}, "watch.yaml"
    )


class Stop(Exception):
    pass


def test_run_log_partial_report_and_resume(corpus: Path, registry: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDIT_TEST_SECRET_TOKEN", "s3cr3t-value-123456")
    logging.getLogger().setLevel(logging.INFO)
    out = tmp_path / "run"
    starts: list[dict[str, Any]] = []
    done: list[tuple[str, str]] = []

    def stop_after_three(event: str, n: int, info: dict[str, Any]) -> None:
        if event == "start":
            starts.append(info)
        if event == "unit":
            done.append((info["model"], info["shard"]))
            logging.getLogger("audit").info("token s3cr3t-value-123456 must not reach the log")
            if len(done) == 3:
                raise Stop("interrupted")

    with pytest.raises(Stop):
        run_audit(_recipe(corpus), out, progress=stop_after_three)
    # the start event names the pass and its pending units (per-model ETA)
    assert starts[0]["pass"] == "asr" and len(starts[0]["units"]) == 6 and ("sim-b", "s00002") in starts[0]["units"]
    log_text = (out / "run.log").read_text()
    assert log_text.count("=== session started") == 1 and "run stopped: Stop: interrupted" in log_text
    assert "s3cr3t-value-123456" not in log_text and "[redacted]" in log_text

    # a partial: 3 finished units, scored with the run's recipe; never summary.json
    assert not (out / "summary.json").exists()
    res = CliRunner().invoke(app, ["report", "--partial", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    assert not (out / "summary.json").exists() and not (out / "report.md").exists()
    summary = json.loads((out / "summary.partial.json").read_text())
    assert summary["partial"]["units_done"] == {"sim-a": 2, "sim-b": 1}
    assert summary["models"]["sim-a"]["n_utts"] == 4 and summary["models"]["sim-b"]["n_utts"] == 2
    assert "digest" not in summary  # not sealed: no reader takes it for a run's summary
    md = (out / "report.partial.md").read_text()
    assert md.startswith("# PARTIAL: Audit report: watch") and "**PARTIAL**" in md
    page = (out / "report.partial.html").read_text()
    assert "<title>PARTIAL: " in page and "<h1>PARTIAL: " in page
    q = CliRunner().invoke(app, ["query", "--partial", str(out), "SELECT model, n_utts FROM models ORDER BY model", "--format", "json"])
    assert q.exit_code == 0, q.output
    assert "PARTIAL" in q.output and '"n_utts":4' in q.output.replace(" ", "")

    # resume: the log gains a second session; the final summary covers everything, and the partial
    # figures of sim-a's finished units equal the final ones on the same clips
    final = run_audit(_recipe(corpus), out).summary
    log_text = (out / "run.log").read_text()
    assert log_text.count("=== session started") == 2
    assert final["models"]["sim-a"]["n_utts"] == 6 and (out / "summary.json").is_file()
    part = partial_result(out)
    assert part.plain_summary["partial"]["units_done"] == {"sim-a": 3, "sim-b": 3}
    assert part.models["sim-a"]["wer"] == pytest.approx(final["models"]["sim-a"]["wer"])
    # both validate against the published summary schema (docs/schemas/summary.schema.json)
    jsonschema = pytest.importorskip("jsonschema")
    from audits.json_schemas import schema

    validator = jsonschema.Draft202012Validator(schema("summary"))
    for doc in (json.loads((out / "summary.json").read_text()), summary):
        assert not [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]


def test_run_log_holds_records_until_the_run_begins_writing(tmp_path: Path) -> None:
    out = tmp_path / "later"
    h = RunLogHandler(out)
    rec = logging.LogRecord("audit", logging.INFO, __file__, 1, "checked %s", ("inputs",), None)
    h.emit(rec)
    out.mkdir()  # an existing run directory: a refused resume writes nothing into it
    h.emit(logging.LogRecord("audit", logging.WARNING, __file__, 2, "second", (), None))
    assert not (out / "run.log").exists()
    h.begin()  # the run has checked everything and writes now
    h.emit(logging.LogRecord("audit", logging.INFO, __file__, 3, "third", (), None))
    h.close()
    lines = (out / "run.log").read_text().splitlines()
    assert lines[0].startswith("=== session started") and lines[1].endswith("INFO audit: checked inputs")
    assert lines[2].endswith("WARNING audit: second") and lines[3].endswith("INFO audit: third")
    refused = RunLogHandler(tmp_path / "refused")
    refused.emit(rec)
    refused.close()
    assert not (tmp_path / "refused").exists()


def test_partial_needs_a_run_directory(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["report", "--partial", str(tmp_path)])
    assert res.exit_code == 2 and "run.json" in res.output
