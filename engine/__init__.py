"""Engine: moves audio through models (datasets, audio I/O, backends, runners, result store).

The engine never scores: it stores raw hypotheses; scoring lives in ``audits``.
"""

__version__ = "0.1.0"
