"""The ``emotion:`` recipe section: speech-emotion recognition with SER backends, as an ``AuditSection``.

Like the speaker section it is a whole audit by itself (``can_run_without_asr_models``).
Parsing and running live in ``audits.emotion.run``, rendering in ``audits.emotion.report``;
both are imported inside the methods so that ordering the sections imports neither.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from audits.emotion.results import EmotionResult
from audits.sections import AuditSection, SectionContext
from engine.data import DecodeOptions, ModelSpec
from engine.engine import KEYED, SHARD_SER, PassNeed
from engine.run.joint_pass import PassRequest

if TYPE_CHECKING:
    from audits.emotion.run import EmotionConfig
    from audits.result import RunResult


class EmotionSection(AuditSection["EmotionConfig", EmotionResult]):
    key = "emotion"
    title = "Speech emotion"
    order = 30
    can_run_without_asr_models = True
    result_type = EmotionResult

    def parse(self, raw: Mapping[str, Any], source: str) -> EmotionConfig:
        from audits.emotion.run import parse_emotion_config

        return parse_emotion_config(raw, source)

    def run(self, config: EmotionConfig, ctx: SectionContext) -> EmotionResult:
        from audits.emotion.run import run_emotion_audit

        return EmotionResult.from_json(
            run_emotion_audit(config, ctx.dataset, ctx.out_dir, ctx.progress, decode_options=ctx.decode_options, engine=ctx.engine)
        )

    def engine_passes(self, config: EmotionConfig, asr_models: Sequence[ModelSpec], dataset: Any) -> list[PassNeed]:
        """The emotion-recognition pass; with judges, their questions (keyed units)."""
        out = [PassNeed("emotion-recognition pass", frozenset({SHARD_SER}))]
        return out + ([PassNeed("audio-LM judge questions", frozenset({KEYED}))] if config.judges is not None else [])

    def dataset_passes(self, config: EmotionConfig, dataset: Any, decode_options: DecodeOptions) -> list[PassRequest]:
        """``run`` embeds the recipe's own dataset with the run's decode options: the pipeline may run that pass with ASR."""
        from audits.emotion.run import ser_specs

        if not dataset.has_audio:  # ``run`` refuses such a dataset itself, with its message
            return []
        return [PassRequest(s.model_spec(), config.warmup) for s in ser_specs(config)]

    def check_inputs(self, config: EmotionConfig, dataset: Any) -> None:
        """Read the label map and the label columns the section scores against before any model
        loads: a missing, unreadable or malformed map, an absent label or dimension column, or a
        dataset on which nothing could be scored (the section would be empty) stops the run naming it.
        (A label the map cannot place is judged at scoring: it matters
        only for backends that give categories, which is known once they load.)"""
        from audits.emotion.run import check_emotion_inputs, check_not_empty
        from audits.utterance_meta import collect_meta
        from engine.errors import ConfigError

        meta = collect_meta(dataset)
        check_emotion_inputs(config, meta)
        check_not_empty(config, meta)
        try:
            config.make_label_map()
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"emotion.label_map {config.label_map}: not valid UTF-8 text (byte {exc.start}); save the map as UTF-8"
            ) from None
        except OSError as exc:
            raise ConfigError(f"emotion.label_map {config.label_map}: cannot be read ({exc.strerror or exc})") from None

    def markdown(self, result: EmotionResult, run: RunResult) -> list[str]:
        from audits.emotion.report import emotion_lines

        return emotion_lines(result.to_json(), self.title)

    def report_data(self, result: EmotionResult, run: RunResult) -> Any:
        from audits.emotion.report import emotion_data

        return emotion_data(result.to_json())

    def html(
        self, result: EmotionResult, run: RunResult, data: Mapping[str, Any], colors: Mapping[str, str]
    ) -> tuple[str, str, str] | None:
        if not data.get(self.key):
            return None
        from audits.emotion.report import render_emotion

        return self.title, render_emotion(result.to_json()), ""
