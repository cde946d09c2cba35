"""The data model: small frozen records for utterances, shards, result rows and model specs.

Everything else in the engine imports from here, never the other way round, so these records
have no dependencies. References are always stored raw; normalization happens at scoring time.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

#: The engine's one sample rate: every clip is decoded, down-mixed and resampled to it once per shard.
SAMPLE_RATE = 16_000
# A clip with no speech (silence, noise, music) carries this label with an empty reference; an
# empty reference without it is a problem row, and only labelled clips may be (digitally) silent.
SPEECH_FREE_LABEL, SPEECH_FREE_VALUE = "content", "speech-free"


def is_speech_free(labels: Mapping[str, Any]) -> bool:
    """Whether a clip is labelled speech-free. The one rule every surface applies (reader, decoder,
    judges, scoring): the explicit ``content`` label decides, never what the reference looks like."""
    return str(labels.get(SPEECH_FREE_LABEL, "")) == SPEECH_FREE_VALUE


#: Longest clip read by default (seconds); longer ones become error rows before their samples are read.
PREDICTIONS_BACKEND = "predictions"
"""The backend of a model whose transcripts come with a predictions-only dataset (no audio, nothing to run)."""
DEFAULT_MAX_DURATION_S = 1800.0

#: Progress callback: (event, count, details). Events: loading, start, unit, skip, ...
ProgressFn = Callable[[str, int, dict[str, Any]], None]

# Columns every result row has (docs/design.md, run-directory contract); slice labels are added as extra columns.
RESULT_COLUMNS: tuple[str, ...] = (
    "utt_id",
    "model",
    "hyp_raw",
    "ref_raw",
    "duration_s",
    "infer_s",
    "error",
    "speaker",
    "shard",
    "parent_id",
)

# Optional result-row columns a backend fills when it exposes them (NaN otherwise): Whisper's mean
# token log-probability and no-speech probability per clip. Never slice labels.
CONFIDENCE_COLUMNS: tuple[str, ...] = ("asr_avg_logprob", "asr_no_speech_prob")

# Keys that are part of an utterance record and never treated as slice labels.
RESERVED_KEYS: frozenset[str] = frozenset(
    {
        "utt_id",
        "id",
        "audio",
        "audio_filepath",
        "audio_path",
        "path",
        "duration",
        "duration_s",
        "text",
        "reference",
        "sentence",
        "transcript",
        "speaker",
        "speaker_id",
        "sample_rate",
        "parent_id",
        "derivation",
        "offset",
    }
)


#: The derivation dimension. A run with a ``perturbations:`` block derives new clips from the
#: dataset's (engine/perturb/derive.py) and labels every clip with ``perturbation``: ``clean`` on a
#: source clip, ``<family>:<level>`` on a derived one (whose ``parent_id`` is its source), plus
#: ``perturbation_family`` and ``perturbation_level`` on derived clips. A derived clip is a level
#: of its source, not a new clip: sections read source clips unless they declare otherwise
#: (audits/clips.py).
DERIVATION_COLUMN = "perturbation"
SOURCE_DERIVATION = "clean"
DERIVATION_LABELS: tuple[str, ...] = (DERIVATION_COLUMN, "perturbation_family", "perturbation_level")

#: Per-row columns the scoring step adds to the result rows (audits/asr/scoring.py, hallucination.py).
SCORING_COLUMNS: tuple[str, ...] = (
    "ok",
    "ref_norm",
    "hyp_norm",
    "n_words",
    "word_errors",
    "subs",
    "dels",
    "ins",
    "n_chars",
    "char_errors",
    "speech_free",
    "hyp_words",
    "loop",
    "length_outlier",
    "semsim",
)

#: Names a slice label may not have: every column the engine writes into a result row (the row's
#: own columns, the backends' confidences, the derivation labels), the per-row scoring columns and
#: the keys of the Open ASR Leaderboard export. A dataset column with one of these names would be
#: overwritten, overwrite a hypothesis, turn a score into a fake slice, or vanish; readers refuse it.
RESERVED_LABELS: frozenset[str] = (
    frozenset(RESULT_COLUMNS)
    | frozenset(CONFIDENCE_COLUMNS)
    | frozenset(DERIVATION_LABELS)
    | frozenset(SCORING_COLUMNS)
    | frozenset({"pred_text", "time", "duration", "audio_filepath", "text", "derivation"})
)


def reserved_column_problem(key: str, where: str) -> str:
    """Why the dataset column ``key`` (a reserved name) is refused, and what to do (name the file in ``where``)."""
    if key in DERIVATION_LABELS:
        what = (
            "the engine writes it on every clip when a recipe derives clips (perturbations: 'clean' on a source clip, "
            "'<family>:<level>' on a derived one)"
        )
    elif key in CONFIDENCE_COLUMNS:
        what = "the engine writes a backend's per-clip confidence there"
    elif key in SCORING_COLUMNS:
        what = "scoring writes a per-row figure there"
    else:
        what = "it is a column of the result rows the engine writes"
    return (
        f"column '{key}' is reserved: {what}, so the dataset's own values would be overwritten or mistaken for the engine's; "
        f"rename the column in {where} (e.g. to 'my_{key}')"
    )


def check_label_names(labels: Mapping[str, Any], where: str) -> str | None:
    """The first label name that is reserved, with what to do, or None."""
    for key in labels:
        if key in RESERVED_LABELS:
            return reserved_column_problem(key, where)
    return None


def check_derivation_link(parent_id: Any, derivation: Any, where: str) -> str | None:
    """A dataset's ``parent_id`` is accepted as what the engine means by it: the source of derived
    audio, recorded with the clip's ``derivation`` (as the engine's shards and manifests of derived
    audio hold it). A ``parent_id`` without one is some other column of the same name: refused."""
    if parent_id in (None, "") or derivation:
        return None
    return (
        "column 'parent_id' is reserved: the engine writes it on the clips it derives (their source clip), and reads a "
        "dataset's parent_id as a derivation link only together with the clip's 'derivation' record (a JSON object saying how "
        f"the clip was made from its parent); rename the column in {where} (e.g. to 'parent') to keep it as a label, or add "
        "the 'derivation' record"
    )


@dataclass(frozen=True)
class Utterance:
    """One clip and its raw reference.

    Audio is either a path (``audio_path``) or encoded bytes (``audio_bytes``, WAV/FLAC);
    derived audio keeps ``parent_id`` and a JSON-able ``derivation`` record. A *segment* of a
    longer file (a NeMo row with ``offset``) has ``offset_s`` set: the clip is then exactly the
    span ``[offset_s, offset_s + duration_s)`` of that audio, and every decode reads only it
    (``engine.audio.decoding``); without ``offset_s`` the clip is the whole file and ``duration_s`` is
    the manifest's note of its length.
    """

    utt_id: str
    reference: str | None
    audio_path: str | None = None
    audio_bytes: bytes | None = None
    duration_s: float | None = None
    speaker: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    parent_id: str | None = None
    derivation: Mapping[str, Any] | None = None
    hyp_raw: str | None = None  # only for prediction-only datasets (no audio)
    source: str | None = None  # "file:line" where the record came from, for error messages
    problem: str | None = None  # a record-level problem found while reading; becomes the row's error
    offset_s: float | None = None  # start of the segment in its audio (seconds); None: the whole file

    def derivation_json(self) -> str | None:
        return None if self.derivation is None else json.dumps(self.derivation, sort_keys=True)

    @property
    def segment(self) -> tuple[float, float] | None:
        """``(offset_s, duration_s)`` of a segment of a longer file, None for a whole file."""
        if self.offset_s is None:
            return None
        return (float(self.offset_s), float(self.duration_s if self.duration_s is not None else math.nan))


@dataclass(frozen=True)
class DecodedAudio:
    """Mono float32 samples at the engine's sample rate, or the reason they could not be had."""

    utt_id: str
    samples: Any  # numpy.ndarray (float32, mono) or None when ``error`` is set
    sample_rate: int
    error: str | None = None

    @property
    def duration_s(self) -> float:
        return 0.0 if self.samples is None else float(len(self.samples)) / self.sample_rate


@dataclass(frozen=True)
class Shard:
    """A contiguous group of utterances: with one model it forms the unit of work."""

    shard_id: str
    utterances: tuple[Utterance, ...]

    def __len__(self) -> int:
        return len(self.utterances)


@dataclass(frozen=True)
class WorkUnit:
    """One ``(model, shard)`` pair; the granularity of scheduling, markers and resume."""

    model: str
    shard_id: str

    @property
    def key(self) -> str:
        return f"{self.model}::{self.shard_id}"


@dataclass(frozen=True)
class ModelSpec:
    """A registry model resolved to its backend and options: what a runner needs to load it.

    ``kind`` is the pass it runs (``asr``, ``sv``, ``ser``; ``engine/run/passes.py``): it selects the
    backend registry, the per-unit processing and the row schema, so both runners run every kind.
    """

    name: str
    backend: str
    options: Mapping[str, Any] = field(default_factory=dict)
    batch_size: int = 8
    meta: Mapping[str, Any] = field(default_factory=dict)
    kind: str = "asr"


@dataclass(frozen=True)
class DecodeOptions:
    """How clips are read: the duration cap and whether paths may leave the dataset root."""

    max_duration_s: float = DEFAULT_MAX_DURATION_S
    allow_outside_root: bool = True
