"""Recipes: YAML files under ``recipes/`` of the configuration tree (engine/config_tree.py) or any path, loaded safely into typed records.

Unknown keys are rejected with the key named, so a typo never silently changes an audit. The
top-level keys are the base keys and the registered audit sections' (``audits.sections``); a
section's own keys are validated by that section when a run starts.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from audits.sections import ordered, section_names
from engine.config import check_keys, load_yaml
from engine.config_tree import config_folder, resolve_relative
from engine.config_tree import data_dir as _data_dir
from engine.errors import AuditError, ConfigError, RegistryError
from engine.options import Field, Options, check_value, option

log = logging.getLogger(__name__)

MAX_N_BOOT = 100_000
"""Most bootstrap replicates accepted (draws take n_boot x speakers integers of memory)."""
DEFAULT_NORMALIZER = "whisper-english"
"""A recipe's normalizer when it names none (Whisper's classic English normalizer)."""
STUDY_TAG = "rweq"
"""The registry tag of the robustness study's line-up."""
STUDY_NORMALIZER = "open-asr-leaderboard"
"""The study's scoring normalizer: a sweep of ``--models rweq`` uses it unless ``--normalizer`` says otherwise."""
DEPRECATED_NORMALIZERS = {"open-asr-english": "whisper-english"}
"""Old names still accepted, with the name to write instead."""


@dataclass(frozen=True)
class DatasetConfig(Options):
    """The recipe's ``dataset:`` block (a bare path stands for ``{path: ...}``)."""

    path: str = option(doc="required: manifest, CSV/TSV, Parquet folder, HF folder/id, predictions folder or builtin:demo")
    reader: str = option("auto", "dataset reader; auto detects it")
    limit: int | None = option(None, "use only the first N utterances", ge=1)
    options: Mapping[str, Any] = option({}, "reader options", accepts=dict[str, Any], null_default=True)
    allow_outside_root: bool = option(True, "let audio paths leave the dataset folder")
    max_duration_s: float = option(1800.0, "longer clips are error rows", gt=0, le=86_400)


def _gaps(value: tuple[Any, ...], where: str) -> tuple[tuple[str, str, str], ...]:
    gaps = []
    for i, g in enumerate(value):
        if not (isinstance(g, (list, tuple)) and len(g) == 3 and all(isinstance(x, str) for x in g)):
            raise ConfigError(f"{where}[{i}]: expected [label, value_a, value_b], got {g!r}")
        gaps.append((g[0], g[1], g[2]))
    return tuple(gaps)


@dataclass(frozen=True)
class ScoringConfig(Options):
    """The recipe's ``scoring:`` block (the ASR section's configuration)."""

    n_boot: int = option(1000, "bootstrap replicates per interval", ge=1, le=MAX_N_BOOT)
    seed: int = option(0, "bootstrap seed", ge=0, le=2**32 - 1)
    slices: tuple[str, ...] | None = option(None, "label columns to slice by (default: every label)")
    gaps: tuple[tuple[str, str, str], ...] = option(
        (), "[label, value_a, value_b] differences with intervals", accepts=list[Any], parse=_gaps, null_default=True
    )
    semantic_similarity: bool = option(False, "add a sentence-embedding similarity per model")


def _text(value: Any, where: str) -> str:
    """A name or description: text (a number as written, ``name: 2024``)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(f"{where}: expected a string, got {type(value).__name__} {value!r}")
    return str(value)


def _dataset(value: Any, where: str) -> DatasetConfig:
    return DatasetConfig.parse({"path": value} if isinstance(value, str) else value, where)


def _normalizer_option(value: str, where: str) -> str:
    return _normalizer_name(value, where)


@dataclass(frozen=True)
class Recipe(Options):
    """A recipe: the dataset, the models, how they are scored and the audit sections' raw mappings."""

    name: str = option("", "the recipe's name (default: the file's stem)", accepts=Any, parse=_text, null_default=True, kind_doc="text")
    dataset: DatasetConfig = option(
        doc="the dataset: a path, or a mapping with the path and reader settings", accepts=Any, parse=_dataset, kind_doc="text or mapping"
    )
    models: tuple[str, ...] = option(doc="model registry names (audit list models)")
    description: str = option("", "what the recipe is for", accepts=Any, parse=_text, null_default=True, kind_doc="text")
    normalizer: str = option(DEFAULT_NORMALIZER, "text normalizer applied before scoring", parse=_normalizer_option)
    shard_size: int = option(32, "utterances per (model, shard) unit", ge=1, le=1_000_000)
    warmup: int = option(1, "warm-up batches per loaded model (not timed)", ge=0, le=1000)
    batch_size: int | None = option(None, "override every model's batch size", ge=1, le=100_000)
    scoring: ScoringConfig = option(ScoringConfig(), "how the ASR results are scored", null_default=True)
    sections: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Raw mappings of the audit sections the recipe uses (non-empty only), by section key;
    each is validated by its section's ``parse`` when a run starts, before any model loads."""
    source: str = ""

    @classmethod
    def key_path(cls, where: str, key: str) -> str:
        return f"{where}: {key}"

    @classmethod
    def refuse_unknown(cls, raw: Mapping[str, Any], where: str) -> None:
        check_keys(raw, recipe_keys(), where)

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


DATASET_FIELDS: dict[str, Field] = DatasetConfig.declared()
"""The ``dataset:`` keys, typed and bounded (for the docs, the JSON schema and ``--limit``)."""
SCORING_FIELDS: dict[str, Field] = ScoringConfig.declared()
"""The ``scoring:`` keys, typed and bounded (``--n-boot`` and ``--seed`` are checked by the same rules)."""
TOP_FIELDS: dict[str, Field] = {k: f for k, f in Recipe.declared().items() if k in ("shard_size", "warmup", "batch_size")}
"""Top-level numeric keys, typed and bounded."""
BASE_KEYS = set(Recipe.declared())
"""Top-level recipe keys besides the audit sections' (``audits.sections.SECTIONS``)."""
DATASET_KEYS = set(DATASET_FIELDS)
SCORING_KEYS = set(SCORING_FIELDS)


def recipe_keys() -> set[str]:
    """Allowed top-level keys: the base keys and every registered audit section's key."""
    return BASE_KEYS | set(section_names())


def recipe_dir() -> Path:
    """The recipes folder of the configuration tree in use (the shipped one or ``$AUDIT_CONFIG_DIR``), read at call time."""
    return config_folder("recipes")


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
    raise ConfigError(f"unknown recipe '{name_or_path}'{hint} (known: {', '.join(list_recipes()) or f'none in {recipe_dir()}'})")


def parse_scoring(raw: Any, source: str) -> ScoringConfig:
    """The recipe's ``scoring:`` block, typed (the ASR section's configuration); errors name ``source`` and the key."""
    return ScoringConfig.parse(raw, f"{source}: scoring")


def parse_recipe(data: Any, source: str) -> Recipe:
    """Validate a recipe mapping; every error names the source file and the key."""
    recipe = Recipe.parse(data, source)
    sections: dict[str, dict[str, Any]] = {}
    for key in section_names():  # each section's own keys are checked by its parse when the run starts
        raw = check_value(dict[str, Any] | None, data.get(key), f"{source}: {key}")
        if raw:
            sections[key] = dict(raw)
    return recipe.replace(name=recipe.name or Path(source).stem, sections=sections, source=source)


def _normalizer_name(value: Any, where: str) -> str:
    """A registered normalizer name (checked here, nothing imported, so a typo stops before any model loads)."""
    from audits.normalizing import NORMALIZERS

    name = check_value(str, value, where)
    try:
        NORMALIZERS.check(name)
    except RegistryError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if name in DEPRECATED_NORMALIZERS:
        log.warning(
            "%s: '%s' is a deprecated name of '%s' (Whisper's classic English normalizer, not the Open ASR "
            "Leaderboard's current one, which is '%s'); write '%s'",
            where,
            name,
            DEPRECATED_NORMALIZERS[name],
            STUDY_NORMALIZER,
            DEPRECATED_NORMALIZERS[name],
        )
    return str(name)


def with_normalizer(recipe: Recipe, name: str, where: str = "--normalizer") -> Recipe:
    """The recipe scored with normalizer ``name`` (checked: an unknown name stops here, with close matches)."""
    return replace(recipe, normalizer=_normalizer_name(name, f"{where}: normalizer"))


def sweep_normalizer(recipe: Recipe, selection: str, flag: str | None) -> tuple[str, str | None]:
    """A sweep's normalizer and, when it is not the recipe's, why.

    ``--normalizer`` wins; else a sweep of the study's line-up (``--models rweq``) is scored as
    the study scored it, with the Open ASR Leaderboard's normalizer; else the recipe's.
    """
    if flag:
        return flag, None
    if selection.strip() == STUDY_TAG and recipe.normalizer != STUDY_NORMALIZER:
        return STUDY_NORMALIZER, (
            f"--models {STUDY_TAG}: scored with {STUDY_NORMALIZER} (the study's normalizer) instead of the "
            f"recipe's {recipe.normalizer}; --normalizer {recipe.normalizer} keeps the recipe's"
        )
    return recipe.normalizer, None


def load_recipe(name_or_path: str) -> Recipe:
    path = find_recipe(name_or_path)
    return parse_recipe(load_yaml(path), str(path))


def with_overrides(
    recipe: Recipe, dataset: str | None = None, models: list[str] | None = None, limit: int | None = None, reader: str | None = None
) -> Recipe:
    """The recipe with ``--dataset``, ``--models``, ``--limit`` and ``--reader`` applied.

    ``--dataset`` replaces the path only: when the new path is read by the recipe's reader (the
    one it names, or detects from its own path), the reader and its options stay, so a local copy
    of a hub dataset is read as the recipe reads the hub (VoxPopuli's text is ``raw_text``). A path
    of another format, or ``--reader`` naming another reader, starts from that reader's defaults.
    """
    ds = recipe.dataset
    if dataset is not None:
        if _same_reader(ds, dataset, reader):
            ds = replace(ds, path=dataset, reader=reader or ds.reader)
        else:
            if ds.options:
                log.warning(
                    "--dataset %s is not read by the recipe's reader (%s); its reader options %s do not apply and are dropped",
                    dataset,
                    ds.reader,
                    sorted(ds.options),
                )
            ds = replace(ds, path=dataset, reader=reader or "auto", options={})
    elif reader is not None:
        ds = replace(ds, reader=reader)
    if limit is not None:
        ds = replace(ds, limit=DATASET_FIELDS["limit"].check(limit, "--limit"))
    return replace(recipe, dataset=ds, models=tuple(models) if models else recipe.models)


def _detected_reader(path: str) -> str | None:
    """The reader ``reader: auto`` would pick for ``path`` (relative paths also against the
    source checkout, as a run opens them), or None when the path does not tell."""
    from engine.datasets.base import detect_reader

    p = resolve_relative(path)
    try:
        return detect_reader(p)
    except (AuditError, OSError):
        return None


def _same_reader(ds: DatasetConfig, path: str, reader: str | None) -> bool:
    """Whether ``path`` (with ``--reader reader``, if given) is read by the recipe's own reader."""
    if path.startswith("builtin:") or ds.path.startswith("builtin:"):
        return False
    old = ds.reader if ds.reader != "auto" else _detected_reader(ds.path)
    new = reader if reader not in (None, "auto") else _detected_reader(path)
    return old is not None and old == new


def data_dir() -> Path:
    """Where built-in corpora live (engine/config_tree.py: ``$AUDIT_DATA_DIR``, the checkout's or the working directory's ``data/``)."""
    return _data_dir()


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


def with_reader_options(recipe: Recipe, pairs: list[str] | None, where: str = "--reader-opt") -> Recipe:
    """The recipe with ``--reader-opt key=value`` pairs merged into its dataset's reader options.

    Each value is typed by the reader's own declaration (``OPTIONS``, an options record): a text option takes the
    value as written (``config=2020`` is the string '2020'); any other is read as one YAML scalar
    (``true``, ``8``) and then type- and range-checked; an unknown key is an error naming it, with
    close matches, before the dataset opens.
    """
    if not pairs:
        return recipe
    from engine.config import parse_yaml
    from engine.datasets import DATASET_READERS
    from engine.datasets.base import reader_option_fields, reader_options

    ds = recipe.dataset
    name = ds.reader if ds.reader != "auto" else _detected_reader(ds.path)
    cls: Any = DATASET_READERS.get(name) if name else None
    fields = reader_option_fields(cls, name) if cls is not None and name is not None else {}
    options = dict(ds.options)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{where} {pair!r}: expected key=value (for example split=test or text_column=sentence)")
        field_ = fields.get(key)
        options[key] = value if field_ is None or field_.kind is str else parse_yaml(value, f"{where} {key}")
    if cls is not None and name is not None:
        reader_options(cls, name, options)  # unknown keys and bad values stop here, naming the key
    return replace(recipe, dataset=replace(ds, options=options))
