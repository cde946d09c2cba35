"""Robustness profiles: the study's condition groups (condition maps), gap table, rank stability and SNR-style ladders."""
