"""The profiles section in report.md and report.html: maps, gap table, profile chart, rank stability, ladders, trade-offs.

Every string from the data goes through ``md`` (Markdown) or ``esc`` (HTML).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from audits.reports.charts import IntervalRow, svg_interval_panels, svg_scatter
from audits.reports.formatting import esc, interval_text, md, pct


def _p(x: Any) -> str:
    return "—" if x is None else f"{float(x):.3g}"


def _pts(x: Any) -> str:
    return "—" if x is None else f"{100 * float(x):+.1f}"


def _level(x: Any, unit: str) -> str:
    return "beyond ladder" if x is None else f"{float(x):g}{(' ' + unit) if unit else ''}"


def _break_ci(r: Mapping[str, Any], unit: str) -> str:
    """Interval of the breaking point; a bound beyond the harshest level reads 'beyond ladder'."""
    if r.get("breaking_not_testable"):
        return f"not testable ({r['breaking_not_testable']})"
    if "breaking_share" not in r:
        return "—"
    lo, hi = r.get("breaking_ci95") or [None, None]
    return f"[{_level(lo, unit)}, {_level(hi, unit)}]"


def _interval_row(label: str, x: Mapping[str, Any], color: str, strong: bool = False) -> IntervalRow:
    lo, hi = x.get("ci95") or [None, None]
    return IntervalRow(label, x.get("wer"), lo, hi, color, strong=strong)


def _movers_text(rs: Mapping[str, Any], quote: Callable[[Any], str]) -> str:
    """The models whose rank moves most (``quote``: md or esc)."""
    moved = [x for x in rs.get("movers") or [] if x["max_shift"] != 0]
    if not moved:
        return "No model changes rank in any condition."
    return (
        "Largest rank moves (+ = worse rank in that condition): "
        + "; ".join(f"{quote(x['model'])} {x['max_shift']:+g} on {quote(x['condition'])}" for x in moved[:5])
        + "."
    )


def _rtfx_text(r: Mapping[str, Any]) -> str:
    return "—" if not r.get("rtfx") else f"{float(r['rtfx']):.1f}"


def _cost_text(r: Mapping[str, Any]) -> str:
    c = r.get("cost_per_audio_hour_usd")
    return "unknown" if c is None else f"{float(c):.4f}"


def _tau_text(t: Any) -> str:
    return "—" if t is None else f"{float(t):.2f}"


def _tau_ci(e: Mapping[str, Any]) -> str:
    """Kendall's tau interval, or why it is not testable (plain text)."""
    return interval_text(e, digits=2, scale=1.0)


def _slope_ci(r: Mapping[str, Any]) -> str:
    """The slope's interval in points per unit, or why it is not testable (plain text)."""
    if r.get("slope_not_testable"):
        return f"not testable ({r['slope_not_testable']})"
    sc = r.get("slope_ci95") or [None, None]
    return "" if sc[0] is None else f"[{100 * sc[0]:+.2f}, {100 * sc[1]:+.2f}]"


def _significant(g: Mapping[str, Any]) -> str:
    return "yes" if g.get("significant") else "—" if g.get("not_testable") else "no"


def map_lines(section: Mapping[str, Any]) -> list[str]:
    out = []
    for m in section.get("condition_maps") or []:
        head = f"- map `{md(m['map'])}` ({md(m['file'])}) on column `{md(m['column'])}` -> {', '.join(md(o) for o in m['outputs'])}: "
        if m.get("column_missing"):
            out.append(head + "**the dataset has no such column; nothing mapped**")
            continue
        mapped = "; ".join(
            f"{md(v)} -> {'/'.join(md(a[o]) for o in m['outputs'])} "
            f"({md(a['source'])}{', ' + md(a['match']) if a['match'] != 'exact' else ''})"
            for v, a in m["mapped"].items()
        )
        out.append(head + (mapped or "nothing mapped"))
        if m["unmapped"]:
            out.append("  - **unmapped** (in no condition): " + ", ".join(f"{md(v)} ({n} clips)" for v, n in m["unmapped"].items()))
    return out


def ladder_md(lad: Mapping[str, Any]) -> list[str]:
    """report.md lines of one ladder: WER per level, slope, breaking point."""
    lines: list[str] = []
    unit = lad.get("unit", "")
    lines += [
        f"### Ladder: {md(lad['name'])} (baseline {md(lad['baseline'])}; breaking point = first level with WER > baseline + "
        f"{100 * lad['margin']:.0f} points)",
        "",
        "| model | baseline WER % | " + " | ".join(f"{md(x['value'])}" for x in lad["levels"]) + f" | slope (points / "
        f"{md(unit) or 'unit'}) | breaking point | 95% CI |",
        "|---|---:|" + "---:|" * len(lad["levels"]) + "---:|---|---|",
    ]
    for m, r in lad["models"].items():
        lines.append(
            f"| {md(m)} | {pct(r['baseline']['wer'])} | "
            + " | ".join(f"{pct(x['wer'])} {md(interval_text(x))}" for x in r["levels"])
            + f" | {_pts(r.get('slope'))} {md(_slope_ci(r))} | "
            f"{md(_level(r.get('breaking_point'), unit))} | " + md(_break_ci(r, unit)) + " |"
        )
    lines.append("")
    return lines


def ladder_html(lad: Mapping[str, Any], colors: Mapping[str, str]) -> str:
    """report.html block of one ladder: small multiples of WER per level, slope and breaking point."""
    unit = lad.get("unit", "")
    labels = [lad["baseline"]] + [x["value"] for x in lad["levels"]]
    panels = []
    hi = 0.0
    for m, r in lad["models"].items():
        color = colors.get(m, "#4e79a7")
        rows_ = [_interval_row(lad["baseline"], r["baseline"], color, strong=True)] + [
            _interval_row(x["value"], x, color) for x in r["levels"]
        ]
        hi = max([hi] + [v for x in rows_ for v in (x.value, x.hi) if v is not None])
        panels.append((m, rows_))
    body = svg_interval_panels(labels, panels, 0.0, min(1.5, max(0.1, hi * 1.05)), f"WER along the {lad['name']} ladder")
    rows2 = "".join(
        f"<tr data-model='{esc(m)}'><td class='l'>{esc(m)}</td><td>{esc(_pts(r.get('slope')))} {esc(_slope_ci(r))}</td><td>"
        f"{esc(_level(r.get('breaking_point'), unit))}</td>"
        f"<td>{esc(_break_ci(r, unit))}</td></tr>"
        for m, r in lad["models"].items()
    )
    return (
        f"<h3>Ladder: {esc(lad['name'])}</h3>{body}<table class='ladder'><thead><tr><th class='l'>model</th><th>slope (points / "
        f"{esc(unit or 'unit')})</th>"
        f"<th>breaking point (WER > baseline + {100 * lad['margin']:.0f} pts)</th><th>95% CI</th></tr></thead><tbody>"
        f"{rows2}</tbody></table>"
    )


def profiles_lines(section: Mapping[str, Any], title: str) -> list[str]:
    """report.md lines of the section."""
    lines = [f"## {md(title)}", ""]
    lines += map_lines(section)
    if section.get("missing_columns"):
        lines.append(f"- columns asked for but absent: {', '.join(md(c) for c in section['missing_columns'])}")
    lines.append("")
    gt = section.get("gap_table") or {}
    if gt.get("gaps"):
        lines += [
            "### The study's gaps (WER a − b, points; speaker-block bootstrap; Holm across all gaps)",
            "",
            "| model | gap | points | 95% CI | p (Holm) | significant |",
            "|---|---|---:|---|---:|---|",
        ]
        for model, gaps in (gt.get("models") or {}).items():
            for g in gaps:
                lines.append(
                    f"| {md(model)} | {md(g['label'])}: {md(g['a'])} − {md(g['b'])} | {_pts(g.get('gap'))} | "
                    f"{md(interval_text(g))} | "
                    f"{_p(g.get('p_holm'))} | {_significant(g)} |"
                )
        lines.append("")
        pairs = (gt.get("paired") or {}).get("pairs") or []
        if pairs:
            lines += [
                "Is A's gap smaller than B's? (gap(A) − gap(B), points, paired on shared clips; Holm across all)",
                "",
                "| gap | A | B | diff | 95% CI | p (Holm) | smaller gap |",
                "|---|---|---|---:|---|---:|---|",
            ]
            for e in pairs:
                lines.append(
                    f"| {md(e['gap'])} | {md(e['model_a'])} | {md(e['model_b'])} | {_pts(e.get('diff'))} | "
                    f"{md(interval_text(e))} | "
                    f"{_p(e.get('p_holm'))} | {md(e.get('smaller_gap') or '—')} |"
                )
            lines.append("")
    for s in gt.get("skipped") or []:
        lines.append(f"- gap {md(s['gap'])} not computed: {md(s['why'])}")
    prof = section.get("profiles") or {}
    conds = section.get("conditions") or []
    if prof and conds:
        models = list(prof)
        lines += [
            "",
            "### Robustness profile (WER %, 95% CI)",
            "",
            "| condition | " + " | ".join(md(m) for m in models) + " |",
            "|---|" + "---|" * len(models),
        ]
        overall = [prof[m]["overall"] for m in models]
        lines.append("| overall | " + " | ".join(f"{pct(x['wer'])} {md(interval_text(x))}" for x in overall) + " |")
        for c in conds:
            cells = [prof[m]["conditions"].get(c) or {} for m in models]
            lines.append(f"| {md(c)} | " + " | ".join(f"{pct(x.get('wer'))} {md(interval_text(x))}" for x in cells) + " |")
        lines.append("")
    rs = section.get("rank_stability") or {}
    if rs.get("conditions"):
        lines += [
            "### Rank stability (Kendall's tau-b, overall ranking vs the condition's)",
            "",
            "| condition | tau | 95% CI | models |",
            "|---|---:|---|---:|",
        ]
        for c, e in rs["conditions"].items():
            lines.append(f"| {md(c)} | {_tau_text(e.get('tau'))} | {md(_tau_ci(e))} | {e.get('n_models', 0)} |")
        lines += ["", _movers_text(rs, md)]
        lines.append("")
    for lad in section.get("ladders") or []:
        lines += ladder_md(lad)
    to = section.get("trade_offs") or {}
    if to.get("models"):
        lines += [
            "### Trade-offs: WER, speed, cost",
            "",
            "| model | WER % | 95% CI | RTFx | cost / audio h (USD) | basis | front |",
            "|---|---:|---|---:|---:|---|---|",
        ]
        for m, r in to["models"].items():
            front = [k for k, key in (("speed", "pareto_wer_rtfx"), ("cost", "pareto_wer_cost")) if m in (to.get(key) or [])]
            lines.append(
                f"| {md(m)} | {pct(r.get('wer'))} | {md(interval_text(r))} | {_rtfx_text(r)} | {_cost_text(r)} | "
                f"{md(r.get('cost_basis', ''))} | {', '.join(front) or '—'} |"
            )
        lines.append("")
    return lines


def render_profiles(section: Mapping[str, Any], colors: Mapping[str, str]) -> str:
    """report.html body of the section."""
    parts: list[str] = []
    maps = map_lines(section)
    if maps:
        items = "".join(f"<li>{esc(x.lstrip('- ').replace('`', '').replace('**', ''))}</li>" for x in maps)
        parts.append(f"<h3>Condition maps</h3><ul class='maps'>{items}</ul>")
    gt = section.get("gap_table") or {}
    if gt.get("gaps"):
        rows = []
        for model, gaps in (gt.get("models") or {}).items():
            for g in gaps:
                rows.append(
                    f"<tr data-model='{esc(model)}' data-gap='{esc(g['label'])}:{esc(g['a'])}-{esc(g['b'])}'><td class='l'>"
                    f"{esc(model)}</td>"
                    f"<td class='l'>{esc(g['label'])}: {esc(g['a'])} − {esc(g['b'])}</td><td>{esc(_pts(g.get('gap')))}</td><td>"
                    f"{esc(interval_text(g))}</td>"
                    f"<td>{esc(_p(g.get('p_holm')))}</td><td>{_significant(g)}</td></tr>"
                )
        parts.append(
            "<h3>The study's gaps</h3><table class='gap-table'><thead><tr><th class='l'>model</th><th class='l'>gap (WER a − "
            "b)</th><th>points</th><th>95% CI</th>"
            "<th>p (Holm)</th><th>significant</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        )
        pairs = (gt.get("paired") or {}).get("pairs") or []
        if pairs:
            prow = "".join(
                f"<tr><td class='l'>{esc(e['gap'])}</td><td class='l'>{esc(e['model_a'])}</td><td class='l'>"
                f"{esc(e['model_b'])}</td><td>{esc(_pts(e.get('diff')))}</td>"
                f"<td>{esc(interval_text(e))}</td><td>{esc(_p(e.get('p_holm')))}</td><td>"
                f"{esc(e.get('smaller_gap') or '—')}</td></tr>"
                for e in pairs
            )
            parts.append(
                "<p class='note'>Is A's gap smaller than B's? gap(A) − gap(B) in points on the clips both scored (negative: A's "
                "gap is smaller).</p>"
                "<table class='gap-pairs'><thead><tr><th class='l'>gap</th><th class='l'>A</th><th class='l'>B</th><th>diff</th>"
                "<th>95% CI</th><th>p (Holm)</th>"
                "<th>smaller gap</th></tr></thead><tbody>" + prow + "</tbody></table>"
            )
    prof = section.get("profiles") or {}
    conds = ["overall"] + list(section.get("conditions") or [])
    if prof and len(conds) > 1:
        panels = []
        hi = 0.0
        for m, p in prof.items():
            rows_ = []
            for c in conds:
                x = p["overall"] if c == "overall" else (p["conditions"].get(c) or {})
                ci = x.get("ci95") or [None, None]
                rows_.append(IntervalRow(c, x.get("wer"), ci[0], ci[1], colors.get(m, "#4e79a7"), strong=c == "overall"))
                hi = max(hi, *(v for v in (x.get("wer"), ci[1]) if v is not None), 0.0)
            panels.append((m, rows_))
        parts.append(
            "<h3>Robustness profile: WER per condition (one panel per model)</h3>"
            + svg_interval_panels(conds, panels, 0.0, min(1.5, max(0.1, hi * 1.05)), "WER per condition and model, 95% CI")
        )
    rs = section.get("rank_stability") or {}
    if rs.get("conditions"):
        trs = []
        for c, e in rs["conditions"].items():
            tau = e.get("tau")
            ci_s = _tau_ci(e)
            trs.append(
                f"<tr data-condition='{esc(c)}' data-tau='{esc('' if tau is None else tau)}'><td class='l'>{esc(c)}</td>"
                f"<td>{_tau_text(tau)}</td><td>{esc(ci_s)}</td><td>{esc(e.get('n_models', 0))}</td></tr>"
            )
        movers = _movers_text(rs, esc)
        parts.append(
            "<h3>Rank stability</h3><table class='rank-stability'><thead><tr><th class='l'>condition</th><th>Kendall's tau-b</th>"
            "<th>95% CI</th><th>models</th></tr></thead><tbody>" + "".join(trs) + f"</tbody></table><p>{movers}</p>"
        )
    for lad in section.get("ladders") or []:
        parts.append(ladder_html(lad, colors))
    to = section.get("trade_offs") or {}
    pts = [
        (m, r["rtfx"], r["wer"], *(r.get("ci95") or [None, None]), colors.get(m, "#4e79a7"))
        for m, r in (to.get("models") or {}).items()
        if r.get("rtfx") and r.get("wer") is not None
    ]
    if pts:
        front = to.get("pareto_wer_rtfx") or []
        parts.append(
            "<h3>Trade-offs</h3>" + svg_scatter(pts, "WER against RTFx") + f"<p>Pareto front (WER, RTFx): {esc(', '.join(front)) or '—'}. "
            f"Pareto front (WER, cost per audio hour): "
            f"{esc(', '.join(to.get('pareto_wer_cost') or [])) or '— (no costs known)'}.</p>"
        )
        costs = [(m, r) for m, r in to["models"].items()]
        parts.append(
            "<table class='trade-offs'><thead><tr><th class='l'>model</th><th>WER %</th><th>RTFx</th><th>cost / audio h (USD)</th>"
            "<th class='l'>basis</th></tr></thead><tbody>"
            + "".join(
                f"<tr data-model='{esc(m)}'><td class='l'>{esc(m)}</td><td>{esc(pct(r.get('wer')))}</td><td>"
                f"{esc(_rtfx_text(r))}</td>"
                f"<td>{esc(_cost_text(r))}</td><td class='l'>{esc(r.get('cost_basis', ''))}</td></tr>"
                for m, r in costs
            )
            + "</tbody></table>"
        )
    return "".join(parts)


def profile_models(section: Mapping[str, Any]) -> Sequence[str]:
    return list((section.get("profiles") or {}).keys())
