"""Audio-LM judges in the synthetic-voice probe: how synthetic does each arm's audio sound?

The probe re-speaks benchmark text with a generic TTS voice. A judge (the ``synthetic_speech``
prompt task) gives each clip a likelihood in [0, 1] that the voice is synthetic: the real
benchmark clips form the ``real`` arm, the generic renditions the ``generic`` arm (more arms,
such as a matched voice, are scored the same way against ``real``). Reported per arm: the mean
likelihood over parsed answers, and per non-real arm the separation from the real clips as an
AUC (probability that a clip of that arm scores above a real clip, ties counted half), plus the
paired rate at which a rendition scores above its own real clip. A judge that cannot tell the
arms apart has AUC near 0.5; a high AUC says the generic voice is recognisably synthetic, which
bounds what the probe's real-versus-generic comparison can mean. Unparseable answers are
counted per arm and left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from audits.judging import (
    JudgeConfig,
    JudgeItem,
    answer_status,
    answer_value,
    ask_judges,
    auc,
    judge_entry,
    judges_dir,
    rows_path,
    unavailable_entry,
    write_rows,
)
from engine.data import DecodeOptions, Utterance
from engine.engine import EngineOptions

TASK = "synthetic_speech"
REFERENCE_ARM = "real"


class Clip(NamedTuple):
    arm: str
    clip_id: str
    pair: str  # the real clip this one belongs to (itself for the real arm)
    utt: Utterance  # where the judge's worker reads the audio (a path under ``root``, or encoded bytes)
    root: Path | None


def real_and_rendered_arms(
    rendered: Sequence[Utterance], originals: Mapping[str, Utterance], root: Path | None, max_items: int
) -> list[Clip]:
    """The probe's renditions in every voice arm (not their masked copies) and the real clips they re-speak.

    ``max_items`` bounds the renditions per arm, so every arm is asked about the same real clips.
    Nothing is decoded here: the judge's workers read each clip (a real clip that cannot be
    decoded takes its renditions out of the figures with it).
    """
    whole = [u for u in rendered if u.parent_id and "target_index" not in (u.derivation or {})]
    by_arm: dict[str, list[Utterance]] = {}
    for u in whole:
        by_arm.setdefault(str((u.derivation or {}).get("arm", "generic")), []).append(u)
    renditions = [u for arm_clips in by_arm.values() for u in arm_clips[:max_items] if u.parent_id in originals]
    parents = list({str(u.parent_id): originals[str(u.parent_id)] for u in renditions}.values())
    clips = [Clip(REFERENCE_ARM, p.utt_id, p.utt_id, p, root) for p in parents]
    clips += [Clip(str((u.derivation or {}).get("arm", "generic")), u.utt_id, str(u.parent_id), u, None) for u in renditions]
    return clips


def _arm_figures(scores: Sequence[float | None], statuses: Sequence[str]) -> dict[str, Any]:
    vals = [s for s in scores if s is not None]
    return {
        "n_clips": len(scores),
        "n_answered": len(vals),
        "n_unparseable": sum(1 for s in statuses if s == "unparseable"),
        "n_failed_requests": sum(1 for s in statuses if s == "failed-request"),
        "mean_likelihood": float(np.mean(vals)) if vals else None,
        "median_likelihood": float(np.median(vals)) if vals else None,
    }


def judge_synthetic(cfg: JudgeConfig, clips: Sequence[Clip], out_dir: Path, engine: EngineOptions | None = None) -> dict[str, Any]:
    """``synthetic_voice.judges``: per judge, the likelihood per arm and the separation from the real arm.

    The questions run on the run's engine and are stored per clip under ``out_dir/judges`` (``audits/judging.ask_judges``)."""
    out: dict[str, Any] = {}
    items = [JudgeItem(f"{c.arm}:{c.clip_id}", ((c.utt, c.root),)) for c in clips]
    runs = ask_judges(cfg, judges_dir(out_dir, "."), "synthetic_likelihood", items, engine, DecodeOptions()) if clips else {}
    for name in cfg.backends:
        run = runs.get(name)
        if run is not None and run.status != "ok":
            out[name] = unavailable_entry(run, TASK)
            continue
        heard, results = run.heard(list(clips)) if run is not None else ([], [])
        unheard_real = {c.clip_id for c in clips if c.arm == REFERENCE_ARM} - {c.clip_id for c in heard if c.arm == REFERENCE_ARM}
        kept = [(c, r) for c, r in zip(heard, results) if c.pair not in unheard_real]  # a rendition is judged against its real clip
        if run is None or not kept:
            out[name] = {
                "kind": "judge",
                "judge": name,
                "task": TASK,
                "status": "no-clips",
                "error": "no real clip with a generic rendition to judge",
            }
            continue
        heard, results = [c for c, _ in kept], [r for _, r in kept]
        arms = list(dict.fromkeys(c.arm for c in heard))
        entry = judge_entry(name, run.facts, TASK, [f"{c.arm}:{c.clip_id}" for c in heard], results)
        entry["clip_errors"] = dict(sorted(run.clip_errors().items())[:20])
        score = [answer_value(r) for r in results]
        status = [answer_status(r) for r in results]
        entry["arms"] = {
            a: _arm_figures([s for c, s in zip(heard, score) if c.arm == a], [t for c, t in zip(heard, status) if c.arm == a]) for a in arms
        }
        real = {c.pair: s for c, s in zip(heard, score) if c.arm == REFERENCE_ARM and s is not None}
        sep: dict[str, Any] = {}
        for a in arms:
            if a == REFERENCE_ARM:
                continue
            mine = [(c.pair, s) for c, s in zip(heard, score) if c.arm == a and s is not None]
            paired = [s > real[p] for p, s in mine if p in real]
            sep[a] = {
                "auc": auc([s for _, s in mine], list(real.values())),
                "n_arm": len(mine),
                "n_real": len(real),
                "paired_higher_rate": sum(paired) / len(paired) if paired else None,
                "n_paired": len(paired),
                "what": f"AUC: P(a {a} clip scores above a real clip), ties half; paired: share of {a} clips scored above their own real "
                f"clip",
            }
        entry["separation"] = sep
        rows = [
            {
                "arm": c.arm,
                "clip_id": c.clip_id,
                "pair": c.pair,
                "likelihood": s,
                "status": t,
                "raw": None if isinstance(r, BaseException) else r.raw[:200],
            }
            for c, s, t, r in zip(heard, score, status, results)
        ]
        entry["rows_path"] = write_rows(rows_path(out_dir, ".", name, TASK), rows)
        entry["sample"] = {"max_items": cfg.max_items, "what": "the first max_items generic renditions and their real clips"}
        out[name] = entry
    return out


__all__ = ["REFERENCE_ARM", "Clip", "judge_synthetic", "real_and_rendered_arms"]
