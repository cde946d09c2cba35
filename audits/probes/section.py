"""The ``probes:`` recipe section: benchmark-optimization probes, as an ``AuditSection``.

Probes run the recipe's ASR models on derived audio, so a recipe with probes must list ASR
models (``needs_asr_models``). Merging runs unions each probe's per-model results, since a sweep
split by models gives each run its own models' rates for the same probe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from audits.probes.results import ProbeRecord, ProbesResult
from audits.sections import AuditSection, SectionContext
from engine.data import ModelSpec
from engine.engine import PassNeed

if TYPE_CHECKING:
    import pandas as pd

    from audits.probes.config import ProbeConfig
    from audits.result import RunResult


class ProbesSection(AuditSection["ProbeConfig", ProbesResult]):
    key = "probes"
    title = "Benchmark-optimization probes"
    order = 10
    needs_asr_models = True
    result_type = ProbesResult

    def parse(self, raw: Mapping[str, Any], source: str) -> ProbeConfig:
        from audits.probes.config import parse_probe_config

        return parse_probe_config(raw, source)

    def run(self, config: ProbeConfig, ctx: SectionContext) -> ProbesResult:
        from audits.probes.run import run_probes

        return ProbesResult.from_json(
            run_probes(config, ctx.dataset, ctx.asr_models, ctx.out_dir, ctx.load_rows(), ctx.progress, engine=ctx.engine)
        )

    def engine_passes(self, config: ProbeConfig, asr_models: Sequence[ModelSpec], dataset: Any) -> list[PassNeed]:
        """Masking, synthetic-voice and (with models to run) bad-reference re-runs; orthography runs none."""
        from audits.probes.run import probe_passes

        return probe_passes(config, asr_models, dataset)

    def check_inputs(self, config: ProbeConfig, dataset: Any) -> None:
        """The probes' own inputs (references, the corrections file) before any model loads."""
        from audits.probes.run import check_probe_inputs

        check_probe_inputs(config, dataset)

    def markdown(self, result: ProbesResult, run: RunResult) -> list[str]:
        from audits.probes.report import probe_lines

        return probe_lines(result, self.title)

    def report_data(self, result: ProbesResult, run: RunResult) -> Any:
        from audits.probes.report import probes_data

        return probes_data(result, run.plain_summary)

    def html(self, result: ProbesResult, run: RunResult, data: Mapping[str, Any], colors: Mapping[str, str]) -> tuple[str, str, str] | None:
        if not data.get(self.key):
            return None
        from audits.probes.report import render_probes

        note = (
            "Each rate with its count and 95% interval; the memorizer (a positive control that answers with the stored reference) "
            "sits first and beside each model."
        )
        return self.title, render_probes(data[self.key], colors), note

    def tables(self, result: ProbesResult | None, run: RunResult) -> dict[str, pd.DataFrame]:
        """``probes`` (rate per probe and model) and ``synthetic_voice_arms`` (real vs each voice arm)."""
        from audits.probes.tables import probe_tables

        return probe_tables(result)

    def findings(self, result: ProbesResult, run: RunResult) -> list[str]:
        """Where each probe's memorizer control lands, and how many models lie below it."""
        from audits.probes.tables import probe_findings

        return probe_findings(result, run.plain_summary)

    def merge(self, parts: Sequence[ProbesResult | None], names: Sequence[str]) -> ProbesResult:
        """Every probe over runs: the union of its keys, per-model entries and facts alike (the first run's value wins
        for a key in both), since a sweep split by models gives each run its own models' rates for the same probe."""
        merged: dict[str, ProbeRecord] = {}
        judges: dict[str, Any] = {}
        for part in parts:
            if part is None:
                continue
            for probe, p in part.entries.items():
                merged[probe] = p if probe not in merged else union(merged[probe], p)
            for name, j in (part.judges or {}).items():
                judges.setdefault(name, j)
        has_judges = any(part is not None and part.judges is not None for part in parts)
        return ProbesResult(MappingProxyType(merged), MappingProxyType(judges) if has_judges else None)


def union(kept: ProbeRecord, other: ProbeRecord) -> ProbeRecord:
    """One probe of two runs: ``kept``'s keys, then those only ``other`` has (models and facts), in their order."""
    have = list(kept.keys())
    new = [k for k in other.keys() if k not in have]
    if not new:
        return kept
    declared = {f.name for f in other.declared()}
    return replace(
        kept,
        models=MappingProxyType({**kept.models, **{k: other.models[k] for k in new if k in other.models}}),
        extra=MappingProxyType({**kept.extra, **{k: other.extra[k] for k in new if k in other.extra}}),
        layout=tuple(have + new),
        **{k: getattr(other, k) for k in new if k in declared},
    )
