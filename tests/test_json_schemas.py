"""JSON Schemas for recipes and summary.json: generated from the code's declarations, published in
docs/schemas/ (regenerated here and compared), and what the code accepts or writes validates."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from audits.cli.main import app
from audits.json_schemas import SCHEMA_NAMES, field_schema, schema, schema_text
from audits.recipes import SCORING_FIELDS, TOP_FIELDS, parse_recipe
from engine.config import load_yaml
from engine.errors import ConfigError
from tests.test_report_html import make_run

REPO = Path(__file__).resolve().parents[1]
HAS_JSONSCHEMA = importlib.util.find_spec("jsonschema") is not None


def test_published_schemas_are_the_codes() -> None:
    for name in SCHEMA_NAMES:
        published = (REPO / "docs" / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8")
        assert published == schema_text(name), f"docs/schemas/{name}.schema.json is stale: run python scripts/write_schemas.py"


def test_fields_carry_their_declared_bounds_and_defaults() -> None:
    n_boot = field_schema(SCORING_FIELDS["n_boot"])
    assert n_boot["type"] == "integer" and n_boot["minimum"] == 1 and n_boot["default"] == 1000
    batch = field_schema(TOP_FIELDS["batch_size"])
    assert batch["type"] == ["integer", "null"] and batch["default"] is None
    rec = schema("recipe")
    assert rec["required"] == ["dataset", "models"] and rec["additionalProperties"] is False
    summ = schema("summary")
    assert summ["properties"]["models"]["additionalProperties"] == {"$ref": "#/$defs/ModelFigures"}
    assert "wer" in summ["$defs"]["ModelFigures"]["properties"]


def test_audit_schema_prints_it_and_refuses_an_unknown_name() -> None:
    res = CliRunner().invoke(app, ["schema", "summary"])
    assert res.exit_code == 0 and json.loads(res.output) == schema("summary")
    res = CliRunner().invoke(app, ["schema", "report"])
    assert res.exit_code == 2 and "recipe, summary" in res.output
    with pytest.raises(ConfigError):
        schema("nope")


@pytest.mark.skipif(not HAS_JSONSCHEMA, reason="jsonschema is not installed")
def test_shipped_recipes_validate_and_what_the_parser_refuses_does_not() -> None:
    import jsonschema

    v = jsonschema.Draft202012Validator(schema("recipe"))
    recipes = sorted((REPO / "audit_configs" / "recipes").glob("*.yaml"))
    assert recipes
    for path in recipes:
        data = load_yaml(path)
        assert not list(v.iter_errors(data)), path
        parse_recipe(data, str(path))  # the parser accepts them too
    base = {"dataset": {"path": "x.jsonl"}, "models": ["m"]}
    for bad in (
        {**base, "modles": ["m"]},  # unknown key
        {**base, "scoring": {"n_boot": 0}},  # below the declared minimum
        {**base, "dataset": {"path": "x", "limt": 3}},
        {"models": ["m"]},  # no dataset
    ):
        assert list(v.iter_errors(bad)), bad
        with pytest.raises(ConfigError):
            parse_recipe(bad, "bad.yaml")


@pytest.mark.skipif(not HAS_JSONSCHEMA, reason="jsonschema is not installed")
def test_a_summary_the_code_writes_validates(tmp_path: Path) -> None:
    import jsonschema

    summary = json.loads((make_run(tmp_path / "run", extras=True) / "summary.json").read_text())
    v = jsonschema.Draft202012Validator(schema("summary"))
    assert not [f"{list(e.absolute_path)}: {e.message}" for e in v.iter_errors(summary)]
    broken = copy.deepcopy(summary)
    model = next(iter(broken["models"]))
    broken["models"][model]["wer"] = "12%"
    broken["schema_version"] = 1
    paths = {tuple(e.absolute_path) for e in v.iter_errors(broken)}
    assert ("models", model, "wer") in paths and ("schema_version",) in paths
