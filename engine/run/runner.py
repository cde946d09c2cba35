"""In-process runner: streams ``(model, shard)`` units through loaded backends.

The pieces (``decode_shard``, ``process_unit``) are the same ones the Ray engine's actors call,
so both runners produce identical rows. Audio is decoded once per shard and shared by every model.
"""

from __future__ import annotations

import logging
import os
import platform
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from engine.audio.decoding import decode
from engine.backends.base import ASRBackend
from engine.backends.hosted.scrub import error_text, scrub
from engine.data import (
    CONFIDENCE_COLUMNS,
    PREDICTIONS_BACKEND,
    DecodedAudio,
    DecodeOptions,
    ModelSpec,
    ProgressFn,
    Shard,
    Utterance,
    WorkUnit,
)
from engine.datasets.base import Dataset
from engine.errors import AuditError, BackendUnavailable
from engine.run.memory_plan import LoadGroup, plan_groups
from engine.run.passes import WARMUP_ATTR, build_pass_backend, embed_row, process_embed_unit
from engine.run.ray_setup import placement
from engine.run.store import RunPlan, RunStore

if TYPE_CHECKING:
    from engine.run.joint_pass import PassStores

log = logging.getLogger(__name__)


@dataclass
class ModelState:
    spec: ModelSpec
    backend: ASRBackend | None = None
    facts: dict[str, Any] = field(default_factory=dict)


def decode_shard(shard: Shard, root: Path | None, opts: DecodeOptions) -> list[DecodedAudio]:
    """Decode every clip of a shard once; record problems as errors on the decoded item."""
    out = []
    for u in shard.utterances:
        if u.problem:
            out.append(DecodedAudio(u.utt_id, None, 16_000, error=u.problem))
        else:
            out.append(decode(u, root=root, max_duration_s=opts.max_duration_s, allow_outside_root=opts.allow_outside_root))
    return out


def _base_row(u: Utterance, model: str, shard_id: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        "utt_id": u.utt_id,
        "model": model,
        "hyp_raw": None,
        "ref_raw": u.reference,
        "duration_s": u.duration_s,
        "infer_s": None,
        "error": None,
        "speaker": u.speaker,
        "shard": shard_id,
        "parent_id": u.parent_id,
    }
    for k, v in u.labels.items():
        row.setdefault(k, v)
    return row


def _copy_confidences(backend: ASRBackend, rows: Sequence[dict[str, Any]]) -> None:
    """Copy the backend's per-clip confidences of its last batch into the rows, when it has them."""
    conf = getattr(backend, "last_confidences", None)
    if not conf or len(conf) != len(rows):
        return
    for row, c in zip(rows, conf):
        for key in CONFIDENCE_COLUMNS:
            if c and c.get(key) is not None:
                row[key] = float(c[key])


def process_unit(
    backend: ASRBackend,
    model: str,
    shard: Shard,
    decoded: Sequence[DecodedAudio],
    batch_size: int,
) -> list[dict[str, Any]]:
    """Transcribe one shard with one model; returns one row per utterance, errors included.

    Clips are batched longest-first (less padding); a batch's wall time is shared among its clips
    in proportion to their durations so that per-slice RTFx stays meaningful.
    """
    rows = {u.utt_id: _base_row(u, model, shard.shard_id) for u in shard.utterances}
    ok: list[tuple[Utterance, DecodedAudio]] = []
    for u, d in zip(shard.utterances, decoded):
        if d.error is not None:
            rows[u.utt_id]["error"] = d.error
        else:
            rows[u.utt_id]["duration_s"] = d.duration_s
            ok.append((u, d))
    ok.sort(key=lambda p: p[1].duration_s, reverse=True)
    for i in range(0, len(ok), max(1, batch_size)):
        batch = ok[i : i + max(1, batch_size)]
        try:
            t0 = time.perf_counter()
            hyps = backend.transcribe_batch([d.samples for _, d in batch])
            dt = time.perf_counter() - t0
            if len(hyps) != len(batch):
                raise AuditError(f"backend returned {len(hyps)} hypotheses for {len(batch)} clips")
            total = sum(d.duration_s for _, d in batch) or 1.0
            for (u, d), h in zip(batch, hyps):
                rows[u.utt_id]["hyp_raw"] = "" if h is None else str(h)
                rows[u.utt_id]["infer_s"] = dt * d.duration_s / total
            _copy_confidences(backend, [rows[u.utt_id] for u, _ in batch])
        except Exception as exc:
            log.warning("%s: batch of %d failed (%s); retrying clip by clip", model, len(batch), scrub(str(exc)))
            for u, d in batch:
                try:
                    t0 = time.perf_counter()
                    (h,) = backend.transcribe_batch([d.samples])
                    rows[u.utt_id]["infer_s"] = time.perf_counter() - t0
                    rows[u.utt_id]["hyp_raw"] = "" if h is None else str(h)
                    _copy_confidences(backend, [rows[u.utt_id]])
                except Exception as exc2:
                    rows[u.utt_id]["error"] = error_text(exc2, "backend error: ")
    return [rows[u.utt_id] for u in shard.utterances]


def process_pass(backend: Any, spec: ModelSpec, shard: Shard, decoded: Sequence[DecodedAudio]) -> list[dict[str, Any]]:
    """One unit of any pass kind (``engine/run/passes.py``): the rows both runners write."""
    if spec.kind == "asr":
        return process_unit(backend, spec.name, shard, decoded, spec.batch_size)
    return process_embed_unit(backend, spec.kind, spec.name, shard, decoded, spec.batch_size)


def failed_rows(spec: ModelSpec, shard: Shard, message: str) -> list[dict[str, Any]]:
    """The rows of a quarantined unit: every utterance of the shard, with ``message`` as its error."""
    rows = []
    for u in shard.utterances:
        row = _base_row(u, spec.name, shard.shard_id) if spec.kind == "asr" else embed_row(u, spec.name, shard.shard_id)
        row["error"] = message
        rows.append(row)
    return rows


def prediction_rows(dataset: Dataset, model: str, shard: Shard) -> list[dict[str, Any]]:
    """Rows for a predictions-only dataset (no audio, no timing)."""
    preds = dataset.predictions.get(model, {})
    out = []
    for u in shard.utterances:
        row = _base_row(u, model, shard.shard_id)
        if u.utt_id in preds:
            row["hyp_raw"] = preds[u.utt_id]
        else:
            row["error"] = f"no prediction for '{u.utt_id}' in {model}.jsonl"
        out.append(row)
    return out


def hardware_facts() -> dict[str, Any]:
    """Where the run ran: platform, CPU (count, vector flags), torch/CUDA and CTranslate2 facts."""
    facts: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
    }
    try:
        import torch

        facts["torch"] = torch.__version__
        facts["cuda_available"] = bool(torch.cuda.is_available())
        if torch.cuda.is_available():
            facts["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:
        pass  # torch missing or broken: the facts then say nothing about torch or CUDA
    facts["cpu_flags"] = cpu_simd_flags()
    facts.update(ctranslate2_facts())
    return facts


_SIMD_FLAGS = (
    "sse4_1",
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx_vnni",
    "amx_int8",
    "amx_bf16",
    "neon",
    "asimd",
    "asimddp",
    "sve",
)


def cpu_simd_flags(cpuinfo: str = "/proc/cpuinfo") -> list[str]:
    """The vector instruction-set flags the CPU reports (those math kernels dispatch on); [] off Linux."""
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            have = set(value.split())
            return [f for f in _SIMD_FLAGS if f in have]
    return []


def ctranslate2_facts() -> dict[str, Any]:
    """CTranslate2's version, CPU compute types, ISA overrides and, once a CPU model was loaded in
    this process, the ISA and GEMM backends it reported (int8 kernels differ between them, and so
    can the decoded words)."""
    try:
        import ctranslate2
    except ImportError:
        return {}
    from engine.backends.asr.faster_whisper import ct2_cpu_report

    return {
        "ctranslate2": {
            "version": ctranslate2.__version__,
            "cpu_compute_types": sorted(ctranslate2.get_supported_compute_types("cpu")),
            "env": {k: os.environ[k] for k in ("CT2_FORCE_CPU_ISA", "CT2_USE_MKL", "MKL_ENABLE_INSTRUCTIONS") if k in os.environ},
            "cpu_report": ct2_cpu_report(),
        }
    }


def start_info(models: Sequence[ModelSpec], pending: Sequence[WorkUnit]) -> dict[str, Any]:
    """The ``start`` progress event's details: the pass (its models' kinds, e.g. ``asr`` or ``asr+sv``)
    and the pending ``(model, shard)`` units, so a progress display can name the pass and estimate
    the time left from each model's own speed."""
    kinds = sorted({getattr(m, "kind", "asr") for m in models}, key=lambda k: (k != "asr", k))
    return {"pass": "+".join(kinds) or "asr", "units": [(u.model, u.shard_id) for u in pending]}


def load_model(spec: ModelSpec, warmup: int) -> ModelState:
    """Load and warm one model; a failure is recorded in its facts, never raised."""
    state = ModelState(spec)
    facts: dict[str, Any] = {
        "model": spec.name,
        "backend": spec.backend,
        "batch_size": spec.batch_size,
        "warmup_batches": 0,
        **dict(spec.meta),
    }
    if spec.kind != "asr":
        facts["kind"] = spec.kind
    try:
        backend = build_pass_backend(spec)
        t0 = time.perf_counter()
        backend.load()
        facts["load_s"] = time.perf_counter() - t0
        if spec.kind == "asr":
            for _ in range(warmup):
                backend.warmup()
                facts["warmup_batches"] += 1
        else:  # SV/SER: one discarded call on the first real clip (engine/run/passes.py)
            setattr(backend, WARMUP_ATTR, warmup)
            facts["warmup_batches"] = warmup
        facts["info"] = backend.info().as_dict()
        facts["status"] = "loaded"
        state.backend = backend
    except BackendUnavailable as exc:
        facts.update(status="unavailable", error=scrub(str(exc)))
        log.error("model %s unavailable: %s", spec.name, facts["error"])
    except Exception as exc:
        facts.update(status="failed-to-load", error=error_text(exc), traceback=scrub(traceback.format_exc(limit=5)))
        log.error("model %s failed to load: %s", spec.name, facts["error"])
    state.facts = facts
    return state


class InProcessRunner:
    """Runs every pending unit in this process: shard-major, all models loaded once, or, when
    they do not fit the memory budget (or ``max_models_loaded``), one load group at a time.

    With ``prefetch`` (default) one background thread reads and decodes the next shard while the
    models work on the current one, so on a GPU the CPU-side decoding does not sit between
    forward passes (soundfile, soxr and the model libraries release the GIL). At most two shards
    of audio are alive at once: the current one and the next.

    The runner plans every unit (``plan``: which utterances each holds, with which settings) and
    attaches the plan to the store, so resume skips only units whose markers match it exactly and
    ``store.consolidate`` checks the final table against it.
    """

    def __init__(
        self,
        dataset: Dataset,
        models: Sequence[ModelSpec],
        store: RunStore | PassStores,
        warmup: int = 1,
        decode_options: DecodeOptions = DecodeOptions(),
        progress: ProgressFn | None = None,
        prefetch: bool = True,
        max_models_loaded: int | None = None,
        memory_budget_mb: float | None = None,
        warmups: Mapping[str, int] | None = None,
    ) -> None:
        self.warmups = dict(warmups or {})  # per-model warm-up counts (a joint run's section backends keep theirs)
        self.max_models_loaded = max_models_loaded  # load groups (engine/run/memory_plan.py)
        self.memory_budget_mb = memory_budget_mb
        self.dataset = dataset
        self.models = list(models)
        self.store = store
        self.warmup = warmup
        self.decode_options = decode_options
        self.progress = progress
        self.prefetch = prefetch
        self.plan = RunPlan.build(dataset, self.models, asdict(decode_options))
        store.use_plan(self.plan)

    def _read_shard(self, shard_id: str) -> tuple[Shard, list[DecodedAudio]]:
        shard = self.dataset.load_shard(shard_id)
        decoded = decode_shard(shard, self.dataset.root, self.decode_options) if self.dataset.has_audio else []
        return shard, decoded

    def pending(self) -> list[WorkUnit]:
        """Units whose marker is missing, damaged or does not match the plan (shard-major order)."""
        self.store.use_plan(self.plan)
        return self.store.pending_units([m.name for m in self.models])

    def run(self) -> dict[str, dict[str, Any]]:
        """Process pending units; returns per-model facts (also written to the store).

        Pending units whose rows an earlier run already stored under another layout are rebuilt
        from those rows first (``RunStore.rebuild_from_parts``); only the rest is transcribed.
        """
        if self.dataset.has_audio and len(self.models) > 1:
            groups = plan_groups(self.models, self.max_models_loaded, self.memory_budget_mb)
            if len(groups) > 1:
                return self._run_in_groups(groups)
        pending = self.store.rebuild_from_parts(self.pending())
        pending_models = {u.model for u in pending}
        states: dict[str, ModelState] = {}
        previous = self.store.read_model_facts()
        for spec in self.models:
            if not self.dataset.has_audio:
                facts = {"model": spec.name, "backend": PREDICTIONS_BACKEND, "status": "loaded", "batch_size": None, "warmup_batches": 0}
                states[spec.name] = ModelState(spec, None, facts)
            elif spec.name in pending_models:
                if self.progress:
                    self.progress("loading", 0, {"model": spec.name})
                states[spec.name] = load_model(spec, self.warmups.get(spec.name, self.warmup))
                self._record_usage(states[spec.name], previous.get(spec.name))
            else:
                states[spec.name] = ModelState(spec, None, previous.get(spec.name, {"model": spec.name, "status": "loaded"}))
            self.store.write_model_facts(spec.name, states[spec.name].facts)
        if self.progress:
            self.progress("start", len(pending), start_info(self.models, pending))
        by_shard: dict[str, list[WorkUnit]] = {}
        for u in pending:
            by_shard.setdefault(u.shard_id, []).append(u)
        work: list[tuple[str, list[WorkUnit]]] = []
        for shard_id, units in by_shard.items():
            runnable = [u for u in units if not self.dataset.has_audio or states[u.model].backend is not None]
            if runnable:
                work.append((shard_id, runnable))
            elif self.progress:
                self.progress("skip", len(units), {"shard": shard_id})
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-decode") if self.prefetch and len(work) > 1 else None
        nxt: Future[tuple[Shard, list[DecodedAudio]]] | None = None
        try:
            if pool is not None and work:
                nxt = pool.submit(self._read_shard, work[0][0])
            for i, (shard_id, runnable) in enumerate(work):
                if nxt is not None:
                    shard, decoded = nxt.result()
                    nxt = pool.submit(self._read_shard, work[i + 1][0]) if pool is not None and i + 1 < len(work) else None
                else:
                    shard, decoded = self._read_shard(shard_id)
                for unit in runnable:
                    st = states[unit.model]
                    if self.dataset.has_audio:
                        assert st.backend is not None
                        rows = process_pass(st.backend, st.spec, shard, decoded)
                    else:
                        rows = prediction_rows(self.dataset, unit.model, shard)
                    label_keys = sorted({k for u in shard.utterances for k in u.labels})
                    self._write(unit, rows, label_keys)
                    self._record_usage(st, previous.get(unit.model))
                    if self.progress:
                        self.progress("unit", 1, {"model": unit.model, "shard": shard_id, "rows": rows})
                del decoded
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
            for st in states.values():
                if st.backend is not None:
                    st.backend.close()
        for name in pending_models:
            st = states[name]
            if st.backend is not None or st.facts.get("status") == "loaded":
                st.facts["engine"] = {"runner": "inprocess", **placement()}
                self.store.write_model_facts(name, st.facts)
        result = {name: st.facts for name, st in states.items()}
        self.plan.not_run = {name for name, f in result.items() if f.get("status") != "loaded"}
        return result

    def _record_usage(self, st: ModelState, previous: dict[str, Any] | None) -> None:
        """Hosted APIs: keep the model's usage (calls billed, cache hits, cost) current in its facts
        after every unit, added to what earlier sessions of this run recorded."""
        usage = getattr(st.backend, "usage", None)
        if not callable(usage):
            return
        from engine.backends.hosted.base import combine_usage

        prev = ((previous or {}).get("info") or {}).get("usage")
        st.facts.setdefault("info", {})["usage"] = combine_usage(prev, usage())
        self.store.write_model_facts(st.spec.name, st.facts)

    def _run_in_groups(self, groups: Sequence[LoadGroup]) -> dict[str, dict[str, Any]]:
        """One load group after another, each run shard-major as above and closed before the next
        loads, so at most one group's models are resident; progress sees one run."""
        by_name = {m.name: m for m in self.models}
        every = self.pending()
        started = False

        def progress(event: str, n: int, info: dict[str, Any]) -> None:
            nonlocal started
            if event == "start":
                if started:
                    return
                started, n, info = True, len(every), start_info(self.models, every)
            if self.progress:
                self.progress(event, n, info)

        facts: dict[str, dict[str, Any]] = {}
        for i, group in enumerate(groups):
            log.info("load group %d/%d: %s (estimated %.0f MB)", i + 1, len(groups), ", ".join(group.models), group.estimated_mb)
            sub = InProcessRunner(
                self.dataset,
                [by_name[n] for n in group.models],
                self.store,
                self.warmup,
                self.decode_options,
                progress,
                self.prefetch,
                warmups=self.warmups,
            )
            for name, f in sub.run().items():
                facts[name] = {**f, "load_group": {"index": i, "of": len(groups), "estimated_mb": round(group.estimated_mb, 1)}}
                self.store.write_model_facts(name, facts[name])
        self.store.use_plan(self.plan)  # each group attached its own plan; the run's covers every model
        result = {m.name: facts[m.name] for m in self.models}
        self.plan.not_run = {name for name, f in result.items() if f.get("status") != "loaded"}
        return result

    def _write(self, unit: WorkUnit, rows: list[dict[str, Any]], label_keys: list[str]) -> None:
        """Write one unit; a failed write (disk full, permissions) stops the run with a message that says how to resume."""
        try:
            self.store.write_unit(unit, rows, label_keys)
        except OSError as exc:
            raise AuditError(
                f"cannot write results of {unit.key} under {self.store.root}: {exc}; "
                "finished units are kept: fix the problem (disk space, permissions) and re-run the same command to resume"
            ) from exc
