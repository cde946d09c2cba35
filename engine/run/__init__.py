"""Shard passes: ASR, speaker-verification and emotion rows per ``(model, shard)`` unit, run in this
process or on Ray actors, stored as Parquet parts with markers (``store.py``). Reached through
``engine/engine.py``; imports nothing of ``engine/keyed/``."""
