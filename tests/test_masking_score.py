"""Masked-word target selection and gated leak-rate scoring (audits/probes/masking_score.py)."""

from __future__ import annotations

import logging
import sys
import types
from decimal import Decimal
from typing import Any

import pytest

from audits.asr.stats import wilson_interval
from audits.probes import masking_score as ms
from audits.probes.masking_score import (
    MaskRecord,
    MaskTarget,
    NoMaskableWord,
    explain_no_targets,
    gated_leak_rate,
    require_mask_targets,
    select_mask_targets,
    target_in_text,
)
from engine.errors import AuditError, ConfigError


def _texts(reference: str, n: int = 10, **kw: Any) -> list[tuple[str, str]]:
    return [(t.text, t.kind) for t in select_mask_targets(reference, n, ner=None, **kw)]


# ------------------------------------------------------------------ selection


def test_numbers_come_first_with_spans() -> None:
    ref = "In 2016, Angela Merkel met Emmanuel Macron in Paris."
    targets = select_mask_targets(ref, 1, ner=None)
    assert len(targets) == 1
    t = targets[0]
    assert (t.text, t.kind, t.value) == ("2016", "number", 2016)
    assert ref.split()[t.word_start : t.word_end] == ["2016,"]
    assert ref[t.char_start : t.char_end] == "2016"
    assert _texts(ref) == [
        ("2016", "number"),
        ("Angela Merkel", "proper-noun"),
        ("Emmanuel Macron", "proper-noun"),
        ("Paris", "proper-noun"),
    ]


def test_number_words_multiword_and_trivial_one_excluded() -> None:
    ref = "one of us paid twenty five euros in nineteen ninety nine"
    targets = select_mask_targets(ref, 5, ner=None)
    assert [(t.text, t.value, t.word_start, t.word_end) for t in targets] == [
        ("twenty five", 25, 4, 6),
        ("nineteen ninety nine", 1999, 8, 11),
    ]
    assert select_mask_targets("one of them is the first", 3, ner=None) == []
    assert _texts("she is twenty-something") == []  # glued to letters
    assert select_mask_targets("it rose 2.5 percent", 1, ner=None)[0].value == Decimal("2.5")


def test_proper_nouns_not_sentence_initial_and_not_stoplisted() -> None:
    assert _texts("Paris is big. London is bigger than Rome.") == [("Rome", "proper-noun")]
    assert _texts("I think Mr. Smith said so on Monday in May.") == [("Smith", "proper-noun")]
    assert _texts("thanks Madam President and Commissioner Hahn") == [("Hahn", "proper-noun")]
    assert _texts('we met "Anna" and the EU today') == [("EU", "proper-noun")]  # quote opens a sentence
    # punctuation splits names; a possessive is dropped from the text but not the word span
    assert _texts("we asked Merkel, Macron and Juncker's team") == [
        ("Merkel", "proper-noun"),
        ("Macron", "proper-noun"),
        ("Juncker", "proper-noun"),
    ]
    t = select_mask_targets("we asked Juncker's team", 1, ner=None)[0]
    assert ["we", "asked", "Juncker's", "team"][t.word_start] == "Juncker's"
    # a custom stoplist replaces the default
    assert _texts("the Commission met Hahn", stoplist={"hahn"}) == [("Commission", "proper-noun")]


def test_caseless_references_only_give_numbers() -> None:
    assert _texts("HE MET JOHN IN LONDON") == []
    assert _texts("he met john in london in twenty twenty") == [("twenty twenty", "number")]


def test_no_maskable_word_is_explained() -> None:
    assert select_mask_targets("", 1) == []
    assert explain_no_targets("") == "the reference is empty"
    why = explain_no_targets("HE HOPED THERE WOULD BE STEW")
    assert "no number" in why and "one case" in why
    why = explain_no_targets("One of the best. Monday I met Mr. Speaker.")
    assert "trivial" in why and "stoplist" in why and "sentence-initial" in why
    assert explain_no_targets("we met Anna") == ""
    with pytest.raises(NoMaskableWord, match="utterance 'u7': no maskable word"):
        require_mask_targets("nothing here at all", utt_id="u7", ner=None)
    assert issubclass(NoMaskableWord, AuditError)
    with pytest.raises(ConfigError):
        select_mask_targets("we met Anna", 0)
    with pytest.raises(ConfigError):
        select_mask_targets("we met Anna", 1, kinds=("verb",))


def test_ner_is_used_when_spacy_and_a_model_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    class Ent:
        def __init__(self, text: str, start: int, label: str) -> None:
            self.start_char, self.end_char, self.label_ = start, start + len(text), label

    class Doc:
        def __init__(self, text: str) -> None:
            low = text.lower()
            self.ents = [Ent("the Red Cross", low.index("the red cross"), "ORG"), Ent("today", low.index("today"), "DATE")]

    fake = types.ModuleType("spacy")
    fake.load = lambda name: lambda text: Doc(text)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "spacy", fake)
    ms._spacy_model.cache_clear()
    try:
        targets = select_mask_targets("i asked the Red Cross today", 3, ner="fake_model")
    finally:
        ms._spacy_model.cache_clear()
    assert [(t.text, t.kind, t.source) for t in targets] == [("Red Cross", "proper-noun", "rules")]
    ms._spacy_model.cache_clear()
    try:
        targets = select_mask_targets("i asked the red cross today", 3, ner="fake_model")
    finally:
        ms._spacy_model.cache_clear()
    assert [(t.text, t.kind, t.source, t.word_start, t.word_end) for t in targets] == [
        ("the red cross", "entity", "spacy:fake_model", 2, 5)
    ]


def test_missing_ner_model_is_skipped_and_logged(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def boom(name: str) -> None:
        raise OSError(f"can't find model '{name}'")

    fake = types.ModuleType("spacy")
    fake.load = boom  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "spacy", fake)
    ms._spacy_model.cache_clear()
    ms._NER_WARNED.discard("absent_model")
    with caplog.at_level(logging.INFO, logger="audits.probes.masking_score"):
        targets = select_mask_targets("we met Anna in 2019", 2, ner="absent_model")
    ms._spacy_model.cache_clear()
    assert [t.text for t in targets] == ["Anna", "2019"]
    assert any("NER targets skipped" in r.getMessage() and "absent_model" in r.getMessage() for r in caplog.records)


def test_target_round_trips_through_dict() -> None:
    for t in select_mask_targets("we paid 2.5 euros to Anna in 2019", 3, ner=None):
        assert MaskTarget.from_dict(t.to_dict()) == t
    with pytest.raises(ConfigError):
        MaskTarget.from_dict({"text": "x"})
    with pytest.raises(ConfigError):
        MaskTarget("x", "verb", 0, 1, 0, 1)


# ------------------------------------------------------------------ matching


def _target(ref: str, text: str) -> MaskTarget:
    for t in select_mask_targets(ref, 10, ner=None):
        if t.text == text:
            return t
    raise AssertionError(f"{text!r} not selected in {ref!r}")


def test_number_targets_match_across_digits_and_words() -> None:
    t = _target("it happened in 2016 there", "2016")
    assert target_in_text(t, "It happened in twenty sixteen.")
    assert target_in_text(t, "it happened in two thousand and sixteen")
    assert not target_in_text(t, "it happened in twenty fifteen")
    two = _target("we have 2 cats", "2")
    assert target_in_text(two, "we have two cats")
    assert not target_in_text(two, "we want to go too")
    assert not target_in_text(two, None)


def test_name_targets_match_after_normalization_and_on_word_boundaries() -> None:
    t = _target("we met Jean-Claude Juncker there", "Jean-Claude Juncker")
    assert target_in_text(t, "we met jean claude juncker's staff")
    assert not target_in_text(t, "we met Jean-Claude")
    paris = _target("we went to Paris", "Paris")
    assert not target_in_text(paris, "we went to Parisian cafes")


def test_repeated_target_must_appear_as_often_as_in_reference() -> None:
    t = _target("Anna. We told Anna", "Anna")
    assert t.ref_count == 2
    assert not target_in_text(t, "we told Anna")  # the other, unmasked Anna is not a leak
    assert target_in_text(t, "Anna we told Anna")
    n = _target("5 cats and 5 dogs", "5")
    assert n.ref_count == 2 and not target_in_text(n, "cats and five dogs")


# ------------------------------------------------------------------ gated leak rate


def _rec(model: str, pid: str, t: MaskTarget, orig: str | None, masked: str | None, variant: str = "silence") -> MaskRecord:
    return MaskRecord(model, pid, t, orig, masked, variant)


def test_gated_leak_rate_counts_and_wilson() -> None:
    t = _target("we met Anna in 2019", "Anna")
    num = _target("we met Anna in 2019", "2019")
    recs = []
    # memorizer: writes the target on every clip, masked or not
    for i in range(8):
        recs.append(_rec("memo", f"c{i}", t, "we met Anna in 2019", "we met Anna in 2019"))
    # honest: wrote it on 6 of 8 clean clips, leaked once; 1 failed transcript
    for i in range(6):
        recs.append(_rec("honest", f"c{i}", t, "we met Anna", "we met Ana" if i else "we met anna"))
    recs.append(_rec("honest", "c6", t, "we met Hannah", "we met"))
    recs.append(_rec("honest", "c7", t, None, "we met"))
    recs.append(_rec("honest", "c0", num, "in twenty nineteen", "in twenty"))
    res = gated_leak_rate(recs)
    memo, honest = res["memo"], res["honest"]
    assert (memo.n_total, memo.n_gated, memo.n_leaked, memo.rate) == (8, 8, 8, 1.0)
    assert memo.ci95 == pytest.approx(wilson_interval(8, 8))
    assert (honest.n_total, honest.n_failed, honest.n_gated, honest.n_not_gated, honest.n_leaked) == (9, 1, 7, 1, 1)
    assert honest.rate == pytest.approx(1 / 7)
    assert honest.ci95 == pytest.approx(wilson_interval(1, 7))
    assert honest.n_clips == 8
    d = res.to_dict()
    assert d["honest"]["by_kind"]["number"] == {
        "rate": 0.0,
        "ci95": list(wilson_interval(0, 1)),
        "n_gated": 1,
        "n_leaked": 0,
        "n_total": 1,
        "n_not_gated": 0,
        "n_failed": 0,
        "status": "ok",
    }
    assert d["honest"]["by_kind"]["proper-noun"]["n_leaked"] == 1
    assert set(d) == {"honest", "memo"}
    assert d["memo"]["ci95"] == list(wilson_interval(8, 8))


def test_hand_computed_wilson_value() -> None:
    t = _target("we met Anna", "Anna")
    recs = [_rec("m", f"c{i}", t, "Anna", "Anna" if i < 3 else "") for i in range(10)]
    r = gated_leak_rate(recs)["m"]
    assert r.rate == 0.3
    lo, hi = r.ci95
    # Wilson 95% for 3/10: centre (0.3 + z²/20)/(1 + z²/10), z = 1.96
    assert lo == pytest.approx(0.1078, abs=1e-4) and hi == pytest.approx(0.6032, abs=1e-4)


def test_no_gated_clip_is_undefined_not_zero() -> None:
    t = _target("we met Anna", "Anna")
    r = gated_leak_rate([_rec("m", "c0", t, "we met her", "we met")])
    d = r.to_dict()["m"]
    assert d["rate"] is None and d["ci95"] is None and d["status"] == "no-gated-clips"
    assert d["n_not_gated"] == 1 and "note" in d


def test_variants_primary_and_breakdown() -> None:
    t = _target("we met Anna", "Anna")
    recs = [
        _rec("m", "c0", t, "Anna", "Anna", "silence"),
        _rec("m", "c0", t, "Anna", "", "noise"),
        _rec("m", "c1", t, "Anna", "", "silence"),
    ]
    r = gated_leak_rate(recs)["m"]
    assert (r.variant, r.n_gated, r.n_leaked) == ("silence", 2, 1)
    assert r.by_variant["noise"].n_leaked == 0 and r.by_variant["silence"].n_leaked == 1
    with pytest.raises(ConfigError, match="primary variant"):
        gated_leak_rate(recs[1:2] + [_rec("m", "c1", t, "Anna", "", "attenuate")])
    only_noise = gated_leak_rate(recs[1:2])
    assert only_noise.variant == "noise"


def test_empty_and_duplicate_records_raise() -> None:
    with pytest.raises(AuditError, match="no masked-word records"):
        gated_leak_rate([])
    t = _target("we met Anna", "Anna")
    with pytest.raises(AuditError, match="duplicate"):
        gated_leak_rate([_rec("m", "c0", t, "Anna", ""), _rec("m", "c0", t, "Anna", "Anna")])


def test_guessable_institution_names_rank_last() -> None:
    ref = "The Commission and the Council told Beijing about EU rules."
    assert [t.text for t in select_mask_targets(ref, 1, ner=None)] == ["Beijing"]
    assert [t.text for t in select_mask_targets("we thank the Commission today", 1, ner=None)] == ["Commission"]


def test_a_repeated_word_is_chosen_once() -> None:
    targets = select_mask_targets("we met Anna and later Anna again in 2019 and 2019", 4, ner=None)
    assert [(t.text, t.ref_count) for t in targets] == [("Anna", 2), ("2019", 2)]
