"""Perturbation ladders: deterministic derived clips (noise, telephone, codecs, reverberation, speed, level) of any dataset."""
