"""Dataset readers behind one registry (entry-point group ``audit_engine.dataset_readers``).

Each reader yields the same Utterance records, grouped in shards; the built-ins are declared in
pyproject.toml like a plug-in's (engine/registry.py).
"""

from __future__ import annotations

from engine.datasets.base import Dataset, detect_reader, open_dataset
from engine.registry import Registry

DATASET_READERS: Registry[type] = Registry("dataset reader", "audit_engine.dataset_readers")

__all__ = ["DATASET_READERS", "Dataset", "detect_reader", "open_dataset"]
