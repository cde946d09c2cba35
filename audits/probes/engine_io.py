"""What the audio probes share for running the engine on derived audio: per-configuration work
folders, running models into a resumable store, and reading hypotheses back."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from engine.data import ModelSpec, ProgressFn, Utterance
from engine.datasets import Dataset
from engine.engine import EngineOptions
from engine.keyed.unit_store import keyed_workspace
from engine.run.store import RunStore

log = logging.getLogger(__name__)


def fresh_workspace(probes_dir: Path, probe: str, key: Mapping[str, Any]) -> Path:
    """The probe's work folder for exactly this configuration, keyed through the engine's unit contract."""
    return keyed_workspace(probes_dir, probe, key)


def run_models(
    dataset: Dataset, specs: Sequence[ModelSpec], root: Path, progress: ProgressFn | None, engine: EngineOptions | None = None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Run ``specs`` on ``dataset`` with the run's engine (in-process or Ray) into ``root`` (resumable); rows and model facts.

    The re-runs on derived audio are ordinary ASR passes of the engine: the same unit contract,
    and on ``--engine ray`` / ``--address`` the same actors and GPUs as the main pass.
    """
    store = RunStore(root)
    runner = (engine or EngineOptions()).runner(dataset, list(specs), store, warmup=0, progress=progress)
    facts = runner.run()
    table = store.consolidate([s.name for s in specs], plan=runner.plan).to_pandas()
    return table, facts


def hyp_map(rows: pd.DataFrame) -> dict[tuple[str, str], str | None]:
    """(model, utt_id) -> raw hypothesis, None for failed rows."""
    out: dict[tuple[str, str], str | None] = {}
    if rows is None or len(rows) == 0:
        return out
    err = rows["error"] if "error" in rows else pd.Series([None] * len(rows))
    for m, u, h, e in zip(rows["model"], rows["utt_id"], rows["hyp_raw"], err):
        out[(str(m), str(u))] = None if (e is not None and not pd.isna(e)) or h is None else str(h)
    return out


def made_by_probe(u: Utterance) -> bool:
    """Audio a probe derived from the benchmark (masked copy, re-voicing); never probed again.

    A benchmark's own derived clips (a ``parent_id`` without a probe derivation, like the demo
    corpus's emotional re-voicings) are benchmark clips and are probed like any other.
    """
    return bool((u.derivation or {}).get("probe"))


def originals(dataset: Dataset) -> list[Utterance]:
    """The benchmark's clips: everything in the dataset that no probe made."""
    return [u for shard in dataset.iter_shards() for u in shard.utterances if not made_by_probe(u)]


def failed_models(facts: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    return {m: str(f.get("error", f.get("status"))) for m, f in facts.items() if f.get("status") not in (None, "loaded")}
