"""Report parts for hallucination figures and paired model comparisons (markdown and HTML).

Kept apart from ``markdown.py`` and ``html.py`` so those only call in here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audits.reports.formatting import esc, interval_text, md


def _pct(x: Any) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def _ci(ci: Any) -> str:
    if not ci or ci[0] is None or ci[1] is None:
        return "—"
    return f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _num(x: Any, fmt: str = ".2f") -> str:
    return "—" if x is None else format(x, fmt)


HALLUCINATION_HEADER = (
    "model",
    "WER %",
    "WER without loops %",
    "insertion rate %",
    "loops",
    "long / short",
    "speech-free clips",
    "hallucination rate %",
    "95% CI",
    "avg log-prob loops / other",
    "no-speech flagged",
)


def hallucination_table_rows(summary: Mapping[str, Any]) -> list[list[str]]:
    """One row of cells per model (text, unescaped)."""
    rows = []
    for name, m in sorted((summary.get("models") or {}).items()):
        h = m.get("hallucination") or {}
        if not h:
            continue
        lp = "—"
        if "avg_logprob_loops" in h:
            lp = f"{_num(h.get('avg_logprob_loops'))} / {_num(h.get('avg_logprob_other'))}"
        flagged = "—" if "no_speech_flagged" not in h else f"{h['no_speech_flagged']} of {h.get('n_hallucinated', 0)}"
        rows.append(
            [
                name,
                _pct(m.get("wer")),
                _pct(h.get("wer_without_loops")),
                _pct(h.get("insertion_rate")),
                f"{h.get('n_loops', 0)} of {h.get('n_clips', 0)}",
                f"{h.get('n_long', 0)} / {h.get('n_short', 0)}",
                str(h.get("n_speech_free", 0)),
                _pct(h.get("hallucination_rate")),
                _ci(h.get("hallucination_ci95")),
                lp,
                flagged,
            ]
        )
    return rows


def hallucination_findings(summary: Mapping[str, Any]) -> list[str]:
    """Sentences naming the models that loop or speak over silence, with their confidences."""
    out = []
    for name, m in sorted((summary.get("models") or {}).items()):
        h = m.get("hallucination") or {}
        if h.get("n_loops"):
            text = (
                f"{name} loops on {h['n_loops']} clip(s) ({h.get('loop_words', 0)} hypothesis words); WER {_pct(m.get('wer'))}% "
                f"is {_pct(h.get('wer_without_loops'))}% without them."
            )
            if h.get("avg_logprob_loops") is not None:
                text += (
                    f" Its mean log-probability there is {_num(h['avg_logprob_loops'])} against "
                    f"{_num(h.get('avg_logprob_other'))} elsewhere."
                )
            loop_slices = sorted(k for k, s in (m.get("slices") or {}).items() if (s.get("hallucination") or {}).get("n_loops"))
            if loop_slices:
                text += f" Slices with loops: {', '.join(loop_slices[:6])}{' and more' if len(loop_slices) > 6 else ''}."
            out.append(text)
        if h.get("n_hallucinated"):
            text = (
                f"{name} writes words on {h['n_hallucinated']} of {h.get('n_speech_free', 0)} speech-free clip(s) "
                f"(hallucination rate {_pct(h.get('hallucination_rate'))}%, 95% CI {_ci(h.get('hallucination_ci95'))})."
            )
            if "no_speech_flagged" in h:
                text += f" Its own no-speech probability flagged {h['no_speech_flagged']} of them."
            out.append(text)
    return out


def hallucination_markdown(summary: Mapping[str, Any]) -> list[str]:
    rows = hallucination_table_rows(summary)
    if not rows:
        return []
    lines = [
        "## Hallucinations and insertions",
        "",
        "Loops stay in WER; WER without looped clips is shown beside it. Speech-free clips (empty reference) are scored apart from WER.",
        "",
        "| " + " | ".join(HALLUCINATION_HEADER) + " |",
        "|---|" + "---:|" * (len(HALLUCINATION_HEADER) - 1),
    ]
    lines += ["| " + " | ".join(md(c) for c in r) + " |" for r in rows]
    lines += [""] + [f"- {md(f)}" for f in hallucination_findings(summary)]
    return lines + [""]


def hallucination_html(summary: Mapping[str, Any]) -> str:
    rows = hallucination_table_rows(summary)
    if not rows:
        return ""
    head = "".join(f"<th{' class=l' if i == 0 else ''}>{esc(h)}</th>" for i, h in enumerate(HALLUCINATION_HEADER))
    body = "".join(
        f"<tr class='halluc-row' data-model='{esc(r[0])}'>"
        + "".join(f"<td{' class=l' if i == 0 else ''}>{esc(c)}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    notes = "".join(f"<li>{esc(f)}</li>" for f in hallucination_findings(summary))
    return f"<div class='scroll'><table id='hallucination-table'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>" + (
        f"<ul>{notes}</ul>" if notes else ""
    )


def comparison_lines(comparisons: Mapping[str, Any]) -> list[str]:
    """Sentences for the paired comparisons: tiers, then each corrected difference."""
    pairs = comparisons.get("pairs") or []
    if not pairs:
        return []
    out = []
    tiers = comparisons.get("tiers") or []
    if tiers:
        out.append(
            "Tiers (models in one tier are not distinguishable after correction): "
            + "; ".join(f"{i + 1}. {', '.join(t)}" for i, t in enumerate(tiers))
            + "."
        )
    better = [p for p in pairs if p.get("better")]
    for p in better:
        worse = p["b"] if p["better"] == p["a"] else p["a"]
        out.append(
            f"{p['better']} is better than {worse}: WER difference {100 * abs(p['diff']):.1f} points "
            f"(95% CI {_ci(p.get('ci95'))} for {p['a']} − {p['b']}, Holm-corrected p = {p['p_holm']:.3g}, {p.get('n_utts')} shared clips)."
        )
    untestable = [p for p in pairs if p.get("not_testable")]
    n_same = len(pairs) - len(better) - len(untestable)
    if n_same:
        out.append(f"{n_same} of {len(pairs)} pair(s) are not distinguishable after Holm correction.")
    for p in untestable:
        out.append(f"{p['a']} vs {p['b']}: not testable ({p['not_testable']}).")
    return out


def comparison_markdown(comparisons: Mapping[str, Any]) -> list[str]:
    pairs = comparisons.get("pairs") or []
    if not pairs:
        return []
    lines = [
        "## Paired model comparisons",
        "",
        f"Paired speaker-block bootstrap on the clips every pair shares ({comparisons.get('method', '')}); "
        f"p-values Holm-corrected across all {len(pairs)} pairs.",
        "",
        "| a | b | WER a − b (points) | 95% CI | p | Holm p | verdict |",
        "|---|---|---:|---|---:|---:|---|",
    ]
    for p in pairs:
        verdict = f"**{md(p['better'])} better**" if p.get("better") else "not testable" if p.get("not_testable") else "indistinguishable"
        diff = p.get("diff")
        lines.append(
            f"| {md(p['a'])} | {md(p['b'])} | {'—' if diff is None else f'{100 * diff:+.1f}'} | {md(interval_text(p))} | "
            f"{_num(p.get('p_value'), '.3g')} | {_num(p.get('p_holm'), '.3g')} | {verdict} |"
        )
    return lines + [""] + [f"- {md(s)}" for s in comparison_lines(comparisons)] + [""]


def comparison_html(comparisons: Mapping[str, Any]) -> str:
    pairs = comparisons.get("pairs") or []
    if not pairs:
        return ""
    rows = []
    for p in pairs:
        diff = p.get("diff")
        verdict = f"{p['better']} better" if p.get("better") else "not testable" if p.get("not_testable") else "indistinguishable"
        rows.append(
            f"<tr class='pair-row{' sig' if p.get('better') else ''}' data-a='{esc(p['a'])}' data-b='{esc(p['b'])}' "
            f"data-p-holm='{_num(p.get('p_holm'), '.6g')}'><td class=l>{esc(p['a'])}</td><td class=l>{esc(p['b'])}</td>"
            f"<td>{'—' if diff is None else f'{100 * diff:+.1f}'}</td><td>{esc(interval_text(p))}</td>"
            f"<td>{_num(p.get('p_value'), '.3g')}</td><td>{_num(p.get('p_holm'), '.3g')}</td><td class=l>{esc(verdict)}</td></tr>"
        )
    notes = "".join(f"<li>{esc(s)}</li>" for s in comparison_lines(comparisons))
    return (
        "<div class='scroll'><table id='pairs-table'><thead><tr><th class=l>a</th><th class=l>b</th><th>WER a − b (points)</th><th>95% "
        "CI</th>"
        f"<th>p</th><th>Holm p</th><th class=l>verdict</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div><ul>{notes}</ul>"
    )


def robustness_sections(summary: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """(id, title, body, note) of the HTML sections for hallucinations and paired comparisons, when present."""
    out = []
    h = hallucination_html(summary)
    if h:
        out.append(
            (
                "hallucination",
                "Hallucinations and insertions",
                h,
                "Loops stay in WER; WER without looped clips is beside it. Speech-free clips (empty reference) are scored apart from WER.",
            )
        )
    c = comparison_html(summary.get("comparisons") or {})
    if c:
        out.append(
            (
                "comparisons",
                "Paired model comparisons",
                c,
                "A is called better than B only when the Holm-corrected paired bootstrap test says so; tiers group indistinguishable "
                "models.",
            )
        )
    return out


def gap_correction_markdown(summary: Mapping[str, Any]) -> list[str]:
    """The gaps that stay significant after Holm correction across every gap of every model."""
    gaps = [(m, g) for m, v in sorted((summary.get("models") or {}).items()) for g in v.get("gaps") or [] if g.get("p_holm") is not None]
    if not gaps:
        return []
    sig = [(m, g) for m, g in gaps if g.get("significant")]
    untestable = sum(1 for v in (summary.get("models") or {}).values() for g in v.get("gaps") or [] if g.get("not_testable"))
    lines = [
        "## Fairness gaps after multiplicity correction",
        "",
        f"{sum(1 for _, g in gaps if g.get('excludes_zero'))} of {len(gaps)} gaps have an interval that excludes zero (uncorrected); "
        f"{len(sig)} stay significant after Holm correction across all {len(gaps)} gaps"
        + (f" ({untestable} more not testable: see each model's gap table)." if untestable else "."),
        "",
    ]
    lines += [
        f"- {md(m)}: {md(g['label'])}: {md(g['a'])} − {md(g['b'])} = {100 * g['gap']:+.1f} points (95% CI {_ci(g.get('ci95'))}, Holm p = "
        f"{g['p_holm']:.3g})"
        for m, g in sig
    ]
    return lines + [""]
