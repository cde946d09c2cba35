"""Property-based tests (hypothesis) of the text side: edit counts, corpus WER/CER, normalizers,
and manifest/shard round trips.

Normalizer idempotence, measured with random text (see the README, "What the engine guarantees"):

* ``basic`` and ``identity`` are idempotent on any Unicode text (tested below).
* ``whisper-english`` (Whisper's EnglishTextNormalizer, the recipes' default) is
  idempotent on words of letters separated by spaces and single punctuation marks (tested), but
  NOT in general; examples found by random search:

  - spelled-out digits merge on a second pass: ``"2 10 1"`` -> ``"2 10 one"`` -> ``"2 11"``;
  - ``o``/``oh`` become ``0`` and then join: ``"o OH m"`` -> ``"00 m"`` -> ``"0 m"``;
    ``"o s"`` -> ``"0 s"`` -> ``"0s"``;
  - signs and symbols are consumed by the second pass: ``"minus five"`` -> ``"-5"`` -> ``"5"``;
    ``"percent million euros percent"`` -> ``"... €1000000 percent"`` -> ``"... €1000000%"``;
  - stray punctuation leaves edge spaces or a dot: ``"..hzcw"`` -> ``" hzcw"`` -> ``"hzcw"``,
    ``"p?B..,"`` -> ``"p b ."`` -> ``"p b"``.

  Scores are unaffected because scoring normalizes the raw stored text exactly once (tested:
  ``ref_norm == normalizer(ref_raw)``); never feed normalized text back into a scorer.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audits.asr.align import align, edit_counts, error_count
from audits.asr.scoring import ScoringOptions, score_table, summarize_models
from engine.audio.shards import write_manifest, write_shards
from engine.data import RESERVED_KEYS, Utterance
from engine.datasets import open_dataset
from engine.datasets.readers import AUDIO_KEYS, ID_KEYS, SPEAKER_KEYS, TEXT_KEYS
from normalizers import BasicNormalizer, EnglishNormalizer, IdentityNormalizer


def levenshtein(a: Sequence[object], b: Sequence[object]) -> int:
    """Textbook dynamic-programming edit distance (the reference implementation)."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


TOKENS = st.lists(st.sampled_from(["a", "b", "c", "the", "cat", "sat", "dog"]), max_size=14)
WORDS = st.lists(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=4), max_size=10)


@settings(max_examples=400, deadline=None)
@given(TOKENS, TOKENS)
def test_edit_counts_match_dynamic_programming(ref: list[str], hyp: list[str]) -> None:
    c = edit_counts(ref, hyp)
    assert c.errors == levenshtein(ref, hyp) == error_count(ref, hyp)
    assert c.hits + c.subs + c.dels == len(ref) and c.hits + c.subs + c.ins == len(hyp)
    assert min(c.hits, c.subs, c.dels, c.ins) >= 0


@settings(max_examples=200, deadline=None)
@given(WORDS, WORDS)
def test_edit_counts_on_unicode_tokens(ref: list[str], hyp: list[str]) -> None:
    assert edit_counts(ref, hyp).errors == levenshtein(ref, hyp)


@settings(max_examples=200, deadline=None)
@given(TOKENS, TOKENS)
def test_alignment_reconstructs_both_sides(ref: list[str], hyp: list[str]) -> None:
    cols = align(ref, hyp)
    assert [c.ref for c in cols if c.ref is not None] == ref
    assert [c.hyp for c in cols if c.hyp is not None] == hyp
    assert sum(c.tag != "equal" for c in cols) == levenshtein(ref, hyp)


SENTENCE = st.lists(st.sampled_from(["a", "b", "the", "cat", "sat", "on", "mat", "dog", "Cat", "mat."]), max_size=8).map(" ".join)


@st.composite
def result_rows(draw: st.DrawFn) -> pd.DataFrame:
    n = draw(st.integers(1, 25))
    rows = []
    for i in range(n):
        failed = draw(st.booleans()) and draw(st.booleans())  # ~25 % failed rows
        for model in ("m1", "m2"):
            rows.append(
                {
                    "utt_id": f"u{i}",
                    "model": model,
                    "hyp_raw": None if failed else draw(SENTENCE),
                    "ref_raw": draw(SENTENCE) if model == "m1" else None,
                    "duration_s": 1.0,
                    "infer_s": 0.1,
                    "error": "boom" if failed else None,
                    "speaker": f"s{i % 3}",
                    "shard": "s0",
                    "parent_id": None,
                    "accent": draw(st.sampled_from(["x", "y"])),
                }
            )
    df = pd.DataFrame(rows)
    refs = df[df["model"] == "m1"].set_index("utt_id")["ref_raw"]
    df["ref_raw"] = df["utt_id"].map(refs)
    return df


def _reference_metrics(df: pd.DataFrame, norm: object) -> dict[str, tuple[int, int, int, int, int]]:
    """(word errors, ref words, char errors, ref chars, failed) per model, from scratch."""
    out: dict[str, tuple[int, int, int, int, int]] = {}
    for model, g in df.groupby("model"):
        we = nw = ce = nc = failed = 0
        for _, r in g.iterrows():
            if not pd.isna(r["error"]) or pd.isna(r["hyp_raw"]):
                failed += 1
                continue
            ref, hyp = norm(r["ref_raw"]), norm(r["hyp_raw"])  # type: ignore[operator]
            if not ref.split():
                if r.get("content") != "speech-free":
                    failed += 1  # a clip said to hold speech with no reference words cannot be scored
                continue  # speech-free clip: scored apart from WER (hallucination figures)
            we += levenshtein(ref.split(), hyp.split())
            nw += len(ref.split())
            ce += levenshtein(ref, hyp)
            nc += len(ref)
        out[str(model)] = (we, nw, ce, nc, failed)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(result_rows(), st.sampled_from(["identity", "basic", "english"]))
def test_corpus_wer_and_cer_match_reference(df: pd.DataFrame, which: str) -> None:
    norm = {"identity": IdentityNormalizer(), "basic": BasicNormalizer(), "english": EnglishNormalizer()}[which]
    scored = score_table(df, norm)
    summary = summarize_models(scored, ScoringOptions(n_boot=5))
    expected = _reference_metrics(df, norm)
    for model, (we, nw, ce, nc, failed) in expected.items():
        m = summary[model]
        assert (m["word_errors"], m["n_words"], m["char_errors"], m["n_chars"], m["n_failed"]) == (we, nw, ce, nc, failed)
        assert m["substitutions"] + m["deletions"] + m["insertions"] == we
        assert m["wer"] == (we / nw if nw else None) and m["cer"] == (ce / nc if nc else None)
        for value in ("x", "y"):
            sub = df[(df["model"] == model) & (df["accent"] == value)]
            if len(sub) == 0:
                assert f"accent={value}" not in m["slices"]
                continue
            s = m["slices"][f"accent={value}"]
            swe, snw, _, _, _ = _reference_metrics(sub, norm)[model]
            assert (s["word_errors"], s["n_words"]) == (swe, snw)
            assert s["wer"] == (swe / snw if snw else None)  # corpus-level, not a mean of utterance rates
    ok = scored.frame[scored.frame["ok"]]
    assert all(rn == norm(rr) for rn, rr in zip(ok["ref_norm"], ok["ref_raw"]))  # normalized once, from raw


UNICODE = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@settings(max_examples=500, deadline=None)
@given(UNICODE)
def test_basic_and_identity_normalizers_idempotent(text: str) -> None:
    for norm in (BasicNormalizer(), IdentityNormalizer()):
        once = norm(text)
        assert norm(once) == once


LETTER_WORD = st.from_regex(r"[a-zA-Z]{1,9}", fullmatch=True).filter(lambda w: w.lower() not in {"o", "oh", "zero"})


@settings(max_examples=250, deadline=None)
@given(
    st.lists(LETTER_WORD, min_size=1, max_size=8),
    st.lists(st.sampled_from([" ", ", ", "! ", "? ", " - ", "; ", ": ", "'s "]), min_size=8, max_size=8),
)
def test_english_normalizer_idempotent_on_words(words: list[str], seps: list[str]) -> None:
    """Where it holds: letter words with single punctuation marks between them."""
    norm = EnglishNormalizer()
    text = "".join(w + s for w, s in zip(words, seps)).strip()
    once = norm(text)
    assert norm(once) == once


# -- manifest and shard round trips ---------------------------------------------------------------

_TAKEN = set(RESERVED_KEYS) | set(AUDIO_KEYS) | set(TEXT_KEYS) | set(ID_KEYS) | set(SPEAKER_KEYS)
LABEL_KEY = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(lambda k: k not in _TAKEN)
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40).filter(
    lambda t: t.strip() != "" and "\ufffd" not in t
)
ID = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=16)


@st.composite
def utterances(draw: st.DrawFn) -> list[Utterance]:
    ids = draw(st.lists(ID, min_size=1, max_size=12, unique=True))
    keys = draw(st.lists(LABEL_KEY, max_size=3, unique=True))
    out = []
    for uid in ids:
        labels = {k: draw(UNICODE) for k in keys if draw(st.booleans())}
        out.append(
            Utterance(
                utt_id=uid,
                reference=draw(TEXT),
                audio_path=draw(st.sampled_from(["a.wav", "sub/b.flac", "/abs/c d.wav", "ünï.wav"])),
                duration_s=draw(st.none() | st.floats(0, 1e4, allow_nan=False)),
                speaker=draw(st.none() | TEXT),
                labels=labels,
            )
        )
    return out


def _view(u: Utterance) -> tuple[object, ...]:
    return (u.utt_id, u.reference, u.audio_path, u.audio_bytes, u.duration_s, u.speaker, dict(u.labels), u.problem)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(utterances(), st.integers(1, 5))
def test_nemo_manifest_round_trip(utts: list[Utterance], shard_size: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = write_manifest(utts, Path(d) / "manifest.jsonl")
        ds = open_dataset(path, shard_size=shard_size)
        got = [u for s in ds.iter_shards() for u in s.utterances]
    assert [_view(u) for u in got] == [_view(u) for u in utts]
    assert ds.n_utts == len(utts) and len(ds.shard_ids) == math.ceil(len(utts) / shard_size)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(utterances(), st.integers(1, 5), st.binary(min_size=1, max_size=8))
def test_parquet_shards_round_trip(utts: list[Utterance], shard_size: int, payload: bytes) -> None:
    from dataclasses import replace

    utts = [replace(u, audio_bytes=payload + u.utt_id.encode()) for u in utts]
    with tempfile.TemporaryDirectory() as d:
        write_shards(utts, Path(d) / "shards", shard_size=shard_size)
        ds = open_dataset(Path(d), shard_size=shard_size)
        got = [u for s in ds.iter_shards() for u in s.utterances]
    assert [_view(u) for u in got] == [_view(u) for u in utts]
    assert ds.reader == "parquet" and len(ds.shard_ids) == math.ceil(len(utts) / shard_size)
