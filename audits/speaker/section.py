"""The ``speaker:`` recipe section: speaker verification with SV backends, as an ``AuditSection``.

It is a whole audit by itself (``can_run_without_asr_models``): a speaker recipe may list no
ASR models. Parsing and running live in ``audits.speaker.run``, rendering in ``audits.speaker.report``;
both are imported inside the methods so that ordering the sections imports neither.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from audits.sections import AuditSection, SectionContext
from audits.speaker.results import SpeakerResult
from engine.data import DecodeOptions, ModelSpec
from engine.engine import KEYED, SHARD_SV, PassNeed
from engine.run.joint_pass import PassRequest

if TYPE_CHECKING:
    from audits.result import RunResult
    from audits.speaker.run import SpeakerConfig


class SpeakerSection(AuditSection["SpeakerConfig", SpeakerResult]):
    key = "speaker"
    title = "Speaker verification"
    order = 20
    can_run_without_asr_models = True
    result_type = SpeakerResult

    def parse(self, raw: Mapping[str, Any], source: str) -> SpeakerConfig:
        from audits.speaker.run import parse_speaker_config

        return parse_speaker_config(raw, source)

    def run(self, config: SpeakerConfig, ctx: SectionContext) -> SpeakerResult:
        from audits.speaker.run import run_speaker_audit

        return SpeakerResult.from_json(
            run_speaker_audit(config, ctx.dataset, ctx.out_dir, ctx.progress, decode_options=ctx.decode_options, engine=ctx.engine)
        )

    def engine_passes(self, config: SpeakerConfig, asr_models: Sequence[ModelSpec], dataset: Any) -> list[PassNeed]:
        """The embedding pass; with judges, their questions (keyed units)."""
        out = [PassNeed("speaker-verification pass", frozenset({SHARD_SV}))]
        return out + ([PassNeed("audio-LM judge questions", frozenset({KEYED}))] if config.judges is not None else [])

    def dataset_passes(self, config: SpeakerConfig, dataset: Any, decode_options: DecodeOptions) -> list[PassRequest]:
        """``run`` embeds the recipe's own dataset with the run's decode options: the pipeline may run that pass with ASR."""
        from audits.speaker.run import sv_specs

        if not dataset.has_audio:  # ``run`` refuses such a dataset itself, with its message
            return []
        return [PassRequest(s.model_spec(), config.warmup) for s in sv_specs(config)]

    def check_inputs(self, config: SpeakerConfig, dataset: Any) -> None:
        """Read the trial list (when one is given) against the dataset's ids before any model
        loads: a malformed line or an unknown clip id stops the run naming the file and line. Generated
        trials are formed now too, so a dataset that yields no same- or different-speaker pair (a small
        --limit, one clip per speaker) stops the run saying why instead of giving empty tables."""
        if config.trials is None:
            if dataset.has_audio:
                from audits.speaker.run import build_trials
                from audits.utterance_meta import collect_meta

                build_trials(config, collect_meta(dataset))
            return
        from audits.speaker.metrics import read_trials
        from engine.errors import ConfigError

        ids = [u.utt_id for shard in dataset.iter_shards() for u in shard.utterances]
        try:
            read_trials(config.trials, known_ids=ids)
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{config.trials}: not valid UTF-8 text (byte {exc.start}); save the trial list as UTF-8") from None

    def markdown(self, result: SpeakerResult, run: RunResult) -> list[str]:
        from audits.speaker.report import speaker_lines

        return speaker_lines(result.to_json(), self.title)

    def report_data(self, result: SpeakerResult, run: RunResult) -> Any:
        from audits.speaker.report import speaker_data

        return speaker_data(result.to_json())

    def html(
        self, result: SpeakerResult, run: RunResult, data: Mapping[str, Any], colors: Mapping[str, str]
    ) -> tuple[str, str, str] | None:
        if not data.get(self.key):
            return None
        from audits.speaker.report import render_speaker

        return self.title, render_speaker(result.to_json()), "EER with minDCF at p_target 0.01, C_miss = C_fa = 1."
