"""Audio-LM judge results in report.md and report.html (speaker, emotion and synthetic-voice sections).

One row per judge: what it was asked, how many answers parsed, how many did not (counted, never
guessed), failed requests, the task's figures and what the calls cost in calls and cache hits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audits.reports.formatting import esc, md, rate_text


def _rate(v: Any) -> str:
    return "—" if v is None else f"{float(v):.1%}"


def judge_result_text(e: Mapping[str, Any]) -> str:
    """The task's headline figures in one line."""
    task = e.get("task")
    if e.get("status") != "ok":
        return f"{e.get('status')}: {e.get('error', '')}"
    if task == "same_speaker":
        text = (
            f"accuracy {_rate(e.get('accuracy'))}, false accept {_rate(e.get('false_accept_rate'))}, "
            f"false reject {_rate(e.get('false_reject_rate'))} on {e.get('n_target', 0)} target + {e.get('n_nontarget', 0)} non-target "
            f"trials"
        )
        same = e.get("on_judged_trials") or {}
        if same:
            text += "; embedding backends on the same trials: " + ", ".join(
                f"{b} accuracy {_rate(f.get('accuracy'))} (FA {_rate(f.get('false_accept_rate'))}, FR {_rate(f.get('false_reject_rate'))})"
                for b, f in same.items()
            )
        return text
    if task == "emotion_compare":
        parts = []
        for dim, d in (e.get("dimensions") or {}).items():
            parts.append(
                f"more {dim}: accuracy {_rate(d.get('accuracy'))} of {d.get('n_scored', 0)} pairs "
                f"(ordered pairs {_rate(d.get('accuracy_ordered'))} of {d.get('n_ordered', 0)}; 'same' answered "
                f"{d.get('n_same_answers', 0)}x; "
                f"{d.get('n_unparseable', 0)} unparseable)"
            )
        return "; ".join(parts) or "no pair had an expected level on both sides"
    if task == "synthetic_speech":
        arms = e.get("arms") or {}
        text = ", ".join(f"mean likelihood {a} {rate_text(v.get('mean_likelihood'))} (n={v.get('n_answered', 0)})" for a, v in arms.items())
        for a, v in (e.get("separation") or {}).items():
            text += f"; AUC {a} vs real {rate_text(v.get('auc'))}"
        return text
    return ""


def _usage_text(e: Mapping[str, Any]) -> str:
    u = e.get("usage") or {}
    return f"{u.get('billable_calls', 0)} calls, {u.get('cache_hits', 0)} cache hits" if u else "—"


def judge_lines(judges: Mapping[str, Any] | None, title: str) -> list[str]:
    """A markdown table of the section's judges (nothing when none ran)."""
    if not judges:
        return []
    out = [
        f"### {title}",
        "",
        "| judge | model | items | answered | unparseable | failed requests | result | calls |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for name, e in sorted(judges.items()):
        if not isinstance(e, Mapping):
            continue
        out.append(
            f"| {md(name)} | {md(str(e.get('model_id') or '—'))} | {e.get('n_items', '—')} | {e.get('n_answered', '—')} | "
            f"{e.get('n_unparseable', '—')} | {e.get('n_failed_requests', '—')} | {md(judge_result_text(e))} | {md(_usage_text(e))} |"
        )
    out += [
        "",
        "Judge answers that do not follow the prompt's JSON form are counted as unparseable and left out of every figure; none is guessed.",
        "",
    ]
    return out


def render_judges(judges: Mapping[str, Any] | None, title: str) -> str:
    """The same table for report.html."""
    if not judges:
        return ""
    rows = []
    for name, e in sorted(judges.items()):
        if not isinstance(e, Mapping):
            continue
        rows.append(
            f"<tr class='judge-row' data-judge='{esc(name)}' data-task='{esc(e.get('task', ''))}' "
            f"data-unparseable='{esc(e.get('n_unparseable', ''))}'>"
            f"<td class='l'>{esc(name)}</td><td class='l'>{esc(e.get('model_id') or '—')}</td><td>{esc(e.get('n_items', '—'))}</td>"
            f"<td>{esc(e.get('n_answered', '—'))}</td><td>{esc(e.get('n_unparseable', '—'))}</td><td>"
            f"{esc(e.get('n_failed_requests', '—'))}</td>"
            f"<td class='l'>{esc(judge_result_text(e))}</td><td class='l'>{esc(_usage_text(e))}</td></tr>"
        )
    return (
        f"<h4>{esc(title)}</h4><table class='judge-table'><thead><tr><th class='l'>judge</th><th class='l'>model</th><th>items</th><th>"
        f"answered</th>"
        "<th>unparseable</th><th>failed requests</th><th class='l'>result</th><th class='l'>calls</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
        "<p class='note'>Unparseable judge answers are counted and left out of every figure; none is guessed.</p>"
    )
