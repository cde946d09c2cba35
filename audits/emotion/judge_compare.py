"""Audio-LM judges on relative emotion: which of two renditions sounds more aroused (or positive)?

The pairs are the emotion audit's rendition pairs (same text, or a clip and its derived
rendition, with different labels: ``rendition_pairs``), so the words cannot decide the answer.
Per pair and dimension the judge hears both clips (A, then B; which clip plays first is drawn
with the seed, so a judge that favours a position cannot score above chance by it) and answers
``A``, ``B`` or ``same`` (the ``emotion_compare`` prompt task, ``$dimension`` filled in).

Truth comes from the clips' labels: ``aroused`` uses the audit's expected arousal levels
(``expected_arousal_table``: the recipe's table or the label names), ``positive`` an expected
valence level (label names with ``positive``/``negative``, else the canonical category: happy
+1; neutral 0; sad, angry, fearful, disgusted -1; after Russell's circumplex). The clip with the
higher level is the right answer, ``same`` when the levels are equal. ``accuracy`` is correct
answers over parsed answers on pairs with a level on both sides; ``accuracy_ordered`` only over
pairs whose levels differ. Unparseable answers are counted and left out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from audits.asr.summary import json_safe
from audits.emotion.metrics import LabelMap
from audits.emotion.results import EmotionJudgeResult
from audits.judging import (
    JudgeConfig,
    JudgeItem,
    answer_status,
    answer_value,
    ask_judges,
    dataset_utterances,
    judge_entry,
    judges_dir,
    rows_path,
    unavailable_entry,
    write_rows,
)
from audits.utterance_meta import UttMeta
from engine.data import DecodeOptions
from engine.datasets.base import Dataset
from engine.engine import EngineOptions
from engine.errors import ConfigError

TASK = "emotion_compare"
DIMENSIONS = ("aroused", "positive")
CANONICAL_VALENCE = {"happy": 1.0, "neutral": 0.0, "sad": -1.0, "angry": -1.0, "fearful": -1.0, "disgusted": -1.0}


def check_dimensions(value: Any, where: str) -> tuple[str, ...]:
    """``judges.dimensions``: a non-empty list from DIMENSIONS (default: aroused)."""
    if value is None:
        return ("aroused",)
    if not isinstance(value, list) or not value or any(v not in DIMENSIONS for v in value):
        raise ConfigError(f"{where}: expected a non-empty list from {list(DIMENSIONS)}, got {value!r}")
    return tuple(dict.fromkeys(value))


def expected_valence_table(labels: Sequence[str], lm: LabelMap) -> dict[str, float | None]:
    """Expected valence per raw label: from 'positive'/'negative' in the name, else the canonical category."""
    table: dict[str, float | None] = {}
    for lab in sorted(set(labels)):
        low = lab.lower()
        if re.search(r"(^|[-_ ])negative", low):
            table[lab] = -1.0
        elif re.search(r"(^|[-_ ])positive", low):
            table[lab] = 1.0
        else:
            canon = lm.get(lab)
            table[lab] = CANONICAL_VALENCE.get(canon) if canon else None
    return table


def _truth(la: float | None, lb: float | None) -> str | None:
    if la is None or lb is None:
        return None
    return "A" if la > lb else "B" if lb > la else "same"


def _figures(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    scored = [r for r in rows if r["truth"] is not None and r["answer"] is not None]
    ordered = [r for r in scored if r["truth"] != "same"]
    return {
        "n_pairs": len(rows),
        "n_with_truth": sum(1 for r in rows if r["truth"] is not None),
        "n_unparseable": sum(1 for r in rows if r["status"] == "unparseable"),
        "n_scored": len(scored),
        "accuracy": sum(r["answer"] == r["truth"] for r in scored) / len(scored) if scored else None,
        "n_ordered": len(ordered),
        "accuracy_ordered": sum(r["answer"] == r["truth"] for r in ordered) / len(ordered) if ordered else None,
        "n_same_answers": sum(1 for r in scored if r["answer"] == "same"),
    }


def judge_emotion_pairs(
    cfg: JudgeConfig,
    dataset: Dataset,
    meta: Mapping[str, UttMeta],
    pairs: Sequence[tuple[str, str]],
    label: str | None,
    arousal: Mapping[str, float | None],
    lm: LabelMap,
    out_dir: Path,
    decode_options: DecodeOptions,
    engine: EngineOptions | None = None,
) -> dict[str, EmotionJudgeResult]:
    """``emotion.judges``: per judge, its A/B answers on a sample of the rendition pairs, scored per dimension (a record per judge).

    The questions run on the run's engine and are stored per pair and dimension (``audits/judging.ask_judges``)."""
    dims = check_dimensions(cfg.extra.get("dimensions"), "emotion.judges.dimensions")
    rng = np.random.default_rng(cfg.seed)
    chosen = [pairs[int(i)] for i in sorted(rng.choice(len(pairs), size=min(cfg.max_items, len(pairs)), replace=False))] if pairs else []
    flipped = [bool(f) for f in rng.integers(0, 2, size=len(chosen))]
    ordered = [(b, a) if f else (a, b) for (a, b), f in zip(chosen, flipped)]
    labels = {u: str(meta[u].labels.get(label)) if label and label in meta[u].labels else None for p in ordered for u in p}
    valence = expected_valence_table([v for v in labels.values() if v is not None], lm)
    level = {"aroused": arousal, "positive": valence}
    utts = dataset_utterances(dataset, {u for p in ordered for u in p}, "emotion.judges")
    root = dataset.root
    asked = [(a, b, d) for a, b in ordered for d in dims]
    questions = [JudgeItem(f"{a}|{b}|{d}", ((utts[a], root), (utts[b], root)), {"dimension": d}) for a, b, d in asked]
    runs = ask_judges(cfg, judges_dir(out_dir, "emotion"), "emotion_compare", questions, engine, decode_options) if ordered else {}
    out: dict[str, EmotionJudgeResult] = {}
    for name in cfg.backends:
        run = runs.get(name)
        if run is not None and run.status != "ok":
            out[name] = EmotionJudgeResult.from_json(json_safe(unavailable_entry(run, TASK)))
            continue
        items, results = run.heard(asked) if run is not None else ([], [])
        usable = list(dict.fromkeys((a, b) for a, b, _ in items))
        if run is None or not usable:
            out[name] = EmotionJudgeResult.from_json(
                {
                    "kind": "judge",
                    "judge": name,
                    "task": TASK,
                    "status": "no-pairs",
                    "n_pairs_available": len(pairs),
                    "error": "no rendition pair (same text or parent, different labels) with decodable audio to compare",
                }
            )
            continue
        errors = run.clip_errors()
        entry = judge_entry(name, run.facts, TASK, [f"{a}|{b}|{d}" for a, b, d in items], results)
        rows = []
        for (a, b, d), r in zip(items, results):
            la, lb = labels.get(a), labels.get(b)
            table = level[d]
            truth = _truth(None if la is None else table.get(la), None if lb is None else table.get(lb))
            rows.append(
                {
                    "a": a,
                    "b": b,
                    "dimension": d,
                    "label_a": la,
                    "label_b": lb,
                    "truth": truth,
                    "answer": answer_value(r),
                    "status": answer_status(r),
                    "raw": None if isinstance(r, BaseException) else r.raw[:200],
                }
            )
        entry["dimensions"] = {d: _figures([r for r in rows if r["dimension"] == d]) for d in dims}
        entry.update(
            n_pairs_available=len(pairs),
            n_pairs_sampled=len(chosen),
            n_pairs_without_audio=len(chosen) - len(usable),
            clip_errors=dict(sorted(errors.items())[:20]),
            sample={"max_items": cfg.max_items, "seed": cfg.seed},
            truth={"aroused": "expected arousal of the labels", "positive": "expected valence of the labels"},
            expected_valence=valence if "positive" in dims else None,
            order="A/B order drawn with the seed per pair",
        )
        entry["rows_path"] = write_rows(rows_path(out_dir, "emotion", name, TASK), rows)
        out[name] = EmotionJudgeResult.from_json(json_safe(entry))
    return out


__all__ = ["CANONICAL_VALENCE", "DIMENSIONS", "check_dimensions", "expected_valence_table", "judge_emotion_pairs"]
