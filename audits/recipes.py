"""Recipes: YAML files under ``configs/recipes`` (or any path), loaded safely into typed records.

Unknown keys are rejected with the key named, so a typo never silently changes an audit. The
top-level keys are the base keys and the registered audit sections' (``audits.sections``); a
section's own keys are validated by that section when a run starts.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from audits.sections import ordered, section_names
from engine.config import check_keys, expect_type, load_yaml
from engine.errors import ConfigError
from engine.model_registry import CONFIG_DIR, REPO_ROOT


@dataclass(frozen=True)
class DatasetConfig:
    path: str
    reader: str = "auto"
    limit: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    allow_outside_root: bool = True
    max_duration_s: float = 1800.0


@dataclass(frozen=True)
class ScoringConfig:
    n_boot: int = 1000
    seed: int = 0
    slices: tuple[str, ...] | None = None
    gaps: tuple[tuple[str, str, str], ...] = ()
    semantic_similarity: bool = False


@dataclass(frozen=True)
class Recipe:
    name: str
    dataset: DatasetConfig
    models: tuple[str, ...]
    description: str = ""
    normalizer: str = "whisper-english"
    shard_size: int = 32
    warmup: int = 1
    batch_size: int | None = None
    scoring: ScoringConfig = ScoringConfig()
    sections: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Raw mappings of the audit sections the recipe uses (non-empty only), by section key;
    each is validated by its section's ``parse`` when a run starts, before any model loads."""
    source: str = ""

    def section(self, key: str) -> Mapping[str, Any]:
        """The raw mapping under a section's key (``{}`` when the recipe does not use it)."""
        return self.sections.get(key, {})

    def as_dict(self) -> dict[str, Any]:
        """The recipe as embedded in ``summary.json``: every registered section key appears, ``{}`` when unused.

        Sections sit where the old fixed fields did (after ``scoring``, before ``source``), in
        section order, so summaries keep one shape whichever sections a recipe uses.
        """
        d = asdict(self)
        raw_sections = d.pop("sections")
        source = d.pop("source")
        d["models"] = list(self.models)
        for sec in ordered():
            d[sec.key] = raw_sections.get(sec.key, {})
        for key, raw in raw_sections.items():  # a section no longer registered still shows what the recipe asked
            d.setdefault(key, raw)
        d["source"] = source
        return d


BASE_KEYS = {"name", "description", "dataset", "models", "normalizer", "shard_size", "warmup", "batch_size", "scoring"}
"""Top-level recipe keys besides the audit sections' (``audits.sections.SECTIONS``)."""
DATASET_KEYS = {"path", "reader", "limit", "options", "allow_outside_root", "max_duration_s"}
SCORING_KEYS = {"n_boot", "seed", "slices", "gaps", "semantic_similarity"}


def recipe_keys() -> set[str]:
    """Allowed top-level keys: the base keys and every registered audit section's key."""
    return BASE_KEYS | set(section_names())


def recipe_dir() -> Path:
    return CONFIG_DIR / "recipes"


def list_recipes() -> list[str]:
    return sorted(p.stem for p in recipe_dir().glob("*.yaml"))


def find_recipe(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        if not p.exists():
            raise ConfigError(f"recipe file not found: {p}")
        return p
    cand = recipe_dir() / f"{name_or_path}.yaml"
    if cand.exists():
        return cand
    import difflib

    close = difflib.get_close_matches(name_or_path, list_recipes(), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ConfigError(f"unknown recipe '{name_or_path}'{hint} (known: {', '.join(list_recipes())})")


def parse_recipe(data: Any, source: str) -> Recipe:
    """Validate a recipe mapping; every error names the source file and the key."""
    check_keys(data, recipe_keys(), source, required={"dataset", "models"})
    ds_raw = data["dataset"]
    if isinstance(ds_raw, str):
        ds_raw = {"path": ds_raw}
    check_keys(ds_raw, DATASET_KEYS, f"{source}: dataset", required={"path"})
    dataset = DatasetConfig(
        path=str(expect_type(ds_raw["path"], str, f"{source}: dataset.path")),
        reader=expect_type(ds_raw.get("reader", "auto"), str, f"{source}: dataset.reader"),
        limit=expect_type(ds_raw.get("limit"), (int, type(None)), f"{source}: dataset.limit"),
        options=dict(expect_type(ds_raw.get("options", {}) or {}, dict, f"{source}: dataset.options")),
        allow_outside_root=expect_type(ds_raw.get("allow_outside_root", True), bool, f"{source}: dataset.allow_outside_root"),
        max_duration_s=float(expect_type(ds_raw.get("max_duration_s", 1800.0), (int, float), f"{source}: dataset.max_duration_s")),
    )
    models = expect_type(data["models"], list, f"{source}: models")
    for i, m in enumerate(models):
        expect_type(m, str, f"{source}: models[{i}]")
    sc_raw = data.get("scoring", {}) or {}
    check_keys(sc_raw, SCORING_KEYS, f"{source}: scoring")
    gaps = []
    for i, g in enumerate(sc_raw.get("gaps", []) or []):
        if not (isinstance(g, list) and len(g) == 3 and all(isinstance(x, str) for x in g)):
            raise ConfigError(f"{source}: scoring.gaps[{i}]: expected [label, value_a, value_b], got {g!r}")
        gaps.append((g[0], g[1], g[2]))
    slices = sc_raw.get("slices")
    scoring = ScoringConfig(
        n_boot=int(expect_type(sc_raw.get("n_boot", 1000), int, f"{source}: scoring.n_boot")),
        seed=int(expect_type(sc_raw.get("seed", 0), int, f"{source}: scoring.seed")),
        slices=None if slices is None else tuple(str(s) for s in expect_type(slices, list, f"{source}: scoring.slices")),
        gaps=tuple(gaps),
        semantic_similarity=expect_type(sc_raw.get("semantic_similarity", False), bool, f"{source}: scoring.semantic_similarity"),
    )
    sections: dict[str, dict[str, Any]] = {}
    for key in section_names():  # each section's own keys are checked by its parse when the run starts
        raw = expect_type(data.get(key, {}) or {}, dict, f"{source}: {key}")
        if raw:
            sections[key] = dict(raw)
    shard_size = int(expect_type(data.get("shard_size", 32), int, f"{source}: shard_size"))
    if shard_size < 1:
        raise ConfigError(f"{source}: shard_size must be >= 1")
    return Recipe(
        name=str(data.get("name", Path(source).stem)),
        description=str(data.get("description", "")),
        dataset=dataset,
        models=tuple(models),
        normalizer=_normalizer_name(data.get("normalizer", "whisper-english"), source),
        shard_size=shard_size,
        warmup=int(expect_type(data.get("warmup", 1), int, f"{source}: warmup")),
        batch_size=expect_type(data.get("batch_size"), (int, type(None)), f"{source}: batch_size"),
        scoring=scoring,
        sections=sections,
        source=source,
    )


def _normalizer_name(value: Any, source: str) -> str:
    """A known normalizer name (checked here so a typo stops before any model loads)."""
    import difflib

    from normalizers import known_normalizers

    name = expect_type(value, str, f"{source}: normalizer")
    known = known_normalizers()
    if name not in known:
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ConfigError(f"{source}: normalizer: unknown normalizer '{name}'{hint}; known: {', '.join(known)}")
    return str(name)


def load_recipe(name_or_path: str) -> Recipe:
    path = find_recipe(name_or_path)
    return parse_recipe(load_yaml(path), str(path))


def with_overrides(recipe: Recipe, dataset: str | None = None, models: list[str] | None = None, limit: int | None = None, reader: str | None = None) -> Recipe:
    ds = recipe.dataset
    if dataset is not None:
        ds = replace(ds, path=dataset, reader=reader or "auto", options={})
    elif reader is not None:
        ds = replace(ds, reader=reader)
    if limit is not None:
        ds = replace(ds, limit=limit)
    return replace(recipe, dataset=ds, models=tuple(models) if models else recipe.models)


def data_dir() -> Path:
    return Path(os.environ.get("AUDIT_DATA_DIR", REPO_ROOT / "data"))


def builtin_dataset_path(spec: str) -> Path:
    """``builtin:demo`` -> the demo corpus folder (``$AUDIT_DATA_DIR/demo``); ``builtin:demo-small``
    -> its balanced subset (``$AUDIT_DATA_DIR/demo-small``), the quick demo's corpus."""
    name = spec.split(":", 1)[1]
    if name == "demo-conversation":
        return data_dir() / "conversation"
    if name == "demo-small":
        return data_dir() / "demo-small"
    if name != "demo":
        raise ConfigError(f"unknown built-in dataset '{name}' (known: demo, demo-small, demo-conversation)")
    return data_dir() / "demo"
