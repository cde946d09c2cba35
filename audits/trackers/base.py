"""The tracker plug-in kind: what a finished run hands an experiment tracker, and how trackers are chosen and run.

A tracker logs a run that is already on disk: it reads the run directory (``summary.json``
through its digest, ``report.md``), never the engine's memory, so the same call logs a run just
finished (``audit run --tracker mlflow``) or one finished long ago (``audit track RUN``), and a
tracker that fails (server down, package missing, bad credentials) loses nothing: the results stay
in the run directory, the error is logged and recorded in ``trackers.json``, and the command exits
non-zero so a pipeline notices.

What is logged (``TrackedRun``), the same for every tracker:

* parameters: the recipe's settings as the run resolved them (``recipe.*``), the normalizer and
  its version, the dataset's name, size and fingerprint, the runner, and each model's facts
  (``model.NAME.backend``, ``.dtype``, ``.device``, ``.batch_size``, ``.warmup_batches``, ``.status``);
* metrics: each model's figures (``NAME/wer``, ``NAME/cer``, ``NAME/wer_ci95_low``, ``NAME/rtfx``,
  ...), each slice's (``NAME/slice/LABEL/VALUE/wer``, ...), and every number of the audit
  sections' results (``SECTION/...``); a null figure (not testable, no audio) is left out, never
  logged as 0 or NaN;
* artifacts: ``summary.json``, ``report.md`` and the recipe as the run resolved it (``recipe.json``).

Every string passes through the secret scrubber before it leaves the process (parameters, tags,
the recipe file), so an API key held in the environment never reaches a tracker.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import logging
import math
import re
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from audits.run_dir import read_run
from engine.backends.hosted.scrub import error_text, scrubber
from engine.config import parse_yaml
from engine.errors import ConfigError
from engine.options import Field, Options
from engine.registry import Registry
from engine.storage import atomic_write_text

log = logging.getLogger(__name__)

TRACKERS_FILE = "trackers.json"
"""Where a run directory records the trackers it was logged to (and the errors of those that failed)."""
ARTIFACTS = ("summary.json", "report.md")
"""The run's files every tracker logs as artifacts (with the resolved recipe, ``recipe.json``)."""
MAX_PARAM_CHARS = 500
"""A parameter's value longer than this is cut (with ``…``); the whole recipe is in ``recipe.json``."""
_MODEL_FACTS = ("backend", "dtype", "device", "batch_size", "warmup_batches", "status", "params_m")
_MODEL_FIGURES = ("wer", "cer", "rtfx", "n_utts", "n_scored", "n_failed", "n_words", "n_speakers", "load_s")
_SLICE_FIGURES = ("wer", "cer", "rtfx", "n_utts", "n_failed", "n_words", "n_speakers")
_HALLUCINATION_FIGURES = ("insertion_rate", "loop_rate", "hallucination_rate", "length_outlier_rate")
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_\-. /]")


class TrackerError(ConfigError):
    """A tracker could not log a run (its package, server or settings); the run's results are untouched."""


@dataclass(frozen=True)
class NoTrackerOptions(Options):
    """A tracker without options."""


class Tracker(ABC):
    """One experiment tracker: ``OPTIONS`` declares its options once, as a frozen record (engine/options.py),
    and ``self.options`` holds the checked record; ``log`` sends one run.

    ``package`` names the Python package it needs and ``extra`` the project extra that installs it,
    so a missing package is refused before the run starts, not after it finished.
    """

    name: ClassVar[str] = ""
    package: ClassVar[str] = ""
    extra: ClassVar[str] = "trackers"
    OPTIONS: ClassVar[type[Options]] = NoTrackerOptions

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.options = self.option_record().parse(dict(options or {}), f"tracker '{self.name}'")

    @classmethod
    def option_record(cls) -> type[Options]:
        """The declared options record; a tracker declaring the old ``FIELDS`` mapping is refused, saying what to declare."""
        record = cls.OPTIONS
        if getattr(cls, "FIELDS", None) is not None or not (isinstance(record, type) and issubclass(record, Options)):
            raise TrackerError(
                f"tracker '{cls.name}' declares its options as a mapping of fields (FIELDS), which is no longer read: "
                "declare OPTIONS, a frozen dataclass deriving from engine.options.Options (fields made with engine.options.option)"
            )
        return record

    @classmethod
    def check_available(cls) -> None:
        """Refuse now (``TrackerError`` with the install command) when the tracker's package is missing."""
        if cls.package and importlib.util.find_spec(cls.package) is None:
            raise TrackerError(
                f"tracker '{cls.name}' needs the '{cls.package}' package, which is not installed: pip install 'audit-engine[{cls.extra}]'"
            )

    @abstractmethod
    def log(self, run: TrackedRun) -> dict[str, Any]:
        """Send ``run``; return where it went (run id, experiment, URI, folder), recorded in ``trackers.json``."""


TRACKERS: Registry[type[Tracker]] = Registry("experiment tracker", "audit_engine.trackers")


@dataclass(frozen=True)
class TrackedRun:
    """Everything a tracker logs of one run, already scrubbed of secrets (module docstring)."""

    run_dir: Path
    name: str
    """The run's name in the tracker: the run directory's name."""
    recipe: dict[str, Any]
    params: dict[str, str]
    config: dict[str, Any]
    """The same facts nested (recipe, normalizer, dataset, models), for trackers that keep a configuration tree."""
    metrics: dict[str, float]
    tags: dict[str, str]
    artifacts: tuple[Path, ...] = field(default=())

    def staged_files(self, folder: Path) -> list[Path]:
        """The files to upload, written to ``folder`` through the secret scrubber: the run's artifacts and ``recipe.json``."""
        folder = Path(folder)
        out = []
        for path in self.artifacts:
            out.append(folder / path.name)
            atomic_write_text(out[-1], path.read_text(encoding="utf-8"))
        out.append(folder / "recipe.json")
        atomic_write_text(out[-1], json.dumps(self.recipe, indent=2, sort_keys=True) + "\n")
        return out


def metric_name(*parts: str) -> str:
    """A metric or parameter name every tracker accepts: letters, digits, ``_ - . /`` and spaces; anything else becomes ``_``."""
    return "/".join(_BAD_NAME_CHARS.sub("_", str(p)) for p in parts)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _numbers(obj: Any, prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], float]]:
    """Every finite number inside a section's result, by key path (lists and text are skipped)."""
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from _numbers(v, (*prefix, str(k)))
        return
    x = _number(obj)
    if x is not None:
        yield prefix, x


def run_figures(summary: Mapping[str, Any]) -> dict[str, float]:
    """The run's figures as metrics (module docstring); two figures that would share a name are an error."""
    out: dict[str, float] = {}

    def put(name: str, value: Any) -> None:
        x = _number(value)
        if x is None:
            return
        if name in out:
            raise TrackerError(f"two figures of the run would be logged as metric '{name}'; rename the model, slice label or value")
        out[name] = x

    def put_ci(base: tuple[str, ...], ci: Any) -> None:
        if isinstance(ci, (list, tuple)) and len(ci) == 2:
            put(metric_name(*base[:-1], f"{base[-1]}_ci95_low"), ci[0])
            put(metric_name(*base[:-1], f"{base[-1]}_ci95_high"), ci[1])

    for model, m in (summary.get("models") or {}).items():
        if not isinstance(m, Mapping):
            continue
        for key in _MODEL_FIGURES:
            put(metric_name(model, key), m.get(key))
        put_ci((model, "wer"), m.get("ci95"))
        put_ci((model, "cer"), m.get("cer_ci95"))
        for key in _HALLUCINATION_FIGURES:
            put(metric_name(model, "hallucination", key), (m.get("hallucination") or {}).get(key))
        for slice_key, fig in (m.get("slices") or {}).items():
            if not isinstance(fig, Mapping):
                continue
            label, _, value = str(slice_key).partition("=")
            base = (model, "slice", label, value) if value else (model, "slice", label)
            for key in _SLICE_FIGURES:
                put(metric_name(*base, key), fig.get(key))
            put_ci((*base, "wer"), fig.get("ci95"))
    from audits.sections import SECTIONS

    for section in SECTIONS.names():
        for path, x in _numbers(summary.get(section), (section,)):
            put(metric_name(*path), x)
    return out


def _flat_params(obj: Any, prefix: str, out: dict[str, str]) -> None:
    """Scalars of a (nested) mapping as ``prefix.key`` parameters; lists as JSON; empty mappings left out."""
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            _flat_params(v, f"{prefix}.{k}" if prefix else str(k), out)
        return
    text = "null" if obj is None else json.dumps(obj) if isinstance(obj, (list, bool)) else str(obj)
    out[metric_name(prefix).replace("/", "_")] = text if len(text) <= MAX_PARAM_CHARS else text[: MAX_PARAM_CHARS - 1] + "…"


def tracked_run(run_dir: Path) -> TrackedRun:
    """Read a finished run directory (through its digests) into what trackers log."""
    run_dir = Path(run_dir)
    summary = read_run(run_dir, strict=True).summary
    s = scrubber()
    recipe = dict(s.value(summary.get("recipe") or {}))
    normalizer = dict(summary.get("normalizer") or {})
    dataset = {k: v for k, v in (summary.get("dataset") or {}).items() if k in ("name", "source", "reader", "n_utts", "fingerprint")}
    models = {
        name: {k: m.get(k) for k in _MODEL_FACTS if k in m} for name, m in (summary.get("models") or {}).items() if isinstance(m, Mapping)
    }
    engine = {k: v for k, v in (summary.get("engine") or {}).items() if k in ("runner", "address", "workers")}
    config = s.value({"recipe": recipe, "normalizer": normalizer, "dataset": dataset, "engine": engine, "models": models})
    params: dict[str, str] = {}
    _flat_params({"recipe": {k: v for k, v in recipe.items() if k != "description"}}, "", params)
    _flat_params({"normalizer": normalizer, "dataset": dataset, "engine": engine}, "", params)
    for name, facts in models.items():
        for k, v in facts.items():
            _flat_params(v, f"model.{metric_name(name).replace('/', '_')}.{k}", params)
    params = {k: v for k, v in s.value(params).items()}
    tags = s.value(
        {
            "audit.recipe": str(recipe.get("name", "")),
            "audit.run_dir": str(run_dir.resolve()),
            "audit.summary_sha256": str((summary.get("digest") or {}).get("sha256", "")),
            "audit.engine_version": str(summary.get("engine_version", "")),
        }
    )
    artifacts = tuple(run_dir / a for a in ARTIFACTS if (run_dir / a).is_file())
    return TrackedRun(run_dir, s(run_dir.resolve().name), recipe, params, config, run_figures(summary), tags, artifacts)


def _option_value(f: Field, text: str) -> Any:
    """A ``--tracker-opt`` value as its field reads it: text stays text; other kinds are read as a YAML scalar."""
    if f.kind is str and text != "null":
        return text
    return parse_yaml(text, "--tracker-opt") if text else None


def make_trackers(names: Sequence[str], options: Sequence[str] = ()) -> list[Tracker]:
    """The trackers ``--tracker NAME`` chose, with ``--tracker-opt NAME.KEY=VALUE`` options checked, before anything runs.

    Unknown names (with close matches), options of a tracker not chosen, unknown keys, values of the
    wrong type and a missing package are all refused here, naming the flag.
    """
    chosen: list[str] = []
    for n in names:
        TRACKERS.check(n)
        if n in chosen:
            raise ConfigError(f"--tracker {n} given twice")
        chosen.append(n)
    per: dict[str, dict[str, Any]] = {n: {} for n in chosen}
    for opt in options:
        key, eq, value = opt.partition("=")
        tracker, dot, name = key.strip().partition(".")
        if not eq or not dot or not name:
            raise ConfigError(f"--tracker-opt {opt!r}: expected TRACKER.KEY=VALUE, e.g. mlflow.tracking_uri=http://localhost:5000")
        if tracker not in per:
            raise ConfigError(f"--tracker-opt {opt!r}: tracker '{tracker}' is not chosen (add --tracker {tracker})")
        fields = TRACKERS.get(tracker).option_record().declared()
        if name not in fields:
            close = difflib.get_close_matches(name, list(fields), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(
                f"--tracker-opt {opt!r}: tracker '{tracker}' has no option '{name}'{hint}; known: {', '.join(sorted(fields))}"
            )
        per[tracker][name] = _option_value(fields[name], value.strip())
    out = []
    for n in chosen:
        cls = TRACKERS.get(n)
        cls.check_available()
        out.append(cls(per[n]))
    return out


@dataclass(frozen=True)
class TrackerOutcome:
    """What one tracker did with a run: where it went, or why it did not (scrubbed)."""

    tracker: str
    ok: bool
    where: dict[str, Any]
    error: str = ""
    seconds: float = 0.0


def log_run_to_trackers(trackers: Sequence[Tracker], run_dir: Path) -> list[TrackerOutcome]:
    """Log the finished run in ``run_dir`` to every tracker; a failing tracker is logged and recorded, never raised.

    The outcomes are added to ``run_dir/trackers.json`` (one entry per tracker, the latest attempt).
    """
    if not trackers:
        return []
    run_dir = Path(run_dir)
    outcomes: list[TrackerOutcome] = []
    try:
        run = tracked_run(run_dir)
    except Exception as exc:  # noqa: BLE001 - the run is on disk whatever happens here
        why = error_text(exc)
        log.error("no tracker logged %s: %s", run_dir, why)
        outcomes = [TrackerOutcome(t.name, False, {}, why) for t in trackers]
    else:
        for t in trackers:
            start = time.perf_counter()
            try:
                where = t.log(run)
            except Exception as exc:  # noqa: BLE001 - a tracker's failure never loses the run's results
                why = error_text(exc)
                log.error("tracker '%s' could not log %s (the results stay in the run directory): %s", t.name, run_dir, why)
                outcomes.append(TrackerOutcome(t.name, False, {}, why, time.perf_counter() - start))
            else:
                log.info("tracker '%s' logged %s: %s", t.name, run_dir, where)
                outcomes.append(TrackerOutcome(t.name, True, scrubber().value(where), "", time.perf_counter() - start))
    _record(run_dir, outcomes)
    return outcomes


def _record(run_dir: Path, outcomes: Sequence[TrackerOutcome]) -> None:
    path = run_dir / TRACKERS_FILE
    try:
        known = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for o in outcomes:
        entry: dict[str, Any] = {"ok": o.ok, "at": stamp, "seconds": round(o.seconds, 3)}
        entry.update({"where": o.where} if o.ok else {"error": o.error})
        known[o.tracker] = entry
    try:
        atomic_write_text(path, json.dumps(known, indent=2, sort_keys=True) + "\n")
    except OSError as exc:
        log.error("could not write %s: %s", path, exc)


def staging_dir() -> tempfile.TemporaryDirectory[str]:
    """A scratch folder for files a tracker uploads that are not in the run directory (``recipe.json``)."""
    return tempfile.TemporaryDirectory(prefix="audit-tracker-")
