"""Report lines for hosted APIs: what a run sent and what it is estimated to cost."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audits.reports.formatting import md


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
        cost = u.get("estimated_cost_usd")
        rtfx = u.get("api_rtfx")
        lines.append(
            f"- {md(name)}: {float(u.get('audio_hours_billed') or 0) * 60:.2f} audio min billed in {u.get('billable_calls', 0)} calls, "
            f"{u.get('cache_hits', 0)} cache hits, {u.get('retries', 0)} retries, "
            f"est. cost {'unknown (no price)' if cost is None else f'${cost:.4f}'}, API RTFx {'—' if rtfx is None else f'{rtfx:.1f}'}"
        )
    return lines + [""]
