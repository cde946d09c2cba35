"""The ``conversation:`` recipe section: long-form transcription, diarization and
speaker-attributed scoring of long recordings, as an ``AuditSection``.

``parse`` validates the recipe block (pure). ``run`` reads and cross-checks the conversation set
(a missing recording, a bad RTTM line or audio shorter than its annotation stops it before the
section's models load), runs or resumes the work under ``<run>/conversation/``, and returns the
figures stored under ``summary.json``'s ``conversation`` key; per-recording figures go to
``conversation/recordings.csv``. Everything heavy is imported inside the methods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audits.conversation.results import ConversationResult
from audits.sections import AuditSection, SectionContext
from engine.data import PREDICTIONS_BACKEND, ModelSpec
from engine.engine import KEYED, PassNeed

if TYPE_CHECKING:
    from audits.conversation.run import ConversationConfig
    from audits.result import RunResult


class ConversationSection(AuditSection["ConversationConfig", ConversationResult]):
    key = "conversation"
    title = "Conversation"
    order = 40
    needs_asr_models = True
    result_type = ConversationResult

    def parse(self, raw: Mapping[str, Any], source: str) -> ConversationConfig:
        from audits.conversation.run import parse_conversation_config

        return parse_conversation_config(raw, source)

    def run(self, config: ConversationConfig, ctx: SectionContext) -> ConversationResult:
        from audits.conversation.run import (
            conversation_summary,
            load_conversation_data,
            run_conversation,
            write_recordings_csv,
        )
        from audits.normalizing import get_normalizer
        from audits.records import freeze

        data = load_conversation_data(_root(config, ctx.dataset))
        asr = [s for s in ctx.asr_models if s.backend != PREDICTIONS_BACKEND]
        facts = run_conversation(config, data, asr, ctx.out_dir, ctx.progress, ctx.engine)
        normalizer = get_normalizer(config.normalizer)
        whole = _whole_recordings(ctx, data)
        result, rows = conversation_summary(config, data, asr, ctx.out_dir, normalizer, facts, whole)
        write_recordings_csv(rows, ctx.out_dir)
        return replace(result, normalizer=freeze({"name": normalizer.name, "version": normalizer.version}))

    def engine_passes(self, config: ConversationConfig, asr_models: Sequence[ModelSpec], dataset: Any) -> list[PassNeed]:
        """Diarization and long-form ASR run as keyed units (one per recording)."""
        return [PassNeed("long-form ASR and diarization passes", frozenset({KEYED}))]

    def check_inputs(self, config: ConversationConfig, dataset: Any) -> None:
        """Read and cross-check the conversation set (manifest, audio headers, RTTM, transcript)
        before any model loads, so a bad line stops the run naming the file, line and field."""
        from audits.conversation.run import load_conversation_data

        load_conversation_data(_root(config, dataset))

    def markdown(self, result: ConversationResult, run: RunResult) -> list[str]:
        from audits.conversation.run import markdown_lines

        return markdown_lines(result) if _present(result) else []

    def html(
        self, result: ConversationResult, run: RunResult, data: Mapping[str, Any], colors: Mapping[str, str]
    ) -> tuple[str, str, str] | None:
        if not _present(result):
            return None
        from audits.conversation.run import html_section

        return (
            self.title,
            html_section(result),
            "Long-form WER, cpWER and tcpWER (meeteval), DER and JER (pyannote.metrics); see docs/conversation.md.",
        )


def _present(result: ConversationResult) -> bool:
    """Whether the run holds the section (an empty result reads from a summary without it)."""
    return next(iter(result.keys()), None) is not None


def _root(config: ConversationConfig, dataset: Any) -> Path:
    """The conversation set's folder: ``dataset`` means the recipe's own dataset folder (or its
    manifest's folder); ``builtin:`` sets are built on first use."""
    from audits.conversation.run import resolve_dataset
    from audits.recipes import data_dir

    spec = config.dataset
    if spec == "dataset":
        src = Path(str(dataset.source))
        spec = str(src.parent if src.is_file() else src)
    return resolve_dataset(spec, data_dir()) if spec.startswith("builtin:") else Path(spec)


def _whole_recordings(ctx: SectionContext, data: Any) -> dict[str, dict[str, tuple[str, str]]]:
    """The ASR section's (reference, hypothesis) per model and recording, when the run's dataset
    is the conversation set itself (its utterance ids are the recordings' file stems)."""
    try:
        rows = ctx.load_rows()
    except (OSError, ValueError):  # no ASR rows in this run
        return {}
    out: dict[str, dict[str, tuple[str, str]]] = {}
    if rows is None or rows.empty:
        return out
    stems: dict[str, str] = {}  # utt_id -> audio file stem
    for shard in ctx.dataset.iter_shards():
        for u in shard.utterances:
            if u.audio_path:
                stems[u.utt_id] = Path(str(u.audio_path)).stem
    for r in rows.itertuples(index=False):
        rec = stems.get(str(r.utt_id), "")
        if rec in data.recordings and not (isinstance(r.error, str) and r.error):
            out.setdefault(str(r.model), {})[rec] = (str(r.ref_raw), str(r.hyp_raw or ""))
    return {m: v for m, v in out.items() if len(v) == len(data.recordings)}
