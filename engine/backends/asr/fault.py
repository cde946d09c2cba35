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
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.availability import Availability
from engine.backends.base import ASRBackend, BackendInfo
from engine.backends.bundled import check_options
from engine.data import SAMPLE_RATE
from engine.errors import AuditError, ConfigError

log = logging.getLogger(__name__)

_DEFAULTS: dict[str, Any] = {
    "inner": None,  # registry name of the wrapped ASR backend
    "inner_options": None,  # its options
    "exit_on_batch": None,  # os._exit(1) on the N-th transcribe_batch call (1-based) of this process
    "raise_on_batch": None,  # raise InjectedFault on the N-th call
    "hang_on_batch": None,  # sleep forever on the N-th call
    "once_file": None,  # fire only if this file does not exist yet (it is created first)
    "after_batch_sleep_s": 0.0,  # sleep after every batch (slows a run down so it can be interrupted)
    "exit_code": 1,
}


class InjectedFault(AuditError):
    """The failure that ``raise_on_batch`` asked for."""


def _positive_or_none(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"fault-inject: option '{name}' must be a positive integer (1 = first batch) or null, got {value!r}")
    return value


class FaultInjectionBackend(ASRBackend):
    """Delegates to ``inner`` and injects the configured fault; warm-up batches are not counted."""

    name = "fault-inject"

    @classmethod
    def delegates_to(cls, options: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
        """Its rows are the inner backend's: it hands every clip on and only adds faults."""
        return (str(options["inner"]), dict(options.get("inner_options") or {})) if options.get("inner") else None

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        return Availability(True, f"test backend wrapping {options.get('inner', '?')}")

    def __init__(self, **options: Any) -> None:
        check_options(self.name, options, _DEFAULTS)
        merged = {**_DEFAULTS, **options}
        if not merged["inner"]:
            raise ConfigError("fault-inject backend needs option 'inner' (the registry name of the ASR backend to wrap)")
        if merged["inner_options"] is not None and not isinstance(merged["inner_options"], Mapping):
            raise ConfigError("fault-inject: option 'inner_options' must be a mapping")
        for key in ("exit_on_batch", "raise_on_batch", "hang_on_batch"):
            _positive_or_none(key, merged[key])
        sleep = merged["after_batch_sleep_s"]
        if not isinstance(sleep, (int, float)) or isinstance(sleep, bool) or sleep < 0:
            raise ConfigError(f"fault-inject: option 'after_batch_sleep_s' must be a non-negative number, got {sleep!r}")
        super().__init__(**merged)
        from engine.backends import ASR_BACKENDS

        cls = ASR_BACKENDS.get(str(merged["inner"]))
        self.inner: ASRBackend = cls(**dict(merged["inner_options"] or {}))
        self.calls = 0

    def load(self) -> None:
        self.inner.load()

    def warmup(self) -> None:
        self.inner.warmup()

    def close(self) -> None:
        self.inner.close()

    def _armed(self) -> bool:
        """True when the fault should fire now (honours ``once_file``)."""
        once = self.options["once_file"]
        if once is None:
            return True
        path = Path(str(once))
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
        if opts["exit_on_batch"] == self.calls and self._armed():
            log.warning("fault-inject: exiting process %d on batch %d", os.getpid(), self.calls)
            os._exit(int(opts["exit_code"]))
        if opts["raise_on_batch"] == self.calls and self._armed():
            raise InjectedFault(f"injected failure on batch {self.calls}")
        if opts["hang_on_batch"] == self.calls and self._armed():
            log.warning("fault-inject: hanging process %d on batch %d", os.getpid(), self.calls)
            while True:
                time.sleep(3600)
        out = self.inner.transcribe_batch(audios, sample_rate)
        if opts["after_batch_sleep_s"]:
            time.sleep(float(opts["after_batch_sleep_s"]))
        return out

    def info(self) -> BackendInfo:
        inner = self.inner.info()
        extra = dict(inner.extra)
        extra["fault_injection"] = {k: opts for k, opts in self.options.items() if k not in ("inner_options",)}
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
