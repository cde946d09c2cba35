"""The speaker-verification part of report.md and report.html (one entry per SV backend), read from the typed result."""

from __future__ import annotations

from typing import Any

from audits.records import thaw
from audits.reports.charts import svg_det, svg_histogram
from audits.reports.formatting import PALETTE, attrs, esc, md, num_attr, pct, rate_text
from audits.reports.judges import judge_lines, render_judges, share_text, status_text
from audits.speaker.results import SliceFigures, SpeakerJudgeResult, SpeakerResult

JUDGES_TITLE = "Audio-LM judges: same or different speaker"


def _or(value: Any, default: Any = "—") -> Any:
    return default if value is None else value


def speaker_judge_text(e: SpeakerJudgeResult) -> str:
    """A same/different-speaker judge's figures in one line, beside the embedding backends' on the same trials."""
    failed = status_text(e)
    if failed is not None:
        return failed
    text = (
        f"accuracy {share_text(e.accuracy)}, false accept {share_text(e.false_accept_rate)}, "
        f"false reject {share_text(e.false_reject_rate)} on {_or(e.n_target, 0)} target + {_or(e.n_nontarget, 0)} non-target "
        f"trials"
    )
    if e.on_judged_trials:
        text += "; embedding backends on the same trials: " + ", ".join(
            f"{b} accuracy {share_text(f.accuracy)} (FA {share_text(f.false_accept_rate)}, FR {share_text(f.false_reject_rate)})"
            for b, f in e.on_judged_trials.items()
        )
    return text


def speaker_lines(speaker: SpeakerResult, title: str) -> list[str]:
    """EER, minDCF and accuracy per backend, then EER per slice and the backend's notes."""
    if not speaker.entries and speaker.judges is None:
        return []
    out = [
        f"## {title}",
        "",
        "| backend | EER % | minDCF (p=0.01) | accuracy % | threshold | trials | failed clips |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for b, v in speaker.backends():
        failed = v.n_failed_clips if v.n_failed_clips is not None else _or(v.n_failed, 0)
        out.append(
            f"| {md(b)} | {pct(v.eer)} | {rate_text(v.min_dcf)} | {pct(v.accuracy)} | {rate_text(v.threshold)} "
            f"| "
            f"{_or(v.n_trials)} | {failed} |"
        )
    for b, v in speaker.backends():
        if v.slices:
            out += ["", f"EER per slice ({md(b)}):", "", "| slice | EER % | trials |", "|---|---:|---:|"]
            for k, sv in sorted(v.slices.items(), key=lambda kv: kv[0]):
                out.append(f"| {md(k)} | {pct(sv.eer)} | {sv.n_trials} |")
        for note in v.notes or ():
            out.append(f"- {md(note)}")
    return out + [""] + judge_lines(speaker.judges, JUDGES_TITLE, speaker_judge_text)


def speaker_data(speaker: SpeakerResult) -> dict[str, Any]:
    """The numbers report.html embeds per backend (curves and per-trial data stay in summary.json)."""
    return {
        b: {
            "eer": v.eer,
            "min_dcf": v.min_dcf,
            "accuracy": v.accuracy,
            "threshold": v.threshold,
            "n_trials": v.n_trials,
            "n_target": v.n_target,
            "n_nontarget": v.n_nontarget,
            "slices": thaw(v.slices),
        }
        for b, v in speaker.backends()
    }


def _slice_table(backend: str, title: str, slices: dict[str, SliceFigures]) -> str:
    rows = [
        f"<table class='sortable speaker-slices'><thead><tr><th class='l'>{esc(title)}</th><th>EER %</th><th>minDCF</th><th>"
        f"accuracy %</th><th>trials</th><th>target / non-target</th></tr></thead><tbody>"
    ]
    for k, s in slices.items():
        rows.append(
            f"<tr{attrs(backend=backend, slice=k, eer=num_attr(s.eer))}><td class='l'>{esc(k)}</td><td "
            f"data-sort='{num_attr(s.eer)}'>{pct(s.eer, 2)}</td>"
            f"<td>{rate_text(s.min_dcf)}</td><td>{pct(s.accuracy)}</td><td>{esc(s.n_trials)}</td><td>"
            f"{esc(s.n_target)} / {esc(s.n_nontarget)}</td></tr>"
        )
    rows.append("</tbody></table>")
    return "".join(rows)


def render_speaker(speaker: SpeakerResult) -> str:
    """Per backend: the headline table, DET curve and score histograms, EER per slice (pair), warnings."""
    out = []
    for i, (backend, v) in enumerate(speaker.backends()):
        color = PALETTE[i % len(PALETTE)]
        out.append(f"<h3>{esc(backend)}</h3>")
        out.append(
            f"<table class='speaker-table'{attrs(backend=backend)}><tr><th>EER %</th><th>minDCF (p_target "
            f"{esc(_or(v.p_target, 0.01))})</th><th>accuracy %</th><th>threshold</th><th>trials</th><th>target / non-target</th></tr>"
            f"<tr><td{attrs(eer=num_attr(v.eer))}>{pct(v.eer, 2)}</td><td{attrs(min_dcf=num_attr(v.min_dcf))}>"
            f"{rate_text(v.min_dcf)}</td>"
            f"<td>{pct(v.accuracy)}</td><td>{rate_text(v.threshold)} <span class='n'>"
            f"{esc(v.threshold_source or '')}</span></td>"
            f"<td>{esc(_or(v.n_trials))}</td><td>{esc(_or(v.n_target))} / {esc(_or(v.n_nontarget))}</td></tr></table>"
        )
        plots = []
        if v.det is not None and v.det.p_fa and v.det.p_miss:
            plots.append(svg_det([(backend, v.det.p_fa, v.det.p_miss, color)], f"DET curve, {backend}", size=380))
        hist = v.score_hist
        if hist is not None and hist.edges:
            plots.append(svg_histogram(hist.edges, hist.target, hist.nontarget, f"Score distributions, {backend}"))
        if plots:
            out.append(
                "<div style='display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start'>"
                + "".join(f"<div>{p}</div>" for p in plots)
                + "</div>"
            )
        for title, slices in (("EER per slice", v.slices), ("EER per slice pair (enroll | test)", v.slice_pairs)):
            if slices:
                out.append(_slice_table(backend, title, dict(slices)))
        if v.warnings:
            out.append("<ul class='note'>" + "".join(f"<li>{esc(w)}</li>" for w in v.warnings[:10]) + "</ul>")
    out.append(render_judges(speaker.judges, JUDGES_TITLE, speaker_judge_text))
    return "".join(out)
