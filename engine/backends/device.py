"""``device: auto`` for SV, SER and diarization backends: CUDA when this process has a GPU, else CPU.

Resolved when the backend loads (in the process that runs it: a Ray actor pinned to a GPU sees
that GPU through ``CUDA_VISIBLE_DEVICES``), so constructing a backend in the driver never
imports torch or touches a GPU.
"""

from __future__ import annotations

import os

from engine.errors import ConfigError

DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")


def resolve_device(value: object) -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU here, else ``cpu``; ``cpu``/``cuda``/``cuda:N``/``mps`` as given."""
    text = str(value)
    if text != "auto":
        if text.split(":", 1)[0] not in DEVICE_CHOICES:
            raise ConfigError(f"option 'device' must be one of {', '.join(DEVICE_CHOICES)} (or cuda:N), got {value!r}")
        return text
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return "cpu"
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:  # noqa: BLE001 - no torch (or a broken CUDA install): the CPU is what there is
        return "cpu"


__all__ = ["DEVICE_CHOICES", "resolve_device"]
