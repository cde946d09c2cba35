"""Number matching across digits and words (normalizers/numbers.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normalizers.numbers import (
    count_number,
    find_numbers,
    int_to_words,
    number_forms,
    number_values,
    ordinal_words,
    parse_number_words,
    text_contains_number,
    year_to_words,
)


@pytest.mark.parametrize(
    "text, value",
    [
        ("2", 2),
        ("two", 2),
        ("2016", 2016),
        ("twenty sixteen", 2016),
        ("twenty-sixteen", 2016),
        ("two thousand sixteen", 2016),
        ("two thousand and sixteen", 2016),
        ("nineteen oh five", 1905),
        ("nineteen hundred", 1900),
        ("nineteen eighty-four", 1984),
        ("the nineteen nineties", 1990),
        ("the 1990s", 1990),
        ("1,000", 1000),
        ("one thousand", 1000),
        ("a thousand", 1000),
        ("a hundred and five", 105),
        ("one hundred five", 105),
        ("three hundred and twenty-one thousand four hundred", 321400),
        ("two million three thousand and six", 2_003_006),
        ("5 million", 5_000_000),
        ("2.5bn", 2_500_000_000),
        ("3rd", 3),
        ("third", 3),
        ("twenty-first", 21),
        ("the hundredth", 100),
        ("5%", 5),
        ("five percent", 5),
        ("2.5", Decimal("2.5")),
        ("two point five", Decimal("2.5")),
        ("point five", Decimal("0.5")),
        ("zero point oh two", Decimal("0.02")),
        ("minus five", -5),
        ("$50", 50),
        ("€1,500.", 1500),
    ],
)
def test_single_number_reads_to_value(text: str, value: object) -> None:
    spans = find_numbers(text)
    assert len(spans) == 1, spans
    assert spans[0].value == value


@pytest.mark.parametrize(
    "text",
    ["to", "too", "for", "won", "ate", "tu", "I want to go too", "wait a second", "no oh dear", "a lot", "point of order"],
)
def test_words_that_sound_like_numbers_are_not_numbers(text: str) -> None:
    assert find_numbers(text) == []
    assert not text_contains_number(text, 2)
    assert not text_contains_number(text, 4)


def test_the_second_is_ordinal_but_a_second_is_time() -> None:
    assert number_values("the second round") == [2]
    assert number_values("her second term") == [2]
    assert number_values("give me a second") == []
    assert number_values("the twenty-second") == [22]


def test_digits_match_words_both_ways() -> None:
    assert text_contains_number("we met in twenty sixteen", "2016")
    assert text_contains_number("we met in 2016", "twenty sixteen")
    assert text_contains_number("two thousand and sixteen was a year", 2016)
    assert text_contains_number("it costs a thousand euros", "1,000")
    assert text_contains_number("she came 3rd", "third")
    assert text_contains_number("it rose five per cent", "5%")
    assert text_contains_number("growth of two point five", Decimal("2.5"))
    assert text_contains_number("growth of 2.5", "two point five")
    assert not text_contains_number("we met in 2015", 2016)
    assert not text_contains_number("twenty fifteen", 2016)
    assert not text_contains_number("", 2016)


def test_year_reading_keeps_its_components() -> None:
    # "ten twenty" reads as a year, but a target of 20 is still found in it
    assert number_values("ten twenty", include_alternatives=False) == [1020]
    assert text_contains_number("at ten twenty", 20)
    assert text_contains_number("at ten twenty", 1020)


def test_punctuation_separates_numbers() -> None:
    assert number_values("I have two, three. Twenty people") == [2, 3, 20]
    assert number_values("born in ninety. Nineteen came", include_alternatives=False) == [90, 19]


def test_count_number_counts_every_form() -> None:
    assert count_number("2 apples and two pears and to go", 2) == 2
    assert count_number("twenty sixteen and 2016", 2016) == 2


def test_parse_number_words_spans_are_token_indices() -> None:
    tokens = ["in", "the", "year", "two", "thousand", "and", "sixteen", "we", "had", "5", "million", ",", "then", "3rd"]
    assert parse_number_words(tokens) == [(2016, 3, 7), (5_000_000, 9, 11), (3, 13, 14)]
    assert parse_number_words(["twenty-one", "pilots"]) == [(21, 0, 1)]
    assert parse_number_words([]) == []


def test_number_forms_is_value_based() -> None:
    forms = number_forms("2016")
    assert {"2016", "2,016", "twenty sixteen", "two thousand sixteen", "two thousand and sixteen"} <= forms
    assert number_forms("twenty sixteen") == forms
    assert number_forms("two thousand and sixteen") == forms
    assert {"1000", "1,000", "one thousand", "a thousand"} <= number_forms("1,000")
    assert number_forms("3rd") == {"3rd", "third"}
    assert number_forms("third") == {"3rd", "third"}
    assert {"5%", "five percent", "five per cent", "5 percent"} <= number_forms("5%")
    assert "two point five" in number_forms("2.5")
    assert "twenty-one" in number_forms(21)
    with pytest.raises(ValueError):
        number_forms("hello")
    with pytest.raises(ValueError):
        number_forms("two and three, four")


def test_renderers() -> None:
    assert int_to_words(0) == "zero"
    assert int_to_words(105, british_and=True) == "one hundred and five"
    assert int_to_words(2016) == "two thousand sixteen"
    assert int_to_words(2016, british_and=True) == "two thousand and sixteen"
    assert int_to_words(1100, a_for_one=True) == "a thousand one hundred"
    assert year_to_words(2016) == "twenty sixteen"
    assert year_to_words(1905) == "nineteen oh five"
    assert year_to_words(1900) == "nineteen hundred"
    assert year_to_words(2000) is None
    assert ordinal_words(21) == "twenty first"
    assert ordinal_words(100) == "one hundredth"
    with pytest.raises(TypeError):
        int_to_words(2.5)  # type: ignore[arg-type]


def _single_value(text: str) -> object:
    tokens = text.split()
    parsed = parse_number_words(tokens)
    assert len(parsed) == 1, (text, parsed)
    value, start, end = parsed[0]
    assert (start, end) == (0, len(tokens)), (text, parsed)
    return value


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=0, max_value=10**6), st.booleans(), st.booleans(), st.booleans())
def test_words_round_trip(n: int, british_and: bool, hyphen: bool, a_for_one: bool) -> None:
    text = int_to_words(n, british_and=british_and, hyphen=hyphen, a_for_one=a_for_one)
    assert _single_value(text) == n
    assert _single_value(f"{n:,}") == n
    assert text_contains_number(f"and then {text} came", n)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1010, max_value=9999))
def test_year_round_trip(n: int) -> None:
    text = year_to_words(n)
    if text is not None:
        assert _single_value(text) == n


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=10**6))
def test_ordinal_round_trip(n: int) -> None:
    spans = find_numbers("the " + ordinal_words(n))
    assert [(s.value, s.ordinal) for s in spans] == [(n, True)]
