"""Findings: the sentences at the top of a report, derived only from summary figures (and, for empty references, the rows)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from audits.asr.cohort import COHORT_LABEL, CohortScores, slice_family
from audits.reports.formatting import (
    ci_bounds,
    ci_text,
    interval_text,
    pct,
)
from audits.sections import present_in
from engine.errors import RegistryError

if TYPE_CHECKING:
    from audits.result import RunResult

FAMILY_ORDER = ("accent", "accent_group", "emotion", "background", "conversation")


def model_names(summary: Mapping[str, Any]) -> list[str]:
    return sorted((summary.get("models") or {}).keys())


def by_wer(summary: Mapping[str, Any]) -> list[str]:
    """Models with a WER, lowest overall WER first (the order every per-model plot and table uses)."""
    models = summary.get("models") or {}
    return sorted((m for m in models if models[m].get("wer") is not None), key=lambda m: (models[m]["wer"], m))


def families(summary: Mapping[str, Any]) -> dict[str, list[str]]:
    """Slice family -> its ``label=value`` keys, in a stable reading order."""
    keys: set[str] = set()
    for m in (summary.get("models") or {}).values():
        keys.update((m.get("slices") or {}).keys())
    fam: dict[str, list[str]] = {}
    for k in sorted(keys):
        fam.setdefault(slice_family(k)[0], []).append(k)
    order = {f: i for i, f in enumerate(FAMILY_ORDER)}
    return dict(sorted(fam.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def _declares_control(backend: str) -> bool:
    """Whether a registered ASR backend declares itself a positive control (False for one not registered here)."""
    from engine.backends import ASR_BACKENDS, asr_capabilities

    try:
        return backend in ASR_BACKENDS and asr_capabilities(backend).positive_control
    except RegistryError:  # a plug-in's backend that does not import here: its summary did not say
        return False


def control_models(summary: Mapping[str, Any], candidates: Iterable[str]) -> list[str]:
    """Positive-control models, as their backend declared them (``backend_info.positive_control``).

    A summary written before backends recorded it asks the backend's declared capability
    (``AsrCapabilities.positive_control``: the memorizer) or a 'control' tag. A model name counts
    only for a model the run knows nothing else about (prediction files named after the memorizer);
    a model whose backend is known is never a control because of its name, so
    "anti-memorizer-whisper" on faster-whisper is an ordinary model.
    """
    out = []
    models = summary.get("models") or {}
    for m in candidates:
        e = models.get(m) or {}
        info = e.get("backend_info")
        declared = info.get("positive_control") if isinstance(info, Mapping) else None
        backend = str(e.get("backend") or "").lower()
        tags = {str(t).lower() for t in (e.get("tags") or [])}
        if declared is True:
            out.append(m)
        elif declared is None and (_declares_control(backend) or tags & {"control", "positive-control"}):
            out.append(m)
        elif declared is None and not backend and "memorizer" in m.lower():
            out.append(m)
    return out


def intervals_disjoint(a: Any, b: Any) -> int:
    """-1 when interval a lies wholly below b, +1 when wholly above, 0 when they overlap or are unknown."""
    alo, ahi = ci_bounds(a)
    blo, bhi = ci_bounds(b)
    if None in (alo, ahi, blo, bhi):
        return 0
    if ahi < blo:  # type: ignore[operator]
        return -1
    if alo > bhi:  # type: ignore[operator]
        return 1
    return 0


def findings(source: RunResult | Mapping[str, Any], cohort: CohortScores | None = None) -> list[str]:
    """Short sentences about what stands out, each backed by the numbers (plain text, unescaped)."""
    from audits.result import RunResult

    run = RunResult.of_summary(source)
    summary = run.plain_summary
    models = summary.get("models") or {}
    out: list[str] = []
    scored = sorted((m for m in models if models[m].get("wer") is not None), key=lambda m: models[m]["wer"])
    failed = [m for m in models if models[m].get("wer") is None]
    if failed:
        out.append(f"{len(failed)} model(s) produced no scorable output: {', '.join(failed)} (see run facts for the reason).")
    if len(scored) == 1:
        m = scored[0]
        out.append(
            f"{m}: WER {pct(models[m]['wer'])}% (95% CI {interval_text(models[m])}) over {models[m].get('n_words', 0)} reference words."
        )
    elif len(scored) >= 2 and ((summary.get("comparisons") or {}).get("pairs")):
        out += paired_findings(summary, scored)
    elif len(scored) >= 2:
        lead = scored[0]
        lw = models[lead]
        overlapping = [m for m in scored[1:] if intervals_disjoint(lw.get("ci95"), models[m].get("ci95")) == 0]
        separated = [m for m in scored[1:] if intervals_disjoint(lw.get("ci95"), models[m].get("ci95")) == -1]
        if not overlapping:
            out.append(
                f"{lead} has the lowest WER, {pct(lw['wer'])}% (95% CI {interval_text(lw)}); its interval does not overlap any other "
                f"model's, "
                "so it is lower than every other model on this data."
            )
        else:
            shown = ", ".join(overlapping[:6]) + (f" and {len(overlapping) - 6} more" if len(overlapping) > 6 else "")
            out.append(
                f"{lead} has the lowest point WER, {pct(lw['wer'])}% (95% CI {interval_text(lw)}), but its interval overlaps "
                f"{shown}: those differences are within the intervals."
            )
            if separated:
                out.append(
                    f"{lead} has lower WER than {', '.join(separated[:6])}{' and more' if len(separated) > 6 else ''}; those "
                    f"intervals do not overlap."
                )
        tail = scored[-1]
        if tail != lead:
            above = [m for m in scored[:-1] if intervals_disjoint(models[tail].get("ci95"), models[m].get("ci95")) == 1]
            if len(above) == len(scored) - 1:
                out.append(
                    f"{tail} has the highest WER, {pct(models[tail]['wer'])}% (95% CI {interval_text(models[tail])}), above "
                    f"every other model with non-overlapping intervals."
                )
            else:
                out.append(
                    f"The highest point WER is {tail}'s, {pct(models[tail]['wer'])}% (95% CI {interval_text(models[tail])}); "
                    f"it overlaps at least one other model's interval."
                )
    # slices: hardest slice by the median across models
    fam = families(summary)
    slice_medians: list[tuple[float, str, int]] = []
    for keys in fam.values():
        for k in keys:
            ws = [models[m]["slices"][k]["wer"] for m in scored if (models[m].get("slices") or {}).get(k, {}).get("wer") is not None]
            if ws:
                slice_medians.append((float(pd.Series(ws).median()), k, len(ws)))
    if slice_medians:
        slice_medians.sort(reverse=True)
        w, k, n = slice_medians[0]
        easy_w, easy_k, _ = slice_medians[-1]
        if k != easy_k:
            out.append(f"The hardest slice is {k} (median WER {pct(w)}% across {n} model(s)); the easiest is {easy_k} ({pct(easy_w)}%).")
    # gaps
    all_gaps = [(m, g) for m in scored for g in (models[m].get("gaps") or []) if g.get("gap") is not None]
    sig = [(m, g) for m, g in all_gaps if g.get("excludes_zero")]
    corrected = [(m, g) for m, g in all_gaps if g.get("p_holm") is not None]
    n_untestable = sum(1 for _, g in all_gaps if g.get("not_testable"))
    if corrected:
        sig = [(m, g) for m, g in corrected if g.get("significant")]
        out.append(
            f"{sum(1 for _, g in all_gaps if g.get('excludes_zero'))} of {len(all_gaps)} fairness gaps have a 95% interval that excludes "
            f"zero; "
            f"{len(sig)} remain significant after Holm correction across all {len(corrected)} testable gaps"
            + (f"; {n_untestable} are not testable (too few speakers or no variance)." if n_untestable else ".")
        )
        for m, g in sorted(sig, key=lambda mg: -abs(mg[1]["gap"]))[:4]:
            direction = "higher" if g["gap"] > 0 else "lower"
            out.append(
                f"{m}: WER on {g['label']}={g['a']} is {abs(100 * g['gap']):.1f} points {direction} than on {g['label']}={g['b']} "
                f"(95% CI {ci_text(g.get('ci95'))}, Holm-corrected p = {g['p_holm']:.3g})."
            )
    elif all_gaps:
        out.append(f"{len(sig)} of {len(all_gaps)} fairness gaps have a 95% interval that excludes zero.")
        for m, g in sorted(sig, key=lambda mg: -abs(mg[1]["gap"]))[:4]:
            direction = "higher" if g["gap"] > 0 else "lower"
            out.append(
                f"{m}: WER on {g['label']}={g['a']} is {abs(100 * g['gap']):.1f} points {direction} than on {g['label']}={g['b']} "
                f"(95% CI {ci_text(g.get('ci95'))}); the interval excludes zero."
            )
    # speed
    timed = [m for m in scored if models[m].get("rtfx")]
    if len(timed) >= 2:
        timed.sort(key=lambda m: -models[m]["rtfx"])
        frontier = pareto_front({m: (models[m]["wer"], models[m]["rtfx"]) for m in timed})
        devices = sorted({str(models[m].get("device") or "?") for m in timed})
        out.append(
            f"Fastest measured: {timed[0]} (RTFx {models[timed[0]]['rtfx']:.1f}); slowest: {timed[-1]} (RTFx "
            f"{models[timed[-1]]['rtfx']:.1f}) "
            f"on {', '.join(devices)}. On point estimates, the speed/accuracy frontier is: {', '.join(frontier)}."
        )
    failing_rows = [(m, models[m].get("n_failed", 0)) for m in models if models[m].get("n_failed")]
    if failing_rows:
        out.append("Failed rows (excluded from WER, listed in run facts): " + ", ".join(f"{m} {n}" for m, n in failing_rows) + ".")
    # each audit section's own findings, in section order (AuditSection.findings)
    for sec in present_in(summary):
        out += sec.findings(sec.result_in(run), run)
    if cohort is not None and len(cohort.models) >= 3:
        hi = [m for m, s in cohort.overall.items() if s is not None and s >= 115]
        if hi:
            out.append(
                f"Cohort scores ({COHORT_LABEL}): {', '.join(hi)} score at least one robust deviation above the cohort median overall."
            )
    return out


def paired_findings(summary: Mapping[str, Any], scored: list[str]) -> list[str]:
    """Model ranking from the paired, Holm-corrected comparisons (never from overlapping intervals)."""
    models = summary.get("models") or {}
    comp = summary.get("comparisons") or {}
    pairs = comp.get("pairs") or []
    lead = scored[0]
    beaten = sorted({p["b"] if p["better"] == p["a"] else p["a"] for p in pairs if p.get("better") == lead})
    same = sorted(
        {
            p["b"] if p["a"] == lead else p["a"]
            for p in pairs
            if lead in (p["a"], p["b"]) and not p.get("better") and not p.get("not_testable")
        }
    )
    untestable = sorted({p["b"] if p["a"] == lead else p["a"] for p in pairs if lead in (p["a"], p["b"]) and p.get("not_testable")})
    out = [f"{lead} has the lowest WER, {pct(models[lead]['wer'])}% (95% CI {interval_text(models[lead])})."]
    if beaten:
        out.append(
            f"{lead} is better than {', '.join(beaten[:6])}{f' and {len(beaten) - 6} more' if len(beaten) > 6 else ''} "
            f"(paired speaker-block bootstrap, Holm-corrected across all {len(pairs)} pairs)."
        )
    if same:
        out.append(
            f"{lead} is not distinguishable from {', '.join(same[:6])}{f' and {len(same) - 6} more' if len(same) > 6 else ''} after "
            f"correction."
        )
    if untestable:
        out.append(f"{lead} vs {', '.join(untestable[:6])}: not testable on these clips (see the paired comparisons).")
    tiers = comp.get("tiers") or []
    if len(tiers) > 1:
        out.append(f"Models fall into {len(tiers)} tiers of indistinguishable models: " + "; ".join(", ".join(t) for t in tiers) + ".")
    return out


def pareto_front(points: Mapping[str, tuple[float, float]]) -> list[str]:
    """Models not dominated in (lower WER, higher RTFx), fastest first."""
    front = []
    for m, (w, r) in points.items():
        dominated = any((w2 <= w and r2 >= r) and (w2 < w or r2 > r) for m2, (w2, r2) in points.items() if m2 != m)
        if not dominated:
            front.append(m)
    return sorted(front, key=lambda m: -points[m][1])


def empty_ref_finding(df: pd.DataFrame | None) -> list[str]:
    if df is None:
        return []
    counts = empty_references(df)
    if not counts:
        return []
    n = max(counts.values())
    return [
        (
            f"{n} utterance(s) have an empty reference after normalization; they are scored apart from WER as speech-free clips "
            "(hallucination rate in the hallucination section) and left out of the worst-utterance lists."
        )
    ]


def empty_references(df: pd.DataFrame) -> dict[str, int]:
    """Per model: scored rows whose normalized reference is empty (speech-free clips, scored apart from WER)."""
    bad = df[df["ok"] & (df["n_words"] == 0)]
    return {str(m): len(g) for m, g in bad.groupby("model", sort=True)}
