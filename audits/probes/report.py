"""The benchmark-optimization probes' part of report.md and report.html (one table per probe).

The page puts the positive control (the memorizer) first in each probe and compares every
other model with it by interval overlap, so a reader sees whether the probe could have flagged
a model that learned the references.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audits.probes.results import ProbeRecord, ProbesResult, SyntheticModel, SyntheticVoiceProbe, figure_value
from audits.probes.tables import probe_counts
from audits.records import Record, thaw
from audits.reports.charts import IntervalRow, svg_interval_panels
from audits.reports.findings import control_models, intervals_disjoint
from audits.reports.formatting import attrs, ci_bounds, esc, md, num_attr, rate_ci_text, rate_text
from audits.reports.judges import judge_lines, render_judges

_COUNT_KEYS = ("n_gated", "n_leaked", "n_ref", "n_eligible", "n_clips", "n_pairs")


def probe_lines(probes: ProbesResult, title: str) -> list[str]:
    """One table per probe: rate (or switch), interval and counts per model."""
    if not probes.entries:
        return []
    out = [f"## {title}", ""]
    for probe, p in sorted(probes.entries.items()):
        judges = judge_lines(_judges(p), f"{probe}: audio-LM judges (synthetic-speech likelihood)")
        if not p.models:
            out += judges
            continue
        out += [f"### {md(probe)}", "", "| model | value | 95% CI | counts | status |", "|---|---:|---|---|---|"]
        for m, v in sorted(p.models.items()):
            counts = ", ".join(f"{k}={figure_value(v, k)}" for k in _COUNT_KEYS if k in set(v.keys()))
            value, ci = figure_value(v, "rate"), figure_value(v, "ci95")
            status = figure_value(v, "status") if "status" in set(v.keys()) else ""
            out.append(f"| {md(m)} | {rate_text(value)} | {rate_ci_text(ci)} | {md(counts)} | {md(status)} |")
        out.append("")
        out += judges
        if isinstance(p, SyntheticVoiceProbe):
            out += synthetic_arm_lines(p)
    return out


def _judges(p: ProbeRecord) -> dict[str, Any] | None:
    judges = p.judge_results()
    return None if judges is None else thaw(judges)


def arm_rows(probe: SyntheticVoiceProbe) -> list[dict[str, Any]]:
    """Real vs each synthetic-voice arm, one row per model and arm (``probes.synthetic_voice.<model>.arms``)."""
    out = []
    for m, v in sorted(probe.models.items()):
        if not isinstance(v, SyntheticModel) or v.arms is None:
            continue
        for arm, a in v.arms.items():
            out.append(
                {
                    "model": m,
                    "arm": arm,
                    "n_pairs": figure_value(a, "n_pairs"),
                    "n_clips": figure_value(a, "n_clips"),
                    "real": a.real_rate,
                    "real_ci95": thaw(a.real_ci95),
                    "synthetic": a.synthetic_rate,
                    "synthetic_ci95": thaw(a.synthetic_ci95),
                    "diff": a.rate,
                    "diff_ci95": thaw(a.ci95),
                    "status": a.status,
                }
            )
    return out


def _matched_note(p: SyntheticVoiceProbe) -> str:
    mt = p.matched
    if mt is None:
        return ""
    chosen = ", ".join(f"{k} ({n})" for k, n in mt.chosen.items())
    sim = mt.similarity
    sims = f"; cosine to the speaker mean {sim.get('mean')} (min {sim.get('min')}, max {sim.get('max')})" if sim else ""
    return f"Matched voices ({'' if mt.encoder is None else mt.encoder}, {mt.n_speakers} speakers): {chosen or 'none'}{sims}."


def synthetic_arm_lines(probe: SyntheticVoiceProbe) -> list[str]:
    """Markdown: real vs matched vs generic per model, with the paired differences."""
    rows = arm_rows(probe)
    if not rows:
        return []
    out = [
        "#### synthetic_voice: real vs each voice arm",
        "",
        "Rates of writing the benchmark's version; the difference is paired (same items), 95% bootstrap intervals over clips.",
        "",
        "| model | arm | pairs | real | synthetic | real − synthetic |",
        "|---|---|---:|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {md(r['model'])} | {md(r['arm'])} | {r['n_pairs']} | {rate_text(r['real'])} {rate_ci_text(r['real_ci95'])} | "
            f"{rate_text(r['synthetic'])} {rate_ci_text(r['synthetic_ci95'])} | {rate_text(r['diff'])} {rate_ci_text(r['diff_ci95'])} |"
        )
    note = _matched_note(probe)
    return out + ([""] + [md(note)] if note else []) + [""]


def probes_data(probes: ProbesResult, summary: Mapping[str, Any]) -> dict[str, Any]:
    """Per probe: each model's rate, interval and counts, the control models, and the probe's facts (plain JSON, embedded in
    report.html)."""
    out: dict[str, Any] = {}
    for probe, p in sorted(probes.entries.items()):
        res = p.models
        out[probe] = {
            "models": {m: _model_data(r) for m, r in res.items()},
            "controls": control_models(summary, res),
            "facts": {k: thaw(v) for k, v in p.facts() if isinstance(v, (str, int, float, bool)) or k == "panel"},
            "judges": _judges(p),
        }
        if isinstance(p, SyntheticVoiceProbe):
            out[probe]["arms"] = arm_rows(p)
            out[probe]["matched_note"] = _matched_note(p)
    return out


def _model_data(r: Record) -> dict[str, Any]:
    k, n = probe_counts(r)
    return {"rate": figure_value(r, "rate"), "ci95": thaw(figure_value(r, "ci95")), "k": k, "n": n}


def render_probes(probes_data: Mapping[str, Any], colors: Mapping[str, str]) -> str:
    """Per probe: facts, an interval plot with the control first, and a table comparing each model with the control."""
    out = []
    for probe, p in probes_data.items():
        res = p["models"]
        ctrl = p["controls"]
        out.append(f"<h3 id='probe-{esc(probe)}'>{esc(probe)}</h3>")
        facts = {k: v for k, v in p.get("facts", {}).items()}
        if facts:
            facts_text = "; ".join(f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in facts.items())
            out.append("<p class='note'>" + esc(facts_text) + "</p>")
        if not ctrl:
            out.append(
                "<p class='note'><span class='badge bad'>no control</span> No memorizer control ran in this probe, so nothing shows "
                "the probe can flag a model that memorized the references.</p>"
            )
        order = ctrl + sorted((m for m in res if m not in ctrl), key=lambda m: -(res[m].get("rate") or 0))
        rows = [
            IntervalRow(
                m,
                res[m].get("rate"),
                *ci_bounds(res[m].get("ci95")),
                color="#e15759" if m in ctrl else colors.get(m, "#4e79a7"),
                strong=m in ctrl,
            )
            for m in order
        ]
        out.append(
            svg_interval_panels(order, [(f"{probe}: rate (95% CI)", rows)], 0.0, 1.0, f"{probe} rate per model", percent=False, width=720)
        )
        out.append(
            f"<table class='sortable probe-table' data-probe='{esc(probe)}'><thead><tr><th class='l'>model</th><th>rate</th><th>95% "
            f"CI</th><th>count</th>"
        )
        out.append("".join(f"<th>control {esc(c)}</th>" for c in ctrl) + "<th class='l'>against the control</th></tr></thead><tbody>")
        for m in order:
            r = res[m]
            lo, hi = ci_bounds(r.get("ci95"))
            is_ctrl = m in ctrl
            cmp = "this is the positive control" if is_ctrl else ""
            if not is_ctrl and ctrl:
                rels = []
                for c in ctrl:
                    d = intervals_disjoint(r.get("ci95"), res[c].get("ci95"))
                    rels.append(
                        {
                            -1: f"below {c}; intervals do not overlap",
                            1: f"above {c}; intervals do not overlap",
                            0: f"overlaps {c}: not distinguishable from the control",
                        }[d]
                    )
                cmp = "; ".join(rels)
            row_attrs = attrs(
                probe=probe,
                model=m,
                rate=num_attr(r.get("rate")),
                ci_lo=num_attr(lo),
                ci_hi=num_attr(hi),
                k=r.get("k") if r.get("k") is not None else "",
                n=r.get("n") if r.get("n") is not None else "",
                control="true" if is_ctrl else "false",
            )
            out.append(
                f"<tr class='probe-row{' control' if is_ctrl else ''}'{row_attrs}>"
                f"<td class='l'>{esc(m)}{' <span class=badge>control</span>' if is_ctrl else ''}</td><td "
                f"data-sort='{num_attr(r.get('rate'))}'>{rate_text(r.get('rate'))}</td>"
                f"<td class='ci'>{rate_ci_text(r.get('ci95'))}</td><td>{esc(r.get('k') if r.get('k') is not None else '—')} / "
                f"{esc(r.get('n') if r.get('n') is not None else '—')}</td>"
                + "".join(f"<td class='ci'>{rate_text(res[c].get('rate'))} {rate_ci_text(res[c].get('ci95'))}</td>" for c in ctrl)
                + f"<td class='l'>{esc(cmp)}</td></tr>"
            )
        out.append("</tbody></table>")
        out.append(render_judges(p.get("judges"), f"{probe}: audio-LM judges (synthetic-speech likelihood)"))
        if p.get("arms"):
            out.append(_render_arms(probe, p["arms"], p.get("matched_note") or ""))
    return "".join(out)


def _render_arms(probe: str, rows: list[Mapping[str, Any]], note: str) -> str:
    """HTML: real vs each voice arm per model (synthetic-voice probe)."""
    out = [f"<h4>{esc(probe)}: real vs each voice arm</h4>"]
    if note:
        out.append(f"<p class='note'>{esc(note)}</p>")
    out.append(
        "<table class='sortable probe-arms'><thead><tr><th class='l'>model</th><th class='l'>arm</th><th>pairs</th>"
        "<th>real</th><th>95% CI</th><th>synthetic</th><th>95% CI</th><th>real − synthetic</th><th>95% CI</th></tr></thead><tbody>"
    )
    for r in rows:
        lo, hi = ci_bounds(r.get("diff_ci95"))
        arm_attrs = attrs(probe=probe, model=r["model"], arm=r["arm"], diff=num_attr(r.get("diff")), ci_lo=num_attr(lo), ci_hi=num_attr(hi))
        out.append(
            f"<tr class='arm-row'{arm_attrs}>"
            f"<td class='l'>{esc(r['model'])}</td><td class='l'>{esc(r['arm'])}</td><td>{esc(r.get('n_pairs'))}</td>"
            f"<td>{rate_text(r.get('real'))}</td><td class='ci'>{rate_ci_text(r.get('real_ci95'))}</td>"
            f"<td>{rate_text(r.get('synthetic'))}</td><td class='ci'>{rate_ci_text(r.get('synthetic_ci95'))}</td>"
            f"<td data-sort='{num_attr(r.get('diff'))}'>{rate_text(r.get('diff'))}</td><td class='ci'>"
            f"{rate_ci_text(r.get('diff_ci95'))}</td></tr>"
        )
    out.append("</tbody></table>")
    return "".join(out)
