"""Runs speaker-verification (SV) and speech-emotion (SER) backends over a dataset's shards.

The unit of work is ``(backend, shard)``, as for ASR: a shard is decoded once for every pending
backend (``engine.runner.decode_shard``), each backend processes it in batches, and the unit is
written atomically as one Parquet part plus a marker holding its row count:

* SV:  ``DIR/embeddings/<backend>/<shard>.parquet`` -- ``utt_id, embedding (list<float32>),
  error, duration_s, infer_s, shard``
* SER: ``DIR/emotion/<backend>/<shard>.parquet`` -- ``utt_id, posteriors, dimensions,
  descriptors (JSON text), error, duration_s, infer_s, shard``
* markers: ``DIR/markers-embed/{sv,ser}/<backend>/<shard>.json``; facts per backend under
  ``DIR/models-embed/{sv,ser}/<backend>.json``

A unit is done only when its marker and part agree, so ``resume`` never recomputes finished units
and never keeps half-written ones; when every unit of a backend is done the backend is not even
loaded. A clip that cannot be embedded (too short, silent, undecodable) becomes a row with its
error; a backend that cannot load (``BackendUnavailable``) is reported in the returned facts and
the other backends go on. This module stores raw outputs only; scoring lives in ``audits``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine.backends import SER_BACKENDS, SV_BACKENDS
from engine.backends.base import EmotionOutput, SERBackend, SVBackend
from engine.backends.hosted.scrub import error_text, scrub, scrubber
from engine.data import SAMPLE_RATE, DecodedAudio, DecodeOptions, ProgressFn, Shard, Utterance
from engine.datasets.base import Dataset
from engine.errors import AuditError, BackendUnavailable, ConfigError
from engine.runner import decode_shard
from engine.store import atomic_write_text, safe_name

log = logging.getLogger(__name__)

KINDS = ("sv", "ser")
PART_DIRS = {"sv": "embeddings", "ser": "emotion"}
MARKER_DIR = "markers-embed"
FACTS_DIR = "models-embed"


SV_SCHEMA = pa.schema(
    [
        ("utt_id", pa.string()),
        ("embedding", pa.list_(pa.float32())),
        ("error", pa.string()),
        ("duration_s", pa.float64()),
        ("infer_s", pa.float64()),
        ("shard", pa.string()),
    ]
)
SER_SCHEMA = pa.schema(
    [
        ("utt_id", pa.string()),
        ("posteriors", pa.string()),
        ("dimensions", pa.string()),
        ("descriptors", pa.string()),
        ("error", pa.string()),
        ("duration_s", pa.float64()),
        ("infer_s", pa.float64()),
        ("shard", pa.string()),
    ]
)


@dataclass(frozen=True)
class EmbedSpec:
    """One SV or SER backend to run: ``name`` keys its outputs, ``backend`` is the registry name."""

    name: str
    backend: str
    kind: str = "sv"
    options: Mapping[str, Any] = field(default_factory=dict)
    batch_size: int = 16

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"backend '{self.name}': kind must be one of {KINDS}, got {self.kind!r}")
        if self.batch_size < 1:
            raise ConfigError(f"backend '{self.name}': batch_size must be >= 1, got {self.batch_size}")

    def registry(self) -> Any:
        return SV_BACKENDS if self.kind == "sv" else SER_BACKENDS


# --------------------------------------------------------------------------------------------
# Store
# --------------------------------------------------------------------------------------------


class EmbedStore:
    """Parts, markers and facts of SV/SER units under one run directory."""

    def __init__(self, out_dir: Path | str) -> None:
        self.root = Path(out_dir)

    def part_path(self, kind: str, name: str, shard_id: str) -> Path:
        return self.root / PART_DIRS[kind] / safe_name(name) / f"{safe_name(shard_id)}.parquet"

    def marker_path(self, kind: str, name: str, shard_id: str) -> Path:
        return self.root / MARKER_DIR / kind / safe_name(name) / f"{safe_name(shard_id)}.json"

    def facts_path(self, kind: str, name: str) -> Path:
        return self.root / FACTS_DIR / kind / f"{safe_name(name)}.json"

    def is_done(self, kind: str, name: str, shard_id: str) -> bool:
        """Done = marker present and the part on disk holds the marker's row count."""
        marker = self.marker_path(kind, name, shard_id)
        if not marker.exists():
            return False
        try:
            expected = int(json.loads(marker.read_text())["rows"])
            actual = pq.read_metadata(self.part_path(kind, name, shard_id)).num_rows
        except Exception as exc:  # noqa: BLE001 - any unreadable marker/part means: redo the unit
            log.warning("%s unit %s::%s: marker or part unreadable (%s); it will be redone", kind, name, shard_id, exc)
            return False
        if actual != expected:
            log.warning("%s unit %s::%s: part has %d rows, marker says %d; redoing it", kind, name, shard_id, actual, expected)
            return False
        return True

    def write_unit(self, kind: str, name: str, shard_id: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """Write the part under a temporary name, rename it, then write the marker the same way."""
        part = self.part_path(kind, name, shard_id)
        part.parent.mkdir(parents=True, exist_ok=True)
        schema = SV_SCHEMA if kind == "sv" else SER_SCHEMA
        clean = scrubber()  # a judge's error text may quote a server that echoed the key
        if clean:
            rows = [{k: clean(v) if isinstance(v, str) else v for k, v in r.items()} for r in rows]
        table = pa.table({f.name: pa.array([r.get(f.name) for r in rows], f.type) for f in schema}, schema=schema)
        tmp = part.with_name(f".{part.name}.tmp-{os.getpid()}")
        try:
            pq.write_table(table, tmp)
            os.replace(tmp, part)
        finally:
            if tmp.exists():
                tmp.unlink()
        n_failed = sum(1 for r in rows if r.get("error"))
        marker = {"kind": kind, "backend": name, "shard": shard_id, "rows": len(rows), "n_failed": n_failed}
        atomic_write_text(self.marker_path(kind, name, shard_id), json.dumps(marker, sort_keys=True))

    def write_facts(self, kind: str, name: str, facts: Mapping[str, Any]) -> None:
        atomic_write_text(self.facts_path(kind, name), json.dumps(facts, indent=2, sort_keys=True, default=str))

    def read_facts(self, kind: str, name: str) -> dict[str, Any] | None:
        p = self.facts_path(kind, name)
        if not p.exists():
            return None
        try:
            return dict(json.loads(p.read_text()))
        except (OSError, json.JSONDecodeError):
            return None

    def done_parts(self, kind: str, name: str) -> list[Path]:
        """Parts of finished units (marker and part agree), in shard order."""
        mdir = self.root / MARKER_DIR / kind / safe_name(name)
        out: list[Path] = []
        if not mdir.is_dir():
            return out
        for marker in sorted(mdir.glob("*.json")):
            info = json.loads(marker.read_text())
            if self.is_done(kind, name, str(info["shard"])):
                out.append(self.part_path(kind, name, str(info["shard"])))
        return out

    def read_table(self, kind: str, name: str) -> pa.Table:
        """All finished rows of one backend (empty table with the schema when none)."""
        schema = SV_SCHEMA if kind == "sv" else SER_SCHEMA
        tables = [pq.read_table(p) for p in self.done_parts(kind, name)]
        return pa.concat_tables(tables) if tables else schema.empty_table()


def read_embeddings(out_dir: Path | str, name: str) -> dict[str, np.ndarray]:
    """``utt_id -> float32 embedding`` for every clip embedded without error (never recomputes)."""
    table = EmbedStore(out_dir).read_table("sv", name)
    out: dict[str, np.ndarray] = {}
    for utt, emb, err in zip(table["utt_id"].to_pylist(), table["embedding"].to_pylist(), table["error"].to_pylist()):
        if err is None and emb is not None:
            out[str(utt)] = np.asarray(emb, dtype=np.float32)
    return out


def _loads(text: str | None) -> dict[str, float]:
    if not text:
        return {}
    return {str(k): (float("nan") if v is None else float(v)) for k, v in json.loads(text).items()}


def read_emotion_outputs(out_dir: Path | str, name: str) -> dict[str, EmotionOutput]:
    """``utt_id -> EmotionOutput`` for every clip the SER backend processed without error."""
    table = EmbedStore(out_dir).read_table("ser", name)
    out: dict[str, EmotionOutput] = {}
    for row in table.to_pylist():
        if row["error"] is None:
            out[str(row["utt_id"])] = EmotionOutput(
                posteriors=_loads(row["posteriors"]), dimensions=_loads(row["dimensions"]), descriptors=_loads(row["descriptors"])
            )
    return out


def read_errors(out_dir: Path | str, kind: str, name: str) -> dict[str, str]:
    """``utt_id -> error`` for every clip that failed (kept, never silently dropped)."""
    table = EmbedStore(out_dir).read_table(kind, name)
    return {str(u): str(e) for u, e in zip(table["utt_id"].to_pylist(), table["error"].to_pylist()) if e is not None}


# --------------------------------------------------------------------------------------------
# Processing one unit
# --------------------------------------------------------------------------------------------


def _json_map(values: Mapping[str, float]) -> str | None:
    """JSON object text; NaN/inf become null so the text is standard JSON."""
    if not values:
        return None
    clean = {str(k): (float(v) if v is not None and math.isfinite(float(v)) else None) for k, v in values.items()}
    return json.dumps(clean, sort_keys=True)


def _check_embedding(vec: np.ndarray) -> str | None:
    if vec.ndim != 1 or vec.size == 0:
        return f"embedding has shape {vec.shape}; expected one vector"
    if not np.all(np.isfinite(vec)):
        return "embedding contains NaN or infinity"
    if float(np.linalg.norm(vec)) == 0.0:
        return "embedding is all zeros (no speech found?)"
    return None


def _run_batch(backend: SVBackend | SERBackend, kind: str, clips: Sequence[np.ndarray]) -> list[Any]:
    """One backend call; returns one output per clip or raises."""
    if kind == "sv":
        arr = np.asarray(backend.embed_batch(list(clips), SAMPLE_RATE), dtype=np.float32)  # type: ignore[union-attr]
        if arr.ndim != 2 or arr.shape[0] != len(clips):
            raise AuditError(f"backend returned embeddings of shape {arr.shape} for {len(clips)} clips")
        return list(arr)
    outs = list(backend.predict_batch(list(clips), SAMPLE_RATE))  # type: ignore[union-attr]
    if len(outs) != len(clips):
        raise AuditError(f"backend returned {len(outs)} outputs for {len(clips)} clips")
    return outs


def _fill(row: dict[str, Any], kind: str, out: Any) -> None:
    if kind == "sv":
        vec = np.asarray(out, dtype=np.float32).reshape(-1)
        problem = _check_embedding(vec)
        if problem:
            row["error"] = f"bad embedding: {problem}"
        else:
            row["embedding"] = vec.tolist()
    else:
        if not isinstance(out, EmotionOutput):
            row["error"] = f"backend returned {type(out).__name__}, expected EmotionOutput"
            return
        row["posteriors"] = _json_map(out.posteriors)
        row["dimensions"] = _json_map(out.dimensions)
        row["descriptors"] = _json_map(out.descriptors)


def process_embed_unit(
    backend: SVBackend | SERBackend,
    kind: str,
    name: str,
    shard: Shard,
    decoded: Sequence[DecodedAudio],
    batch_size: int,
) -> list[dict[str, Any]]:
    """Run one backend over one decoded shard; one row per utterance, failures as error rows.

    Clips go longest-first in batches; when a batch raises (one clip too short fails the whole
    call for most backends), its clips are retried one by one so only the bad clip gets an error.
    A batch's wall time is shared among its clips in proportion to their durations.
    """
    rows: dict[str, dict[str, Any]] = {}
    ok: list[tuple[Utterance, DecodedAudio]] = []
    for u, d in zip(shard.utterances, decoded):
        row: dict[str, Any] = {"utt_id": u.utt_id, "error": None, "duration_s": u.duration_s, "infer_s": None, "shard": shard.shard_id}
        rows[u.utt_id] = row
        if d.error is not None:
            row["error"] = d.error
        else:
            row["duration_s"] = d.duration_s
            ok.append((u, d))
    ok.sort(key=lambda p: p[1].duration_s, reverse=True)
    step = max(1, batch_size)
    for i in range(0, len(ok), step):
        batch = ok[i : i + step]
        try:
            t0 = time.perf_counter()
            outs = _run_batch(backend, kind, [d.samples for _, d in batch])
            dt = time.perf_counter() - t0
            total = sum(d.duration_s for _, d in batch) or 1.0
            for (u, d), out in zip(batch, outs):
                rows[u.utt_id]["infer_s"] = dt * d.duration_s / total
                _fill(rows[u.utt_id], kind, out)
        except Exception as exc:  # noqa: BLE001 - a failed batch is retried clip by clip
            if len(batch) > 1:
                log.info("%s: batch of %d failed (%s); retrying clip by clip", name, len(batch), exc)
            for u, d in batch:
                try:
                    t0 = time.perf_counter()
                    (out,) = _run_batch(backend, kind, [d.samples])
                    rows[u.utt_id]["infer_s"] = time.perf_counter() - t0
                    _fill(rows[u.utt_id], kind, out)
                except Exception as exc2:  # noqa: BLE001 - one clip's failure becomes its row's error
                    rows[u.utt_id]["error"] = error_text(exc2, "backend error: ")
    return [rows[u.utt_id] for u in shard.utterances]


# --------------------------------------------------------------------------------------------
# Loading and the run
# --------------------------------------------------------------------------------------------


@dataclass
class _State:
    spec: EmbedSpec
    backend: SVBackend | SERBackend | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    warmed: bool = False


def load_embed_backend(spec: EmbedSpec) -> _State:
    """Build and load one backend; failures are recorded in the facts, never raised."""
    facts: dict[str, Any] = {
        "name": spec.name,
        "backend": spec.backend,
        "kind": spec.kind,
        "batch_size": spec.batch_size,
        "warmup_batches": 0,
    }
    state = _State(spec, None, facts)
    try:
        cls = spec.registry().get(spec.backend)
        backend = cls(**dict(spec.options))
        t0 = time.perf_counter()
        backend.load()
        facts["load_s"] = time.perf_counter() - t0
        info = backend.info().as_dict()
        facts["info"] = info
        facts["device"] = info.get("device", "cpu")
        facts["status"] = "loaded"
        state.backend = backend
    except BackendUnavailable as exc:
        facts.update(status="unavailable", error=scrub(str(exc)))
        log.error("%s backend %s unavailable: %s", spec.kind, spec.name, facts["error"])
    except ConfigError as exc:
        facts.update(status="failed-to-load", error=scrub(str(exc)))
        log.error("%s backend %s: bad options: %s", spec.kind, spec.name, facts["error"])
    except Exception as exc:  # noqa: BLE001 - load failures are reported in the facts, never raised
        facts.update(status="failed-to-load", error=error_text(exc), traceback=scrub(traceback.format_exc(limit=5)))
        log.error("%s backend %s failed to load: %s", spec.kind, spec.name, facts["error"])
    return state


def _warm(state: _State, decoded: Sequence[DecodedAudio]) -> None:
    """One discarded call on a real clip, so first-call costs stay out of ``infer_s``."""
    state.warmed = True
    clip = next((d.samples for d in decoded if d.error is None and d.duration_s >= 1.0), None)
    if clip is None or state.backend is None:
        return
    try:
        _run_batch(state.backend, state.spec.kind, [clip])
        state.facts["warmup_batches"] = int(state.facts.get("warmup_batches", 0)) + 1
    except Exception as exc:  # noqa: BLE001 - warm-up is best effort; the real call reports errors per clip
        log.debug("warm-up of %s failed: %s", state.spec.name, exc)


def _summarize(store: EmbedStore, spec: EmbedSpec) -> dict[str, Any]:
    """Row counts and timing over every finished unit (this run's and earlier ones)."""
    table = store.read_table(spec.kind, spec.name)
    err = table["error"].to_pylist()
    dur = [x for x in table["duration_s"].to_pylist()]
    inf = table["infer_s"].to_pylist()
    ok_audio = sum(float(d) for d, e, t in zip(dur, err, inf) if e is None and d is not None and t is not None)
    infer = sum(float(t) for e, t in zip(err, inf) if e is None and t is not None)
    return {
        "n_utts": table.num_rows,
        "n_ok": sum(1 for e in err if e is None),
        "n_failed": sum(1 for e in err if e is not None),
        "audio_s": ok_audio,
        "infer_s": infer,
        "rtfx": (ok_audio / infer) if infer > 0 else None,
    }


def run_embed_backends(
    dataset: Dataset,
    specs: Sequence[EmbedSpec],
    out_dir: Path | str,
    decode_options: DecodeOptions | None = None,
    progress: ProgressFn | None = None,
    warmup: int = 1,
) -> dict[str, dict[str, Any]]:
    """Run every pending ``(backend, shard)`` unit; returns facts per backend name.

    Facts hold ``status`` (``loaded``, ``unavailable``, ``failed-to-load``, or ``done`` when
    every unit was already finished and the backend was not loaded), ``error`` for a backend
    that could not load, ``info``/``device``/``batch_size``, ``n_units_run`` (this call) and
    totals over all finished units (``n_utts``, ``n_failed``, ``audio_s``, ``infer_s``, ``rtfx``).
    """
    names = [s.name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"backend name(s) listed twice: {', '.join(dupes)}")
    if not dataset.has_audio:
        raise ConfigError(f"dataset {dataset.name} has no audio; speaker and emotion backends need audio")
    store = EmbedStore(out_dir)
    pending: dict[str, list[str]] = {s.name: [sid for sid in dataset.shard_ids if not store.is_done(s.kind, s.name, sid)] for s in specs}
    states: dict[str, _State] = {}
    for spec in specs:
        if pending[spec.name]:
            if progress:
                progress("loading", 0, {"model": spec.name, "kind": spec.kind})
            states[spec.name] = load_embed_backend(spec)
        else:
            previous = store.read_facts(spec.kind, spec.name) or {}
            facts = {**previous, "name": spec.name, "backend": spec.backend, "kind": spec.kind, "status": "done"}
            states[spec.name] = _State(spec, None, facts)
        states[spec.name].facts["n_units_run"] = 0
    n_pending = sum(len(v) for k, v in pending.items() if states[k].backend is not None)
    if progress:
        progress("start", n_pending, {"kind": "embed"})
    for shard_id in dataset.shard_ids:
        runnable = [s for s in specs if shard_id in pending[s.name] and states[s.name].backend is not None]
        if not runnable:
            continue
        shard = dataset.load_shard(shard_id)
        decoded = decode_shard(shard, dataset.root, decode_options or DecodeOptions())
        for spec in runnable:
            st = states[spec.name]
            assert st.backend is not None  # runnable filtered on it
            if warmup > 0 and not st.warmed:
                _warm(st, decoded)
            rows = process_embed_unit(st.backend, spec.kind, spec.name, shard, decoded, spec.batch_size)
            store.write_unit(spec.kind, spec.name, shard_id, rows)
            st.facts["n_units_run"] += 1
            if progress:
                progress("unit", 1, {"model": spec.name, "kind": spec.kind, "shard": shard_id, "rows": rows})
        del decoded
    out: dict[str, dict[str, Any]] = {}
    for spec in specs:
        st = states[spec.name]
        if st.backend is not None:
            if callable(getattr(st.backend, "usage", None)):  # hosted judges: calls, cache hits, unparseable replies
                st.facts["info"] = st.backend.info().as_dict()
            st.backend.close()
        if st.facts.get("status") in ("loaded", "done"):
            st.facts.update(_summarize(store, spec))
        st.facts.setdefault("batch_size", spec.batch_size)
        store.write_facts(spec.kind, spec.name, {k: v for k, v in st.facts.items() if k != "n_units_run"})
        out[spec.name] = dict(st.facts)
    return out


__all__ = [
    "EmbedSpec",
    "EmbedStore",
    "load_embed_backend",
    "process_embed_unit",
    "read_embeddings",
    "read_emotion_outputs",
    "read_errors",
    "run_embed_backends",
]
