"""Fault injection: an ASR backend that wraps a real one and fails on purpose.

Reliability claims ("an actor killed mid-unit loses no row", "a hung backend is quarantined")
are only worth something if they are exercised with real processes dying and hanging. This
backend delegates every call to an inner registry backend and, on the N-th ``transcribe_batch``
call of the current process, exits the process (as a segfault or an OOM kill would), raises, or
hangs. ``once_file`` makes a fault fire once per test: the first process to reach the fault
creates the file and fails; later processes (a restarted actor) see it and behave.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.availability import Availability
from engine.backends.base import ASRBackend, BackendInfo, BackendOptions
from engine.data import SAMPLE_RATE
from engine.errors import AuditError
from engine.options import option

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FaultOptions(BackendOptions):
    """What to wrap and which fault to inject (batch numbers count ``transcribe_batch`` calls of the process, from 1)."""

    inner: str = option(doc="the registry name of the ASR backend to wrap")
    inner_options: dict[str, Any] | None = option(None, "the wrapped backend's options")
    exit_on_batch: int | None = option(None, "os._exit on this call (as a segfault or an OOM kill would)", ge=1)
    raise_on_batch: int | None = option(None, "raise InjectedFault on this call", ge=1)
    hang_on_batch: int | None = option(None, "sleep forever on this call", ge=1)
    once_file: str | None = option(None, "fire only if this file does not exist yet (it is created first)")
    after_batch_sleep_s: float = option(0.0, "sleep after every batch (slows a run down so it can be interrupted)", ge=0, le=86_400)
    exit_code: int = option(1, "the exit status of exit_on_batch", ge=0, le=255)


class InjectedFault(AuditError):
    """The failure that ``raise_on_batch`` asked for."""


class FaultInjectionBackend(ASRBackend):
    """Delegates to ``inner`` and injects the configured fault; warm-up batches are not counted."""

    name = "fault-inject"

    OPTIONS = FaultOptions
    options: FaultOptions

    @classmethod
    def delegates_to(cls, options: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
        """Its rows are the inner backend's: it hands every clip on and only adds faults."""
        o = cls.parse_options(options)
        return (o.inner, dict(o.inner_options or {})) if o.inner else None

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        return Availability(True, f"test backend wrapping {cls.parse_options(options).inner}")

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        from engine.backends import ASR_BACKENDS

        cls = ASR_BACKENDS.get(self.options.inner)
        self.inner: ASRBackend = cls(**(self.options.inner_options or {}))
        self.calls = 0

    def load(self) -> None:
        self.inner.load()

    def warmup(self) -> None:
        self.inner.warmup()

    def close(self) -> None:
        self.inner.close()

    def _armed(self) -> bool:
        """True when the fault should fire now (honours ``once_file``)."""
        once = self.options.once_file
        if once is None:
            return True
        path = Path(once)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as fh:
            fh.write(f"fault fired in pid {os.getpid()} at batch {self.calls}\n")
            fh.flush()
            os.fsync(fh.fileno())
        return True

    def transcribe_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[str]:
        """Inner transcription, unless this call is the one chosen to fail."""
        self.calls += 1
        opts = self.options
        if opts.exit_on_batch == self.calls and self._armed():
            log.warning("fault-inject: exiting process %d on batch %d", os.getpid(), self.calls)
            os._exit(opts.exit_code)
        if opts.raise_on_batch == self.calls and self._armed():
            raise InjectedFault(f"injected failure on batch {self.calls}")
        if opts.hang_on_batch == self.calls and self._armed():
            log.warning("fault-inject: hanging process %d on batch %d", os.getpid(), self.calls)
            while True:
                time.sleep(3600)
        out = self.inner.transcribe_batch(audios, sample_rate)
        if opts.after_batch_sleep_s:
            time.sleep(opts.after_batch_sleep_s)
        return out

    def info(self) -> BackendInfo:
        inner = self.inner.info()
        extra = dict(inner.extra)
        extra["fault_injection"] = {k: v for k, v in self.options.as_dict().items() if k != "inner_options"}
        return BackendInfo(
            backend=f"{self.name}({inner.backend})",
            model_id=inner.model_id,
            device=inner.device,
            dtype=inner.dtype,
            batch_size=inner.batch_size,
            extra=extra,
        )


def ensure_registered() -> None:
    """Register this backend as ASR backend 'fault-inject' if nothing is registered under it.

    Usable as a Ray ``worker_process_setup_hook`` ("engine.backends.asr.fault.ensure_registered") so
    that worker processes know the name even where the registry does not list it.
    """
    from engine.backends import ASR_BACKENDS

    if "fault-inject" not in ASR_BACKENDS:
        ASR_BACKENDS.register_lazy("fault-inject", "engine.backends.asr.fault:FaultInjectionBackend")
