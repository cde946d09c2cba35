"""Keyed passes: one JSON result per ``(pass, backend, unit)`` (diarization, long-form ASR, judges,
the probes' helper models), run on the same runners as shard passes. Reached through
``engine/engine.py``; of ``engine/run/`` it uses only the Ray set-up (``engine/run/ray_setup.py``)."""
