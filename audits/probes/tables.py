"""The probes' flat tables and findings, behind the probes section's hooks (``audits.sections``).

``probes`` holds one row per probe and model (rate, interval, counts); ``synthetic_voice_arms``
one row per model and voice arm of the synthetic-voice probe (real rate, synthetic rate and their
paired difference). Both become tables of ``exports/results.duckdb`` and views of ``audit query``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

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


def probe_model_results(probe: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The per-model entries of one probe (mappings with a ``rate``); other keys are probe facts."""
    return {str(k): v for k, v in probe.items() if isinstance(v, Mapping) and "rate" in v}


def probe_counts(r: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(numerator, denominator) of a probe rate, whatever the probe calls them."""
    n = next((r[k] for k in ("n_eligible", "n", "n_clips", "n_trials", "n_words") if r.get(k) is not None), None)
    k = next((r[k] for k in ("n_ref", "k", "n_leaked", "n_hits", "n_flagged", "successes") if r.get(k) is not None), None)
    return (None if k is None else int(k)), (None if n is None else int(n))


def probe_rows(probes: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per probe and model of ``summary['probes']``."""
    rows = []
    for probe, p in sorted(probes.items()):
        if not isinstance(p, Mapping):
            continue
        for model, r in sorted(probe_model_results(p).items()):
            lo, hi = ci_pair(r.get("ci95"))
            k, n = probe_counts(r)
            rows.append({"probe": probe, "model": model, "rate": r.get("rate"), "ci_lo": lo, "ci_hi": hi, "n": n, "k": k})
    return rows


def synthetic_arm_rows(probes: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The synthetic-voice probe per model and voice arm: real rate, synthetic rate, paired difference."""
    probe = probes.get("synthetic_voice")
    rows: list[dict[str, Any]] = []
    if not isinstance(probe, Mapping):
        return rows
    for model, r in sorted(probe_model_results(probe).items()):
        for arm, a in (r.get("arms") or {}).items():
            (rl, rh), (sl, sh), (dl, dh) = ci_pair(a.get("real_ci95")), ci_pair(a.get("synthetic_ci95")), ci_pair(a.get("ci95"))
            rows.append(
                {
                    "model": model,
                    "arm": arm,
                    "n_pairs": a.get("n_pairs"),
                    "n_clips": a.get("n_clips"),
                    "real_rate": a.get("real_rate"),
                    "real_ci_lo": rl,
                    "real_ci_hi": rh,
                    "synthetic_rate": a.get("synthetic_rate"),
                    "synthetic_ci_lo": sl,
                    "synthetic_ci_hi": sh,
                    "diff": a.get("rate"),
                    "diff_ci_lo": dl,
                    "diff_ci_hi": dh,
                }
            )
    return rows


def probe_tables(probes: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
    """The probes section's tables (stable columns when no probe ran)."""
    return {
        "probes": frame(probe_rows(probes), PROBE_COLUMNS),
        "synthetic_voice_arms": frame(synthetic_arm_rows(probes), SYNTHETIC_ARM_COLUMNS),
    }


def probe_findings(probes: Mapping[str, Any], summary: Mapping[str, Any]) -> list[str]:
    """Per probe: where the memorizer control lands and how many models lie below it (plain text)."""
    from audits.reports.findings import control_models, intervals_disjoint
    from audits.reports.formatting import rate_ci_text, rate_text

    out: list[str] = []
    for probe, p in sorted(probes.items()):
        if not isinstance(p, Mapping):
            continue
        res = probe_model_results(p)
        ctrl = control_models(summary, res)
        for c in ctrl:
            r = res[c]
            others = [m for m in res if m not in ctrl and res[m].get("rate") is not None]
            below = [m for m in others if intervals_disjoint(res[m].get("ci95"), r.get("ci95")) == -1]
            out.append(
                f"Probe {probe}: the memorizer control {c} scores {rate_text(r.get('rate'))} (95% CI {rate_ci_text(r.get('ci95'))}); "
                f"{len(below)} of {len(others)} other model(s) lie below it with non-overlapping intervals."
            )
    return out
