"""ASR scoring as an audit section: the one every run with ASR models runs first.

It reads the run's ASR rows (the source clips'), scores them once with the recipe's normalizer
and returns an ``AsrResult`` (``audits.asr.results``): every model's figures with its run facts,
slices, gaps and hallucinations, and the comparisons between models. ``summary.json`` holds it as
``models`` and ``comparisons`` (``audits.asr.summary.assemble_summary``), so the file keeps its
layout; the other sections run after it. Its configuration is the recipe's ``scoring:`` block.

It is not in the section registry: its keys are summary.json's core keys, and every run has it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from audits.asr.results import AsrResult, ModelFigures
from audits.sections import AuditSection, SectionContext

if TYPE_CHECKING:
    import pandas as pd

    from audits.asr.scoring import ScoringOptions
    from audits.recipes import ScoringConfig
    from audits.result import RunResult
    from normalizers import Normalizer


def scoring_options(config: ScoringConfig) -> ScoringOptions:
    """The scoring pass's options of a recipe's ``scoring:`` block."""
    from audits.asr.scoring import ScoringOptions

    return ScoringOptions(
        n_boot=config.n_boot,
        seed=config.seed,
        slice_columns=list(config.slices) if config.slices else None,
        gaps=list(config.gaps),
    )


class AsrSection(AuditSection["ScoringConfig", AsrResult]):
    """Corpus WER/CER per model and slice, gaps, hallucinations and paired comparisons (audits/asr/scoring.py)."""

    key = "asr"
    title = "ASR models"
    order = 0
    needs_asr_models = True
    result_type = AsrResult

    def parse(self, raw: Mapping[str, Any], source: str) -> ScoringConfig:
        """The recipe's ``scoring:`` block, typed (errors name ``source`` and the key)."""
        from audits.recipes import parse_scoring

        return parse_scoring(raw, source)

    def run(self, config: ScoringConfig, ctx: SectionContext) -> AsrResult:
        """Score the run's rows of the clips it reads (``ctx.load_rows``) with the context's normalizer and model facts."""
        if ctx.normalizer is None:
            raise ValueError("the ASR section needs the run's normalizer in its context (SectionContext.normalizer)")
        return self.score(config, ctx.load_rows(), ctx.normalizer, ctx.facts, ctx.dataset.n_utts)

    def score(
        self, config: ScoringConfig, rows: pd.DataFrame, normalizer: Normalizer, facts: Mapping[str, Mapping[str, Any]], n_utts: int
    ) -> AsrResult:
        """The result of ``rows`` (the models' source-clip rows); a model in ``facts`` without rows has every clip failed."""
        from audits.asr.summary import score_models

        return score_models(rows, normalizer, facts, n_utts, scoring_options(config))

    def markdown(self, result: AsrResult, run: RunResult) -> list[str]:
        """The model table and each model's slice table."""
        from audits.reports.markdown import model_overview, slice_table

        models = {name: m.to_json() for name, m in result.models.items()}
        lines = model_overview({"models": models})
        for name, m in sorted(models.items()):
            lines += [""] + slice_table(name, m)
        return lines

    def merge(self, parts: Sequence[AsrResult | None], names: Sequence[str]) -> AsrResult:
        """Several runs' models side by side (the first run's figures when two runs hold the same model)."""
        models: dict[str, ModelFigures] = {}
        for part in parts:
            for name, m in (part.models if part is not None else {}).items():
                models.setdefault(name, m)
        return AsrResult(MappingProxyType(models))


ASR_SECTION = AsrSection()
"""The section every run with ASR models runs first."""
