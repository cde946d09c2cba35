"""The masked-word probe's derivation as a keyed pass on the run's engine: the driver plans and writes, workers mask.

One unit per source clip (``engine.probe_workers.MaskWorker``). The driver does the text work:
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
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from audits.probes.helper_passes import EngineTimings
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
from engine.data import ProgressFn, Utterance
from engine.datasets.base import Dataset, audio_stamps
from engine.errors import AuditError
from engine.keyed_pass import KeyedPass, KeyedProgress, KeyedUnit, WorkerSpec
from engine.masking_audio import PlannedTarget
from engine.pass_engine import EngineOptions
from engine.probe_workers import clip_payload, file_sha256
from engine.unit_store import KeyedUnitStore, digest

log = logging.getLogger(__name__)

PASS = "masking"
BACKEND = "mask"
WORKER = "engine.probe_workers:MaskWorker"


def _drop_unvouched_files(store: KeyedUnitStore, audio_dir: Path, units: Iterable[KeyedUnit]) -> None:
    """A stored unit whose derived files are missing or altered loses its marker, so the pass derives it again."""
    for u in units:
        got = store.get(u.backend, u.unit, u.inputs, u.settings)
        if got is None:
            continue
        for t in got.get("targets") or []:
            bad = [c["file"] for c in t.get("clips") or [] if not (audio_dir / str(c["file"])).is_file()
                   or file_sha256(audio_dir / str(c["file"])) != c["sha256"]]
            if bad:
                log.info("masking: derived clip(s) %s of '%s' are missing or altered; the clip is derived again", bad, u.unit)
                store.marker_path(u.backend, u.unit).unlink(missing_ok=True)
                break


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
    engine = engine or EngineOptions()
    store = KeyedUnitStore(work_dir, PASS)
    audio_dir = work_dir / "audio"
    signal = signal_of(settings).to_dict()
    build = MaskBuild(out_dir)
    order: list[Skip | tuple[Utterance, list[Any], list[PlannedTarget | Skip]]] = []
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
    stamps = dict(zip((u.utt_id for u in clips), audio_stamps(clips, dataset.root)))
    KeyedUnitStore.check_names([BACKEND], list(stamps))
    units: list[KeyedUnit] = []
    for u in clips:
        targets = clip_targets(u.reference, settings)
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
        order.append((u, targets, placed))
        inputs = {"audio": list(stamps[u.utt_id]), "timings": None if result is None else digest(result), "targets": digest(planned)}
        payload = clip_payload(u, dataset.root, signal=signal, targets=planned, expect_duration_s=expect if planned else None)
        units.append(KeyedUnit(BACKEND, u.utt_id, inputs, {**signal, "format": "flac-pcm16"}, payload, float(u.duration_s or 0.0)))
    _drop_unvouched_files(store, audio_dir, units)
    worker = WorkerSpec(BACKEND, WORKER, {"out_dir": str(audio_dir.resolve())})  # actors may start in another folder
    out = engine.run_keyed([KeyedPass(store, (worker,), tuple(units))], progress=_relay(progress))
    out.raise_failed("masking derivation")
    build.facts = dict(out.facts.get((PASS, BACKEND), {}))
    derived: list[Utterance] = []
    for entry in order:
        if isinstance(entry, Skip):
            build.skipped.append(entry)
            continue
        u, targets, placed = entry
        r = out.results[(PASS, BACKEND, u.utt_id)]
        if "error" in r:
            build.skipped.append(Skip(u.utt_id, "audio-error", str(r["error"])))
            continue
        duration = float(r["duration_s"])
        skip = text_skip(u, duration, targets, settings)
        if skip is not None:
            build.skipped.append(skip)
            continue
        masks = {int(t["index"]): t for t in r["targets"]}
        n_before = len(derived)
        for p, target in zip(placed, targets):
            if isinstance(p, Skip):
                build.skipped.append(p)
                continue
            m = masks[p.index]
            if m.get("reason") is not None:
                build.skipped.append(Skip(u.utt_id, str(m["reason"]), str(m.get("detail", "")), target.text))
                continue
            for c in m["clips"]:
                derived.append(derived_utterance(u, str(c["id"]), _read(audio_dir, c), float(c["duration_s"]), c["derivation"]))
                build.derivations[str(c["id"])] = dict(c["derivation"])
                build.parents[str(c["id"])] = u.utt_id
        if len(derived) > n_before:
            build.n_clips_masked += 1
    return write_build(build, derived)


__all__ = ["derive_masked_set"]
