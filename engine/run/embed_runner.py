"""Speaker-verification (SV) and speech-emotion (SER) passes, run on the run's engine.

An SV or SER pass is a set of ``(backend, shard)`` units with the same contract as the ASR pass
(``engine/run/store.py``, ``engine/run/passes.py``): the run's engine (``engine/engine.py``:
in-process or Ray actors, pinned to GPUs when the cluster has them) decodes each shard once for
every pending backend, each unit is written as an atomic Parquet part plus a marker holding the
ids digest, the clip digests and the settings, resume is exact (a changed clip or setting is
recomputed, a finished unit never), a unit that keeps failing on Ray is quarantined, and the
finished rows are checked against the plan (each ``(backend, utt_id)`` exactly once, or a
``ResultIntegrityError``) before anything is scored:

* SV:  ``DIR/embeddings/<backend>/<shard>.parquet`` -- ``utt_id, model, embedding
  (list<float32>), error, duration_s, infer_s, shard``; checked table ``DIR/embeddings.parquet``
* SER: ``DIR/emotion/<backend>/<shard>.parquet`` -- ``utt_id, model, posteriors, dimensions,
  descriptors (JSON text), error, duration_s, infer_s, shard``; checked table ``DIR/emotion.parquet``
* markers: ``DIR/markers-embed/{sv,ser}/<backend>/<shard>.json``; facts per backend under
  ``DIR/models-embed/{sv,ser}/<backend>.json``

A clip that cannot be embedded (too short, silent, undecodable) becomes a row with its error; a
backend that cannot load is reported in the returned facts and the other backends go on. This
module stores raw outputs only; scoring lives in ``audits``.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.backends.base import EmotionOutput
from engine.data import DecodeOptions, ModelSpec, ProgressFn, WorkUnit
from engine.datasets.base import Dataset
from engine.engine import EngineOptions
from engine.errors import ConfigError
from engine.run.joint_pass import JointRecord
from engine.run.passes import PLACEMENT_KEYS, check_device, empty_table, registry_for, split_placement
from engine.run.store import RunStore

log = logging.getLogger(__name__)

KINDS = ("sv", "ser")


@dataclass(frozen=True)
class EmbedSpec:
    """One SV or SER backend to run: ``name`` keys its outputs, ``backend`` is the registry name.

    ``meta`` holds its placement (``num_gpus``, ``num_cpus``, ``memory_mb``; see ``split_placement``).
    """

    name: str
    backend: str
    kind: str = "sv"
    options: Mapping[str, Any] = field(default_factory=dict)
    batch_size: int = 16
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"backend '{self.name}': kind must be one of {KINDS}, got {self.kind!r}")
        if self.batch_size < 1:
            raise ConfigError(f"backend '{self.name}': batch_size must be >= 1, got {self.batch_size}")

    def registry(self) -> Any:
        return registry_for(self.kind)

    def model_spec(self) -> ModelSpec:
        return ModelSpec(self.name, self.backend, dict(self.options), self.batch_size, dict(self.meta), kind=self.kind)


# --------------------------------------------------------------------------------------------
# Reading stored results
# --------------------------------------------------------------------------------------------


class EmbedStore:
    """Read access to the SV/SER passes of one run directory (the checked tables and the units)."""

    def __init__(self, out_dir: Path | str) -> None:
        self.root = Path(out_dir)

    def store(self, kind: str) -> RunStore:
        return RunStore(self.root, kind=kind)

    def part_path(self, kind: str, name: str, shard_id: str) -> Path:
        return self.store(kind).part_path(WorkUnit(name, shard_id))

    def marker_path(self, kind: str, name: str, shard_id: str) -> Path:
        return self.store(kind).marker_path(WorkUnit(name, shard_id))

    def is_done(self, kind: str, name: str, shard_id: str) -> bool:
        """Marker present and the part on disk holds the marker's row count (no plan: an inspection)."""
        return self.store(kind).is_done(WorkUnit(name, shard_id))

    def read_table(self, kind: str, name: str) -> pa.Table:
        """The checked rows of one backend (written by the last run of its pass; empty when none)."""
        path = self.store(kind).table_path
        if not path.exists():
            return empty_table(kind)
        table = pq.read_table(path)
        return table.filter(pc.equal(table["model"], name))


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
# The passes
# --------------------------------------------------------------------------------------------


def _summarize(table: pa.Table) -> dict[str, Any]:
    """Row counts and timing over one backend's checked rows."""
    err = table["error"].to_pylist()
    dur = table["duration_s"].to_pylist()
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


def _joint_record(engine: EngineOptions, spec: EmbedSpec, kind: str, settings_digest: str) -> JointRecord | None:
    """The joint run's record of ``spec`` (``engine/run/joint_pass.py``), when it ran this very pass (same kind and settings)."""
    rec = engine.joint.get(spec.name)
    if rec is None or rec.kind != kind or rec.settings_digest != settings_digest:
        return None
    return rec


def run_embed_backends(
    dataset: Dataset,
    specs: Sequence[EmbedSpec],
    out_dir: Path | str,
    decode_options: DecodeOptions | None = None,
    progress: ProgressFn | None = None,
    warmup: int = 1,
    engine: EngineOptions | None = None,
) -> dict[str, dict[str, Any]]:
    """Run every pending ``(backend, shard)`` unit on ``engine`` (default in-process); facts per backend name.

    Facts hold ``status`` (``loaded``, ``unavailable``, ``failed-to-load``, or ``done`` when
    every unit was already finished and the backend was not loaded), ``error`` for a backend
    that could not load, ``info``/``device``/``batch_size``, ``engine`` (the runner, and for
    Ray the host, pid and GPU ids of each actor), ``n_units_run`` (this call) and totals over
    the checked rows (``n_utts``, ``n_failed``, ``audio_s``, ``infer_s``, ``rtfx``).

    When the recipe run already ran a backend's pass together with its ASR pass
    (``engine.joint``, ``engine/run/joint_pass.py``), its units are found finished and nothing is
    computed; status and ``n_units_run`` then count that joint run as this call's, so the
    facts read as they would had the pass run here.
    """
    names = [s.name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"backend name(s) listed twice: {', '.join(dupes)}")
    if not dataset.has_audio:
        raise ConfigError(f"dataset {dataset.name} has no audio; speaker and emotion backends need audio")
    for s in specs:  # a GPU asked of a CPU-only backend is refused before any pass starts
        check_device(s.model_spec(), f"{s.kind} pass '{s.name}'")
    engine = engine or EngineOptions()
    runs: Counter[str] = Counter()

    def counting(event: str, n: int, info: dict[str, Any]) -> None:
        if event == "unit":
            runs[str(info.get("model"))] += n
        if progress:
            progress(event, n, info)

    out: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        group = [s for s in specs if s.kind == kind]
        if not group:
            continue
        store = RunStore(out_dir, kind=kind)
        runner = engine.runner(
            dataset, [s.model_spec() for s in group], store, warmup=warmup, decode_options=decode_options, progress=counting
        )
        pending = {u.model for u in runner.pending()}
        facts = runner.run()
        table = store.consolidate([s.name for s in group], plan=runner.plan)  # rows == plan, or ResultIntegrityError
        for spec in group:
            f = dict(facts.get(spec.name) or {"status": "not-started"})
            f.update(name=spec.name, backend=spec.backend, kind=kind, batch_size=spec.batch_size)
            joint = _joint_record(engine, spec, kind, runner.plan.settings_digests[spec.name])
            if joint is not None:  # this recipe run computed the pass with its ASR pass: report it as run here
                runs[spec.name] += joint.n_units_run
            if spec.name not in pending and not (joint is not None and joint.pending) and f.get("status") == "loaded":
                f["status"] = "done"
            if isinstance(f.get("info"), Mapping):
                f["device"] = f["info"].get("device", "cpu")
            if f.get("status") in ("loaded", "done"):
                f.update(_summarize(table.filter(pc.equal(table["model"], spec.name))))
            f["n_units_run"] = runs[spec.name]
            out[spec.name] = f
    return out


__all__ = [
    "EmbedSpec",
    "EmbedStore",
    "KINDS",
    "PLACEMENT_KEYS",
    "read_embeddings",
    "read_emotion_outputs",
    "read_errors",
    "run_embed_backends",
    "split_placement",
]
