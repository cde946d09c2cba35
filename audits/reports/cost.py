"""Cost in the reports: what a hosted API run sent and cost, and the cost per audio hour of any model.

The cost per audio hour (``cost_per_audio_hour``) and the WER/speed/cost Pareto fronts
(``trade_off_fronts``) are shared by the profiles section and the tracks pages, so both price a
model the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audits.reports.formatting import esc, md

HOSTED_BASIS = "registry list price (hosted)"


def cost_per_audio_hour(
    hosted: bool, price: Any, rtfx: float | None, gpu_hour_usd: float | None, unknown_hint: str = "set gpu_hour_usd for local models"
) -> tuple[float | None, str]:
    """(USD per audio hour or None, how it was obtained).

    A hosted model costs its registry list price (``price_per_audio_hour_usd``; none: unknown); a
    local model costs ``gpu_hour_usd / RTFx`` (machine hours per audio hour times the hourly
    price) when a GPU-hour price is given and RTFx was measured. Anything else is unknown (None),
    never 0, so an unpriced model never looks free.
    """
    if hosted:
        if price is None:
            return None, "unknown: no list price in the registry (hosted)"
        return float(price), HOSTED_BASIS
    if gpu_hour_usd is None:
        return None, f"unknown: {unknown_hint}"
    if not rtfx:
        return None, "unknown: no RTFx measured (local)"
    return gpu_hour_usd / rtfx, f"gpu_hour_usd {gpu_hour_usd:g} / RTFx (local)"


def trade_off_fronts(models: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """The Pareto fronts of (lower WER, higher RTFx) and (lower WER, lower cost per audio hour)
    over models with ``wer``, ``rtfx`` and ``cost_per_audio_hour_usd``; a model with an unknown
    figure is on neither front of that figure."""
    from audits.reports.findings import pareto_front

    speed = {m: (float(v["wer"]), float(v["rtfx"])) for m, v in models.items() if v.get("wer") is not None and v.get("rtfx")}
    cost = {
        m: (float(v["wer"]), -float(v["cost_per_audio_hour_usd"]))
        for m, v in models.items()
        if v.get("wer") is not None and v.get("cost_per_audio_hour_usd") is not None
    }
    return pareto_front(speed), pareto_front(cost)


def hosted_usage(summary: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """``{model: usage}`` for models whose backend recorded hosted-API usage."""
    out: dict[str, Mapping[str, Any]] = {}
    for name, m in sorted((summary.get("models") or {}).items()):
        usage = (m.get("backend_info") or {}).get("usage")
        if isinstance(usage, Mapping):
            out[name] = usage
    return out


def hosted_usage_lines(summary: Mapping[str, Any]) -> list[str]:
    """One line per hosted model (nothing when the run used none)."""
    rows = hosted_usage(summary)
    if not rows:
        return []
    lines = ["Hosted APIs (cost is an estimate from list prices; API RTFx = audio s / request wall time, network included):", ""]
    for name, u in rows.items():
        rtfx = u.get("api_rtfx")
        lines.append(
            f"- {md(name)}: {float(u.get('audio_hours_billed') or 0) * 60:.2f} audio min billed in {u.get('billable_calls', 0)} calls, "
            f"{u.get('cache_hits', 0)} cache hits, {u.get('retries', 0)} retries, "
            f"est. cost {_cost_text(u)}, API RTFx {'—' if rtfx is None else f'{rtfx:.1f}'}"
        )
    return lines + [""]


def _cost_text(u: Mapping[str, Any]) -> str:
    cost = u.get("estimated_cost_usd")
    return "unknown (no price)" if cost is None else f"${float(cost):.4f}"


def hosted_usage_sections(summary: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """report.html's 'Hosted APIs' section (none when the run used no hosted model): per model the
    audio billed, calls, cache hits, retries, price and estimated cost; a missing price shows as
    unknown, never as 0."""
    rows = hosted_usage(summary)
    if not rows:
        return []
    body = [
        "<table class='hosted-usage'><thead><tr><th class='l'>model</th><th>audio min billed</th><th>billable calls</th><th>cache "
        "hits</th>"
        "<th>retries</th><th>price / audio h</th><th>est. cost</th><th>API RTFx</th></tr></thead><tbody>"
    ]
    for name, u in rows.items():
        price = u.get("price_per_audio_hour_usd")
        rtfx = u.get("api_rtfx")
        body.append(
            f"<tr data-model='{esc(name)}' data-cost='{esc('' if u.get('estimated_cost_usd') is None else u.get('estimated_cost_usd'))}'>"
            f"<td class='l'>{esc(name)}</td><td>{float(u.get('audio_hours_billed') or 0) * 60:.2f}</td><td>"
            f"{esc(u.get('billable_calls', 0))}</td>"
            f"<td>{esc(u.get('cache_hits', 0))}</td><td>{esc(u.get('retries', 0))}</td><td>"
            f"{'unknown' if price is None else f'${float(price):.3f}'}</td>"
            f"<td>{esc(_cost_text(u))}</td><td>{'—' if rtfx is None else f'{float(rtfx):.1f}'}</td></tr>"
        )
    body.append("</tbody></table>")
    note = "Cost is an estimate from list prices (no price: unknown); API RTFx = audio seconds / request wall time, network included."
    return [("hosted", "Hosted APIs: usage and cost", "".join(body), note)]
