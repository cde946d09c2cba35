"""The ``profiles:`` recipe section: condition maps, the study's gap table, robustness profile,
rank stability, ladders and trade-offs over the run's ASR rows, as an ``AuditSection``.

It needs the recipe's ASR models (it reads their rows); the work lives in ``audits.profiles.run``
and the rendering in ``audits.profiles.report``, imported inside the methods.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from audits.clips import DERIVED
from audits.profiles.results import PerturbationsResult, ProfilesResult
from audits.sections import AuditSection, SectionContext

if TYPE_CHECKING:
    from pathlib import Path

    from audits.profiles.config import ProfilesConfig
    from audits.profiles.perturbations import PerturbationsConfig
    from audits.result import RunResult
    from engine.data import DecodeOptions
    from engine.datasets.base import Dataset


class ProfilesSection(AuditSection["ProfilesConfig", ProfilesResult]):
    key = "profiles"
    title = "Robustness profiles"
    order = 15
    needs_asr_models = True
    result_type = ProfilesResult

    def parse(self, raw: Mapping[str, Any], source: str) -> ProfilesConfig:
        from audits.profiles.config import parse_profiles_config

        return parse_profiles_config(raw, source)

    def check_inputs(self, config: ProfilesConfig, dataset: Dataset) -> None:
        """A condition map whose output column the rows already have is refused before any model loads."""
        if not config.maps:
            return
        from audits.profiles.config import check_map_outputs

        labels: set[str] = set()
        for sid in dataset.shard_ids:
            for u in dataset.load_shard(sid).utterances:
                labels.update(u.labels)
        check_map_outputs(config, labels)

    def run(self, config: ProfilesConfig, ctx: SectionContext) -> ProfilesResult:
        from audits.profiles.run import run_profiles

        return ProfilesResult.from_json(run_profiles(config, ctx))

    def markdown(self, result: ProfilesResult, run: RunResult) -> list[str]:
        from audits.profiles.report import profiles_lines

        return profiles_lines(result, self.title)

    def html(
        self, result: ProfilesResult, run: RunResult, data: Mapping[str, Any], colors: Mapping[str, str]
    ) -> tuple[str, str, str] | None:
        if not _present(result):
            return None
        from audits.profiles.report import render_profiles

        note = (
            "WER is corpus-level on clips with speech; intervals are speaker-block bootstrap percentiles; "
            "gap p-values are Holm-corrected across every gap of every model, paired gap tests across every gap and pair."
        )
        return self.title, render_profiles(result, colors), note


class PerturbationsSection(AuditSection["PerturbationsConfig", PerturbationsResult]):
    """``perturbations:``: derived clips before the models run, WER ladders after."""

    key = "perturbations"
    title = "Perturbation ladders"
    order = 16
    needs_asr_models = True
    result_type = PerturbationsResult
    reads = DERIVED  # the ladders: every derived clip against its source (``perturbation`` = clean)

    def parse(self, raw: Mapping[str, Any], source: str) -> PerturbationsConfig:
        from audits.profiles.perturbations import parse_perturbations

        return parse_perturbations(raw, source)

    def check_inputs(self, config: PerturbationsConfig, dataset: Dataset) -> None:
        """The derived clips' identities (levels distinct once formatted, ids unique among source and derived clips)
        that there is audio to derive from, and the folders of recorded noise and room responses (headers, digests,
        RT60s), before anything is derived, loaded or written."""
        from audits.profiles.perturbations import check_sources
        from engine.errors import ConfigError
        from engine.perturb.derive import check_derivation_plan

        if not dataset.has_audio:
            raise ConfigError(
                f"perturbations: dataset '{dataset.name}' holds predictions only (no audio to derive clips from); "
                "run the perturbations on the audio dataset"
            )
        check_derivation_plan(dataset, config.families)
        check_sources(config)

    def prepare_dataset(self, config: PerturbationsConfig, dataset: Dataset, out_dir: Path, decode_options: DecodeOptions) -> Dataset:
        from audits.profiles.perturbations import derive

        return derive(config, dataset, out_dir, decode_options)

    def run(self, config: PerturbationsConfig, ctx: SectionContext) -> PerturbationsResult:
        from audits.profiles.perturbations import run_perturbations

        return PerturbationsResult.from_json(run_perturbations(config, ctx))

    def markdown(self, result: PerturbationsResult, run: RunResult) -> list[str]:
        from audits.profiles.perturbations import perturbation_lines

        return perturbation_lines(result, self.title)

    def html(
        self, result: PerturbationsResult, run: RunResult, data: Mapping[str, Any], colors: Mapping[str, str]
    ) -> tuple[str, str, str] | None:
        if not _present(result):
            return None
        from audits.profiles.perturbations import render_perturbations

        note = (
            "Every clip at every level of every family, derived deterministically from the seed; "
            "baseline = the clean clips; intervals: speaker-block bootstrap (a derived clip in its source's block). "
            "The derived clips count here only: every other figure uses the source clips."
        )
        return self.title, render_perturbations(result, colors), note


def _present(result: ProfilesResult | PerturbationsResult) -> bool:
    """Whether the run holds the section (an empty result reads from a summary without it)."""
    return next(iter(result.keys()), None) is not None
