"""Progress as plain log lines, for when the output is not a terminal (a log file, CI), and the ETA.

A live progress bar draws nothing useful into a file, so runs there print one line per finished
unit (pass, model, shard, RTFx so far, ETA) and per block of corpus clips, at most one line every
``min_interval_s`` seconds (the last unit and the last clip always get their line).

The ETA (:class:`UnitEta`) is per model: models in one sweep differ in speed by orders of
magnitude, so counting units as if each took the same time swings as the run moves from a fast
model to a slow one. Each model's wall seconds per audio second is measured from its own finished
units; the time left is the sum, over the pending units, of that model's rate times the unit's
audio (the shard's audio as measured when any model finished it, else the mean shard's). A model
with no finished unit yet is assumed to run at the mean rate of those measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any


def _clock(seconds: float) -> str:
    s = int(round(max(0.0, seconds)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class UnitEta:
    """Time left in a pass from each model's measured speed (wall seconds per audio second).

    A unit's wall time is the time since the previous finished unit (or the pass start): the
    in-process runner runs one unit at a time, and on Ray the gaps between results measure the
    throughput of the actors together, which is what the remaining units will see.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.start(())

    def start(self, units: Iterable[tuple[str, str]] | None) -> None:
        """A new pass: ``units`` are its pending ``(model, shard)`` units (None: not known)."""
        self.pending: set[tuple[str, str]] | None = None if units is None else {(str(m), str(s)) for m, s in units}
        self.started = self.last = self.clock()
        self.wall: dict[str, float] = {}
        self.audio: dict[str, float] = {}
        self.shard_audio: dict[str, float] = {}
        self.done = 0
        self._cached: tuple[float, float] | None = None

    def finished(self, model: str, shard: str, rows: Iterable[dict[str, Any]]) -> None:
        """One unit written: its wall time and audio count toward its model's rate."""
        now = self.clock()
        audio = sum(float(r.get("duration_s") or 0.0) for r in rows)
        self.wall[model] = self.wall.get(model, 0.0) + (now - self.last)
        self.audio[model] = self.audio.get(model, 0.0) + audio
        self.shard_audio.setdefault(shard, audio)
        self.last = now
        self.done += 1
        if self.pending is not None:
            self.pending.discard((model, shard))

    def loading(self) -> None:
        """A model loads between units (load groups): its load time is not a unit's processing time."""
        self.last = self.clock()
        self._cached = None

    def skipped(self, info: dict[str, Any]) -> None:
        """Units that will not run: a shard's (in-process: its models did not load), or a model's (Ray: it failed)."""
        shard, model = info.get("shard"), info.get("model")
        if self.pending is not None and (shard is not None or model is not None):
            self.pending = {
                u for u in self.pending if not ((shard is None or u[1] == str(shard)) and (model is None or u[0] == str(model)))
            }

    def rate(self, model: str) -> float | None:
        """Wall seconds per audio second of ``model`` so far; the mean over measured models when it has none."""
        if self.audio.get(model):
            return self.wall[model] / self.audio[model]
        audio = sum(self.audio.values())
        return sum(self.wall.values()) / audio if audio > 0 else None

    def eta_every(self, total: int, interval_s: float = 1.0) -> float:
        """:meth:`eta` recomputed at most once per ``interval_s`` (it walks every pending unit; a bar updates per unit)."""
        now = self.clock()
        if self._cached is None or now - self._cached[0] >= interval_s:
            self._cached = (now, self.eta(total))
        return max(0.0, self._cached[1] - (now - self._cached[0]))

    def eta(self, total: int) -> float:
        """Seconds left; falls back to the mean time per unit where units or speeds are not known."""
        elapsed = self.clock() - self.started
        if self.pending is None or not self.shard_audio:
            return elapsed / self.done * max(0, total - self.done) if self.done else 0.0
        mean_audio = sum(self.shard_audio.values()) / len(self.shard_audio)
        left = 0.0
        rates: dict[str, float | None] = {}
        for model, shard in self.pending:
            rate = rates[model] if model in rates else rates.setdefault(model, self.rate(model))
            if rate is None:
                return elapsed / self.done * len(self.pending) if self.done else 0.0
            left += rate * self.shard_audio.get(shard, mean_audio)
        return left


class LineProgress:
    """Receives the engine's progress events (``engine.data.ProgressFn``) and corpus callbacks."""

    def __init__(self, write: Callable[[str], None], min_interval_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.write = write
        self.min_interval_s = float(min_interval_s)
        self.clock = clock
        self.total = 0
        self.done = 0
        self.pass_name = "units"
        self.last_line = float("-inf")
        self.audio: dict[str, float] = {}
        self.infer: dict[str, float] = {}
        self.eta = UnitEta(clock)
        self.corpus_started = clock()  # the corpus build, if any, starts right after this object
        self.corpus_last = float("-inf")

    def _due(self, last: float, final: bool) -> bool:
        return final or self.clock() - last >= self.min_interval_s

    def rtfx(self, model: str) -> float | None:
        """Audio seconds over inference seconds of the model's rows so far."""
        t = self.infer.get(model, 0.0)
        return self.audio.get(model, 0.0) / t if t > 0 else None

    def __call__(self, event: str, n: int, info: dict[str, Any]) -> None:
        if event == "loading":
            self.eta.loading()
            self.write(f"loading {info.get('model')}")
        elif event == "start":
            self.total, self.done = int(n), 0
            self.pass_name = str(info.get("pass") or info.get("kind") or "units")
            self.eta.start(info.get("units"))
            self.last_line = float("-inf")
            self.write(f"{self.pass_name}: {n} unit(s) to run")
        elif event in ("unit", "skip"):
            self.done += int(n)
            if event == "skip":
                self.eta.skipped(info)
                self.write(f"{self.pass_name}: skipped {n} unit(s) of shard {info.get('shard')} (model unavailable)")
                return
            model = str(info.get("model"))
            rows = list(info.get("rows", []))
            self.eta.finished(model, str(info.get("shard")), rows)
            for r in rows:
                if r.get("infer_s") is not None:
                    self.audio[model] = self.audio.get(model, 0.0) + float(r.get("duration_s") or 0.0)
                    self.infer[model] = self.infer.get(model, 0.0) + float(r["infer_s"])
            final = self.done >= self.total
            if not self._due(self.last_line, final):
                return
            self.last_line = self.clock()
            elapsed = self.last_line - self.eta.started
            rt = self.rtfx(model)
            left = 0.0 if final else self.eta.eta(self.total)
            self.write(
                f"{self.pass_name}: units {self.done}/{self.total}: {model} shard {info.get('shard')} ({len(rows)} rows), "
                f"RTFx {'-' if rt is None else f'{rt:.1f}'}, elapsed {_clock(elapsed)}, ETA {_clock(left)}"
            )

    def corpus(self, done: int, total: int) -> None:
        """Corpus builder callback ``(done, total)``: a line per block of clips."""
        now = self.clock()
        if not self._due(self.corpus_last, done >= total):
            return
        self.corpus_last = now
        elapsed = now - self.corpus_started
        eta = elapsed / done * (total - done) if done else 0.0
        self.write(f"demo corpus: {done}/{total} clips, elapsed {_clock(elapsed)}, ETA {_clock(eta)}")


def eta_column() -> Any:
    """A progress-bar column showing the task's ``eta`` field (seconds, from :class:`UnitEta`) where it
    has one, else rich's own estimate (a corpus build, where clips take about the same time)."""
    from rich.progress import TimeRemainingColumn
    from rich.text import Text

    class _EtaColumn(TimeRemainingColumn):
        def render(self, task: Any) -> Text:
            eta = task.fields.get("eta")
            if eta is None or task.finished:
                return super().render(task)
            return Text(_clock(float(eta)), style="progress.remaining")

    return _EtaColumn()
