"""``report.md``: the per-slice WER table per model, readable in a terminal or on a forge."""

from __future__ import annotations

from typing import Any, Mapping

from audits.reports.robustness import comparison_markdown, gap_correction_markdown, hallucination_markdown


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def _ci(ci: Any) -> str:
    if not ci or ci[0] is None or ci[1] is None:
        return "—"
    return f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def model_overview(summary: Mapping[str, Any]) -> list[str]:
    lines = [
        "| model | status | WER % | 95% CI | CER % | RTFx | utts | failed | batch | device | dtype |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for name, m in sorted(summary.get("models", {}).items()):
        rtfx = m.get("rtfx")
        lines.append(
            f"| {name} | {m.get('status', '')} | {_pct(m.get('wer'))} | {_ci(m.get('ci95'))} | {_pct(m.get('cer'))} | "
            f"{'—' if rtfx is None else f'{rtfx:.1f}'} | {m.get('n_utts', 0)} | {m.get('n_failed', 0)} | "
            f"{m.get('batch_size') or '—'} | {m.get('device') or '—'} | {m.get('dtype') or '—'} |"
        )
    return lines


def slice_table(name: str, m: Mapping[str, Any]) -> list[str]:
    lines = [f"### {name}", "", "| slice | WER % | 95% CI | CER % | utts | words | failed | RTFx |", "|---|---:|---|---:|---:|---:|---:|---:|"]
    for key, s in sorted(m.get("slices", {}).items()):
        rtfx = s.get("rtfx")
        lines.append(
            f"| {key} | {_pct(s.get('wer'))} | {_ci(s.get('ci95'))} | {_pct(s.get('cer'))} | {s.get('n_utts', 0)} | "
            f"{s.get('n_words', 0)} | {s.get('n_failed', 0)} | {'—' if rtfx is None else f'{rtfx:.1f}'} |"
        )
    gaps = m.get("gaps") or []
    if gaps:
        lines += ["", "| gap (WER a − b) | points | 95% CI | interval excludes 0 |", "|---|---:|---|---|"]
        for g in gaps:
            gap = g.get("gap")
            lines.append(
                f"| {g['label']}: {g['a']} − {g['b']} | {'—' if gap is None else f'{100 * gap:+.1f}'} | {_ci(g.get('ci95'))} | "
                f"{'**yes**' if g.get('excludes_zero') else 'no'} |"
            )
    if m.get("failures"):
        lines += ["", "Failures:", ""] + [f"- {n} × {reason}" for reason, n in m["failures"].items()]
    if m.get("error"):
        lines += ["", f"Model could not run: {m['error']}"]
    return lines + [""]


def render_markdown(summary: Mapping[str, Any]) -> str:
    ds = summary.get("dataset", {})
    norm = summary.get("normalizer", {})
    lines = [
        f"# Audit report: {summary.get('recipe', {}).get('name', '')}",
        "",
        f"- dataset: {ds.get('name')} ({ds.get('n_utts')} utterances, reader {ds.get('reader')}, fingerprint {ds.get('fingerprint')})",
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
        "## WER per slice",
        "",
    ]
    for name, m in sorted(summary.get("models", {}).items()):
        lines += slice_table(name, m)
    lines += hallucination_markdown(summary) + gap_correction_markdown(summary)
    lines += comparison_markdown(summary.get("comparisons") or {})
    lines += probe_lines(summary.get("probes") or {})
    lines += speaker_lines(summary.get("speaker") or {})
    lines += emotion_lines(summary.get("emotion") or {})
    return "\n".join(lines)


def _num(x: Any, pct: bool = False) -> str:
    if x is None:
        return "—"
    return f"{100 * x:.1f}" if pct else f"{x:.3f}"


def probe_lines(probes: Mapping[str, Any]) -> list[str]:
    """One table per probe: rate (or switch), interval and counts per model."""
    if not probes:
        return []
    out = ["## Benchmark-optimization probes", ""]
    for probe, per_model in sorted(probes.items()):
        if not isinstance(per_model, Mapping):
            continue
        rows = {m: v for m, v in per_model.items() if isinstance(v, Mapping) and ("rate" in v or "switch" in v or "diff" in v)}
        if not rows:
            continue
        out += [f"### {probe}", "", "| model | value | 95% CI | counts | status |", "|---|---:|---|---|---|"]
        for m, v in sorted(rows.items()):
            value = v.get("rate", v.get("switch", v.get("diff")))
            counts = ", ".join(f"{k}={v[k]}" for k in ("n_gated", "n_leaked", "n_ref", "n_eligible", "n_clips", "n_pairs") if k in v)
            out.append(f"| {m} | {_num(value)} | {_ci3(v.get('ci95'))} | {counts} | {v.get('status', '')} |")
        out.append("")
    return out


def _ci3(ci: Any) -> str:
    if not ci or ci[0] is None or ci[1] is None:
        return "—"
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def speaker_lines(speaker: Mapping[str, Any]) -> list[str]:
    if not speaker:
        return []
    out = ["## Speaker verification", "", "| backend | EER % | minDCF (p=0.01) | accuracy % | threshold | trials | failed clips |", "|---|---:|---:|---:|---:|---:|---:|"]
    for b, v in sorted(speaker.items()):
        if not isinstance(v, Mapping):
            continue
        out.append(
            f"| {b} | {_num(v.get('eer'), True)} | {_num(v.get('min_dcf'))} | {_num(v.get('accuracy'), True)} | {_num(v.get('threshold'))} | "
            f"{v.get('n_trials', '—')} | {v.get('n_failed_clips', v.get('n_failed', 0))} |"
        )
    for b, v in sorted(speaker.items()):
        if isinstance(v, Mapping) and v.get("slices"):
            out += ["", f"EER per slice ({b}):", "", "| slice | EER % | trials |", "|---|---:|---:|"]
            for k, sv in sorted(v["slices"].items()):
                if isinstance(sv, Mapping):
                    out.append(f"| {k} | {_num(sv.get('eer'), True)} | {sv.get('n_trials', '—')} |")
        for note in (v.get("notes") or []) if isinstance(v, Mapping) else []:
            out.append(f"- {note}")
    return out + [""]


def emotion_lines(emotion: Mapping[str, Any]) -> list[str]:
    if not emotion:
        return []
    out = ["## Speech emotion", ""]
    for b, v in sorted(emotion.items()):
        if not isinstance(v, Mapping):
            continue
        out.append(f"### {b}")
        cat = v.get("categorical") or {}
        if cat:
            out.append(f"- UA {_num(cat.get('ua'))}, WA {_num(cat.get('wa'))}, macro-F1 {_num(cat.get('macro_f1'))}")
        ao = (v.get("arousal_ordering") or {}).get("within_speaker") or {}
        if ao:
            out.append(f"- relative arousal comparison accuracy (same speaker): {_num(ao.get('accuracy'))} over {ao.get('n_pairs')} pairs")
        pc = v.get("prosody_contrast") or {}
        if pc:
            out.append(f"- prosody contrast: {pc.get('n_pairs')} pairs, mean {pc.get('mean_score', 0):.2f} / {pc.get('max_score')}, {pc.get('n_below_threshold')} below {pc.get('threshold')}")
        for note in v.get("notes") or []:
            out.append(f"- {note}")
        out.append("")
    return out
