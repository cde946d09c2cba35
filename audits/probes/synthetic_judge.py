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
    answer_status,
    answer_value,
    ask_all,
    auc,
    decode_clips,
    judge_entry,
    open_judge,
    rows_path,
    write_rows,
)
from engine.data import DecodeOptions, Utterance

TASK = "synthetic_speech"
REFERENCE_ARM = "real"


class Clip(NamedTuple):
    arm: str
    clip_id: str
    pair: str  # the real clip this one belongs to (itself for the real arm)
    audio: np.ndarray


def real_and_rendered_arms(rendered: Sequence[Utterance], originals: Mapping[str, Utterance], root: Path | None,
        max_items: int) -> list[Clip]:
    """The probe's renditions in every voice arm (not their masked copies) and the real clips they re-speak.

    ``max_items`` bounds the renditions per arm, so every arm is asked about the same real clips.
    """
    whole = [u for u in rendered if u.parent_id and "target_index" not in (u.derivation or {})]
    by_arm: dict[str, list[Utterance]] = {}
    for u in whole:
        by_arm.setdefault(str((u.derivation or {}).get("arm", "generic")), []).append(u)
    renditions = [u for arm_clips in by_arm.values() for u in arm_clips[:max_items]]
    gen_audio, _ = decode_clips(renditions, None, DecodeOptions())
    parents = [originals[str(u.parent_id)] for u in renditions if u.parent_id in originals]
    real_audio, _ = decode_clips(list({p.utt_id: p for p in parents}.values()), root, DecodeOptions())
    clips = [Clip(REFERENCE_ARM, uid, uid, x) for uid, x in real_audio.items()]
    clips += [
        Clip(str((u.derivation or {}).get("arm", "generic")), u.utt_id, str(u.parent_id), gen_audio[u.utt_id])
        for u in renditions
        if u.utt_id in gen_audio and u.parent_id in real_audio
    ]
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


def judge_synthetic(cfg: JudgeConfig, clips: Sequence[Clip], out_dir: Path) -> dict[str, Any]:
    """``synthetic_voice.judges``: per judge, the likelihood per arm and the separation from the real arm."""
    out: dict[str, Any] = {}
    arms = list(dict.fromkeys(c.arm for c in clips))
    for name in cfg.backends:
        if not clips:
            out[name] = {"kind": "judge", "judge": name, "task": TASK, "status": "no-clips",
                "error": "no real clip with a generic rendition to judge"}
            continue
        judge, facts = open_judge(name, cfg.backend_options.get(name, {}))
        if judge is None:
            out[name] = {"kind": "judge", "judge": name, "task": TASK, **facts}
            continue
        try:
            results = ask_all(judge, clips, lambda j, c: j.synthetic_likelihood(c.audio))
            entry = judge_entry(name, judge, TASK, [f"{c.arm}:{c.clip_id}" for c in clips], results)
        finally:
            judge.close()
        score = [answer_value(r) for r in results]
        status = [answer_status(r) for r in results]
        entry["arms"] = {a: _arm_figures([s for c, s in zip(clips, score) if c.arm == a],
            [t for c, t in zip(clips, status) if c.arm == a]) for a in arms}
        real = {c.pair: s for c, s in zip(clips, score) if c.arm == REFERENCE_ARM and s is not None}
        sep: dict[str, Any] = {}
        for a in arms:
            if a == REFERENCE_ARM:
                continue
            mine = [(c.pair, s) for c, s in zip(clips, score) if c.arm == a and s is not None]
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
        rows = [{"arm": c.arm, "clip_id": c.clip_id, "pair": c.pair, "likelihood": s, "status": t,
            "raw": None if isinstance(r, BaseException) else r.raw[:200]}
                for c, s, t, r in zip(clips, score, status, results)]  # fmt: skip
        entry["rows_path"] = write_rows(rows_path(out_dir, ".", name, TASK), rows)
        entry["sample"] = {"max_items": cfg.max_items, "what": "the first max_items generic renditions and their real clips"}
        out[name] = entry
    return out


__all__ = ["REFERENCE_ARM", "Clip", "judge_synthetic", "real_and_rendered_arms"]
