"""``from audits import api``: docs/api.md's example runs as written, and the API's answers match the files."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from audits import api
from audits.cli.main import app
from audits.version import _from_pyproject, version
from engine.errors import ConfigError
from tests.conftest import espeak_wav, write_manifest

REPO = Path(__file__).resolve().parents[1]
TEXTS = ["the cat sat on the mat", "please call stella", "ask her to bring these things", "six spoons of fresh snow peas"]


def doc_code_blocks(path: Path) -> list[str]:
    """The ```python blocks of a Markdown file, in order."""
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.DOTALL)


def make_clips(root: Path) -> Path:
    """``root/clips/manifest.jsonl``: four synthetic clips from two speakers with an accent label."""
    clips = root / "clips"
    clips.mkdir(parents=True)
    rows = [
        {
            "audio_filepath": str(espeak_wav(clips / f"c{i}.wav", t, "en-us" if i % 2 else "en-gb")),
            "text": t,
            "speaker": f"s{i % 2}",
            "accent": "us" if i % 2 else "gb",
        }
        for i, t in enumerate(TEXTS)
    ]
    return write_manifest(clips / "manifest.jsonl", rows)


@pytest.mark.slow
def test_the_documented_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every python block of docs/api.md, in one namespace, in a folder holding ``clips/manifest.jsonl``."""
    blocks = doc_code_blocks(REPO / "docs" / "api.md")
    assert len(blocks) >= 4
    make_clips(tmp_path)
    monkeypatch.chdir(tmp_path)
    ns: dict[str, object] = {"__name__": "docs_api"}
    for block in blocks:
        exec(compile(block, "docs/api.md", "exec"), ns)
    result = ns["result"]
    assert isinstance(result, api.RunResult) and result.scored is not None and result.run_dir is not None
    assert result.sections == {} and len(result.table) == 4
    both = ns["both"]
    assert isinstance(both, api.RunResult)
    assert sorted(both.models) == ["pocketsphinx-en-us", "whisper-tiny.en"]
    pairs = [{p["a"], p["b"]} for p in both.summary["comparisons"]["pairs"]]
    assert pairs == [{"pocketsphinx-en-us", "whisper-tiny.en"}]
    merged = json.loads((tmp_path / "runs" / "clips-both" / "summary.json").read_text())  # written by compare(out=...)
    assert merged["models"].keys() == both.models.keys() and merged["engine_version"] == version()
    merged_dir = tmp_path / "runs" / "clips-both"
    assert (merged_dir / "report.md").exists() and (merged_dir / "exports" / "results.duckdb").exists()


def test_version_comes_from_the_package_and_the_cli_prints_it() -> None:
    assert version() == api.version() and version() != "unknown"
    assert _from_pyproject(REPO / "pyproject.toml") == version()  # the checkout and the installed metadata agree
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout.strip() == f"audit-engine {version()}"


def test_pyproject_fallback_reads_the_project_table(tmp_path: Path) -> None:
    p = tmp_path / "pyproject.toml"
    p.write_text('[tool.x]\nversion = "9.9"\n\n[project]\nname = "x"\nversion = "1.2.3"\n')
    assert _from_pyproject(p) == "1.2.3"
    assert _from_pyproject(tmp_path / "missing.toml") is None


def test_api_errors_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="list of registry names"):
        api.run("demo", models="whisper-tiny.en", out=tmp_path / "r")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="at least two run directories"):
        api.compare([tmp_path])
    with pytest.raises(ConfigError, match="list of run directories"):
        api.compare(str(tmp_path))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="no summary.json"):
        api.load(tmp_path)
    assert not os.listdir(tmp_path)


def test_load_gives_the_files_as_a_result(voxpopuli_preds: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A predictions run (no audio): written once, never read back during the run; load gives the same result."""
    import audits.asr.summary as summary_mod
    import audits.pipeline as pipeline_mod
    import audits.reports.merge as merge_mod
    import audits.run_dir as run_dir_mod

    def no_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("a run read back a file it wrote")

    writes: list[Path] = []
    real_write = summary_mod.write_summary

    def counting_write(out_dir: Path, summary: object) -> Path:
        writes.append(Path(out_dir))
        return real_write(out_dir, summary)  # type: ignore[arg-type]

    out = tmp_path / "run"
    with monkeypatch.context() as m:
        for mod, name in (
            (summary_mod, "load_summary"),
            (merge_mod, "read_run"),
            (merge_mod, "read_rows_file"),
            (merge_mod, "load_table"),
            (run_dir_mod, "read_run"),
            (run_dir_mod, "read_summary_file"),
            (run_dir_mod, "read_rows_file"),
            (pipeline_mod, "load_rows"),
        ):
            m.setattr(mod, name, no_read)
        m.setattr(pipeline_mod, "write_summary", counting_write)
        fresh = api.run("score-predictions", dataset=voxpopuli_preds, reader="oasr-predictions", limit=10, out=out)
    assert writes == [out]
    loaded = api.load(out)
    assert json.loads(json.dumps(fresh.summary)) == json.loads((out / "summary.json").read_text()) == loaded.summary
    assert fresh.table.equals(loaded.table)
    assert loaded.scored is None and fresh.scored is not None and loaded.run_dir == out
    assert list(api.frames(loaded)) == list(api.frames(fresh))
    best = api.query(loaded, "SELECT model, wer FROM models ORDER BY wer LIMIT 1")
    assert best["wer"].iloc[0] == min(m["wer"] for m in loaded.models.values())
