"""Speech-recognition backends (local models, the positive control and test stand-ins)."""
