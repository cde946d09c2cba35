"""Audio-LM judge results in report.md and report.html (speaker, emotion and synthetic-voice sections).

One row per judge: what it was asked, how many answers parsed, how many did not (counted, never
guessed), failed requests, the task's figures and what the calls cost in calls and cache hits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from audits.judging import JudgeResult
from audits.reports.formatting import esc, md, rate_text

ResultText = Callable[[Any], str]
"""A section's headline figures of one judge's record in one line (``speaker_judge_text``, ``emotion_judge_text``)."""


def share_text(v: Any) -> str:
    """A rate as a percentage with one decimal ('—' when there is none)."""
    return "—" if v is None else f"{float(v):.1%}"


def status_text(e: JudgeResult) -> str | None:
    """'status: error' for a judge whose entry is not ``ok`` (None when it is)."""
    if e.status == "ok":
        return None
    return f"{e.status}: {e.error if 'error' in set(e.keys()) else ''}"


def judge_result_text(e: Mapping[str, Any]) -> str:
    """The headline figures of a judge's entry read as JSON (the synthetic-voice probe's; the speaker and emotion
    sections give their own text of their typed records)."""
    if e.get("status") != "ok":
        return f"{e.get('status')}: {e.get('error', '')}"
    if e.get("task") == "synthetic_speech":
        arms = e.get("arms") or {}
        text = ", ".join(f"mean likelihood {a} {rate_text(v.get('mean_likelihood'))} (n={v.get('n_answered', 0)})" for a, v in arms.items())
        for a, v in (e.get("separation") or {}).items():
            text += f"; AUC {a} vs real {rate_text(v.get('auc'))}"
        return text
    return ""


def _usage_text(e: JudgeResult) -> str:
    u = e.usage or {}
    return f"{u.get('billable_calls', 0)} calls, {u.get('cache_hits', 0)} cache hits" if u else "—"


def _shown(value: Any, default: Any = "—") -> Any:
    return default if value is None else value


def _rows(judges: Mapping[str, Any], result_text: ResultText | None) -> list[tuple[str, JudgeResult, str]]:
    """(name, record, headline) per judge: a section's records as they are, entries read as JSON made records."""
    rows = []
    for name, e in sorted(judges.items()):
        if isinstance(e, JudgeResult):
            entry = e
        elif isinstance(e, Mapping):
            entry = JudgeResult.from_json(e)
        else:
            continue
        if result_text is not None:
            text = result_text(entry)
        else:
            text = judge_result_text(e if isinstance(e, Mapping) else entry.to_json())
        rows.append((name, entry, text))
    return rows


def judge_lines(judges: Mapping[str, Any] | None, title: str, result_text: ResultText | None = None) -> list[str]:
    """A markdown table of the section's judges (nothing when none ran); ``result_text`` gives the section's headline
    of a judge's record (default: read the entry as JSON, ``judge_result_text``)."""
    if not judges:
        return []
    out = [
        f"### {title}",
        "",
        "| judge | model | items | answered | unparseable | failed requests | result | calls |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for name, e, text in _rows(judges, result_text):
        out.append(
            f"| {md(name)} | {md(str(e.model_id or '—'))} | {_shown(e.n_items)} | {_shown(e.n_answered)} | "
            f"{_shown(e.n_unparseable)} | {_shown(e.n_failed_requests)} | {md(text)} | {md(_usage_text(e))} |"
        )
    out += [
        "",
        "Judge answers that do not follow the prompt's JSON form are counted as unparseable and left out of every figure; none is guessed.",
        "",
    ]
    return out


def render_judges(judges: Mapping[str, Any] | None, title: str, result_text: ResultText | None = None) -> str:
    """The same table for report.html."""
    if not judges:
        return ""
    rows = []
    for name, e, text in _rows(judges, result_text):
        rows.append(
            f"<tr class='judge-row' data-judge='{esc(name)}' data-task='{esc(e.task)}' "
            f"data-unparseable='{esc(_shown(e.n_unparseable, ''))}'>"
            f"<td class='l'>{esc(name)}</td><td class='l'>{esc(e.model_id or '—')}</td><td>{esc(_shown(e.n_items))}</td>"
            f"<td>{esc(_shown(e.n_answered))}</td><td>{esc(_shown(e.n_unparseable))}</td><td>"
            f"{esc(_shown(e.n_failed_requests))}</td>"
            f"<td class='l'>{esc(text)}</td><td class='l'>{esc(_usage_text(e))}</td></tr>"
        )
    return (
        f"<h4>{esc(title)}</h4><table class='judge-table'><thead><tr><th class='l'>judge</th><th class='l'>model</th><th>items</th><th>"
        f"answered</th>"
        "<th>unparseable</th><th>failed requests</th><th class='l'>result</th><th class='l'>calls</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
        "<p class='note'>Unparseable judge answers are counted and left out of every figure; none is guessed.</p>"
    )
