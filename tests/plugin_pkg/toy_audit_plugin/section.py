"""A tiny audit section: per ASR model, how many words its hypotheses have against the references."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from audits.records import EMPTY, Record, figure
from audits.reports.formatting import md
from audits.sections import AuditSection, SectionContext
from engine.errors import ConfigError

if TYPE_CHECKING:
    from audits.result import RunResult


@dataclass(frozen=True)
class ClipLengthConfig:
    top: int


@dataclass(frozen=True)
class ClipLengths(Record):
    """One model's counts."""

    clips: int = figure(0)
    hyp_words: int = figure(0)
    ref_words: int = figure(0)
    longest: tuple[str, ...] = figure(())


@dataclass(frozen=True)
class ClipLengthResult(Record):
    """The section's result: ``summary.json``'s ``cliplen`` (``{"models": {name: counts}}``)."""

    models: Mapping[str, ClipLengths] = figure(EMPTY, codec=("map", ClipLengths))


class ClipLengthSection(AuditSection[ClipLengthConfig, ClipLengthResult]):
    """Words in hypotheses vs references, per model (recipe key ``cliplen``)."""

    key = "cliplen"
    title = "Clip lengths (plug-in)"
    order = 90
    needs_asr_models = True
    result_type = ClipLengthResult

    def parse(self, raw: Mapping[str, Any], source: str) -> ClipLengthConfig:
        unknown = sorted(set(raw) - {"top"})
        if unknown:
            raise ConfigError(f"{source}: cliplen: unknown key(s) {', '.join(unknown)}; known: top")
        top = raw.get("top", 3)
        if not isinstance(top, int) or isinstance(top, bool) or top < 1:
            raise ConfigError(f"{source}: cliplen.top must be a positive integer, got {top!r}")
        return ClipLengthConfig(top=top)

    def run(self, config: ClipLengthConfig, ctx: SectionContext) -> ClipLengthResult:
        rows = ctx.load_rows()
        out: dict[str, ClipLengths] = {}
        for model, group in rows.groupby("model", sort=True):
            hyp = group["hyp_raw"].fillna("").map(lambda s: len(str(s).split()))
            ref = group["ref_raw"].fillna("").map(lambda s: len(str(s).split()))
            longest = group.assign(n=hyp).sort_values(["n", "utt_id"], ascending=[False, True]).head(config.top)
            out[str(model)] = ClipLengths(int(len(group)), int(hyp.sum()), int(ref.sum()), tuple(str(u) for u in longest["utt_id"]))
        return ClipLengthResult(out)

    def markdown(self, result: ClipLengthResult, run: RunResult) -> list[str]:
        lines = [f"## {self.title}", "", "| model | clips | hypothesis words | reference words |", "|---|---:|---:|---:|"]
        for model, m in result.models.items():
            lines.append(f"| {md(model)} | {m.clips} | {m.hyp_words} | {m.ref_words} |")
        return [*lines, ""]
