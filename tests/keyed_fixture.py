"""A keyed-pass worker for the engine's tests: records every call in a folder (so calls made in Ray
actor processes are counted too) and fails on request.

Payload keys: ``value`` (echoed back), ``fail_times`` (raise that many times before answering),
``fatal`` (raise HostedAuthError), ``sleep_s``.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.errors import HostedAuthError


class CountingWorker:
    def __init__(self, calls: str, name: str = "w", fail_load: bool = False) -> None:
        self.calls = Path(calls)
        self.name = name
        self.fail_load = fail_load

    def load(self) -> dict[str, Any]:
        if self.fail_load:
            raise RuntimeError(f"{self.name}: weights missing")
        return {"worker": self.name, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", "")}

    def run(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        unit = str(payload["unit"])
        self.calls.mkdir(parents=True, exist_ok=True)
        n = len(list(self.calls.glob(f"{self.name}--{unit}--*")))
        (self.calls / f"{self.name}--{unit}--{time.monotonic_ns()}-{uuid.uuid4().hex[:6]}").write_text(str(n))
        if payload.get("sleep_s"):
            time.sleep(float(payload["sleep_s"]))
        if payload.get("fatal"):
            raise HostedAuthError(f"{self.name}: key refused (401)")
        if n < int(payload.get("fail_times", 0)):
            raise RuntimeError(f"{self.name}: flaky call {n}")
        return {"unit": unit, "value": payload.get("value"), "by": self.name}

    def facts(self) -> dict[str, Any]:
        return {"closing": True}

    def close(self) -> None:
        pass


def calls(folder: Path, name: str | None = None, unit: str | None = None) -> list[str]:
    """The recorded calls, oldest first, as ``name--unit``."""
    out = []
    for p in sorted(folder.glob("*--*--*"), key=lambda p: p.name.rsplit("--", 1)[1]):
        w, u, _ = p.name.split("--")
        if (name is None or w == name) and (unit is None or u == unit):
            out.append(f"{w}--{u}")
    return out
