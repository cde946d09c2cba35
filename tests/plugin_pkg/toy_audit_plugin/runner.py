"""Plug-in runners: every model in this process, one model loaded at a time.

A batch scheduler's runner would submit the units elsewhere; these keep the engine's unit
contract by handing the work to the engine's in-process runners with ``max_models_loaded=1``.
Each declares the pass kinds it runs (``runs``), and the engine hands it only those:
``toy-serial`` runs ASR shard passes (the recipe's ASR pass, the probes' re-runs), so a recipe
whose sections need keyed, speaker or emotion passes is refused on it before anything runs;
``toy-all`` also runs speaker and emotion shard passes and keyed passes (word timings, masked
clips, judges, diarization), each on its own: it does not declare ``joint``, so the engine never
hands it a joint run and the sections run their passes after the ASR pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.data import DecodeOptions, ModelSpec, ProgressFn
from engine.datasets import Dataset
from engine.engine import KEYED, SHARD_ASR, SHARD_SER, SHARD_SV, Runner, ShardRun
from engine.keyed.keyed_pass import KeyedOutcome, KeyedPass, KeyedProgress, run_inprocess
from engine.run.runner import InProcessRunner


class SerialRunner(Runner):
    """``--engine toy-serial``: ASR shard passes, one model loaded at a time."""

    runs = frozenset({SHARD_ASR})

    def shard_run(
        self,
        dataset: Dataset,
        specs: Sequence[ModelSpec],
        store: Any,
        *,
        warmup: int,
        warmups: Mapping[str, int] | None,
        decode_options: DecodeOptions,
        progress: ProgressFn | None,
    ) -> ShardRun:
        return InProcessRunner(
            dataset,
            list(specs),
            store,
            warmup=warmup,
            warmups=warmups,
            decode_options=decode_options,
            progress=progress,
            max_models_loaded=1,
        )


class SerialAllRunner(SerialRunner):
    """``--engine toy-all``: every shard kind on its own, and keyed passes one worker at a time, without retries."""

    runs = frozenset({SHARD_ASR, SHARD_SV, SHARD_SER, KEYED})

    def run_keyed(self, passes: Sequence[KeyedPass], progress: KeyedProgress | None) -> KeyedOutcome:
        return run_inprocess(passes, max_retries=0, progress=progress)
