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
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from audits.asr.scoring import score_table
from audits.asr.stats import _block_codes, _draw_blocks
from audits.normalizing import get_normalizer
from engine.errors import ConfigError


def _replicates(numer: np.ndarray, denom: np.ndarray, blocks: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """Bootstrap replicates of sum(numer)/sum(denom), resampling whole blocks (NaN where a draw has no words)."""
    codes = _block_codes(blocks, numer.size)
    n_blocks = int(codes.max()) + 1
    draws = _draw_blocks(np.random.default_rng(seed), n_blocks, n_boot)
    num = np.bincount(codes, weights=numer, minlength=n_blocks)[draws].sum(axis=1)
    den = np.bincount(codes, weights=denom, minlength=n_blocks)[draws].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def _interval(values: np.ndarray, alpha: float) -> list[float | None]:
    v = values[np.isfinite(values)]
    if not v.size:
        return [None, None]
    lo, hi = np.quantile(v, [alpha / 2, 1 - alpha / 2])
    return [float(lo), float(hi)]


def parse_tracks(items: list[str]) -> dict[str, Path]:
    """``NAME=RUN_DIR`` arguments -> {name: run dir}; each run dir must hold a finished run."""
    out: dict[str, Path] = {}
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
        out[name] = run
    if len(out) < 2:
        raise ConfigError("an Average WER needs at least two tracks (NAME=RUN_DIR ...)")
    return out


def track_summary(tracks: Mapping[str, Path], n_boot: int = 1000, seed: int = 0, alpha: float = 0.05) -> dict[str, Any]:
    """Per-track corpus WER with CIs, the Average WER with a CI, a ranking and per-track winners."""
    normalizers = {}
    fingerprints = {}
    for name, run in tracks.items():
        summary = json.loads((run / "summary.json").read_text())
        norm = summary.get("normalizer", {})
        normalizers[name] = (norm.get("name"), norm.get("version"))
        fingerprints[name] = summary.get("dataset", {}).get("fingerprint")
    if len(set(normalizers.values())) != 1:
        raise ConfigError(f"tracks were scored with different normalizers: {normalizers}; re-score them with one")
    norm_name, norm_version = next(iter(normalizers.values()))
    normalizer = get_normalizer(str(norm_name))
    per_model: dict[str, dict[str, Any]] = {}
    reps: dict[str, list[np.ndarray]] = {}
    for ti, (name, run) in enumerate(tracks.items()):
        rows = pd.read_parquet(run / "utterances.parquet")
        frame = score_table(rows, normalizer).frame
        for mi, (model, g) in enumerate(sorted(frame.groupby("model"), key=lambda kv: str(kv[0]))):
            ok = g[g["ok"]]
            words = float(ok["n_words"].sum())
            if words <= 0:
                continue
            blocks = ok["speaker"].where(ok["speaker"].notna(), ok["utt_id"]).astype(str).to_numpy()
            r = _replicates(ok["word_errors"].to_numpy(np.float64), ok["n_words"].to_numpy(np.float64), blocks, n_boot, seed + 1000 * ti + mi)
            entry = per_model.setdefault(str(model), {"tracks": {}})
            entry["tracks"][name] = {
                "wer": float(ok["word_errors"].sum()) / words,
                "ci95": _interval(r, alpha),
                "n_utts": int(len(g)),
                "n_scored": int(len(ok)),
            }
            reps.setdefault(str(model), []).append(r)
    for model, entry in per_model.items():
        wers = [t["wer"] for t in entry["tracks"].values()]
        entry["n_tracks"] = len(wers)
        entry["average_wer"] = float(np.mean(wers))
        entry["average_ci95"] = _interval(np.mean(np.vstack(reps[model]), axis=0), alpha)
    complete = [m for m, e in per_model.items() if e["n_tracks"] == len(tracks)]
    ranking = sorted(complete, key=lambda m: (per_model[m]["average_wer"], m))
    winners = {}
    for name in tracks:
        have = [(e["tracks"][name]["wer"], m) for m, e in per_model.items() if name in e["tracks"]]
        winners[name] = min(have)[1] if have else None
    return {
        "definition": "Average WER = unweighted mean of per-track corpus WERs; CI: per-track speaker-block bootstrap, averaged per replicate",
        "tracks": {n: {"run": str(p), "dataset_fingerprint": fingerprints[n]} for n, p in tracks.items()},
        "normalizer": {"name": norm_name, "version": norm_version},
        "bootstrap": {"n_boot": n_boot, "seed": seed, "alpha": alpha},
        "models": per_model,
        "ranking": ranking,
        "incomplete": sorted(set(per_model) - set(complete)),
        "winners": winners,
    }


def tracks_markdown(summary: Mapping[str, Any]) -> str:
    """The tracks side by side: one row per model (ranked), one column per track, then the average."""
    names = list(summary["tracks"])

    def pct(x: float | None) -> str:
        return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.2f}"

    def cell(t: Mapping[str, Any] | None) -> str:
        if not t:
            return "–"
        lo, hi = t["ci95"]
        return f"{pct(t['wer'])} [{pct(lo)}, {pct(hi)}]"

    lines = [
        "# Tracks",
        "",
        f"Average WER: the unweighted mean of the per-track corpus WERs (normalizer {summary['normalizer']['name']}). "
        "WER % with 95% intervals; runs of different datasets are combined here on purpose, one column per track.",
        "",
        "| rank | model | " + " | ".join(names) + " | Average WER |",
        "| --- | --- | " + " | ".join("---" for _ in names) + " | --- |",
    ]
    models = summary["models"]
    for i, m in enumerate([*summary["ranking"], *summary["incomplete"]]):
        e = models[m]
        rank = str(i + 1) if m in summary["ranking"] else "–"
        avg = cell({"wer": e["average_wer"], "ci95": e["average_ci95"]})
        if m in summary["incomplete"]:
            avg += f" ({e['n_tracks']} of {len(names)} tracks)"
        lines.append(f"| {rank} | {m} | " + " | ".join(cell(e["tracks"].get(n)) for n in names) + f" | {avg} |")
    lines += ["", "Best per track: " + ", ".join(f"{n}: {w}" for n, w in summary["winners"].items()), ""]
    return "\n".join(lines)


def tracks_html(summary: Mapping[str, Any]) -> str:
    """``tracks.md``'s table as a self-contained HTML page (every text escaped)."""
    import html

    rows = [ln for ln in tracks_markdown(summary).splitlines() if ln.startswith("| ") and not ln.startswith("| ---")]
    cells = [[html.escape(c.strip()) for c in ln.strip("|").split("|")] for ln in rows]
    head = "".join(f"<th>{c}</th>" for c in cells[0])
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in cells[1:])
    winners = ", ".join(f"{html.escape(n)}: {html.escape(str(w))}" for n, w in summary["winners"].items())
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Tracks</title><style>"
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
        "td:nth-child(2),th:nth-child(2){text-align:left}</style></head><body><h1>Tracks</h1>"
        "<p>Average WER: the unweighted mean of the per-track corpus WERs (normalizer "
        f"{html.escape(str(summary['normalizer']['name']))}); WER % with 95% intervals. Runs of different datasets, combined on purpose.</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table><p>Best per track: {winners}</p></body></html>\n"
    )


def write_tracks(tracks: Mapping[str, Path], out: Path, n_boot: int = 1000, seed: int = 0) -> Path:
    """Write ``tracks.json`` (figures and provenance, no per-utterance rows), ``tracks.md`` and
    ``tracks.html``; returns the JSON path."""
    from engine.store import atomic_write_text

    summary = track_summary(tracks, n_boot, seed)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "tracks.json"
    atomic_write_text(path, json.dumps(summary, indent=2))
    atomic_write_text(out / "tracks.md", tracks_markdown(summary))
    atomic_write_text(out / "tracks.html", tracks_html(summary))
    return path
