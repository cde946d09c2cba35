"""The word lists of the Open ASR Leaderboard's English normalizer, as data.

The leaderboard (huggingface/open_asr_leaderboard, Apache-2.0) extended Whisper's English
normalizer with fillers, contractions, multi-word compounds, name variants and spelling edits.
These lists are facts a normalizer needs in order to give the leaderboard's output; they are
transcribed here from ``normalizer/normalizer.py`` and ``normalizer/english_abbreviations.py`` at
:data:`LEADERBOARD_COMMIT` (the code itself is not copied; ``normalizers/open_asr_leaderboard.py``
is this project's implementation). The en-GB -> en-US spelling list is Whisper's (``english.json``
in the ``whisper-normalizer`` package, MIT) with the leaderboard's edits in :data:`SPELLING_EDITS`;
:func:`leaderboard_spellings` checks the result against the digest of the leaderboard's list.

Source of the lists: Open ASR Leaderboard, Copyright 2022 The OpenAI team and The HuggingFace
Team, Apache License 2.0 (https://github.com/huggingface/open_asr_leaderboard).
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from importlib import metadata, resources
from types import MappingProxyType
from typing import Mapping

LEADERBOARD_REPO = "huggingface/open_asr_leaderboard"
LEADERBOARD_COMMIT = "d1e99b25524814332d6868a5645e568670834cfb"
"""The leaderboard commit (2026-08-21) whose English normalizer this follows; its normalizer files
last changed in d589a09a261b5f37d0fa44bbcea981f03421f316 (2026-06-22)."""

FILLERS: tuple[str, ...] = (
    "hmm",
    "mm",
    "mhm",
    "mmm",
    "uh",
    "um",
    "ah",
    "aha",
    "ahh",
    "ahm",
    "eh",
    "ehehe",
    "em",
    "hm",
    "huh",
    "hum",
    "mhum",
    "uhm",
    "umm",
    "uhuh",
)
"""Whole words deleted before anything else (Whisper's list was the first six)."""

WORD_EXPANSIONS: tuple[tuple[str, str], ...] = (
    ("won't", "will not"),
    ("can't", "can not"),
    ("let's", "let us"),
    ("ain't", "aint"),
    ("y'all", "you all"),
    ("wanna", "want to"),
    ("gotta", "got to"),
    ("gonna", "going to"),
    ("i'ma", "i am going to"),
    ("imma", "i am going to"),
    ("woulda", "would have"),
    ("coulda", "could have"),
    ("shoulda", "should have"),
    ("ma'am", "madam"),
)
"""Whole words spelled out, in the leaderboard's order. Unlike the ``whisper-normalizer`` package it
does not expand "kinda", "sorta", "dunno" or "cause"."""

TITLES: tuple[tuple[str, str], ...] = (
    ("mr", "mister"),
    ("mrs", "missus"),
    ("st", "saint"),
    ("dr", "doctor"),
    ("prof", "professor"),
    ("capt", "captain"),
    ("gov", "governor"),
    ("ald", "alderman"),
    ("gen", "general"),
    ("sen", "senator"),
    ("rep", "representative"),
    ("pres", "president"),
    ("rev", "reverend"),
    ("hon", "honorable"),
    ("asst", "assistant"),
    ("assoc", "associate"),
    ("lt", "lieutenant"),
    ("col", "colonel"),
    ("jr", "junior"),
    ("sr", "senior"),
    ("esq", "esquire"),
)
"""Whole-word abbreviations; each becomes the word followed by a space."""

PERFECT_TENSES: tuple[tuple[str, str], ...] = (
    ("'d been", " had been"),
    ("'s been", " has been"),
    ("'d gone", " had gone"),
    ("'s gone", " has gone"),
    ("'d done", " had done"),
    ("'s got", " has got"),
)
"""Contractions before a past participle (the text must end a word after them)."""

IS_CONTRACTION_WORDS: tuple[str, ...] = (
    "it",
    "he",
    "she",
    "what",
    "that",
    "who",
    "here",
    "there",
    "how",
    "when",
    "where",
    "why",
    "this",
)
"""Words whose "'s" means "is"; Whisper expands every "'s" (so "john's" became "john is")."""

CONTRACTION_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("n't", " not"),
    ("'re", " are"),
    ("'s", " is"),
    ("'d", " would"),
    ("'ll", " will"),
    ("'t", " not"),
    ("'ve", " have"),
    ("'m", " am"),
)
"""Endings expanded wherever a word ends with them, in this order; "'s" only after
:data:`IS_CONTRACTION_WORDS`."""

COMPOUNDS: tuple[tuple[str, str], ...] = (
    ("et cetera", "etc"),
    ("al right", "alright"),
    ("all right", "alright"),
    ("how ever", "however"),
    ("wi fi", "wifi"),
    ("hi fi", "hifi"),
    ("lo fi", "lofi"),
    ("sci fi", "scifi"),
    ("e mail", "email"),
    ("e book", "ebook"),
    ("e commerce", "ecommerce"),
    ("x ray", "xray"),
    ("t shirt", "tshirt"),
    ("a m", "am"),
    ("p m", "pm"),
    ("o k", "okay"),
)
"""Two words joined into one once punctuation is gone ("wi-fi" -> "wi fi" -> "wifi"), in order."""

_NAMES_BY_CANONICAL: dict[str, tuple[str, ...]] = {
    "allen": ("alan", "allan"),
    "bridget": ("bridgette",),
    "charlie": ("charly", "charley"),
    "gary": ("garry",),
    "greg": ("gregg",),
    "jackie": ("jacky",),
    "joanne": ("joann", "joane"),
    "kelly": ("kellye", "kelli", "kelley"),
    "lily": ("lilly",),
    "michael": ("micheal",),
    "michelle": ("michele",),
    "molly": ("mollie",),
    "philip": ("phillip",),
    "sally": ("sallie",),
    "stacy": ("stacey", "stacie"),
    "tracy": ("tracey", "tracie"),
    "brett": ("bret",),
    "carol": ("carrol", "carole", "carroll"),
    "alison": ("allison", "alyson"),
    "russell": ("russel",),
    "douglas": ("douglass",),
    "dominic": ("dominick",),
    "rob": ("robb",),
    "chris": ("kris",),
    "christopher": ("kristopher", "cristopher"),
    "christina": ("kristina",),
    "kristin": ("kristen",),
    "carl": ("karl",),
    "cathy": ("kathy",),
    "catherine": ("katherine", "kathryn", "catharine"),
    "eric": ("erik", "erick"),
    "karen": ("caren", "caryn", "karin"),
    "caitlin": ("katelyn", "kaitlyn", "kaitlin"),
    "nicole": ("nikole",),
    "veronica": ("veronika",),
    "victor": ("viktor",),
    "victoria": ("viktoria",),
    "kevin": ("kevan",),
    "patrick": ("patrik",),
    "frederick": ("frederik", "fredrick"),
    "lucas": ("lukas",),
    "anne": ("ann",),
    "john": ("jon",),
    "jonathan": ("johnathan", "jonathon"),
    "sarah": ("sara",),
    "matthew": ("mathew",),
    "nicholas": ("nicolas",),
    "rachel": ("rachael",),
    "rebecca": ("rebekah",),
    "deborah": ("devorah",),
    "teresa": ("theresa",),
    "susanne": ("suzanne",),
    "anthony": ("antony",),
    "martin": ("martyn",),
    "dennis": ("denis",),
    "lawrence": ("laurence",),
    "thomas": ("tomas",),
    "toby": ("tobey",),
    "mcarthur": ("macarthur",),
    "mccartney": ("macartney",),
    "mccarthy": ("macarthy", "maccarthy"),
    "mcdonald": ("macdonald",),
    "mckay": ("mackay",),
    "mckenzie": ("mackenzie",),
    "mcleod": ("macleod",),
    "mclean": ("maclean",),
    "mcmillan": ("macmillan",),
    "mcintosh": ("macintosh",),
    "mcintyre": ("macintyre",),
    "mcnamara": ("macnamara",),
    "mcgowan": ("macgowan",),
    "mohammed": ("mohamad", "mohamed", "mohammad", "muhammad", "muhamad", "muhammed", "mouhamed", "mouhamad", "mahomet"),
    "fatima": ("fatimah",),
    "yousef": ("yusuf", "yusef"),
    "miriam": ("myriam",),
    "rajiv": ("rajeev",),
    "alfonso": ("alphonso",),
    "brian": ("bryan",),
    "jeffrey": ("geoffrey", "jeffery"),
    "jeff": ("geoff",),
    "neil": ("neal",),
    "sean": ("shaun", "shawn"),
    "shane": ("shayne",),
    "steven": ("stephen",),
    "tony": ("toni",),
    "lee": ("leigh",),
    "louis": ("lewis",),
    "mark": ("marc",),
    "megan": ("meghan",),
    "natalie": ("nathalie",),
    "robin": ("robyn",),
    "roger": ("rodger",),
    "lindsay": ("linsey", "lindsey"),
    "zachary": ("zackary", "zachery"),
    "zach": ("zak",),
    "sherry": ("sheri", "cheri", "sherrie"),
    "terry": ("terri",),
    "laurie": ("lori",),
    "jamie": ("jaime",),
    "jason": ("jayson",),
    "leslie": ("lesley",),
    "linda": ("lynda",),
    "lynn": ("lynne",),
    "gail": ("gayle",),
    "ronda": ("rhonda",),
    "ivonne": ("yvonne",),
    "stuart": ("stewart",),
    "walter": ("walther",),
    "simon": ("symon",),
    "colin": ("collin",),
    "dylan": ("dillon",),
    "aaron": ("aron",),
    "arthur": ("artur",),
    "henry": ("henri",),
    "joseph": ("josef",),
    "peter": ("pieter",),
}

NAMES: Mapping[str, str] = MappingProxyType({v: canon for canon, variants in _NAMES_BY_CANONICAL.items() for v in variants})
"""Name spelling variant -> the one form the leaderboard scores ("stephen" -> "steven")."""

SPELLING_EDITS: Mapping[str, str | None] = MappingProxyType(
    {
        # added by the leaderboard
        "ok": "okay",
        "kay": "okay",
        "etcetera": "etc",
        "mm": "hmm",
        # Whisper's list maps these the other way (US -> GB); the leaderboard turned them round
        "archaeological": "archeological",
        "cancellation": "cancelation",
        "cancellations": "cancelations",
        "travelogue": "travelog",
        "travelogues": "travelogs",
        "flyer": "flier",
        "archeological": None,
        "cancelation": None,
        "cancelations": None,
        "travelog": None,
        "travelogs": None,
        "flyer / flier": None,
        # corrected entries
        "archaeology": "archeology",
        "pummelled": "pummeled",
        "pummelling": "pummeling",
        "snowploughs": "snowplows",
    }
)
"""The leaderboard's changes to Whisper's spelling list: word -> new form, or None to drop the entry."""

SPELLINGS_SHA256 = "4a6400d37047db56e9d5bc496b0e9480bb1ffa406450c06104006b44002fca7f"
"""sha256 of the leaderboard's spelling list (1,743 entries) as ``word<TAB>form<LF>`` lines in sorted order."""


class SpellingListError(RuntimeError):
    """The installed Whisper spelling list does not give the leaderboard's list."""


def spellings_digest(mapping: Mapping[str, str]) -> str:
    """The digest :data:`SPELLINGS_SHA256` is written in."""
    return hashlib.sha256("".join(f"{k}\t{v}\n" for k, v in sorted(mapping.items())).encode()).hexdigest()


@lru_cache(maxsize=1)
def leaderboard_spellings() -> Mapping[str, str]:
    """The leaderboard's en-GB -> en-US spelling list: Whisper's, with :data:`SPELLING_EDITS`.

    Raises ``SpellingListError`` when the installed ``whisper-normalizer`` ships another list, rather
    than score with a list the leaderboard does not use.
    """
    try:
        text = resources.files("whisper_normalizer").joinpath("normalizers/english.json").read_text(encoding="utf-8")
    except (ModuleNotFoundError, OSError) as exc:
        raise SpellingListError(
            f"the Whisper spelling list (whisper_normalizer/normalizers/english.json) cannot be read: {exc}; pip install whisper-normalizer"
        ) from exc
    mapping = dict(json.loads(text))
    for word, form in SPELLING_EDITS.items():
        if form is None:
            mapping.pop(word, None)
        else:
            mapping[word] = form
    digest = spellings_digest(mapping)
    if digest != SPELLINGS_SHA256:
        try:
            version = metadata.version("whisper-normalizer")
        except metadata.PackageNotFoundError:
            version = "unknown"
        raise SpellingListError(
            f"whisper-normalizer {version}'s english.json with the leaderboard's edits has digest {digest}, not the "
            f"leaderboard's {SPELLINGS_SHA256}; install whisper-normalizer==0.1.15"
        )
    return MappingProxyType(mapping)
