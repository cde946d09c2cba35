"""The speech-emotion part of report.md and report.html (one entry per SER backend)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audits.reports.charts import heat_color
from audits.reports.formatting import attrs, esc, md, num_attr, pct, rate_text
from audits.reports.judges import judge_lines, render_judges

_DATA_KEYS = ("ua", "wa", "macro_f1", "n_scored", "n_utts", "n_missing", "confusion", "slices", "dimensional")
JUDGES_TITLE = "Audio-LM judges: which rendition sounds more aroused / positive"


def _backends(emotion: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The SER backends' entries (the ``judges`` key holds the audio-LM judges)."""
    return [(b, v) for b, v in sorted(emotion.items()) if b != "judges" and isinstance(v, Mapping)]


def emotion_lines(emotion: Mapping[str, Any], title: str) -> list[str]:
    """Per backend: categorical scores, same-speaker arousal ordering, prosody contrast and notes."""
    if not emotion:
        return []
    out = [f"## {title}", ""]
    for b, v in _backends(emotion):
        out.append(f"### {md(b)}")
        cat = v.get("categorical") or {}
        if cat:
            out.append(f"- UA {rate_text(cat.get('ua'))}, WA {rate_text(cat.get('wa'))}, macro-F1 {rate_text(cat.get('macro_f1'))}")
        ao = (v.get("arousal_ordering") or {}).get("within_speaker") or {}
        if ao:
            out.append(
                f"- relative arousal comparison accuracy (same speaker): {rate_text(ao.get('accuracy'))} over {ao.get('n_pairs')} pairs"
            )
        pc = v.get("prosody_contrast") or {}
        if pc:
            out.append(
                f"- prosody contrast: {pc.get('n_pairs')} pairs, mean {pc.get('mean_score', 0):.2f} / {pc.get('max_score')}, "
                f"{pc.get('n_below_threshold')} below {pc.get('threshold')}"
            )
        for note in v.get("notes") or []:
            out.append(f"- {md(note)}")
        out.append("")
    return out + judge_lines(emotion.get("judges"), JUDGES_TITLE)


def emotion_data(emotion: Mapping[str, Any]) -> dict[str, Any]:
    """The numbers report.html embeds per backend."""
    return {b: {k: v.get(k) for k in _DATA_KEYS} for b, v in _backends(emotion)}


def render_emotion(emotion: Mapping[str, Any]) -> str:
    """Per backend: UA/WA/macro-F1, the confusion matrix as a heat map, slices, dimensions, warnings."""
    out = []
    for backend, v in _backends(emotion):
        out.append(f"<h3>{esc(backend)}</h3>")
        out.append(
            f"<table class='emotion-table'{attrs(backend=backend)}><tr><th>UA % (mean per-class recall)</th><th>WA %</th><th>macro-F1</th>"
            f"<th>scored</th><th>missing</th></tr>"
            f"<tr><td{attrs(ua=num_attr(v.get('ua')))}>{pct(v.get('ua'))}</td><td{attrs(wa=num_attr(v.get('wa')))}>{pct(v.get('wa'))}</td>"
            f"<td>{rate_text(v.get('macro_f1'))}</td><td>{esc(v.get('n_scored', v.get('n_utts', '—')))}</td><td>"
            f"{esc(v.get('n_missing', 0))}</td></tr></table>"
        )
        conf = v.get("confusion") or {}
        labels, mat = conf.get("labels") or [], conf.get("matrix") or []
        if labels and mat:
            vmax = max([max(r) for r in mat if r] + [1])
            out.append(
                f"<p class='note'>Confusion matrix: rows are reference labels, columns are predictions.</p><table "
                f"class='confusion'{attrs(backend=backend)}><thead><tr><th class='l'>ref \\ pred</th>"
            )
            out.append("".join(f"<th>{esc(lab)}</th>" for lab in labels) + "<th>recall %</th></tr></thead><tbody>")
            for i, (lab, row) in enumerate(zip(labels, mat)):
                tot = sum(row)
                out.append(f"<tr><th class='l'>{esc(lab)}</th>")
                for j, c in enumerate(row):
                    bg, fg = heat_color(c / vmax if vmax else 0, 1.0)
                    out.append(f"<td style='background:{bg};color:{fg}'{attrs(ref=lab, pred=labels[j], count=c)}>{esc(c)}</td>")
                out.append(f"<td>{pct(row[i] / tot if tot and i < len(row) else None)}</td></tr>")
            out.append("</tbody></table>")
        sl = v.get("slices") or {}
        if sl:
            out.append(
                "<table class='sortable emotion-slices'><thead><tr><th class='l'>slice</th><th>UA %</th><th>WA %</th><th>"
                "macro-F1</th><th>utts</th></tr></thead><tbody>"
            )
            for k, s in sl.items():
                out.append(
                    f"<tr{attrs(backend=backend, slice=k, ua=num_attr(s.get('ua')))}><td class='l'>{esc(k)}</td><td>"
                    f"{pct(s.get('ua'))}</td><td>{pct(s.get('wa'))}</td><td>{rate_text(s.get('macro_f1'))}</td><td>"
                    f"{esc(s.get('n_utts', '—'))}</td></tr>"
                )
            out.append("</tbody></table>")
        dims = v.get("dimensional") or {}
        if dims:
            out.append(
                "<table><thead><tr><th class='l'>dimension</th><th>CCC</th><th>pairwise order accuracy</th><th>utts</th></tr>"
                "</thead><tbody>"
            )
            for d, s in dims.items():
                comp = (s.get("comparison") or {}).get("accuracy")
                out.append(
                    f"<tr><td class='l'>{esc(d)}</td><td>{rate_text(s.get('ccc'))}</td><td>{rate_text(comp)}</td><td>"
                    f"{esc(s.get('n_utts', '—'))}</td></tr>"
                )
            out.append("</tbody></table>")
        if v.get("warnings"):
            out.append("<ul class='note'>" + "".join(f"<li>{esc(w)}</li>" for w in v["warnings"][:10]) + "</ul>")
    out.append(render_judges(emotion.get("judges"), JUDGES_TITLE))
    return "".join(out)
