"""Device and precision of a loaded model: one decision each, made where the model loads.

``resolve_device``: ``device: auto`` is CUDA when this process has a GPU, else CPU. Resolved when
the backend loads (in the process that runs it: a Ray actor pinned to a GPU sees that GPU through
``CUDA_VISIBLE_DEVICES``), so constructing a backend in the driver never imports torch or touches
a GPU.

``dtype_name_for`` / ``torch_dtype_for``: ``dtype: auto`` is the precision the model's reference
inference uses on CUDA (each family or backend declares it: bfloat16 for the speech-LLMs and most
transformers checkpoints as the Open ASR Leaderboard runs them, float16 where the reference says
so) and float32 on CPU and MPS (half precision there is slow or incomplete, and float32 is what a
clip's text is checked against). An explicit ``dtype`` always wins.
"""

from __future__ import annotations

import os
from typing import Any

from engine.errors import ConfigError

DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")
#: the precisions a ``dtype`` option may name (besides ``auto``)
DTYPE_CHOICES = ("float32", "float16", "bfloat16")


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


def check_dtype(value: object, where: str = "option 'dtype'") -> str:
    """``auto`` or one of :data:`DTYPE_CHOICES`, else a ConfigError naming ``where``."""
    if not isinstance(value, str) or (value != "auto" and value not in DTYPE_CHOICES):
        raise ConfigError(f"{where} must be auto, {', '.join(DTYPE_CHOICES)}, got {value!r}")
    return value


def dtype_name_for(device: str, cuda_default: str, requested: str | None) -> str:
    """The precision to load in, by name: ``requested`` unless it is None or ``auto``; else
    ``cuda_default`` on CUDA and float32 on CPU/MPS. No torch import."""
    check_dtype(cuda_default, "the CUDA default dtype")
    if requested is not None and check_dtype(requested) != "auto":
        return requested
    return cuda_default if str(device).startswith("cuda") else "float32"


def torch_dtype_for(device: str, cuda_default: str, requested: str | None) -> Any:
    """:func:`dtype_name_for` as a ``torch.dtype`` (imports torch)."""
    import torch

    return getattr(torch, dtype_name_for(device, cuda_default, requested))


__all__ = ["DEVICE_CHOICES", "DTYPE_CHOICES", "check_dtype", "dtype_name_for", "resolve_device", "torch_dtype_for"]
