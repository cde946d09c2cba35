"""Benchmark-optimization probes: tests of whether a model follows the benchmark's text rather than its audio."""
