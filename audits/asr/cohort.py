"""Cohort scores: SpeechEQ SEQ-style robust standardized scores across the evaluated models.

A raw metric says how a model did; a cohort score says where it stands among the models that
were evaluated together. For each quantity x (oriented so that larger is better, e.g. x = -WER):

    score = 100 + 15 * clip((x - median) / (1.4826 * MAD), -4, 4)

with the median and the median absolute deviation (MAD) taken over the cohort. 1.4826 * MAD
estimates the standard deviation for normal data, so 15 points is about one standard
deviation, like an IQ-style scale; the clip caps any model at 40..160 so one outlier cannot
dominate.

Scores follow the engine's testability rule (docs/metrics.md): with fewer than three models with a
value, or a MAD of 0 (at least half the models share the median value, so a deviation cannot be
scaled), there is no standing to score: every score of that quantity is None and ``not_testable``
says why, never a row of 100s that would put an outlier at the median.

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
MIN_COHORT = 3
"""Models with a value a robust score needs: with two, every score is 100 +- 10.1 whatever the values."""


def robust_scores(values: Mapping[str, float | None], higher_is_better: bool = True) -> dict[str, float | None]:
    """SEQ-style score per key; ``None``/non-finite inputs give ``None`` and do not enter the median.

    ``higher_is_better=False`` flips the sign first (use it for error rates such as WER), so a
    higher score always means a better model. Every score is None when the scores are not testable
    (``robust_scores_checked`` gives the reason).
    """
    return robust_scores_checked(values, higher_is_better)[0]


def robust_scores_checked(values: Mapping[str, float | None], higher_is_better: bool = True) -> tuple[dict[str, float | None], str | None]:
    """``(scores, None)``, or ``(all None, reason)`` when fewer than ``MIN_COHORT`` values or a MAD of 0 leave nothing to score."""
    sign = 1.0 if higher_is_better else -1.0
    usable = {k: sign * float(v) for k, v in values.items() if v is not None and math.isfinite(float(v))}
    out: dict[str, float | None] = {k: None for k in values}
    if len(usable) < MIN_COHORT:
        return out, f"{len(usable)} model(s) with a value; a robust score needs at least {MIN_COHORT}"
    xs = np.asarray(list(usable.values()), dtype=np.float64)
    med = float(np.median(xs))
    mad = float(np.median(np.abs(xs - med)))
    if mad == 0.0:
        return out, (
            f"no spread: at least half of the {len(usable)} models have the same value ({abs(med):.4g}), so the median absolute "
            "deviation is 0 and no deviation can be scaled"
        )
    for k, x in usable.items():
        z = (x - med) / (MAD_SCALE * mad)
        z = max(-CAP_DEVIATIONS, min(CAP_DEVIATIONS, z))
        out[k] = CENTRE + SCALE_POINTS * z
    return out, None


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
    not_testable: dict[str, str] = field(default_factory=dict)  # "overall", a family or a slice -> why it has no scores

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": COHORT_LABEL,
            "formula": "100 + 15 * clip((x - median) / (1.4826 * MAD), -4, 4); x = -WER; not testable with fewer than 3 models or MAD = 0",
            "n_models": len(self.models),
            "models": list(self.models),
            "overall": dict(self.overall),
            "families": {k: dict(v) for k, v in self.families.items()},
            "slices": {k: dict(v) for k, v in self.slices.items()},
            "family_wer": {k: dict(v) for k, v in self.family_wer.items()},
            "notes": list(self.notes),
            "not_testable": dict(self.not_testable),
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
    untestable: dict[str, str] = {}

    def scores(key: str, values: Mapping[str, float | None]) -> dict[str, float | None]:
        out, reason = robust_scores_checked(values, higher_is_better=False)
        if reason:
            untestable[key] = reason
        return out

    overall = scores("overall", {m: entries[m].get("wer") for m in ms})
    slice_wer: dict[str, dict[str, float | None]] = {}
    for m in ms:
        for key, s in (entries[m].get("slices") or {}).items():
            slice_wer.setdefault(key, {})[m] = s.get("wer")
    slices = {key: scores(key, {m: vals.get(m) for m in ms}) for key, vals in sorted(slice_wer.items())}
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
                notes.append(
                    f"{m}: no family score for '{fam}' (no scored rows in {sum(v is None for v in vals)} of its {len(keys)} values)"
                )
            else:
                macro[m] = float(np.mean([float(v) for v in vals if v is not None]))
        family_wer[fam] = macro
        families[fam] = scores(fam, macro)
    if len(ms) < 3:
        notes.append(f"only {len(ms)} model(s) in the cohort: scores say little about standing")
    return CohortScores(ms, overall, families, slices, family_wer, notes, untestable)


def cohort_markdown(summary: Mapping[str, Any]) -> str:
    """A Markdown section for ``report.md`` (appended after the per-slice tables)."""
    from audits.reports.formatting import md

    cs = cohort_scores(summary)
    if not cs.models:
        return ""
    if len(cs.models) < MIN_COHORT:  # every score is not testable for the same reason: say it once
        return "\n".join(
            [
                f"## Cohort scores ({COHORT_LABEL}, {len(cs.models)} models)",
                "",
                f"Not testable: {len(cs.models)} model(s) with a WER; a robust score needs at least {MIN_COHORT}.",
                "",
            ]
        )
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
    shown = ["overall", *fams]
    reasons = [f"- {md(k)}: not testable ({md(cs.not_testable[k])})" for k in shown if k in cs.not_testable]
    return "\n".join(lines + ([""] + reasons if reasons else []) + [""])
