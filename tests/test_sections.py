"""Audit sections plug in through ``audits.sections``: a new one is parsed, run, summarized and
reported without touching the pipeline or the reports; recipes keep their summary shape."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

import audits.sections as sections
from audits.pipeline import run_recipe
from audits.recipes import DatasetConfig, ScoringConfig, find_recipe, list_recipes, load_recipe, parse_recipe
from audits.records import Record, figure
from audits.reports.formatting import esc
from audits.result import RunResult
from audits.sections import AuditSection, SectionContext, builtin_registry, get_section, ordered, section_names
from engine.config import check_keys, expect_type, load_yaml
from engine.errors import ConfigError, RegistryError
from tests.conftest import espeak_wav, write_manifest


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    greeting: str


@dataclasses.dataclass(frozen=True)
class ToyResult(Record):
    greeting: str = figure("")
    n_utts: int = figure(0)
    n_rows: int = figure(0)
    models: tuple[str, ...] = figure(())


class ToySection(AuditSection[ToyConfig, ToyResult]):
    """Counts the utterances and the ASR rows it is handed; records every call on the class."""

    key = "toy"
    title = "Toy section"
    order = 5
    can_run_without_asr_models = True
    result_type = ToyResult
    calls: list[str] = []

    def parse(self, raw: Mapping[str, Any], source: str) -> ToyConfig:
        self.calls.append("parse")
        check_keys(raw, {"greeting"}, f"{source}: toy", required={"greeting"})
        return ToyConfig(str(expect_type(raw["greeting"], str, f"{source}: toy.greeting")))

    def run(self, config: ToyConfig, ctx: SectionContext) -> ToyResult:
        self.calls.append("run")
        n_utts = sum(len(ctx.dataset.load_shard(sid).utterances) for sid in ctx.dataset.shard_ids)
        return ToyResult(config.greeting, n_utts, len(ctx.load_rows()), tuple(sorted(s.name for s in ctx.asr_models)))

    def markdown(self, result: ToyResult, run: RunResult) -> list[str]:
        self.calls.append("markdown")
        assert isinstance(result, ToyResult) and run.result(self.key) == result
        return [f"## {self.title}", "", f"{result.greeting}: {result.n_utts} utterances, {result.n_rows} ASR rows", ""]

    def html(self, result: ToyResult, run: RunResult, data: Mapping[str, Any], colors: Mapping[str, str]) -> tuple[str, str, str] | None:
        assert isinstance(result, ToyResult)
        return (self.title, f"<p class='toy'>{esc(result.greeting)}</p>", "") if result.greeting else None

    def tables(self, result: ToyResult | None, run: RunResult) -> dict[str, pd.DataFrame]:
        rows = [{"model": m, "greeting": result.greeting} for m in result.models] if result is not None else []
        return {"toy_greetings": pd.DataFrame(rows, columns=["model", "greeting"])}

    def findings(self, result: ToyResult, run: RunResult) -> list[str]:
        return [f"The toy section counted {result.n_utts} utterances (of {len(run.asr.models)} model(s))."]


class NeedsModelsSection(ToySection):
    key = "needy"
    title = "Needs ASR models"
    order = 6
    can_run_without_asr_models = False
    needs_asr_models = True

    def tables(self, result: ToyResult | None, run: RunResult) -> dict[str, pd.DataFrame]:
        return {}


class ClashSection(ToySection):
    """Defines the toy section's table again: summary_frames must refuse it."""

    key = "clash"


@pytest.fixture()
def toy_registry(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The built-in sections plus the toy ones, on a fresh registry (the global one is restored after)."""
    reg = builtin_registry()
    reg.register("toy")(ToySection)
    reg.register("needy")(NeedsModelsSection)
    monkeypatch.setattr(sections, "SECTIONS", reg)
    ToySection.calls.clear()
    return reg


def test_a_toy_section_is_parsed_run_summarized_and_reported(toy_registry: Any, voxpopuli_preds: Path, tmp_path: Path) -> None:
    recipe = parse_recipe(
        {
            "name": "toy",
            "dataset": {"path": str(voxpopuli_preds), "reader": "oasr-predictions", "limit": 12},
            "models": [],
            "scoring": {"n_boot": 20},
            "toy": {"greeting": "hello <world>"},
        },
        "toy.yaml",
    )
    assert recipe.section("toy") == {"greeting": "hello <world>"}
    out = tmp_path / "run"
    summary = run_recipe(recipe, out)
    assert ToySection.calls == ["parse", "run", "markdown"]
    models = sorted(summary["models"])
    assert summary["toy"] == {"greeting": "hello <world>", "n_utts": 12, "n_rows": 12 * len(models), "models": models}
    assert summary["recipe"]["toy"] == {"greeting": "hello <world>"} and summary["recipe"]["speaker"] == {}
    assert json.loads((out / "summary.json").read_text())["toy"] == summary["toy"]
    md = (out / "report.md").read_text(encoding="utf-8")
    assert f"## Toy section\n\nhello <world>: 12 utterances, {12 * len(models)} ASR rows" in md
    page = (out / "report.html").read_text(encoding="utf-8")
    assert '<section id="toy"><h2>Toy section</h2>' in page and "<p class='toy'>hello &lt;world&gt;</p>" in page
    assert "href='#toy'" in page
    # the section's own tables and findings, through the hooks: exports, query views, both reports' findings
    assert f"<li>The toy section counted 12 utterances (of {len(models)} model(s)).</li>" in page
    con = duckdb.connect(str(out / "exports" / "results.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT model, greeting FROM toy_greetings ORDER BY model").fetchall() == [(m, "hello <world>") for m in models]
        # every section's tables exist, with their columns, when the section did not run
        assert con.execute("SELECT count(*) FROM probes").fetchone() == (0,)
    finally:
        con.close()
    from audits.reports.query import query, view_names

    assert "toy_greetings" in view_names()
    assert query(out, "SELECT count(*) AS n FROM toy_greetings")["n"].iloc[0] == len(models)


def test_two_sections_may_not_define_one_table(toy_registry: Any) -> None:
    from audits.reports.tables import summary_frames

    toy_registry.register("clash")(ClashSection)
    with pytest.raises(RegistryError, match="audit section 'toy' defines a table 'toy_greetings' that another table already uses"):
        summary_frames({})


def test_reports_exports_query_and_findings_name_no_section() -> None:
    """The modules that iterate over sections hold no section's name (the hooks carry everything)."""
    root = Path(__file__).resolve().parents[1] / "audits" / "reports"
    for name in ("tables.py", "findings.py", "query.py", "views.py", "exports.py", "build.py", "markdown.py"):
        text = (root / name).read_text(encoding="utf-8").lower()
        for word in ("probe", "synthetic", "speaker_", "emotion_compare", "conversation_"):
            assert word not in text, f"audits/reports/{name} names '{word}'"


def test_section_config_errors_come_before_anything_runs(toy_registry: Any, voxpopuli_preds: Path, tmp_path: Path) -> None:
    recipe = parse_recipe(
        {"dataset": {"path": str(voxpopuli_preds), "reader": "oasr-predictions"}, "models": [], "toy": {"greetin": "x"}}, "toy.yaml"
    )
    with pytest.raises(ConfigError, match=r"toy.yaml: toy: unknown key 'greetin' \(did you mean 'greeting'\?\)"):
        run_recipe(recipe, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_asr_model_flags_give_the_same_errors(toy_registry: Any, tmp_path: Path, tone_wav: Any) -> None:
    manifest = write_manifest(tmp_path / "m.jsonl", [{"audio_filepath": str(tone_wav("a.wav")), "text": "a"}])
    base = {"name": "flags", "dataset": str(manifest), "models": []}
    with pytest.raises(ConfigError, match=r"recipe 'flags': no models to run"):
        run_recipe(parse_recipe({**base, "needy": {"greeting": "x"}}, "flags.yaml"), tmp_path / "a")
    with pytest.raises(ConfigError, match=r"recipe 'flags': needy need ASR models under 'models'"):
        run_recipe(parse_recipe({**base, "needy": {"greeting": "x"}, "toy": {"greeting": "x"}}, "flags.yaml"), tmp_path / "b")
    with pytest.raises(ConfigError, match=r"recipe 'flags': probes need ASR models under 'models'"):
        run_recipe(parse_recipe({**base, "probes": {"orthography": {}}, "toy": {"greeting": "x"}}, "flags.yaml"), tmp_path / "c")
    assert not any((tmp_path / d).exists() for d in "abc")


def test_probes_section_gets_the_asr_models_and_rows(tmp_path: Path) -> None:
    """The built-in probes section through run_recipe: the memorizer's rows feed the orthography probe."""
    texts = [
        "The colour of the sky is grey today",
        "Please organise the meeting",
        "The center of the theater was full",
        "We analyze the color",
    ]
    rows = [{"audio_filepath": str(espeak_wav(tmp_path / f"c{i}.wav", t)), "text": t} for i, t in enumerate(texts)]
    recipe = parse_recipe(
        {
            "name": "p",
            "dataset": str(write_manifest(tmp_path / "m.jsonl", rows)),
            "models": ["memorizer"],
            "scoring": {"n_boot": 20},
            "probes": {"orthography": {"min_clips_per_arm": 1, "pool": True}},
        },
        "p.yaml",
    )
    summary = run_recipe(recipe, tmp_path / "run")
    ortho = summary["probes"]["orthography"]
    assert ortho["memorizer"]["switch"] == 1.0 and ortho["memorizer"]["n_clips"] == 4  # the stored rows reached the probe
    md = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    assert "## Benchmark-optimization probes\n\n### orthography" in md and "| memorizer | 1.000 |" in md


def test_unknown_section_keys_say_did_you_mean(toy_registry: Any) -> None:
    with pytest.raises(ConfigError, match=r"r.yaml: unknown key 'speakr' \(did you mean 'speaker'\?\)"):
        parse_recipe({"dataset": "x", "models": [], "speakr": {"backends": ["resemblyzer"]}}, "r.yaml")
    with pytest.raises(ConfigError, match=r"unknown key 'toi' \(did you mean 'toy'\?\)"):
        parse_recipe({"dataset": "x", "models": [], "toi": {}}, "r.yaml")
    with pytest.raises(ConfigError, match=r"r.yaml: emotion: expected dict"):
        parse_recipe({"dataset": "x", "models": [], "emotion": ["prosody"]}, "r.yaml")
    with pytest.raises(RegistryError, match="did you mean 'probes'"):
        get_section("probe")


def test_registry_order_and_duplicates() -> None:
    assert [s.key for s in ordered()] == ["probes", "profiles", "perturbations", "speaker", "emotion", "conversation"]
    reg = builtin_registry()
    with pytest.raises(RegistryError, match="duplicate audit section name 'speaker'"):
        reg.register("speaker")(ToySection)


def test_default_merge_keeps_the_first_run_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    sec = get_section("speaker")
    parts = [sec.read_result({"a": {"eer": 0.1}}), None, sec.read_result({"a": {"eer": 0.2}, "b": {"eer": 0.3}})]
    with caplog.at_level(logging.WARNING, logger="audits.sections"):
        merged = sec.merge(parts, ["r1", "r0", "r2"])
    assert isinstance(merged, sec.result_type) and merged.to_json() == {"a": {"eer": 0.1}, "b": {"eer": 0.3}}
    assert "speaker.a differs between runs; keeping the first run's (r2 ignored)" in caplog.text


def test_probes_merge_unions_the_models_of_each_probe() -> None:
    sec = get_section("probes")
    parts = [
        sec.read_result({"masking": {"alpha": {"rate": 0.1}, "variant": "silence"}}),
        sec.read_result({"masking": {"alpha": {"rate": 0.9}, "gamma": {"rate": 0.2}, "variant": "silence"}}),
        None,
    ]
    merged = sec.merge(parts, ["a", "b", "c"])
    assert merged.to_json() == {"masking": {"alpha": {"rate": 0.1}, "variant": "silence", "gamma": {"rate": 0.2}}}


# The Recipe as it was before sections were pluggable: its as_dict() is embedded in every
# summary.json, so the new Recipe must produce exactly this dict (keys and their order).
@dataclasses.dataclass(frozen=True)
class LegacyRecipe:
    name: str
    dataset: DatasetConfig
    models: tuple[str, ...]
    description: str = ""
    normalizer: str = "whisper-english"
    shard_size: int = 32
    warmup: int = 1
    batch_size: int | None = None
    scoring: ScoringConfig = ScoringConfig()
    probes: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    speaker: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    emotion: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    source: str = ""

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["models"] = list(self.models)
        return d


@pytest.mark.parametrize("name", list_recipes())
def test_recipe_as_dict_is_unchanged(name: str) -> None:
    r = load_recipe(name)
    raw = load_yaml(find_recipe(name))
    legacy = LegacyRecipe(
        name=r.name,
        dataset=r.dataset,
        models=r.models,
        description=r.description,
        normalizer=r.normalizer,
        shard_size=r.shard_size,
        warmup=r.warmup,
        batch_size=r.batch_size,
        scoring=r.scoring,
        probes=dict(raw.get("probes") or {}),
        speaker=dict(raw.get("speaker") or {}),
        emotion=dict(raw.get("emotion") or {}),
        source=r.source,
    )
    now = r.as_dict()
    for later in set(section_names()) - {"probes", "speaker", "emotion"}:  # sections added after the legacy layout
        now.pop(later, None)
    assert json.dumps(now) == json.dumps(legacy.as_dict())
