"""Regression tests for the red-team findings on configuration, queries and reports.

Each case once changed behaviour silently or let input reach where it should not: a quoted
boolean that turned a protection off, an alias "bomb" recipe, SQL that read the file system,
report text that broke out of its table cell.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from audits.recipes import load_recipe, parse_recipe
from audits.reports.formatting import esc, md
from audits.reports.markdown import render_markdown
from audits.reports.query import QueryError, query
from engine.config import load_yaml
from engine.errors import ConfigError


def _recipe(**over: object) -> dict:
    base: dict = {"dataset": {"path": "data.jsonl"}, "models": ["whisper-tiny.en"]}
    for key, value in over.items():
        section, _, field = key.partition("__")
        if field:
            base.setdefault(section, {})[field] = value
        else:
            base[key] = value
    return base


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("dataset__allow_outside_root", "false", "dataset.allow_outside_root: expected a boolean"),
        ("scoring__semantic_similarity", "yes", "scoring.semantic_similarity: expected a boolean"),
        ("scoring__n_boot", "100", "scoring.n_boot: expected an integer"),
        ("dataset__limit", 2.5, "dataset.limit: expected an integer"),
        ("shard_size", True, "shard_size: expected an integer"),
    ],
)
def test_recipe_fields_are_validated_by_type(key: str, value: object, expected: str) -> None:
    with pytest.raises(ConfigError, match="r.yaml") as err:
        parse_recipe(_recipe(**{key: value}), "r.yaml")
    assert expected in str(err.value)


def test_backend_options_are_validated_by_type() -> None:
    from engine.backends.asr.transformers import TransformersBackend

    with pytest.raises(ConfigError, match="options.trust_remote_code: expected a boolean"):
        TransformersBackend(model="x", trust_remote_code="false")
    with pytest.raises(ConfigError, match="options.num_beams: expected an integer"):
        TransformersBackend(model="x", num_beams="4")
    TransformersBackend(model="x", trust_remote_code=False, num_beams=2)  # the right types pass


def test_unknown_normalizer_is_a_config_error_with_a_suggestion() -> None:
    with pytest.raises(ConfigError, match="unknown normalizer 'whisper-englsh'.*did you mean 'whisper-english'"):
        parse_recipe(_recipe(normalizer="whisper-englsh"), "r.yaml")


def test_yaml_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert path.stat().st_size < 1000
    with pytest.raises(ConfigError, match="bomb.yaml: YAML expands to more than"):
        load_yaml(path)


def test_oversized_and_non_utf8_recipes_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="latin1.yaml: not valid UTF-8"):
        load_recipe(str(bad))
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * (2 << 20) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="big.yaml: .* larger than"):
        load_yaml(big)


@pytest.fixture()
def tiny_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    pd.DataFrame([{"utt_id": "u1", "model": "m", "hyp_raw": "a", "ref_raw": "a", "error": None}]).to_parquet(run / "utterances.parquet")
    (run / "summary.json").write_text(json.dumps({"models": {"m": {"wer": 0.0}}, "normalizer": {"name": "whisper-english"}}))
    return run


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "COPY models TO '{out}/leak.csv'",
        "SELECT * FROM glob('/root/*')",
        "SET enable_external_access = true",
        "ATTACH '{out}/other.db'",
    ],
)
def test_query_has_no_file_access(tiny_run: Path, tmp_path: Path, sql: str) -> None:
    with pytest.raises(QueryError):
        query(tiny_run, sql.format(out=tmp_path))
    assert not (tmp_path / "leak.csv").exists() and not (tmp_path / "other.db").exists()
    assert query(tiny_run, "SELECT count(*) AS n FROM utterances")["n"][0] == 1  # the views still work


def test_report_md_escapes_label_values_and_reasons() -> None:
    hostile = "x | y\n## injected <script>alert(1)</script>\u202e"
    summary = {
        "recipe": {"name": "r"},
        "models": {"m": {"wer": 0.1, "slices": {f"accent={hostile}": {"wer": 0.2}}, "failures": {hostile: 2}, "error": hostile}},
    }
    text = render_markdown(summary)
    assert "<script>" not in text and "\u202e" not in text and "\n## injected" not in text
    assert "accent=x \\| y ## injected &lt;script&gt;" in text
    for line in text.splitlines():
        if line.startswith("| accent="):
            assert line.count(" | ") == 7  # still eight cells: the pipe in the value is escaped


def test_html_and_md_escapes_drop_nul_and_bidi_controls() -> None:
    s = "evil\x00\u202etxt.exe\u2066"
    assert esc(s) == "eviltxt.exe" and md(s) == "eviltxt.exe"
