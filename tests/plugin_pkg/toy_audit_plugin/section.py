"""A tiny audit section: per ASR model, how many words its hypotheses have against the references."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from audits.reports.formatting import md
from audits.sections import AuditSection, SectionContext
from engine.errors import ConfigError


@dataclass(frozen=True)
class ClipLengthConfig:
    top: int


class ClipLengthSection(AuditSection[ClipLengthConfig]):
    """Words in hypotheses vs references, per model (recipe key ``cliplen``)."""

    key = "cliplen"
    title = "Clip lengths (plug-in)"
    order = 90
    needs_asr_models = True

    def parse(self, raw: Mapping[str, Any], source: str) -> ClipLengthConfig:
        unknown = sorted(set(raw) - {"top"})
        if unknown:
            raise ConfigError(f"{source}: cliplen: unknown key(s) {', '.join(unknown)}; known: top")
        top = raw.get("top", 3)
        if not isinstance(top, int) or isinstance(top, bool) or top < 1:
            raise ConfigError(f"{source}: cliplen.top must be a positive integer, got {top!r}")
        return ClipLengthConfig(top=top)

    def run(self, config: ClipLengthConfig, ctx: SectionContext) -> dict[str, Any]:
        rows = ctx.load_rows()
        out: dict[str, Any] = {}
        for model, group in rows.groupby("model", sort=True):
            hyp = group["hyp_raw"].fillna("").map(lambda s: len(str(s).split()))
            ref = group["ref_raw"].fillna("").map(lambda s: len(str(s).split()))
            longest = group.assign(n=hyp).sort_values(["n", "utt_id"], ascending=[False, True]).head(config.top)
            out[str(model)] = {
                "clips": int(len(group)),
                "hyp_words": int(hyp.sum()),
                "ref_words": int(ref.sum()),
                "longest": [str(u) for u in longest["utt_id"]],
            }
        return {"models": out}

    def markdown(self, section: Mapping[str, Any]) -> list[str]:
        lines = [f"## {self.title}", "", "| model | clips | hypothesis words | reference words |", "|---|---:|---:|---:|"]
        for model, m in section.get("models", {}).items():
            lines.append(f"| {md(model)} | {m['clips']} | {m['hyp_words']} | {m['ref_words']} |")
        return [*lines, ""]
