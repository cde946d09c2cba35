"""Paired model comparisons, Holm correction and tiers (audits/asr/paired.py) against hand-computed cases."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pandas as pd
import pytest

from audits.asr.paired import compare_models, holm, paired_difference, shifted_p
from audits.asr.scoring import ScoringOptions, score_table, summarize_models
from audits.reports.markdown import render_markdown
from normalizers import IdentityNormalizer


def test_holm_by_hand() -> None:
    # sorted p: 0.01, 0.02, 0.03, 0.5 -> x4, x3, x2, x1 = 0.04, 0.06, 0.06 (monotone), 0.5
    assert holm([0.03, 0.01, 0.5, 0.02]).tolist() == pytest.approx([0.06, 0.04, 0.5, 0.06])
    assert holm([0.4, 0.9]).tolist() == pytest.approx([0.8, 0.9])
    assert holm([]).size == 0


def test_shifted_p_by_hand() -> None:
    reps = np.array([0.1, 0.2, 0.3, 0.4])  # observed 0.25: |r - 0.25| >= 0.25 for none -> (1 + 0) / 5
    assert shifted_p(reps, 0.25) == pytest.approx(0.2)
    assert shifted_p(reps, 0.0) == pytest.approx(1.0)  # no difference: every replicate counts


def _perm_p(errors_a: np.ndarray, errors_b: np.ndarray, words: np.ndarray, blocks: np.ndarray) -> float:
    """Exact paired permutation test: swap the two models' labels within each speaker block."""
    names = sorted(set(blocks))
    d = np.array([errors_a[blocks == b].sum() - errors_b[blocks == b].sum() for b in names], dtype=float)
    w = words.sum()
    observed = abs(d.sum() / w)
    stats = [abs((np.array(signs) * d).sum() / w) for signs in itertools.product((1, -1), repeat=len(d))]
    return float(np.mean(np.array(stats) >= observed - 1e-12))


def test_paired_bootstrap_agrees_with_a_permutation_test() -> None:
    rng = np.random.default_rng(3)
    blocks = np.repeat([f"s{i}" for i in range(10)], 4)
    words = rng.integers(5, 15, size=40).astype(float)
    base = rng.binomial(words.astype(int), 0.2).astype(float)
    for shift, expect_small in ((0.0, False), (2.0, True)):
        errors_b = base + rng.binomial(1, 0.5, size=40)
        errors_a = base + rng.binomial(1, 0.5, size=40) + (shift * (rng.random(40) < 0.6))
        boot = paired_difference(errors_a, errors_b, words, blocks, n_boot=4000, seed=1)
        perm = _perm_p(errors_a, errors_b, words, blocks)
        assert boot["diff"] == pytest.approx((errors_a.sum() - errors_b.sum()) / words.sum())
        assert abs(boot["p_value"] - perm) < 0.1, (boot["p_value"], perm)
        assert (boot["p_value"] < 0.05) == expect_small == (perm < 0.05)
        lo, hi = boot["ci95"]
        assert (lo > 0) == expect_small


def _rows(errs: dict[str, list[int]], speakers: list[str], failed: dict[str, set[int]] | None = None) -> pd.DataFrame:
    """Clips of 10 words each ('w0 ... w9'); a model with e errors on a clip gets its first e words replaced."""
    ref = " ".join(f"w{i}" for i in range(10))
    data = []
    for model, es in errs.items():
        for i, e in enumerate(es):
            hyp = " ".join(["x"] * e + [f"w{j}" for j in range(e, 10)])
            bad = failed is not None and i in failed.get(model, set())
            data.append(
                {
                    "utt_id": f"u{i:03d}",
                    "model": model,
                    "ref_raw": ref,
                    "hyp_raw": None if bad else hyp,
                    "duration_s": 1.0,
                    "infer_s": 0.1,
                    "error": "boom" if bad else None,
                    "speaker": speakers[i],
                    "shard": "s0",
                    "parent_id": None,
                }
            )
    return pd.DataFrame(data)


def test_pairs_tiers_and_verdicts() -> None:
    n = 40
    speakers = [f"s{i % 10}" for i in range(n)]
    rng = np.random.default_rng(0)
    good = rng.integers(1, 3, n).tolist()
    twin = [e + (1 if i % 7 == 0 else -1 if i % 7 == 3 else 0) for i, e in enumerate(good)]  # 6 clips +1, 6 clips -1
    bad = [e + 3 + i % 3 for i, e in enumerate(good)]  # 3 to 5 more errors per clip: the difference varies between speakers
    errs = {"a-good": good, "b-good-twin": twin, "c-bad": bad}
    scored = score_table(_rows(errs, speakers), IdentityNormalizer())
    comp = compare_models(scored.frame, n_boot=500, seed=0)
    pairs = {(p["a"], p["b"]): p for p in comp["pairs"]}
    assert len(pairs) == 3 and comp["blocks"] == "speaker"
    ac = pairs[("a-good", "c-bad")]
    assert ac["diff"] == pytest.approx((sum(good) - sum(bad)) / (10 * n))
    assert ac["better"] == "a-good" and ac["p_holm"] < 0.05 and ac["n_utts"] == n
    ab = pairs[("a-good", "b-good-twin")]
    assert ab["diff"] == 0 and ab["better"] is None and ab["p_value"] == 1
    assert comp["tiers"] == [["a-good", "b-good-twin"], ["c-bad"]]
    assert all(p["p_holm"] >= p["p_value"] for p in comp["pairs"])
    md = render_markdown({"models": {}, "comparisons": comp})
    assert "a-good is better than c-bad" in md and "a-good is better than b-good-twin" not in md


def test_pairs_use_only_shared_clips() -> None:
    speakers = [f"s{i % 4}" for i in range(8)]
    errs = {"m1": [1] * 8, "m2": [3] * 8}
    comp = compare_models(score_table(_rows(errs, speakers, failed={"m2": {0, 1}}), IdentityNormalizer()).frame, n_boot=200)
    (p,) = comp["pairs"]
    assert p["n_utts"] == 6 and p["diff"] == pytest.approx((6 - 18) / 60)


def test_gaps_get_holm_across_all_gaps() -> None:
    speakers = [f"s{i % 8}" for i in range(32)]
    ref = "a b c d e f g h i j"
    data = []
    for model in ("m1", "m2"):
        for i in range(32):
            noisy = i % 2 == 1
            # m1: 3 or 5 errors on a noisy clip (4 on average, varying between speakers); m2: none anywhere
            hyp = ("x x x d e f g h i j" if i % 4 == 1 else "x x x x x f g h i j") if noisy and model == "m1" else ref
            data.append(
                {
                    "utt_id": f"u{i}",
                    "model": model,
                    "ref_raw": ref,
                    "hyp_raw": hyp,
                    "duration_s": 1.0,
                    "infer_s": 0.1,
                    "error": None,
                    "speaker": speakers[i],
                    "shard": "s0",
                    "parent_id": None,
                    "background": "noise" if noisy else "clean",
                }
            )
    out = summarize_models(score_table(pd.DataFrame(data), IdentityNormalizer()), ScoringOptions(n_boot=300))
    g1, g2 = out["m1"]["gaps"][0], out["m2"]["gaps"][0]
    # the Holm family is the testable gaps: m1's alone (m2's is not testable, below)
    assert g1["gap"] == pytest.approx(0.4) and g1["significant"] and g1["p_holm"] == pytest.approx(g1["p_value"])
    # m2 makes no error anywhere: every speaker has WER 0 on both sides, so the gap is not testable (not "p = 1")
    assert g2["gap"] == 0 and g2["significant"] is None and g2["p_value"] is None and g2["ci95"] is None
    assert g2["not_testable"].startswith("no variance")


def test_forty_models_on_many_clips_is_fast() -> None:
    """780 pairs over 6,000 clips and 600 speakers, 1,000 replicates: one shared count matrix."""
    rng = np.random.default_rng(0)
    n, m = 6000, 40
    rows = pd.DataFrame(
        {
            "utt_id": np.tile([f"u{i}" for i in range(n)], m),
            "model": np.repeat([f"m{j:02d}" for j in range(m)], n),
            "word_errors": rng.integers(0, 3, n * m),
            "n_words": np.tile(rng.integers(5, 20, n), m),
            "ok": True,
            "speech_free": False,
            "speaker": np.tile([f"s{i % 600}" for i in range(n)], m),
        }
    )
    t0 = time.perf_counter()
    comp = compare_models(rows, n_boot=1000)
    assert len(comp["pairs"]) == 780 and time.perf_counter() - t0 < 20


def test_html_sections_escape_and_state_verdicts() -> None:
    from audits.reports.robustness import robustness_sections

    speakers = [f"s{i % 10}" for i in range(40)]
    errs = {"<good>": [1] * 40, "bad": [4 + i % 3 for i in range(40)]}
    scored = score_table(_rows(errs, speakers), IdentityNormalizer())
    models = summarize_models(scored, ScoringOptions(n_boot=100))
    sections = dict(
        (sid, body) for sid, _, body, _ in robustness_sections({"models": models, "comparisons": compare_models(scored.frame, n_boot=200)})
    )
    assert set(sections) == {"hallucination", "comparisons"}
    assert "&lt;good&gt; is better than bad" in sections["comparisons"] and "<good>" not in sections["comparisons"]
    assert "id='hallucination-table'" in sections["hallucination"]
