"""Several pass kinds in one runner run: every decoded shard feeds every pending backend of every kind.

The ASR pass and the dataset passes of a recipe's sections (speaker verification, emotion) read
the same shards. Run one after the other, each pass decodes every shard again and the passes
never share a cluster; handed to one runner together (:func:`run_joint`), a shard is decoded once
for all of them (in-process: once per shard; Ray: one decode task whose object every actor
reads) and the Ray runner's ordering (slowest model first, idle slots to the model with the most
work left) spans every pass of the run.

:class:`PassStores` is the store the runners are given then: it presents the
:class:`~engine.run.store.RunStore` interface the runners use and sends each call to the store of
the unit's model's kind, so parts, markers, settings and facts are byte-for-byte where a pass of
that kind alone would have put them. A later ``run_embed_backends`` of the same specs therefore
finds its units finished under the same contract and computes nothing; :class:`JointRecord`
tells it what the joint run did (which backends were pending, how many units ran), so the
section's summary reads as if it had run the pass itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.data import DecodeOptions, ModelSpec, ProgressFn, WorkUnit
from engine.errors import ConfigError
from engine.run.passes import check_device, check_kind
from engine.run.store import RunPlan, RunStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PassRequest:
    """One backend a section would run over the recipe's own dataset, and its warm-up count."""

    spec: ModelSpec
    warmup: int = 1


@dataclass(frozen=True)
class JointRecord:
    """What a joint run did for one non-ASR backend: its settings digest, whether it had pending
    units when the run began, and how many units the run wrote for it."""

    kind: str
    settings_digest: str
    pending: bool
    n_units_run: int


class PassStores:
    """The RunStore interface over the stores of several pass kinds of one run directory.

    ``kinds`` maps each model name to its kind (``asr``, ``sv``, ``ser``); a call about a unit or
    a model goes to that kind's :class:`RunStore`. Names must be distinct across kinds (one plan
    holds them all).
    """

    def __init__(self, out_dir: Path | str, kinds: Mapping[str, str]) -> None:
        self.root = Path(out_dir)
        self.kinds = {name: check_kind(kind, f"model '{name}'") for name, kind in kinds.items()}
        self.stores = {kind: RunStore(self.root, kind=kind) for kind in dict.fromkeys(self.kinds.values())}
        self.plan: RunPlan | None = None

    @classmethod
    def of(cls, out_dir: Path | str, specs: Sequence[ModelSpec]) -> "PassStores":
        names = [s.name for s in specs]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"a joint run needs distinct backend names across pass kinds; repeated: {', '.join(dupes)}")
        return cls(out_dir, {s.name: s.kind for s in specs})

    def store(self, model: str) -> RunStore:
        """The store of ``model``'s kind."""
        try:
            return self.stores[self.kinds[model]]
        except KeyError:
            raise ConfigError(f"model '{model}' is not part of this joint run") from None

    def use_plan(self, plan: RunPlan | None) -> None:
        """Attach the run's plan to every kind's store (each is only asked about its own models)."""
        self.plan = plan
        for s in self.stores.values():
            s.use_plan(plan)

    def part_path(self, unit: WorkUnit) -> Path:
        return self.store(unit.model).part_path(unit)

    def marker_path(self, unit: WorkUnit) -> Path:
        return self.store(unit.model).marker_path(unit)

    def is_done(self, unit: WorkUnit) -> bool:
        return self.store(unit.model).is_done(unit)

    def _by_kind(self, models: Iterable[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for m in models:
            self.store(m)  # an unknown model raises here
            out.setdefault(self.kinds[m], []).append(m)
        return out

    def _shard_major(self, units: Iterable[WorkUnit], models: Sequence[str]) -> list[WorkUnit]:
        """Units in the order one store returns them: shard by shard, models in the given order."""
        shard_pos = {sid: i for i, sid in enumerate(self.plan.shard_ids)} if self.plan is not None else {}
        model_pos = {m: i for i, m in enumerate(models)}
        return sorted(units, key=lambda u: (shard_pos.get(u.shard_id, len(shard_pos)), model_pos.get(u.model, len(model_pos))))

    def pending_units(self, models: Sequence[str], also: Callable[[WorkUnit], bool] | None = None) -> list[WorkUnit]:
        """Every kind's pending units for ``models``, shard-major across kinds (so a shard's units sit together)."""
        out: list[WorkUnit] = []
        for kind, names in self._by_kind(models).items():
            out.extend(self.stores[kind].pending_units(names, also=also))
        return self._shard_major(out, list(models))

    def rebuild_from_parts(self, pending: Sequence[WorkUnit]) -> list[WorkUnit]:
        """Each kind's store rebuilds its own units from stale parts; returns the units still to run, in the given order."""
        left: set[tuple[str, str]] = set()
        for kind in self.stores:
            mine = [u for u in pending if self.kinds.get(u.model) == kind]
            left.update((u.model, u.shard_id) for u in self.stores[kind].rebuild_from_parts(mine))
        return [u for u in pending if (u.model, u.shard_id) in left]

    def write_unit(
        self, unit: WorkUnit, rows: Sequence[Mapping[str, Any]], label_keys: Sequence[str], extra: Mapping[str, Any] | None = None
    ) -> None:
        self.store(unit.model).write_unit(unit, rows, label_keys, extra)

    def write_model_facts(self, model: str, facts: Mapping[str, Any]) -> None:
        self.store(model).write_model_facts(model, facts)

    def read_model_facts(self) -> dict[str, dict[str, Any]]:
        """Every kind's stored facts for this run's models (a name of another kind's folder is not read as this run's)."""
        out: dict[str, dict[str, Any]] = {}
        for kind, s in self.stores.items():
            out.update({n: f for n, f in s.read_model_facts().items() if self.kinds.get(n) == kind})
        return out


@dataclass
class JointOutcome:
    """The ASR facts and plan of a joint run (what the pipeline consolidates and scores), and the
    record of every other backend it ran (what the sections' passes are told: :class:`JointRecord`)."""

    facts: dict[str, dict[str, Any]]
    plan: RunPlan | None
    records: dict[str, JointRecord] = field(default_factory=dict)


def run_joint(
    engine: Any,
    dataset: Any,
    asr: Sequence[ModelSpec],
    extra: Sequence[PassRequest],
    out_dir: Path | str,
    *,
    warmup: int,
    decode_options: DecodeOptions,
    progress: ProgressFn | None = None,
) -> JointOutcome:
    """Run the ASR specs and ``extra`` (SV/SER backends over the same dataset) as one runner run on ``engine``.

    Returns the ASR specs' facts (as the ASR runner alone would) and a :class:`JointRecord` per
    extra backend. ``engine`` is an :class:`~engine.engine.EngineOptions`.
    """
    specs = [*asr, *(r.spec for r in extra)]
    store = PassStores.of(out_dir, specs)
    for r in extra:  # a GPU asked of a CPU-only backend is refused before any pass starts (as run_embed_backends does)
        check_device(r.spec, f"{r.spec.kind} pass '{r.spec.name}'")
    warmups = {r.spec.name: r.warmup for r in extra}
    runs: dict[str, int] = {}

    def counting(event: str, n: int, info: dict[str, Any]) -> None:
        if event == "unit":
            name = str(info.get("model"))
            runs[name] = runs.get(name, 0) + n
        if progress:
            progress(event, n, info)

    runner = engine.runner(dataset, specs, store, warmup=warmup, warmups=warmups, decode_options=decode_options, progress=counting)
    pending = {u.model for u in runner.pending()}
    facts = runner.run()
    asr_names = {s.name for s in asr}
    records = {
        r.spec.name: JointRecord(r.spec.kind, runner.plan.settings_digests[r.spec.name], r.spec.name in pending, runs.get(r.spec.name, 0))
        for r in extra
    }
    log.info("joint run: %d ASR and %d section backend(s) decoded each shard once", len(asr), len(extra))
    return JointOutcome({n: f for n, f in facts.items() if n in asr_names}, runner.plan, records)


__all__ = ["JointOutcome", "JointRecord", "PassRequest", "PassStores", "run_joint"]
