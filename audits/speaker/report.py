"""The speaker-verification part of report.md and report.html (one entry per SV backend)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audits.reports.charts import svg_det, svg_histogram
from audits.reports.formatting import PALETTE, attrs, esc, md, num_attr, pct, rate_text
from audits.reports.judges import judge_lines, render_judges

_DATA_KEYS = ("eer", "min_dcf", "accuracy", "threshold", "n_trials", "n_target", "n_nontarget", "slices")
JUDGES_TITLE = "Audio-LM judges: same or different speaker"


def _backends(speaker: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The embedding backends' entries (the ``judges`` key holds the audio-LM judges)."""
    return [(b, v) for b, v in sorted(speaker.items()) if b != "judges" and isinstance(v, Mapping)]


def speaker_lines(speaker: Mapping[str, Any], title: str) -> list[str]:
    """EER, minDCF and accuracy per backend, then EER per slice and the backend's notes."""
    if not speaker:
        return []
    out = [
        f"## {title}",
        "",
        "| backend | EER % | minDCF (p=0.01) | accuracy % | threshold | trials | failed clips |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for b, v in _backends(speaker):
        out.append(
            f"| {md(b)} | {pct(v.get('eer'))} | {rate_text(v.get('min_dcf'))} | {pct(v.get('accuracy'))} | {rate_text(v.get('threshold'))} "
            f"| "
            f"{v.get('n_trials', '—')} | {v.get('n_failed_clips', v.get('n_failed', 0))} |"
        )
    for b, v in _backends(speaker):
        if v.get("slices"):
            out += ["", f"EER per slice ({md(b)}):", "", "| slice | EER % | trials |", "|---|---:|---:|"]
            for k, sv in sorted(v["slices"].items()):
                if isinstance(sv, Mapping):
                    out.append(f"| {md(k)} | {pct(sv.get('eer'))} | {sv.get('n_trials', '—')} |")
        for note in v.get("notes") or []:
            out.append(f"- {md(note)}")
    return out + [""] + judge_lines(speaker.get("judges"), JUDGES_TITLE)


def speaker_data(speaker: Mapping[str, Any]) -> dict[str, Any]:
    """The numbers report.html embeds per backend (curves and per-trial data stay in summary.json)."""
    return {b: {k: v.get(k) for k in _DATA_KEYS} for b, v in _backends(speaker)}


def render_speaker(speaker: Mapping[str, Any]) -> str:
    """Per backend: the headline table, DET curve and score histograms, EER per slice (pair), warnings."""
    out = []
    for i, (backend, v) in enumerate(_backends(speaker)):
        color = PALETTE[i % len(PALETTE)]
        out.append(f"<h3>{esc(backend)}</h3>")
        out.append(
            f"<table class='speaker-table'{attrs(backend=backend)}><tr><th>EER %</th><th>minDCF (p_target "
            f"{esc(v.get('p_target', 0.01))})</th><th>accuracy %</th><th>threshold</th><th>trials</th><th>target / non-target</th></tr>"
            f"<tr><td{attrs(eer=num_attr(v.get('eer')))}>{pct(v.get('eer'), 2)}</td><td{attrs(min_dcf=num_attr(v.get('min_dcf')))}>"
            f"{rate_text(v.get('min_dcf'))}</td>"
            f"<td>{pct(v.get('accuracy'))}</td><td>{rate_text(v.get('threshold'))} <span class='n'>"
            f"{esc(v.get('threshold_source') or '')}</span></td>"
            f"<td>{esc(v.get('n_trials', '—'))}</td><td>{esc(v.get('n_target', '—'))} / {esc(v.get('n_nontarget', '—'))}</td></tr></table>"
        )
        plots = []
        det = v.get("det") or {}
        if det.get("p_fa") and det.get("p_miss"):
            plots.append(svg_det([(backend, det["p_fa"], det["p_miss"], color)], f"DET curve, {backend}", size=380))
        hist = v.get("score_hist") or {}
        if hist.get("edges") and hist.get("target") is not None:
            plots.append(svg_histogram(hist["edges"], hist["target"], hist["nontarget"], f"Score distributions, {backend}"))
        if plots:
            out.append(
                "<div style='display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start'>"
                + "".join(f"<div>{p}</div>" for p in plots)
                + "</div>"
            )
        for title, key in (("EER per slice", "slices"), ("EER per slice pair (enroll | test)", "slice_pairs")):
            sl = v.get(key) or {}
            if not sl:
                continue
            out.append(
                f"<table class='sortable speaker-slices'><thead><tr><th class='l'>{esc(title)}</th><th>EER %</th><th>minDCF</th><th>"
                f"accuracy %</th><th>trials</th><th>target / non-target</th></tr></thead><tbody>"
            )
            for k, s in sl.items():
                out.append(
                    f"<tr{attrs(backend=backend, slice=k, eer=num_attr(s.get('eer')))}><td class='l'>{esc(k)}</td><td "
                    f"data-sort='{num_attr(s.get('eer'))}'>{pct(s.get('eer'), 2)}</td>"
                    f"<td>{rate_text(s.get('min_dcf'))}</td><td>{pct(s.get('accuracy'))}</td><td>{esc(s.get('n_trials', '—'))}</td><td>"
                    f"{esc(s.get('n_target', '—'))} / {esc(s.get('n_nontarget', '—'))}</td></tr>"
                )
            out.append("</tbody></table>")
        if v.get("warnings"):
            out.append("<ul class='note'>" + "".join(f"<li>{esc(w)}</li>" for w in v["warnings"][:10]) + "</ul>")
    out.append(render_judges(speaker.get("judges"), JUDGES_TITLE))
    return "".join(out)
