"""The run directory's result store: one Parquet part per ``(model, shard)`` unit plus a marker.

A part is written under a temporary name and renamed atomically, then its marker (with the row
count) is written the same way; a unit counts as done only when both exist and agree, so an
interrupted unit is redone from scratch and never half-kept or duplicated.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from engine.data import CONFIDENCE_COLUMNS, RESULT_COLUMNS, WorkUnit

log = logging.getLogger(__name__)

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str) -> str:
    """File-system safe form of a model or shard name (names stay intact inside the rows)."""
    return _SAFE.sub("_", name).strip("._") or "_"


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def rows_to_table(rows: Sequence[Mapping[str, Any]], label_keys: Sequence[str]) -> pa.Table:
    """Result rows as an Arrow table with a fixed schema (labels as strings)."""
    schema_fields = [
        ("utt_id", pa.string()),
        ("model", pa.string()),
        ("hyp_raw", pa.string()),
        ("ref_raw", pa.string()),
        ("duration_s", pa.float64()),
        ("infer_s", pa.float64()),
        ("error", pa.string()),
        ("speaker", pa.string()),
        ("shard", pa.string()),
        ("parent_id", pa.string()),
    ]
    cols = {name: pa.array([r.get(name) for r in rows], typ) for name, typ in schema_fields}
    for name in CONFIDENCE_COLUMNS:  # optional: only when the backend gave them (parts concatenate permissively)
        if any(r.get(name) is not None for r in rows):
            cols[name] = pa.array([r.get(name) for r in rows], pa.float64())
    for k in label_keys:
        if k in cols:
            continue
        cols[k] = pa.array([None if r.get(k) is None else str(r.get(k)) for r in rows], pa.string())
    return pa.table(cols)


class RunStore:
    """Parts, markers and per-model facts under one run directory."""

    def __init__(self, out_dir: Path | str) -> None:
        self.root = Path(out_dir)
        self.parts = self.root / "parts"
        self.markers = self.root / "markers"
        self.models_dir = self.root / "models"

    def part_path(self, unit: WorkUnit) -> Path:
        return self.parts / safe_name(unit.model) / f"{safe_name(unit.shard_id)}.parquet"

    def marker_path(self, unit: WorkUnit) -> Path:
        return self.markers / safe_name(unit.model) / f"{safe_name(unit.shard_id)}.json"

    def is_done(self, unit: WorkUnit) -> bool:
        """Done = marker present and the part on disk has the marker's row count."""
        marker = self.marker_path(unit)
        part = self.part_path(unit)
        if not marker.exists():
            return False
        try:
            expected = json.loads(marker.read_text())["rows"]
            actual = pq.read_metadata(part).num_rows
        except Exception as exc:
            log.warning("unit %s: marker or part unreadable (%s); it will be redone", unit.key, exc)
            return False
        if actual != expected:
            log.warning("unit %s: part has %d rows, marker says %d; it will be redone", unit.key, actual, expected)
            return False
        return True

    def write_unit(self, unit: WorkUnit, rows: Sequence[Mapping[str, Any]], label_keys: Sequence[str], extra: Mapping[str, Any] | None = None) -> None:
        """Atomically write a unit's part, then its marker."""
        part = self.part_path(unit)
        part.parent.mkdir(parents=True, exist_ok=True)
        tmp = part.with_name(f".{part.name}.tmp-{os.getpid()}")
        try:
            pq.write_table(rows_to_table(rows, label_keys), tmp)
            os.replace(tmp, part)
        finally:
            if tmp.exists():
                tmp.unlink()
        marker = {"model": unit.model, "shard": unit.shard_id, "rows": len(rows), **dict(extra or {})}
        atomic_write_text(self.marker_path(unit), json.dumps(marker, sort_keys=True))

    def write_model_facts(self, model: str, facts: Mapping[str, Any]) -> None:
        atomic_write_text(self.models_dir / f"{safe_name(model)}.json", json.dumps(facts, indent=2, sort_keys=True, default=str))

    def read_model_facts(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        if self.models_dir.is_dir():
            for f in sorted(self.models_dir.glob("*.json")):
                facts = json.loads(f.read_text())
                out[facts.get("model", f.stem)] = facts
        return out

    def done_parts(self, models: Iterable[str] | None = None) -> list[Path]:
        """Parts whose markers agree with them (what a consolidated table is built from)."""
        wanted = None if models is None else {safe_name(m) for m in models}
        out: list[Path] = []
        if not self.markers.is_dir():
            return out
        for marker in sorted(self.markers.glob("*/*.json")):
            if wanted is not None and marker.parent.name not in wanted:
                continue
            info = json.loads(marker.read_text())
            unit = WorkUnit(info["model"], info["shard"])
            if self.is_done(unit):
                out.append(self.part_path(unit))
        return out

    def consolidate(self, models: Iterable[str] | None = None) -> pa.Table:
        """All finished parts as one table; writes ``utterances.parquet`` atomically."""
        parts = self.done_parts(models)
        tables = [pq.read_table(p) for p in parts]
        if tables:
            table = pa.concat_tables(tables, promote_options="permissive")
        else:
            table = rows_to_table([], [])
        table = table.sort_by([("model", "ascending"), ("utt_id", "ascending")])
        dest = self.root / "utterances.parquet"
        tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
        pq.write_table(table, tmp)
        os.replace(tmp, dest)
        return table


__all__ = ["RESULT_COLUMNS", "RunStore", "atomic_write_text", "rows_to_table", "safe_name"]
