"""WER/CER scoring: hand-computed cases, NIST sclite, jiwer, corpus-level aggregation, slices."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path

import jiwer
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audits.asr.align import align, edit_counts, error_count
from audits.asr.scoring import ScoringOptions, score_table, summarize_models
from audits.asr.stats import block_bootstrap_ratio, wilson_interval
from normalizers import EnglishNormalizer, IdentityNormalizer


def rows(pairs, model="m", speakers=None, labels=None):
    data = []
    for i, (r, h) in enumerate(pairs):
        row = {
            "utt_id": f"u{i}",
            "model": model,
            "ref_raw": r,
            "hyp_raw": h,
            "duration_s": 1.0,
            "infer_s": 0.1,
            "error": None,
            "speaker": None if speakers is None else speakers[i],
            "shard": "s0",
            "parent_id": None,
        }
        if labels:
            for k, v in labels.items():
                row[k] = v[i]
        data.append(row)
    return pd.DataFrame(data)


def test_hand_computed_counts():
    c = edit_counts("the cat sat on the mat".split(), "the cat sit on mat".split())
    assert (c.hits, c.subs, c.dels, c.ins) == (4, 1, 1, 0)
    assert c.errors == 2 and c.n_ref == 6
    c2 = edit_counts("hello world".split(), "hello there world".split())
    assert (c2.subs, c2.dels, c2.ins) == (0, 0, 1)
    assert edit_counts([], []).errors == 0
    assert edit_counts([], ["a", "b"]).ins == 2
    assert edit_counts(["a", "b"], []).dels == 2


def test_alignment_marks_errors():
    cols = align("a b c d".split(), "a x c d e".split())
    tags = [c.tag for c in cols]
    assert tags == ["equal", "sub", "equal", "equal", "ins"]
    assert cols[1].ref == "b" and cols[1].hyp == "x"


def test_corpus_level_not_mean_of_utterances():
    # utt1: 1 error / 1 word; utt2: 0 errors / 9 words -> corpus WER 0.1, mean of per-utt would be 0.5
    df = rows([("hello", "goodbye"), ("one two three four five six seven eight nine", "one two three four five six seven eight nine")])
    s = summarize_models(score_table(df, IdentityNormalizer()), ScoringOptions(n_boot=200))
    assert s["m"]["wer"] == pytest.approx(0.1)
    assert s["m"]["n_words"] == 10 and s["m"]["word_errors"] == 1


def test_matches_jiwer_on_normalized_text():
    pairs = [
        ("Mr. Smith paid $20 for the colour TV.", "mister smith paid twenty dollars for the color tv"),
        ("It's 5 o'clock, OK?", "its five o clock okay"),
        ("The quick brown fox", "the quick brown box jumps"),
    ]
    norm = EnglishNormalizer()
    df = rows(pairs)
    s = summarize_models(score_table(df, norm), ScoringOptions(n_boot=100))
    refs = [norm(r) for r, _ in pairs]
    hyps = [norm(h) for _, h in pairs]
    assert s["m"]["wer"] == pytest.approx(jiwer.wer(refs, hyps), abs=1e-12)
    assert s["m"]["cer"] == pytest.approx(jiwer.cer(refs, hyps), abs=1e-12)


@pytest.mark.skipif(shutil.which("sctk") is None, reason="NIST sctk not installed (apt-get install sctk)")
def test_matches_nist_sclite(tmp_path: Path):
    rng = np.random.default_rng(7)
    vocab = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    pairs = []
    for _ in range(60):
        ref = list(rng.choice(vocab, size=rng.integers(1, 15)))
        hyp = list(ref)
        for _ in range(rng.integers(0, 5)):
            op = rng.integers(0, 3)
            if op == 0 and hyp:
                hyp[rng.integers(0, len(hyp))] = str(rng.choice(vocab))
            elif op == 1 and hyp:
                hyp.pop(rng.integers(0, len(hyp)))
            else:
                hyp.insert(int(rng.integers(0, len(hyp) + 1)), str(rng.choice(vocab)))
        pairs.append((" ".join(ref), " ".join(hyp)))
    ref_trn = tmp_path / "ref.trn"
    hyp_trn = tmp_path / "hyp.trn"
    ref_trn.write_text("".join(f"{r} (spk-{i:03d})\n" for i, (r, _) in enumerate(pairs)))
    hyp_trn.write_text("".join(f"{h} (spk-{i:03d})\n" for i, (_, h) in enumerate(pairs)))
    out = subprocess.run(
        ["sctk", "sclite", "-r", str(ref_trn), "trn", "-h", str(hyp_trn), "trn", "-i", "wsj", "-o", "pra", "stdout"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    scores = [tuple(map(int, m.groups())) for m in re.finditer(r"Scores: \(#C #S #D #I\) (\d+) (\d+) (\d+) (\d+)", out)]
    assert len(scores) == len(pairs)
    sclite_errors = sum(s + d + i for _, s, d, i in scores)
    sclite_words = sum(c + s + d for c, s, d, _ in scores)
    df = rows(pairs)
    s = summarize_models(score_table(df, IdentityNormalizer()), ScoringOptions(n_boot=100))
    assert s["m"]["word_errors"] == sclite_errors
    assert s["m"]["n_words"] == sclite_words
    # per utterance too
    for (r, h), (_, s_, d_, i_) in zip(pairs, scores):
        assert error_count(r.split(), h.split()) == s_ + d_ + i_


def _reference_levenshtein(a: list[str], b: list[str]) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("abcde"), max_size=12), st.lists(st.sampled_from("abcde"), max_size=12))
def test_edit_counts_match_reference_implementation(a, b):
    c = edit_counts(a, b)
    assert c.errors == _reference_levenshtein(a, b)
    assert c.hits + c.subs + c.dels == len(a)
    assert c.hits + c.subs + c.ins == len(b)


def test_failed_rows_excluded_and_counted():
    df = rows([("a b", "a b"), ("c d", None)])
    df.loc[1, "error"] = "audio file not found: 'x.wav'"
    s = summarize_models(score_table(df, IdentityNormalizer()), ScoringOptions(n_boot=50))["m"]
    assert s["n_utts"] == 2 and s["n_failed"] == 1 and s["wer"] == 0.0
    assert any("not found" in k for k in s["failures"])


def test_slices_and_gaps():
    # noise: 1 error in two speakers' clips, 2 in the other two (WER varies between speakers); clean: none
    pairs = [("a b c d", "a b c d")] * 4 + [("a b c d", "a x c d")] * 2 + [("a b c d", "a x x d")] * 2
    labels = {"background": ["clean"] * 4 + ["noise-10db"] * 4}
    df = rows(pairs, speakers=[f"s{i}" for i in range(8)], labels=labels)
    sr = score_table(df, IdentityNormalizer())
    s = summarize_models(sr, ScoringOptions(n_boot=300))["m"]
    assert s["slices"]["background=clean"]["wer"] == 0.0
    # every clean speaker has WER 0: nothing varies, so that slice's interval is not testable (never [0.0, 0.0])
    clean = s["slices"]["background=clean"]
    assert clean["ci95"] is None and clean["not_testable"].startswith("no variance")
    assert s["slices"]["background=noise-10db"]["wer"] == pytest.approx(0.375)
    gap = s["gaps"][0]
    assert (gap["label"], gap["a"], gap["b"]) == ("background", "noise-10db", "clean")
    assert gap["gap"] == pytest.approx(0.375) and gap["excludes_zero"]
    lo, hi = s["ci95"]
    assert lo <= s["wer"] <= hi


def test_bootstrap_blocks_by_speaker_wider_than_by_utterance():
    # two speakers with very different error rates, many utterances each
    n = np.array([10] * 40)
    e = np.array([0] * 20 + [5] * 20)
    spk = ["a"] * 20 + ["b"] * 20
    lo_s, hi_s = block_bootstrap_ratio(e, n, spk, n_boot=2000, seed=1)
    lo_u, hi_u = block_bootstrap_ratio(e, n, None, n_boot=2000, seed=1)
    assert (hi_s - lo_s) > (hi_u - lo_u)
    assert math.isnan(block_bootstrap_ratio([], [], None)[0])


def test_wilson_interval_known_values():
    lo, hi = wilson_interval(0, 31)
    assert round(lo, 3) == 0.0 and round(hi, 3) == 0.110
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    with pytest.raises(ValueError):
        wilson_interval(5, 3)
