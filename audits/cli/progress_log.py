"""Progress as plain log lines, for when the output is not a terminal (a log file, CI).

A live progress bar draws nothing useful into a file, so runs there print one line per finished
unit (model, shard, RTFx so far, ETA) and per block of corpus clips, at most one line every
``min_interval_s`` seconds (the last unit and the last clip always get their line).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def _clock(seconds: float) -> str:
    s = int(round(max(0.0, seconds)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class LineProgress:
    """Receives the engine's progress events (``engine.data.ProgressFn``) and corpus callbacks."""

    def __init__(self, write: Callable[[str], None], min_interval_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.write = write
        self.min_interval_s = float(min_interval_s)
        self.clock = clock
        self.total = 0
        self.done = 0
        self.started: float | None = None
        self.last_line = float("-inf")
        self.audio: dict[str, float] = {}
        self.infer: dict[str, float] = {}
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
            self.write(f"loading {info.get('model')}")
        elif event == "start":
            self.total, self.done, self.started = int(n), 0, self.clock()
            self.last_line = float("-inf")
            self.write(f"{info.get('kind') or 'units'}: {n} to run")
        elif event in ("unit", "skip"):
            self.done += int(n)
            if event == "skip":
                self.write(f"skipped {n} unit(s) of shard {info.get('shard')} (model unavailable)")
                return
            model = str(info.get("model"))
            for r in info.get("rows", []):
                if r.get("infer_s") is not None:
                    self.audio[model] = self.audio.get(model, 0.0) + float(r.get("duration_s") or 0.0)
                    self.infer[model] = self.infer.get(model, 0.0) + float(r["infer_s"])
            final = self.done >= self.total
            if not self._due(self.last_line, final):
                return
            self.last_line = self.clock()
            elapsed = self.last_line - (self.started if self.started is not None else self.last_line)
            eta = elapsed / self.done * (self.total - self.done) if self.done else 0.0
            rt = self.rtfx(model)
            self.write(
                f"unit {self.done}/{self.total}: {model} shard {info.get('shard')} ({len(info.get('rows', []))} rows), "
                f"RTFx {'-' if rt is None else f'{rt:.1f}'}, elapsed {_clock(elapsed)}, ETA {_clock(eta)}"
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
