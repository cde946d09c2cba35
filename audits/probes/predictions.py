"""Prediction files (Open ASR Leaderboard JSONL, one per model) as inputs to the text-only probes, and the bad-reference
probe run straight from such a folder."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Literal, Mapping, Sequence

from audits.probes.bad_reference import BadReferenceReport, BadRefSettings, run_bad_reference_probe
from engine.errors import ConfigError, ManifestError

log = logging.getLogger(__name__)


def load_prediction_file(path: str | Path) -> dict[str, tuple[str, str]]:
    """One Open ASR Leaderboard JSONL manifest: clip id -> (raw reference, raw prediction).

    Rows whose ``pred_text`` is null are skipped (the model did not run on that clip).
    """
    path = Path(path)
    out: dict[str, tuple[str, str]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ManifestError(path, f"cannot read: {exc.strerror or exc}") from None
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ManifestError(path, f"not valid JSON ({exc.msg})", line=lineno) from None
        if not isinstance(row, dict):
            raise ManifestError(path, "each line must be a JSON object", line=lineno)
        for key in ("audio_filepath", "text"):
            if not isinstance(row.get(key), str):
                raise ManifestError(path, "missing or not a string", line=lineno, field=key)
        hyp = row.get("pred_text")
        if hyp is None:
            log.debug("%s line %d: pred_text is null, clip skipped", path, lineno)
            continue
        if not isinstance(hyp, str):
            raise ManifestError(path, "must be a string", line=lineno, field="pred_text")
        clip = row["audio_filepath"]
        if clip in out:
            raise ManifestError(path, f"clip '{clip}' appears twice", line=lineno, field="audio_filepath")
        out[clip] = (row["text"], hyp)
    return out


def load_prediction_dir(directory: str | Path, pattern: str = "*.jsonl") -> dict[str, dict[str, tuple[str, str]]]:
    """Every prediction file in a folder: model name (file stem) -> clip id -> (ref_raw, hyp_raw)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ConfigError(f"prediction folder '{directory}' does not exist or is not a folder")
    files = sorted(directory.glob(pattern))
    if not files:
        raise ConfigError(f"no files matching '{pattern}' in '{directory}'; name one JSONL file per model")
    return {f.stem: load_prediction_file(f) for f in files}


def split_predictions(
    predictions: Mapping[str, Mapping[str, tuple[str, str]]],
) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """Split loaded predictions into (references, model -> clip -> hypothesis).

    The files must agree on each clip's reference; a disagreement means they come from
    different dataset versions, which would make the models' scores incomparable.
    """
    refs: dict[str, str] = {}
    conflicts: list[str] = []
    hyps: dict[str, dict[str, str]] = {}
    for model, rows in predictions.items():
        hyps[model] = {}
        for clip, (ref, hyp) in rows.items():
            prev = refs.setdefault(clip, ref)
            if prev != ref:
                conflicts.append(f"{clip} ({model})")
            hyps[model][clip] = hyp
    if conflicts:
        raise ConfigError(
            f"{len(conflicts)} clip(s) have different references in different prediction files "
            f"({', '.join(conflicts[:5])}); use predictions made on the same dataset version"
        )
    return refs, hyps


def run_from_prediction_dir(
    directory: str | Path,
    panel: Sequence[str],
    models: Sequence[str] | None = None,
    settings: BadRefSettings | None = None,
    corrections: Mapping[str, str] | None = None,
    corrections_mode: Literal["replace", "confirm"] = "replace",
) -> BadReferenceReport:
    """The probe on a folder of Open ASR Leaderboard prediction files (one per model, named by stem).

    ``models`` defaults to every file in the folder, panel members included.
    """
    refs, hyps = split_predictions(load_prediction_dir(directory))
    unknown = [m for m in [*panel, *(models or [])] if m not in hyps]
    if unknown:
        raise ConfigError(f"model(s) {', '.join(unknown)} have no prediction file in '{directory}'; available: {', '.join(hyps)}")
    chosen = list(models) if models is not None else list(hyps)
    return run_bad_reference_probe(
        refs,
        {m: hyps[m] for m in panel},
        {m: hyps[m] for m in chosen},
        settings,
        corrections=corrections,
        corrections_mode=corrections_mode,
    )


def orthography_from_prediction_dir(
    directory: str | Path,
    models: Sequence[str] | None = None,
    families: Sequence[str] | None = None,
    pool: bool = False,
    min_clips_per_arm: int = 5,
) -> dict[str, object]:
    """The orthographic switch from a folder of prediction files alone (no audio, no run).

    The same scoring as the in-run probe (``switch_entries``), so the two agree on the same
    hypotheses. ``families``: family names (default: all); ``pool``: pool arms across families.
    """
    from audits.probes.orthography import select_families, switch_entries

    if min_clips_per_arm < 1:
        raise ConfigError(f"--min-per-arm must be at least 1, got {min_clips_per_arm}")
    all_refs, hyps = split_predictions(load_prediction_dir(directory))
    refs = {k: v for k, v in all_refs.items() if v}  # an empty reference writes no spelling (as in the in-run probe)
    unknown = [m for m in (models or []) if m not in hyps]
    if unknown:
        raise ConfigError(f"model(s) {', '.join(unknown)} have no prediction file in '{directory}'; available: {', '.join(hyps)}")
    chosen = list(models) if models is not None else list(hyps)
    selected: dict[str, Mapping[str, str | None]] = {m: dict(hyps[m]) for m in chosen}
    return switch_entries(refs, selected, select_families(families), min_clips_per_arm, pool)


def format_orthography_table(result: Mapping[str, object]) -> str:
    """A plain-text table: model, switch, Wilson 95% interval, limiting family and arm, counts, status."""
    lines = [f"{'model':<28} {'switch':>7} {'95% CI':>17}  {'limiting (family: arm)':<36} {'hits/n':>8}  status"]
    for model, r in sorted(result.items()):
        if model == "settings" or not isinstance(r, Mapping):
            continue
        sw = r.get("switch")
        ci = r.get("ci95")
        ci_text = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if isinstance(ci, (list, tuple)) and ci else "—"
        where = f"{r.get('limiting_family') or 'pooled'}: {r.get('limiting_arm') or '—'}"
        counts = f"{r.get('k')}/{r.get('n')}" if r.get("n") is not None else "—"
        lines.append(f"{model:<28} {'—' if sw is None else f'{sw:.3f}':>7} {ci_text:>17}  {where:<36} {counts:>8}  {r.get('status')}")
    return "\n".join(lines)
