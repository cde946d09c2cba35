"""Cohort scores: SpeechEQ SEQ-style robust standardized scores across the evaluated models.

A raw metric says how a model did; a cohort score says where it stands among the models that
were evaluated together. For each quantity x (oriented so that larger is better, e.g. x = -WER):

    score = 100 + 15 * clip((x - median) / (1.4826 * MAD), -4, 4)

with the median and the median absolute deviation (MAD) taken over the cohort. 1.4826 * MAD
estimates the standard deviation for normal data, so 15 points is about one standard
deviation, like an IQ-style scale; the clip caps any model at 40..160 so one outlier cannot
dominate. When MAD is 0 (all models equal, or a single model) every score is 100.

Scores are *relative to the evaluated cohort*: adding or removing models changes them. They
are a reading aid for a sweep, never a replacement for the WER and its interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAD_SCALE = 1.4826
SCALE_POINTS = 15.0
CENTRE = 100.0
CAP_DEVIATIONS = 4.0
COHORT_LABEL = "relative to the evaluated cohort"


def robust_scores(values: Mapping[str, float | None], higher_is_better: bool = True) -> dict[str, float | None]:
    """SEQ-style score per key; ``None``/non-finite inputs give ``None`` and do not enter the median.

    ``higher_is_better=False`` flips the sign first (use it for error rates such as WER), so a
    higher score always means a better model.
    """
    sign = 1.0 if higher_is_better else -1.0
    usable = {k: sign * float(v) for k, v in values.items() if v is not None and math.isfinite(float(v))}
    out: dict[str, float | None] = {k: None for k in values}
    if not usable:
        return out
    xs = np.asarray(list(usable.values()), dtype=np.float64)
    med = float(np.median(xs))
    mad = float(np.median(np.abs(xs - med)))
    for k, x in usable.items():
        if mad == 0.0:
            out[k] = CENTRE
            continue
        z = (x - med) / (MAD_SCALE * mad)
        z = max(-CAP_DEVIATIONS, min(CAP_DEVIATIONS, z))
        out[k] = CENTRE + SCALE_POINTS * z
    return out


def slice_family(key: str) -> tuple[str, str]:
    """``"accent=us"`` -> ``("accent", "us")``; a key without ``=`` is its own family."""
    label, sep, value = key.partition("=")
    return (label, value) if sep else (key, "")


@dataclass
class CohortScores:
    """Overall, per-family and per-slice cohort scores for the models of one report."""

    models: list[str]
    overall: dict[str, float | None]
    families: dict[str, dict[str, float | None]]  # family -> model -> score
    slices: dict[str, dict[str, float | None]]  # "label=value" -> model -> score
    family_wer: dict[str, dict[str, float | None]]  # family -> model -> macro WER (the x behind the score)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": COHORT_LABEL,
            "formula": "100 + 15 * clip((x - median) / (1.4826 * MAD), -4, 4); x = -WER; 100 when MAD = 0",
            "n_models": len(self.models),
            "models": list(self.models),
            "overall": dict(self.overall),
            "families": {k: dict(v) for k, v in self.families.items()},
            "slices": {k: dict(v) for k, v in self.slices.items()},
            "family_wer": {k: dict(v) for k, v in self.family_wer.items()},
            "notes": list(self.notes),
        }


def scorable_models(summary: Mapping[str, Any]) -> list[str]:
    """Models with a WER (a model that could not run is not part of the cohort)."""
    return sorted(m for m, e in summary.get("models", {}).items() if e.get("wer") is not None)


def cohort_scores(summary: Mapping[str, Any], models: Sequence[str] | None = None) -> CohortScores:
    """Scores from ``summary.json``: overall from WER, per family from the family's macro WER.

    A family's macro WER is the unweighted mean of the model's WER over the family's values
    (each accent, each background counts once, however many utterances it has), so a model
    that fails one condition badly is not hidden by a large easy condition. A model missing a
    value of the family (no rows there) gets no family score rather than an unfair one.
    """
    ms = list(models) if models is not None else scorable_models(summary)
    entries = summary.get("models", {})
    overall = robust_scores({m: entries[m].get("wer") for m in ms}, higher_is_better=False)
    slice_wer: dict[str, dict[str, float | None]] = {}
    for m in ms:
        for key, s in (entries[m].get("slices") or {}).items():
            slice_wer.setdefault(key, {})[m] = s.get("wer")
    slices = {key: robust_scores({m: vals.get(m) for m in ms}, higher_is_better=False) for key, vals in sorted(slice_wer.items())}
    by_family: dict[str, list[str]] = {}
    for key in slice_wer:
        by_family.setdefault(slice_family(key)[0], []).append(key)
    families: dict[str, dict[str, float | None]] = {}
    family_wer: dict[str, dict[str, float | None]] = {}
    notes: list[str] = []
    for fam, keys in sorted(by_family.items()):
        macro: dict[str, float | None] = {}
        for m in ms:
            vals = [slice_wer[k].get(m) for k in keys]
            if any(v is None for v in vals):
                macro[m] = None
                notes.append(f"{m}: no family score for '{fam}' (no scored rows in {sum(v is None for v in vals)} of its {len(keys)} "
                    f"values)")
            else:
                macro[m] = float(np.mean([float(v) for v in vals if v is not None]))
        family_wer[fam] = macro
        families[fam] = robust_scores(macro, higher_is_better=False)
    if len(ms) < 3:
        notes.append(f"only {len(ms)} model(s) in the cohort: scores say little about standing")
    return CohortScores(ms, overall, families, slices, family_wer, notes)


def cohort_markdown(summary: Mapping[str, Any]) -> str:
    """A Markdown section for ``report.md`` (appended after the per-slice tables)."""
    from audits.reports.formatting import md

    cs = cohort_scores(summary)
    if not cs.models:
        return ""
    fams = list(cs.families)
    lines = [
        f"## Cohort scores ({COHORT_LABEL}, {len(cs.models)} models)",
        "",
        (
            "SpeechEQ SEQ-style: 100 + 15 · (x − median) / (1.4826 · MAD), deviations capped at ±4, x = −WER "
            "(family x = −mean WER over the family's values); higher is better; 100 = cohort median. "
            "Adding or removing models changes these numbers."
        ),
        "",
        "| model | overall | " + " | ".join(md(f) for f in fams) + " |",
        "|---|---:|" + "---:|" * len(fams),
    ]

    def fmt(x: float | None) -> str:
        return "—" if x is None else f"{x:.0f}"

    for m in cs.models:
        lines.append(f"| {md(m)} | {fmt(cs.overall.get(m))} | " + " | ".join(fmt(cs.families[f].get(m)) for f in fams) + " |")
    return "\n".join(lines + [""])
