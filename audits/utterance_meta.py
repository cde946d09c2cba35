"""What the non-ASR audits (speaker, emotion, ...) know about a clip besides its audio.

Reading it never decodes audio, so a section can build trials or pairs and reject a bad
dataset before any model loads. Kept out of any one section's package so sections do not
import each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from engine.datasets.base import Dataset


@dataclass(frozen=True)
class UttMeta:
    """Speaker, labels, reference and parent of one clip, and the shard that holds it."""

    utt_id: str
    speaker: str | None
    labels: Mapping[str, str]
    reference: str | None
    parent_id: str | None
    duration_s: float | None
    shard_id: str


def collect_meta(dataset: Dataset) -> dict[str, UttMeta]:
    """Speaker, labels, reference and parent of every utterance, in dataset order."""
    out: dict[str, UttMeta] = {}
    for sid in dataset.shard_ids:
        for u in dataset.load_shard(sid).utterances:
            out[u.utt_id] = UttMeta(u.utt_id, u.speaker, dict(u.labels), u.reference, u.parent_id, u.duration_s, sid)
    return out
