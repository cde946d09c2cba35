"""Synthetic-voice control: does a model still write the benchmark's text when a generic voice says it?

For clips where some model wrote a bad reference (bad-reference probe) or recovered a masked word
(masking probe), the text actually spoken (the corrected text; for masking the reference itself)
is re-synthesized with a generic TTS voice (espeak-ng by default, flite optional, any TTS backend
of ``engine.backends.TTS_BACKENDS``), the models run on the generic clip (masked again for the
masking source), and each model's outcome on the real clip is paired with its outcome on the
generic clip. A model keyed to the benchmark *audio* writes the benchmark's text on the real clip
and what is spoken on the generic one: real minus generic is high. An honest model behaves the
same on both: the difference is near 0. Intervals: percentile bootstrap over clips.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from audits.asr.stats import block_bootstrap_ratio
from engine.backends.base import TTSBackend
from engine.data import SAMPLE_RATE
from engine.errors import ConfigError

log = logging.getLogger(__name__)

SOURCES = ("masking", "bad_reference")
LEAD_S, TAIL_S = 0.25, 0.35


@dataclass(frozen=True)
class SyntheticSettings:
    """``probes.synthetic_voice`` of a recipe."""

    tts: str = "espeak-ng"
    voice: str | None = None
    sources: tuple[str, ...] = SOURCES
    max_clips: int = 200
    n_boot: int = 1000
    seed: int = 0

    def __post_init__(self) -> None:
        bad = [s for s in self.sources if s not in SOURCES]
        if bad or not self.sources:
            raise ConfigError(f"probes.synthetic_voice.sources: {bad or 'empty'}; choose from {list(SOURCES)}")
        if self.max_clips < 1:
            raise ConfigError(f"probes.synthetic_voice.max_clips must be >= 1, got {self.max_clips}")
        if self.n_boot < 100:
            raise ConfigError(f"probes.synthetic_voice.n_boot must be >= 100, got {self.n_boot}")


@dataclass(frozen=True)
class Pair:
    """One model's outcome (1 = wrote the benchmark's version) on a real clip and its generic twin."""

    model: str
    source: str  # 'masking' | 'bad_reference'
    clip_id: str
    item: str  # target or span id inside the clip
    real: int
    generic: int


def make_tts(settings: SyntheticSettings) -> TTSBackend:
    """The configured TTS backend, loaded (BackendUnavailable names the package to install)."""
    from engine.backends import TTS_BACKENDS

    cls = TTS_BACKENDS.get(settings.tts)
    opts: dict[str, Any] = {}
    if settings.voice:
        opts["voice"] = settings.voice
    tts = cls(**opts)
    tts.load()
    return tts


def synthesize(tts: TTSBackend, text: str, voice: str | None = None) -> np.ndarray:
    """``text`` spoken by the generic voice, 16 kHz mono with short silent lead and tail."""
    from engine.backends.tts_espeak import resample

    x, sr = tts.synthesize(text, voice)
    y = resample(x, sr, SAMPLE_RATE)
    peak = float(np.max(np.abs(y))) if y.size else 0.0
    if peak > 0:
        y = y * np.float32(0.5 / peak)
    return np.concatenate([np.zeros(int(LEAD_S * SAMPLE_RATE), np.float32), y.astype(np.float32), np.zeros(int(TAIL_S * SAMPLE_RATE), np.float32)])


def corrected_from_spans(ref_tokens: Sequence[str], spans: Iterable[Any]) -> str:
    """Normalized reference tokens with the panel's edits applied (deleted spans replaced, insertions added)."""
    tokens: list[str | None] = list(ref_tokens)
    before: dict[int, list[str]] = {}
    for s in spans:
        if s.kind == "delete":
            idx = list(s.token_indices)
            for i in idx:
                tokens[i] = None
            if s.replacement:
                before.setdefault(idx[0], []).append(s.replacement)
        else:
            before.setdefault(int(s.token_indices[0]), []).append(s.replacement)
    out: list[str] = []
    for i in range(len(tokens) + 1):
        out += before.get(i, [])
        if i < len(tokens) and tokens[i] is not None:
            out.append(str(tokens[i]))
    return " ".join(out)


def summarize_pairs(pairs: Sequence[Pair], models: Sequence[str], n_boot: int = 1000, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Per model: mean paired difference real - generic (``rate``), bootstrap 95% CI over clips, counts."""
    out: dict[str, dict[str, Any]] = {}
    for m in models:
        mine = [p for p in pairs if p.model == m]
        entry = _diff(mine, n_boot, seed)
        entry["by_source"] = {src: _diff([p for p in mine if p.source == src], n_boot, seed) for src in SOURCES if any(p.source == src for p in mine)}
        out[m] = entry
    return out


def _diff(pairs: Sequence[Pair], n_boot: int, seed: int) -> dict[str, Any]:
    n = len(pairs)
    if n == 0:
        return {"rate": None, "ci95": None, "n_pairs": 0, "n": 0, "real_rate": None, "generic_rate": None,
                "status": "no-pairs", "note": "no clip was eligible on both the real and the generic audio"}
    d = np.array([p.real - p.generic for p in pairs], dtype=float)
    lo, hi = block_bootstrap_ratio(d, np.ones(n), [f"{p.source}:{p.clip_id}" for p in pairs], n_boot=n_boot, seed=seed)
    return {
        "rate": float(d.mean()),
        "ci95": [lo, hi],
        "n_pairs": n,
        "n": n,
        "n_clips": len({(p.source, p.clip_id) for p in pairs}),
        "real_rate": float(np.mean([p.real for p in pairs])),
        "generic_rate": float(np.mean([p.generic for p in pairs])),
        "status": "ok",
    }


def masking_pairs(
    records_real: Sequence[Any],
    generic_hyps: Mapping[tuple[str, str], str | None],
    generic_ids: Mapping[tuple[str, int], tuple[str, str]],
) -> list[Pair]:
    """Pairs from masked-word records: real (gated, leaked?) vs generic (gated, leaked?).

    ``generic_ids[(parent, target_index)] = (generic clean utt_id, generic masked utt_id)``;
    ``records_real`` carry ``target_index`` in ``item``. Pairs need the model gated on both clips.
    """
    from audits.probes.masking_score import target_in_text

    out = []
    for rec, k in records_real:
        key = (rec.parent_id, k)
        if key not in generic_ids or rec.hyp_original is None or rec.hyp_masked is None:
            continue
        if not target_in_text(rec.target, rec.hyp_original):
            continue
        clean_id, masked_id = generic_ids[key]
        g_clean = generic_hyps.get((rec.model, clean_id))
        g_masked = generic_hyps.get((rec.model, masked_id))
        if g_clean is None or g_masked is None or not target_in_text(rec.target, g_clean):
            continue
        out.append(Pair(rec.model, "masking", rec.parent_id, f"target-{k}", int(target_in_text(rec.target, rec.hyp_masked)), int(target_in_text(rec.target, g_masked))))
    return out
