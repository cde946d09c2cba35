"""``device: auto`` for the model backends: CUDA when this process has a GPU, else CPU; and the
precision a backend loads its weights in on that device (``dtype: auto``).

Resolved when the backend loads (in the process that runs it: a Ray actor pinned to a GPU sees
that GPU through ``CUDA_VISIBLE_DEVICES``), so constructing a backend in the driver never
imports torch or touches a GPU.
"""

from __future__ import annotations

import os
from typing import Any

from engine.errors import ConfigError

DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")
DTYPE_CHOICES = ("auto", "float32", "float16", "bfloat16")


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


def dtype_name_for(device: str, cuda_default: str, requested: object) -> str:
    """The precision name for ``requested`` on ``device``: ``auto`` is ``cuda_default`` on CUDA (the
    model's reference precision there, e.g. bfloat16 for the LLM-based families, as their cards and
    the Open ASR Leaderboard's scripts load them) and float32 elsewhere; an explicit name is kept."""
    text = str(requested)
    if text not in DTYPE_CHOICES:
        raise ConfigError(f"option 'dtype' must be one of {', '.join(DTYPE_CHOICES)}, got {requested!r}")
    if cuda_default not in DTYPE_CHOICES[1:]:
        raise ValueError(f"cuda_default must be one of {', '.join(DTYPE_CHOICES[1:])}, got {cuda_default!r}")
    if text != "auto":
        return text
    return cuda_default if str(device).startswith("cuda") else "float32"


def torch_dtype_for(device: str, cuda_default: str, requested: object) -> Any:
    """``dtype_name_for`` as a ``torch.dtype`` (imports torch: call it only where the model loads)."""
    import torch

    return getattr(torch, dtype_name_for(device, cuda_default, requested))


__all__ = ["DEVICE_CHOICES", "DTYPE_CHOICES", "dtype_name_for", "resolve_device", "torch_dtype_for"]
