"""The ``summary.json`` contract as types: figures and provenance, never rows or predictions.

The ASR figures (``models``, ``comparisons``) are declared once, by the records of ``audits.asr.results``
(``ModelFigures``, ``SliceFigures``, ``GapFigures``, ``PairFigures``, ``Comparisons``) that scoring fills
and ``audits.json_schemas`` publishes; this module types the rest of the file.

Users script against these field names, so they are added to, never renamed. A summary's size
does not grow with the number of utterances: per-utterance results live in
``utterances.parquet``. ``SCHEMA_VERSION`` changes whenever a field changes meaning or moves.

Version history:

* 1: first published layout.
* 2: ``dataset`` no longer embeds a predictions dataset's hypotheses (``dataset.predictions``);
  it names the models instead (``dataset.prediction_models``).
* 3: speech-free clips (empty normalized reference) are left out of WER and CER (their words were
  insertions over no reference words) and scored in ``hallucination``; added
  ``models.*.hallucination`` and per-slice ``hallucination``, gaps' ``p_value``, ``p_holm`` and
  ``significant``, and top-level ``comparisons``.
* 4: with a ``perturbations:`` block, every figure outside the ladders (``models``, ``comparisons``,
  ``dataset.n_utts`` and ``fingerprint``, and every section but ``perturbations``) covers the
  source clips only, as a run without the block (``audits/clips.py``); derived clips are counted
  under ``dataset.derived``.
* 5: intervals and tests follow one testability rule (``audits.asr.stats.check_testable``): what
  the data cannot support (fewer than two speakers in a group, no variance between speakers, too
  few models) is ``ci95: null`` with ``not_testable`` (the reason in words; ``cer_not_testable``,
  ``slope_not_testable``, ``breaking_not_testable``, ``average_not_testable`` beside their
  intervals), and its ``p_value``, ``p_holm``, ``significant`` and ``excludes_zero`` are null, never
  a zero-width interval or a p-value; a single-speaker slice is no longer resampled by utterance.
  Cohort scores are null (``cohort.not_testable``) with fewer than three models or a MAD of 0.
  Top-level ``digest``: the SHA-256 of the summary's own content (``audits.run_dir``).
"""

from __future__ import annotations

from typing import Any, TypedDict

SCHEMA_VERSION = 5


class NormalizerInfo(TypedDict):
    name: str
    version: str


class DatasetInfo(TypedDict, total=False):
    """What was scored: enough to tell two datasets apart, nothing per utterance."""

    name: str
    source: str
    reader: str
    n_utts: int
    n_shards: int
    fingerprint: str
    prediction_models: list[str]
    corpus: dict[str, Any]
    perturbations: dict[str, Any]
    """A ``perturbations:`` block's derivation (cache key, families, seed, the source fingerprint)."""
    derived: dict[str, Any]
    """Only with derived clips: ``n_utts`` derived, ``fingerprint_with_derived``, ``read_by`` (the sections
    that read them); ``n_utts`` and ``fingerprint`` above are the source clips' (``audits.clips``)."""


class FailedUnit(TypedDict, total=False):
    model: str
    shard: str | None
    reason: str | None
    kind: str | None


class VerificationFigures(TypedDict, total=False):
    """Decisions on speaker trials: a judge's answers, or an embedding backend at its threshold."""

    n_trials: int
    n_target: int
    n_nontarget: int
    accuracy: float | None
    false_accept_rate: float | None  # non-target trials accepted / non-target trials decided
    false_reject_rate: float | None  # target trials rejected / target trials decided
    threshold: float  # embedding backends only


class CompareFigures(TypedDict, total=False):
    """Relative emotion judged on rendition pairs, for one dimension (``aroused``, ``positive``)."""

    n_pairs: int
    n_with_truth: int  # pairs whose two labels both have an expected level
    n_unparseable: int
    n_scored: int
    accuracy: float | None  # right answer (A, B or same) over parsed answers with a truth
    n_ordered: int
    accuracy_ordered: float | None  # over pairs whose expected levels differ
    n_same_answers: int


class ArmFigures(TypedDict, total=False):
    """Synthetic-speech likelihood of one arm of the synthetic-voice probe."""

    n_clips: int
    n_answered: int
    n_unparseable: int
    n_failed_requests: int
    mean_likelihood: float | None
    median_likelihood: float | None


class SeparationFigures(TypedDict, total=False):
    """How well a judge's likelihood separates an arm from the real clips."""

    auc: float | None  # P(a clip of the arm scores above a real clip), ties half
    n_arm: int
    n_real: int
    paired_higher_rate: float | None  # share of the arm's clips scored above their own real clip
    n_paired: int
    what: str


class JudgeFigures(TypedDict, total=False):
    """One audio-LM judge inside an audit: ``speaker.judges.<judge>`` (task ``same_speaker``),
    ``emotion.judges.<judge>`` (``emotion_compare``), ``probes.synthetic_voice.judges.<judge>``
    (``synthetic_speech``). Unparseable answers are counted and left out of every figure."""

    kind: str  # "judge"
    judge: str
    task: str
    model_id: str | None
    status: str  # ok | unavailable | no-pairs | no-clips
    error: str
    n_items: int  # questions asked (emotion: pairs x dimensions)
    n_answered: int
    n_unparseable: int
    unparseable_rate: float | None
    unparseable_examples: list[str]  # at most 5, each cut to 120 characters
    n_failed_requests: int
    failed_requests: dict[str, str]
    facts: dict[str, Any]  # endpoint, prompts file, temperature (never the key)
    usage: dict[str, Any]  # billable calls, cache hits, tokens, unparseable per task
    rows_path: str  # per-item answers (JSON lines)
    sample: dict[str, Any]
    parsing: str
    clip_errors: dict[str, str]  # clips that could not be decoded (at most 20)
    # same_speaker: which trials were judged and how a decision reads
    n_trials_available: int
    n_trials_sampled: int
    n_trials_without_audio: int
    decision: str
    # emotion_compare: which pairs, and where the truth comes from
    n_pairs_available: int
    n_pairs_sampled: int
    n_pairs_without_audio: int
    truth: dict[str, str]
    expected_valence: dict[str, float | None] | None
    order: str
    # same_speaker: VerificationFigures fields, plus the embedding backends on the judged trials
    n_trials: int
    n_target: int
    n_nontarget: int
    accuracy: float | None
    false_accept_rate: float | None
    false_reject_rate: float | None
    on_judged_trials: dict[str, VerificationFigures]
    # emotion_compare
    dimensions: dict[str, CompareFigures]
    # synthetic_speech
    arms: dict[str, ArmFigures]
    separation: dict[str, SeparationFigures]


class Summary(TypedDict, total=False):
    """``summary.json``. Audit sections (probes, speaker, emotion, ...) add a key of their own."""

    schema_version: int
    engine_version: str
    """The audit engine's version that wrote the file (``audit --version``; added without a schema change)."""
    failures: list[FailedUnit]
    created_at: str
    recipe: dict[str, Any]
    dataset: DatasetInfo
    normalizer: NormalizerInfo
    scoring: dict[str, str]
    packages: dict[str, str]
    hardware: dict[str, Any]
    models: dict[str, dict[str, Any]]
    """Every model's figures and run facts: ``audits.asr.results.ModelFigures`` declares them (one record per model,
    its ``slices``, ``gaps`` and ``hallucination`` inside); the JSON Schema is generated from those records."""
    engine: dict[str, Any]
    comparisons: dict[str, Any]
    """The paired comparisons between models: ``audits.asr.results.Comparisons`` declares them."""
    rows: dict[str, Any]
    """``{"file": "utterances.parquet", "sha256": ..., "n_rows": ...}``: the rows this summary was scored from."""
    merged_from: list[dict[str, Any]]
    """Only in a merged report's summary: the runs it merges (``audit report RUN... --out``)."""
    sweep: dict[str, Any]
    """Only in a sweep's runs: the model selection (``audit sweep``)."""
    digest: dict[str, str]
    """``{"sha256": ..., "of": ...}``: the SHA-256 of every other key as canonical JSON (``audits.run_dir``); a reader
    refuses a summary that no longer matches it."""
