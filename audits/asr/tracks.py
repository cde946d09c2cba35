"""Tracks: one run per dataset (accent, emotion, noise/music, conversation...), side by side.

The RW-Voice-EQ Bench headline is the **Average WER: the unweighted mean of the per-track corpus
WERs**, reported beside each track. Each track's corpus WER is sum(word errors) / sum(reference
words) over that track's scored utterances, as in every summary. The Average WER's 95% interval
comes from bootstrapping each track independently (speaker blocks within the track, as for a
single run's interval, each track with its own draws) and averaging the tracks' WERs replicate by
replicate; the percentile interval of those averages is reported. Tracks are different datasets,
so nothing is resampled across them.

Every track must have been scored with the same normalizer; a model is ranked only over the tracks
it has rows in (``n_tracks`` says how many); ties rank in name order.

Trade-offs: per track and on the Average WER, WER against RTFx and against cost per audio hour,
with the Pareto fronts marked (``trade_offs``). A track's RTFx is the run's own (timed audio
seconds / inference seconds); the Average's pools the tracks (all timed audio over all inference
time). Cost is priced as in the profiles section (audits.reports.cost): hosted models at their
registry price, local ones at ``gpu_hour_usd / RTFx``, else unknown.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from audits.asr.scoring import block_unit, score_table
from audits.asr.stats import BlockGroup, NotTestable, _block_codes, _draw_blocks, check_testable, estimate_fields, percentile_interval
from audits.clips import source_rows
from audits.normalizing import get_normalizer
from audits.run_dir import read_run, rows_fingerprint
from engine.errors import ConfigError
from engine.options import Field

GPU_HOUR_FIELD = Field(
    float,
    None,
    "USD per hour of the machine the local models ran on (cost per audio hour = gpu_hour_usd / RTFx)",
    ge=0,
    le=1_000_000,
    nullable=True,
)
"""``--gpu-hour-usd``: typed and bounded like a recipe key (no NaN, no negative price)."""


def _replicates(numer: np.ndarray, denom: np.ndarray, blocks: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """Bootstrap replicates of sum(numer)/sum(denom), resampling whole blocks (NaN where a draw has no words)."""
    codes = _block_codes(blocks, numer.size)
    n_blocks = int(codes.max()) + 1
    draws = _draw_blocks(np.random.default_rng(seed), n_blocks, n_boot)
    num = np.bincount(codes, weights=numer, minlength=n_blocks)[draws].sum(axis=1)
    den = np.bincount(codes, weights=denom, minlength=n_blocks)[draws].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def _interval(values: np.ndarray, alpha: float, verdict: NotTestable | None, statistic: str = "WER") -> dict[str, Any]:
    """``{"ci95": [lo, hi]}``, or ``{"ci95": None, "not_testable": why}`` (the testability rule, audits.asr.stats)."""
    return estimate_fields(verdict if verdict is not None else percentile_interval(values, alpha, statistic))


TRACK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
"""A track name a sweep may use as a folder name: letters, digits, '-' and '_' (no dots, no slashes)."""
RESERVED_NAMES = frozenset({"tracks", "markers", "parts", "exports"})
"""Names of what a tracks folder or run directory holds beside the tracks."""


def check_track_name(name: str, where: str) -> str:
    """A sweep's track name becomes a folder beside tracks.json: refuse what cannot be one
    (``tracks.json=...``, ``a/b``, ``..``) before anything runs."""
    if not TRACK_NAME.match(name) or name.lower() in RESERVED_NAMES:
        raise ConfigError(
            f"{where}: track name {name!r} cannot be used as a folder name beside tracks.json; "
            "use 1-64 letters, digits, '-' or '_' (not tracks, markers, parts or exports), e.g. accent=data/accent/manifest.jsonl"
        )
    return name


def parse_tracks(items: list[str]) -> dict[str, Path]:
    """``NAME=RUN_DIR`` arguments -> {name: run dir}; each run dir must hold a finished run, and
    no run may be given twice (under two names, or two paths to one folder)."""
    out: dict[str, Path] = {}
    seen: dict[Path, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise ConfigError(f"track '{item}': write NAME=RUN_DIR (e.g. accent=runs/accent)")
        name = name.strip()
        if name in out:
            raise ConfigError(f"track '{name}' is named twice")
        run = Path(path.strip())
        for needed in ("utterances.parquet", "summary.json"):
            if not (run / needed).is_file():
                raise ConfigError(f"track '{name}': {run / needed} does not exist; run the sweep for this track first")
        real = run.resolve()
        if real in seen:
            raise ConfigError(f"tracks '{seen[real]}' and '{name}' are the same run ({run}); each track is one run of its own dataset")
        seen[real] = name
        out[name] = run
    if len(out) < 2:
        raise ConfigError("an Average WER needs at least two tracks (NAME=RUN_DIR ...)")
    return out


def _check_figures(name: str, run: Path, model: str, summary: Mapping[str, Any], n_utts: int, errors: int, words: int) -> None:
    """The rows must give the run's own figures (runs scored before fingerprints were recorded)."""
    m = (summary.get("models") or {}).get(model)
    if m is None:
        raise ConfigError(
            f"track '{name}': {run / 'utterances.parquet'} holds model '{model}', which summary.json does not; the rows were "
            f"changed after scoring"
        )
    if (m.get("n_utts"), m.get("word_errors"), m.get("n_words")) != (n_utts, errors, words):
        raise ConfigError(
            f"track '{name}': model '{model}' in {run / 'utterances.parquet'} gives {n_utts} rows, {errors} word errors over {words} words,"
            f" "
            f"but summary.json says {m.get('n_utts')}, {m.get('word_errors')} over {m.get('n_words')}: the rows were changed after scoring "
            "or the run is incomplete; re-run the recipe into that folder"
        )


def _speed(g: pd.DataFrame) -> tuple[float, float]:
    """(timed audio seconds, inference seconds) of a model's scored rows, as the run's summary counts them."""
    ok = g[g["ok"]]
    timed = ok[ok["infer_s"].notna()] if "infer_s" in ok else ok.iloc[0:0]
    return float(timed["duration_s"].fillna(0).sum()), float(timed["infer_s"].sum())


def _hosted_price(summary: Mapping[str, Any], model: str) -> tuple[bool, Any]:
    """(hosted?, registry price per audio hour) as the run recorded it (hosted usage in backend_info)."""
    info = ((summary.get("models") or {}).get(model) or {}).get("backend_info") or {}
    usage = info.get("usage") if isinstance(info, Mapping) else None
    return isinstance(usage, Mapping), (usage or {}).get("price_per_audio_hour_usd")


def _trade_view(points: Mapping[str, Mapping[str, Any]], gpu_hour_usd: float | None) -> dict[str, Any]:
    """One view (a track, or the Average): per model WER, interval, RTFx, cost per audio hour, and the fronts."""
    from audits.reports.cost import cost_per_audio_hour, trade_off_fronts

    models: dict[str, Any] = {}
    for m, p in points.items():
        rtfx = p["audio_s"] / p["infer_s"] if p["infer_s"] > 0 and p["audio_s"] > 0 else None
        cost, basis = cost_per_audio_hour(p["hosted"], p["price"], rtfx, gpu_hour_usd, "give --gpu-hour-usd for local models")
        models[m] = {"wer": p["wer"], "ci95": p["ci95"], "rtfx": rtfx, "cost_per_audio_hour_usd": cost, "cost_basis": basis}
    speed, cost_front = trade_off_fronts(models)
    for m, v in models.items():
        v["on_front_rtfx"] = m in speed
        v["on_front_cost"] = m in cost_front
    return {"models": models, "pareto_wer_rtfx": speed, "pareto_wer_cost": cost_front}


def _trade_offs(
    per_model: Mapping[str, Any], speed: Mapping[str, Mapping[str, dict[str, Any]]], complete: list[str], gpu_hour_usd: float | None
) -> dict[str, Any]:
    """The trade-off views: one per track, and the Average WER's over the models with every track."""
    views: dict[str, Any] = {}
    names = list(dict.fromkeys(t for by_track in speed.values() for t in by_track))
    for name in names:
        pts = {
            m: {**speed[m][name], "wer": per_model[m]["tracks"][name]["wer"], "ci95": per_model[m]["tracks"][name]["ci95"]}
            for m in sorted(speed)
            if name in speed[m]
        }
        views[name] = _trade_view(pts, gpu_hour_usd)
    avg: dict[str, dict[str, Any]] = {}
    for m in sorted(complete):
        parts = list(speed[m].values())
        prices = {p["price"] for p in parts}
        avg[m] = {
            "audio_s": sum(p["audio_s"] for p in parts),
            "infer_s": sum(p["infer_s"] for p in parts),
            "hosted": any(p["hosted"] for p in parts),
            "price": prices.pop() if len(prices) == 1 else None,
            "wer": per_model[m]["average_wer"],
            "ci95": per_model[m]["average_ci95"],
        }
    return {
        "definition": "per track: the run's RTFx (timed audio s / inference s); Average: pooled over the tracks; cost per audio hour: "
        "hosted = registry list price, local = gpu_hour_usd / RTFx, else unknown (null); Pareto fronts on point estimates "
        "(no model both lower WER and faster / cheaper); the Average's over models with every track",
        "gpu_hour_usd": gpu_hour_usd,
        "tracks": views,
        "average": _trade_view(avg, gpu_hour_usd),
    }


def track_summary(
    tracks: Mapping[str, Path], n_boot: int = 1000, seed: int = 0, alpha: float = 0.05, gpu_hour_usd: float | None = None
) -> dict[str, Any]:
    """Per-track corpus WER with CIs, the Average WER with a CI, a ranking and per-track winners.

    Each track's WER is computed from that run's scored rows exactly as the run computed its own
    (failed rows and speech-free clips left out), and must equal the run's summary; a run whose
    rows changed after scoring, or two tracks holding the same rows, are refused.
    """
    from audits.recipes import SCORING_FIELDS

    n_boot = SCORING_FIELDS["n_boot"].check(n_boot, "--n-boot")
    seed = SCORING_FIELDS["seed"].check(seed, "--seed")
    gpu_hour_usd = GPU_HOUR_FIELD.check(gpu_hour_usd, "--gpu-hour-usd")
    normalizers = {}
    fingerprints = {}
    summaries: dict[str, dict[str, Any]] = {}
    tables: dict[str, Any] = {}
    by_rows: dict[str, str] = {}
    for name, run in tracks.items():
        try:  # the one trusted reader: both digests must hold (audits.run_dir)
            loaded = read_run(run, strict=True)
        except ConfigError as exc:
            raise ConfigError(f"track '{name}': {exc}") from None
        summary, tables[name] = loaded.summary, loaded.table
        digest = rows_fingerprint(run / "utterances.parquet")
        if digest in by_rows:
            raise ConfigError(
                f"tracks '{by_rows[digest]}' and '{name}' hold the same rows (a copy of one run); each track is one run of its own dataset"
            )
        by_rows[digest] = name
        summaries[name] = summary
        norm = summary.get("normalizer", {})
        normalizers[name] = (norm.get("name"), norm.get("version"))
        fingerprints[name] = summary.get("dataset", {}).get("fingerprint")
    if len(set(normalizers.values())) != 1:
        raise ConfigError(f"tracks were scored with different normalizers: {normalizers}; re-score them with one")
    norm_name, norm_version = next(iter(normalizers.values()))
    normalizer = get_normalizer(str(norm_name))
    per_model: dict[str, dict[str, Any]] = {}
    reps: dict[str, list[np.ndarray]] = {}
    speed: dict[str, dict[str, dict[str, Any]]] = {}
    for ti, (name, run) in enumerate(tracks.items()):
        rows = source_rows(tables[name])  # the figures' clips, as the run scored them (audits.clips)
        frame = score_table(rows, normalizer).frame
        present = set(frame["model"].astype(str))
        lost = sorted(m for m, v in (summaries[name].get("models") or {}).items() if (v or {}).get("n_utts") and m not in present)
        if lost:
            raise ConfigError(
                f"track '{name}': summary.json scores {', '.join(lost)} but {run / 'utterances.parquet'} holds no row of it; "
                "the rows were changed after scoring or the run is incomplete; re-run the recipe into that folder"
            )
        for mi, (model, g) in enumerate(sorted(frame.groupby("model"), key=lambda kv: str(kv[0]))):
            ok = g[g["ok"] & ~g["speech_free"]]  # the run's own WER rows: speech-free clips are scored apart
            words = float(ok["n_words"].sum())
            errors = int(ok["word_errors"].sum())
            _check_figures(name, run, str(model), summaries[name], int(len(g)), errors, int(words))
            if words <= 0:
                continue
            blocks = ok["speaker"].where(ok["speaker"].notna(), ok["utt_id"]).astype(str).to_numpy()
            r = _replicates(
                ok["word_errors"].to_numpy(np.float64), ok["n_words"].to_numpy(np.float64), blocks, n_boot, seed + 1000 * ti + mi
            )
            verdict = check_testable(
                [
                    BlockGroup.of(
                        f"track '{name}'",
                        ok["word_errors"].to_numpy(np.float64),
                        ok["n_words"].to_numpy(np.float64),
                        blocks,
                        block_unit(ok),
                    )
                ]
            )
            entry = per_model.setdefault(str(model), {"tracks": {}})
            entry["tracks"][name] = {
                "wer": errors / words,
                **_interval(r, alpha, verdict),
                "n_utts": int(len(g)),
                "n_scored": int(len(ok)),
                "n_speech_free": int(g["speech_free"].sum()),
            }
            reps.setdefault(str(model), []).append(r)
            audio_s, infer_s = _speed(g)
            hosted, price = _hosted_price(summaries[name], str(model))
            speed.setdefault(str(model), {})[name] = {"audio_s": audio_s, "infer_s": infer_s, "hosted": hosted, "price": price}
    for model, entry in per_model.items():
        wers = [t["wer"] for t in entry["tracks"].values()]
        entry["n_tracks"] = len(wers)
        entry["average_wer"] = float(np.mean(wers))
        untestable = [t["not_testable"] for t in entry["tracks"].values() if t.get("not_testable")]
        # a track whose interval the data cannot support cannot lend its (zero) spread to the average's
        avg = _interval(np.mean(np.vstack(reps[model]), axis=0), alpha, NotTestable(untestable[0]) if untestable else None, "Average WER")
        entry["average_ci95"] = avg["ci95"]
        if "not_testable" in avg:
            entry["average_not_testable"] = avg["not_testable"]
    complete = [m for m, e in per_model.items() if e["n_tracks"] == len(tracks)]
    ranking = sorted(complete, key=lambda m: (per_model[m]["average_wer"], m))
    winners = {}
    for name in tracks:
        have = [(e["tracks"][name]["wer"], m) for m, e in per_model.items() if name in e["tracks"]]
        winners[name] = min(have)[1] if have else None
    return {
        "definition": "Average WER = unweighted mean of per-track corpus WERs (each the run's own WER: failed rows and speech-free clips "
        "left out); "
        "CI: per-track speaker-block bootstrap, averaged per replicate",
        "tracks": {
            n: {"run": str(p), "dataset_fingerprint": fingerprints[n], "rows_sha256": d} for (n, p), d in zip(tracks.items(), by_rows)
        },
        "normalizer": {"name": norm_name, "version": norm_version},
        "bootstrap": {"n_boot": n_boot, "seed": seed, "alpha": alpha},
        "models": per_model,
        "ranking": ranking,
        "incomplete": sorted(set(per_model) - set(complete)),
        "winners": winners,
        "trade_offs": _trade_offs(per_model, speed, complete, gpu_hour_usd),
    }


def _table(summary: Mapping[str, Any]) -> tuple[list[str], list[list[str]], str]:
    """The tracks table as plain text cells (header, rows) and the winners line's parts; the
    Markdown and HTML pages escape these cells each for its own format."""
    names = [str(n) for n in summary["tracks"]]

    def pct(x: float | None) -> str:
        return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.2f}"

    def cell(t: Mapping[str, Any] | None) -> str:
        if not t:
            return "–"
        if t.get("not_testable"):
            return f"{pct(t['wer'])} not testable ({t['not_testable']})"
        lo, hi = t.get("ci95") or (None, None)
        return f"{pct(t['wer'])} [{pct(lo)}, {pct(hi)}]"

    header = ["rank", "model", *names, "Average WER"]
    rows = []
    models = summary["models"]
    for i, m in enumerate([*summary["ranking"], *summary["incomplete"]]):
        e = models[m]
        rank = str(i + 1) if m in summary["ranking"] else "–"
        avg = cell({"wer": e["average_wer"], "ci95": e["average_ci95"], "not_testable": e.get("average_not_testable")})
        if m in summary["incomplete"]:
            avg += f" ({e['n_tracks']} of {len(names)} tracks)"
        rows.append([rank, str(m), *(cell(e["tracks"].get(n)) for n in names), avg])
    return header, rows, str(summary["normalizer"]["name"])


TRADE_HEADER = ["model", "WER %", "RTFx", "cost / audio h (USD)", "cost basis", "on front"]


def _trade_tables(summary: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], list[list[str]]]]:
    """The trade-off tables as plain text cells: (title, view, rows), the Average WER's first, then
    one per track; "on front" names the Pareto fronts a model is on (speed, cost)."""
    to = summary.get("trade_offs") or {}
    views = [("Average WER", to.get("average") or {})] + [(f"track {n}", v) for n, v in (to.get("tracks") or {}).items()]
    out = []
    for title, view in views:
        rows = []
        for m, r in (view.get("models") or {}).items():
            front = [k for k, key in (("speed", "on_front_rtfx"), ("cost", "on_front_cost")) if r.get(key)]
            rtfx, cost = r.get("rtfx"), r.get("cost_per_audio_hour_usd")
            rows.append(
                [
                    str(m),
                    "–" if r.get("wer") is None else f"{100 * r['wer']:.2f}",
                    "–" if rtfx is None else f"{rtfx:.1f}",
                    "unknown" if cost is None else f"{cost:.4f}",
                    str(r.get("cost_basis", "")),
                    ", ".join(front) or "–",
                ]
            )
        out.append((title, view, rows))
    return out


def tracks_markdown(summary: Mapping[str, Any]) -> str:
    """The tracks side by side: one row per model (ranked), one column per track, then the average.
    Every cell goes through the reports' Markdown escaping (audits.reports.formatting.md)."""
    from audits.reports.formatting import md

    header, rows, norm = _table(summary)
    lines = [
        "# Tracks",
        "",
        f"Average WER: the unweighted mean of the per-track corpus WERs (normalizer {md(norm)}); each is the run's own WER "
        "(failed rows and speech-free clips left out). "
        "WER % with 95% intervals; runs of different datasets are combined here on purpose, one column per track.",
        "",
        "| " + " | ".join(md(c) for c in header) + " |",
        "| --- | --- | " + " | ".join("---" for _ in header[2:-1]) + " | --- |",
        *("| " + " | ".join(md(c) for c in r) + " |" for r in rows),
        "",
        "Best per track: " + ", ".join(f"{md(n)}: {md(w)}" for n, w in summary["winners"].items()),
        "",
    ]
    tables = _trade_tables(summary)
    if tables:
        gpu = (summary.get("trade_offs") or {}).get("gpu_hour_usd")
        lines += [
            "## Trade-offs: WER, speed, cost",
            "",
            "RTFx = audio seconds per inference second (the Average's pooled over the tracks); cost per audio hour: hosted models "
            "at their registry list price, local models at gpu_hour_usd / RTFx "
            f"({'gpu_hour_usd ' + md(f'{gpu:g}') if gpu is not None else 'no gpu_hour_usd given: unknown'}). "
            "On front: no other model has both a lower WER and a higher RTFx (speed) or a lower cost (cost).",
            "",
        ]
        for title, _, rows in tables:
            lines += [
                f"### {md(title)}",
                "",
                "| " + " | ".join(TRADE_HEADER) + " |",
                "| --- | ---: | ---: | ---: | --- | --- |",
                *("| " + " | ".join(md(c) for c in r) + " |" for r in rows),
                "",
            ]
    return "\n".join(lines)


def tracks_html(summary: Mapping[str, Any]) -> str:
    """The tracks table as a self-contained HTML page, built from the table's cells (never from
    the Markdown text), every text through the reports' HTML escaping."""
    from audits.reports.formatting import esc

    header, rows, norm = _table(summary)
    head = "".join(f"<th>{esc(c)}</th>" for c in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    winners = ", ".join(f"{esc(n)}: {esc(w)}" for n, w in summary["winners"].items())
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Tracks</title><style>"
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;"
        "text-align:right}"
        "td:nth-child(2),th:nth-child(2){text-align:left}table.trade-offs td:nth-child(1),table.trade-offs th:nth-child(1),"
        "table.trade-offs td:nth-child(5){text-align:left}svg{display:block;margin:1em 0}svg .ptlab{font-size:11.5px;fill:#1d2430}"
        "svg .tick{font-size:10.5px;fill:#5b6472}svg .axis{font-size:12px;fill:#333}</style></head><body><h1>Tracks</h1>"
        "<p>Average WER: the unweighted mean of the per-track corpus WERs (normalizer "
        f"{esc(norm)}), each the run's own WER; WER % with 95% intervals. Runs of different datasets, combined on purpose.</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table><p>Best per track: {winners}</p>"
        f"{_trade_html(summary)}</body></html>\n"
    )


def _trade_html(summary: Mapping[str, Any]) -> str:
    """The trade-offs part of tracks.html: per view a WER-against-RTFx and a WER-against-cost scatter
    (fronts joined and ringed) and the table, every text through the HTML escaping."""
    from audits.reports.charts import svg_scatter
    from audits.reports.formatting import color_map, esc

    tables = _trade_tables(summary)
    if not tables:
        return ""
    colors = color_map(sorted(summary["models"]))
    parts = [
        "<h2>Trade-offs: WER, speed, cost</h2><p>RTFx = audio seconds per inference second (the Average's pooled over the "
        "tracks); cost per audio hour: hosted models at their registry list price, local models at gpu_hour_usd / RTFx, else "
        "unknown. On front: no other model has both a lower WER and a higher RTFx (speed) or a lower cost (cost); fronts are "
        "joined by a dashed line and ringed.</p>"
    ]
    for title, view, rows in tables:
        models = view.get("models") or {}
        parts.append(f"<h3>{esc(title)}</h3>")
        speed = [
            (m, r["rtfx"], r["wer"], *(r.get("ci95") or [None, None]), colors.get(m, "#4e79a7"))
            for m, r in models.items()
            if r.get("rtfx") and r.get("wer") is not None
        ]
        if speed:
            parts.append(svg_scatter(speed, f"{title}: WER against RTFx", front=view.get("pareto_wer_rtfx") or []))
        cost = [
            (m, r["cost_per_audio_hour_usd"], r["wer"], *(r.get("ci95") or [None, None]), colors.get(m, "#4e79a7"))
            for m, r in models.items()
            if (r.get("cost_per_audio_hour_usd") or 0) > 0 and r.get("wer") is not None
        ]
        if cost:
            parts.append(
                svg_scatter(
                    cost,
                    f"{title}: WER against cost per audio hour",
                    front=view.get("pareto_wer_cost") or [],
                    x_name="USD per audio hour",
                    x_axis="cost per audio hour (USD, log scale) ← cheaper",
                )
            )
        head = "".join(f"<th>{esc(c)}</th>" for c in TRADE_HEADER)
        body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
        parts.append(f"<table class='trade-offs'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    return "".join(parts)


def write_tracks(tracks: Mapping[str, Path], out: Path, n_boot: int = 1000, seed: int = 0, gpu_hour_usd: float | None = None) -> Path:
    """Write ``tracks.json`` (figures and provenance, no per-utterance rows), ``tracks.md`` and
    ``tracks.html``; returns the JSON path."""
    from engine.storage import atomic_write_text

    summary = track_summary(tracks, n_boot, seed, gpu_hour_usd=gpu_hour_usd)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "tracks.json"
    atomic_write_text(path, json.dumps(summary, indent=2))
    atomic_write_text(out / "tracks.md", tracks_markdown(summary))
    atomic_write_text(out / "tracks.html", tracks_html(summary))
    return path
