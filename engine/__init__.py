"""Engine: moves audio through models; it never scores (it stores raw hypotheses; scoring lives in ``audits``).

Its layout, one concept per folder:

* ``engine/engine.py``: the one entry point, :class:`~engine.engine.EngineOptions` (which runner, and
  every pass submitted through it);
* ``engine/run/``: shard passes (ASR, SV, SER rows per ``(model, shard)``) on the in-process and Ray runners;
* ``engine/keyed/``: keyed passes (one JSON result per ``(pass, backend, unit)``) on the same runners;
* the data model (``data``, ``errors``, ``config``, ``config_tree``, ``registry``, ``model_registry``),
  storage (``storage``), audio (``engine/audio/``), and the pluggable parts (``backends/``,
  ``datasets/``, ``corpus/``, ``perturb/``) beside them.
"""

__version__ = "0.1.0"
