"""The English normalizer stays linear on pathological text and equal to Whisper's original."""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from audits.normalizing import get_normalizer
from normalizers.fast_english import remove_bracketed, remove_parenthesized

BRACKETS = re.compile(r"[<\[][^>\]]*[>\]]")
PARENS = re.compile(r"\(([^)]+?)\)")
ALPHABET = st.text(alphabet="ab <>[]()x)", max_size=40)


@given(ALPHABET)
@settings(max_examples=400, deadline=None)
def test_bracket_removal_equals_the_regex(s: str) -> None:
    assert remove_bracketed(s) == BRACKETS.sub("", s)


@given(ALPHABET)
@settings(max_examples=400, deadline=None)
def test_paren_removal_equals_the_regex(s: str) -> None:
    assert remove_parenthesized(s) == PARENS.sub("", s)


def test_whole_normalizer_equals_the_original_on_pathological_text() -> None:
    from whisper_normalizer.english import EnglishTextNormalizer

    original, ours = EnglishTextNormalizer(), get_normalizer("whisper-english")
    for s in ["a" + "<" * 300, "(" * 200 + "x", "[a] <b> (c) ()" * 20, "x [y " * 50 + "]", "Mr. (um) <noise> OK 5%"]:
        assert ours(s) == original(s), s


def _best_of(fn, arg: str, n: int = 3) -> float:
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn(arg)
        best = min(best, time.perf_counter() - t0)
    return best


def test_cost_grows_linearly_with_a_pathological_reference() -> None:
    """10x longer input costs about 10x (quadratic code would cost 100x); measured side by side."""
    norm = get_normalizer("whisper-english")
    small = _best_of(norm, "a" + "<" * 2000 + " (" * 1000)
    large = _best_of(norm, "a" + "<" * 20000 + " (" * 10000)
    assert large / max(small, 1e-6) < 40, (small, large)
