"""The conversation section's typed result (``summary.json``'s ``conversation``): small frozen records.

Each record declares its figures in the order ``audits.conversation.run.conversation_summary``
writes them, so a record built in code and one read from ``summary.json`` give the same JSON
(``audits.records``: a record read back keeps the key order and any key it does not declare).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from audits.records import EMPTY, Record, figure


@dataclass(frozen=True)
class SpeakerWerFigures(Record):
    """cpWER or tcpWER pooled over recordings (meeteval counts summed; ``audits.conversation.metrics.SpeakerWER``)."""

    wer: float | None = figure()
    errors: int = figure(0)
    n_words: int = figure(0)
    substitutions: int = figure(0)
    deletions: int = figure(0)
    insertions: int = figure(0)
    missed_speakers: int = figure(0)
    falarm_speakers: int = figure(0)


@dataclass(frozen=True)
class WholeRecordingWer(Record):
    """WER of the ASR section's rows when each recording went to the model as one clip (the short-form baseline)."""

    wer: float | None = figure()
    word_errors: int = figure(0)
    n_words: int = figure(0)
    n_recordings: int = figure(0)


@dataclass(frozen=True)
class LongFormFigures(Record):
    """One model on a group of recordings (all of them, or one ``label=value`` slice): long-form WER, cpWER, tcpWER, speed."""

    n_recordings: int = figure(0)
    audio_s: float = figure(0.0)
    wer: float | None = figure()
    word_errors: int = figure(0)
    n_words: int = figure(0)
    cpwer: SpeakerWerFigures | None = figure(codec=SpeakerWerFigures)
    tcpwer: SpeakerWerFigures | None = figure(codec=SpeakerWerFigures)
    infer_s: float = figure(0.0)
    rtfx: float | None = figure()


@dataclass(frozen=True)
class ConversationModelFigures(LongFormFigures):
    """One model over every recording, then per slice, its chunk count, the whole-recording baseline and its run facts."""

    slices: Mapping[str, LongFormFigures] = figure(EMPTY, codec=("map", LongFormFigures))
    n_chunks: int = figure(0)
    whole_recording: WholeRecordingWer | None = figure(optional=True, codec=WholeRecordingWer)
    backend_info: Mapping[str, Any] | None = figure(optional=True)


@dataclass(frozen=True)
class DiarizationScores(Record):
    """DER and JER with their pooled seconds (pyannote.metrics; ``audits.conversation.metrics.DiarizationScore``)."""

    der: float | None = figure()
    jer: float | None = figure()
    missed_s: float = figure(0.0)
    false_alarm_s: float = figure(0.0)
    confusion_s: float = figure(0.0)
    scored_s: float = figure(0.0)
    n_ref_speakers: int = figure(0)
    n_hyp_speakers: int = figure(0)


@dataclass(frozen=True)
class DiarizationFigures(Record):
    """The diarization backend, its speed, its scores over every recording, its run facts and its scores per slice."""

    backend: str = figure("")
    options: Mapping[str, Any] = figure(EMPTY)
    rtfx: float | None = figure()
    der: float | None = figure()
    jer: float | None = figure()
    missed_s: float = figure(0.0)
    false_alarm_s: float = figure(0.0)
    confusion_s: float = figure(0.0)
    scored_s: float = figure(0.0)
    n_ref_speakers: int = figure(0)
    n_hyp_speakers: int = figure(0)
    facts: Mapping[str, Any] | None = figure(optional=True)
    slices: Mapping[str, DiarizationScores] = figure(EMPTY, codec=("map", DiarizationScores))


@dataclass(frozen=True)
class ConversationDataset(Record):
    """The conversation set: its folder, size and the fingerprint of its annotation."""

    root: str = figure("")
    n_recordings: int = figure(0)
    audio_s: float = figure(0.0)
    fingerprint: str = figure("")


@dataclass(frozen=True)
class AnnotationProblems(Record):
    """Annotation problems kept and scored: how many, and the first ten."""

    count: int = figure(0)
    examples: tuple[str, ...] = figure(())


@dataclass(frozen=True)
class ConversationResult(Record):
    """The conversation set, how it was segmented and scored, diarization figures, every model's long-form figures."""

    dataset: ConversationDataset | None = figure(optional=True, codec=ConversationDataset)
    segmentation: Mapping[str, Any] | None = figure(optional=True)
    scoring: Mapping[str, str] | None = figure(optional=True)
    attribution: str | None = figure(optional=True)
    diarization: DiarizationFigures | None = figure(optional=True, codec=DiarizationFigures)
    models: Mapping[str, ConversationModelFigures] | None = figure(optional=True, codec=("map", ConversationModelFigures))
    """Per model: long-form WER, cpWER, tcpWER, slices, whole-recording WER."""
    problems: AnnotationProblems | None = figure(optional=True, codec=AnnotationProblems)
    normalizer: Mapping[str, str] | None = figure(optional=True)

    def model(self, name: str) -> ConversationModelFigures:
        """One model's figures (``KeyError`` naming the models there are when absent)."""
        models = self.models or EMPTY
        try:
            return models[name]
        except KeyError:
            raise KeyError(f"no model '{name}' in the conversation result (models: {', '.join(models) or 'none'})") from None
