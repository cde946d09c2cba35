"""The speech-emotion part of report.md and report.html (one entry per SER backend), read from the typed result."""

from __future__ import annotations

from typing import Any

from audits.emotion.results import EmotionJudgeResult, EmotionResult
from audits.records import thaw
from audits.reports.charts import heat_color
from audits.reports.formatting import attrs, esc, md, num_attr, pct, rate_text
from audits.reports.judges import judge_lines, render_judges, share_text, status_text

JUDGES_TITLE = "Audio-LM judges: which rendition sounds more aroused / positive"


def _or(value: Any, default: Any = "—") -> Any:
    return default if value is None else value


def emotion_judge_text(e: EmotionJudgeResult) -> str:
    """A relative-comparison judge's figures per dimension in one line."""
    failed = status_text(e)
    if failed is not None:
        return failed
    parts = []
    for dim, d in (e.dimensions or {}).items():
        parts.append(
            f"more {dim}: accuracy {share_text(d.accuracy)} of {d.n_scored} pairs "
            f"(ordered pairs {share_text(d.accuracy_ordered)} of {d.n_ordered}; 'same' answered "
            f"{d.n_same_answers}x; "
            f"{d.n_unparseable} unparseable)"
        )
    return "; ".join(parts) or "no pair had an expected level on both sides"


def emotion_lines(emotion: EmotionResult, title: str) -> list[str]:
    """Per backend: categorical scores, same-speaker arousal ordering, prosody contrast and notes."""
    if not emotion.entries and emotion.judges is None:
        return []
    out = [f"## {title}", ""]
    for b, v in emotion.backends():
        out.append(f"### {md(b)}")
        if v.ua is not None or v.wa is not None or v.macro_f1 is not None:  # categorical figures (a backend that gives categories)
            out.append(f"- UA {rate_text(v.ua)}, WA {rate_text(v.wa)}, macro-F1 {rate_text(v.macro_f1)}")
        ao = v.arousal_ordering.within_speaker if v.arousal_ordering is not None else None
        if ao is not None:
            out.append(f"- relative arousal comparison accuracy (same speaker): {rate_text(ao.accuracy)} over {ao.n_pairs} pairs")
        pc = v.prosody_contrast
        if pc is not None and pc.n_pairs is None and isinstance(pc.skipped, str):
            out.append(f"- prosody contrast: not measured ({md(pc.skipped)})")
        elif pc is not None:
            out.append(
                f"- prosody contrast: {pc.n_pairs} pairs, mean {_or(pc.mean_score, 0):.2f} / {pc.max_score}, "
                f"{pc.n_below_threshold} below {pc.threshold}"
            )
        for note in v.notes or ():
            out.append(f"- {md(note)}")
        out.append("")
    return out + judge_lines(emotion.judges, JUDGES_TITLE, emotion_judge_text)


def emotion_data(emotion: EmotionResult) -> dict[str, Any]:
    """The numbers report.html embeds per backend."""
    return {
        b: {
            "ua": v.ua,
            "wa": v.wa,
            "macro_f1": v.macro_f1,
            "n_scored": v.n_scored,
            "n_utts": v.n_utts,
            "n_missing": v.n_missing,
            "confusion": thaw(v.confusion),
            "slices": thaw(v.slices),
            "dimensional": thaw(v.dimensional),
        }
        for b, v in emotion.backends()
    }


def render_emotion(emotion: EmotionResult) -> str:
    """Per backend: UA/WA/macro-F1, the confusion matrix as a heat map, slices, dimensions, warnings."""
    out = []
    for backend, v in emotion.backends():
        out.append(f"<h3>{esc(backend)}</h3>")
        scored = v.n_scored if v.n_scored is not None else _or(v.n_utts)
        out.append(
            f"<table class='emotion-table'{attrs(backend=backend)}><tr><th>UA % (mean per-class recall)</th><th>WA %</th><th>macro-F1</th>"
            f"<th>scored</th><th>missing</th></tr>"
            f"<tr><td{attrs(ua=num_attr(v.ua))}>{pct(v.ua)}</td><td{attrs(wa=num_attr(v.wa))}>{pct(v.wa)}</td>"
            f"<td>{rate_text(v.macro_f1)}</td><td>{esc(scored)}</td><td>"
            f"{esc(_or(v.n_missing, 0))}</td></tr></table>"
        )
        labels, mat = (v.confusion.labels, v.confusion.matrix) if v.confusion is not None else ((), ())
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
        if v.slices:
            out.append(
                "<table class='sortable emotion-slices'><thead><tr><th class='l'>slice</th><th>UA %</th><th>WA %</th><th>"
                "macro-F1</th><th>utts</th></tr></thead><tbody>"
            )
            for k, s in v.slices.items():
                out.append(
                    f"<tr{attrs(backend=backend, slice=k, ua=num_attr(s.ua))}><td class='l'>{esc(k)}</td><td>"
                    f"{pct(s.ua)}</td><td>{pct(s.wa)}</td><td>{rate_text(s.macro_f1)}</td><td>"
                    f"{esc(s.n_utts)}</td></tr>"
                )
            out.append("</tbody></table>")
        if v.dimensional:
            out.append(
                "<table><thead><tr><th class='l'>dimension</th><th>CCC</th><th>pairwise order accuracy</th><th>utts</th></tr>"
                "</thead><tbody>"
            )
            for d, dim in v.dimensional.items():
                comp = dim.comparison.accuracy if dim.comparison is not None else None
                out.append(
                    f"<tr><td class='l'>{esc(d)}</td><td>{rate_text(dim.ccc)}</td><td>{rate_text(comp)}</td><td>{esc(dim.n_utts)}</td></tr>"
                )
            out.append("</tbody></table>")
        if v.warnings:
            out.append("<ul class='note'>" + "".join(f"<li>{esc(w)}</li>" for w in v.warnings[:10]) + "</ul>")
    out.append(render_judges(emotion.judges, JUDGES_TITLE, emotion_judge_text))
    return "".join(out)
