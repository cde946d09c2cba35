"""Audio-LM judges as speaker-verification "backends": one same/different decision per trial.

A judge hears the enroll clip as A and the test clip as B (two audio parts of one request, the
``same_speaker`` prompt task) and answers ``same`` or ``different``. Its decisions are scored on a
seeded, label-balanced sample of the very trials the embedding backends get: accuracy, false
accept rate (non-target trials answered ``same`` over non-target trials answered) and false
reject rate (target trials answered ``different`` over target trials answered). A judge gives a
decision, not a score, so there is no EER or DET curve. For comparison, each embedding backend's
decisions at its own threshold are scored on the same judged trials (``on_judged_trials``).
Unparseable answers are counted and left out; nothing is guessed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from audits.asr.summary import json_safe
from audits.judging import (
    JudgeConfig,
    JudgeItem,
    answer_status,
    answer_value,
    ask_judges,
    balanced_sample,
    dataset_utterances,
    judge_entry,
    judges_dir,
    rows_path,
    unavailable_entry,
    write_rows,
)
from audits.speaker.metrics import Trial
from audits.speaker.results import SpeakerBackendResult, SpeakerJudgeResult
from engine.data import DecodeOptions
from engine.datasets.base import Dataset
from engine.engine import EngineOptions

log = logging.getLogger(__name__)

TASK = "same_speaker"


def verification_figures(decisions: Sequence[tuple[int, bool]]) -> dict[str, Any]:
    """Accuracy, false accept and false reject rates of (label, accepted) decisions."""
    n_tar = sum(1 for lab, _ in decisions if lab == 1)
    n_non = len(decisions) - n_tar
    fa = sum(1 for lab, acc in decisions if lab == 0 and acc)
    fr = sum(1 for lab, acc in decisions if lab == 1 and not acc)
    return {
        "n_trials": len(decisions),
        "n_target": n_tar,
        "n_nontarget": n_non,
        "accuracy": (len(decisions) - fa - fr) / len(decisions) if decisions else None,
        "false_accept_rate": fa / n_non if n_non else None,
        "false_reject_rate": fr / n_tar if n_tar else None,
    }


def _backend_on(trials: Sequence[Trial], entry: SpeakerBackendResult) -> dict[str, Any] | None:
    """An embedding backend's decisions at its threshold on the given trials (from its stored scores)."""
    path, threshold = entry.scores_path, entry.threshold
    if not path or threshold is None or not Path(str(path)).is_file():
        return None
    import pyarrow.parquet as pq

    t = pq.read_table(str(path)).to_pydict()
    score = {(e, s): float(v) for e, s, v in zip(t["enroll"], t["test"], t["score"])}
    decisions = [(tr.label, score[(tr.enroll, tr.test)] >= float(threshold)) for tr in trials if (tr.enroll, tr.test) in score]
    return {**verification_figures(decisions), "threshold": float(threshold)}


def judge_speaker_trials(
    cfg: JudgeConfig,
    dataset: Dataset,
    trials: Sequence[Trial],
    backend_results: Mapping[str, SpeakerBackendResult],
    out_dir: Path,
    decode_options: DecodeOptions,
    engine: EngineOptions | None = None,
) -> dict[str, SpeakerJudgeResult]:
    """``speaker.judges``: per judge, its decisions on a sample of the trials, scored (one record per judge).

    The questions run on the run's engine and are stored per trial (``audits/judging.ask_judges``)."""
    chosen = balanced_sample(list(trials), lambda t: t.label, cfg.max_items, cfg.seed)
    utts = dataset_utterances(dataset, {u for t in chosen for u in (t.enroll, t.test)}, "speaker.judges")
    root = dataset.root
    items = [JudgeItem(f"{t.enroll}|{t.test}", ((utts[t.enroll], root), (utts[t.test], root))) for t in chosen]
    runs = ask_judges(cfg, judges_dir(out_dir, "speaker"), "same_speaker", items, engine, decode_options)
    out: dict[str, SpeakerJudgeResult] = {}
    for name in cfg.backends:
        run = runs[name]
        if run.status != "ok":
            out[name] = SpeakerJudgeResult.from_json(json_safe(unavailable_entry(run, TASK)))
            continue
        usable, results = run.heard(chosen)
        entry = judge_entry(name, run.facts, TASK, [f"{t.enroll}|{t.test}" for t in usable], results)
        answered = [(t, answer_value(r)) for t, r in zip(usable, results) if answer_value(r) is not None]
        entry.update(verification_figures([(t.label, v == "same") for t, v in answered]))
        entry.update(
            n_trials_available=len(trials),
            n_trials_sampled=len(chosen),
            n_trials_without_audio=len(chosen) - len(usable),
            clip_errors=dict(sorted(run.clip_errors().items())[:20]),
            sample={"max_items": cfg.max_items, "seed": cfg.seed, "balanced_over": "label"},
            decision="answer 'same' = accept (enroll clip as A, test clip as B)",
        )
        judged = [t for t, _ in answered]
        entry["on_judged_trials"] = {
            b: fig for b, e in sorted(backend_results.items(), key=lambda kv: kv[0]) if (fig := _backend_on(judged, e)) is not None
        }
        rows = [
            {
                "label": t.label,
                "enroll": t.enroll,
                "test": t.test,
                "answer": answer_value(r),
                "status": answer_status(r),
                "raw": None if isinstance(r, BaseException) else r.raw[:200],
            }
            for t, r in zip(usable, results)
        ]
        entry["rows_path"] = write_rows(rows_path(out_dir, "speaker", name, TASK), rows)
        out[name] = SpeakerJudgeResult.from_json(json_safe(entry))
    return out


__all__ = ["judge_speaker_trials", "verification_figures"]
