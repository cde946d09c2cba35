"""A look at a run before it ends: the ASR units finished so far, scored and reported as PARTIAL.

``audit report --partial RUN`` (and ``audit query --partial RUN``) read the finished units of a
run that is still going, or that stopped, and score them as the run would (its recipe, recorded in
``run.json``; its normalizer). A partial is never mistaken for a final result: its summary is
``summary.partial.json`` (never ``summary.json``; it has ``"partial": {...}`` at the top and no seal),
its reports are ``report.partial.md`` and ``report.partial.html``, with PARTIAL in their titles,
and no exports are written. The audit sections (speaker, emotion, probes, ...) run after every
ASR unit is finished, so a partial holds the ASR figures only. Models' figures cover only the
utterances of their finished units, so two models in a partial may not be compared on the same
clips; the report says how many units each has.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pandas as pd

from engine.errors import ConfigError

if TYPE_CHECKING:
    from audits.schema import Summary

#: File names of a partial report (the final ones are summary.json, report.md, report.html).
PARTIAL_SUMMARY, PARTIAL_MD, PARTIAL_HTML = "summary.partial.json", "report.partial.md", "report.partial.html"
PARTIAL_TITLE = "PARTIAL"


def _run_record(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "run.json"
    if not path.is_file():
        raise ConfigError(f"{run_dir} has no run.json: it is not a run directory of this tool, or its run has not started writing yet")
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} cannot be read ({exc}); the run directory was damaged") from None
    if not isinstance(rec, dict):
        raise ConfigError(f"{path} is not a run record (a JSON object)")
    return rec


def _recipe(run_dir: Path, rec: Mapping[str, Any]) -> Any:
    from audits.recipes import load_recipe, parse_recipe

    config = rec.get("recipe_config")
    if isinstance(config, dict):
        return parse_recipe({k: v for k, v in config.items() if k != "source" and v not in ({}, None)}, str(run_dir / "run.json"))
    try:  # a run started before run.json recorded its recipe: the recipe of that name, as configured now
        return load_recipe(str(rec.get("recipe")))
    except Exception as exc:  # noqa: BLE001 - said with what to do
        raise ConfigError(
            f"{run_dir}/run.json does not record the run's recipe, and recipe '{rec.get('recipe')}' cannot be loaded ({exc}); "
            "resume the run once with this version to record it"
        ) from None


def partial_rows(run_dir: Path) -> tuple[pd.DataFrame, dict[str, int]]:
    """Rows of the finished ASR units (each unit's marker agrees with its part) and the unit count per model."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from engine.run.store import RunStore

    store = RunStore(run_dir)
    parts = store.done_parts()
    if not parts:
        raise ConfigError(f"{run_dir}: no finished unit yet; try again once the first (model, shard) unit is written")
    tables = [pq.read_table(p) for p in parts]
    table = pa.concat_tables(tables, promote_options="permissive").to_pandas()
    table = table.drop_duplicates(["model", "utt_id"], keep="last").sort_values(["model", "utt_id"]).reset_index(drop=True)
    units: dict[str, int] = {}
    for t in tables:
        if t.num_rows:
            m = str(t.column("model")[0].as_py())
            units[m] = units.get(m, 0) + 1
    return table, units


def partial_result(run_dir: Path | str) -> Any:
    """The finished units of ``run_dir`` scored as its run would: a ``RunResult`` whose summary has ``partial``."""
    from audits.asr.scoring import ScoringOptions
    from audits.asr.summary import build_summary, json_safe
    from audits.clips import SOURCE, rows_for
    from audits.normalizing import get_normalizer
    from audits.result import RunResult
    from engine.run.runner import hardware_facts
    from engine.run.store import RunStore

    run_dir = Path(run_dir)
    rec = _run_record(run_dir)
    recipe = _recipe(run_dir, rec)
    table, units = partial_rows(run_dir)
    facts = {m: f for m, f in RunStore(run_dir).read_model_facts().items() if m in units}
    for m in units:
        facts.setdefault(m, {"model": m, "status": "loaded"})
    sc = recipe.scoring
    opts = ScoringOptions(n_boot=sc.n_boot, seed=sc.seed, slice_columns=list(sc.slices) if sc.slices else None, gaps=list(sc.gaps))
    n_utts = int(table["utt_id"].nunique())
    dataset = {"name": str(recipe.dataset.path), "n_utts": n_utts, "fingerprint": rec.get("dataset_fingerprint"), "reader": "partial"}
    note = {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "units_done": dict(sorted(units.items())),
        "rows": int(len(table)),
        "note": "PARTIAL: the ASR units finished so far; not every (model, utterance) result is there, and sections are not run",
    }
    summary, scored = build_summary(
        rows_for(SOURCE, table), get_normalizer(recipe.normalizer), recipe.as_dict(), dataset, facts, hardware_facts(), opts
    )
    plain = {"partial": note, **json_safe(dict(summary))}
    return RunResult.of(cast("Summary", plain), table, scored, run_dir)


def _mark_markdown(text: str, note: Mapping[str, Any]) -> str:
    lines = text.splitlines()
    if lines and lines[0].startswith("# "):
        lines[0] = f"# {PARTIAL_TITLE}: {lines[0][2:]}"
    units = ", ".join(f"{m}: {n}" for m, n in note["units_done"].items())
    banner = [
        "",
        f"> **{PARTIAL_TITLE}** ({note['generated_at']}): only the ASR units finished so far ({units} unit(s)); "
        "not every result is there and the audit sections have not run. The final report is report.md.",
    ]
    return "\n".join(lines[:1] + banner + lines[1:]) + "\n"


def _mark_html(page: str, note: Mapping[str, Any]) -> str:
    from html import escape

    page = page.replace("<title>", f"<title>{PARTIAL_TITLE}: ", 1).replace("<h1>", f"<h1>{PARTIAL_TITLE}: ", 1)
    banner = (
        "<p class='partial' style='background:#fde68a;padding:.5em;font-weight:bold'>"
        f"{PARTIAL_TITLE} ({escape(str(note['generated_at']))}): only the ASR units finished so far; "
        "not every result is there and the audit sections have not run.</p>"
    )
    i = page.find("</h1>")
    return page[: i + 5] + banner + page[i + 5 :] if i >= 0 else banner + page


def write_partial_report(run_dir: Path | str, out: Path | None = None, worst: int = 5) -> dict[str, Path]:
    """Write ``summary.partial.json``, ``report.partial.md`` and ``report.partial.html`` (never the final names)."""
    from audits.clips import source_rows
    from audits.reports.html import render_html
    from audits.reports.markdown import render_markdown
    from engine.storage import atomic_write_text

    result = partial_result(run_dir)
    summary = result.plain_summary
    out_dir = Path(out) if out is not None else Path(run_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {"summary_partial": out_dir / PARTIAL_SUMMARY, "report_md": out_dir / PARTIAL_MD, "report_html": out_dir / PARTIAL_HTML}
    atomic_write_text(written["summary_partial"], json.dumps(summary, indent=2))
    atomic_write_text(written["report_md"], _mark_markdown(render_markdown(result), summary["partial"]))
    page = render_html(result, source_rows(result.table), worst, scored=result.scored_frame)
    atomic_write_text(written["report_html"], _mark_html(page, summary["partial"]))
    return written


__all__ = ["PARTIAL_HTML", "PARTIAL_MD", "PARTIAL_SUMMARY", "partial_result", "partial_rows", "write_partial_report"]
