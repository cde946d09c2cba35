"""Orthographic switch probe and spelling families (audits/probes/orthography.py, normalizers/spelling.py)."""

from __future__ import annotations

import json
import random
from importlib import resources

import pytest

from audits.asr.stats import wilson_interval
from audits.probes.orthography import (
    OrthoFamily,
    default_families,
    find_arm_occurrences,
    find_occurrences,
    orthographic_switch,
    orthographic_switch_by_model,
)
from engine.errors import AuditError, ConfigError
from normalizers.numbers import year_to_words
from normalizers.spelling import GB_US_EXCLUDED, gb_to_us, gb_us_pairs, spelling_map_source, spelling_variants

FAMS = {f.name: f for f in default_families()}

# ------------------------------------------------------------------ spelling list


def test_spelling_map_comes_from_whisper_normalizer_with_exclusions() -> None:
    raw = json.loads(resources.files("whisper_normalizer").joinpath("normalizers/english.json").read_text())
    pairs = gb_us_pairs()
    mapping = gb_to_us()
    assert len(pairs) > 1500  # the maintained list, not a hand-picked sample
    assert mapping["colour"] == "color" and mapping["centre"] == "center" and mapping["organise"] == "organize"
    for excluded in ("practise", "licence", "programme", "tyre", "cheque", "storey", "tonne", "philtre", "aluminium"):
        assert excluded in raw, f"{excluded} should be an entry of the source list"
        assert excluded not in mapping
        assert GB_US_EXCLUDED.get(excluded)
    assert all(gb.isalpha() and us.isalpha() and gb != us for gb, us in pairs)
    # reversed source entries come out as (GB, US)
    assert mapping["archaeological"] == "archeological"
    assert "archeological" not in mapping
    # entries with markup are dropped
    assert not any("<" in gb or "<" in us for gb, us in pairs)
    assert spelling_map_source().startswith("whisper-normalizer==")
    assert spelling_variants("Colour") == {"colour", "color"}
    assert spelling_variants("practice") == {"practice"}


# ------------------------------------------------------------------ matching


def test_gb_us_occurrences_group_by_lexeme_and_skip_names() -> None:
    fam = FAMS["en-gb-us"]
    text = "The colour of the Labour centre. Grey skies, said Mr. Grey about the color."
    occ = find_occurrences(text, fam)
    words = [text[o.start : o.end] for o in occ]
    assert words == ["colour", "centre", "Grey", "color"]  # Labour and Mr. Grey are names
    assert [o.arm for o in occ] == [0, 0, 0, 1]
    assert occ[0].key == occ[3].key != occ[1].key
    # all-caps text carries no case information, so nothing is skipped as a name
    assert find_arm_occurrences("THE LABOUR COLOUR", fam) == [0, 0]


def test_honorifics_need_a_following_name_and_accept_periods() -> None:
    fam = FAMS["honorific-mr"]
    assert find_arm_occurrences("Mr. Smith and Mr Jones met mister Brown", fam) == [0, 0, 1]
    assert find_arm_occurrences("hey mister, and the Mr.", fam) == []
    assert find_arm_occurrences("mister smith", fam) == [1]  # lower-case text: no case to check
    dr = FAMS["honorific-dr"]
    assert find_arm_occurrences("Dr. Who and Doctor Foster, see a doctor", dr) == [0, 1]
    st = FAMS["honorific-st"]
    assert find_arm_occurrences("St. Peter and Saint Paul and the saint", st) == [0, 1]


def test_percent_currency_ok_compounds_digits() -> None:
    assert find_arm_occurrences("rose 5% or five per cent or 5 percent, the percent", FAMS["percent"]) == [0, 2, 1]
    assert find_arm_occurrences("$5, five dollars, the dollar, 5 $", FAMS["currency-usd"]) == [0, 1, 0]
    assert find_arm_occurrences("€3 million or three million euros in the euro area", FAMS["currency-eur"]) == [0, 1]
    assert find_arm_occurrences("OK, okay, O.K. and ok", FAMS["ok-okay"]) == [0, 1, 0, 0]
    comp = FAMS["compounds"]
    assert find_arm_occurrences("policy makers, policy-makers, policymakers, co-operation", comp) == [0, 1, 2, 1]
    assert find_arm_occurrences("anyone and any one of them", comp) == []  # not a default family
    opt = {f.name: f for f in default_families(include_optional_compounds=True)}["compounds"]
    assert find_arm_occurrences("anyone and any one of them", opt) == [2, 0]
    digits = FAMS["digits-words"]
    occ = find_occurrences("In 2016 and twenty sixteen, one of the 3 or three", digits)
    assert [(o.arm, o.key) for o in occ] == [(0, 2016), (1, 2016), (0, 3), (1, 3)]


def test_family_validation() -> None:
    with pytest.raises(ConfigError):
        OrthoFamily("x", (("a",),), kind="k")
    with pytest.raises(ConfigError):
        OrthoFamily("x", (("a",), ("b", "")), kind="k")
    with pytest.raises(ConfigError):
        OrthoFamily("x", (("a", "b"), ("c",)), kind="k", paired=True)
    with pytest.raises(ConfigError):
        OrthoFamily("x", (("a",), ("b",)), kind="k", context="nowhere")
    with pytest.raises(ConfigError):
        orthographic_switch({"1": "a"}, {"1": "b"}, [OrthoFamily("x", (("a",), ("a",)), kind="k")])


# ------------------------------------------------------------------ scoring

GB_SENTENCES = ["the colour is nice", "a centre for all", "we organise it", "her favourite song", "the theatre opened", "good behaviour"]
US_SENTENCES = ["the color is nice", "a center for all", "we organize it", "her favorite song", "the theater opened", "good behavior"]
GB_FAMILY = [FAMS["en-gb-us"]]


def _corpus(n_each: int) -> tuple[dict[str, str], dict[str, str]]:
    """Half the references write GB spellings, half US; returns refs and the other-convention text."""
    refs: dict[str, str] = {}
    flipped: dict[str, str] = {}
    for i in range(n_each):
        j = i % len(GB_SENTENCES)
        refs[f"gb{i}"] = GB_SENTENCES[j]
        flipped[f"gb{i}"] = US_SENTENCES[j]
        refs[f"us{i}"] = US_SENTENCES[j]
        flipped[f"us{i}"] = GB_SENTENCES[j]
    return refs, flipped


def test_copying_model_has_switch_one() -> None:
    refs, _ = _corpus(12)
    res = orthographic_switch(refs, dict(refs), GB_FAMILY, min_clips_per_arm=5)
    assert res.status == "ok"
    assert res.switch == 1.0
    fam = res.families["en-gb-us"]
    assert [(a.arm, a.n, a.hits) for a in fam.arms] == [("en-GB", 12, 12), ("en-US", 12, 12)]
    assert res.ci95 == pytest.approx(wilson_interval(12, 12))


def test_us_only_model_has_switch_zero_on_gb_arm() -> None:
    refs, flipped = _corpus(10)
    hyps = {k: (flipped[k] if k.startswith("gb") else refs[k]) for k in refs}
    res = orthographic_switch(refs, hyps, GB_FAMILY, min_clips_per_arm=5)
    assert res.status == "ok"
    assert res.switch == 0.0
    assert res.limiting_arm == "en-GB"
    assert res.limiting_family == "en-gb-us"
    d = res.to_dict()
    assert d["families"]["en-gb-us"]["arms"]["en-GB"] == {"n": 10, "hits": 0, "p": 0.0, "ci95": list(wilson_interval(0, 10))}
    assert d["families"]["en-gb-us"]["arms"]["en-US"]["p"] == 1.0
    assert d["ci95"] == list(wilson_interval(0, 10))


def test_chance_model_is_near_half() -> None:
    rng = random.Random(7)
    refs, flipped = _corpus(400)
    hyps = {k: (refs[k] if rng.random() < 0.5 else flipped[k]) for k in refs}
    res = orthographic_switch(refs, hyps, GB_FAMILY)
    assert res.status == "ok"
    arms = res.families["en-gb-us"].arms
    assert all(a.n == 400 and 0.42 < a.p < 0.58 for a in arms)
    assert 0.42 < res.switch <= max(a.p for a in arms)
    assert res.switch == min(a.p for a in arms)


def test_min_clips_rule_gives_insufficient_data_not_zero() -> None:
    refs, flipped = _corpus(4)  # 4 clips per arm < 5
    res = orthographic_switch(refs, flipped, GB_FAMILY, min_clips_per_arm=5)
    assert res.status == "insufficient-data"
    assert res.switch is None and res.ci95 is None
    assert "min_clips_per_arm" in res.note or "at least 5" in res.note
    d = res.to_dict()
    assert d["switch"] is None and d["status"] == "insufficient-data"
    assert d["families"]["en-gb-us"]["arms"]["en-GB"]["n"] == 4  # counts are still reported
    # the same data passes with a lower minimum
    assert orthographic_switch(refs, flipped, GB_FAMILY, min_clips_per_arm=4).switch == 0.0


def test_single_arm_is_flagged_not_scored() -> None:
    refs = {f"u{i}": US_SENTENCES[i % 6] for i in range(10)}
    res = orthographic_switch(refs, dict(refs), GB_FAMILY)
    assert res.status == "single-arm"
    assert res.switch is None
    assert res.families["en-gb-us"].arms[1].n == 10


def test_absent_word_and_mixed_reference_are_not_counted() -> None:
    refs = {"a": "the colour and the color", "b": "the colour", "c": "the colour"}
    hyps = {"a": "the color", "b": "something else", "c": "the colour and the color"}
    res = orthographic_switch(refs, hyps, GB_FAMILY, min_clips_per_arm=1)
    fam = res.families["en-gb-us"]
    assert fam.n_ref_mixed == 1
    assert fam.n_hyp_absent == 1
    assert (fam.arms[0].n, fam.arms[0].hits) == (1, 0)  # mixed hypothesis is a miss


def test_pooling_by_arm_index_across_families() -> None:
    fams = [FAMS["en-gb-us"], FAMS["honorific-mr"]]
    refs: dict[str, str] = {}
    hyps: dict[str, str] = {}
    for i in range(3):  # 3 clips per arm per family: below the minimum alone, 6 pooled
        refs[f"g{i}"], hyps[f"g{i}"] = "the colour", "the colour"
        refs[f"u{i}"], hyps[f"u{i}"] = "the color", "the colour"
        refs[f"m{i}"], hyps[f"m{i}"] = "Mr. Smith", "Mr. Smith"
        refs[f"s{i}"], hyps[f"s{i}"] = "mister Smith", "mister Smith"
    unpooled = orthographic_switch(refs, hyps, fams, min_clips_per_arm=5)
    assert unpooled.status == "insufficient-data"
    pooled = orthographic_switch(refs, hyps, fams, min_clips_per_arm=5, pool=True)
    assert pooled.status == "ok"
    assert [(a.n, a.hits) for a in pooled.pooled] == [(6, 6), (6, 3)]
    assert pooled.switch == 0.5
    assert pooled.limiting_arm.startswith("arm1:")
    assert pooled.to_dict()["pooled"][pooled.limiting_arm]["n"] == 6


def test_unpooled_switch_is_worst_family() -> None:
    fams = [FAMS["en-gb-us"], FAMS["digits-words"]]
    refs: dict[str, str] = {}
    hyps: dict[str, str] = {}
    for i in range(5):
        refs[f"g{i}"], hyps[f"g{i}"] = "the colour", "the colour"
        refs[f"u{i}"], hyps[f"u{i}"] = "the color", "the color"
        refs[f"d{i}"], hyps[f"d{i}"] = f"in {2000 + i}", f"in {2000 + i}"
        refs[f"w{i}"], hyps[f"w{i}"] = "twenty sixteen", "2016"
    res = orthographic_switch(refs, hyps, fams, min_clips_per_arm=5)
    assert res.families["en-gb-us"].summary.switch == 1.0
    assert res.switch == 0.0 and res.limiting_family == "digits-words" and res.limiting_arm == "words"


def test_missing_and_failed_hypotheses_are_counted() -> None:
    refs, _ = _corpus(6)
    hyps: dict[str, str | None] = dict(refs)
    del hyps["gb0"]
    hyps["gb1"] = None
    res = orthographic_switch(refs, hyps, GB_FAMILY)
    assert res.n_missing_hyp == 1 and res.n_failed_hyp == 1
    assert res.n_clips == len(refs) - 2
    assert res.families["en-gb-us"].arms[0].n == 4


def test_empty_inputs_raise_clear_errors() -> None:
    with pytest.raises(AuditError, match="no references"):
        orthographic_switch({}, {"a": "x"}, GB_FAMILY)
    with pytest.raises(AuditError, match="no utterance id"):
        orthographic_switch({"a": "the colour"}, {"b": "the colour"}, GB_FAMILY)
    with pytest.raises(ConfigError):
        orthographic_switch({"a": "x"}, {"a": "x"}, [])
    with pytest.raises(ConfigError):
        orthographic_switch({"a": "x"}, {"a": "x"}, GB_FAMILY, min_clips_per_arm=0)


def test_by_model_on_default_families() -> None:
    refs = {}
    for i in range(6):
        refs[f"a{i}"] = f"Mr. Jones paid $5 for the colour of {2010 + i} OK"
        refs[f"b{i}"] = f"mister Jones paid five dollars for the color of {year_to_words(2011 + i)} okay"
    out = orthographic_switch_by_model(refs, {"copier": dict(refs), "other": {k: "nothing" for k in refs}})
    assert out["copier"]["status"] == "ok" and out["copier"]["switch"] == 1.0
    for name in ("honorific-mr", "currency-usd", "en-gb-us", "ok-okay", "digits-words"):
        assert out["copier"]["families"][name]["switch"] == 1.0, name
    assert out["other"]["status"] == "insufficient-data" and out["other"]["switch"] is None
