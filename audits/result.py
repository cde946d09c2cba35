"""``RunResult``: one audit run as one typed, frozen object, handed through memory.

``consolidate -> score -> summarize -> report -> export`` pass this object along instead of
writing a file and reading it back: the run writes ``utterances.parquet`` and ``summary.json``
once each, and the reports and exports are made from the same objects. ``audits.api.load``
builds the same object from a run directory, so a notebook sees a fresh run and a stored one
the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

import pandas as pd

from audits.schema import ModelFigures, Summary

if TYPE_CHECKING:
    from audits.asr.results import AsrResult
    from audits.asr.scoring import ScoredRows


def section_results(summary: Summary) -> Mapping[str, Mapping[str, Any]]:
    """The audit sections' parts of ``summary`` (``probes``, ``speaker``, ...), by section key, in section order."""
    from audits.sections import present_in

    plain = cast(Mapping[str, Any], summary)
    return MappingProxyType({sec.key: plain[sec.key] for sec in present_in(plain)})


@dataclass(frozen=True)
class RunResult:
    """A run's figures and rows, as the run made them or as ``summary.json`` and ``utterances.parquet`` hold them.

    * ``summary``: ``summary.json`` (typed by ``audits.schema.Summary``);
    * ``table``: the result rows (one per model and utterance; ``utterances.parquet``);
    * ``scored``: the scoring pass the summary was built from (normalized text and per-row edit
      counts); None for a result loaded from disk or merged from several runs, whose reports
      score the rows again when they need them;
    * ``sections``: each audit section's part of the summary by section key (read-only);
    * ``results``: the typed results by section name: ``asr`` (``audits.asr.results.AsrResult``: the
      models' figures and comparisons) always, and each present section's record (``result_type``), as its
      ``run`` returned it or read from the summary with the section's ``read_result``;
    * ``run_dir``: where the files are (None for a merged result that was not written).

    ``summary`` is the typed results serialized (``audits.asr.summary.assemble_summary``) with the run's provenance.
    """

    summary: Summary
    table: pd.DataFrame
    scored: ScoredRows | None = None
    run_dir: Path | None = None
    sections: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))
    results: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def of(
        cls,
        summary: Summary,
        table: pd.DataFrame,
        scored: ScoredRows | None = None,
        run_dir: Path | None = None,
        results: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """A result whose ``sections`` are read from ``summary`` (the usual way to build one).

        ``results``: typed results the run holds already (``asr``, sections' records); the others are read from ``summary``.
        """
        from audits.asr.results import AsrResult
        from audits.sections import get_section, section_json

        sections = section_results(summary)
        typed: dict[str, Any] = {"asr": AsrResult.from_json(cast(Mapping[str, Any], summary), scored)}
        typed.update({key: get_section(key).read_result(part) for key, part in sections.items()})
        typed.update({key: r for key, r in (results or {}).items() if key == "asr" or section_json(r)})
        return cls(summary=summary, table=table, scored=scored, run_dir=run_dir, sections=sections, results=MappingProxyType(typed))

    @property
    def asr(self) -> AsrResult:
        """The ASR section's typed result: every model's figures, slices, gaps and hallucinations, and the comparisons."""
        from audits.asr.results import AsrResult

        found = self.results.get("asr")
        return found if isinstance(found, AsrResult) else AsrResult.from_json(self.plain_summary, self.scored)

    def result(self, key: str) -> Any:
        """One section's typed result by section name (``asr`` included; None when the run did not include it).

        The section's record (``AuditSection.result_type``) for every section present in the summary."""
        return self.results.get(key)

    @property
    def models(self) -> dict[str, ModelFigures]:
        """Per model: WER, interval, slices, gaps and run facts (``summary['models']``)."""
        return dict(self.summary.get("models") or {})

    @property
    def scored_frame(self) -> pd.DataFrame | None:
        """The scored rows as a DataFrame (None when this result holds no scoring pass)."""
        return None if self.scored is None else self.scored.frame

    def section(self, key: str) -> Mapping[str, Any]:
        """One audit section's results (``{}`` when the run did not include it)."""
        return self.sections.get(key) or {}

    def frames(self) -> dict[str, pd.DataFrame]:
        """The summary's figures as flat tables (``models``, ``slices``, ``gaps``, ``pairs`` and each section's)."""
        from audits.reports.tables import summary_frames

        return summary_frames(self)

    def query(self, sql: str) -> pd.DataFrame:
        """SQL over this result's views, as ``audit query`` gives them (DuckDB, in memory)."""
        from audits.reports.views import query_frames

        return query_frames(self, self.table, sql)

    @classmethod
    def of_summary(cls, source: RunResult | Mapping[str, Any]) -> RunResult:
        """``source`` as a result: a ``RunResult`` as it is, a plain summary mapping with no rows (reports of a summary alone)."""
        if isinstance(source, RunResult):
            return source
        return cls.of(cast(Summary, source), pd.DataFrame())

    @property
    def plain_summary(self) -> Mapping[str, Any]:
        """The summary as a plain mapping (section keys are not part of the typed ``Summary``)."""
        return cast(Mapping[str, Any], self.summary)
