"""Audio: decoding and header checks, Parquet shards with embedded audio, VAD segmentation, and the
masked-word probe's audio operations."""
