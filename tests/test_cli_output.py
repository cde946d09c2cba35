"""Machine-readable output: ``--format table|json|csv`` on the listing and result commands, and full-width
tables when stdout is not a terminal (no name cut to "assembl…")."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from audits.cli.main import app
from audits.cli.output import check_format, render
from engine.errors import ConfigError
from engine.model_registry import load_model_registry
from tests.test_report_html import make_run

REPO = Path(__file__).resolve().parents[1]
LONG = "assemblyai-universal-streaming-english-with-a-very-long-registry-name"


@pytest.fixture()
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small registry (checking the full one's availability takes tens of seconds), with a long name."""
    cfg = tmp_path / "configs" / "models"
    cfg.mkdir(parents=True)
    (cfg / "t.yaml").write_text(
        "models:\n"
        f"  {LONG}: {{backend: simulated, options: {{rtfx: 1000}}, params_m: 12.5, tags: [t, long]}}\n"
        "  sim-b: {backend: simulated, options: {rtfx: 10}, tags: [t]}\n"
    )
    monkeypatch.setenv("AUDIT_CONFIG_DIR", str(tmp_path / "configs"))
    return tmp_path / "configs"


def test_list_models_json_and_csv_hold_every_entry_with_typed_values(registry: Path) -> None:
    reg = load_model_registry()
    res = CliRunner().invoke(app, ["list", "models", "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert [r["name"] for r in rows] == sorted(reg)
    long = next(r for r in rows if r["name"] == LONG)
    assert long["backend"] == "simulated" and long["tags"] == ["t", "long"] and long["params_m"] == 12.5 and long["runnable"] is True
    res = CliRunner().invoke(app, ["list", "models", "--format", "csv"], catch_exceptions=False)
    parsed = list(csv.DictReader(io.StringIO(res.output)))
    assert [r["name"] for r in parsed] == sorted(reg) and set(parsed[0]) == {
        "name",
        "backend",
        "family",
        "params_m",
        "tags",
        "runnable",
        "why",
    }


def test_list_backends_and_recipes_as_json() -> None:
    res = CliRunner().invoke(app, ["list", "backends", "--format", "json"], catch_exceptions=False)
    rows = json.loads(res.output)
    assert {"kind", "name", "origin", "target", "group"} <= set(rows[0])
    assert any(r["name"] == "pocketsphinx" for r in rows)
    res = CliRunner().invoke(app, ["list", "recipes", "--format", "json"], catch_exceptions=False)
    recipes = {r["name"]: r for r in json.loads(res.output)}
    assert recipes["demo"]["valid"] is True and recipes["demo"]["description"]


def test_a_bad_format_is_refused_naming_the_choices(registry: Path) -> None:
    res = CliRunner().invoke(app, ["list", "models", "--format", "yaml"])
    assert res.exit_code == 2 and "table, json, csv" in res.output
    with pytest.raises(ConfigError, match="--format"):
        check_format("xml")


def test_render_keeps_types_and_blanks() -> None:
    rows = [{"a": 1.5, "b": None, "c": ["x", "y"], "d": float("nan")}]
    assert json.loads(render(rows, ["a", "b", "c", "d"], "json")) == [{"a": 1.5, "b": None, "c": ["x", "y"], "d": None}]
    assert render(rows, ["a", "b", "c", "d"], "csv") == 'a,b,c,d\n1.5,,"x,y",\n'


def test_report_format_json_prints_the_models_rows(tmp_path: Path) -> None:
    d = make_run(tmp_path / "run", extras=False)
    res = CliRunner().invoke(app, ["report", str(d), "--no-exports", "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    start = res.output.index("[")
    rows = json.loads(res.output[start : res.output.rindex("]") + 1])
    summary = json.loads((d / "summary.json").read_text())
    assert {r["model"]: r["wer"] for r in rows} == pytest.approx({m: e["wer"] for m, e in summary["models"].items()})


def test_piped_tables_keep_their_full_width(registry: Path, tmp_path: Path) -> None:
    """Through a pipe (not a terminal, no COLUMNS), every registry name and reason is printed whole."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"], env["AUDIT_CONFIG_DIR"] = str(REPO), str(registry)
    proc = subprocess.run(
        [sys.executable, "-c", "from audits.cli.main import entrypoint; entrypoint()", "list", "models"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout
    names = {ln.split("│")[1].strip() for ln in proc.stdout.splitlines() if ln.count("│") >= 7}
    assert names == {LONG, "sim-b"}
    assert max(len(ln) for ln in proc.stdout.splitlines()) > 80
