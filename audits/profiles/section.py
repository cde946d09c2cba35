"""The ``profiles:`` recipe section: condition maps, the study's gap table, robustness profile,
rank stability, ladders and trade-offs over the run's ASR rows, as an ``AuditSection``.

It needs the recipe's ASR models (it reads their rows); the work lives in ``audits.profiles.run``
and the rendering in ``audits.profiles.report``, imported inside the methods.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from audits.sections import AuditSection, SectionContext

if TYPE_CHECKING:
    from audits.profiles.config import ProfilesConfig


class ProfilesSection(AuditSection["ProfilesConfig"]):
    key = "profiles"
    title = "Robustness profiles"
    order = 15
    needs_asr_models = True

    def parse(self, raw: Mapping[str, Any], source: str) -> ProfilesConfig:
        from audits.profiles.config import parse_profiles_config

        return parse_profiles_config(raw, source)

    def run(self, config: ProfilesConfig, ctx: SectionContext) -> dict[str, Any]:
        from audits.profiles.run import run_profiles

        return run_profiles(config, ctx)

    def markdown(self, section: Mapping[str, Any]) -> list[str]:
        from audits.profiles.report import profiles_lines

        return profiles_lines(section, self.title)

    def html(self, summary: Mapping[str, Any], data: Mapping[str, Any], colors: Mapping[str, str]) -> tuple[str, str, str] | None:
        section = summary.get(self.key) or {}
        if not section:
            return None
        from audits.profiles.report import render_profiles

        note = ("WER is corpus-level on clips with speech; intervals are speaker-block bootstrap percentiles; "
                "gap p-values are Holm-corrected across every gap of every model, paired gap tests across every gap and pair.")
        return self.title, render_profiles(section, colors), note
