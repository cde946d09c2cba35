"""``report.html``: one self-contained page a speech team reads to choose a model.

Everything is generated here: tables, inline SVG plots (no CDN, no external file, works
offline), a short plain-language summary computed from the numbers, and the numbers
themselves as JSON in ``<script type="application/json" id="report-data">`` so scripts and
tests can read exactly what the page shows. Every string that comes from data (references,
hypotheses, labels, model names) goes through ``html.escape``; the embedded JSON escapes
``<``, ``>`` and ``&`` so no text can close the script element.

Statements in the summary never call a model better or worse unless the 95% intervals
support it (they do not overlap); otherwise they say the difference is within the intervals.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from audits.asr.align import align
from audits.asr.cohort import COHORT_LABEL, MIN_COHORT, CohortScores, cohort_scores, slice_family
from audits.asr.summary import json_safe
from audits.reports.charts import (
    IntervalRow,
    diverging_color,
    heat_color,
    nice_max,
    svg_interval_panels,
    svg_scatter,
)
from audits.reports.cost import hosted_usage_sections
from audits.reports.findings import (
    by_wer,
    empty_ref_finding,
    empty_references,
    families,
    findings,
    model_names,
)
from audits.reports.formatting import (
    attrs,
    ci_bounds,
    ci_text,
    color_map,
    esc,
    interval_text,
    json_for_script,
    num_attr,
    pct,
    seconds_text,
    section_html,
)
from audits.reports.robustness import robustness_sections
from audits.sections import ordered
from engine.storage import atomic_write_text

if TYPE_CHECKING:
    from audits.result import RunResult

log = logging.getLogger(__name__)

WORST_N = 5


# --------------------------------------------------------------------------------------------
# Facts pulled out of the summary
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Plain-language findings
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# SVG
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Worst utterances
# --------------------------------------------------------------------------------------------


def scored_rows(summary: Mapping[str, Any], table: pd.DataFrame) -> pd.DataFrame:
    """The rows normalized with the run's normalizer, with per-row edit counts."""
    from audits.asr.scoring import score_table
    from audits.normalizing import get_normalizer

    norm = get_normalizer((summary.get("normalizer") or {}).get("name", "whisper-english"))
    return score_table(table, norm).frame


def worst_utterances(df: pd.DataFrame, labels: Sequence[str], n: int = WORST_N) -> dict[str, list[dict[str, Any]]]:
    """Per model, the ``n`` scored utterances with the most word errors (then highest WER), aligned.

    ``df`` is :func:`scored_rows`' output; rows with an empty reference are left out (they are
    counted by :func:`empty_references`), since their "WER" is undefined.
    """
    if df is None or not len(df):
        return {}
    out: dict[str, list[dict[str, Any]]] = {}
    for model, g in df[df["ok"]].groupby("model", sort=True):
        g = g[g["n_words"] > 0]  # an empty reference is a data problem, counted separately
        g = g.assign(_wer=g["word_errors"] / g["n_words"])
        g = g[g["word_errors"] > 0].sort_values(["word_errors", "_wer", "utt_id"], ascending=[False, False, True]).head(n)
        rows = []
        for r in g.to_dict("records"):
            pairs = align(str(r["ref_norm"]).split(), str(r["hyp_norm"]).split())
            rows.append(
                {
                    "utt_id": str(r["utt_id"]),
                    "word_errors": int(r["word_errors"]),
                    "n_words": int(r["n_words"]),
                    "subs": int(r["subs"]),
                    "dels": int(r["dels"]),
                    "ins": int(r["ins"]),
                    "ref_raw": str(r["ref_raw"]),
                    "hyp_raw": str(r["hyp_raw"]),
                    "labels": {
                        c: str(r[c]) for c in labels if r.get(c) is not None and not (isinstance(r.get(c), float) and math.isnan(r[c]))
                    },
                    "alignment": [[p.tag, p.ref, p.hyp] for p in pairs],
                }
            )
        out[str(model)] = rows
    return out


def _label_columns(table: pd.DataFrame) -> list[str]:
    from audits.reports.tables import label_columns

    return label_columns(table)


def failed_examples(table: pd.DataFrame, n: int = 3) -> dict[str, list[dict[str, str]]]:
    """A few failed rows per model with their error text."""
    if table is None or not len(table) or "error" not in table:
        return {}
    bad = table[table["error"].notna()]
    return {
        str(m): [{"utt_id": str(r["utt_id"]), "error": str(r["error"])[:300]} for r in g.head(n).to_dict("records")]
        for m, g in bad.groupby("model", sort=True)
    }


# --------------------------------------------------------------------------------------------
# The data behind the page
# --------------------------------------------------------------------------------------------

_MODEL_KEYS = tuple(
    "status backend wer ci95 not_testable cer cer_ci95 rtfx n_utts n_failed n_words audio_s infer_s batch_size device dtype warmup_batches "
    "params_m tags error run".split()
)
_SLICE_KEYS = ("wer", "ci95", "not_testable", "cer", "cer_ci95", "n_utts", "n_words", "n_failed", "n_speakers", "rtfx")


def build_report_data(
    source: RunResult | Mapping[str, Any], table: pd.DataFrame | None, worst_n: int = WORST_N, scored: pd.DataFrame | None = None
) -> dict[str, Any]:
    """Everything the page shows, as plain JSON-able data (embedded in the page as ``report-data``)."""
    from audits.result import RunResult

    run = RunResult.of_summary(source)
    summary = run.plain_summary
    models = summary.get("models") or {}
    cohort = cohort_scores(summary)
    ds = summary.get("dataset") or {}
    if scored is not None:
        df: pd.DataFrame | None = scored  # the pass summary.json was built from
    else:
        df = scored_rows(summary, table) if table is not None and len(table) else None
    data = {
        "title": f"Audit report: {(summary.get('recipe') or {}).get('name', '')}",
        "created_at": summary.get("created_at"),
        "dataset": {k: ds.get(k) for k in ("name", "source", "reader", "n_utts", "n_shards", "fingerprint")},
        "normalizer": summary.get("normalizer"),
        "hardware": summary.get("hardware"),
        "merged_from": [
            {k: r.get(k) for k in ("dir", "recipe", "created_at", "hardware", "models")} for r in summary.get("merged_from") or []
        ],
        "models": {m: {k: e.get(k) for k in _MODEL_KEYS if k in e} for m, e in sorted(models.items())},
        "families": families(summary),
        "slices": {
            m: {k: {kk: s.get(kk) for kk in _SLICE_KEYS} for k, s in sorted((e.get("slices") or {}).items())}
            for m, e in sorted(models.items())
        },
        "gaps": {m: [dict(g) for g in (e.get("gaps") or [])] for m, e in sorted(models.items())},
        "cohort": cohort.to_dict(),
        **{sec.key: sec.report_data(sec.result_in(run), run) for sec in ordered()},
        "worst": worst_utterances(df, _label_columns(table), worst_n) if df is not None else {},
        "empty_references": empty_references(df) if df is not None else {},
        "findings": findings(run, cohort) + empty_ref_finding(df),
    }
    return json_safe(data)


# --------------------------------------------------------------------------------------------
# HTML sections
# --------------------------------------------------------------------------------------------

CSS = """
:root{--fg:#1d2430;--muted:#5b6472;--line:#d9dde3;--bg:#fff;--accent:#2f5d8a}
*{box-sizing:border-box}
body{font:14px/1.45 -apple-system,"Segoe UI",Roboto,"DejaVu Sans",Helvetica,Arial,sans-serif;color:var(--fg);background:var(--bg);margin:0}
main{max-width:1240px;margin:0 auto;padding:18px 28px 60px}
h1{font-size:24px;margin:8px 0 2px}h2{font-size:19px;margin:34px 0 8px;padding-bottom:4px;border-bottom:2px solid var(--line)}
h3{font-size:15px;margin:20px 0 6px}
.sub{color:var(--muted);margin:0 0 10px}
nav{position:sticky;top:0;background:#f4f6f9;border-bottom:1px solid var(--line);padding:6px 28px;z-index:5;font-size:13px}
nav a{margin-right:14px;color:var(--accent);text-decoration:none}
table{border-collapse:collapse;margin:6px 0 10px;font-variant-numeric:tabular-nums}
th,td{border:1px solid var(--line);padding:3px 7px;text-align:right;vertical-align:top}
th{background:#f4f6f9;font-weight:600}
td.l,th.l{text-align:left}
table.sortable th{cursor:pointer}
.scroll{overflow-x:auto;max-width:100%}
.ci{color:var(--muted);font-size:12px}
.n{color:var(--muted);font-size:11px}
.sig{font-weight:700}
.badge{display:inline-block;padding:0 6px;border-radius:8px;font-size:11px;font-weight:600;background:#ffe2c2;color:#7a3b00;margin-left:4px}
.badge.ok{background:#dff0d8;color:#2d5a1f}.badge.bad{background:#f8d7da;color:#7a1420}
.findings li{margin:3px 0}
.facts td{text-align:left}
.note{color:var(--muted);font-size:12.5px;max-width:900px}
svg.plot{display:block;margin:6px 0 12px;max-width:100%;height:auto}
svg .lab,svg .ptlab{font-size:11.5px;fill:#1d2430}svg .tick{font-size:10.5px;fill:#5b6472}
svg .axis{font-size:12px;fill:#333}svg .ptitle{font-size:12.5px;font-weight:600;fill:#1d2430}
.heat td{min-width:54px;text-align:center}
.heat th,.heat td.l{white-space:nowrap}
.heat td.l{text-align:left}
td.slice-cell{white-space:nowrap}
.align{display:flex;flex-wrap:wrap;gap:2px 3px;font:13px/1.2 "DejaVu Sans Mono",Menlo,Consolas,monospace;margin:4px 0}
.col{display:inline-flex;flex-direction:column;padding:1px 3px;border-radius:3px}
.col .r{color:#1d2430}.col .h{color:#1d2430}
.col.sub{background:#fff1c9}.col.sub .h{color:#8a5a00;font-weight:700}
.col.del{background:#fde0e0}.col.del .r{text-decoration:line-through;color:#a0141e}
.col.ins{background:#dde9ff}.col.ins .h{color:#1f4fb5;font-weight:700}
.gapmark{color:#aaa}
.raw{color:var(--muted);font-size:12px;margin:2px 0}
.worst{border-top:1px solid var(--line);padding:6px 0 4px}
th[colspan]{text-align:center}
details{margin:6px 0}summary{cursor:pointer;font-weight:600}
.legend span{margin-right:10px}
footer{margin-top:40px;color:var(--muted);font-size:12px}
"""

JS = """
(function(){
  try {
    var data = JSON.parse(document.getElementById('report-data').textContent);
    var n = Object.keys(data.models || {}).length;
    document.querySelectorAll('table.sortable').forEach(function(t){
      t.querySelectorAll('thead th').forEach(function(th, i){
        th.title = 'click to sort';
        th.addEventListener('click', function(){
          var body = t.tBodies[0]; if (!body) return;
          var asc = th.getAttribute('data-dir') !== 'asc';
          th.setAttribute('data-dir', asc ? 'asc' : 'desc');
          var rows = Array.prototype.slice.call(body.rows);
          rows.sort(function(a, b){
            var ca = a.cells[i], cb = b.cells[i]; if (!ca || !cb) return 0;
            var va = ca.getAttribute('data-sort'), vb = cb.getAttribute('data-sort');
            var fa = parseFloat(va), fb = parseFloat(vb);
            if (va !== null && vb !== null && !isNaN(fa) && !isNaN(fb)) return asc ? fa - fb : fb - fa;
            if (va === '' && vb !== '') return 1; if (vb === '' && va !== '') return -1;
            var sa = ca.textContent, sb = cb.textContent;
            return asc ? sa.localeCompare(sb) : sb.localeCompare(sa);
          });
          rows.forEach(function(r){ body.appendChild(r); });
        });
      });
    });
    document.body.setAttribute('data-rendered', 'ok');
    document.body.setAttribute('data-n-models', String(n));
  } catch (e) {
    document.body.setAttribute('data-rendered', 'error');
    throw e;
  }
})();
"""


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
    cols = [
        "model",
        "status",
        "params (M)",
        "WER %",
        "95% CI",
        "CER %",
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
            f"<td{attrs(rtfx=num_attr(rtfx))} data-sort='{num_attr(rtfx)}'>{'—' if rtfx is None else f'{rtfx:.1f}'}</td>"
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


def render_overall(summary: Mapping[str, Any], colors: Mapping[str, str]) -> str:
    models = summary.get("models") or {}
    ms = sorted((m for m in models if models[m].get("wer") is not None), key=lambda m: models[m]["wer"])
    if not ms:
        return "<p>No model produced scorable output.</p>"
    x_max = nice_max(max((ci_bounds(models[m].get("ci95"))[1] or models[m]["wer"]) for m in ms) * 1.05)
    rows = [IntervalRow(m, models[m]["wer"], *ci_bounds(models[m].get("ci95")), color=colors[m], attrs=attrs(model=m)) for m in ms]
    wer_svg = svg_interval_panels(ms, [("WER % (95% CI)", rows)], 0.0, x_max, "Overall WER per model with 95% intervals", width=720)
    cer_rows = [IntervalRow(m, models[m].get("cer"), *ci_bounds(models[m].get("cer_ci95")), color=colors[m]) for m in ms]
    c_max = nice_max(max((ci_bounds(models[m].get("cer_ci95"))[1] or models[m].get("cer") or 0) for m in ms) * 1.05)
    cer_svg = svg_interval_panels(ms, [("CER % (95% CI)", cer_rows)], 0.0, c_max, "Overall CER per model with 95% intervals", width=720)
    return "<div style='display:flex;flex-wrap:wrap;gap:12px'>" + f"<div>{wer_svg}</div><div>{cer_svg}</div></div>"


def render_speed(summary: Mapping[str, Any], colors: Mapping[str, str]) -> str:
    models = summary.get("models") or {}
    pts = []
    untimed = []
    for m in sorted(models):
        e = models[m]
        if e.get("wer") is None:
            continue
        if not e.get("rtfx"):
            untimed.append(m)
            continue
        lo, hi = ci_bounds(e.get("ci95"))
        pts.append((m, float(e["rtfx"]), float(e["wer"]), lo, hi, colors[m]))
    out = []
    if pts:
        out.append(svg_scatter(pts, "WER against RTFx across models"))
        devs = sorted(
            {
                f"{models[m].get('device') or '?'} / {models[m].get('dtype') or '?'} / batch {models[m].get('batch_size') or '?'}"
                for m, *_ in pts
            }
        )
        out.append(
            f"<p class='note'>Measured on: {esc('; '.join(devs))}. RTFx is a point measurement (no interval); bars are the WER 95% "
            f"intervals. "
            "Down and to the right is better.</p>"
        )
    else:
        out.append("<p>No model in this run has timing (predictions-only runs have none).</p>")
    if untimed:
        out.append(f"<p class='note'>Without timing: {esc(', '.join(untimed))}.</p>")
    return "".join(out)


def render_heatmap(summary: Mapping[str, Any], fams: Mapping[str, list[str]]) -> str:
    models = summary.get("models") or {}
    ms = by_wer(summary)
    keys = [k for ks in fams.values() for k in ks]
    if not keys or not ms:
        return "<p>This dataset carries no slice labels.</p>"
    vals = [models[m]["slices"][k]["wer"] for m in ms for k in keys if (models[m].get("slices") or {}).get(k, {}).get("wer") is not None]
    vmax = max(0.05, float(pd.Series(vals).quantile(0.95))) if vals else 1.0

    def cell(m: str, k: str) -> str:
        if k == "all":
            w, ci, n = models[m]["wer"], models[m].get("ci95"), models[m].get("n_utts", 0)
        else:
            s = (models[m].get("slices") or {}).get(k) or {}
            w, ci, n = s.get("wer"), s.get("ci95"), s.get("n_utts", 0)
        bg, fg = heat_color(w, vmax)
        tip = f"{m} · {k}: WER {pct(w)}% {ci_text(ci)}, {n} utts"
        cls = "hm" if k != "all" else "hm-all"
        return (
            f"<td class='{cls}' style='background:{bg};color:{fg}' title='{esc(tip)}'{attrs(model=m, slice=k, wer=num_attr(w))}>"
            f"{pct(w)}</td>"
        )

    out = ["<div class='scroll'><table class='heat' id='heatmap-table'>"]
    if len(ms) <= len(keys):  # few models, many slices: one row per slice reads best
        out.append(
            "<thead><tr><th class='l'>family</th><th class='l'>slice</th>"
            + "".join(f"<th>{esc(m)}</th>" for m in ms)
            + "</tr></thead><tbody>"
        )
        out.append("<tr><th class='l' colspan='2'>all utterances</th>" + "".join(cell(m, "all") for m in ms) + "</tr>")
        for f, ks in fams.items():
            for i, k in enumerate(ks):
                head = f"<th class='l' rowspan='{len(ks)}'>{esc(f)}</th>" if i == 0 else ""
                out.append(f"<tr>{head}<td class='l'>{esc(slice_family(k)[1])}</td>" + "".join(cell(m, k) for m in ms) + "</tr>")
    else:  # a wide sweep: one row per model
        out.append("<thead><tr><th class='l' rowspan='2'>model</th><th rowspan='2'>all</th>")
        out.append("".join(f"<th colspan='{len(ks)}'>{esc(f)}</th>" for f, ks in fams.items()) + "</tr><tr>")
        out.append("".join(f"<th>{esc(slice_family(k)[1])}</th>" for k in keys) + "</tr></thead><tbody>")
        for m in ms:
            out.append(f"<tr><td class='l'>{esc(m)}</td>{cell(m, 'all')}" + "".join(cell(m, k) for k in keys) + "</tr>")
    out.append("</tbody></table></div>")
    out.append(
        f"<p class='note'>Cell colour: WER from 0 (light) to {pct(vmax, 0)}% or more (dark; the 95th percentile of the cells). "
        f"Hover a cell for its interval and size.</p>"
    )
    return "".join(out)


def single_speaker(s: Mapping[str, Any]) -> bool:
    """A slice from one speaker: a bootstrap over speakers cannot say how much WER varies."""
    return s.get("n_speakers") == 1


def render_slices(summary: Mapping[str, Any], fams: Mapping[str, list[str]], colors: Mapping[str, str]) -> str:
    models = summary.get("models") or {}
    ms = by_wer(summary)
    if not fams or not ms:
        return "<p>This dataset carries no slice labels; only overall WER is available.</p>"
    out = []
    any_single = False
    for fam, keys in fams.items():
        out.append(f"<h3 id='family-{esc(fam)}'>{esc(fam)}</h3>")
        his = [
            (ci_bounds(models[m]["slices"][k].get("ci95"))[1] or models[m]["slices"][k].get("wer") or 0)
            for m in ms
            for k in keys
            if k in (models[m].get("slices") or {})
        ]
        x_max = nice_max(max(his + [0.01]) * 1.05)
        n_cols = min(4, len(keys))
        for start in range(0, len(keys), 4):
            chunk = keys[start : start + 4]
            panels = []
            for k in chunk:
                rows = []
                for m in ms:
                    sl = (models[m].get("slices") or {}).get(k)
                    if sl and sl.get("wer") is not None:
                        lo, hi = (None, None) if single_speaker(sl) else ci_bounds(sl.get("ci95"))
                        rows.append(IntervalRow(m, sl["wer"], lo, hi, color=colors[m], attrs=attrs(model=m, slice=k)))
                panels.append((f"{slice_family(k)[1]}", rows))
            out.append(svg_interval_panels(ms, panels, 0.0, x_max, f"WER % per model for {fam} slices, with 95% intervals", n_cols=n_cols))

        def cell(m: str, k: str) -> str:
            nonlocal any_single
            sl = (models[m].get("slices") or {}).get(k)
            if not sl:
                return "<td>—</td>"
            lo, hi = ci_bounds(sl.get("ci95"))
            single = single_speaker(sl)
            any_single = any_single or single
            ci = (
                "<span class='ci' title='one speaker: no interval'>† 1 speaker</span>"
                if single
                else f"<span class='ci'>{esc(interval_text(sl))}</span>"
            )
            cell_attrs = attrs(
                model=m,
                slice=k,
                wer=num_attr(sl.get("wer")),
                ci_lo=num_attr(lo),
                ci_hi=num_attr(hi),
                n_utts=sl.get("n_utts", 0),
                n_words=sl.get("n_words", 0),
                n_speakers=sl.get("n_speakers", ""),
            )
            return (
                f"<td class='slice-cell'{cell_attrs}"
                f" data-sort='{num_attr(sl.get('wer'))}'>{pct(sl.get('wer'))} {ci} <span class='n'>· {esc(sl.get('n_utts', 0))}</span></td>"
            )

        out.append(f"<div class='scroll'><table class='sortable slice-table' data-family='{esc(fam)}'><thead><tr>")
        if len(ms) <= len(keys):  # rows = slice values
            out.append(
                f"<th class='l'>{esc(fam)}</th>"
                + "".join(f"<th>{esc(m)}<br><span class='n'>WER % [95% CI] · utts</span></th>" for m in ms)
                + "</tr></thead><tbody>"
            )
            for k in keys:
                out.append(f"<tr><td class='l'>{esc(slice_family(k)[1])}</td>" + "".join(cell(m, k) for m in ms) + "</tr>")
        else:  # rows = models
            out.append(
                "<th class='l'>model</th>"
                + "".join(f"<th>{esc(slice_family(k)[1])}<br><span class='n'>WER % [95% CI] · utts</span></th>" for k in keys)
                + "</tr></thead><tbody>"
            )
            for m in ms:
                out.append(f"<tr><td class='l'>{esc(m)}</td>" + "".join(cell(m, k) for k in keys) + "</tr>")
        out.append("</tbody></table></div>")
    if any_single:
        out.append(
            "<p class='note'>† The slice holds one speaker: intervals are a bootstrap over speakers, so none can be given; "
            "treat differences on such slices as anecdotal.</p>"
        )
    return "".join(out)


def render_gaps(summary: Mapping[str, Any], colors: Mapping[str, str]) -> str:
    models = summary.get("models") or {}
    ms = [m for m in by_wer(summary) if models[m].get("gaps")]
    if not ms:
        return (
            "<p>No fairness gaps were computed (the dataset has no baseline values such as native, neutral, clean or single, "
            "and the recipe names no gaps).</p>"
        )
    defs: dict[tuple[str, str, str], list[tuple[str, Mapping[str, Any]]]] = {}
    for m in ms:
        for g in models[m]["gaps"]:
            defs.setdefault((str(g["label"]), str(g["a"]), str(g["b"])), []).append((m, g))
    bound = max(
        [abs(v) for gs in defs.values() for _, g in gs for v in (ci_bounds(g.get("ci95")) + (g.get("gap"),)) if v is not None] + [0.01]
    )
    bound = nice_max(bound * 1.05)
    out = []
    items = list(defs.items())
    for start in range(0, len(items), 3):
        panels = []
        for (lab, a, b), gs in items[start : start + 3]:
            rows = [
                IntervalRow(
                    m,
                    g.get("gap"),
                    *ci_bounds(g.get("ci95")),
                    color=colors.get(m, "#333"),
                    strong=bool(g.get("excludes_zero")),
                    attrs=attrs(model=m, gap=f"{lab}:{a}-{b}"),
                )
                for m, g in gs
            ]
            panels.append((f"{lab}: {a} − {b}", rows))
        out.append(
            svg_interval_panels(
                ms, panels, -bound, bound, "Fairness gaps (WER points, a − b) with 95% intervals", zero_line=True, n_cols=min(3, len(items))
            )
        )
    out.append(
        "<p class='note'>Filled dot: the 95% interval excludes zero. Hollow dot: the gap is within its interval of zero. Positive = "
        "higher WER on the first value.</p>"
    )
    out.append(
        "<div class='scroll'><table class='sortable' id='gaps-table'><thead><tr><th class='l'>model</th><th class='l'>gap (WER a − "
        "b)</th><th>points</th><th>95% CI</th><th>WER a %</th><th>WER b %</th><th>utts a / b</th><th class='l'>interval excludes 0</th>"
        "</tr></thead><tbody>"
    )
    for (lab, a, b), gs in items:
        for m, g in gs:
            gap = g.get("gap")
            lo, hi = ci_bounds(g.get("ci95"))
            ex = bool(g.get("excludes_zero"))
            untestable = bool(g.get("not_testable"))
            gap_attrs = attrs(
                model=m,
                label=lab,
                a=a,
                b=b,
                gap=num_attr(gap),
                ci_lo=num_attr(lo),
                ci_hi=num_attr(hi),
                excludes_zero="true" if ex else "false",
                not_testable=g.get("not_testable") or "",
            )
            out.append(
                f"<tr class='gap-row{' sig' if ex else ''}'{gap_attrs}>"
                f"<td class='l'>{esc(m)}</td><td class='l'>{esc(lab)}: {esc(a)} − {esc(b)}</td>"
                f"<td data-sort='{num_attr(gap)}'>{'—' if gap is None else f'{100 * gap:+.1f}'}</td><td class='ci'>"
                f"{esc(interval_text(g))}</td>"
                f"<td>{pct(g.get('wer_a'))}</td><td>{pct(g.get('wer_b'))}</td><td>{esc(g.get('n_a', ''))} / {esc(g.get('n_b', ''))}</td>"
                f"<td class='l'>{'<span class=badge>✱ yes</span>' if ex else '—' if untestable else '<span class=gapmark>no</span>'}"
                "</td></tr>"
            )
    out.append("</tbody></table></div>")
    return "".join(out)


def render_cohort(cohort: CohortScores) -> str:
    if not cohort.models:
        return "<p>No model has a WER, so there is no cohort.</p>"
    if len(cohort.models) < MIN_COHORT:
        return f"<p class='note'>Not testable: {len(cohort.models)} model(s) with a WER; a robust score needs at least {MIN_COHORT}.</p>"
    fams = list(cohort.families)
    out = [
        (
            f"<p class='note'><b>Scores are {esc(COHORT_LABEL)}</b> ({len(cohort.models)} model(s)): 100 + 15 · (x − median) / (1.4826 · "
            f"MAD), "
            "deviations capped at ±4 (so scores lie in 40–160), 100 for everyone when MAD = 0. x = −WER overall; for a family, x = −(mean "
            "WER over the "
            "family's values). Higher is better; 100 is the cohort median; 15 points ≈ one robust standard deviation. Adding or removing "
            "models changes them. "
            "They rank within this sweep only, and say nothing about statistical significance: read the intervals above for that.</p>"
        ),
        "<div class='scroll'><table class='sortable' id='cohort-table'><thead><tr><th class='l'>model</th><th>overall</th>",
        "".join(f"<th>{esc(f)}</th>" for f in fams),
        "</tr></thead><tbody>",
    ]
    for m in cohort.models:
        cells = [("overall", cohort.overall.get(m))] + [(f, cohort.families[f].get(m)) for f in fams]
        out.append(f"<tr><td class='l'>{esc(m)}</td>")
        for f, s in cells:
            bg, fg = diverging_color(s)
            out.append(
                f"<td style='background:{bg};color:{fg}'{attrs(model=m, family=f, score=num_attr(s))} data-sort='{num_attr(s)}'>"
                f"{'—' if s is None else f'{s:.0f}'}</td>"
            )
        out.append("</tr>")
    out.append("</tbody></table></div>")
    untestable = [f"{k}: not testable ({r})" for k, r in cohort.not_testable.items() if k == "overall" or k in fams]
    if cohort.notes or untestable:
        out.append("<ul class='note'>" + "".join(f"<li>{esc(n)}</li>" for n in (untestable + cohort.notes)[:12]) + "</ul>")
    return "".join(out)


def render_alignment(pairs: Sequence[Sequence[Any]]) -> str:
    cols = []
    for tag, ref, hyp in pairs:
        cls = {"equal": "eq", "sub": "sub", "del": "del", "ins": "ins"}.get(str(tag), "eq")
        cols.append(
            f"<span class='col {cls}'><span class='r'>{esc(ref) if ref is not None else '&nbsp;'}</span><span class='h'>"
            f"{esc(hyp) if hyp is not None else '∅' if cls == 'del' else '&nbsp;'}</span></span>"
        )
    return "<div class='align'>" + "".join(cols) + "</div>"


def render_worst(data: Mapping[str, Any], summary: Mapping[str, Any], failed: Mapping[str, list[dict[str, str]]]) -> str:
    worst = data.get("worst") or {}
    if not worst and not failed:
        return "<p>No utterance rows were available for this report.</p>"
    out = [
        (
            "<p class='legend note'>Top row: normalized reference; bottom row: normalized hypothesis. "
            "<span class='col sub'>substitution</span> <span class='col del'><span class='r'>deletion</span></span> "
            "<span class='col ins'><span class='h'>insertion</span></span>. Raw texts below each alignment. Ranked by word errors, then "
            "utterance WER.</p>"
        )
    ]
    for i, m in enumerate(sorted(set(worst) | set(failed))):
        rows = worst.get(m, [])
        out.append(
            f"<details class='worst-model'{attrs(model=m)}{' open' if i == 0 else ''}><summary>{esc(m)} — {len(rows)} "
            f"utterance(s)</summary>"
        )
        for r in rows:
            labs = ", ".join(f"{k}={v}" for k, v in r["labels"].items())
            out.append(
                f"<div class='worst'{attrs(model=m, utt=r['utt_id'], errors=r['word_errors'], n_words=r['n_words'])}>"
                f"<div><b>{esc(r['utt_id'])}</b> <span class='n'>{esc(labs)}</span> — {r['word_errors']} error(s) in {r['n_words']} "
                f"word(s) "
                f"(S {r['subs']}, D {r['dels']}, I {r['ins']})</div>{render_alignment(r['alignment'])}"
                f"<div class='raw'>ref: <span class='ref-raw'>{esc(r['ref_raw'])}</span></div><div class='raw'>hyp: <span class='hyp-raw'>"
                f"{esc(r['hyp_raw'])}</span></div></div>"
            )
        for f in failed.get(m, []):
            out.append(f"<div class='raw'><span class='badge bad'>failed</span> {esc(f['utt_id'])}: {esc(f['error'])}</div>")
        out.append("</details>")
    return "".join(out)


def render_html(
    source: RunResult | Mapping[str, Any], table: pd.DataFrame | None, worst_n: int = WORST_N, scored: pd.DataFrame | None = None
) -> str:
    """The whole page as one string; ``scored`` (the summary's own scoring pass) saves scoring the rows again."""
    from audits.result import RunResult

    run = RunResult.of_summary(source)
    summary = run.plain_summary
    data = build_report_data(run, table, worst_n, scored)
    ms = model_names(summary)
    colors = color_map(ms)
    fams = families(summary)
    cohort = cohort_scores(summary)
    failed = failed_examples(table) if table is not None else {}
    sections = [
        (
            "summary",
            "Summary",
            "<ul class='findings' id='findings'>" + "".join(f"<li>{esc(f)}</li>" for f in data["findings"]) + "</ul>",
            "",
        ),
        ("run-facts", "Run facts", render_facts(summary, data), ""),
        (
            "overall",
            "Overall WER and CER",
            render_overall(summary, colors),
            "Corpus-level rates (total edits over total reference words) with speaker-block bootstrap 95% intervals.",
        ),
        ("speed", "WER against speed (RTFx)", render_speed(summary, colors), ""),
        *hosted_usage_sections(summary),
        ("heatmap", "Heat map: models × slices (WER %)", render_heatmap(summary, fams), ""),
        (
            "slices",
            "WER per slice family",
            render_slices(summary, fams, colors),
            "Each panel is one slice value; dots are corpus WER, bars the 95% interval. Intervals that overlap do not support calling one "
            "model better on that slice.",
        ),
        ("gaps", "Fairness gaps", render_gaps(summary, colors), ""),
        *robustness_sections(summary),
        ("cohort", f"Cohort scores ({COHORT_LABEL})", render_cohort(cohort), ""),
    ]
    for sec in ordered():  # every registered section renders itself, or returns None to stay out
        part = sec.html(sec.result_in(run), run, data, colors)
        if part is not None:
            sections.append((sec.key, *part))
    sections.append(("worst", "Worst utterances per model", render_worst(data, summary, failed), ""))
    nav = "".join(f"<a href='#{sid}'>{esc(title.split(' (')[0])}</a>" for sid, title, _, _ in sections)
    ds = data["dataset"]
    norm = summary.get("normalizer") or {}
    head = (
        f"<h1>{esc(data['title'])}</h1><p class='sub'>{esc(ds.get('name'))} · {esc(ds.get('n_utts'))} utterances · {len(ms)} model(s) · "
        f"normalizer {esc(norm.get('name'))} {esc(norm.get('version'))} · {esc(summary.get('created_at'))}</p>"
    )
    body = "".join(section_html(sid, title, b, note) for sid, title, b, note in sections)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{esc(data['title'])}</title><style>{CSS}</style></head>"
        f"<body data-rendered='no'><nav>{nav}</nav><main>{head}{body}"
        "<footer>Generated by the audit engine from summary.json and utterances.parquet; every number on this page is in the JSON below "
        "(<code>#report-data</code>).</footer></main>"
        f"<script type='application/json' id='report-data'>{json_for_script(data)}</script>"
        f"<script>{JS}</script></body></html>"
    )


def write_html_report(run_dirs: Sequence[Path], out_dir: Path, worst_n: int = WORST_N) -> Path:
    """Merge ``run_dirs`` (one or more runs of one dataset) and write ``out_dir/report.html``."""
    from audits.reports.merge import merge_runs

    summary, table = merge_runs([Path(d) for d in run_dirs])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "report.html"
    atomic_write_text(path, render_html(summary, table, worst_n))
    log.info("wrote %s", path)
    return path
