"""Audit sections: the parts of a recipe beyond ASR scoring (probes, speaker, emotion, and the ones to come).

Each section plugs in through one interface, registered by name like the backends, so the
pipeline, the recipe parser and the reports never list sections or branch on one:

* ``parse(raw, source)``: validate the recipe's mapping under the section's key into a typed
  config (errors name the recipe file and key); called for every section before any model loads;
* ``check_inputs(config, dataset)``: read and check the section's own inputs (references, turns,
  audio headers) before any model loads or anything is written (default: nothing);
* ``engine_passes(config, asr_models, dataset)``: the passes the section submits to the run's
  engine, each with the pass kinds it takes (``engine.engine.PassNeed``; default: none), so a
  runner that does not declare them is refused before anything runs;
* ``dataset_passes(config, dataset, decode_options)``: the SV/SER backends the section runs over the
  recipe's own dataset (default: none); the pipeline runs them with the ASR pass as one engine run;
* ``prepare_dataset(config, dataset, out_dir, decode_options)`` (optional): the dataset the models
  see, e.g. with derived clips added; called once the dataset is open, before the run plan;
* ``reads``: which clips the section reads (``audits.clips``): ``SOURCE``, the dataset's own clips
  (the default), or ``DERIVED``, source and derived clips with the derivation as a column. The
  pipeline hands every hook the dataset and rows of that scope (``audits.clips.ClipViews``), so
  no section filters derived clips itself and none counts a derived clip as a new one;
* ``run(config, ctx)``: do the work and return the section's result, a frozen record of the class
  ``result_type`` whose ``to_json()`` is the section of ``summary.json`` (stored under the section's
  key); ``read_result(data)`` reads that part back (``result_type.from_json``). ASR scoring is a
  section too (``audits/asr/section.py``), run first, whose result is summary.json's ``models`` and
  ``comparisons``;
* every hook below takes the section's typed result and the run (``audits.result.RunResult``: its
  models, dataset and other sections' results through ``run.result(key)``):
* ``markdown(result, run)`` and ``html(result, run, data, colors)``: the section's part of ``report.md``
  and ``report.html``; ``report_data(result, run)`` is what the HTML page embeds under the section's key;
* ``merge(parts, names)``: one result out of several runs' results (``audit report`` over runs);
* ``tables(result, run)``: the section's figures as flat tables by name; each becomes a table
  of ``exports/results.duckdb`` and a view of ``audit query`` (default: none);
* ``findings(result, run)``: sentences for the findings at the top of both reports
  (default: none).

Reports, exports, queries and findings iterate over the registered sections and call these
hooks; none of them names a section. Every hook but ``parse``, ``run`` and ``markdown`` has a
default, so a new section writes only what it shows.

The registry name is the recipe key and the summary key; a separately installed package adds a
section through the entry-point group ``audit_engine.sections`` (docs/design.md, "Registries"). ``order`` fixes the order in which
sections run and appear in reports, so adding a section never reshuffles the others.

A section whose recipe mapping is empty (or absent) does not run. Entries are lazy
(``"module:Class"``), so parsing a recipe imports no section package; section modules import
their heavy parts inside the methods, so ordering sections stays cheap.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, cast

from audits.clips import SCOPES, SOURCE
from engine.data import DecodeOptions, ModelSpec, ProgressFn
from engine.engine import EngineOptions, PassNeed
from engine.errors import RegistryError
from engine.registry import Registry
from engine.run.joint_pass import PassRequest

if TYPE_CHECKING:
    import pandas as pd

    from audits.result import RunResult
    from engine.datasets.base import Dataset
    from normalizers import Normalizer

log = logging.getLogger(__name__)

ConfigT = TypeVar("ConfigT")
ResultT = TypeVar("ResultT")


@dataclass(frozen=True)
class SectionContext:
    """What the pipeline hands a section's ``run``: the opened dataset, where to write, and the run's engine.

    ``dataset`` and ``load_rows`` are those of the clips the section reads (``AuditSection.reads``):
    ``load_rows`` gives the run's ASR result rows of those clips (from the table ``utterances.parquet``
    was written from, held in memory by the pipeline); a call, so a section that never looks at
    transcripts does not depend on them. ``engine`` is the run's (``--engine``/``--address``): sections submit
    every pass to it (``engine.runner``).
    """

    dataset: Dataset
    asr_models: Sequence[ModelSpec]
    out_dir: Path
    load_rows: Callable[[], pd.DataFrame]
    progress: ProgressFn | None = None
    decode_options: DecodeOptions = field(default_factory=DecodeOptions)
    recipe_name: str = ""
    engine: EngineOptions = field(default_factory=EngineOptions)
    facts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """The ASR pass's facts per model (status, backend, batch size, device, dtype, load time)."""
    normalizer: Normalizer | None = None
    """The recipe's normalizer, built once per run."""


class AuditSection(ABC, Generic[ConfigT, ResultT]):
    """One pluggable part of an audit; subclasses set the class attributes and the abstract methods."""

    key: ClassVar[str]
    """Recipe key, summary key and registry name (one word, the same in all three)."""
    title: ClassVar[str]
    """Heading of the section in report.md and report.html."""
    order: ClassVar[int] = 100
    """Sections run and are reported in ascending ``order`` (then by key)."""
    needs_asr_models: ClassVar[bool] = False
    """The section runs the recipe's ASR models, so a recipe without any is refused before anything loads."""
    can_run_without_asr_models: ClassVar[bool] = False
    """The section is a whole audit by itself: a recipe may list no ASR models when it is present."""
    reads: ClassVar[str] = SOURCE
    """The clips the section reads (``audits.clips``): ``SOURCE`` (the dataset's own clips; derived clips
    are never counted as new ones) or ``DERIVED`` (source and derived clips, the derivation as a column)."""
    result_type: ClassVar[Any]
    """The section's result record class: ``from_json(Mapping) -> ResultT``; instances have ``to_json()``."""

    def read_result(self, data: Mapping[str, Any]) -> ResultT:
        """The typed result of the section's part of summary.json (``{}`` for a run without the section)."""
        result: ResultT = self.result_type.from_json(data)
        return result

    def result_in(self, run: RunResult) -> ResultT:
        """The section's result in ``run``; the empty result (``read_result({})``) when the run did not include the section."""
        found = run.result(self.key)
        return self.read_result({}) if found is None else cast(ResultT, found)

    @abstractmethod
    def parse(self, raw: Mapping[str, Any], source: str) -> ConfigT:
        """Validate the recipe's mapping (pure: nothing loaded); raise ``ConfigError`` naming ``source`` and the key."""

    @abstractmethod
    def run(self, config: ConfigT, ctx: SectionContext) -> ResultT:
        """Run the section and return its result, a record of ``result_type`` (``summary.json`` holds its
        ``to_json()`` under the section's key)."""

    def engine_passes(self, config: ConfigT, asr_models: Sequence[ModelSpec], dataset: Dataset) -> list[PassNeed]:
        """The passes this section submits to the run's engine (``ctx.engine.runner``, ``ctx.engine.run_keyed``),
        each named for a message with the pass kinds it takes (e.g. ``PassNeed("speaker-verification pass",
        frozenset({SHARD_SV}))``); ``[]`` when it runs none (default). The pipeline refuses a recipe whose
        sections need a kind the run's runner does not declare (``Runner.runs``), before any model loads or
        anything is written."""
        return []

    def dataset_passes(self, config: ConfigT, dataset: Dataset, decode_options: DecodeOptions) -> list[PassRequest]:
        """The SV/SER backends ``run`` will run over ``dataset`` (the clips it reads) with ``decode_options`` (default: none).

        The pipeline hands them to the engine with the ASR pass as one run (``engine/run/joint_pass.py``),
        so each shard is decoded once for every pass and a cluster schedules them together; ``run``
        then finds those units finished (same markers, same settings) and computes nothing. Return
        only passes whose specs, dataset and decode options are exactly those ``run`` submits."""
        return []

    def check_inputs(self, config: ConfigT, dataset: Dataset) -> None:
        """Read and check every input the section will use (references, turns, audio headers)
        once the dataset is open and before any model loads or anything is written; raise
        ``ConfigError`` naming the file, line and field. Default: nothing beyond ``parse``."""

    @abstractmethod
    def markdown(self, result: ResultT, run: RunResult) -> list[str]:
        """Lines of ``report.md`` for this section's result in ``run`` (``[]`` to show nothing)."""

    def prepare_dataset(self, config: ConfigT, dataset: Dataset, out_dir: Path, decode_options: DecodeOptions) -> Dataset:
        """The dataset the run's models see; by default the opened one. A section that derives
        clips (perturbations) returns it extended, before the run plan is made."""
        return dataset

    def report_data(self, result: ResultT, run: RunResult) -> Any:
        """What ``report.html`` embeds (and shows) under this key; by default the result's JSON."""
        return section_json(result)

    def html(self, result: ResultT, run: RunResult, data: Mapping[str, Any], colors: Mapping[str, str]) -> tuple[str, str, str] | None:
        """``(title, body_html, note_html)`` for ``report.html``, or None to leave the section out.

        Called for every registered section: ``result`` is the empty one (``read_result({})``) when the
        run did not include it. ``data`` is the page's embedded data (this section's under ``data[self.key]``),
        ``colors`` maps model names to their colours on the page. Every data string must go through ``esc``.
        """
        return None

    def tables(self, result: ResultT | None, run: RunResult) -> dict[str, pd.DataFrame]:
        """This section's figures as flat tables, by table name (exports' DuckDB file, ``audit query`` views).

        Called for every registered section, with ``result`` None when the run did not include
        it: return the tables with their columns and no rows then, so a query's views never
        depend on which sections ran. Names must not clash with another table's.
        """
        return {}

    def findings(self, result: ResultT, run: RunResult) -> list[str]:
        """Plain-text sentences for the reports' findings, each backed by the section's figures (unescaped)."""
        return []

    def merge(self, parts: Sequence[ResultT | None], names: Sequence[str]) -> ResultT:
        """This section over several runs (``parts[i]`` from run ``names[i]``, None when that run lacks the section).

        Union by top-level key of the results' JSON; when two runs disagree on a key the first run wins and the
        disagreement is logged, since a merged report must not silently mix two results.
        """
        out: dict[str, Any] = {}
        for part, name in zip(parts, names):
            for key, val in (section_json(part) if part is not None else {}).items():
                out[key] = val if key not in out else self.merge_entry(key, out[key], val, name)
        return self.read_result(out)

    def merge_entry(self, key: str, kept: Any, other: Any, other_run: str) -> Any:
        """The value of ``key`` when a later run ``other_run`` has it too (default: keep the first, log a clash)."""
        if kept != other:
            log.warning("%s.%s differs between runs; keeping the first run's (%s ignored)", self.key, key, other_run)
        return kept


RECIPE_KEYS = frozenset(
    {"name", "description", "dataset", "models", "normalizer", "shard_size", "warmup", "batch_size", "scoring", "source"}
)
"""A recipe's own top-level keys (``audits.recipes.BASE_KEYS``, and ``source`` in the recipe summary.json embeds)."""
REPORT_KEYS = frozenset(
    {
        "title",
        "families",
        "slices",
        "gaps",
        "pairs",
        "cohort",
        "worst",
        "empty_references",
        "findings",  # report.html's data
        "summary",
        "run-facts",
        "overall",
        "speed",
        "heatmap",
        "hallucination",
        "comparisons",
        "hosted",  # report.html's sections
        "utterances",
        "scored",  # audit query's views
    }
)
"""Names the reports and queries use beside the sections' (data keys, page sections, views)."""


def reserved_names() -> dict[str, str]:
    """Every name no section may take, with why: summary.json's core keys (``audits.schema.Summary``), the recipe's own
    keys, and the report's and query's names. A section's name is its recipe key, summary key, page section and view
    prefix at once, so taking one of these would replace the engine's own figures (``dataset``: name and fingerprint gone)."""
    from audits.schema import Summary

    out = {k: "a key of the report page or of audit query's views" for k in REPORT_KEYS}
    out.update({k: "a top-level key of every recipe" for k in RECIPE_KEYS})
    out.update({k: "a core key of summary.json" for k in Summary.__annotations__})
    return out


SECTION_NAME = r"[a-z][a-z0-9_]{0,31}"
"""A section name: a recipe key, a summary key and a prefix of table names alike (lower case, digits, '_')."""


def section_json(result: Any) -> Any:
    """A section's result as ``summary.json`` holds it: ``to_json()`` of a record, plain JSON as it is."""
    to_json = getattr(result, "to_json", None)
    return to_json() if callable(to_json) else result


def builtin_registry() -> Registry[type[AuditSection[Any, Any]]]:
    """A fresh registry of the installed sections (entry-point group ``audit_engine.sections``).

    The project's own sections are entry points like a plug-in's (pyproject.toml); tests build a
    fresh one to add a toy section without touching the global one. Reserved names
    (``reserved_names``) and names that are not ``SECTION_NAME`` are refused at registration.
    """
    return Registry("audit section", "audit_engine.sections", reserved=reserved_names(), name_pattern=SECTION_NAME)


SECTIONS: Registry[type[AuditSection[Any, Any]]] = builtin_registry()
"""Every audit section by recipe key; the functions below read it at call time."""


def section_names() -> list[str]:
    """Registered section keys (without importing any section package)."""
    return SECTIONS.names()


def get_section(name: str) -> AuditSection[Any, Any]:
    """The section registered as ``name``; unknown names raise ``RegistryError`` with close matches."""
    cls = SECTIONS.get(name)
    if getattr(cls, "key", None) != name:
        raise RegistryError(f"audit section '{name}': its class {cls.__name__} has key {getattr(cls, 'key', None)!r}; the two must match")
    if getattr(cls, "reads", None) not in SCOPES:
        raise RegistryError(
            f"audit section '{name}': reads = {getattr(cls, 'reads', None)!r}; declare one of "
            f"{', '.join(repr(s) for s in SCOPES)} (audits.clips)"
        )
    if getattr(cls, "result_type", None) is None or not callable(getattr(cls.result_type, "from_json", None)):
        raise RegistryError(
            f"audit section '{name}': its class {cls.__name__} declares no result_type with from_json; set result_type "
            "to the record class its run returns (audits.records.Record)"
        )
    return cls()


def ordered(names: Iterable[str] | None = None) -> list[AuditSection[Any, Any]]:
    """The sections named (all registered ones when ``names`` is None), in run/report order."""
    keys = section_names() if names is None else list(dict.fromkeys(names))
    return sorted((get_section(k) for k in keys), key=lambda s: (s.order, s.key))


def present_in(mapping: Mapping[str, Any]) -> list[AuditSection[Any, Any]]:
    """The registered sections with a non-empty entry in ``mapping`` (a recipe's sections or a summary), in order."""
    return ordered(k for k in SECTIONS.names() if mapping.get(k))
