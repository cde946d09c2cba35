"""Audio-language-model judges inside the audits: the shared ``judges:`` recipe block and machinery.

The emotion audit (relative comparison of two clips), the speaker audit (same or different
speaker) and the synthetic-voice probe (synthetic-speech likelihood) each ask judges from
``engine.backends.JUDGE_BACKENDS`` one question per item. What they share lives here: parsing the
block (every section spells it the same way), asking every judge its questions on the run's
engine (``ask_judges``: one keyed pass per judge, one unit per item, each answer stored under
``<out>/<section>/judges/`` with a marker, so a re-run asks only what is missing; a missing key
makes the judge ``unavailable``, not the audit fail), the entry every judge result starts from
(answers, unparseable answers, failed requests, usage and runner provenance), the per-item rows
file, balanced seeded sampling and the AUC.

Unparseable answers are counted and reported, never guessed: an item whose reply does not follow
the prompt's JSON form is left out of every figure and counted in ``n_unparseable``.

Recipe block (inside ``emotion:``, ``speaker:`` or ``probes.synthetic_voice:``)::

    judges:
      backends: [gemini]                      # JUDGE_BACKENDS names
      backend_options: {gemini: {model: gemini-2.5-flash}}
      max_items: 200                          # items judged per judge (seeded sample)
      seed: 0
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from audits.records import Record, figure
from audits.section_config import backend_names, check_backend_options, options_map
from engine.backends import JUDGE_BACKENDS
from engine.backends.hosted.judges import JudgeAnswer
from engine.config import check_keys
from engine.data import DecodeOptions, Utterance
from engine.datasets.base import audio_stamps
from engine.engine import EngineOptions
from engine.errors import AuditError, ConfigError
from engine.keyed.judge_worker import JUDGE_METHODS, answer_settings, clip_location
from engine.keyed.judge_worker import WORKER as JUDGE_WORKER
from engine.keyed.keyed_pass import KeyedPass, KeyedUnit, WorkerSpec
from engine.keyed.unit_store import KeyedUnitStore, digest
from engine.options import Options, option
from engine.storage import atomic_write_text, safe_name

log = logging.getLogger(__name__)

SHOWN_FAILURES = 20
SHOWN_UNPARSEABLE = 5
T = TypeVar("T")


@dataclass(frozen=True)
class JudgeConfig(Options):
    """A ``judges:`` block (audio-LM judges asked about a section's clips); ``extra`` holds the section's own keys (e.g. ``dimensions``)."""

    backends: tuple[str, ...] = option(doc="judge backends to ask, e.g. [gemini]", parse=backend_names(JUDGE_BACKENDS))
    backend_options: dict[str, dict[str, Any]] = option({}, "backend name -> its options", parse=options_map, null_default=True)
    max_items: int = option(200, "most items each judge is asked about", ge=1)
    seed: int = option(0, "seed of the item sample", ge=0)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def validate(self, where: str) -> None:
        """Options name listed judges; each judge is built once here, so a bad option or prompt file fails
        before any audio is read (building one contacts nothing)."""
        check_backend_options(self.backend_options, self.backends, f"{where}.backend_options")
        for name in self.backends:
            try:
                JUDGE_BACKENDS.get(name)(**self.backend_options.get(name, {}))
            except ConfigError as exc:
                raise ConfigError(f"{where}.backend_options.{name}: {exc}") from None

    def as_dict(self) -> dict[str, Any]:
        return {
            "backends": list(self.backends),
            "backend_options": {k: dict(v) for k, v in self.backend_options.items()},
            "max_items": self.max_items,
            "seed": self.seed,
            **dict(self.extra),
        }


JUDGE_KEYS = set(JudgeConfig.declared())


def parse_judge_config(raw: Any, where: str, extra_keys: Sequence[str] = ()) -> JudgeConfig | None:
    """The ``judges`` block at ``where`` (None when absent); ``extra_keys`` are the section's own keys, kept as given."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(raw).__name__} {raw!r}")
    check_keys(raw, JUDGE_KEYS | set(extra_keys), where)
    cfg = JudgeConfig.parse({k: v for k, v in raw.items() if k not in extra_keys}, where)
    return cfg.replace(extra={k: raw[k] for k in extra_keys if k in raw})


@dataclass(frozen=True)
class JudgeItem:
    """One question: ``item_id`` (its unit), the clips it plays in order (each with the root its
    relative path is under) and the judge method's other arguments (e.g. the dimension)."""

    item_id: str
    clips: tuple[tuple[Utterance, Path | None], ...]
    args: Mapping[str, Any] = field(default_factory=dict)


class JudgeFailure(AuditError):
    """An item's failed request, carried as its result (never raised): the error text names its type."""


@dataclass(frozen=True)
class ClipUnreadable:
    """An item whose clips could not be decoded where it ran: it is left out of the judged items."""

    errors: Mapping[str, str]


@dataclass
class JudgeRun:
    """What one judge answered: ``results`` in item order (``JudgeAnswer``, ``JudgeFailure`` or
    ``ClipUnreadable``), its facts (runner, placement, judge info, usage last) and status
    (``ok``, or ``unavailable`` with ``error`` when its key is not set or it could not load)."""

    name: str
    status: str
    facts: dict[str, Any]
    results: list[Any] = field(default_factory=list)
    error: str | None = None

    def clip_errors(self) -> dict[str, str]:
        """Decode errors of the clips this judge could not hear, by utt_id."""
        return {u: e for r in self.results if isinstance(r, ClipUnreadable) for u, e in r.errors.items()}

    def heard(self, items: Sequence[T]) -> tuple[list[T], list[Any]]:
        """The items whose clips were decoded, and their results (answers or failed requests)."""
        kept = [(it, r) for it, r in zip(items, self.results) if not isinstance(r, ClipUnreadable)]
        return [it for it, _ in kept], [r for _, r in kept]


def judges_dir(out_dir: Path, section: str) -> Path:
    """Where a section's judge answers are stored (``<out>/<section>/judges``) beside its per-item rows."""
    return Path(out_dir) / section / "judges"


def _stamps(clips: Sequence[tuple[Utterance, Path | None]]) -> dict[tuple[str, str | None], tuple[str, str]]:
    """The audio stamp (content, mtime; engine/datasets/base.py) of every distinct clip, read once each."""
    by_root: dict[str | None, dict[str, Utterance]] = {}
    for u, root in clips:
        by_root.setdefault(None if root is None else str(root), {})[u.utt_id] = u
    out: dict[tuple[str, str | None], tuple[str, str]] = {}
    for where, utts in by_root.items():
        listed = list(utts.values())
        for u, st in zip(listed, audio_stamps(listed, None if where is None else Path(where))):
            out[(u.utt_id, where)] = st
    return out


def ask_judges(
    cfg: JudgeConfig,
    folder: Path,
    method: str,
    items: Sequence[JudgeItem],
    engine: EngineOptions | None = None,
    decode_options: DecodeOptions | None = None,
) -> dict[str, JudgeRun]:
    """Ask every judge of ``cfg`` the ``method`` question about every item, on the run's engine.

    One keyed pass per judge (``engine/keyed/keyed_pass.py``, worker ``engine/keyed/judge_worker.py``), one
    unit per item, stored under ``folder`` (``judges_dir``) by the driver as each answer arrives:
    the unit's marker records the audio stamps of the clips it played (and the method's arguments)
    and the judge's answer settings (answer-changing options, the task's prompt) with the decode
    options, so a re-run asks only items whose answer is missing or whose clips, prompt or options
    changed. Workers (this process, or Ray actors with ``--engine ray``) decode the clips and ask,
    ``max_concurrency`` questions at once. A judge whose key is not set is ``unavailable`` (nothing
    is asked); a refused key or an empty account fails its remaining items without another request.
    A failed item is not stored, so the next run asks it again.
    """
    engine = engine or EngineOptions()
    dec = decode_options or DecodeOptions()
    if method not in JUDGE_METHODS:
        raise ConfigError(f"judges: unknown judge method {method!r}; known: {', '.join(sorted(JUDGE_METHODS))}")
    task = JUDGE_METHODS[method][0]
    unique = {it.item_id: it for it in items}
    stamps = _stamps([c for it in unique.values() for c in it.clips])
    decode_facts = {"max_duration_s": dec.max_duration_s, "allow_outside_root": dec.allow_outside_root}
    store = KeyedUnitStore(folder, task)
    runs: dict[str, JudgeRun] = {}
    passes: list[KeyedPass] = []
    for name in cfg.backends:
        options = dict(cfg.backend_options.get(name, {}))
        cls: Any = JUDGE_BACKENDS.get(name)
        judge = cls(**options)  # builds, contacts nothing: its info and answer settings
        info = dict(judge.info().as_dict())
        avail = cls.availability(options)
        if not avail.runnable:
            msg = f"{name}: {avail.reason}"
            log.error("judge %s unavailable: %s", name, msg)
            runs[name] = JudgeRun(name, "unavailable", info, error=msg)
            continue
        answers_depend_on = answer_settings(judge, task)
        settings = {"judge": name, **answers_depend_on, "method": method, "decode": decode_facts}
        sdigest = digest(answers_depend_on)
        units = []
        for it in unique.values():
            inputs = {"clips": [[u.utt_id, *stamps[(u.utt_id, None if r is None else str(r))]] for u, r in it.clips], "args": dict(it.args)}
            payload = {
                "method": method,
                "clips": [clip_location(u, r) for u, r in it.clips],
                "args": dict(it.args),
                "decode": decode_facts,
                "settings_digest": sdigest,
            }
            cost = sum(float(u.duration_s or 0.0) for u, _ in it.clips)
            units.append(KeyedUnit(name, it.item_id, inputs, settings, payload, cost))
        concurrency = judge.options.max_concurrency  # the judge's record (JudgeOptions), at least 1
        spec = WorkerSpec(
            name, JUDGE_WORKER, {"backend": name, "options": options}, {"num_cpus": 1.0}, concurrency=concurrency, max_actors=1
        )  # one actor: the judge's request limits (concurrency, per minute) hold for the whole judge
        passes.append(KeyedPass(store, (spec,), tuple(units)))
        runs[name] = JudgeRun(name, "ok", info)
    outcome = engine.run_keyed(passes) if passes else None
    for name, run in runs.items():
        if run.status != "ok" or outcome is None:
            continue
        worker = outcome.facts.get((task, name))
        pending = int((worker or {}).get("pending", 0))
        usage = run.facts.pop("usage", None)  # this run's usage: zero calls unless a worker asked
        merged = {**run.facts, "runner": engine.kind, **dict(worker or {})}
        usage = merged.pop("usage", usage)
        merged.update(answers_reused=len(unique) - pending, answers_asked=pending, store=str(store.root), usage=usage)
        run.facts = merged
        if merged.get("status") == "load_failed":  # e.g. the key is not set where the worker runs
            run.status, run.error = "unavailable", str(merged.get("error"))
            continue
        for it in items:
            key = (task, name, it.item_id)
            got = outcome.results.get(key)
            if key in outcome.failed or got is None:
                run.results.append(JudgeFailure(outcome.failed.get(key, "no answer")))
            elif "clip_errors" in got:
                run.results.append(ClipUnreadable(dict(got["clip_errors"])))
            else:
                run.results.append(
                    JudgeAnswer(str(got["task"]), got["value"], bool(got["parsed"]), str(got["raw"]), bool(got.get("cached")))
                )
    return runs


@dataclass(frozen=True)
class JudgeResult(Record):
    """The fields every judge's entry has (``judge_entry``; ``unavailable_entry`` for one that asked nothing).

    A section's judge record extends it with the task's figures (same/different speaker, which rendition
    sounds more aroused); the entry's keys and their order are kept as written."""

    kind: str = figure("judge")
    judge: str = figure("")
    task: str = figure("")
    model_id: str | None = figure(optional=True)
    status: str = figure("ok")
    error: str | None = figure(optional=True)
    n_items: int | None = figure(optional=True)
    n_answered: int | None = figure(optional=True)
    n_unparseable: int | None = figure(optional=True)
    unparseable_rate: float | None = figure(optional=True)
    unparseable_examples: tuple[str, ...] | None = figure(optional=True)
    n_failed_requests: int | None = figure(optional=True)
    failed_requests: Mapping[str, str] | None = figure(optional=True)
    facts: Mapping[str, Any] | None = figure(optional=True)
    usage: Mapping[str, Any] | None = figure(optional=True)
    parsing: str | None = figure(optional=True)


def unavailable_entry(run: JudgeRun, task: str) -> dict[str, Any]:
    """The entry of a judge that asked nothing: its status and why."""
    return {"kind": "judge", "judge": run.name, "task": task, "status": run.status, "error": run.error}


def judge_entry(name: str, facts: Mapping[str, Any], task: str, ids: Sequence[str], results: Sequence[Any]) -> dict[str, Any]:
    """The fields every judge result has: what was asked of whom, answered, unparseable, failed.

    ``facts`` are the judge's (``JudgeRun.facts``: judge info, runner and placement, usage)."""
    failed = {
        i: str(r) if isinstance(r, JudgeFailure) else f"{type(r).__name__}: {r}"
        for i, r in zip(ids, results)
        if isinstance(r, BaseException)
    }
    answers = [r for r in results if not isinstance(r, BaseException)]
    unparseable = [a for a in answers if a.value is None]
    info = dict(facts)
    status = "error" if failed and not answers else "ok"  # e.g. a refused key: every question failed
    return {
        "kind": "judge",
        "judge": name,
        "task": task,
        "model_id": info.get("model_id"),
        "status": status,
        **({"error": next(iter(failed.values()))} if status == "error" else {}),
        "n_items": len(ids),
        "n_answered": len(answers) - len(unparseable),
        "n_unparseable": len(unparseable),
        "unparseable_rate": round(len(unparseable) / len(answers), 4) if answers else None,
        "unparseable_examples": [a.raw[:120] for a in unparseable[:SHOWN_UNPARSEABLE]],
        "n_failed_requests": len(failed),
        "failed_requests": dict(sorted(failed.items())[:SHOWN_FAILURES]),
        "facts": {k: v for k, v in info.items() if k != "usage"},
        "usage": info.get("usage"),
        "parsing": "strict JSON as the prompt asks; unparseable answers are counted and left out of every figure",
    }


def write_rows(path: Path, rows: Sequence[Mapping[str, Any]]) -> str:
    """Per-item judge rows (JSON lines) beside the run's other outputs; summary.json names the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in rows))
    return str(path)


def rows_path(out_dir: Path, section: str, judge: str, task: str) -> Path:
    return judges_dir(out_dir, section) / safe_name(judge) / f"{task}.jsonl"


def answer_value(result: Any) -> Any:
    """The parsed value of one result (None for unparseable answers and failed requests)."""
    return None if isinstance(result, BaseException) else result.value


def answer_status(result: Any) -> str:
    if isinstance(result, BaseException):
        return "failed-request"
    return "answered" if result.value is not None else "unparseable"


def dataset_utterances(dataset: Any, wanted: set[str], where: str) -> dict[str, Utterance]:
    """The dataset's records of the clips named in ``wanted`` (one pass over the shards; nothing is decoded here)."""
    found = {u.utt_id: u for sid in dataset.shard_ids for u in dataset.load_shard(sid).utterances if u.utt_id in wanted}
    missing = sorted(wanted - set(found))
    if missing:
        raise ConfigError(f"{where}: {len(missing)} clip(s) to judge are not in the dataset (first: {missing[0]!r})")
    return found


def balanced_sample(items: Sequence[T], key: Callable[[T], Hashable], n: int, seed: int) -> list[T]:
    """At most ``n`` items, as even as possible over ``key``'s classes, seeded, in input order."""
    if len(items) <= n:
        return list(items)
    rng = np.random.default_rng(seed)
    classes: dict[Hashable, list[int]] = {}
    for i, it in enumerate(items):
        classes.setdefault(key(it), []).append(i)
    quota = dict.fromkeys(classes, 0)
    left = n
    while left > 0:  # round robin over the classes: as even as their sizes allow
        grew = False
        for c in sorted(classes, key=str):
            if left and quota[c] < len(classes[c]):
                quota[c] += 1
                left -= 1
                grew = True
        if not grew:
            break
    chosen: list[int] = []
    for c, idx in classes.items():
        if quota[c]:
            chosen.extend(int(i) for i in rng.choice(idx, size=quota[c], replace=False))
    return [items[i] for i in sorted(chosen)]


def auc(positive: Sequence[float], negative: Sequence[float]) -> float | None:
    """Area under the ROC curve: P(a positive scores above a negative), ties counted half
    (the Mann-Whitney form, Hanley & McNeil 1982); None when either side is empty."""
    if not positive or not negative:
        return None
    from scipy.stats import rankdata

    ranks = rankdata(np.concatenate([np.asarray(positive, float), np.asarray(negative, float)]))
    n_pos, n_neg = len(positive), len(negative)
    u = float(ranks[:n_pos].sum()) - n_pos * (n_pos + 1) / 2
    return u / (n_pos * n_neg)


__all__ = [
    "ClipUnreadable",
    "JudgeConfig",
    "JudgeFailure",
    "JudgeItem",
    "JudgeResult",
    "JudgeRun",
    "answer_status",
    "answer_value",
    "ask_judges",
    "auc",
    "balanced_sample",
    "dataset_utterances",
    "judge_entry",
    "judges_dir",
    "parse_judge_config",
    "rows_path",
    "unavailable_entry",
    "write_rows",
]
