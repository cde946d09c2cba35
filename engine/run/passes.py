"""Pass kinds: what differs between an ASR, a speaker-verification (SV) and an emotion (SER) pass.

Every pass is a set of ``(backend, shard)`` units with one contract (``engine/run/store.py``: atomic
part + marker with ids digest, clip digests and settings, hashed safe names, exact resume,
quarantine after retries, rows == plan or an integrity error). Both runners
(``engine/run/runner.py``, ``engine/run/ray_runner.py``) run every kind; a :class:`~engine.data.ModelSpec`'s
``kind`` selects here:

* the backend registry (``registry_for``),
* how one decoded shard becomes rows (ASR: ``engine.run.runner.process_unit``; SV/SER:
  :func:`process_embed_unit`),
* the row schema of the unit's part (``pass_table``) and the rows a quarantined unit gets
  (``failed_rows``),
* the store's folders (``STORE_DIRS``): ASR keeps ``parts/``, ``markers/``, ``models/`` and
  ``utterances.parquet``; SV writes ``embeddings/``, ``markers-embed/sv/``, ``models-embed/sv/``
  and ``embeddings.parquet``; SER the same under ``emotion``.

This module imports no runner or store, so both can import it.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from engine.backends import ASR_BACKENDS, SER_BACKENDS, SV_BACKENDS
from engine.backends.base import EmotionOutput
from engine.backends.hosted.scrub import error_text, scrub, scrubber
from engine.data import SAMPLE_RATE, DecodedAudio, ModelSpec, Shard, Utterance
from engine.errors import AuditError, ConfigError
from engine.registry import Registry

log = logging.getLogger(__name__)

PASS_KINDS: tuple[str, ...] = ("asr", "sv", "ser")

#: ``kind -> (parts folder, markers folder, facts folder, consolidated table)`` under the run directory.
STORE_DIRS: dict[str, tuple[str, str, str, str]] = {
    "asr": ("parts", "markers", "models", "utterances.parquet"),
    "sv": ("embeddings", "markers-embed/sv", "models-embed/sv", "embeddings.parquet"),
    "ser": ("emotion", "markers-embed/ser", "models-embed/ser", "emotion.parquet"),
}

SV_SCHEMA = pa.schema(
    [
        ("utt_id", pa.string()),
        ("model", pa.string()),
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
        ("model", pa.string()),
        ("posteriors", pa.string()),
        ("dimensions", pa.string()),
        ("descriptors", pa.string()),
        ("error", pa.string()),
        ("duration_s", pa.float64()),
        ("infer_s", pa.float64()),
        ("shard", pa.string()),
    ]
)
SCHEMAS: dict[str, pa.Schema] = {"sv": SV_SCHEMA, "ser": SER_SCHEMA}


#: Backend options that are placement, not model settings: they go to the spec's ``meta`` (as for ASR registry entries).
PLACEMENT_KEYS = ("num_gpus", "num_cpus", "memory_mb")


def split_placement(options: Mapping[str, Any], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(backend options, placement)``: ``num_gpus``/``num_cpus``/``memory_mb`` are taken out and checked.

    Each must be a finite number >= 0 (``num_cpus`` > 0); they size the backend's Ray actors like
    an ASR registry entry's and never reach the backend or the result settings.
    """
    opts = dict(options)
    meta: dict[str, Any] = {}
    for key in PLACEMENT_KEYS:
        if key not in opts:
            continue
        value = opts.pop(key)
        bad = isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)) or value < 0
        if bad or (key == "num_cpus" and value == 0):
            bound = "> 0" if key == "num_cpus" else ">= 0"
            raise ConfigError(f"{where}: option '{key}' must be a finite number {bound}, got {value!r}")
        meta[key] = float(value)
    return opts, meta


def check_kind(kind: str, where: str = "") -> str:
    if kind not in PASS_KINDS:
        raise ConfigError(f"{where or 'pass'}: kind must be one of {', '.join(PASS_KINDS)}, got {kind!r}")
    return kind


def registry_for(kind: str) -> Registry[type]:
    """The backend registry of a pass kind."""
    return {"asr": ASR_BACKENDS, "sv": SV_BACKENDS, "ser": SER_BACKENDS}[check_kind(kind)]


def is_cpu_only(spec: ModelSpec) -> bool:
    """Whether the spec's backend declares ``cpu_only`` (its Ray actors then take no GPU)."""
    return bool(getattr(registry_for(spec.kind).get(spec.backend), "cpu_only", False))


def check_device(spec: ModelSpec, where: str) -> None:
    """Refuse ``device: cuda`` or ``num_gpus`` > 0 for a CPU-only backend before any pass starts."""
    check = getattr(registry_for(spec.kind).get(spec.backend), "check_device", None)
    if check is not None:
        check(spec.options, spec.meta, where)


def build_pass_backend(spec: ModelSpec) -> Any:
    """Construct (not load) the backend a spec names, from its kind's registry; options are checked by the backend."""
    return registry_for(spec.kind).get(spec.backend)(**dict(spec.options))


def pass_table(kind: str, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """SV/SER rows as an Arrow table with the kind's fixed schema; every text cell passes the secret
    scrubber (a judge's error text may quote a server that echoed the key)."""
    schema = SCHEMAS[kind]
    clean = scrubber()
    if clean:
        rows = [{k: clean(v) if isinstance(v, str) else v for k, v in r.items()} for r in rows]
    return pa.table({f.name: pa.array([r.get(f.name) for r in rows], f.type) for f in schema}, schema=schema)


def empty_table(kind: str) -> pa.Table:
    return SCHEMAS[kind].empty_table()


def embed_row(u: Utterance, model: str, shard_id: str) -> dict[str, Any]:
    return {"utt_id": u.utt_id, "model": model, "error": None, "duration_s": u.duration_s, "infer_s": None, "shard": shard_id}


# --------------------------------------------------------------------------------------------
# SV / SER rows of one unit
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


def _run_batch(backend: Any, kind: str, clips: Sequence[np.ndarray]) -> list[Any]:
    """One backend call; returns one output per clip or raises."""
    if kind == "sv":
        arr = np.asarray(backend.embed_batch(list(clips), SAMPLE_RATE), dtype=np.float32)
        if arr.ndim != 2 or arr.shape[0] != len(clips):
            raise AuditError(f"backend returned embeddings of shape {arr.shape} for {len(clips)} clips")
        return list(arr)
    outs = list(backend.predict_batch(list(clips), SAMPLE_RATE))
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


WARMUP_ATTR = "_audit_pending_warmup"


def warm_on_first_clip(backend: Any, kind: str, decoded: Sequence[DecodedAudio]) -> int:
    """SV/SER backends have no synthetic warm-up: one discarded call on the first real clip of >= 1 s.

    ``load_model`` sets the backend's pending warm-up count; this spends it on the first unit, so
    first-call costs stay out of ``infer_s``. Returns the number of warm-up calls made.
    """
    n = int(getattr(backend, WARMUP_ATTR, 0) or 0)
    if n <= 0:
        return 0
    clip = next((d.samples for d in decoded if d.error is None and d.duration_s >= 1.0), None)
    if clip is None:
        return 0
    setattr(backend, WARMUP_ATTR, 0)
    done = 0
    for _ in range(n):
        try:
            _run_batch(backend, kind, [clip])
            done += 1
        except Exception as exc:  # noqa: BLE001 - warm-up is best effort; the real call reports errors per clip
            log.debug("warm-up failed: %s", exc)
            break
    return done


def process_embed_unit(
    backend: Any,
    kind: str,
    name: str,
    shard: Shard,
    decoded: Sequence[DecodedAudio],
    batch_size: int,
) -> list[dict[str, Any]]:
    """Run one SV/SER backend over one decoded shard; one row per utterance, failures as error rows.

    Clips go longest-first in batches; when a batch raises (one clip too short fails the whole
    call for most backends), its clips are retried one by one so only the bad clip gets an error.
    A batch's wall time is shared among its clips in proportion to their durations.
    """
    warm_on_first_clip(backend, kind, decoded)
    rows: dict[str, dict[str, Any]] = {}
    ok: list[tuple[Utterance, DecodedAudio]] = []
    for u, d in zip(shard.utterances, decoded):
        row = embed_row(u, name, shard.shard_id)
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
                log.info("%s: batch of %d failed (%s); retrying clip by clip", name, len(batch), scrub(str(exc)))
            for u, d in batch:
                try:
                    t0 = time.perf_counter()
                    (out,) = _run_batch(backend, kind, [d.samples])
                    rows[u.utt_id]["infer_s"] = time.perf_counter() - t0
                    _fill(rows[u.utt_id], kind, out)
                except Exception as exc2:  # noqa: BLE001 - one clip's failure becomes its row's error
                    rows[u.utt_id]["error"] = error_text(exc2, "backend error: ")
    return [rows[u.utt_id] for u in shard.utterances]


__all__ = [
    "PASS_KINDS",
    "PLACEMENT_KEYS",
    "SER_SCHEMA",
    "STORE_DIRS",
    "SV_SCHEMA",
    "build_pass_backend",
    "check_device",
    "check_kind",
    "embed_row",
    "empty_table",
    "is_cpu_only",
    "pass_table",
    "process_embed_unit",
    "registry_for",
    "split_placement",
    "warm_on_first_clip",
]
