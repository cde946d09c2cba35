"""Dataset readers behind one registry. Each yields the same Utterance records, grouped in shards."""

from __future__ import annotations

from engine.datasets.base import Dataset, detect_reader, open_dataset
from engine.registry import Registry

DATASET_READERS: Registry[type] = Registry("dataset reader")
DATASET_READERS.register_lazy("nemo", "engine.datasets.readers:NemoManifestReader")
DATASET_READERS.register_lazy("csv", "engine.datasets.readers:CsvReader")
DATASET_READERS.register_lazy("tsv", "engine.datasets.readers:TsvReader")
DATASET_READERS.register_lazy("parquet", "engine.datasets.readers:ParquetReader")
DATASET_READERS.register_lazy("hf", "engine.datasets.readers:HuggingFaceReader")
DATASET_READERS.register_lazy("oasr-predictions", "engine.datasets.readers:OasrPredictionsReader")

__all__ = ["DATASET_READERS", "Dataset", "detect_reader", "open_dataset"]
