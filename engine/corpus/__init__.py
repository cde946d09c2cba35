"""Corpora the engine can build itself: the embedded, offline demo corpus (``audit corpus demo``)."""

from __future__ import annotations

from engine.corpus.demo import DEFAULT_N_UTTS, DemoCorpus, build_demo_corpus, plan_design, slice_counts

__all__ = ["DEFAULT_N_UTTS", "DemoCorpus", "build_demo_corpus", "plan_design", "slice_counts"]
