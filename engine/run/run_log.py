"""``run.log``: the log of every session of a run, kept in its run directory.

A run's log lines otherwise go only to the terminal (or to whatever captured it), so a sweep that
ran overnight leaves nothing to read beside its results. :func:`run_log` attaches a handler to the
root logger for the duration of a run: it appends to ``RUN/run.log`` (a resumed run adds its
session below the earlier ones, after a header line naming the session), with every configured
secret scrubbed (the one scrubber, ``engine.backends.hosted.scrub``). Records made before the run
may write (the checks that run before anything is written under ``--out``) are held, and written
once the run calls :func:`begin_run_log`; a run refused before that writes nothing under ``--out``,
not even its log (a refused resume leaves the directory exactly as it was).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from engine.backends.hosted.scrub import scrub

#: The log file's name in a run directory.
RUN_LOG = "run.log"
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class RunLogHandler(logging.Handler):
    """Appends scrubbed records to ``out_dir/run.log`` once ``out_dir`` exists (held in memory until then)."""

    def __init__(self, out_dir: Path | str, level: int = logging.NOTSET) -> None:
        super().__init__(level)
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / RUN_LOG
        self._fh: TextIO | None = None
        self._held: list[str] = []
        self.writing = False
        self.setFormatter(logging.Formatter(_FORMAT))

    def begin(self) -> None:
        """The run may write under its directory now: open the log and write what was held."""
        self.acquire()
        try:
            self.writing = True
            self._open()
        finally:
            self.release()

    def _open(self) -> TextIO | None:
        if self._fh is None and self.writing and self.out_dir.is_dir():
            self._fh = open(self.path, "a", encoding="utf-8")
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            self._fh.write(f"=== session started {stamp} (pid {os.getpid()}) ===\n")
            for line in self._held:
                self._fh.write(line + "\n")
            self._held.clear()
        return self._fh

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = scrub(self.format(record))
            self.acquire()
            try:
                fh = self._open()
                if fh is None:
                    self._held.append(line)
                    return
                fh.write(line + "\n")
                fh.flush()
            finally:
                self.release()
        except Exception:  # a log line must never stop a run
            self.handleError(record)

    def close(self) -> None:
        self.acquire()
        try:
            self._open()  # a session that began writing but logged nothing still gets its header line
            if self._fh is not None:
                self._fh.close()
                self._fh = None
            self._held.clear()
        finally:
            self.release()
        super().close()


_ACTIVE: list[RunLogHandler] = []


def begin_run_log(out_dir: Path | str) -> None:
    """Called by a run once everything is checked and it writes under ``out_dir``: its log starts there."""
    for h in list(_ACTIVE):
        if h.out_dir == Path(out_dir):
            h.begin()


@contextmanager
def run_log(out_dir: Path | str) -> Iterator[RunLogHandler]:
    """Log to ``out_dir/run.log`` while the block runs (records at the level the loggers are set to:
    INFO from the command line, ``-v`` for DEBUG)."""
    handler = RunLogHandler(out_dir)
    root = logging.getLogger()
    root.addHandler(handler)
    _ACTIVE.append(handler)
    try:
        yield handler
    except BaseException as exc:  # the reason a session ended early goes into its log too
        logging.getLogger("audit").error("run stopped: %s: %s", type(exc).__name__, exc)
        raise
    finally:
        _ACTIVE.remove(handler)
        root.removeHandler(handler)
        handler.close()


__all__ = ["RUN_LOG", "RunLogHandler", "begin_run_log", "run_log"]
