"""Hallucination and insertion figures against hand-computed cases (audits/asr/hallucination.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from audits.asr.hallucination import is_loop, length_outlier, tandem_repeats
from audits.asr.scoring import ScoringOptions, score_table, summarize_models
from audits.reports.markdown import render_markdown
from audits.reports.tables import summary_frames
from normalizers import IdentityNormalizer


def _rows(items: list[tuple[str, str | None, str]], model: str = "m", **extra: list[object]) -> pd.DataFrame:
    data = []
    for i, (ref, hyp, accent) in enumerate(items):
        row = {
            "utt_id": f"u{i}",
            "model": model,
            "ref_raw": ref,
            "hyp_raw": hyp,
            "duration_s": 1.0,
            "infer_s": 0.1,
            "error": None if hyp is not None else "boom",
            "speaker": f"s{i % 2}",
            "shard": "s0",
            "parent_id": None,
            "accent": accent,
        }
        if ref == "":  # the reader's rule: an empty reference is a clip labelled speech-free
            row["content"] = "speech-free"
        for k, v in extra.items():
            row[k] = v[i]
        data.append(row)
    return pd.DataFrame(data)


def test_tandem_repeats_by_hand() -> None:
    assert tandem_repeats([]) == 0
    assert tandem_repeats("a b c".split()) == 1
    assert tandem_repeats("a a a".split()) == 3
    assert tandem_repeats("x thank you thank you thank you y".split()) == 3  # bigram, 3 copies
    assert tandem_repeats("a b c d a b c d a b c d".split()) == 3  # 4-gram, 3 copies
    assert tandem_repeats("a b c d e a b c d e".split()) == 1  # 5-gram is beyond LOOP_MAX_N
    assert tandem_repeats("no no yes no no no no".split()) == 4


def test_loop_needs_k_copies_and_more_than_the_reference() -> None:
    loop = "so i am here i am here i am here i am here".split()
    assert tandem_repeats(loop) == 4 and is_loop(loop, "so i am here".split())
    assert not is_loop("thank you thank you thank you".split(), [])  # 3 copies < k = 4
    assert is_loop("thank you thank you thank you thank you".split(), "thank you".split())
    assert not is_loop("no no no no".split(), "no no no no".split())  # the reference says it too


def test_length_outlier_by_hand() -> None:
    assert length_outlier(3, 7) == "long"  # ratio 2.33 > 2, 4 words apart
    assert length_outlier(1, 3) is None  # ratio 3 but only 2 words apart
    assert length_outlier(10, 20) is None  # ratio exactly 2 is not above 2
    assert length_outlier(10, 4) == "short"  # 0.4 < 0.5, 6 apart
    assert length_outlier(0, 5) is None  # speech-free clips are scored apart


def test_figures_per_model_and_slice_by_hand() -> None:
    items = [
        ("the cat sat", "the cat sat on the mat today", "x"),  # 4 insertions, long outlier
        ("hello world", "hello world", "x"),
        ("one two three four", "one one one one one one", "y"),  # loop (6 copies of "one")
        ("", "thank you", "y"),  # speech-free, hallucinated (2 words)
        ("", "", "y"),  # speech-free, silent
        ("red green", None, "x"),  # failed: not scored
    ]
    df = _rows(items, asr_avg_logprob=[-0.2, -0.1, -1.5, -0.9, -0.3, None], asr_no_speech_prob=[0.01, 0.02, 0.1, 0.7, 0.9, None])
    m = summarize_models(score_table(df, IdentityNormalizer()), ScoringOptions(n_boot=50))["m"]
    h = m["hallucination"]
    # WER leaves the speech-free clips out: (4 + 0 + 5) errors over 3 + 2 + 4 words
    # clip 3: "one two three four" -> six "one": 3 subs + 2 ins = 5 edits
    assert m["word_errors"] == 9 and m["n_words"] == 9 and m["wer"] == pytest.approx(1.0)
    assert m["n_scored"] == 5 and m["n_failed"] == 1
    assert h["insertions"] == 6 and h["insertion_rate"] == pytest.approx(6 / 9)
    assert h["n_loops"] == 1 and h["loop_rate"] == pytest.approx(1 / 3) and h["loop_words"] == 6
    assert h["wer_without_loops"] == pytest.approx(4 / 5)
    assert (h["n_long"], h["n_short"]) == (1, 0)  # 6 vs 4 words: ratio 1.5, not an outlier
    assert h["n_speech_free"] == 2 and h["n_hallucinated"] == 1 and h["hallucination_rate"] == pytest.approx(0.5)
    assert h["hallucinated_words"] == 2
    lo, hi = h["hallucination_ci95"]
    assert lo < 0.5 < hi
    assert h["avg_logprob_loops"] == pytest.approx(-1.5) and h["avg_logprob_other"] == pytest.approx(-0.15)
    assert h["no_speech_flagged"] == 1 and h["no_speech_prob_hallucinated"] == pytest.approx(0.7)
    y = m["slices"]["accent=y"]
    assert y["wer"] == pytest.approx(5 / 4) and y["hallucination"]["n_loops"] == 1 and y["hallucination"]["n_speech_free"] == 2
    x = m["slices"]["accent=x"]["hallucination"]
    assert (
        x["n_loops"] == 0 and x["n_speech_free"] == 0 and x["hallucination_rate"] is None and x["wer_without_loops"] == pytest.approx(4 / 5)
    )


def test_no_speech_free_clips_divide_by_nothing() -> None:
    df = _rows([("", "words here", "x"), ("", "", "x")])
    m = summarize_models(score_table(df, IdentityNormalizer()), ScoringOptions(n_boot=20))["m"]
    assert m["wer"] is None and m["n_words"] == 0 and m["word_errors"] == 0
    assert m["hallucination"]["hallucination_rate"] == pytest.approx(0.5)
    assert m["hallucination"]["insertion_rate"] is None and "avg_logprob_loops" not in m["hallucination"]


def test_figures_reach_tables_and_markdown() -> None:
    df = _rows([("a b c", "a b c", "x"), ("d e", "d e d e d e d e", "x"), ("", "hi", "x")])
    models = summarize_models(score_table(df, IdentityNormalizer()), ScoringOptions(n_boot=20))
    summary = {"models": models, "dataset": {}, "normalizer": {}}
    frames = summary_frames(summary)
    row = frames["models"].iloc[0]
    assert row["n_loops"] == 1 and row["n_hallucinated"] == 1 and row["wer_without_loops"] == pytest.approx(0.0)
    assert frames["slices"].iloc[0]["n_loops"] == 1
    md = render_markdown(summary)
    assert "Hallucinations and insertions" in md and "| m |" in md


def test_row_flags_follow_the_length_rule_on_a_grid() -> None:
    from audits.asr.hallucination import add_row_flags

    cases = [(r, h) for r in range(0, 12) for h in range(0, 30)]
    df = pd.DataFrame(
        {
            "ok": True,
            "n_words": [r for r, _ in cases],
            "ref_norm": [" ".join(f"r{i}" for i in range(r)) for r, _ in cases],
            "hyp_norm": [" ".join(f"h{i}" for i in range(h)) for _, h in cases],
            "content": ["speech-free" if r == 0 else "speech" for r, _ in cases],
        }
    )  # the label decides speech-free
    add_row_flags(df)
    got = [v if isinstance(v, str) else None for v in df["length_outlier"].tolist()]
    assert got == [length_outlier(r, h) for r, h in cases]
    assert df["speech_free"].tolist() == [r == 0 for r, _ in cases] and not df["loop"].any()
