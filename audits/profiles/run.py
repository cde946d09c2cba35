"""Run the ``profiles`` section: apply the condition maps to the run's scored rows, then every figure.

The section reads the run's ASR rows (``utterances.parquet``), normalizes and scores them with
the run's normalizer (the same scoring as the run's summary), adds the map outputs as label
columns, and computes: the robustness profile, the study's gap table with paired gap tests,
rank stability, ladders and the WER / speed / cost trade-off.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from audits.asr.scoring import score_table
from audits.normalizing import get_normalizer
from audits.profiles.config import ProfilesConfig
from audits.profiles.ladder import ladders
from audits.profiles.stats import conditions_present, gap_table, paired_gap_tests, profiles, rank_stability
from audits.sections import SectionContext
from engine.data import ModelSpec
from engine.errors import ConfigError

log = logging.getLogger(__name__)


def apply_maps(frame: pd.DataFrame, config: ProfilesConfig) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The frame with every map's output columns added, and what each map matched and did not.

    A value that matches nothing gets no output (so it is in no condition) and is listed under
    ``unmapped`` with its number of clips; nothing is dropped silently.
    """
    df = frame.copy()
    report: list[dict[str, Any]] = []
    for use in config.maps:
        cmap = use.map
        entry: dict[str, Any] = {
            "map": cmap.name,
            "file": cmap.path,
            "column": use.column,
            "outputs": list(cmap.outputs),
            "sources": dict(cmap.sources),
            "mapped": {},
            "unmapped": {},
        }
        clash = [o for o in cmap.outputs if o in df.columns]
        if clash:
            raise ConfigError(
                f"profiles: map '{cmap.name}' would overwrite the dataset's label column(s) {', '.join(clash)}; rename them "
                f"in the dataset or use another map file"
            )
        if use.column not in df.columns:
            entry["column_missing"] = True
            log.warning("profiles: the dataset has no label column '%s' for map '%s'", use.column, cmap.name)
            for o in cmap.outputs:
                df[o] = pd.Series(pd.NA, index=df.index, dtype="string")
            report.append(entry)
            continue
        clips = df.drop_duplicates("utt_id")
        n_clips = clips[use.column].astype("string").value_counts(dropna=True)
        assigned: dict[str, dict[str, str]] = {}
        for value in sorted(n_clips.index):
            found = cmap.lookup(value)
            if found is None:
                entry["unmapped"][str(value)] = int(n_clips[value])
                continue
            a, how = found
            assigned[str(value)] = dict(a.outputs)
            entry["mapped"][str(value)] = {
                **a.outputs,
                "entry": a.entry,
                "source": a.source,
                "match": how,
                "clips": int(n_clips[value]),
                **({"note": a.note} if a.note else {}),
            }
        col = df[use.column].astype("string")
        for o in cmap.outputs:
            df[o] = col.map(lambda v, o=o: assigned.get(str(v), {}).get(o) if v is not pd.NA else None).astype("string")
        if entry["unmapped"]:
            log.warning(
                "profiles: map '%s' on column '%s' left %d value(s) unmapped: %s",
                cmap.name,
                use.column,
                len(entry["unmapped"]),
                ", ".join(sorted(entry["unmapped"])[:10]),
            )
        report.append(entry)
    return df, report


def _rtfx(g: pd.DataFrame) -> float | None:
    ok = g[g["ok"]]
    timed = ok[ok["infer_s"].notna()] if "infer_s" in ok else ok.iloc[0:0]
    infer = float(timed["infer_s"].sum()) if len(timed) else 0.0
    audio = float(timed["duration_s"].fillna(0).sum()) if len(timed) else 0.0
    return audio / infer if infer > 0 and audio > 0 else None


def trade_offs(frame: pd.DataFrame, prof: Mapping[str, Any], specs: Sequence[ModelSpec], gpu_hour_usd: float | None) -> dict[str, Any]:
    """WER against RTFx and against cost per audio hour, with the Pareto fronts of each.

    Cost per audio hour: a hosted model's registry price (``price_per_audio_hour_usd``); a local
    model's ``gpu_hour_usd / RTFx`` (device hours per audio hour times the hourly price) when the
    recipe sets ``gpu_hour_usd``; else unknown (null), never 0.
    """
    from audits.reports.cost import cost_per_audio_hour, trade_off_fronts

    by_name = {s.name: s for s in specs}
    models: dict[str, Any] = {}
    for m, g in frame.groupby("model"):
        name = str(m)
        spec = by_name.get(name)
        rtfx = _rtfx(g)
        opts = dict(spec.options) if spec is not None else {}
        cost, basis = cost_per_audio_hour(
            "price_per_audio_hour_usd" in opts,
            opts.get("price_per_audio_hour_usd"),
            rtfx,
            gpu_hour_usd,
            "set profiles.gpu_hour_usd for local models",
        )
        overall = (prof.get(name) or {}).get("overall") or {}
        models[name] = {
            "wer": overall.get("wer"),
            "ci95": overall.get("ci95"),
            "rtfx": rtfx,
            "cost_per_audio_hour_usd": cost,
            "cost_basis": basis,
        }
        if overall.get("not_testable"):
            models[name]["not_testable"] = overall["not_testable"]
    speed_front, cost_front = trade_off_fronts(models)
    return {"models": models, "pareto_wer_rtfx": speed_front, "pareto_wer_cost": cost_front, "gpu_hour_usd": gpu_hour_usd}


def normalizer_name(configured: str | None, ctx: SectionContext) -> str:
    """The section's normalizer: the configured one, else the run's (run.json), else whisper-english."""
    if configured:
        return configured
    run_json = ctx.out_dir / "run.json"
    if run_json.is_file():
        name = json.loads(run_json.read_text()).get("normalizer")
        if name:
            return str(name)
    return "whisper-english"


def compute_profiles(frame: pd.DataFrame, config: ProfilesConfig, specs: Sequence[ModelSpec] = ()) -> dict[str, Any]:
    """Every figure of the section from scored rows (``score_table``'s frame).

    The section reads source clips (``AuditSection.reads``): the pipeline hands it the rows of the
    dataset's own clips only (``audits.clips``), so a condition's WER is never mixed with derived
    copies of its clips.
    """
    df, map_report = apply_maps(frame, config)
    map_columns = [o for use in config.maps for o in use.map.outputs]
    columns = list(dict.fromkeys(map_columns + [c for c in config.columns if c in df.columns]))
    missing_cols = [c for c in config.columns if c not in df.columns]
    conditions = conditions_present(df, columns)
    present = {c for c, _ in conditions}
    values = {(c, v) for c, v in conditions}
    gaps = [g for g in config.gaps if (g[0], g[1]) in values and (g[0], g[2]) in values]
    skipped = [
        {"gap": f"{c}: {a} − {b}", "why": "no such label column" if c not in present else "a side has no clips with speech"}
        for c, a, b in config.gaps
        if (c, a, b) not in gaps
    ]
    prof = profiles(df, conditions, config.n_boot, config.seed, config.alpha)
    out: dict[str, Any] = {
        "condition_maps": map_report,
        "columns": columns,
        "missing_columns": missing_cols,
        "conditions": [f"{c}={v}" for c, v in conditions],
        "n_boot": config.n_boot,
        "seed": config.seed,
        "alpha": config.alpha,
        "profiles": prof,
        "gap_table": {
            "gaps": [f"{c}: {a} − {b}" for c, a, b in gaps],
            "skipped": skipped,
            "models": gap_table(df, gaps, config.n_boot, config.seed, config.alpha),
            "paired": paired_gap_tests(df, gaps, config.n_boot, config.seed, config.alpha),
        },
        "rank_stability": rank_stability(df, conditions, config.n_boot, config.seed, config.alpha),
        "ladders": ladders(df, config.ladders, config.breaking_margin, config.n_boot, config.seed, config.alpha),
        "trade_offs": trade_offs(frame, prof, specs, config.gpu_hour_usd),
        "rows": "source clips",
    }
    return out


def run_profiles(config: ProfilesConfig, ctx: SectionContext) -> dict[str, Any]:
    """The section's ``run``: score the run's rows with its normalizer and compute the profile."""
    name = normalizer_name(config.normalizer, ctx)
    scored = score_table(ctx.load_rows(), get_normalizer(name))
    out = compute_profiles(scored.frame, config, ctx.asr_models)
    out["normalizer"] = name
    return out
