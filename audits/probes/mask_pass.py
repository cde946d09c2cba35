"""The masked-word probe's derivation as a keyed pass on the run's engine: the driver plans and writes, workers mask.

One unit per source clip (``engine.keyed.probe_workers.MaskWorker``). The driver does the text work:
which clips, their targets (``masking_score``), each target's word span from the stored word
timings (``place_targets``); the worker decodes the clip, refines and pads each span on the audio,
applies every variant and writes each derived clip as a FLAC file under the work folder, returning
its name, SHA-256, duration and derivation record. The driver then writes the derived Parquet
shards from those files (bytes, never decoded again) with the skips, in the dataset's order, so
the derived set is byte for byte the one :func:`audits.probes.masking.build_masked_set` writes in
one process.

A unit's marker records the clip's audio stamp, the digest of its word-timing result and of its
placed targets (``inputs``), and the audio settings (``settings``): a second run with the same
clips, timings and settings derives nothing; a stored unit whose file is missing or no longer has
its recorded SHA-256 is derived again. Every clip is a unit, also those without a target: whether
a clip decodes and how long it is decide its skip reason (``audio-error``, ``clip-too-short``)
before the text's (``no-maskable-word``), exactly as in one process.

The synthetic-voice probe's renditions go through the same worker (:func:`derive_renditions`):
each rendition comes back as the FLAC copy the derived shards hold, and those of the masking
source are masked again, so that probe's driver decodes and encodes nothing either.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audits.probes.helper_passes import Clip, EngineTimings
from audits.probes.masking import (
    MaskBuild,
    MaskSettings,
    Skip,
    clip_targets,
    derived_utterance,
    place_targets,
    signal_of,
    text_skip,
    write_build,
)
from audits.probes.masking_score import MaskTarget
from engine.audio.masking import PlannedTarget
from engine.data import ProgressFn, Utterance
from engine.datasets.base import Dataset, audio_stamps
from engine.engine import EngineOptions
from engine.errors import AuditError
from engine.keyed.keyed_pass import KeyedPass, KeyedProgress, KeyedUnit, WorkerSpec
from engine.keyed.probe_workers import clip_payload, file_sha256
from engine.keyed.unit_store import KeyedUnitStore, digest
from engine.storage import safe_name

log = logging.getLogger(__name__)

PASS = "masking"
BACKEND = "mask"
WORKER = "engine.keyed.probe_workers:MaskWorker"


def _drop_unvouched_files(store: KeyedUnitStore, audio_dir: Path, units: Iterable[KeyedUnit]) -> None:
    """A stored unit whose derived files are missing or altered loses its marker, so the pass derives it again."""
    for u in units:
        got = store.get(u.backend, u.unit, u.inputs, u.settings)
        if got is None:
            continue
        files = [c for t in got.get("targets") or [] for c in t.get("clips") or []] + ([got["source"]] if got.get("source") else [])
        bad = [
            str(c["file"])
            for c in files
            if not (audio_dir / str(c["file"])).is_file() or file_sha256(audio_dir / str(c["file"])) != c["sha256"]
        ]
        if bad:
            log.info("masking: derived file(s) %s of '%s' are missing or altered; the clip is derived again", bad, u.unit)
            store.marker_path(u.backend, u.unit).unlink(missing_ok=True)


def _relay(progress: ProgressFn | None) -> KeyedProgress | None:
    if progress is None:
        return None

    def relay(pass_name: str, n: int, info: dict[str, Any], progress: ProgressFn = progress) -> None:
        progress("probe_helper", n, {"helper": "masking", **info})

    return relay


def _read(audio_dir: Path, clip: Mapping[str, Any]) -> bytes:
    """A derived clip's bytes, refused unless they are what its worker wrote (the SHA-256 it returned)."""
    import hashlib

    path = audio_dir / str(clip["file"])
    data = path.read_bytes() if path.is_file() else b""
    if hashlib.sha256(data).hexdigest() != clip["sha256"]:
        raise AuditError(
            f"masking: the derived clip {clip['id']} is not at {path} as its worker wrote it; on a cluster of several machines "
            "the run directory must be shared storage that every worker writes to; re-run the same command"
        )
    return data


@dataclass
class _Planned:
    """One source clip's unit, with what the driver decided from the text: its targets and their placement."""

    utt: Utterance
    targets: list[MaskTarget]
    placed: list[PlannedTarget | Skip]
    unit: KeyedUnit


@dataclass
class Derived:
    """What the workers made of one source clip: its length, its own FLAC copy (when asked), masked clips and skips, in order."""

    duration_s: float | None = None
    error: str | None = None  # the clip could not be read
    source: bytes | None = None
    clips: list[tuple[str, bytes, dict[str, Any]]] = field(default_factory=list)  # (derived id, FLAC bytes, derivation)
    skips: list[Skip] = field(default_factory=list)


def _plan(
    u: Utterance, root: Path | None, audio: Any, timings: EngineTimings, settings: MaskSettings | None, source_file: str | None = None
) -> _Planned:
    """The unit of clip ``u``: its targets placed from the stored word timings (text work), what the worker reads and its marker."""
    targets = clip_targets(u.reference, settings) if settings is not None else []
    result = timings.results.get(u.utt_id) if targets else None
    placed: list[PlannedTarget | Skip] = []
    expect: float | None = None
    if targets and result is not None and "error" in result:  # unreadable: the worker's decode names the error first
        why = f"the word timings could not read the clip ({result['error']})"
        placed = [Skip(u.utt_id, "timing-unknown", why, t.text) for t in targets]
    elif targets:  # no result: nothing to align (every word unknown), the spans are unknown whatever the duration
        expect = None if result is None else float(result["duration_s"])
        placed = place_targets(u.utt_id, targets, timings.timings(u.utt_id, u.reference or "", expect or 0.0), expect or 0.0)
    planned = [p.to_dict() for p in placed if isinstance(p, PlannedTarget)]
    signal = signal_of(settings).to_dict() if settings is not None else None
    inputs = {"audio": audio, "timings": None if result is None else digest(result), "targets": digest(planned)}
    payload = clip_payload(u, root, signal=signal, targets=planned, expect_duration_s=expect if planned else None, source_file=source_file)
    unit_settings = {"signal": signal, "format": "flac-pcm16", "source_file": source_file}
    return _Planned(u, targets, placed, KeyedUnit(BACKEND, u.utt_id, inputs, unit_settings, payload, float(u.duration_s or 0.0)))


def _run(
    planned: list[_Planned], store: KeyedUnitStore, audio_dir: Path, engine: EngineOptions | None, progress: ProgressFn | None, what: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the pending units on the engine; every unit's result and the worker's facts."""
    units = [p.unit for p in planned]
    KeyedUnitStore.check_names([BACKEND], [u.unit for u in units])
    _drop_unvouched_files(store, audio_dir, units)
    worker = WorkerSpec(BACKEND, WORKER, {"out_dir": str(audio_dir.resolve())})  # actors may start in another folder
    out = (engine or EngineOptions()).run_keyed([KeyedPass(store, (worker,), tuple(units))], progress=_relay(progress))
    out.raise_failed(what)
    results = {u.unit: out.results[(store.pass_name, BACKEND, u.unit)] for u in units}
    return results, dict(out.facts.get((store.pass_name, BACKEND), {}))


def _outcome(p: _Planned, r: Mapping[str, Any], settings: MaskSettings | None, audio_dir: Path) -> Derived:
    """A unit's result read back: skips in the order one process finds them, derived clips' bytes checked against their SHA-256."""
    u = p.utt
    if "error" in r:
        return Derived(error=str(r["error"]))
    d = Derived(duration_s=float(r["duration_s"]))
    if r.get("source"):
        d.source = _read(audio_dir, {"id": u.utt_id, **dict(r["source"])})
    if settings is None:
        return d
    skip = text_skip(u, d.duration_s or 0.0, p.targets, settings)
    if skip is not None:
        d.skips.append(skip)
        return d
    masks = {int(t["index"]): t for t in r["targets"]}
    for placed, target in zip(p.placed, p.targets):
        if isinstance(placed, Skip):
            d.skips.append(placed)
            continue
        m = masks[placed.index]
        if m.get("reason") is not None:
            d.skips.append(Skip(u.utt_id, str(m["reason"]), str(m.get("detail", "")), target.text))
            continue
        for c in m["clips"]:
            d.clips.append((str(c["id"]), _read(audio_dir, c), dict(c["derivation"])))
    return d


def derive_masked_set(
    dataset: Dataset,
    timings: EngineTimings,
    settings: MaskSettings,
    out_dir: Path,
    work_dir: Path,
    engine: EngineOptions | None = None,
    progress: ProgressFn | None = None,
) -> MaskBuild:
    """Mask every clip of ``dataset`` on the engine's workers into Parquet shards under ``out_dir``.

    ``timings`` is the probe's ``EngineTimings`` with the timings of ``clips_needing_timings``
    computed; units, markers and the workers' files live under ``work_dir``.
    """
    store = KeyedUnitStore(work_dir, PASS)
    audio_dir = work_dir / "audio"
    build = MaskBuild(out_dir)
    order: list[Skip | _Planned] = []
    clips: list[Utterance] = []
    for shard in dataset.iter_shards():
        for u in shard.utterances:
            if (u.derivation or {}).get("probe"):  # probe audio is never re-masked
                continue
            build.n_clips += 1
            if u.problem:
                order.append(Skip(u.utt_id, "audio-error", u.problem))
                continue
            clips.append(u)
    planned: list[_Planned] = []
    for u, stamp in zip(clips, audio_stamps(clips, dataset.root)):
        planned.append(_plan(u, dataset.root, list(stamp), timings, settings))
        order.append(planned[-1])
    results, build.facts = _run(planned, store, audio_dir, engine, progress, "masking derivation")
    derived: list[Utterance] = []
    for entry in order:
        if isinstance(entry, Skip):
            build.skipped.append(entry)
            continue
        d = _outcome(entry, results[entry.utt.utt_id], settings, audio_dir)
        if d.error is not None:
            build.skipped.append(Skip(entry.utt.utt_id, "audio-error", d.error))
            continue
        build.skipped.extend(d.skips)
        for uid, data, derivation in d.clips:
            derived.append(derived_utterance(entry.utt, uid, data, d.duration_s or 0.0, derivation))
            build.derivations[uid] = derivation
            build.parents[uid] = entry.utt.utt_id
        if d.clips:
            build.n_clips_masked += 1
    return write_build(build, derived)


def derive_renditions(
    renditions: Sequence[tuple[Clip, bool]],
    timings: EngineTimings,
    settings: MaskSettings | None,
    work_dir: Path,
    engine: EngineOptions | None = None,
    progress: ProgressFn | None = None,
) -> tuple[dict[str, Derived], dict[str, Any]]:
    """The synthetic-voice probe's renditions on the engine's workers: each one's FLAC copy, and masked clips for those marked.

    A rendition marked ``True`` is masked like a dataset clip (its timings in ``timings``); every
    rendition comes back encoded as the derived shards hold it, so the driver decodes nothing.
    """
    planned = [
        _plan(c.utt, c.root, c.inputs(), timings, settings if mask else None, f"{safe_name(c.unit)}.source.flac") for c, mask in renditions
    ]
    if not planned:
        return {}, {}
    audio_dir = work_dir / "audio"
    results, facts = _run(planned, KeyedUnitStore(work_dir, "synthetic_masking"), audio_dir, engine, progress, "synthetic_voice derivation")
    out: dict[str, Derived] = {}
    for (c, mask), p in zip(renditions, planned):
        d = _outcome(p, results[c.unit], settings if mask else None, audio_dir)
        if d.error is not None or d.source is None:
            raise AuditError(f"synthetic_voice: the rendition {c.unit} cannot be read ({d.error}); re-run the same command")
        out[c.unit] = d
    return out, facts


__all__ = ["Derived", "derive_masked_set", "derive_renditions"]
