"""The ASR section's result as small frozen records: per-model figures, slice figures, gaps, hallucinations, comparisons.

``summary.json`` is serialization at the edge: ``AsrResult.to_json`` gives the ``models`` and
``comparisons`` keys exactly as the file holds them, and ``AsrResult.from_json`` reads them back.
Each record keeps the order (and presence) of the keys it was read from, so a summary read and
written again is the same text, an older summary included (a key a record does not declare is
kept, in place, under ``extra``); a record built in code writes its fields in declaration order,
leaving out optional fields that are None.

A field's metadata may carry ``report``: ``(column heading, format)``. Every table of figures takes
one column per such field (``report_columns``): a field of ``ModelFigures`` (``SliceFigures``'
included, by inheritance) is a column of the model tables (report.md's and report.html's, the
``models`` export and DuckDB table), a field of ``SliceFigures`` one of the slice tables too
(report.html's, ``exports/slices.csv`` and the ``slices`` DuckDB table). So a new figure declared here
with a ``report`` entry reaches ``summary.json``, its JSON Schema, both reports and the exports
without touching a writer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from audits.records import EMPTY as _EMPTY
from audits.records import Record, figure, freeze, thaw


@dataclass(frozen=True)
class HallucinationFigures(Record):
    """Insertions, loops and length outliers on clips with speech; hallucinations on speech-free clips (audits/asr/hallucination.py)."""

    n_clips: int = figure(0)
    insertions: int = figure(0)
    insertion_rate: float | None = figure()
    n_loops: int = figure(0)
    loop_rate: float | None = figure()
    loop_words: int = figure(0)
    wer_without_loops: float | None = figure()
    n_long: int = figure(0)
    n_short: int = figure(0)
    length_outlier_rate: float | None = figure()
    n_speech_free: int = figure(0)
    n_hallucinated: int = figure(0)
    hallucination_rate: float | None = figure()
    hallucination_ci95: tuple[float | None, float | None] | None = figure()
    hallucinated_words: int = figure(0)
    avg_logprob_loops: float | None = figure(optional=True)
    avg_logprob_other: float | None = figure(optional=True)
    no_speech_flagged: int | None = figure(optional=True)
    no_speech_prob_hallucinated: float | None = figure(optional=True)


@dataclass(frozen=True)
class SliceFigures(Record):
    """One group of rows: a model's clips or one ``label=value`` slice of them (``audits.asr.scoring.group_metrics``)."""

    n_utts: int = figure(0)
    n_scored: int = figure(0)
    n_failed: int = figure(0)
    n_words: int = figure(0)
    n_chars: int = figure(0)
    word_errors: int = figure(0)
    substitutions: int = figure(0)
    deletions: int = figure(0)
    insertions: int = figure(0)
    char_errors: int = figure(0)
    wer: float | None = figure()
    cer: float | None = figure()
    ci95: tuple[float, float] | None = figure()
    not_testable: str | None = figure(optional=True)
    """Why ``ci95`` is None (only then)."""
    cer_ci95: tuple[float, float] | None = figure()
    cer_not_testable: str | None = figure(optional=True)
    exact_match_rate: float | None = figure(report=("exact %", "pct"))
    """Share of the scored utterances with speech whose word errors are 0 (None when there is none)."""
    n_speakers: int = figure(0)
    ci_method: str | None = figure()
    audio_s: float = figure(0.0)
    infer_s: float = figure(0.0)
    rtfx: float | None = figure()
    hallucination: HallucinationFigures | None = figure(codec=HallucinationFigures)


@dataclass(frozen=True)
class GapFigures(Record):
    """WER of slice ``a`` minus WER of slice ``b`` within one label, with its interval and Holm-corrected test."""

    label: str = figure("")
    a: str = figure("")
    b: str = figure("")
    gap: float | None = figure()
    wer_a: float | None = figure(optional=True)
    wer_b: float | None = figure(optional=True)
    ci95: tuple[float, float] | None = figure()
    not_testable: str | None = figure(optional=True)
    excludes_zero: bool | None = figure()
    p_value: float | None = figure()
    n_a: int = figure(0)
    n_b: int = figure(0)
    p_holm: float | None = figure()
    significant: bool | None = figure()


@dataclass(frozen=True)
class ModelFigures(SliceFigures):
    """One model: its figures over all its clips, failures, slices and gaps, then how they were made (run facts)."""

    failures: Mapping[str, int] | None = figure(optional=True)
    slices: Mapping[str, SliceFigures] = figure(_EMPTY, codec=("map", SliceFigures))
    gaps: tuple[GapFigures, ...] = figure((), codec=("list", GapFigures))
    status: str | None = figure(optional=True)
    error: str | None = figure(optional=True)
    backend: str | None = figure(optional=True)
    batch_size: int | None = figure(optional=True)
    warmup_batches: int | None = figure(optional=True)
    device: str | None = figure(optional=True)
    dtype: str | None = figure(optional=True)
    load_s: float | None = figure(optional=True)
    backend_info: Mapping[str, Any] | None = figure(optional=True)
    params_m: float | None = figure(optional=True)
    failed_units: tuple[Mapping[str, Any], ...] | None = figure(optional=True)
    engine: Mapping[str, Any] | None = figure(optional=True)
    tags: tuple[str, ...] | None = figure(optional=True)


@dataclass(frozen=True)
class PairFigures(Record):
    """WER(a) - WER(b) on the clips both models scored (paired bootstrap, Holm across all pairs)."""

    a: str = figure("")
    b: str = figure("")
    n_utts: int = figure(0)
    diff: float | None = figure()
    ci95: tuple[float, float] | None = figure()
    not_testable: str | None = figure(optional=True)
    p_value: float | None = figure()
    p_holm: float | None = figure()
    better: str | None = figure()


@dataclass(frozen=True)
class Comparisons(Record):
    """Every pair of models and the tiers of models the data cannot tell apart (audits/asr/paired.py)."""

    method: str | None = figure()
    correction: str | None = figure()
    alpha: float | None = figure()
    n_boot: int | None = figure()
    seed: int | None = figure()
    pairs: tuple[PairFigures, ...] = figure((), codec=("list", PairFigures))
    tiers: tuple[tuple[str, ...], ...] = figure(())


@dataclass(frozen=True)
class AsrResult:
    """The ASR section's result: every model's figures by name, and the comparisons between models.

    ``scored`` is the scoring pass the figures came from (normalized text and per-row edit counts),
    kept for the reports of the same run; it is not part of the JSON and is None for a result read back.
    """

    models: Mapping[str, ModelFigures] = field(default_factory=lambda: _EMPTY)
    comparisons: Comparisons | None = None
    scored: Any = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        """``summary.json``'s ``models`` and ``comparisons`` (in that order; ``comparisons`` only when present)."""
        out: dict[str, Any] = {"models": {name: m.to_json() for name, m in self.models.items()}}
        if self.comparisons is not None:
            out["comparisons"] = self.comparisons.to_json()
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], scored: Any = None) -> AsrResult:
        """The result held by a summary (its ``models`` and ``comparisons`` keys; others are ignored)."""
        models = {str(k): ModelFigures.from_json(v) for k, v in (data.get("models") or {}).items()}
        comp = data.get("comparisons")
        return cls(MappingProxyType(models), None if comp is None else Comparisons.from_json(comp), scored)

    def model(self, name: str) -> ModelFigures:
        """One model's figures (``KeyError`` naming the models there are when absent)."""
        try:
            return self.models[name]
        except KeyError:
            raise KeyError(f"no model '{name}' in this result (models: {', '.join(self.models) or 'none'})") from None


@dataclass(frozen=True)
class ReportColumn:
    """A figure declared with ``figure(report=(heading, fmt))``, as a column of the reports' and exports' tables."""

    name: str
    """The field's name: the column of the CSV and DuckDB tables and the key of report.html's data."""
    heading: str
    """The column's heading in report.md and report.html."""
    fmt: str
    """How a cell shows the value (``format_cell``)."""

    def value(self, figures: Mapping[str, Any]) -> Any:
        """The figure in a model's or slice's JSON object (None when absent)."""
        return figures.get(self.name)

    def cell(self, figures: Mapping[str, Any]) -> str:
        """The figure as a report cell (unescaped)."""
        return format_cell(self.value(figures), self.fmt)


def report_columns(record: type[Record] = ModelFigures) -> list[ReportColumn]:
    """The columns ``record`` declares with ``report``, in declaration order: ``ModelFigures`` for the model
    tables (its ``SliceFigures`` fields included), ``SliceFigures`` for the slice tables. Read at call time."""
    cols = []
    for f in record.declared():
        rep = f.metadata.get("report")
        if rep:
            cols.append(ReportColumn(f.name, str(rep[0]), str(rep[1])))
    return cols


def format_cell(value: Any, fmt: str) -> str:
    """A report cell: ``—`` for None, ``pct`` a share as a percentage with one decimal, else ``format(value, fmt)``."""
    if value is None:
        return "—"
    if fmt == "pct":
        return f"{100 * value:.1f}"
    return format(value, fmt)


def models_of(summary: Mapping[str, Any]) -> dict[str, ModelFigures]:
    """A summary's models as records (for readers that hold the plain summary)."""
    return {str(k): ModelFigures.from_json(v) for k, v in (summary.get("models") or {}).items()}


__all__: Sequence[str] = [
    "AsrResult",
    "Comparisons",
    "GapFigures",
    "HallucinationFigures",
    "ModelFigures",
    "PairFigures",
    "Record",
    "ReportColumn",
    "SliceFigures",
    "format_cell",
    "freeze",
    "models_of",
    "report_columns",
    "thaw",
]
