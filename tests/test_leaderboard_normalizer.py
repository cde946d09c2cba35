"""``open-asr-leaderboard`` gives the Open ASR Leaderboard's own output (normalizers/open_asr_leaderboard.py).

The fixture holds the leaderboard's code's outputs on 3,718 texts (its README says how they were
made); the normalizer must match every one exactly. The number rules are also compared with the
``whisper-normalizer`` package's implementation (the leaderboard keeps Whisper's unchanged) on
random word sequences.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audits.normalizing import get_normalizer
from audits.recipes import load_recipe, parse_recipe, sweep_normalizer, with_normalizer
from engine.errors import ConfigError
from normalizers import leaderboard_tables, open_asr_leaderboard
from normalizers.leaderboard_tables import (
    COMPOUNDS,
    CONTRACTION_SUFFIXES,
    FILLERS,
    LEADERBOARD_COMMIT,
    NAMES,
    TITLES,
    WORD_EXPANSIONS,
    leaderboard_spellings,
)
from normalizers.whisper_numbers import NUMBER_WORDS, normalize_numbers

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "open-asr-leaderboard-normalizer"
CATEGORIES = {
    "fillers",
    "compounds",
    "acronyms",
    "names",
    "numbers",
    "currencies",
    "spellings",
    "contractions",
    "punctuation",
    "unicode",
    "pathological",
    "voxpopuli",
    "mixed",
}


@lru_cache(maxsize=1)
def cases() -> tuple[dict[str, str], ...]:
    lines = (FIXTURE / "cases.jsonl").read_text(encoding="utf-8").split("\n")  # not splitlines: inputs hold U+2028
    return tuple(json.loads(line) for line in lines if line)


def test_the_fixture_covers_every_category() -> None:
    rows = cases()
    counts = Counter(r["category"] for r in rows)
    assert len(rows) >= 2000 and set(counts) == CATEGORIES, counts
    assert min(counts.values()) >= 20, counts
    assert len({r["input"] for r in rows}) == len(rows)  # every input once


def test_equals_the_leaderboard_on_every_fixture_text() -> None:
    norm = get_normalizer("open-asr-leaderboard")
    wrong = [(r["category"], r["input"], r["expected"], got) for r in cases() if (got := norm(r["input"])) != r["expected"]]
    assert not wrong, f"{len(wrong)} of {len(cases())} differ, e.g.:\n" + "\n".join(map(repr, wrong[:10]))


def test_the_fixture_tells_the_two_normalizers_apart() -> None:
    """The fixture can fail: the classic normalizer differs from the leaderboard's on many of its texts, in every category
    the leaderboard changed."""
    classic = get_normalizer("whisper-english")
    differ = Counter(r["category"] for r in cases() if classic(r["input"]) != r["expected"])
    for category in ("fillers", "compounds", "acronyms", "names", "spellings", "contractions", "voxpopuli"):
        assert differ[category] >= 10, differ


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z']+", text.lower()))


def test_every_list_entry_is_exercised_by_the_fixture() -> None:
    """A word missing from one of our lists would show as a difference only if some input holds it."""
    words: set[str] = set()
    texts = " ".join(r["input"].lower() for r in cases())
    for r in cases():
        words |= _words(r["input"])
    needed = {*NAMES, *FILLERS, *leaderboard_spellings(), *(w for w, _ in WORD_EXPANSIONS), *(a for a, _ in TITLES)}
    missing = sorted(w for w in needed if w not in words and w not in texts)
    assert not missing, missing[:20]
    for phrase, _ in COMPOUNDS:
        a, b = phrase.split()
        assert f"{a}-{b}" in texts and f"{a} {b}" in texts, phrase
    for ending, _ in CONTRACTION_SUFFIXES:
        assert f"they{ending} " in texts, ending


def test_version_names_the_commit_the_fixture_was_made_from() -> None:
    norm = get_normalizer("open-asr-leaderboard")
    assert norm.name == "open-asr-leaderboard"
    assert norm.version == f"huggingface/open_asr_leaderboard@{LEADERBOARD_COMMIT}"
    assert LEADERBOARD_COMMIT in (FIXTURE / "README.md").read_text(encoding="utf-8")


def test_the_deprecated_name_stays_the_classic_normalizer() -> None:
    old, classic = get_normalizer("open-asr-english"), get_normalizer("whisper-english")
    assert (old.name, old.version) == (classic.name, classic.version)
    assert old("Wi-Fi, OK?") == classic("Wi-Fi, OK?") == "wi fi ok"
    assert get_normalizer("open-asr-leaderboard")("Wi-Fi, OK?") == "wifi okay"


NUMBER_TOKENS = sorted(NUMBER_WORDS) + [
    "a",
    "half",
    "x",
    "the",
    "0",
    "1",
    "2.5",
    "3.0",
    "$5",
    "£2",
    "¢7",
    "€1",
    "5.",
    "007",
    "12",
    "1s",
    "25th",
    "4%",
    "$",
    "1960s",
    "2.50",
    "٣",
    "0.5",
    "1.2.3",
    "10",
    "99",
]


@given(st.lists(st.sampled_from(NUMBER_TOKENS), min_size=1, max_size=10))
@settings(max_examples=600, deadline=None)
def test_number_rules_equal_whispers(words: list[str]) -> None:
    text = " ".join(words)
    assert normalize_numbers(text) == _whisper_numbers()(text)


@lru_cache(maxsize=1)
def _whisper_numbers():  # type: ignore[no-untyped-def]
    from whisper_normalizer.english import EnglishNumberNormalizer

    return EnglishNumberNormalizer()


def test_numbers_past_pythons_digit_limit_do_not_raise() -> None:
    """The leaderboard's code raises ValueError on these; ours keeps an over-long digit run as a word and prints big values."""
    norm = get_normalizer("open-asr-leaderboard")
    assert norm("1" * 5000) == "1" * 5000
    assert norm("one " * 4290 + "decillion") == "1" * 4290 + "0" * 33
    v = int("1" * 4000)  # a multiplier after a number multiplies its last three digits, as in the original
    assert norm("1" * 4000 + " decillion and two") == str(v // 1000 * 1000 + v % 1000 * 10**33 + 2)


def test_a_different_spelling_list_stops_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    for fn in (leaderboard_tables.leaderboard_spellings, open_asr_leaderboard.leaderboard_english):
        fn.cache_clear()
    monkeypatch.setattr(leaderboard_tables, "SPELLINGS_SHA256", "0" * 64)
    try:
        with pytest.raises(ConfigError, match="normalizer 'open-asr-leaderboard': .*english.json.*whisper-normalizer==0.1.15"):
            get_normalizer("open-asr-leaderboard")
    finally:
        monkeypatch.undo()
        for fn in (leaderboard_tables.leaderboard_spellings, open_asr_leaderboard.leaderboard_english):
            fn.cache_clear()
    assert get_normalizer("open-asr-leaderboard")("colour") == "color"


def test_no_leaderboard_code_is_imported() -> None:
    """The leaderboard's package is ``normalizer``; nothing in the product, scripts or tests imports it."""
    pattern = re.compile(r"^\s*(from|import)\s+normalizer(\s|\.|$)", re.M)
    offenders = [
        str(p.relative_to(ROOT))
        for d in ("normalizers", "engine", "audits", "scripts", "tests")
        for p in (ROOT / d).rglob("*.py")
        if pattern.search(p.read_text(encoding="utf-8"))
    ]
    assert not offenders, offenders


def test_a_sweep_of_the_study_line_up_defaults_to_the_leaderboard_normalizer() -> None:
    demo = load_recipe("demo")
    assert demo.normalizer == "whisper-english"  # the demo recipes keep the classic normalizer (their README figures)
    assert sweep_normalizer(demo, "rweq", None)[0] == "open-asr-leaderboard"
    assert sweep_normalizer(demo, " rweq ", None)[1] is not None  # said on the console
    assert sweep_normalizer(demo, "rweq", "whisper-english") == ("whisper-english", None)
    assert sweep_normalizer(demo, "whisper-tiny.en,whisper-base", None) == ("whisper-english", None)
    assert sweep_normalizer(demo, "study", None) == ("whisper-english", None)
    ours = with_normalizer(demo, "open-asr-leaderboard")
    assert sweep_normalizer(ours, "rweq", None) == ("open-asr-leaderboard", None)
    with pytest.raises(ConfigError, match="did you mean 'open-asr-leaderboard'"):
        with_normalizer(demo, "open-asr-leaderbord")


def test_the_deprecated_name_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="audits.recipes"):
        rec = parse_recipe({"dataset": "x.jsonl", "models": [], "normalizer": "open-asr-english"}, "r.yaml")
    assert rec.normalizer == "open-asr-english"
    assert "deprecated name of 'whisper-english'" in caplog.text and "'open-asr-leaderboard'" in caplog.text


def test_run_records_the_normalizer_and_its_version(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from audits.cli.main import app

    out = tmp_path / "run"
    res = CliRunner().invoke(
        app, ["run", "score-predictions", "--limit", "6", "--normalizer", "open-asr-leaderboard", "--out", str(out)], catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["normalizer"] == {"name": "open-asr-leaderboard", "version": f"huggingface/open_asr_leaderboard@{LEADERBOARD_COMMIT}"}
    assert summary["recipe"]["normalizer"] == "open-asr-leaderboard"
