"""The run directory's result store: one Parquet part per ``(model, shard)`` unit plus a marker.

A part is written under a temporary name and renamed atomically, then its marker is written the
same way; a unit counts as done only when both exist and agree, so an interrupted unit is redone
from scratch and never half-kept or duplicated.

Resume is exact whatever changed between two runs into one directory, because a marker records
what its unit holds, not only how many rows:

* ``rows``: the part's row count (a truncated or replaced part is redone);
* ``ids_digest``, ``content_digest`` and ``clips``: the unit's utt_ids in order, and one digest
  per clip of everything its row takes from the dataset (id, reference, labels, audio size,
  modification time and edge hash; see ``engine.datasets.base.clip_digest``);
* ``settings`` and ``settings_digest``: the model spec (backend, options, batch size) and the
  decode settings the rows were produced with; ``layout``: reader and shard size, for messages.

The runners attach a :class:`RunPlan` (which utterances each unit must hold, with which
settings) and a unit is done only when its marker matches the plan exactly. A marker from
another layout (manifest reordered, shard size changed), from other settings or for clips that
changed is *stale*: it never counts for the unit whose file it occupies, and consolidation reads
only the plan's units, never every marker in the folder. Stale rows are not thrown away either:
before transcribing, ``rebuild_from_parts`` rebuilds each pending unit whose every clip is held,
with the same settings and the same clip digest, by a readable part of the model's folder; only
the rest is transcribed again. So resume never reuses a row for a clip or setting that changed
and never loses or repeats one, and ``consolidate`` verifies the outcome (each ``(model,
utt_id)`` of the plan exactly once) and raises ``ResultIntegrityError`` rather than return
anything else. File names are collision-free (``engine.storage.safe_name``) and names that would still share a
file are refused before anything runs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from engine.backends.hosted.scrub import scrubber
from engine.data import CONFIDENCE_COLUMNS, RESULT_COLUMNS, WorkUnit
from engine.errors import ConfigError, ResultIntegrityError
from engine.run.passes import STORE_DIRS, check_kind, pass_table
from engine.storage import atomic_write_text, check_distinct_paths, safe_name, write_hashed

log = logging.getLogger(__name__)

MARKER_VERSION = 2
_EXAMPLES = 5  # examples per kind of problem in an integrity error


def _digest(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def ids_digest(utt_ids: Sequence[str]) -> str:
    """Digest of a unit's utt_ids in order (what a marker says its part holds)."""
    return _digest([str(u) for u in utt_ids])


@dataclass(frozen=True)
class UnitPlan:
    """What one shard's unit must hold under the current plan (the same for every model)."""

    utt_ids: tuple[str, ...]
    clips: tuple[str, ...]
    ids_digest: str
    content_digest: str

    @classmethod
    def of(cls, utt_ids: Sequence[str], clips: Sequence[str]) -> "UnitPlan":
        return cls(tuple(utt_ids), tuple(clips), ids_digest(utt_ids), _digest(list(clips)))


@dataclass
class RunPlan:
    """Every ``(model, shard)`` unit of a run: which utterances it holds and the settings it runs with.

    Built by the runners from the dataset (ids and clip digests per shard, recorded at open) and
    the model specs; attached to the store, which validates markers and consolidation against it.
    ``not_run`` names models the runner could not run (failed to load): consolidation leaves
    them out, and their finished units stay on disk for a later resume.
    """

    shard_ids: list[str]
    shards: dict[str, UnitPlan]
    settings: dict[str, dict[str, Any]]
    settings_digests: dict[str, str]
    layout: dict[str, Any]
    dataset_fingerprint: str
    not_run: set[str] = field(default_factory=set)
    _clip_of: dict[str, str] | None = field(default=None, repr=False)

    @classmethod
    def build(cls, dataset: Any, models: Sequence[Any], decode: Mapping[str, Any]) -> "RunPlan":
        """Plan ``models`` (objects with name, backend, options, batch_size) over ``dataset``.

        Refuses model or shard names that would share a file, before anything loads.
        """
        names = [m.name for m in models]
        check_distinct_paths(names, "model")
        check_distinct_paths(dataset.shard_ids, "shard")
        shards: dict[str, UnitPlan] = {}
        for sid in dataset.shard_ids:
            idx = dataset.shard_index(sid)
            shards[sid] = UnitPlan.of(idx.utt_ids, idx.clips)
        settings: dict[str, dict[str, Any]] = {}
        for m in models:
            backend, options = _result_identity(m.backend, m.options, m.kind)
            rec: dict[str, Any] = {
                "backend": backend,
                "options": json.loads(json.dumps(options, sort_keys=True, default=str)),
                "batch_size": m.batch_size,
                "decode": json.loads(json.dumps(dict(decode), sort_keys=True, default=str)),
            }
            kind = getattr(m, "kind", "asr")
            if kind != "asr":  # ASR settings stay as they were, so existing markers keep matching
                rec["kind"] = kind
            if not dataset.has_audio:  # the rows come from the prediction files: their content is the setting
                rec["predictions"] = _digest(dataset.meta.get("predictions", {}).get(m.name, {}))
            settings[m.name] = rec
        layout = {"reader": dataset.reader, "shard_size": dataset.shard_size, "n_shards": len(dataset.shard_ids)}
        return cls(
            list(dataset.shard_ids),
            shards,
            settings,
            {n: _digest(r) for n, r in settings.items()},
            layout,
            dataset.fingerprint,
        )

    @property
    def models(self) -> list[str]:
        return list(self.settings)

    def unit(self, unit: WorkUnit) -> UnitPlan | None:
        if unit.model not in self.settings:
            return None
        return self.shards.get(unit.shard_id)

    def utt_ids(self) -> list[str]:
        """Every planned utterance, in shard order."""
        return [u for sid in self.shard_ids for u in self.shards[sid].utt_ids]

    def clip_of(self, utt_id: str) -> str | None:
        """The planned clip digest of ``utt_id`` (an index built on first use)."""
        if self._clip_of is None:
            self._clip_of = {u: c for sid in self.shard_ids for u, c in zip(self.shards[sid].utt_ids, self.shards[sid].clips)}
        return self._clip_of.get(utt_id)

    def marker_fields(self, unit: WorkUnit) -> dict[str, Any]:
        exp = self.unit(unit)
        if exp is None:
            return {}
        return {
            "v": MARKER_VERSION,
            "ids_digest": exp.ids_digest,
            "content_digest": exp.content_digest,
            "n_ids": len(exp.utt_ids),
            "clips": list(exp.clips),
            "settings_digest": self.settings_digests[unit.model],
            "settings": self.settings[unit.model],
            "layout": self.layout,
            "dataset_fingerprint": self.dataset_fingerprint,
        }


def _result_identity(backend: str, options: Mapping[str, Any], kind: str = "asr") -> tuple[str, dict[str, Any]]:
    """The backend and options that determine a model's rows (what a marker's settings record).

    A wrapper that only adds failures, delays or exits (the fault-injection backend,
    ``engine/backends/asr/fault.py``) declares whose rows its are (``ASRBackend.delegates_to``): it
    takes the inner backend's identity, and a unit finished under the wrapper stays done when the
    run is resumed with the plain backend (which is how the fault tests resume).
    """
    from engine.backends import ASR_BACKENDS

    if kind == "asr" and backend in ASR_BACKENDS:
        inner = getattr(ASR_BACKENDS.get(backend), "delegates_to", lambda o: None)(options)
        if inner is not None:
            return _result_identity(inner[0], inner[1])
    return backend, dict(options)


def _layout_text(layout: Any) -> str:
    if not isinstance(layout, Mapping):
        return "an unknown layout"
    return f"shard_size {layout.get('shard_size')}, {layout.get('n_shards')} shards"


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, Mapping):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def _settings_diff(old: Any, new: Mapping[str, Any]) -> str:
    a, b = _flatten(old or {}), _flatten(new)
    changed = [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    return "; ".join(changed[:4]) + (f"; and {len(changed) - 4} more" if len(changed) > 4 else "") if changed else "unknown"


def rows_to_table(rows: Sequence[Mapping[str, Any]], label_keys: Sequence[str]) -> pa.Table:
    """Result rows as an Arrow table with a fixed schema (labels as strings); every text cell
    passes the secret scrubber (a server may echo a key into an error or a transcript)."""
    clean = scrubber()
    if clean:
        rows = [{k: clean(v) if isinstance(v, str) else v for k, v in r.items()} for r in rows]
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
    """Parts, markers and per-model facts of one pass kind under one run directory.

    ``plan``: the :class:`RunPlan` markers and consolidation are checked against; the runners
    attach theirs (``use_plan``). Without one (a tool inspecting a store) a unit is done when its
    marker and part agree, and consolidation still refuses doubled rows. ``kind`` (``asr``,
    ``sv``, ``ser``; ``engine/run/passes.py``) picks the folders, the row schema and the name of the
    consolidated table, so every pass of a run shares one contract without sharing files.
    """

    def __init__(self, out_dir: Path | str, plan: RunPlan | None = None, *, kind: str = "asr") -> None:
        self.root = Path(out_dir)
        self.kind = check_kind(kind, "RunStore")
        parts, markers, models, table = STORE_DIRS[kind]
        self.parts = self.root / parts
        self.markers = self.root / markers
        self.models_dir = self.root / models
        self.table_path = self.root / table
        self.plan = plan
        self.table_sha256: str | None = None
        """SHA-256 of the bytes ``consolidate`` last wrote to ``table_path``, taken while writing (None before)."""

    def use_plan(self, plan: RunPlan | None) -> None:
        self.plan = plan

    def part_path(self, unit: WorkUnit) -> Path:
        return self.parts / safe_name(unit.model) / f"{safe_name(unit.shard_id)}.parquet"

    def marker_path(self, unit: WorkUnit) -> Path:
        return self.markers / safe_name(unit.model) / f"{safe_name(unit.shard_id)}.json"

    # -- is a unit done? -------------------------------------------------------------------------
    def unit_problem(self, unit: WorkUnit, plan: RunPlan | None = None) -> tuple[str, str] | None:
        """Why ``unit`` is not done under ``plan`` (default: the attached one), as ``(kind, text)``; None when it is.

        kind: ``missing`` (no marker), ``damaged`` (marker or part unreadable, or they disagree)
        or ``stale`` (a marker that does not match the plan: other utterances, changed clips,
        other settings, or an older marker format that recorded none of these).
        """
        marker = self.marker_path(unit)
        if not marker.exists():
            return ("missing", "no marker")
        try:
            info = json.loads(marker.read_text())
            expected = info["rows"]
            actual = pq.read_metadata(self.part_path(unit)).num_rows
        except Exception as exc:
            return ("damaged", f"marker or part unreadable ({exc})")
        if actual != expected:
            return ("damaged", f"part has {actual} rows, marker says {expected}")
        plan = plan if plan is not None else self.plan
        exp = plan.unit(unit) if plan is not None else None
        if plan is None or exp is None:
            return None
        if info.get("v") != MARKER_VERSION or "ids_digest" not in info:
            return ("stale", "marker written by an older version (it records no utt_ids or settings)")
        if info.get("ids_digest") != exp.ids_digest:
            return (
                "stale",
                f"part holds {info.get('n_ids')} other utterance(s) (written with {_layout_text(info.get('layout'))}; "
                f"this run has {_layout_text(plan.layout)} and puts {len(exp.utt_ids)} here)",
            )
        if info.get("content_digest") != exp.content_digest:
            old = info.get("clips") or []
            changed = [u for u, a, b in zip(exp.utt_ids, old, exp.clips) if a != b] if len(old) == len(exp.clips) else list(exp.utt_ids)
            return (
                "stale",
                f"{len(changed)} clip(s) changed since it was written (audio, reference or labels), e.g. {', '.join(changed[:3])}",
            )
        if info.get("settings_digest") != plan.settings_digests[unit.model]:
            return ("stale", f"settings changed: {_settings_diff(info.get('settings'), plan.settings[unit.model])}")
        return None

    def is_done(self, unit: WorkUnit) -> bool:
        """Done = marker present, the part has the marker's row count, and (with a plan) the marker matches it."""
        problem = self.unit_problem(unit)
        if problem is None:
            return True
        kind, text = problem
        if kind == "damaged":
            log.warning("unit %s: %s; it will be redone", unit.key, text)
        elif kind == "stale":
            log.debug("unit %s: %s; not done", unit.key, text)
        return False

    def pending_units(self, models: Sequence[str], also: Callable[[WorkUnit], bool] | None = None) -> list[WorkUnit]:
        """The plan's units (shard-major) that are not done, or for which ``also(unit)`` is true.

        Stale markers are reported once, with a count and an example, instead of per unit.
        """
        if self.plan is None:
            raise ConfigError("RunStore.pending_units needs a plan (RunStore.use_plan)")
        out: list[WorkUnit] = []
        stale: list[tuple[WorkUnit, str]] = []
        for sid in self.plan.shard_ids:
            for m in models:
                unit = WorkUnit(m, sid)
                problem = self.unit_problem(unit)
                if problem is not None and problem[0] == "damaged":
                    log.warning("unit %s: %s; it will be redone", unit.key, problem[1])
                elif problem is not None and problem[0] == "stale":
                    stale.append((unit, problem[1]))
                if problem is not None or (also is not None and also(unit)):
                    out.append(unit)
        if stale:
            unit, why = stale[0]
            log.warning(
                "%d unit(s) have results from an earlier run that do not match this run (e.g. %s: %s); "
                "they are rebuilt from stored rows of the same clips and settings where possible, otherwise redone",
                len(stale),
                unit.key,
                why,
            )
        return out

    # -- writing ---------------------------------------------------------------------------------
    def write_unit(
        self, unit: WorkUnit, rows: Sequence[Mapping[str, Any]], label_keys: Sequence[str], extra: Mapping[str, Any] | None = None
    ) -> None:
        """Atomically write a unit's part, then its marker (recording what the plan says the unit holds).

        Rows that are not the plan's utterances for the unit, in order, are refused: a marker must
        never vouch for rows it does not describe.
        """
        exp = self.plan.unit(unit) if self.plan is not None else None
        if exp is not None:
            got = tuple(str(r.get("utt_id")) for r in rows)
            if got != exp.utt_ids:
                raise ResultIntegrityError(
                    f"refusing to store {unit.key}: its {len(got)} row(s) are not the {len(exp.utt_ids)} planned utterance(s) "
                    f"(first rows {list(got[:3])}, planned {list(exp.utt_ids[:3])})"
                )
        self._write_part(self.part_path(unit), rows, label_keys)
        self._write_marker(unit, len(rows), extra)

    def _write_part(self, part: Path, rows: Sequence[Mapping[str, Any]], label_keys: Sequence[str], tmp_suffix: str = "") -> Path:
        part.parent.mkdir(parents=True, exist_ok=True)
        tmp = part.with_name(f".{part.name}.tmp-{os.getpid()}{tmp_suffix}")
        try:
            pq.write_table(rows_to_table(rows, label_keys) if self.kind == "asr" else pass_table(self.kind, rows), tmp)
            if tmp_suffix:
                return tmp  # staged: the caller renames it
            os.replace(tmp, part)
        finally:
            if not tmp_suffix and tmp.exists():
                tmp.unlink()
        return part

    def _write_marker(self, unit: WorkUnit, n_rows: int, extra: Mapping[str, Any] | None) -> None:
        marker: dict[str, Any] = {"model": unit.model, "shard": unit.shard_id, "rows": n_rows}
        if self.plan is not None:
            marker.update(self.plan.marker_fields(unit))
        marker.update(dict(extra or {}))
        atomic_write_text(self.marker_path(unit), json.dumps(marker, sort_keys=True, default=str))

    def write_model_facts(self, model: str, facts: Mapping[str, Any]) -> None:
        atomic_write_text(self.models_dir / f"{safe_name(model)}.json", json.dumps(facts, indent=2, sort_keys=True, default=str))

    def read_model_facts(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        if self.models_dir.is_dir():
            for f in sorted(self.models_dir.glob("*.json")):
                facts = json.loads(f.read_text())
                out[facts.get("model", f.stem)] = facts
        return out

    # -- reusing rows of stale units ---------------------------------------------------------------
    def _row_sources(self, model: str, skip: set[str]) -> dict[str, tuple[Path, int, str]]:
        """``utt_id -> (part, row, source shard)`` for rows that can stand in for the plan's rows.

        A row qualifies when its part is readable and holds exactly what its marker describes
        (ids digest and row count), the marker is of this version, not quarantined, for the same
        settings, and the row's clip digest equals the plan's for that id.
        """
        plan = self.plan
        if plan is None:
            return {}
        folder = self.markers / safe_name(model)
        out: dict[str, tuple[Path, int, str]] = {}
        if not folder.is_dir():
            return out
        for marker in sorted(folder.glob("*.json")):
            if marker.stem in skip:
                continue
            try:
                info = json.loads(marker.read_text())
                if (
                    info.get("v") != MARKER_VERSION
                    or info.get("model") != model
                    or info.get("quarantined")
                    or info.get("settings_digest") != plan.settings_digests[model]
                ):
                    continue
                part = self.parts / safe_name(model) / f"{marker.stem}.parquet"
                ids = [str(u) for u in pq.read_table(part, columns=["utt_id"]).column("utt_id").to_pylist()]
                clips = info.get("clips") or []
                if len(ids) != info.get("rows") or len(ids) != len(clips) or ids_digest(ids) != info.get("ids_digest"):
                    continue
            except Exception as exc:  # noqa: BLE001 - an unreadable stale unit is simply not a source
                log.debug("%s: not usable as a source of rows (%s)", marker, exc)
                continue
            for i, (uid, clip) in enumerate(zip(ids, clips)):
                if uid not in out and plan.clip_of(uid) == clip:
                    out[uid] = (part, i, str(info.get("shard")))
        return out

    def rebuild_from_parts(self, pending: Sequence[WorkUnit]) -> list[WorkUnit]:
        """Rebuild pending units from rows that stale parts already hold; returns the units still to run.

        After the manifest was reordered or the shard size changed, finished rows sit in parts of
        the old layout. A pending unit whose every clip has such a row (same settings, same clip
        digest) gets a new part made of those rows (``shard`` set to the new unit) and a current
        marker, without transcribing anything. All new parts are staged under temporary names
        before any is renamed into place, because a new unit's file may be an old unit's file
        that other new units still read from.
        """
        if self.plan is None or not pending:
            return list(pending)
        pending_keys = {(u.model, u.shard_id) for u in pending}
        staged: list[tuple[WorkUnit, Path, list[str]]] = []
        for model in dict.fromkeys(u.model for u in pending):
            if model not in self.plan.settings:
                continue
            done = {safe_name(sid) for sid in self.plan.shard_ids if (model, sid) not in pending_keys}
            sources = self._row_sources(model, done)
            if not sources:
                continue
            cache: OrderedDict[Path, list[dict[str, Any]]] = OrderedDict()
            for unit in (u for u in pending if u.model == model):
                exp = self.plan.shards[unit.shard_id]
                hits = [sources.get(uid) for uid in exp.utt_ids]
                if not exp.utt_ids or any(h is None for h in hits):
                    continue
                rows: list[dict[str, Any]] = []
                for (part, i, _), uid in zip(hits, exp.utt_ids):  # type: ignore[misc]
                    if part not in cache:
                        cache[part] = pq.read_table(part).to_pylist()
                        while len(cache) > 8:
                            cache.popitem(last=False)
                    row = dict(cache[part][i])
                    if str(row.get("utt_id")) != uid or row.get("model") != model:
                        break
                    row["shard"] = unit.shard_id
                    rows.append(row)
                else:
                    label_keys = sorted({k for r in rows for k, v in r.items() if k not in RESULT_COLUMNS and v is not None})
                    tmp = self._write_part(self.part_path(unit), rows, label_keys, tmp_suffix="-rebuild")
                    staged.append((unit, tmp, sorted({h[2] for h in hits if h is not None})))
        for unit, tmp, from_shards in staged:
            os.replace(tmp, self.part_path(unit))
            self._write_marker(unit, len(self.plan.shards[unit.shard_id].utt_ids), {"rebuilt_from": from_shards})
        if staged:
            by_model = Counter(u.model for u, _, _ in staged)
            for model, n in by_model.items():
                log.info(
                    "%s: %d unit(s) rebuilt from rows stored by an earlier run (same clips and settings); not transcribed again", model, n
                )
        rebuilt = {(u.model, u.shard_id) for u, _, _ in staged}
        return [u for u in pending if (u.model, u.shard_id) not in rebuilt]

    # -- consolidation ---------------------------------------------------------------------------
    def done_parts(self, models: Iterable[str] | None = None) -> list[Path]:
        """Parts that count as finished: the plan's done units, or (no plan) every part whose marker agrees with it."""
        if self.plan is not None:
            names = list(models) if models is not None else self.plan.models
            return [self.part_path(WorkUnit(m, s)) for m in names for s in self.plan.shard_ids if self.is_done(WorkUnit(m, s))]
        wanted = None if models is None else {safe_name(m) for m in models}
        out: list[Path] = []
        if not self.markers.is_dir():
            return out
        for marker in sorted(self.markers.glob("*/*.json")):
            if wanted is not None and marker.parent.name not in wanted:
                continue
            try:
                info = json.loads(marker.read_text())
                unit = WorkUnit(info["model"], info["shard"])
            except Exception as exc:  # noqa: BLE001 - a damaged marker is not a finished unit
                log.warning("%s: unreadable marker (%s); its unit is not reported", marker, exc)
                continue
            if self.is_done(unit):
                out.append(self.part_path(unit))
        return out

    def _empty(self) -> pa.Table:
        return rows_to_table([], []) if self.kind == "asr" else pass_table(self.kind, [])

    def consolidate(
        self, models: Iterable[str] | None = None, expected_ids: Iterable[str] | None = None, *, plan: RunPlan | None = None
    ) -> pa.Table:
        """The run's rows as one table, checked, then written atomically to the kind's table (``utterances.parquet`` for ASR),
        fingerprinted as it is written (``table_sha256``).

        With a plan (``plan``, else the one a runner attached): reads exactly the parts of the
        plan's units for ``models`` (default: all the plan's models), and raises
        ``ResultIntegrityError`` unless they hold every ``(model, utt_id)`` of the plan, or of
        ``expected_ids`` when given, exactly once. Models the runner reported as not run (failed to
        load) are left out with a warning: their finished units stay on disk for a later resume,
        and the summary says why they did not run. Without a plan (a tool inspecting a store):
        every part whose marker agrees with it, and doubled rows (or ids not covered exactly by
        ``expected_ids``) raise. Nothing is written when the check fails.
        """
        plan = plan if plan is not None else self.plan
        notes: list[str] = []
        if plan is None:
            names = None if models is None else list(models)
            parts = self.done_parts(names)
            tables = [pq.read_table(p) for p in parts]
            table = pa.concat_tables(tables, promote_options="permissive") if tables else self._empty()
            check_models = sorted(set(table.column("model").to_pylist())) if names is None else names
            expected = None if expected_ids is None else [str(u) for u in expected_ids]
        else:
            names = list(models) if models is not None else plan.models
            left_out = [m for m in names if m in plan.not_run]
            if left_out:
                log.warning(
                    "left out of the results (did not run): %s; their finished units are kept for a later resume", ", ".join(left_out)
                )
            check_models = [m for m in names if m not in plan.not_run]
            unknown = [m for m in check_models if m not in plan.settings]
            if unknown:
                raise ResultIntegrityError(f"model(s) {', '.join(unknown)} are not part of this run's plan; their rows cannot be checked")
            tables = []
            for m in check_models:
                for sid in plan.shard_ids:
                    unit = WorkUnit(m, sid)
                    problem = self.unit_problem(unit, plan)
                    if problem is not None:
                        notes.append(f"{unit.key}: {problem[1]}")
                        continue
                    t = pq.read_table(self.part_path(unit))
                    if [str(u) for u in t.column("utt_id").to_pylist()] != list(plan.shards[sid].utt_ids):
                        notes.append(f"{unit.key}: part does not hold the utterances its marker records")
                        continue
                    tables.append(t)
            table = pa.concat_tables(tables, promote_options="permissive") if tables else self._empty()
            expected = [str(u) for u in expected_ids] if expected_ids is not None else plan.utt_ids()
        check_rows(table, check_models, expected, notes, self.root)
        table = table.sort_by([("model", "ascending"), ("utt_id", "ascending")])
        self.root.mkdir(parents=True, exist_ok=True)
        self.table_sha256 = write_hashed(self.table_path, lambda fh: pq.write_table(table, fh))
        return table


def check_rows(
    table: pa.Table, models: Sequence[str], expected_ids: Sequence[str] | None, notes: Sequence[str] = (), where: Path | str = ""
) -> None:
    """Raise ``ResultIntegrityError`` unless ``table`` holds each ``(model, utt_id)`` exactly once.

    With ``expected_ids``: exactly the expected utterances for every model in ``models`` (none
    missing, none foreign); without: no ``(model, utt_id)`` twice and no other model. The message
    counts missing, doubled and unexpected rows with a few examples, and lists units that could
    not be used. Counting runs in Arrow, so 100k utterances x many models stay cheap.
    """
    import pyarrow.compute as pc

    def col(name: str) -> pa.Array:
        return pc.fill_null(table.column(name).cast(pa.string()), "<null>") if table.num_rows else pa.array([], pa.string())

    keys = pa.table({"model": col("model"), "utt_id": col("utt_id")})
    counts = keys.group_by(["model", "utt_id"]).aggregate([([], "count_all")])
    doubled = [(r["model"], r["utt_id"], r["count_all"]) for r in counts.filter(pc.greater(counts["count_all"], 1)).to_pylist()]
    model_set = pa.array(list(dict.fromkeys(models)), pa.string())
    in_models = pc.is_in(counts["model"], value_set=model_set)
    missing: list[tuple[str, str]] = []
    n_missing = 0
    if expected_ids is not None:
        wanted = pa.array(list(dict.fromkeys(str(u) for u in expected_ids)), pa.string())
        unexpected_t = counts.filter(pc.invert(pc.and_(in_models, pc.is_in(counts["utt_id"], value_set=wanted))))
        for m in dict.fromkeys(models):
            present = counts.filter(pc.equal(counts["model"], m))["utt_id"]
            lost = wanted.filter(
                pc.invert(pc.is_in(wanted, value_set=present.combine_chunks() if present.num_chunks else pa.array([], pa.string())))
            )
            n_missing += len(lost)
            missing.extend((m, u) for u in lost.slice(0, _EXAMPLES).to_pylist())
        head = (
            f"expected {len(wanted)} utterance(s) x {len(model_set)} model(s) = {len(wanted) * len(model_set)} rows, found {keys.num_rows}"
        )
    else:
        unexpected_t = counts.filter(pc.invert(in_models))
        head = f"found {keys.num_rows} rows"
    n_unexpected = unexpected_t.num_rows
    unexpected = [(r["model"], r["utt_id"]) for r in unexpected_t.slice(0, _EXAMPLES).to_pylist()]
    if not (doubled or n_missing or n_unexpected):
        return

    def more(n: int) -> str:
        return ", ..." if n > _EXAMPLES else ""

    parts = []
    if n_missing:
        parts.append(f"{n_missing} missing (e.g. {', '.join(f'{m}/{u}' for m, u in missing[:_EXAMPLES])}{more(n_missing)})")
    if doubled:
        parts.append(f"{len(doubled)} doubled (e.g. {', '.join(f'{m}/{u} x{n}' for m, u, n in doubled[:_EXAMPLES])}{more(len(doubled))})")
    if n_unexpected:
        parts.append(f"{n_unexpected} unexpected (e.g. {', '.join(f'{m}/{u}' for m, u in unexpected)}{more(n_unexpected)})")
    why = f"; units not usable: {', '.join(list(notes)[:_EXAMPLES])}{more(len(notes))}" if notes else ""
    raise ResultIntegrityError(
        f"results under {where} are not exactly one row per model and utterance ({head}): {', '.join(parts)}{why}. "
        "Nothing was scored. Finished units are kept: re-run the same command to redo what is missing, "
        "or use a new --out directory"
    )


__all__ = [
    "RESULT_COLUMNS",
    "RunPlan",
    "RunStore",
    "UnitPlan",
    "check_rows",
    "ids_digest",
    "rows_to_table",
]
