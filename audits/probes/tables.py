"""The probes' flat tables and findings, behind the probes section's hooks (``audits.sections``).

They read the section's typed result (``audits.probes.results``). ``probes`` holds one row per probe
and model (rate, interval, counts); ``synthetic_voice_arms`` one row per model and voice arm of the
synthetic-voice probe (real rate, synthetic rate and their paired difference). Both become tables of
``exports/results.duckdb`` and views of ``audit query``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from audits.probes.results import ProbesResult, SyntheticModel, SyntheticVoiceProbe, figure_value
from audits.records import Record
from audits.reports.tables import ci_pair, frame

PROBE_COLUMNS = ("probe", "model", "rate", "ci_lo", "ci_hi", "n", "k")


SYNTHETIC_ARM_COLUMNS = (
    "model",
    "arm",
    "n_pairs",
    "n_clips",
    "real_rate",
    "real_ci_lo",
    "real_ci_hi",
    "synthetic_rate",
    "synthetic_ci_lo",
    "synthetic_ci_hi",
    "diff",
    "diff_ci_lo",
    "diff_ci_hi",
)


_N_KEYS = ("n_eligible", "n", "n_clips", "n_trials", "n_words")
_K_KEYS = ("n_ref", "k", "n_leaked", "n_hits", "n_flagged", "successes")


def probe_counts(r: Record) -> tuple[int | None, int | None]:
    """(numerator, denominator) of a probe rate, whatever the probe calls them."""
    n = next((v for v in (figure_value(r, key) for key in _N_KEYS) if v is not None), None)
    k = next((v for v in (figure_value(r, key) for key in _K_KEYS) if v is not None), None)
    return (None if k is None else int(k)), (None if n is None else int(n))


def probe_rows(probes: ProbesResult) -> list[dict[str, Any]]:
    """One row per probe and model of the probes' result."""
    rows = []
    for probe, p in sorted(probes.entries.items()):
        for model, r in sorted(p.models.items()):
            lo, hi = ci_pair(figure_value(r, "ci95"))
            k, n = probe_counts(r)
            rows.append({"probe": probe, "model": model, "rate": figure_value(r, "rate"), "ci_lo": lo, "ci_hi": hi, "n": n, "k": k})
    return rows


def synthetic_arm_rows(probes: ProbesResult) -> list[dict[str, Any]]:
    """The synthetic-voice probe per model and voice arm: real rate, synthetic rate, paired difference."""
    probe = probes.entries.get("synthetic_voice")
    rows: list[dict[str, Any]] = []
    if not isinstance(probe, SyntheticVoiceProbe):
        return rows
    for model, r in sorted(probe.models.items()):
        arms = r.arms if isinstance(r, SyntheticModel) else None
        for arm, a in (arms or {}).items():
            (rl, rh), (sl, sh), (dl, dh) = ci_pair(a.real_ci95), ci_pair(a.synthetic_ci95), ci_pair(a.ci95)
            rows.append(
                {
                    "model": model,
                    "arm": arm,
                    "n_pairs": figure_value(a, "n_pairs"),
                    "n_clips": figure_value(a, "n_clips"),
                    "real_rate": a.real_rate,
                    "real_ci_lo": rl,
                    "real_ci_hi": rh,
                    "synthetic_rate": a.synthetic_rate,
                    "synthetic_ci_lo": sl,
                    "synthetic_ci_hi": sh,
                    "diff": a.rate,
                    "diff_ci_lo": dl,
                    "diff_ci_hi": dh,
                }
            )
    return rows


def probe_tables(probes: ProbesResult | None) -> dict[str, pd.DataFrame]:
    """The probes section's tables (stable columns when no probe ran, ``probes`` None when the run had no probes)."""
    return {
        "probes": frame(probe_rows(probes) if probes is not None else [], PROBE_COLUMNS),
        "synthetic_voice_arms": frame(synthetic_arm_rows(probes) if probes is not None else [], SYNTHETIC_ARM_COLUMNS),
    }


def probe_findings(probes: ProbesResult, summary: Mapping[str, Any]) -> list[str]:
    """Per probe: where the memorizer control lands and how many models lie below it (plain text)."""
    from audits.reports.findings import control_models, intervals_disjoint
    from audits.reports.formatting import rate_ci_text, rate_text

    out: list[str] = []
    for probe, p in sorted(probes.entries.items()):
        res = p.models
        ctrl = control_models(summary, res)
        for c in ctrl:
            r = res[c]
            others = [m for m in res if m not in ctrl and figure_value(res[m], "rate") is not None]
            below = [m for m in others if intervals_disjoint(figure_value(res[m], "ci95"), figure_value(r, "ci95")) == -1]
            rate, ci = figure_value(r, "rate"), figure_value(r, "ci95")
            out.append(
                f"Probe {probe}: the memorizer control {c} scores {rate_text(rate)} (95% CI {rate_ci_text(ci)}); "
                f"{len(below)} of {len(others)} other model(s) lie below it with non-overlapping intervals."
            )
    return out
