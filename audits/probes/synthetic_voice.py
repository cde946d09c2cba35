"""Synthetic-voice control: does a model still write the benchmark's text when a synthetic voice says it?

For clips where some model wrote a bad reference (bad-reference probe) or recovered a masked word
(masking probe), the text actually spoken (the corrected text; for masking the reference itself)
is re-synthesized and the models run on the synthetic clip (masked again for the masking source).
As in the RW-Voice-EQ Bench paper (§3.2) there are two arms: a **generic** voice (espeak-ng by
default, any TTS backend of ``engine.backends.TTS_BACKENDS``), and a voice **matched** to the
original speaker (the pool voice closest by speaker embedding, ``audits.probes.voice_match``).
Each model's outcome on the real clip is paired with its outcome on each synthetic clip. A model
keyed to the benchmark *audio* writes the benchmark's text on the real clip and what is spoken on
the synthetic ones: real minus generic and real minus matched are high. An honest model behaves
the same on all three: the differences are near 0, and real minus matched near 0 where real minus
generic is not says the generic voice, not the synthesis, is what the model struggles with.
Intervals: percentile bootstrap over clips.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from audits.asr.stats import block_bootstrap_ratio
from engine.backends.base import TTSBackend
from engine.errors import ConfigError

log = logging.getLogger(__name__)

SOURCES = ("masking", "bad_reference")
ARMS = ("generic", "matched")
#: the matched arm's default pool: flite's four general voices, espeak-ng timbre variants and, when
#: installed, the Kokoro voices (``engine:*`` entries of a backend that cannot load are skipped)
DEFAULT_POOL = (
    "flite:slt",
    "flite:rms",
    "flite:awb",
    "flite:kal",
    "espeak-ng:en-us+m3",
    "espeak-ng:en-us+m5",
    "espeak-ng:en-us+f2",
    "espeak-ng:en-us+f4",
    "espeak-ng:en-gb-x-rp+m7",
    "kokoro:*",
)
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
    arms: tuple[str, ...] = ARMS
    #: ``engine:voice`` entries the matched voice is chosen from (see ``audits.probes.voice_match``)
    matched_pool: tuple[str, ...] = DEFAULT_POOL
    match_encoder: str = "resemblyzer"
    #: options of the speaker encoder (e.g. ``{num_threads: 1}`` for resemblyzer on a shared CPU)
    match_encoder_options: tuple[tuple[str, Any], ...] = ()
    match_clips_per_speaker: int = 5
    exclude_source_voice: bool = True

    def __post_init__(self) -> None:
        bad = [s for s in self.sources if s not in SOURCES]
        if bad or not self.sources:
            raise ConfigError(f"probes.synthetic_voice.sources: {bad or 'empty'}; choose from {list(SOURCES)}")
        bad_arms = [a for a in self.arms if a not in ARMS]
        if bad_arms or not self.arms or len(set(self.arms)) != len(self.arms):
            raise ConfigError(f"probes.synthetic_voice.arms: {bad_arms or list(self.arms)}; choose one or both of {list(ARMS)}, each once")
        if "matched" in self.arms and not self.matched_pool:
            raise ConfigError("probes.synthetic_voice.matched_pool is empty: the matched arm needs TTS voices to choose from")
        if self.match_clips_per_speaker < 1:
            raise ConfigError(f"probes.synthetic_voice.match_clips_per_speaker must be >= 1, got {self.match_clips_per_speaker}")
        if self.max_clips < 1:
            raise ConfigError(f"probes.synthetic_voice.max_clips must be >= 1, got {self.max_clips}")
        if self.n_boot < 100:
            raise ConfigError(f"probes.synthetic_voice.n_boot must be >= 100, got {self.n_boot}")


@dataclass(frozen=True)
class Pair:
    """One model's outcome (1 = wrote the benchmark's version) on a real clip and its synthetic twin of one arm."""

    model: str
    source: str  # 'masking' | 'bad_reference'
    clip_id: str
    item: str  # target or span id inside the clip
    real: int
    synthetic: int
    arm: str = "generic"  # 'generic' | 'matched'


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
    """``text`` spoken by ``voice`` (the backend's own voice when None), 16 kHz mono, peak-normalized,
    with short silent lead and tail (what the probe's TTS units render: ``engine.keyed.probe_workers.TTSWorker``)."""
    from engine.keyed.probe_workers import render_speech

    return render_speech(tts, text, voice, LEAD_S, TAIL_S)


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


def summarize_pairs(
    pairs: Sequence[Pair], models: Sequence[str], n_boot: int = 1000, seed: int = 0, arms: Sequence[str] = ("generic",)
) -> dict[str, dict[str, Any]]:
    """Per model and arm: the real and synthetic rates and their paired difference real - synthetic,
    each with a bootstrap 95% interval over clips, by source too.

    The model's top-level ``rate``/``ci95`` is real - generic (real - matched when the generic arm
    is off); ``arms.<arm>`` holds every figure of each arm, and ``real_minus_<arm>`` repeats each
    difference with its interval for quick reading.
    """
    out: dict[str, dict[str, Any]] = {}
    headline = "generic" if "generic" in arms else arms[0]
    for m in models:
        per_arm: dict[str, dict[str, Any]] = {}
        for arm in arms:
            mine = [p for p in pairs if p.model == m and p.arm == arm]
            entry = _diff(mine, n_boot, seed)
            entry["by_source"] = {
                src: _diff([p for p in mine if p.source == src], n_boot, seed) for src in SOURCES if any(p.source == src for p in mine)
            }
            per_arm[arm] = entry
        top = dict(per_arm[headline])
        top["rate_definition"] = f"real - {headline}"
        top["arms"] = per_arm
        for arm, entry in per_arm.items():
            top[f"real_minus_{arm}"] = {"rate": entry["rate"], "ci95": entry["ci95"], "n_pairs": entry["n_pairs"]}
        out[m] = top
    return out


def _rate_ci(values: np.ndarray, blocks: Sequence[str], n_boot: int, seed: int) -> list[float]:
    lo, hi = block_bootstrap_ratio(values, np.ones(len(values)), blocks, n_boot=n_boot, seed=seed)
    return [lo, hi]


def _diff(pairs: Sequence[Pair], n_boot: int, seed: int) -> dict[str, Any]:
    n = len(pairs)
    if n == 0:
        return {
            "rate": None,
            "ci95": None,
            "n_pairs": 0,
            "n": 0,
            "real_rate": None,
            "synthetic_rate": None,
            "status": "no-pairs",
            "note": "no clip was eligible on both the real and the synthetic audio",
        }
    real = np.array([p.real for p in pairs], dtype=float)
    synth = np.array([p.synthetic for p in pairs], dtype=float)
    blocks = [f"{p.source}:{p.clip_id}" for p in pairs]
    arm = pairs[0].arm
    out: dict[str, Any] = {
        "rate": float((real - synth).mean()),
        "ci95": _rate_ci(real - synth, blocks, n_boot, seed),
        "n_pairs": n,
        "n": n,
        "n_clips": len({(p.source, p.clip_id) for p in pairs}),
        "real_rate": float(real.mean()),
        "real_ci95": _rate_ci(real, blocks, n_boot, seed),
        "synthetic_rate": float(synth.mean()),
        "synthetic_ci95": _rate_ci(synth, blocks, n_boot, seed),
        "status": "ok",
    }
    out[f"{arm}_rate"] = out["synthetic_rate"]  # kept under the arm's name too (generic_rate, matched_rate)
    return out


def masking_pairs(
    records_real: Sequence[Any],
    generic_hyps: Mapping[tuple[str, str], str | None],
    generic_ids: Mapping[tuple[str, int], tuple[str, str]],
    arm: str = "generic",
) -> list[Pair]:
    """Pairs from masked-word records: real (gated, leaked?) vs synthetic (gated, leaked?) of one arm.

    ``generic_ids[(parent, target_index)] = (synthetic clean utt_id, synthetic masked utt_id)``;
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
        out.append(
            Pair(
                rec.model,
                "masking",
                rec.parent_id,
                f"target-{k}",
                int(target_in_text(rec.target, rec.hyp_masked)),
                int(target_in_text(rec.target, g_masked)),
                arm,
            )
        )
    return out
