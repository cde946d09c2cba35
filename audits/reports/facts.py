"""``report.html``'s run facts: provenance, the merged runs, the model table, failures and package versions.

The model table's columns are fixed ones (WER, CER, speed, run facts) and, after CER, one per figure the
ASR records declare with ``report`` (``audits.asr.results.report_columns``), as in report.md's model table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audits.asr.results import ModelFigures, report_columns
from audits.reports.formatting import attrs, ci_bounds, esc, interval_text, num_attr, pct, seconds_text


def render_facts(summary: Mapping[str, Any], data: Mapping[str, Any]) -> str:
    ds = data["dataset"]
    norm = summary.get("normalizer") or {}
    hw = summary.get("hardware") or {}
    rows = [
        ("recipe", (summary.get("recipe") or {}).get("name")),
        ("dataset", f"{ds.get('name')} — {ds.get('n_utts')} utterances, reader {ds.get('reader')}, fingerprint {ds.get('fingerprint')}"),
        ("dataset source", ds.get("source")),
        ("normalizer", f"{norm.get('name')} (version {norm.get('version')})"),
        ("hardware", ", ".join(f"{k}: {v}" for k, v in hw.items())),
        ("created", summary.get("created_at")),
        ("WER / CER", (summary.get("scoring") or {}).get("wer", "corpus-level")),
        ("intervals", (summary.get("scoring") or {}).get("ci95", "95%")),
        ("RTFx", (summary.get("scoring") or {}).get("rtfx", "audio seconds / inference seconds")),
    ]
    out = (
        ['<table class="facts" id="facts-table">']
        + [f'<tr><th class="l">{esc(k)}</th><td data-fact="{esc(k)}">{esc(v)}</td></tr>' for k, v in rows]
        + ["</table>"]
    )
    merged = summary.get("merged_from") or []
    if merged:
        out.append(
            "<h3>Merged runs</h3><table><thead><tr><th class='l'>run directory</th><th class='l'>recipe</th><th class='l'>"
            "created</th><th class='l'>hardware</th><th class='l'>models</th></tr></thead><tbody>"
        )
        for r in merged:
            hwr = r.get("hardware") or {}
            hw_text = ", ".join(f"{k}: {v}" for k, v in hwr.items() if k in ("processor", "cpu_count", "torch", "cuda_available", "gpu"))
            out.append(
                f"<tr class='merged-run'><td class='l'>{esc(r.get('dir'))}</td><td class='l'>{esc(r.get('recipe'))}</td><td class='l'>"
                f"{esc(r.get('created_at'))}</td>"
                f"<td class='l'>"
                f"{esc(hw_text)}</td>"
                f"<td class='l'>{esc(', '.join(r.get('models') or []))}</td></tr>"
            )
        out.append("</tbody></table>")
    out.append("<h3>Models</h3><div class='scroll'><table class='sortable' id='models-table'><thead><tr>")
    declared = report_columns(ModelFigures)  # the figures the ASR records declare for the model tables, after CER
    cols = [
        "model",
        "status",
        "params (M)",
        "WER %",
        "95% CI",
        "CER %",
        *(c.heading for c in declared),
        "RTFx",
        "audio s",
        "infer s",
        "utts",
        "failed",
        "batch",
        "warm-up",
        "device",
        "dtype",
    ]
    out.append(
        "".join(f"<th class='{'l' if c in ('model', 'status', 'device', 'dtype') else ''}'>{esc(c)}</th>" for c in cols)
        + "</tr></thead><tbody>"
    )
    for m, e in sorted((summary.get("models") or {}).items()):
        lo, hi = ci_bounds(e.get("ci95"))
        rtfx = e.get("rtfx")
        params = "—" if e.get("params_m") is None else f"{float(e['params_m']):g}"
        out.append(
            f"<tr{attrs(model=m)} class='model-row'>"
            f"<td class='l'>{esc(m)}</td><td class='l'>"
            f"{esc(e.get('status'))}{'<br><span class=n>' + esc(str(e.get('error'))[:300]) + '</span>' if e.get('error') else ''}</td>"
            f"<td data-sort='{num_attr(e.get('params_m'))}'>{params}</td>"
            f"<td{attrs(wer=num_attr(e.get('wer')))} data-sort='{num_attr(e.get('wer'))}'>{pct(e.get('wer'))}</td>"
            f"<td class='ci'{attrs(ci_lo=num_attr(lo), ci_hi=num_attr(hi))}>{esc(interval_text(e))}</td>"
            f"<td data-sort='{num_attr(e.get('cer'))}'>{pct(e.get('cer'))}</td>"
            + "".join(f"<td{attrs(figure=c.name)} data-sort='{num_attr(c.value(e))}'>{esc(c.cell(e))}</td>" for c in declared)
            + f"<td{attrs(rtfx=num_attr(rtfx))} data-sort='{num_attr(rtfx)}'>{'—' if rtfx is None else f'{rtfx:.1f}'}</td>"
            f"<td>{seconds_text(e.get('audio_s'))}</td><td>{seconds_text(e.get('infer_s'))}</td>"
            f"<td>{esc(e.get('n_utts', 0))}</td><td{attrs(n_failed=e.get('n_failed', 0))}>{esc(e.get('n_failed', 0))}</td>"
            f"<td{attrs(batch_size=e.get('batch_size') if e.get('batch_size') is not None else '')}>"
            f"{esc(e.get('batch_size') if e.get('batch_size') is not None else '—')}</td>"
            f"<td>{esc(e.get('warmup_batches', 0))}</td><td class='l'>{esc(e.get('device') or '—')}</td><td class='l'>"
            f"{esc(e.get('dtype') or '—')}</td></tr>"
        )
    out.append("</tbody></table></div>")
    fails = [(m, e.get("failures") or {}) for m, e in sorted((summary.get("models") or {}).items()) if e.get("failures")]
    if fails:
        out.append("<h3>Failures</h3><ul>")
        for m, f in fails:
            out.append("".join(f"<li>{esc(m)}: {esc(n)} × {esc(reason)}</li>" for reason, n in f.items()))
        out.append("</ul>")
    pk = summary.get("packages") or {}
    if pk:
        out.append(
            "<details><summary>Package versions</summary><p class='note'>"
            + esc(", ".join(f"{k} {v}" for k, v in pk.items()))
            + "</p></details>"
        )
    return "".join(out)
