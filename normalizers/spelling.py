"""Spelling families: written conventions whose arms sound identical.

The orthographic-switch probe asks whether a model writes a word the way the benchmark
writes it when the audio cannot tell the two apart. That only works for arms a listener
cannot distinguish: "colour"/"color", "Mr."/"mister", "5%"/"five percent". Pairs that
are different words (British "practice" noun vs "practise" verb, "tyre" vs the verb
"tire", "programme" vs computer "program"), that are pronounced differently
("aluminium"/"aluminum") or that are errors in the source list are excluded, each with
its reason, in :data:`GB_US_EXCLUDED`.

The en-GB/en-US list is the one Whisper's English normalizer applies (``english.json``
shipped inside the maintained ``whisper-normalizer`` package, itself taken from the
tysto.com UK/US spelling list). This module imports nothing of the project.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from functools import lru_cache
from importlib import metadata, resources

log = logging.getLogger(__name__)

# ------------------------------------------------------------------ honorifics
#: (family name, abbreviated forms, spelled-out forms). Periods are optional in matching.
#: "Ms." is absent on purpose: it has no spelled-out arm that writers use ("miz").
HONORIFICS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("mr", ("Mr.", "Mr"), ("mister",)),
    ("mrs", ("Mrs.", "Mrs"), ("missus", "missis")),
    ("dr", ("Dr.", "Dr"), ("doctor",)),
    ("st", ("St.", "St"), ("saint",)),
    ("prof", ("Prof.", "Prof"), ("professor",)),
)

#: OK/okay: one word, one sound, two spellings.
OK_FORMS: tuple[tuple[str, ...], tuple[str, ...]] = (("OK", "O.K.", "Ok"), ("okay",))

#: Percent: the symbol, the solid word and the spaced British form.
PERCENT_FORMS: tuple[tuple[str, ...], ...] = (("%",), ("percent",), ("per cent",))

#: Currency: (family name, symbols written before the amount, words written after it).
CURRENCIES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("usd", ("$",), ("dollar", "dollars")),
    ("eur", ("€",), ("euro", "euros")),
    ("gbp", ("£",), ("pound", "pounds", "pound sterling", "pounds sterling")),
    ("jpy", ("¥",), ("yen",)),
)

#: Spaced / hyphenated / solid compounds that are one word spoken the same way.
#: Each row: (spaced, hyphenated, solid); "" where a form is not in use.
COMPOUNDS: tuple[tuple[str, str, str], ...] = (
    ("policy makers", "policy-makers", "policymakers"),
    ("policy maker", "policy-maker", "policymaker"),
    ("decision makers", "decision-makers", "decisionmakers"),
    ("decision maker", "decision-maker", "decisionmaker"),
    ("law makers", "law-makers", "lawmakers"),
    ("cease fire", "cease-fire", "ceasefire"),
    ("web site", "web-site", "website"),
    ("web sites", "web-sites", "websites"),
    ("data base", "data-base", "database"),
    ("data bases", "data-bases", "databases"),
    ("e mail", "e-mail", "email"),
    ("e mails", "e-mails", "emails"),
    ("", "on-line", "online"),
    ("health care", "health-care", "healthcare"),
    ("no one", "no-one", ""),
    ("week end", "week-end", "weekend"),
    ("week ends", "week-ends", "weekends"),
    ("", "co-operation", "cooperation"),
    ("", "co-operate", "cooperate"),
    ("", "co-operative", "cooperative"),
    ("", "co-ordinate", "coordinate"),
    ("", "co-ordinated", "coordinated"),
    ("", "co-ordination", "coordination"),
    ("", "co-ordinator", "coordinator"),
    ("", "re-elected", "reelected"),
    ("", "re-election", "reelection"),
    ("", "e-commerce", "ecommerce"),
    ("", "multi-annual", "multiannual"),
    ("", "multi-lateral", "multilateral"),
    ("", "cross-border", "crossborder"),
)

#: Spaced/solid pairs that are *different words* with different stress or meaning; not in the
#: default families because an honest model that transcribes the meaning would look like one
#: that copies the benchmark ("any one of them" vs "anyone"). Available on request.
OPTIONAL_COMPOUNDS: tuple[tuple[str, str, str], ...] = (
    ("any one", "", "anyone"),
    ("every one", "", "everyone"),
    ("every day", "", "everyday"),
    ("some time", "", "sometime"),
    ("any way", "", "anyway"),
    ("may be", "", "maybe"),
    ("all right", "", "alright"),
    ("in to", "", "into"),
    ("on to", "", "onto"),
    ("can not", "", "cannot"),
)

# ------------------------------------------------------------------ en-GB / en-US
#: Entries of Whisper's english.json left out, with the reason. Keys are the json keys.
GB_US_EXCLUDED: Mapping[str, str] = {
    # different words in British English (noun/verb or meaning split)
    "practise": "GB: practice is the noun, practise the verb; a GB text writes both",
    "practised": "kept out with practise/practice (noun/verb split)",
    "practises": "'practices' is also the plural noun in GB",
    "licence": "GB: licence is the noun, license the verb",
    "licences": "GB: licences noun vs licenses verb",
    "licenced": "'licensed' is the normal GB participle",
    "licencing": "'licensing' is the normal GB form",
    "programme": "GB uses 'program' for computer programs",
    "programmes": "GB uses 'programs' for computer programs",
    "tyre": "'tire' is also the verb (to tire) in both",
    "tyres": "'tires' is also the verb in both",
    "cheque": "'check' is a different word in GB",
    "cheques": "'checks' is a different word in GB",
    "storey": "'story' (a tale) is a different word in GB",
    "storeys": "'stories' (tales) is a different word in GB",
    "draught": "'draft' (a first version) is a different word in GB",
    "draughts": "'draughts' is also the game; 'drafts' a different word in GB",
    "draughtsman": "GB 'draftsman' drafts documents",
    "draughtsmen": "GB 'draftsmen' draft documents",
    "disc": "GB uses 'disk' for computer disks",
    "discs": "GB uses 'disks' for computer disks",
    "metre": "GB 'meter' is a measuring device",
    "metres": "GB 'meters' are measuring devices",
    "micrometre": "GB 'micrometer' is a measuring instrument",
    "micrometres": "GB 'micrometers' are measuring instruments",
    "tonne": "a tonne (1000 kg) is not a ton",
    "tonnes": "tonnes (1000 kg) are not tons",
    "philtre": "source error: a philtre (potion) is not a filter",
    "philtres": "source error: philtres are not filters",
    "groyne": "'groin' is a different word (anatomy) in GB",
    "groynes": "'groins' is a different word in GB",
    "bevvy": "'bevy' (a group) is a different word",
    "bevvies": "'bevies' is a different word",
    "busses": "'busses' is also 'kisses'; 'bussing' clearing tables",
    "bussing": "'bussing' is also clearing tables (US)",
    "analyses": "also the plural of 'analysis' (different sound) in both",
    "paralyses": "also the plural of 'paralysis'",
    "catalyses": "also the plural of 'catalysis'",
    "psychoanalyses": "also the plural of 'psychoanalysis'",
    "breathalyses": "rare, and kept out with the -lyses plurals",
    "dialogue": "'dialog' is a software term in both",
    "dialogues": "'dialogs' is a software term in both",
    "prologue": "'Prolog' is a programming language",
    "prologues": "kept out with prologue",
    "fillet": "pronounced differently (FIL-it vs fi-LAY)",
    "fillets": "pronounced differently",
    "filleted": "pronounced differently",
    "filleting": "pronounced differently",
    # different pronunciations: the audio decides, so no convention is being tested
    "aeroplane": "said differently (aero- vs air-)",
    "aeroplanes": "said differently (aero- vs air-)",
    "aluminium": "said differently (five vs four syllables)",
    "flautist": "said differently (flaw- vs flue-)",
    "flautists": "said differently",
    # errors in the source list
    "pummelled": "source error: maps to 'pummel'",
    "pummelling": "source error: maps to 'pummeled'",
    "snowploughs": "source error: maps to singular 'snowplow'",
    "tranquilly": "source error: adverb mapped to the noun 'tranquility'",
    "mhm": "interjections, not spellings of one word",
    "mmm": "interjections, not spellings of one word",
}

#: json keys that are the American (or variant) form; their pair is flipped to (GB, US).
GB_US_REVERSED: frozenset[str] = frozenset(
    {"archeological", "battleax", "glamor", "travelog", "travelogs", "cancelation", "cancelations", "crenelated"}
)

_WORD = re.compile(r"^[a-z]+$")


def spelling_map_source() -> str:
    """Where the GB/US list comes from, with the package version (recorded in summaries)."""
    try:
        version = metadata.version("whisper-normalizer")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return f"whisper-normalizer=={version}:whisper_normalizer/normalizers/english.json"


@lru_cache(maxsize=1)
def _raw_map() -> dict[str, str]:
    try:
        path = resources.files("whisper_normalizer").joinpath("normalizers/english.json")
        with path.open("r", encoding="utf-8") as fh:
            data = json.load(fh)
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise RuntimeError(
            "the GB/US spelling list ships with the 'whisper-normalizer' package; install it (pip install whisper-normalizer)"
        ) from exc
    if not isinstance(data, dict):
        raise TypeError(f"{spelling_map_source()} is not a JSON object")
    return {str(k): str(v) for k, v in data.items()}


@lru_cache(maxsize=1)
def gb_us_pairs() -> tuple[tuple[str, str], ...]:
    """(British, American) spelling pairs from the maintained list, exclusions applied.

    Entries with anything but lower-case letters (the list has an HTML fragment and a
    'flyer / flier' row) are dropped; identical arms are dropped.
    """
    pairs: list[tuple[str, str]] = []
    dropped = 0
    for key, value in _raw_map().items():
        key_l, value_l = key.strip().lower(), value.strip().lower()
        if key_l in GB_US_EXCLUDED:
            continue
        if not _WORD.match(key_l) or not _WORD.match(value_l) or key_l == value_l:
            dropped += 1
            continue
        pairs.append((value_l, key_l) if key_l in GB_US_REVERSED else (key_l, value_l))
    if dropped:
        log.debug("dropped %d malformed GB/US spelling entries from %s", dropped, spelling_map_source())
    return tuple(pairs)


def gb_to_us() -> dict[str, str]:
    """British -> American spelling (after exclusions)."""
    return dict(gb_us_pairs())


def spelling_variants(word: str) -> set[str]:
    """All spellings of ``word`` in its GB/US family (lower case), including itself."""
    w = word.lower()
    out = {w}
    for gb, us in gb_us_pairs():
        if w in (gb, us):
            out.update((gb, us))
    return out
