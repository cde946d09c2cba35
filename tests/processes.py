"""Crash a running driver at a chosen point: the shared step of the kill -9 resume tests."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest


def sigkill_after_markers(
    proc: subprocess.Popen[bytes], markers: Path, n: int, timeout_s: float, pattern: str = "*.json", poll_s: float = 0.05
) -> None:
    """Wait until ``markers`` holds at least ``n`` files matching ``pattern``, then SIGKILL ``proc``.

    Fails the test (with the driver's stderr) if the driver exits first or nothing finishes in time.
    """
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if markers.is_dir() and len(list(markers.glob(pattern))) >= n:
                break
            if proc.poll() is not None:
                pytest.fail(f"driver exited early ({proc.returncode}): {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
            time.sleep(poll_s)
        else:
            pytest.fail("no unit finished in time")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
