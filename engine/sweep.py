"""Choosing the models of a sweep, and asking the workers (not the driver) whether they can run.

The driver's availability answer is advisory when it cannot tell (``Availability.checked`` is
False: hub weights not in *this* machine's cache, which a worker with network access or its own
cache may have). Only a definite "no" (a missing package, a missing API key, a local path that
does not exist) skips a model up front; every other model is attempted, and the process that
loads it records its own reason if it cannot. ``audit sweep --check`` runs the same check inside
the cluster: one Ray task per model, with the resources that model's actors would take; each
answer also says the model's family, the pip extra it needs and where its weights are (local
folder, local hub cache, hub only, bundled package, or a hosted API). ``--check --smoke`` goes
one step further: a fresh worker process per model loads it and transcribes one clip, and
reports load seconds, transcription seconds and peak memory (process RSS; GPU when used).
"""

from __future__ import annotations

import difflib
import logging
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.errors import ConfigError
from engine.model_registry import ModelEntry

log = logging.getLogger(__name__)


def select_models(registry: Mapping[str, ModelEntry], selection: str) -> list[str]:
    """``all`` | a comma-separated list | a registry tag -> registry names, checked before anything loads.

    A name given twice, or a name in no registry, is an error naming the entry.
    """
    sel = selection.strip()
    if not sel:
        raise ConfigError("--models is empty: give all, a comma-separated list of registry names, or a tag")
    if sel == "all":
        return sorted(registry)
    if "," in sel or sel in registry or sel.startswith("hf:"):
        names = [m.strip() for m in sel.split(",")]
        if any(not n for n in names):
            raise ConfigError(f"--models '{selection}': an empty name between commas")
        seen: set[str] = set()
        for n in names:
            if n in seen:
                raise ConfigError(f"--models: model '{n}' is named twice; each model runs once per sweep")
            seen.add(n)
            if n not in registry and not n.startswith("hf:"):  # hf:ORG/NAME: a hub checkpoint (engine/hub_models.py)
                close = difflib.get_close_matches(n, list(registry), n=3, cutoff=0.5)
                hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
                raise ConfigError(f"--models: unknown model '{n}' (in no registry of the configuration tree; audit list models){hint}")
        return names
    chosen = sorted(n for n, e in registry.items() if sel in e.tags)
    if not chosen:
        tags = sorted({t for e in registry.values() for t in e.tags})
        close = difflib.get_close_matches(sel, list(registry) + tags, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ConfigError(f"--models: '{sel}' is neither a registry model nor a tag{hint} (tags: {', '.join(tags)})")
    return chosen


@dataclass
class SweepPlan:
    """Which models run, which are skipped up front (and why), and which are only advisory."""

    run: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    advisory: dict[str, str] = field(default_factory=dict)  # attempted; the loading process decides


def plan_sweep(registry: Mapping[str, ModelEntry], names: Sequence[str], explicit: bool) -> SweepPlan:
    """Skip only definite "no"s; a positive control runs only when named explicitly."""
    plan = SweepPlan()
    for name in names:
        e = registry[name]
        if "control" in e.tags and not explicit:
            plan.skipped[name] = "positive control (name it explicitly to include it)"
            continue
        avail = e.availability()
        if avail.runnable:
            plan.run.append(name)
        elif not avail.checked:
            plan.run.append(name)
            plan.advisory[name] = f"not checked here: {avail.reason}"
        else:
            plan.skipped[name] = avail.reason
    return plan


def weights_source(backend: str, options: Mapping[str, Any]) -> str:
    """Where a model's weights come from on this machine: ``api`` (hosted), ``local`` (a folder or
    file named by the options), ``cached`` (hub id in the local hub cache), ``hub-only`` (a download
    is needed), ``bundled`` (shipped in a PyPI package) or ``none`` (nothing to load)."""
    from pathlib import Path

    from engine.backends import ASR_BACKENDS
    from engine.backends.availability import hf_cached, model_availability

    try:
        cls = ASR_BACKENDS.get(backend)
    except Exception:  # noqa: BLE001 - an unknown backend has no weights to find; availability says why
        return "none"
    if getattr(cls, "vendor", None) is not None and hasattr(cls, "auth_headers"):
        return "api"
    model = str(options.get("model") or "")
    if not model:
        return "none"
    if Path(model).expanduser().exists():
        return "local"
    if "/" in model and not model.startswith((".", "/", "~")):
        return "cached" if hf_cached(model) else "hub-only"
    avail = model_availability(backend, options)
    return "bundled" if avail.runnable else "hub-only"


def _check_here(
    backend: str, options: Mapping[str, Any], extra: str | None, requires: Sequence[str] = (), gated: bool = False
) -> dict[str, Any]:
    """Runs inside a Ray worker: the availability answer of that machine (every reason it would not
    run, with the checkpoint checks the load itself runs), and where the weights are."""
    from engine.backends.availability import model_availability

    avail = model_availability(backend, options, extra, tuple(requires), gated)
    return {
        "runnable": avail.runnable,
        "reason": avail.reason,
        "checked": avail.checked,
        "problems": list(avail.problems),
        "weights": weights_source(backend, options),
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }


def smoke_here(name: str, backend: str, options: Mapping[str, Any], samples: Any) -> dict[str, Any]:
    """Runs in a fresh worker process: load the model, transcribe one clip, measure.

    Peak RSS is the process's own peak (``ru_maxrss``; the process serves this one model only);
    peak GPU memory is torch's ``max_memory_allocated`` when the model ran on CUDA.
    """
    import resource
    import sys
    import time

    from engine.backends import build_backend
    from engine.data import ModelSpec

    out: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid()}
    t0 = time.perf_counter()
    try:
        model = build_backend(ModelSpec(name, backend, dict(options), 1, {}))
        model.load()
        out["load_s"] = round(time.perf_counter() - t0, 2)
        t1 = time.perf_counter()
        text = model.transcribe_batch([samples])[0]
        out["transcribe_s"] = round(time.perf_counter() - t1, 3)
        out["text"] = str(text)
        out["info"] = {k: v for k, v in model.info().as_dict().items() if isinstance(v, (str, int, float, bool)) or v is None}
        out["ok"] = True
    except Exception as exc:  # noqa: BLE001 - the smoke test reports every failure as the model's answer
        out.update(ok=False, error=f"{type(exc).__name__}: {exc}")
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        out["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return out


def actor_resources(entry: ModelEntry, gpu_total: float) -> tuple[float, float]:
    """(num_cpus, num_gpus) one actor of ``entry`` takes (the Ray runner's rule, without probing options)."""
    meta = entry.spec().meta
    num_cpus = float(meta.get("num_cpus", 1.0))
    if "num_gpus" in meta:
        return num_cpus, float(meta["num_gpus"])
    explicit_cpu = str(entry.options.get("device", "")) == "cpu"
    return num_cpus, (1.0 if gpu_total > 0 and not explicit_cpu else 0.0)


def check_in_workers(
    registry: Mapping[str, ModelEntry],
    names: Sequence[str],
    address: str | None = None,
    timeout_s: float = 300.0,
    smoke_clip: Any = None,
    runtime_env: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Each model's availability as a Ray worker with that model's resources sees it; with
    ``smoke_clip`` (16 kHz float32 samples) each runnable model is then loaded and run on it.

    A model no node can hold is answered without submitting anything (it would wait forever).
    Hosted models are never smoke-tested: that would be a billed request.
    """
    import ray

    from engine.run.cluster import node_capacity, placement_problem
    from engine.run.ray_setup import init_ray

    started = init_ray(address, runtime_env=runtime_env)
    try:
        gpu_total = float(ray.cluster_resources().get("GPU", 0.0))
        capacity = node_capacity()
        cpu_cap = capacity.get("CPU", 1.0) or 1.0
        fn = ray.remote(_check_here)
        refs: dict[str, Any] = {}
        out: dict[str, dict[str, Any]] = {}
        for name in names:
            e = registry[name]
            num_cpus, num_gpus = actor_resources(e, gpu_total)
            problem = placement_problem(name, num_gpus, e.spec().meta, capacity)
            if problem:
                out[name] = {"runnable": False, "reason": problem, "checked": True, "where": "cluster"}
                continue
            opts = {"num_cpus": min(num_cpus, cpu_cap), "num_gpus": num_gpus}
            refs[name] = fn.options(**opts).remote(e.backend, dict(e.spec().options), e.needed_extra, list(e.requires), e.gated)
        ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout_s)
        done = set(ready)
        for name, ref in refs.items():
            if ref in done:
                res = ray.get(ref)
                out[name] = {**res, "where": f"worker {res['host']}"}
            else:
                ray.cancel(ref, force=True)
                out[name] = {
                    "runnable": False,
                    "reason": f"no worker could take the check within {timeout_s:g} s",
                    "checked": False,
                    "where": "cluster",
                }
        for name, answer in out.items():
            e = registry[name]
            answer["family"] = e.family or "—"
            answer["extra"] = e.needed_extra or "core"
            answer.setdefault("weights", weights_source(e.backend, e.options) if answer.get("where") == "cluster" else "?")
        if smoke_clip is not None:
            _smoke(registry, out, smoke_clip, gpu_total, capacity, cpu_cap, timeout_s)
        return {n: out[n] for n in names}
    finally:
        if started:
            ray.shutdown()


def _smoke(
    registry: Mapping[str, ModelEntry],
    answers: dict[str, dict[str, Any]],
    clip: Any,
    gpu_total: float,
    capacity: Mapping[str, float],
    cpu_cap: float,
    timeout_s: float,
) -> None:
    """Load and run each runnable model once, one fresh worker process each (``max_calls=1``)."""
    import ray

    fn = ray.remote(max_calls=1)(smoke_here)
    clip_ref = ray.put(clip)
    refs: dict[str, Any] = {}
    for name, answer in answers.items():
        e = registry[name]
        if answer.get("weights") == "api":
            answer["smoke"] = {"ok": None, "error": "hosted API: not called by --smoke (it would be a billed request)"}
            continue
        if not answer.get("runnable") and answer.get("checked", True):
            answer["smoke"] = {"ok": None, "error": "not runnable here (see reason)"}
            continue
        num_cpus, num_gpus = actor_resources(e, gpu_total)
        opts: dict[str, Any] = {"num_cpus": min(num_cpus, cpu_cap), "num_gpus": num_gpus}
        if e.resources.get("memory_mb"):
            opts["memory"] = int(e.resources["memory_mb"] * 2**20)
        refs[name] = fn.options(**opts).remote(name, e.backend, dict(e.spec().options), clip_ref)
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout_s) if refs else ([], [])
    done = set(ready)
    for name, ref in refs.items():
        if ref in done:
            answers[name]["smoke"] = ray.get(ref)
        else:
            ray.cancel(ref, force=True)
            answers[name]["smoke"] = {"ok": False, "error": f"no answer within {timeout_s:g} s"}
