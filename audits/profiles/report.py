"""The profiles section in report.md and report.html: maps, gap table, profile chart, rank stability, ladders, trade-offs.

Every string from the data goes through ``md`` (Markdown) or ``esc`` (HTML).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from audits.asr.results import GapFigures
from audits.profiles.results import (
    ConditionMapReport,
    Ladder,
    LadderModel,
    LadderPoint,
    PairedGapTest,
    ProfilesResult,
    RankCondition,
    RankStability,
    TradeOffModel,
    WerFigures,
)
from audits.reports.charts import IntervalRow, svg_interval_panels, svg_scatter
from audits.reports.formatting import esc, interval_text, md, pct

_Interval = WerFigures | LadderPoint | GapFigures | PairedGapTest | TradeOffModel | RankCondition


def _p(x: Any) -> str:
    return "—" if x is None else f"{float(x):.3g}"


def _pts(x: Any) -> str:
    return "—" if x is None else f"{100 * float(x):+.1f}"


def _level(x: Any, unit: str) -> str:
    return "beyond ladder" if x is None else f"{float(x):g}{(' ' + unit) if unit else ''}"


def _interval(x: _Interval | None, digits: int = 1, scale: float = 100.0) -> str:
    """A figure's interval or why it is not testable (``audits.reports.formatting.interval_text``; ``—`` for no figure)."""
    if x is None:
        return interval_text({}, digits=digits, scale=scale)
    return interval_text({"ci95": x.ci95, "not_testable": x.not_testable}, digits=digits, scale=scale)


def _wer(x: WerFigures | LadderPoint | None) -> float | None:
    return None if x is None else x.wer


def _break_ci(r: LadderModel, unit: str) -> str:
    """Interval of the breaking point; a bound beyond the harshest level reads 'beyond ladder'."""
    if r.breaking_not_testable:
        return f"not testable ({r.breaking_not_testable})"
    if r.breaking_share is None:
        return "—"
    lo, hi = r.breaking_ci95 or (None, None)
    return f"[{_level(lo, unit)}, {_level(hi, unit)}]"


def _interval_row(label: str, x: WerFigures | LadderPoint | None, color: str, strong: bool = False) -> IntervalRow:
    lo, hi = (x.ci95 if x is not None else None) or (None, None)
    return IntervalRow(label, _wer(x), lo, hi, color, strong=strong)


def _movers_text(rs: RankStability, quote: Callable[[Any], str]) -> str:
    """The models whose rank moves most (``quote``: md or esc)."""
    moved = [x for x in rs.movers if x.max_shift != 0]
    if not moved:
        return "No model changes rank in any condition."
    return (
        "Largest rank moves (+ = worse rank in that condition): "
        + "; ".join(f"{quote(x.model)} {x.max_shift:+g} on {quote(x.condition)}" for x in moved[:5])
        + "."
    )


def _rtfx_text(r: TradeOffModel) -> str:
    return "—" if not r.rtfx else f"{float(r.rtfx):.1f}"


def _cost_text(r: TradeOffModel) -> str:
    c = r.cost_per_audio_hour_usd
    return "unknown" if c is None else f"{float(c):.4f}"


def _tau_text(t: Any) -> str:
    return "—" if t is None else f"{float(t):.2f}"


def _tau_ci(e: RankCondition) -> str:
    """Kendall's tau interval, or why it is not testable (plain text)."""
    return _interval(e, digits=2, scale=1.0)


def _slope_ci(r: LadderModel) -> str:
    """The slope's interval in points per unit, or why it is not testable (plain text)."""
    if r.slope_not_testable:
        return f"not testable ({r.slope_not_testable})"
    sc = r.slope_ci95
    return "" if sc is None or sc[0] is None else f"[{100 * sc[0]:+.2f}, {100 * sc[1]:+.2f}]"


def _significant(g: GapFigures) -> str:
    return "yes" if g.significant else "—" if g.not_testable else "no"


def map_lines(maps: Sequence[ConditionMapReport]) -> list[str]:
    out = []
    for m in maps:
        head = f"- map `{md(m.map)}` ({md(m.file)}) on column `{md(m.column)}` -> {', '.join(md(o) for o in m.outputs)}: "
        if m.column_missing:
            out.append(head + "**the dataset has no such column; nothing mapped**")
            continue
        mapped = "; ".join(
            f"{md(v)} -> {'/'.join(md(a[o]) for o in m.outputs)} "
            f"({md(a['source'])}{', ' + md(a['match']) if a['match'] != 'exact' else ''})"
            for v, a in m.mapped.items()
        )
        out.append(head + (mapped or "nothing mapped"))
        if m.unmapped:
            out.append("  - **unmapped** (in no condition): " + ", ".join(f"{md(v)} ({n} clips)" for v, n in m.unmapped.items()))
    return out


def ladder_md(lad: Ladder) -> list[str]:
    """report.md lines of one ladder: WER per level, slope, breaking point."""
    lines: list[str] = []
    unit = lad.unit
    lines += [
        f"### Ladder: {md(lad.name)} (baseline {md(lad.baseline)}; breaking point = first level with WER > baseline + "
        f"{100 * (lad.margin or 0.0):.0f} points)",
        "",
        "| model | baseline WER % | " + " | ".join(f"{md(x.value)}" for x in lad.levels) + f" | slope (points / "
        f"{md(unit) or 'unit'}) | breaking point | 95% CI |",
        "|---|---:|" + "---:|" * len(lad.levels) + "---:|---|---|",
    ]
    for m, r in lad.models.items():
        lines.append(
            f"| {md(m)} | {pct(_wer(r.baseline))} | "
            + " | ".join(f"{pct(x.wer)} {md(_interval(x))}" for x in r.levels)
            + f" | {_pts(r.slope)} {md(_slope_ci(r))} | "
            f"{md(_level(r.breaking_point, unit))} | " + md(_break_ci(r, unit)) + " |"
        )
    lines.append("")
    return lines


def ladder_html(lad: Ladder, colors: Mapping[str, str]) -> str:
    """report.html block of one ladder: small multiples of WER per level, slope and breaking point."""
    unit = lad.unit
    labels = [lad.baseline] + [x.value for x in lad.levels]
    panels = []
    hi = 0.0
    for m, r in lad.models.items():
        color = colors.get(m, "#4e79a7")
        rows_ = [_interval_row(lad.baseline, r.baseline, color, strong=True)] + [_interval_row(x.value, x, color) for x in r.levels]
        hi = max([hi] + [v for x in rows_ for v in (x.value, x.hi) if v is not None])
        panels.append((m, rows_))
    body = svg_interval_panels(labels, panels, 0.0, min(1.5, max(0.1, hi * 1.05)), f"WER along the {lad.name} ladder")
    rows2 = "".join(
        f"<tr data-model='{esc(m)}'><td class='l'>{esc(m)}</td><td>{esc(_pts(r.slope))} {esc(_slope_ci(r))}</td><td>"
        f"{esc(_level(r.breaking_point, unit))}</td>"
        f"<td>{esc(_break_ci(r, unit))}</td></tr>"
        for m, r in lad.models.items()
    )
    return (
        f"<h3>Ladder: {esc(lad.name)}</h3>{body}<table class='ladder'><thead><tr><th class='l'>model</th><th>slope (points / "
        f"{esc(unit or 'unit')})</th>"
        f"<th>breaking point (WER > baseline + {100 * (lad.margin or 0.0):.0f} pts)</th><th>95% CI</th></tr></thead><tbody>"
        f"{rows2}</tbody></table>"
    )


def profiles_lines(result: ProfilesResult, title: str) -> list[str]:
    """report.md lines of the section."""
    lines = [f"## {md(title)}", ""]
    lines += map_lines(result.condition_maps or ())
    if result.missing_columns:
        lines.append(f"- columns asked for but absent: {', '.join(md(c) for c in result.missing_columns)}")
    lines.append("")
    gt = result.gap_table
    if gt is not None and gt.gaps:
        lines += [
            "### The study's gaps (WER a − b, points; speaker-block bootstrap; Holm across all gaps)",
            "",
            "| model | gap | points | 95% CI | p (Holm) | significant |",
            "|---|---|---:|---|---:|---|",
        ]
        for model, gaps in gt.models.items():
            for g in gaps:
                lines.append(
                    f"| {md(model)} | {md(g.label)}: {md(g.a)} − {md(g.b)} | {_pts(g.gap)} | "
                    f"{md(_interval(g))} | "
                    f"{_p(g.p_holm)} | {_significant(g)} |"
                )
        lines.append("")
        pairs = gt.paired.pairs if gt.paired is not None else ()
        if pairs:
            lines += [
                "Is A's gap smaller than B's? (gap(A) − gap(B), points, paired on shared clips; Holm across all)",
                "",
                "| gap | A | B | diff | 95% CI | p (Holm) | smaller gap |",
                "|---|---|---|---:|---|---:|---|",
            ]
            for e in pairs:
                lines.append(
                    f"| {md(e.gap)} | {md(e.model_a)} | {md(e.model_b)} | {_pts(e.diff)} | "
                    f"{md(_interval(e))} | "
                    f"{_p(e.p_holm)} | {md(e.smaller_gap or '—')} |"
                )
            lines.append("")
    for sk in gt.skipped if gt is not None else ():
        lines.append(f"- gap {md(sk['gap'])} not computed: {md(sk['why'])}")
    prof = result.profiles or {}
    conds = result.conditions or ()
    if prof and conds:
        models = list(prof)
        lines += [
            "",
            "### Robustness profile (WER %, 95% CI)",
            "",
            "| condition | " + " | ".join(md(m) for m in models) + " |",
            "|---|" + "---|" * len(models),
        ]
        overall = [prof[m].overall for m in models]
        lines.append("| overall | " + " | ".join(f"{pct(_wer(x))} {md(_interval(x))}" for x in overall) + " |")
        for c in conds:
            cells = [prof[m].conditions.get(c) for m in models]
            lines.append(f"| {md(c)} | " + " | ".join(f"{pct(_wer(x))} {md(_interval(x))}" for x in cells) + " |")
        lines.append("")
    rs = result.rank_stability
    if rs is not None and rs.conditions:
        lines += [
            "### Rank stability (Kendall's tau-b, overall ranking vs the condition's)",
            "",
            "| condition | tau | 95% CI | models |",
            "|---|---:|---|---:|",
        ]
        for c, rc in rs.conditions.items():
            lines.append(f"| {md(c)} | {_tau_text(rc.tau)} | {md(_tau_ci(rc))} | {rc.n_models} |")
        lines += ["", _movers_text(rs, md)]
        lines.append("")
    for lad in result.ladders or ():
        lines += ladder_md(lad)
    to = result.trade_offs
    if to is not None and to.models:
        lines += [
            "### Trade-offs: WER, speed, cost",
            "",
            "| model | WER % | 95% CI | RTFx | cost / audio h (USD) | basis | front |",
            "|---|---:|---|---:|---:|---|---|",
        ]
        for m, r in to.models.items():
            front = [k for k, names in (("speed", to.pareto_wer_rtfx), ("cost", to.pareto_wer_cost)) if m in names]
            lines.append(
                f"| {md(m)} | {pct(r.wer)} | {md(_interval(r))} | {_rtfx_text(r)} | {_cost_text(r)} | "
                f"{md(r.cost_basis or '')} | {', '.join(front) or '—'} |"
            )
        lines.append("")
    return lines


def render_profiles(result: ProfilesResult, colors: Mapping[str, str]) -> str:
    """report.html body of the section."""
    parts: list[str] = []
    maps = map_lines(result.condition_maps or ())
    if maps:
        items = "".join(f"<li>{esc(x.lstrip('- ').replace('`', '').replace('**', ''))}</li>" for x in maps)
        parts.append(f"<h3>Condition maps</h3><ul class='maps'>{items}</ul>")
    gt = result.gap_table
    if gt is not None and gt.gaps:
        rows = []
        for model, gaps in gt.models.items():
            for g in gaps:
                rows.append(
                    f"<tr data-model='{esc(model)}' data-gap='{esc(g.label)}:{esc(g.a)}-{esc(g.b)}'><td class='l'>"
                    f"{esc(model)}</td>"
                    f"<td class='l'>{esc(g.label)}: {esc(g.a)} − {esc(g.b)}</td><td>{esc(_pts(g.gap))}</td><td>"
                    f"{esc(_interval(g))}</td>"
                    f"<td>{esc(_p(g.p_holm))}</td><td>{_significant(g)}</td></tr>"
                )
        parts.append(
            "<h3>The study's gaps</h3><table class='gap-table'><thead><tr><th class='l'>model</th><th class='l'>gap (WER a − "
            "b)</th><th>points</th><th>95% CI</th>"
            "<th>p (Holm)</th><th>significant</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        )
        pairs = gt.paired.pairs if gt.paired is not None else ()
        if pairs:
            prow = "".join(
                f"<tr><td class='l'>{esc(e.gap)}</td><td class='l'>{esc(e.model_a)}</td><td class='l'>"
                f"{esc(e.model_b)}</td><td>{esc(_pts(e.diff))}</td>"
                f"<td>{esc(_interval(e))}</td><td>{esc(_p(e.p_holm))}</td><td>"
                f"{esc(e.smaller_gap or '—')}</td></tr>"
                for e in pairs
            )
            parts.append(
                "<p class='note'>Is A's gap smaller than B's? gap(A) − gap(B) in points on the clips both scored (negative: A's "
                "gap is smaller).</p>"
                "<table class='gap-pairs'><thead><tr><th class='l'>gap</th><th class='l'>A</th><th class='l'>B</th><th>diff</th>"
                "<th>95% CI</th><th>p (Holm)</th>"
                "<th>smaller gap</th></tr></thead><tbody>" + prow + "</tbody></table>"
            )
    prof = result.profiles or {}
    conds = ["overall"] + list(result.conditions or ())
    if prof and len(conds) > 1:
        panels = []
        hi = 0.0
        for m, p in prof.items():
            rows_ = []
            for c in conds:
                x = p.overall if c == "overall" else p.conditions.get(c)
                lo_hi = (x.ci95 if x is not None else None) or (None, None)
                rows_.append(IntervalRow(c, _wer(x), lo_hi[0], lo_hi[1], colors.get(m, "#4e79a7"), strong=c == "overall"))
                hi = max(hi, *(v for v in (_wer(x), lo_hi[1]) if v is not None), 0.0)
            panels.append((m, rows_))
        parts.append(
            "<h3>Robustness profile: WER per condition (one panel per model)</h3>"
            + svg_interval_panels(conds, panels, 0.0, min(1.5, max(0.1, hi * 1.05)), "WER per condition and model, 95% CI")
        )
    rs = result.rank_stability
    if rs is not None and rs.conditions:
        trs = []
        for c, e in rs.conditions.items():
            tau = e.tau
            ci_s = _tau_ci(e)
            trs.append(
                f"<tr data-condition='{esc(c)}' data-tau='{esc('' if tau is None else tau)}'><td class='l'>{esc(c)}</td>"
                f"<td>{_tau_text(tau)}</td><td>{esc(ci_s)}</td><td>{esc(e.n_models)}</td></tr>"
            )
        movers = _movers_text(rs, esc)
        parts.append(
            "<h3>Rank stability</h3><table class='rank-stability'><thead><tr><th class='l'>condition</th><th>Kendall's tau-b</th>"
            "<th>95% CI</th><th>models</th></tr></thead><tbody>" + "".join(trs) + f"</tbody></table><p>{movers}</p>"
        )
    for lad in result.ladders or ():
        parts.append(ladder_html(lad, colors))
    to = result.trade_offs
    trade = to.models if to is not None else {}
    pts = [
        (m, r.rtfx, r.wer, *(r.ci95 or (None, None)), colors.get(m, "#4e79a7")) for m, r in trade.items() if r.rtfx and r.wer is not None
    ]
    if to is not None and pts:
        front = to.pareto_wer_rtfx
        parts.append(
            "<h3>Trade-offs</h3>" + svg_scatter(pts, "WER against RTFx") + f"<p>Pareto front (WER, RTFx): {esc(', '.join(front)) or '—'}. "
            f"Pareto front (WER, cost per audio hour): "
            f"{esc(', '.join(to.pareto_wer_cost)) or '— (no costs known)'}.</p>"
        )
        parts.append(
            "<table class='trade-offs'><thead><tr><th class='l'>model</th><th>WER %</th><th>RTFx</th><th>cost / audio h (USD)</th>"
            "<th class='l'>basis</th></tr></thead><tbody>"
            + "".join(
                f"<tr data-model='{esc(m)}'><td class='l'>{esc(m)}</td><td>{esc(pct(r.wer))}</td><td>"
                f"{esc(_rtfx_text(r))}</td>"
                f"<td>{esc(_cost_text(r))}</td><td class='l'>{esc(r.cost_basis or '')}</td></tr>"
                for m, r in trade.items()
            )
            + "</tbody></table>"
        )
    return "".join(parts)


def profile_models(result: ProfilesResult) -> Sequence[str]:
    return list((result.profiles or {}).keys())
