#!/usr/bin/env python
"""Our numbers vs the Open ASR Leaderboard's evaluation method, same model, same audio, one process.

The leaderboard (github.com/huggingface/open_asr_leaderboard, ``transformers/run_eval.py`` and
``normalizer/data_utils.py``) defines, in its own words of code (re-implemented here, not copied):

* references and predictions are both passed through the leaderboard's own English normalizer
  (``normalizer/english_normalizer.py``, the engine's ``open-asr-leaderboard`` normalizer, which
  records the leaderboard commit it follows); references that normalize to "" (or to "ignore time
  segment in scoring") are dropped;
* WER = ``evaluate.load("wer")``, i.e. jiwer: total S+D+I over total reference words of the
  normalized pairs (we call jiwer directly; ``evaluate`` only wraps it);
* RTFx = sum(audio_length_s) / sum(transcription_time_s), where a batch (dataset order,
  ``batch_size`` clips) is timed from the start of pre-processing (feature extraction) to the
  decoded text, and each clip is charged batch_time / batch_size; warm-up batches run first and
  are not counted.

This script (1) runs our engine (in-process runner) on ``n_utts`` clips of the demo corpus, (2)
applies the leaderboard's normalizer + jiwer WER and its RTFx formula to our stored rows, and (3)
re-times the same backend on the same audio with a loop written the leaderboard's way (dataset
order, equal split per clip, warm-up batches). Engine and leaderboard loop alternate; medians.
Differences in the timing definitions are listed in the output and in the README (Performance section).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for p in (str(REPO), str(Path(__file__).resolve().parent)):
    if p not in sys.path:
        sys.path.insert(0, p)

from engine.data import ModelSpec
from engine.errors import AuditError
from engine.run.runner import InProcessRunner, load_model
from engine.run.store import RunStore

log = logging.getLogger("oasr_compare")

IGNORED_REFERENCE = "ignore time segment in scoring"


LEADERBOARD_NORMALIZER = "open-asr-leaderboard"  # the normalizer the leaderboard scores with today


def leaderboard_wer(references: list[str], predictions: list[str]) -> tuple[float, int]:
    """The leaderboard's WER: its English normalizer on both sides, empty refs dropped, jiwer."""
    import jiwer

    from audits.normalizing import get_normalizer

    norm = get_normalizer(LEADERBOARD_NORMALIZER)
    pairs = [(norm(r), norm(p)) for r, p in zip(references, predictions)]
    kept = [(r, p) for r, p in pairs if r.strip() != "" and r.strip() != IGNORED_REFERENCE]
    if not kept:
        raise AuditError("no reference is left after normalization; nothing to score")
    return float(jiwer.wer([r for r, _ in kept], [p for _, p in kept])), len(kept)


def leaderboard_rtfx(audio_length_s: list[float], transcription_time_s: list[float]) -> float:
    """sum(audio) / sum(time), as the leaderboard's run scripts compute it."""
    total = sum(transcription_time_s)
    return sum(audio_length_s) / total if total > 0 else float("nan")


def leaderboard_loop(backend: Any, clips: list[Any], batch_size: int, warmup_batches: int) -> dict[str, Any]:
    """Time ``backend.transcribe_batch`` the leaderboard's way: dataset order, per-batch timer,
    equal share per clip; the first ``warmup_batches`` batches run untimed first."""
    batches = [clips[i : i + batch_size] for i in range(0, len(clips), batch_size)]
    for batch in batches[:warmup_batches]:
        backend.transcribe_batch([c.samples for c in batch])
    audio_length_s: list[float] = []
    transcription_time_s: list[float] = []
    texts: list[str] = []
    for batch in batches:
        audios = [c.samples for c in batch]
        lengths = [len(a) / 16_000 for a in audios]
        start = time.perf_counter()  # pre-processing (features) through decoded text is inside the backend call
        out = backend.transcribe_batch(audios)
        runtime = time.perf_counter() - start
        audio_length_s.extend(lengths)
        transcription_time_s.extend([runtime / len(batch)] * len(batch))
        texts.extend(out)
    return {"rtfx": leaderboard_rtfx(audio_length_s, transcription_time_s), "texts": texts, "audio_s": sum(audio_length_s)}


def leaderboard_unbatched(backend: Any, clips: list[Any], warmup: int = 2) -> dict[str, Any]:
    """The leaderboard's CTranslate2 script: ``WhisperModel.transcribe`` one clip at a time."""
    for c in clips[:warmup]:
        backend.transcribe_unbatched(c.samples)
    times, texts = [], []
    for c in clips:
        start = time.perf_counter()
        texts.append(backend.transcribe_unbatched(c.samples))
        times.append(time.perf_counter() - start)
    return {"rtfx": leaderboard_rtfx([len(c.samples) / 16_000 for c in clips], times), "texts": texts}


def engine_once(spec: ModelSpec, ds: Any, work: Path, warmup: int) -> dict[str, Any]:
    """Our engine end to end; our RTFx and WER exactly as summary.json computes them."""
    from audits.asr.scoring import ScoringOptions, score_table, summarize_models
    from audits.normalizing import get_normalizer

    out = work / "engine"
    shutil.rmtree(out, ignore_errors=True)
    facts = InProcessRunner(ds, [spec], RunStore(out), warmup=warmup).run()[spec.name]
    if facts.get("status") != "loaded":
        raise AuditError(f"{spec.name} did not run: {facts.get('error')}")
    table = RunStore(out).consolidate([spec.name]).to_pandas()
    summary = summarize_models(score_table(table, get_normalizer(LEADERBOARD_NORMALIZER)), ScoringOptions(n_boot=200))[spec.name]
    return {"rtfx": summary["rtfx"], "wer": summary["wer"], "n_scored": summary["n_scored"], "table": table}


def compare(
    model: str = "whisper-tiny.en",
    n_utts: int = 64,
    repeats: int = 3,
    batch_size: int | None = None,
    warmup_batches: int = 2,
    unbatched: bool = True,
) -> dict[str, Any]:
    """Run both methods side by side and print the comparison; returns every figure."""
    from benchlib import bench_dataset, decoded_clips, print_table, resolve_specs

    spec = resolve_specs([model])[0]
    if batch_size:
        spec = ModelSpec(spec.name, spec.backend, spec.options, batch_size, spec.meta)
    work = Path(tempfile.mkdtemp(prefix="oasr-"))
    try:
        ds = bench_dataset(n_utts, max(spec.batch_size, 16), work)
        clips = decoded_clips(ds)
        refs = {u.utt_id: u.reference or "" for sid in ds.shard_ids for u in ds.load_shard(sid).utterances}
        state = load_model(spec, 1)
        if state.backend is None:
            raise AuditError(f"{spec.name} cannot load: {state.facts.get('error')}")
        backend = state.backend
        ours: list[dict[str, Any]] = []
        theirs: list[dict[str, Any]] = []
        for r in range(repeats):
            for kind in ("engine", "leaderboard") if r % 2 == 0 else ("leaderboard", "engine"):
                log.info("repeat %d/%d: %s", r + 1, repeats, kind)
                if kind == "engine":
                    ours.append(engine_once(spec, ds, work, warmup=1))
                else:
                    theirs.append(leaderboard_loop(backend, clips, spec.batch_size, warmup_batches))
        unb = leaderboard_unbatched(backend, clips) if unbatched and hasattr(backend, "transcribe_unbatched") else None
        backend.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    table = ours[-1]["table"]
    ok = table[table["error"].isna()]
    our_wer = float(ours[-1]["wer"])
    lb_wer_on_ours, n_kept = leaderboard_wer(list(ok["ref_raw"]), list(ok["hyp_raw"]))
    lb_rtfx_on_ours = leaderboard_rtfx(list(ok["duration_s"]), list(ok["infer_s"]))
    ids = [c.utt_id for c in clips]
    lb_wer_own, _ = leaderboard_wer([refs[i] for i in ids], theirs[-1]["texts"])
    our_rtfx = statistics.median(float(o["rtfx"]) for o in ours)
    lb_rtfx = statistics.median(float(t["rtfx"]) for t in theirs)
    res: dict[str, Any] = {
        "model": spec.name,
        "n_utts": len(clips),
        "audio_s": theirs[-1]["audio_s"],
        "batch_size": spec.batch_size,
        "repeats": repeats,
        "our_wer": our_wer,
        "leaderboard_wer_on_our_outputs": lb_wer_on_ours,
        "wer_abs_diff": abs(our_wer - lb_wer_on_ours),
        "references_kept_by_leaderboard": n_kept,
        "our_rtfx_median": our_rtfx,
        "leaderboard_formula_on_our_rows": lb_rtfx_on_ours,
        "leaderboard_loop_rtfx_median": lb_rtfx,
        "rtfx_ratio_ours_over_leaderboard": our_rtfx / lb_rtfx,
        "leaderboard_loop_wer": lb_wer_own,
        "same_text_engine_vs_leaderboard_loop": sum(a == b for a, b in zip(ok.set_index("utt_id").loc[ids, "hyp_raw"], theirs[-1]["texts"]))
        / max(1, len(ids)),
        "our_rtfx_runs": [float(o["rtfx"]) for o in ours],
        "leaderboard_rtfx_runs": [float(t["rtfx"]) for t in theirs],
    }
    rows: list[list[Any]] = [
        ["WER, ours (summary.json)", f"{our_wer:.6f}", ""],
        [
            "WER, leaderboard normalizer + jiwer on our outputs",
            f"{lb_wer_on_ours:.6f}",
            f"|diff| = {res['wer_abs_diff']:.1e} (target <= 1e-6)",
        ],
        ["RTFx, ours (engine rows, median)", f"{our_rtfx:.2f}", ""],
        ["RTFx, leaderboard formula on our rows", f"{lb_rtfx_on_ours:.2f}", "same sums: identical by construction"],
        [
            "RTFx, leaderboard-style loop (median)",
            f"{lb_rtfx:.2f}",
            f"ours / leaderboard = {res['rtfx_ratio_ours_over_leaderboard']:.3f} (target 0.95-1.05)",
        ],
        [
            "WER of the leaderboard-style loop's own outputs",
            f"{lb_wer_own:.6f}",
            f"same text as engine: {res['same_text_engine_vs_leaderboard_loop']:.0%}",
        ],
    ]
    if unb is not None:
        res["leaderboard_ctranslate2_unbatched_rtfx"] = unb["rtfx"]
        res["leaderboard_ctranslate2_unbatched_wer"] = leaderboard_wer([refs[i] for i in ids], unb["texts"])[0]
        rows.append(
            [
                "RTFx, leaderboard CTranslate2 script (transcribe per clip)",
                f"{unb['rtfx']:.2f}",
                "unbatched: see the README, Performance section",
            ]
        )
        rows.append(["WER, leaderboard CTranslate2 script", f"{res['leaderboard_ctranslate2_unbatched_wer']:.6f}", ""])
    print_table(
        f"Open ASR Leaderboard method vs ours: {spec.name}, {len(clips)} clips, {res['audio_s']:.0f} s audio, batch {spec.batch_size}, "
        f"median of {repeats}",
        ["figure", "value", "note"],
        rows,
        "Timing differences: ours sorts each shard longest-first and charges a batch's time by clip duration; the leaderboard keeps "
        "dataset order and splits equally (the sums, hence RTFx, do not depend on the split). Both exclude loading and warm-up.",
    )
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="whisper-tiny.en")
    ap.add_argument("--n-utts", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=None, help="default: the registry's batch size")
    ap.add_argument("--no-unbatched", action="store_true", help="skip the per-clip transcribe() row")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    for noisy in ("faster_whisper", "engine", "audits"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    res = compare(args.model, args.n_utts, args.repeats, args.batch_size, unbatched=not args.no_unbatched)
    if args.json:
        args.json.write_text(json.dumps(res, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
