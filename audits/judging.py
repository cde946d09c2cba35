"""Audio-language-model judges inside the audits: the shared ``judges:`` recipe block and machinery.

The emotion audit (relative comparison of two clips), the speaker audit (same or different
speaker) and the synthetic-voice probe (synthetic-speech likelihood) each ask judges from
``engine.backends.JUDGE_BACKENDS`` one question per item. What they share lives here: parsing the
block (every section spells it the same way), opening a judge (a missing key makes the judge
``unavailable``, not the audit fail), asking many items with the judge's own concurrency limit,
the entry every judge result starts from (answers, unparseable answers, failed requests, usage
and cost provenance), the per-item rows file, balanced seeded sampling and the AUC.

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
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from audits.section_config import parse_backend_list, parse_backend_options
from engine.audio import decode
from engine.backends import JUDGE_BACKENDS
from engine.config import check_keys, expect_type
from engine.data import DecodeOptions, Utterance
from engine.errors import BackendUnavailable, ConfigError, HostedAuthError, HostedQuotaError
from engine.store import atomic_write_text, safe_name

log = logging.getLogger(__name__)

JUDGE_KEYS = {"backends", "backend_options", "max_items", "seed"}
SHOWN_FAILURES = 20
SHOWN_UNPARSEABLE = 5
T = TypeVar("T")


@dataclass(frozen=True)
class JudgeConfig:
    """A validated ``judges:`` block; ``extra`` holds the section's own keys (e.g. ``dimensions``)."""

    backends: tuple[str, ...]
    backend_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    max_items: int = 200
    seed: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"backends": list(self.backends), "backend_options": {k: dict(v) for k, v in self.backend_options.items()},
                "max_items": self.max_items, "seed": self.seed, **dict(self.extra)}  # fmt: skip


def parse_judge_config(raw: Any, where: str, extra_keys: Sequence[str] = ()) -> JudgeConfig | None:
    """The ``judges`` block at ``where`` (None when absent); judges are built once here so a bad
    option or prompt file fails before any audio is read (building one contacts nothing)."""
    if raw is None:
        return None
    data = expect_type(raw, dict, where)
    check_keys(data, JUDGE_KEYS | set(extra_keys), where, required={"backends"})
    backends = parse_backend_list(data, JUDGE_BACKENDS, where)
    options = parse_backend_options(data, backends, where)
    for name in backends:
        try:
            JUDGE_BACKENDS.get(name)(**options.get(name, {}))
        except ConfigError as exc:
            raise ConfigError(f"{where}.backend_options.{name}: {exc}") from None
    ints = {}
    for key, default, minimum in (("max_items", 200, 1), ("seed", 0, 0)):
        value = data.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ConfigError(f"{where}.{key}: expected an integer >= {minimum}, got {value!r}")
        ints[key] = value
    extra = {k: data[k] for k in extra_keys if k in data}
    return JudgeConfig(backends, options, ints["max_items"], ints["seed"], extra)


def open_judge(name: str, options: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """(loaded judge or None, facts): a missing API key is ``unavailable`` with the message."""
    judge = JUDGE_BACKENDS.get(name)(**dict(options))
    try:
        judge.load()
    except BackendUnavailable as exc:
        log.error("judge %s unavailable: %s", name, exc)
        return None, {"status": "unavailable", "error": str(exc)}
    return judge, {"status": "loaded"}


def ask_all(judge: Any, items: Sequence[T], ask: Callable[[Any, T], Any]) -> list[Any]:
    """``ask(judge, item)`` for every item, ``max_concurrency`` at once, order kept.

    Each result is a ``JudgeAnswer`` or the exception of that item's request. A refused key or an
    empty account (``HostedAuthError``/``HostedQuotaError``) stops the remaining items without
    another request: they get the same exception.
    """
    fatal: list[BaseException] = []
    lock = threading.Lock()

    def one(item: T) -> Any:
        if fatal:
            return fatal[0]
        try:
            return ask(judge, item)
        except (HostedAuthError, HostedQuotaError) as exc:
            with lock:
                fatal.append(exc)
            return exc
        except Exception as exc:  # noqa: BLE001 - one item's failed request is that item's error
            return exc

    workers = max(1, min(int(judge.options.get("max_concurrency") or 1), len(items)))
    if workers == 1:
        return [one(i) for i in items]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="audit-judge") as pool:
        return list(pool.map(one, items))


def judge_entry(name: str, judge: Any, task: str, ids: Sequence[str], results: Sequence[Any]) -> dict[str, Any]:
    """The fields every judge result has: what was asked of whom, answered, unparseable, failed."""
    failed = {i: f"{type(r).__name__}: {r}" for i, r in zip(ids, results) if isinstance(r, BaseException)}
    answers = [r for r in results if not isinstance(r, BaseException)]
    unparseable = [a for a in answers if a.value is None]
    info = judge.info().as_dict()
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
    return Path(out_dir) / section / "judges" / safe_name(judge) / f"{task}.jsonl"


def answer_value(result: Any) -> Any:
    """The parsed value of one result (None for unparseable answers and failed requests)."""
    return None if isinstance(result, BaseException) else result.value


def answer_status(result: Any) -> str:
    if isinstance(result, BaseException):
        return "failed-request"
    return "answered" if result.value is not None else "unparseable"


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


def decode_clips(utts: Sequence[Utterance], root: Path | None, options: DecodeOptions) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Audio of the given utterances at 16 kHz, and the decode error of each one that failed."""
    audio: dict[str, np.ndarray] = {}
    errors: dict[str, str] = {}
    for u in utts:
        d = decode(u, root=root, max_duration_s=options.max_duration_s, allow_outside_root=options.allow_outside_root)
        if d.error is None and d.samples is not None:
            audio[u.utt_id] = d.samples
        else:
            errors[u.utt_id] = str(d.error)
    return audio, errors


def dataset_clips(dataset: Any, wanted: set[str], options: DecodeOptions) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Decode the dataset's clips named in ``wanted`` (one pass over the shards)."""
    utts = [u for sid in dataset.shard_ids for u in dataset.load_shard(sid).utterances if u.utt_id in wanted]
    return decode_clips(utts, dataset.root, options)


__all__ = [
    "JudgeConfig",
    "answer_status",
    "answer_value",
    "ask_all",
    "auc",
    "balanced_sample",
    "dataset_clips",
    "decode_clips",
    "judge_entry",
    "open_judge",
    "parse_judge_config",
    "rows_path",
    "write_rows",
]
