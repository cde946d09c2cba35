"""``report.md``: the per-slice WER table per model, readable in a terminal or on a forge.

The audit sections in the summary each render their own part,
in section order, through ``audits.sections``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from audits.asr.results import ModelFigures, format_cell, report_columns
from audits.reports.cost import hosted_usage_lines
from audits.reports.formatting import interval_text, md
from audits.reports.robustness import comparison_markdown, gap_correction_markdown, hallucination_markdown
from audits.sections import present_in

if TYPE_CHECKING:
    from audits.result import RunResult


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def model_overview(summary: Mapping[str, Any]) -> list[str]:
    """The model table: fixed columns, then one per figure the ASR records declare with ``report`` (``audits.asr.results``)."""
    declared = report_columns()
    lines = [
        "| model | status | WER % | 95% CI | CER % |"
        + "".join(f" {md(head)} |" for head, _, _ in declared)
        + " RTFx | utts | failed | batch | device | dtype |",
        "|---|---|---:|---|---:|" + "---:|" * len(declared) + "---:|---:|---:|---:|---|---|",
    ]
    for name, m in sorted(summary.get("models", {}).items()):
        rtfx = m.get("rtfx")
        rec = ModelFigures.from_json(m)
        cells = "".join(f" {md(format_cell(get(rec), fmt))} |" for _, fmt, get in declared)
        lines.append(
            f"| {md(name)} | {md(m.get('status', ''))} | {_pct(m.get('wer'))} | {md(interval_text(m))} | {_pct(m.get('cer'))} |{cells} "
            f"{'—' if rtfx is None else f'{rtfx:.1f}'} | {m.get('n_utts', 0)} | {m.get('n_failed', 0)} | "
            f"{m.get('batch_size') or '—'} | {md(m.get('device') or '—')} | {md(m.get('dtype') or '—')} |"
        )
    return lines


def slice_table(name: str, m: Mapping[str, Any]) -> list[str]:
    lines = [
        f"### {md(name)}",
        "",
        "| slice | WER % | 95% CI | CER % | utts | words | failed | RTFx |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for key, s in sorted(m.get("slices", {}).items()):
        rtfx = s.get("rtfx")
        lines.append(
            f"| {md(key)} | {_pct(s.get('wer'))} | {md(interval_text(s))} | {_pct(s.get('cer'))} | {s.get('n_utts', 0)} | "
            f"{s.get('n_words', 0)} | {s.get('n_failed', 0)} | {'—' if rtfx is None else f'{rtfx:.1f}'} |"
        )
    gaps = m.get("gaps") or []
    if gaps:
        lines += ["", "| gap (WER a − b) | points | 95% CI | interval excludes 0 |", "|---|---:|---|---|"]
        for g in gaps:
            gap = g.get("gap")
            lines.append(
                f"| {md(g['label'])}: {md(g['a'])} − {md(g['b'])} | {'—' if gap is None else f'{100 * gap:+.1f}'} | "
                f"{md(interval_text(g))} | "
                f"{'**yes**' if g.get('excludes_zero') else '—' if g.get('excludes_zero') is None else 'no'} |"
            )
    if m.get("failures"):
        lines += ["", "Failures:", ""] + [f"- {n} × {md(reason)}" for reason, n in m["failures"].items()]
    if m.get("error"):
        lines += ["", f"Model could not run: {md(m['error'])}"]
    return lines + [""]


def render_markdown(source: RunResult | Mapping[str, Any]) -> str:
    """``report.md`` of a run (or of a summary alone); every present section renders its own typed result."""
    from audits.result import RunResult

    run = RunResult.of_summary(source)
    summary = run.plain_summary
    ds = summary.get("dataset", {})
    norm = summary.get("normalizer", {})
    lines = [
        f"# Audit report: {md(summary.get('recipe', {}).get('name', ''))}",
        "",
        f"- dataset: {md(ds.get('name'))} ({ds.get('n_utts')} utterances, reader {md(ds.get('reader'))}, fingerprint "
        f"{md(ds.get('fingerprint'))})",
        f"- normalizer: {norm.get('name')} ({norm.get('version')})",
        f"- hardware: {summary.get('hardware', {}).get('processor')} × {summary.get('hardware', {}).get('cpu_count')} cores",
        f"- created: {summary.get('created_at')}",
        "",
        "WER/CER are corpus-level (total edits over total reference words); intervals are speaker-block bootstrap 95%.",
        "",
        "## Models",
        "",
        *model_overview(summary),
        "",
        *hosted_usage_lines(summary),
        "## WER per slice",
        "",
    ]
    for name, m in sorted(summary.get("models", {}).items()):
        lines += slice_table(name, m)
    lines += hallucination_markdown(summary) + gap_correction_markdown(summary)
    lines += comparison_markdown(summary.get("comparisons") or {})
    for sec in present_in(summary):  # every registered section in the summary renders its own part
        lines += sec.markdown(sec.result_in(run), run)
    return "\n".join(lines)
