"""The conversation audit: long recordings through VAD segmentation, ASR, and diarization, scored
with WER (long-form), cpWER / tcpWER (speaker-attributed) and DER / JER.

Written as the four steps of an audit section, so a section plug-in can call them:
:func:`parse_conversation_config` (before any model loads), :func:`run_conversation` (writes
under ``<run>/conversation/`` and resumes), :func:`conversation_summary` (the dict for
``summary.json``) and :func:`markdown_lines` / :func:`html_section` (the report parts).

Two ASR passes per model, both through :mod:`engine.audio.segmentation`:

- **long-form**: Silero VAD chunks, stitched per recording, scored as one text per recording
  against the reference turns in onset order (WER);
- **speaker-attributed**: the diarization's turns are the chunks (a turn longer than the chunk
  limit is split); each chunk's text belongs to the turn's speaker, giving a hypothesis SegLST
  scored against the per-speaker reference (cpWER, tcpWER).

Diarization runs once per recording (it does not depend on the ASR model). Every result is a
unit of the engine's keyed unit store (``engine/keyed/unit_store.py``): one JSON result per (pass,
backend, recording) under hashed safe names, with a marker recording the unit's inputs (the
recording's audio stamp; for diarization with ``oracle_speakers`` the reference speaker count;
for ASR the digest of the diarization turns it transcribed) and settings. A re-run reuses a unit
only when its marker matches exactly; a changed audio file, reference speaker count, diarization
or setting recomputes it, and scoring refuses any result its marker does not vouch for.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from audits.conversation.metrics import (
    DEFAULT_COLLAR_S,
    DEFAULT_SKIP_OVERLAP,
    DEFAULT_TCP_COLLAR_S,
    cpwer,
    diarization_scores,
    pool,
    pool_diarization,
    scoring_notes,
    tcpwer,
)
from audits.conversation.readers import (
    Annotations,
    Segment,
    check_durations,
    check_recordings,
    check_speakers,
    iter_json_lines,
    read_annotations,
)
from audits.conversation.results import (
    AnnotationProblems,
    ConversationDataset,
    ConversationModelFigures,
    ConversationResult,
    DiarizationFigures,
    DiarizationScores,
    LongFormFigures,
    SpeakerWerFigures,
    WholeRecordingWer,
)
from audits.records import freeze
from engine.audio.decoding import inspect as inspect_audio
from engine.audio.segmentation import Chunk, SegmentationConfig, stitch
from engine.data import Utterance
from engine.datasets.base import file_stamp
from engine.engine import EngineOptions
from engine.errors import AudioError, AuditError, ConfigError, ManifestError, RegistryError
from engine.keyed.keyed_pass import KeyedPass, KeyedUnit, WorkerSpec
from engine.keyed.unit_store import KeyedUnitStore, digest
from engine.options import Field, Options, check_value, option
from engine.run.passes import split_placement

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DiarizationBlock(Options):
    """``diarization: {backend: NAME, options: {...}}`` (a bare name stands for ``{backend: NAME}``)."""

    backend: str = option(doc="a diarizer name (DIAR_BACKENDS)")
    options: dict[str, Any] = option({}, "the diarizer's options, typed per diarizer", null_default=True)


def _diarizer(value: Any, where: str) -> tuple[str, dict[str, Any], dict[str, float]]:
    """The diarizer's name, its options (as written, less placement) and its actor placement; its typed
    options are checked now rather than when it loads."""
    block = DiarizationBlock.parse(value, where) if isinstance(value, Mapping) else DiarizationBlock(check_value(str, value, where))
    from engine.backends import DIAR_BACKENDS

    try:
        diar_cls: Any = DIAR_BACKENDS.get(block.backend)  # unknown names fail here, with suggestions
    except RegistryError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    # placement (num_gpus, num_cpus, memory_mb) sizes the diarizer's Ray actor; it is no diarizer
    # setting, so it never reaches the diarizer nor the units' settings digest
    opts, placement = split_placement(dict(block.options), f"{where}.options")
    if diar_cls.OPTIONS is not None:
        diar_cls.OPTIONS.parse(opts, f"{where}.options")
    return block.backend, opts, placement


def _normalizer_name(name: str, where: str) -> str:
    from audits.normalizing import NORMALIZERS

    try:
        NORMALIZERS.check(name)
    except RegistryError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return name


@dataclass(frozen=True)
class ConversationConfig(Options):
    """The ``conversation:`` block of a recipe (diarization and speaker-attributed WER of multi-speaker recordings)."""

    dataset: str = option(
        "builtin:demo-conversation", "the conversation set's folder, 'dataset' (the recipe's own) or builtin:demo-conversation"
    )
    segmentation: SegmentationConfig = option(
        SegmentationConfig(),
        "VAD segmentation (the segmentation table below)",
        accepts=dict[str, Any],
        parse=SegmentationConfig.from_mapping,
        null_default=True,
        doc_default=None,
    )
    diarization: str = option(
        "vad-resemblyzer",
        "a diarizer name, or {backend: NAME, options: {...}} (options typed per diarizer)",
        kind_doc="text or mapping",
        accepts=Any,
        parse=lambda value, where: _diarizer(value, where)[0],
    )
    diarization_options: Mapping[str, Any] = field(default_factory=dict)
    diarization_placement: Mapping[str, float] = field(default_factory=dict)  # num_gpus, num_cpus, memory_mb of its Ray actor
    collar: float = option(DEFAULT_COLLAR_S, "DER collar in seconds each side of a reference boundary", ge=0, le=10)
    skip_overlap: bool = option(DEFAULT_SKIP_OVERLAP, "leave overlapped speech out of DER")
    tcp_collar: float = option(DEFAULT_TCP_COLLAR_S, "tcpWER collar in seconds", ge=0, le=600)
    slices: tuple[str, ...] = option(("n_speakers", "background"), "manifest label names to slice by")
    oracle_speakers: bool = option(False, "give the diarizer the reference speaker count")
    normalizer: str = option("whisper-english", "text normalizer applied before scoring", parse=_normalizer_name)


CONFIG_FIELDS: dict[str, Field] = ConversationConfig.declared()
"""The ``conversation:`` keys, typed and bounded; docs/datasets.md lists them."""


def parse_conversation_config(raw: Any, source: str) -> ConversationConfig:
    """Validate the recipe block through the typed option layer: unknown keys, ``"false"`` for a
    boolean, NaN or negative collars, bad segmentation (``pad_s`` against ``max_chunk_s``) and the
    diarizer's own options are refused here, naming the file and key, before anything runs."""
    where = f"{source}: conversation"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(raw).__name__}")
    cfg = ConversationConfig.parse(raw, where)
    _, options, placement = _diarizer(raw.get("diarization", cfg.diarization), f"{where}.diarization")
    return cfg.replace(diarization_options=options, diarization_placement=placement)


@dataclass
class ConversationData:
    """Recordings (id -> audio path, duration, labels) with their checked references."""

    root: Path
    recordings: dict[str, dict[str, Any]]
    reference: Annotations  # per-speaker transcripts (SegLST / STM / NeMo offsets)
    turns: Annotations  # speaker turns (RTTM), for DER
    problems: list[str]
    fingerprint: str


def resolve_dataset(spec: str, data_dir: Path) -> Path:
    """``builtin:demo-conversation`` -> built (on first use) under ``data_dir/conversation``."""
    if spec.startswith("builtin:"):
        name = spec.split(":", 1)[1]
        if name != "demo-conversation":
            raise ConfigError(f"unknown built-in conversation set '{name}' (known: demo-conversation)")
        from audits.demo_data import ensure_conversation_set

        return ensure_conversation_set(data_dir / "conversation")  # a set the user built there is refused, never overwritten
    return Path(spec)


def load_conversation_data(root: Path) -> ConversationData:
    """Read ``manifest.jsonl`` (one recording per line: audio_filepath, duration, labels),
    ``reference.rttm`` and the per-speaker transcript (``reference.json`` SegLST, or
    ``reference.stm``), and cross-check them: every annotated recording must exist, no
    annotation may run past its audio, transcript speakers must appear in the RTTM."""
    manifest = root / "manifest.jsonl"
    if not manifest.exists():
        raise ManifestError(manifest, "missing: a conversation set needs manifest.jsonl, reference.rttm and reference.json (or .stm)")
    recordings: dict[str, dict[str, Any]] = {}
    for n, row in iter_json_lines(manifest):
        if "audio_filepath" not in row:
            raise ManifestError(manifest, "each line needs audio_filepath", line=n, field="audio_filepath")
        audio = Path(str(row["audio_filepath"]))
        audio = audio if audio.is_absolute() else root / audio
        if not audio.exists():
            raise ManifestError(manifest, f"audio file {audio} does not exist", line=n, field="audio_filepath")
        rec = str(row.get("id") or audio.stem)
        if rec in recordings:
            raise ManifestError(manifest, f"recording id '{rec}' appears twice", line=n)
        try:  # the rule every section applies to audio (engine.audio.decoding.read_header): channels, rate, length, container
            info = inspect_audio(Utterance(rec, None, audio_path=str(audio)))
        except AudioError as exc:
            raise ManifestError(manifest, f"recording '{rec}' ({audio}): {exc}", line=n, field="audio_filepath") from None
        recordings[rec] = {
            "path": str(audio),
            "duration": info.duration_s,
            "labels": {k: v for k, v in row.items() if k not in ("audio_filepath", "text")},
        }
    turns = read_annotations(root / "reference.rttm")
    ref_path = root / "reference.json" if (root / "reference.json").exists() else root / "reference.stm"
    reference = read_annotations(ref_path)
    durations = {k: v["duration"] for k, v in recordings.items()}
    for ann, name in ((turns, "reference.rttm"), (reference, ref_path.name)):
        check_recordings(ann, recordings, name)
        check_durations(ann, durations)
    check_speakers(reference, turns.speakers(), ref_path.name)
    h = hashlib.sha256()
    for s in sorted(reference.segments, key=lambda s: (s.session_id, s.start, s.speaker)):
        h.update(f"{s.session_id}|{s.speaker}|{s.start:.3f}|{s.end:.3f}|{s.words}\n".encode())
    return ConversationData(root, recordings, reference, turns, turns.problems + reference.problems, h.hexdigest()[:16])


def _stores(out: Path) -> tuple[KeyedUnitStore, KeyedUnitStore]:
    """The diarization and ASR passes' keyed unit stores under ``out/conversation``."""
    base = out / "conversation"
    return KeyedUnitStore(base, "diarization"), KeyedUnitStore(base, "asr")


def _diar_key(cfg: ConversationConfig, data: ConversationData, rec: str, stamp: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(inputs, settings)`` of a recording's diarization unit: what the diarizer reads and how it runs."""
    inputs: dict[str, Any] = {"audio": list(stamp)}
    if cfg.oracle_speakers:  # the reference's speaker count is an input only when it is given to the diarizer
        inputs["num_speakers"] = len(data.turns.speakers().get(rec, ()))
    return inputs, {"backend": cfg.diarization, "options": dict(cfg.diarization_options), "oracle_speakers": cfg.oracle_speakers}


def _asr_key(cfg: ConversationConfig, spec: Any, stamp: Sequence[str], diar: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(inputs, settings)`` of a (model, recording) ASR unit: the audio and the diarization turns it transcribed."""
    inputs = {"audio": list(stamp), "diarization": digest(diar.get("turns"))}
    settings = {"backend": spec.backend, "options": dict(spec.options), "segmentation": cfg.segmentation.as_dict()}
    return inputs, settings


def _stamps(data: ConversationData) -> dict[str, tuple[str, str]]:
    return {r: file_stamp(Path(v["path"])) for r, v in data.recordings.items()}


def _turn_plans(turns: Sequence[Mapping[str, Any]], cfg: SegmentationConfig) -> list[tuple[float, float, str]]:
    """Diarization turns as ASR chunks: consecutive turns of one speaker merge up to the chunk
    limit, longer turns are split."""
    out: list[list[Any]] = []
    for t in sorted(turns, key=lambda t: t["start"]):
        s, e, spk = float(t["start"]), float(t["end"]), str(t["speaker"])
        if out and out[-1][2] == spk and e - out[-1][0] <= cfg.max_chunk_s and s - out[-1][1] < 1.0:
            out[-1][1] = max(out[-1][1], e)
            continue
        while e - s > cfg.max_chunk_s:
            out.append([s, s + cfg.max_chunk_s, spk])
            s += cfg.max_chunk_s
        out.append([s, e, spk])
    return [(float(a), float(b), str(c)) for a, b, c in out]


def run_conversation(
    cfg: ConversationConfig,
    data: ConversationData,
    specs: Sequence[Any],
    out: Path,
    progress: Callable[[str, int, dict[str, Any]], None] | None = None,
    engine: EngineOptions | None = None,
) -> dict[str, Any]:
    """Run diarization and both ASR passes for every model on the run's engine, writing under
    ``out/conversation``; returns the facts per pass (runner, placement, backend info, pending units).

    Both steps are keyed passes (``engine/keyed/keyed_pass.py``): the driver plans and stores, the
    workers (in this process, or Ray actors with ``--engine ray``) read the audio and run the
    models. A (pass, backend, recording) unit whose marker matches its current inputs and settings
    is reused; every other unit is computed. Diarization goes first because the ASR units
    transcribe its turns; within each step the longest recordings go first across all backends.
    """
    engine = engine or EngineOptions()
    diar_store, asr_store = _stores(out)
    KeyedUnitStore.check_names([cfg.diarization, *(s.name for s in specs)], data.recordings)  # a/b and a_b never share a file
    stamps = _stamps(data)
    seconds = {r: float(v.get("duration") or 0.0) for r, v in data.recordings.items()}
    # 1. diarization, once per recording
    diar_keys = {r: _diar_key(cfg, data, r, stamps[r]) for r in data.recordings}
    diar_pass = KeyedPass(
        diar_store,
        (
            WorkerSpec(
                cfg.diarization,
                "engine.keyed.keyed_workers:DiarizeWorker",
                {"backend": cfg.diarization, "options": dict(cfg.diarization_options)},
                dict(cfg.diarization_placement),
                gpu_capable=True,
            ),
        ),
        tuple(
            KeyedUnit(
                cfg.diarization,
                r,
                *diar_keys[r],
                {"recording": r, "path": data.recordings[r]["path"], "num_speakers": diar_keys[r][0].get("num_speakers")},
                seconds[r],
            )
            for r in data.recordings
        ),
    )
    done = engine.run_keyed([diar_pass], progress=_relay(progress, "diarized", "recording"))
    done.raise_failed("conversation diarization")
    facts: dict[str, Any] = {"diarization": {"backend": cfg.diarization, "pending": 0}}
    for (_, name), f in done.facts.items():
        facts["diarization"].update(f)
    diarized = {r: done.results[(diar_store.pass_name, cfg.diarization, r)] for r in data.recordings}
    # 2. ASR passes: every model's units in one round, longest recordings first
    workers, units = [], []
    for spec in specs:
        keys = {r: _asr_key(cfg, spec, stamps[r], diarized[r]) for r in data.recordings}
        workers.append(
            WorkerSpec(
                spec.name,
                "engine.keyed.keyed_workers:LongformWorker",
                {"spec": spec, "segmentation": cfg.segmentation.as_dict()},
                dict(spec.meta),
                gpu_capable=True,
            )
        )
        units += [
            KeyedUnit(
                spec.name,
                r,
                *keys[r],
                {
                    "recording": r,
                    "path": data.recordings[r]["path"],
                    "turns": [list(t) for t in _turn_plans(diarized[r]["turns"], cfg.segmentation)],
                },
                seconds[r],
            )
            for r in data.recordings
        ]
    asr_done = engine.run_keyed([KeyedPass(asr_store, tuple(workers), tuple(units))], progress=_relay(progress, "transcribed", "model"))
    for spec in specs:
        facts.setdefault("pending", {})[spec.name] = asr_done.facts.get((asr_store.pass_name, spec.name), {}).get("pending", 0)
        if (asr_store.pass_name, spec.name) in asr_done.facts:
            facts[spec.name] = asr_done.facts[(asr_store.pass_name, spec.name)]
    asr_done.raise_failed("conversation ASR")
    return facts


def _relay(
    progress: Callable[[str, int, dict[str, Any]], None] | None, what: str, field_name: str
) -> Callable[[str, int, dict[str, Any]], None] | None:
    """The section's progress lines from the keyed pass's (``diarized``/``transcribed`` with the recording or model)."""
    if progress is None:
        return None

    def relay(_pass: str, n: int, info: dict[str, Any]) -> None:
        shown = {"recording": info["unit"]} if field_name == "recording" else {"model": info["backend"], "recording": info["unit"]}
        progress(what, n, shown)

    return relay


def _reference_text(segments: Sequence[Segment]) -> str:
    return " ".join(s.words for s in sorted(segments, key=lambda s: (s.start, s.speaker)))


def conversation_summary(
    cfg: ConversationConfig,
    data: ConversationData,
    models: Sequence[Any],
    out: Path,
    normalize: Callable[[str], str],
    facts: Mapping[str, Any] | None = None,
    whole: Mapping[str, Mapping[str, tuple[str, str]]] | None = None,
) -> tuple[ConversationResult, list[dict[str, Any]]]:
    """The section's figures as records (per model: WER, cpWER, tcpWER, RTFx, and per slice; the
    diarization's DER and JER; ``summary.json`` holds their ``to_json()``) and the per-recording rows
    (written to ``conversation/recordings.csv`` by the caller, never into summary.json).

    ``models`` are the model specs ``run_conversation`` ran: every result read here must be
    vouched for by its marker under the current inputs and settings, else ``ResultIntegrityError``."""
    from audits.asr.align import edit_counts

    diar_store, asr_store = _stores(out)
    stamps = _stamps(data)
    ref_by = data.reference.by_session()
    durations = {k: v["duration"] for k, v in data.recordings.items()}
    diarized = {r: diar_store.require(cfg.diarization, r, *_diar_key(cfg, data, r, stamps[r])) for r in data.recordings}
    hyp_turns = [Segment(rec, t["speaker"], t["start"], t["end"]) for rec in data.recordings for t in diarized[rec]["turns"]]
    dscores = diarization_scores(data.turns.segments, hyp_turns, durations, cfg.collar, cfg.skip_overlap)
    diar_s = sum(float(diarized[r]["seconds"]) for r in data.recordings)
    audio_s = sum(durations.values())
    rows: list[dict[str, Any]] = []
    slice_keys = [
        (k, str(data.recordings[r]["labels"].get(k))) for r in data.recordings for k in cfg.slices if k in data.recordings[r]["labels"]
    ]

    def group(recs: Sequence[str]) -> DiarizationScores:
        return DiarizationScores(**pool_diarization([dscores[r] for r in recs]).as_dict())

    diar_summary = DiarizationFigures(
        backend=cfg.diarization,
        options=freeze(dict(cfg.diarization_options)),
        rtfx=audio_s / diar_s if diar_s else None,
        **group(list(data.recordings)).to_json(),
        # backend info, runner and (on Ray) each actor's placement
        facts=freeze(facts["diarization"]) if facts and facts.get("diarization") else None,
        slices=MappingProxyType(
            {
                f"{k}={v}": group([r for r in data.recordings if str(data.recordings[r]["labels"].get(k)) == v])
                for k, v in sorted(set(slice_keys))
            }
        ),
    )
    per_model: dict[str, ConversationModelFigures] = {}
    for spec in models:
        model = spec.name
        stored = {r: asr_store.require(model, r, *_asr_key(cfg, spec, stamps[r], diarized[r])) for r in data.recordings}
        hyp = [Segment(r, c["speaker"], c["start"], c["end"], c["text"]) for r, st in stored.items() for c in st["attributed"]]
        cp = cpwer(data.reference.segments, hyp, normalize)
        tcp = tcpwer(data.reference.segments, hyp, cfg.tcp_collar, normalize)
        lf: dict[str, tuple[int, int]] = {}
        for r, st in stored.items():
            hyp_text = normalize(stitch([Chunk(c["start"], c["end"], c["text"]) for c in st["longform"]])).split()
            ref_text = normalize(_reference_text(ref_by.get(r, []))).split()
            ec = edit_counts(ref_text, hyp_text)
            lf[r] = (ec.errors, ec.n_ref)
            rows.append(
                {
                    "model": model,
                    "recording": r,
                    "duration_s": durations[r],
                    "wer": ec.errors / ec.n_ref if ec.n_ref else None,
                    "cpwer": cp[r].rate,
                    "tcpwer": tcp[r].rate,
                    "der": dscores[r].der,
                    "jer": dscores[r].jer,
                    "n_chunks": len(st["longform"]),
                    **{k: data.recordings[r]["labels"].get(k) for k in cfg.slices},
                }
            )

        def figures(recs: Sequence[str]) -> dict[str, Any]:
            errs, n = sum(lf[r][0] for r in recs), sum(lf[r][1] for r in recs)
            a_s = sum(durations[r] for r in recs)
            inf = sum(stored[r]["infer_longform_s"] + stored[r]["vad_s"] for r in recs)
            return {
                "n_recordings": len(recs),
                "audio_s": round(a_s, 3),
                "wer": errs / n if n else None,
                "word_errors": errs,
                "n_words": n,
                "cpwer": SpeakerWerFigures(**pool(cp[r] for r in recs).as_dict()),
                "tcpwer": SpeakerWerFigures(**pool(tcp[r] for r in recs).as_dict()),
                "infer_s": round(inf, 3),
                "rtfx": a_s / inf if inf else None,
            }

        slices = {
            f"{k}={v}": LongFormFigures(**figures([r for r in data.recordings if str(data.recordings[r]["labels"].get(k)) == v]))
            for k, v in sorted(set(slice_keys))
        }
        per_model[model] = ConversationModelFigures(
            **figures(list(data.recordings)),
            slices=MappingProxyType(slices),
            n_chunks=sum(len(st["longform"]) for st in stored.values()),
            whole_recording=whole_recording_wer(whole[model], normalize) if whole and whole.get(model) else None,
            backend_info=freeze(facts[model]) if facts and model in facts else None,
        )
    result = ConversationResult(
        dataset=ConversationDataset(str(data.root), len(data.recordings), round(audio_s, 3), data.fingerprint),
        segmentation=freeze(cfg.segmentation.as_dict()),
        scoring=freeze(
            {
                **scoring_notes(cfg.collar, cfg.skip_overlap, cfg.tcp_collar),
                "wer": "long-form: VAD chunks stitched per recording vs reference turns in onset order; pooled counts",
                "whole_recording": "the ASR section's rows (each recording sent whole as one clip), same normalizer, pooled counts",
                "rtfx": "audio seconds / (VAD + long-form inference seconds)",
            }
        ),
        attribution="ASR on diarization turns (consecutive same-speaker turns merged up to max_chunk_s); each chunk's words belong to "
        "its turn's speaker",
        diarization=diar_summary,
        models=MappingProxyType(per_model),
        problems=AnnotationProblems(len(data.problems), tuple(data.problems[:10])),
    )
    return result, rows


def whole_recording_wer(pairs: Mapping[str, tuple[str, str]], normalize: Callable[[str], str]) -> WholeRecordingWer:
    """WER of the ASR section's rows, where each whole recording went to the model as one clip
    (``pairs``: recording -> (reference, hypothesis)): the short-form baseline that long-form
    segmentation is compared with."""
    from audits.asr.align import edit_counts

    errs = n = 0
    for ref, hyp in pairs.values():
        ec = edit_counts(normalize(ref).split(), normalize(hyp or "").split())
        errs, n = errs + ec.errors, n + ec.n_ref
    return WholeRecordingWer(errs / n if n else None, errs, n, len(pairs))


def _rtfx(x: Any) -> str:
    return "—" if x is None else f"{float(x):.1f}"


def _pct(x: Any) -> str:
    return "—" if x is None else f"{100 * float(x):.1f}"


def _wer(x: SpeakerWerFigures | WholeRecordingWer | None) -> float | None:
    return None if x is None else x.wer


_Parts = tuple[ConversationDataset, DiarizationFigures, Mapping[str, ConversationModelFigures], AnnotationProblems]


def _parts(result: ConversationResult) -> _Parts:
    """The figures both report parts show (``AuditError`` when the result lacks one: a section cut short)."""
    if result.dataset is None or result.diarization is None or result.models is None or result.problems is None:
        raise AuditError("conversation: the result lacks its dataset, diarization, models or problems; run the section again")
    return result.dataset, result.diarization, result.models, result.problems


def markdown_lines(result: ConversationResult) -> list[str]:
    """The report.md part: one table per model set, one diarization line, slices. Every name,
    label value and problem text passes the reports' Markdown escaping."""
    from audits.reports.formatting import md

    ds, d, models, problems = _parts(result)
    seg, scoring = result.segmentation or {}, result.scoring or {}
    lines = [
        "## Conversation (long-form and speaker-attributed)",
        "",
        f"{ds.n_recordings} recordings, {ds.audio_s / 60:.1f} min. "
        f"Segmentation: Silero VAD, chunks up to {seg['max_chunk_s']} s, pad {seg['pad_s']} s. "
        f"Diarization: {md(d.backend)}, DER {_pct(d.der)} % (missed {d.missed_s:.1f} s, false alarm {d.false_alarm_s:.1f} s, "
        f"confusion {d.confusion_s:.1f} s of {d.scored_s:.1f} s), JER {_pct(d.jer)} %. {md(scoring['der'])}.",
        "",
        "| model | long-form WER % | whole-recording WER % | cpWER % | tcpWER % | DER % | RTFx |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, m in models.items():
        lines.append(
            f"| {md(name)} | {_pct(m.wer)} | {_pct(_wer(m.whole_recording))} | {_pct(_wer(m.cpwer))} | {_pct(_wer(m.tcpwer))} "
            f"| {_pct(d.der)} | {_rtfx(m.rtfx)} |"
        )
    lines += ["", "| model | slice | WER % | cpWER % | DER % |", "| --- | --- | ---: | ---: | ---: |"]
    for name, m in models.items():
        for key, s in m.slices.items():
            lines.append(f"| {md(name)} | {md(key)} | {_pct(s.wer)} | {_pct(_wer(s.cpwer))} | {_pct(d.slices[key].der)} |")
    if problems.count:
        lines += [
            "",
            f"Annotation problems ({problems.count}, kept and scored):",
            *[f"- {md(p)}" for p in problems.examples],
        ]
    return lines + [""]


def html_section(result: ConversationResult) -> str:
    """The report.html part: the same tables, every text through the reports' HTML escaping."""
    from audits.reports.formatting import esc

    ds, d, models, problems = _parts(result)
    rows = "".join(
        f"<tr><td>{esc(n)}</td><td>{_pct(m.wer)}</td><td>{_pct(_wer(m.whole_recording))}</td>"
        f"<td>{_pct(_wer(m.cpwer))}</td><td>{_pct(_wer(m.tcpwer))}</td>"
        f"<td>{_pct(d.der)}</td><td>{_rtfx(m.rtfx)}</td></tr>"
        for n, m in models.items()
    )
    slices = "".join(
        f"<tr><td>{esc(n)}</td><td>{esc(k)}</td><td>{_pct(s.wer)}</td><td>{_pct(_wer(s.cpwer))}</td><td>{_pct(d.slices[k].der)}</td></tr>"
        for n, m in models.items()
        for k, s in m.slices.items()
    )
    listed = "".join(f"<li>{esc(p)}</li>" for p in problems.examples)
    return (
        f"<p>{ds.n_recordings} recordings; diarization {esc(d.backend)}: "
        f"DER {_pct(d.der)} %, JER {_pct(d.jer)} %. {esc((result.scoring or {})['der'])}.</p>"
        "<table><tr><th>model</th><th>long-form WER %</th><th>whole-recording WER %</th><th>cpWER %</th><th>tcpWER %</th><th>DER %</th><th>"
        "RTFx</th></tr>"
        f"{rows}</table><table><tr><th>model</th><th>slice</th><th>WER %</th><th>cpWER %</th><th>DER %</th></tr>{slices}</table>"
        + (f"<p>Annotation problems ({problems.count}, kept and scored):</p><ul>{listed}</ul>" if listed else "")
    )


def write_recordings_csv(rows: Sequence[Mapping[str, Any]], out: Path) -> Path:
    """Per-recording figures beside the run (summary.json stays size-independent of the data)."""
    import pandas as pd

    path = out / "conversation" / "recordings.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(list(rows)).to_csv(path, index=False)
    return path
