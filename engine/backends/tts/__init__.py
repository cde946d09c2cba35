"""Text-to-speech backends (the demo corpus and the synthetic-voice probe)."""
