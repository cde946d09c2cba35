"""Orthographic switch: does a model write the benchmark's spelling where the audio cannot tell?

For a family of spellings that sound identical (colour/color, Mr./mister, 5%/five
percent, 2016/twenty sixteen, policy-makers/policymakers ...) and each arm ``a``:

    P(model writes arm a | reference writes arm a)

on raw text. ``switch`` = min over arms. A model that follows its own convention scores
1 on one arm and 0 on the other (switch 0); guessing gives 0.5; a model that writes
whatever the benchmark wrote (it learned the transcripts, or memorized them) scores 1.

Matching rule, per clip and family: occurrences of the family are found in the reference
and the hypothesis and grouped by *lexeme* (for the GB/US family "colour" and "color"
are one lexeme, "centre"/"center" another; for digits/words the lexeme is the value).
A clip counts for arm ``a`` when the reference writes some lexeme only as arm ``a`` and
the hypothesis writes that lexeme in any arm; it is a hit when, for every such lexeme,
the hypothesis writes only arm ``a``. A hypothesis that omits the word gives no evidence
and is not counted; a reference that mixes arms of one lexeme is skipped. Counts are
clips, so Wilson intervals treat clips as independent trials.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, TypeVar

from audits.asr.stats import wilson_interval
from engine.errors import AuditError, ConfigError
from normalizers.numbers import NUMBER_WORDS, find_numbers
from normalizers.spelling import (
    COMPOUNDS,
    CURRENCIES,
    HONORIFICS,
    OK_FORMS,
    OPTIONAL_COMPOUNDS,
    PERCENT_FORMS,
    gb_us_pairs,
    spelling_map_source,
)

log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)

MATCHERS = ("surface", "number")
CONTEXTS = ("", "before-name", "amount")
STATUS_OK = "ok"
STATUS_SINGLE_ARM = "single-arm"
STATUS_INSUFFICIENT = "insufficient-data"


@dataclass(frozen=True, eq=False)
class OrthoFamily:
    """Spellings of one convention; ``arms[k]`` holds the surface forms of arm k.

    ``paired``: every arm has the same length and ``arms[k][i]`` are spellings of lexeme i
    ("" where a lexeme lacks that arm). ``context``: "before-name" (honorifics: the next
    word must be capitalized), "amount" (symbols next to a number, currency/percent words
    after one). ``skip_proper_nouns``: ignore capitalized words that are not sentence-initial
    ("Labour", "Grey"). ``matcher``: "number" reads digits vs number words with
    :mod:`normalizers.numbers`, arms are then (digits, words) and ``arms`` only label them.
    Families compare by identity (they are configuration objects with large arms, used as cache keys).
    """

    name: str
    arms: tuple[tuple[str, ...], ...]
    kind: str
    arm_names: tuple[str, ...] = ()
    paired: bool = False
    context: str = ""
    skip_proper_nouns: bool = False
    matcher: str = "surface"

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("an orthographic family needs a name")
        if len(self.arms) < 2:
            raise ConfigError(f"family '{self.name}' needs at least two arms, got {len(self.arms)}")
        if self.matcher not in MATCHERS:
            raise ConfigError(f"family '{self.name}': matcher '{self.matcher}' is not one of {MATCHERS}")
        if self.matcher == "number" and len(self.arms) != 2:
            raise ConfigError(f"family '{self.name}': a number family has exactly two arms (digits, words)")
        if self.context not in CONTEXTS:
            raise ConfigError(f"family '{self.name}': context '{self.context}' is not one of {CONTEXTS}")
        if self.arm_names and len(self.arm_names) != len(self.arms):
            raise ConfigError(f"family '{self.name}': {len(self.arm_names)} arm names for {len(self.arms)} arms")
        if self.paired and len({len(a) for a in self.arms}) != 1:
            raise ConfigError(f"family '{self.name}': paired arms must all have the same length")
        for k, arm in enumerate(self.arms):
            if not any(f.strip() for f in arm):
                raise ConfigError(f"family '{self.name}': arm {k} has no surface form")
            if not self.paired and any(not f.strip() for f in arm):
                raise ConfigError(f"family '{self.name}': arm {k} has an empty surface form")

    def arm_label(self, k: int) -> str:
        return self.arm_names[k] if self.arm_names else (self.arms[k][0] if self.arms[k] else f"arm{k}")


# ------------------------------------------------------------------ tokenizing

_TOKEN_RE = re.compile(
    r"(?:[^\W\d_]\.){2,}"  # O.K., U.S.
    r"|[^\W\d_]+(?:['’\-‐][^\W\d_]+)*"  # words, hyphenated words, contractions
    r"|\d+(?:[.,]\d+)*(?:st|nd|rd|th|s|k|m|bn)?"  # digits
    r"|[$€£¥%]"
)
_SENTENCE_END = re.compile(r"[.!?:;]")
_ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "st", "prof", "jr", "sr", "vs", "no", "mt", "ft", "gen", "gov", "sen", "rep"})
_SYMBOLS = frozenset("$€£¥%")


@dataclass(frozen=True)
class _Tok:
    text: str
    key: str
    start: int
    end: int


@lru_cache(maxsize=8192)
def _tokens(text: str) -> tuple[_Tok, ...]:
    out = []
    for m in _TOKEN_RE.finditer(text):
        raw = m.group()
        key = raw.lower().replace(".", "").replace("’", "'").replace("‐", "-")
        out.append(_Tok(raw, key, m.start(), m.end()))
    return tuple(out)


@lru_cache(maxsize=8192)
def _token_keys(text: str) -> frozenset[str]:
    keys = {t.key for t in _tokens(text)}
    return frozenset(keys | {k[:-2] for k in keys if k.endswith("'s")})


def _form_keys(form: str) -> tuple[str, ...]:
    return tuple(t.key for t in _tokens(form))


def _is_numberish(tok: _Tok | None) -> bool:
    if tok is None:
        return False
    return tok.key[:1].isdigit() or tok.key in NUMBER_WORDS or tok.key in ("hundred", "a")


@dataclass(frozen=True)
class Occurrence:
    """One place a family's arm is written: arm index, lexeme key, character span."""

    arm: int
    key: Hashable
    start: int
    end: int


@dataclass
class _Index:
    """First token key -> candidate (form keys, arm, lexeme) for one family."""

    by_first: dict[str, list[tuple[tuple[str, ...], int, int]]]
    first_keys: frozenset[str] = frozenset()


_INDEX_CACHE: dict[OrthoFamily, _Index] = {}


def _index(family: OrthoFamily) -> _Index:
    cached = _INDEX_CACHE.get(family)
    if cached is not None:
        return cached
    n_forms = len(family.arms[0])
    # lexeme ids: paired -> position, merged when a form appears at several positions
    parent = list(range(n_forms)) if family.paired else [0]

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    if family.paired:
        first_pos: dict[tuple[str, ...], int] = {}
        for arm in family.arms:
            for i, form in enumerate(arm):
                if not form.strip():
                    continue
                keys = _form_keys(form)
                if keys in first_pos:
                    a, b = find(first_pos[keys]), find(i)
                    if a != b:
                        parent[max(a, b)] = min(a, b)
                else:
                    first_pos[keys] = i
    by_first: dict[str, list[tuple[tuple[str, ...], int, int]]] = defaultdict(list)
    seen: dict[tuple[str, ...], int] = {}
    for k, arm in enumerate(family.arms):
        for i, form in enumerate(arm):
            if not form.strip():
                continue
            keys = _form_keys(form)
            if not keys:
                raise ConfigError(f"family '{family.name}': form '{form}' has no matchable token")
            if keys in seen and seen[keys] != k:
                raise ConfigError(f"family '{family.name}': form '{form}' is in arm {seen[keys]} and arm {k}; arms must not share forms")
            seen[keys] = k
            lexeme = find(i) if family.paired else 0
            by_first[keys[0]].append((keys, k, lexeme))
    for cands in by_first.values():
        cands.sort(key=lambda c: -len(c[0]))  # longest form first
    idx = _Index(dict(by_first), frozenset(by_first))
    if len(_INDEX_CACHE) > 256:
        _INDEX_CACHE.clear()
    _INDEX_CACHE[family] = idx
    return idx


def _sentence_initial(text: str, toks: Sequence[_Tok], i: int) -> bool:
    if i == 0:
        return True
    prev = toks[i - 1]
    gap = text[prev.end : toks[i].start]
    if not _SENTENCE_END.search(gap):
        return False
    return not (prev.key in _ABBREVIATIONS and gap.lstrip().startswith("."))


def _occurrences(text: str, family: OrthoFamily) -> tuple[Occurrence, ...]:
    return _occurrences_cached(text, family)


@lru_cache(maxsize=65536)
def _occurrences_cached(text: str, family: OrthoFamily) -> tuple[Occurrence, ...]:
    return tuple(_find(text, family))


def _find(text: str, family: OrthoFamily) -> list[Occurrence]:
    if not text:
        return []
    if family.matcher == "number":
        out = []
        for span in find_numbers(text):
            if not span.has_digits and span.text.strip().lower() in ("one",):
                continue  # bare "one" is usually a pronoun ("the one", "no one")
            out.append(Occurrence(0 if span.has_digits else 1, span.value, span.start, span.end))
        return out
    idx = _index(family)
    if not (_token_keys(text) & idx.first_keys):
        return []
    toks = _tokens(text)
    has_upper = any(c.isupper() for c in text)
    has_lower = any(c.islower() for c in text)
    cased = has_upper and has_lower
    out = []
    i = 0
    while i < len(toks):
        tok = toks[i]
        cands = idx.by_first.get(tok.key)
        if cands is None and tok.key.endswith("'s"):
            cands = idx.by_first.get(tok.key[:-2])
        match = None
        for keys, arm, lexeme in cands or ():
            n = len(keys)
            if n == 1 or tuple(t.key for t in toks[i : i + n]) == keys:
                match = (n, arm, lexeme)
                break
        if match is None:
            i += 1
            continue
        n, arm, lexeme = match
        ok = True
        if family.skip_proper_nouns and cased and tok.text[:1].isupper() and not _sentence_initial(text, toks, i):
            ok = False
        if ok and family.context == "before-name":
            nxt = toks[i + n] if i + n < len(toks) else None
            ok = nxt is not None and (nxt.text[:1].isupper() or not has_upper) and not nxt.key[:1].isdigit()
        if ok and family.context == "amount":
            prev = toks[i - 1] if i > 0 else None
            nxt = toks[i + n] if i + n < len(toks) else None
            if tok.text in _SYMBOLS:
                if tok.text == "%":
                    ok = prev is not None and prev.key[:1].isdigit()
                else:
                    ok = (nxt is not None and nxt.key[:1].isdigit()) or (prev is not None and prev.key[:1].isdigit())
            else:
                ok = _is_numberish(prev)
        if ok:
            out.append(Occurrence(arm, (family.name, lexeme), tok.start, toks[i + n - 1].end))
        i += n
    return out


def find_arm_occurrences(text: str, family: OrthoFamily) -> list[int]:
    """Arm index of every occurrence of ``family`` in raw ``text``, in text order.

    Forms match whole tokens (word boundaries; 'Mr.' and 'Mr' are one form, 'O.K.' is 'OK').
    Letter case does not select an arm; it is used where it carries meaning: a capitalized
    word that does not start a sentence is a name for the GB/US family ('Labour', 'Mr. Grey'),
    and an honorific needs a capitalized name after it ('Dr. Who', not 'a doctor'). Text
    written in one case (all upper or all lower) skips those case tests.
    """
    return [o.arm for o in _occurrences(text, family)]


def find_occurrences(text: str, family: OrthoFamily) -> list[Occurrence]:
    """Occurrences with lexeme keys and character spans (what the scorer aligns on)."""
    return list(_occurrences(text, family))


# ------------------------------------------------------------------ families


def default_families(include_optional_compounds: bool = False) -> list[OrthoFamily]:
    """The orthographic convention families (docs/probes.md); each family's arms sound identical."""
    fams: list[OrthoFamily] = []
    for name, abbr, spelled in HONORIFICS:
        fams.append(
            OrthoFamily(
                f"honorific-{name}",
                (abbr, spelled),
                kind="honorific",
                arm_names=("abbreviated", "spelled"),
                context="before-name",
            )
        )
    pairs = gb_us_pairs()
    fams.append(
        OrthoFamily(
            "en-gb-us",
            (tuple(gb for gb, _ in pairs), tuple(us for _, us in pairs)),
            kind="spelling",
            arm_names=("en-GB", "en-US"),
            paired=True,
            skip_proper_nouns=True,
        )
    )
    fams.append(OrthoFamily("ok-okay", OK_FORMS, kind="ok", arm_names=("OK", "okay")))
    fams.append(OrthoFamily("percent", PERCENT_FORMS, kind="percent", arm_names=("%", "percent", "per cent"), context="amount"))
    for name, symbols, words in CURRENCIES:
        fams.append(OrthoFamily(f"currency-{name}", (symbols, words), kind="currency", arm_names=("symbol", "word"), context="amount"))
    fams.append(OrthoFamily("digits-words", (("<digits>",), ("<words>",)), kind="number", arm_names=("digits", "words"), matcher="number"))
    rows = COMPOUNDS + (OPTIONAL_COMPOUNDS if include_optional_compounds else ())
    fams.append(
        OrthoFamily(
            "compounds",
            tuple(tuple(row[k] for row in rows) for k in range(3)),
            kind="compound",
            arm_names=("spaced", "hyphenated", "solid"),
            paired=True,
        )
    )
    return fams


def families_provenance() -> dict[str, str]:
    """Where the family lists come from (for summary.json)."""
    return {"en-gb-us": spelling_map_source(), "others": "normalizers/spelling.py"}


# ------------------------------------------------------------------ scoring


@dataclass
class ArmCount:
    """Clips where the reference wrote this arm (and the model wrote the word), and hits."""

    arm: str
    n: int = 0
    hits: int = 0

    @property
    def p(self) -> float | None:
        return self.hits / self.n if self.n else None

    @property
    def ci95(self) -> tuple[float, float] | None:
        return wilson_interval(self.hits, self.n) if self.n else None

    def to_dict(self) -> dict[str, Any]:
        ci = self.ci95
        return {"n": self.n, "hits": self.hits, "p": self.p, "ci95": list(ci) if ci else None}


@dataclass
class _SwitchSummary:
    switch: float | None
    ci95: tuple[float, float] | None
    limiting_arm: str | None
    status: str


def _summarize(arms: Sequence[ArmCount], min_clips: int) -> _SwitchSummary:
    eligible = [a for a in arms if a.n >= min_clips]
    if not eligible:
        return _SwitchSummary(None, None, None, STATUS_INSUFFICIENT)
    if len(eligible) < 2:
        return _SwitchSummary(None, None, eligible[0].arm, STATUS_SINGLE_ARM)
    worst = min(eligible, key=lambda a: (a.p if a.p is not None else 1.0, -a.n))
    return _SwitchSummary(worst.p, worst.ci95, worst.arm, STATUS_OK)


@dataclass
class FamilyResult:
    """Per-arm counts and the switch of one family for one model."""

    name: str
    kind: str
    arms: list[ArmCount]
    min_clips_per_arm: int
    n_clips: int = 0  # clips whose reference writes the family (unambiguously)
    n_ref_mixed: int = 0  # clips whose reference mixes arms of one lexeme (skipped)
    n_hyp_absent: int = 0  # clips where the model did not write the word at all (no evidence)

    @property
    def summary(self) -> _SwitchSummary:
        return _summarize(self.arms, self.min_clips_per_arm)

    def to_dict(self) -> dict[str, Any]:
        s = self.summary
        return {
            "kind": self.kind,
            "switch": s.switch,
            "ci95": list(s.ci95) if s.ci95 else None,
            "limiting_arm": s.limiting_arm,
            "status": s.status,
            "arms": {a.arm: a.to_dict() for a in self.arms},
            "n_clips": self.n_clips,
            "n_ref_mixed": self.n_ref_mixed,
            "n_hyp_absent": self.n_hyp_absent,
        }


@dataclass
class OrthoResult:
    """Switch of one model over all families (pooled by arm index, or the worst family)."""

    switch: float | None
    ci95: tuple[float, float] | None
    limiting_arm: str | None
    limiting_family: str | None
    status: str
    families: dict[str, FamilyResult]
    pooled: list[ArmCount] | None
    pool: bool
    min_clips_per_arm: int
    n_clips: int  # clips scored (reference and hypothesis both present)
    n_missing_hyp: int
    n_failed_hyp: int
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "switch": self.switch,
            "ci95": list(self.ci95) if self.ci95 else None,
            "limiting_arm": self.limiting_arm,
            "limiting_family": self.limiting_family,
            "status": self.status,
            "note": self.note,
            "pool": self.pool,
            "pooled": {a.arm: a.to_dict() for a in self.pooled} if self.pooled is not None else None,
            "min_clips_per_arm": self.min_clips_per_arm,
            "n_clips": self.n_clips,
            "n_missing_hyp": self.n_missing_hyp,
            "n_failed_hyp": self.n_failed_hyp,
            "families": {name: fr.to_dict() for name, fr in self.families.items()},
            **self.extra,
        }


def _score_clip(ref_occ: Sequence[Occurrence], hyp_occ: Sequence[Occurrence], fr: FamilyResult) -> None:
    ref_by_key: dict[Hashable, set[int]] = defaultdict(set)
    for o in ref_occ:
        ref_by_key[o.key].add(o.arm)
    if not ref_by_key:
        return
    hyp_by_key: dict[Hashable, set[int]] = defaultdict(set)
    for o in hyp_occ:
        hyp_by_key[o.key].add(o.arm)
    mixed = [k for k, arms in ref_by_key.items() if len(arms) > 1]
    if mixed:
        fr.n_ref_mixed += 1
    clean = {k: next(iter(arms)) for k, arms in ref_by_key.items() if len(arms) == 1}
    if not clean:
        return
    fr.n_clips += 1
    counted = False
    for a in range(len(fr.arms)):
        relevant = [k for k, arm in clean.items() if arm == a and k in hyp_by_key]
        if not relevant:
            continue
        counted = True
        fr.arms[a].n += 1
        if all(hyp_by_key[k] == {a} for k in relevant):
            fr.arms[a].hits += 1
    if not counted:
        fr.n_hyp_absent += 1


def orthographic_switch(
    refs: Mapping[K, str],
    hyps: Mapping[K, str | None] | Mapping[K, str],
    families: Sequence[OrthoFamily] | None = None,
    min_clips_per_arm: int = 5,
    pool: bool = False,
) -> OrthoResult:
    """Orthographic switch of one model: refs and hyps keyed by utterance id, raw text.

    ``pool=False``: switch = the lowest switch among families with at least two arms that
    reach ``min_clips_per_arm``. ``pool=True``: arms are pooled across families by index
    (arm 0 of every family together, arm 1 together, ...) and switch = min over pooled arms.
    A ``None`` switch always comes with a status saying why ('insufficient-data',
    'single-arm'); it is never reported as 0.
    """
    if families is None:
        families = default_families()
    if not families:
        raise ConfigError("orthographic switch needs at least one spelling family")
    if min_clips_per_arm < 1:
        raise ConfigError(f"min_clips_per_arm must be at least 1, got {min_clips_per_arm}")
    names = [f.name for f in families]
    if len(set(names)) != len(names):
        raise ConfigError(f"duplicate family names: {sorted({n for n in names if names.count(n) > 1})}")
    if not refs:
        raise AuditError("orthographic switch got no references; the dataset selection is empty")
    shared = [k for k in refs if k in hyps]
    if not shared:
        raise AuditError(
            f"no utterance id is in both references ({len(refs)}) and hypotheses ({len(hyps)}); "
            "check that the predictions belong to this dataset"
        )
    n_missing = len(refs) - len(shared)
    failed = [k for k in shared if hyps[k] is None]
    results = {
        f.name: FamilyResult(f.name, f.kind, [ArmCount(f.arm_label(k)) for k in range(len(f.arms))], min_clips_per_arm) for f in families
    }
    for uid in shared:
        hyp = hyps[uid]
        if hyp is None:
            continue
        ref = refs[uid] or ""
        for fam in families:
            ref_occ = _occurrences(ref, fam)
            if not ref_occ:
                continue
            _score_clip(ref_occ, _occurrences(hyp, fam), results[fam.name])
    n_scored = len(shared) - len(failed)

    pooled: list[ArmCount] | None = None
    note = ""
    limiting_family: str | None = None
    if pool:
        width = max(len(f.arms) for f in families)
        pooled = []
        for k in range(width):
            labels = sorted({f.arm_label(k) for f in families if k < len(f.arms)})
            ac = ArmCount(f"arm{k}:" + "|".join(labels))
            for f in families:
                if k < len(f.arms):
                    ac.n += results[f.name].arms[k].n
                    ac.hits += results[f.name].arms[k].hits
            pooled.append(ac)
        s = _summarize(pooled, min_clips_per_arm)
        switch, ci, limiting, status = s.switch, s.ci95, s.limiting_arm, s.status
    else:
        ok = [(fr.summary, fr.name) for fr in results.values() if fr.summary.status == STATUS_OK]
        if ok:
            best = min(ok, key=lambda t: (t[0].switch if t[0].switch is not None else 1.0, t[1]))
            switch, ci, limiting, status = best[0].switch, best[0].ci95, best[0].limiting_arm, STATUS_OK
            limiting_family = best[1]
        else:
            single = [fr for fr in results.values() if fr.summary.status == STATUS_SINGLE_ARM]
            switch, ci, limiting = None, None, None
            status = STATUS_SINGLE_ARM if single else STATUS_INSUFFICIENT
    if status == STATUS_INSUFFICIENT:
        note = (
            f"no family has an arm with at least {min_clips_per_arm} clips where the reference writes it "
            "and the model writes the word; use more data, pool=True or a lower min_clips_per_arm"
        )
    elif status == STATUS_SINGLE_ARM:
        note = (
            "only one arm per family reaches the minimum; the switch needs the reference to use at least "
            "two arms (a min over one arm would call any model that shares the benchmark's habit a copier)"
        )
    if status != STATUS_OK:
        log.info("orthographic switch: %s (%s)", status, note)
    return OrthoResult(
        switch=switch,
        ci95=ci,
        limiting_arm=limiting,
        limiting_family=limiting_family,
        status=status,
        families=results,
        pooled=pooled,
        pool=pool,
        min_clips_per_arm=min_clips_per_arm,
        n_clips=n_scored,
        n_missing_hyp=n_missing,
        n_failed_hyp=len(failed),
        note=note,
    )


def select_families(names: Sequence[str] | None) -> list[OrthoFamily]:
    """The families a probe scores: all defaults, or the named ones (optional compounds then included).

    Unknown names are a ``ConfigError`` that lists the known ones.
    """
    fams = default_families(include_optional_compounds=bool(names))
    if not names:
        return fams
    known = [f.name for f in fams]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"unknown orthographic family {unknown}; known: {', '.join(known)}")
    return [f for f in fams if f.name in names]


def switch_entries(
    refs: Mapping[K, str],
    hyps_by_model: Mapping[str, Mapping[K, str | None]],
    families: Sequence[OrthoFamily],
    min_clips_per_arm: int,
    pool: bool,
) -> dict[str, Any]:
    """``probes.orthography`` of summary.json: per model the switch as ``rate`` with the limiting arm's
    ``k`` (hits) and ``n``, plus the settings; one definition for the in-run probe and the
    prediction-file command."""
    out: dict[str, Any] = {}
    for m, r in orthographic_switch_by_model(refs, hyps_by_model, families, min_clips_per_arm, pool).items():
        arm = None
        arms = r.get("pooled") if pool else ((r.get("families") or {}).get(r.get("limiting_family") or "", {}) or {}).get("arms")
        if arms and r.get("limiting_arm") in arms:
            arm = arms[r["limiting_arm"]]
        out[m] = {"rate": r["switch"], **r, "k": arm.get("hits") if arm else None, "n": arm.get("n") if arm else None}
    out["settings"] = {
        "min_clips_per_arm": min_clips_per_arm,
        "pool": pool,
        "families": [f.name for f in families],
        "provenance": families_provenance(),
    }
    return out


def switch_from_arm_counts(arms: Mapping[str, tuple[int, int]], min_clips_per_arm: int = 5) -> dict[str, Any]:
    """Switch, Wilson interval and limiting arm from per-arm (hits, n) counts alone.

    The rule of :func:`orthographic_switch`: the lowest hit rate over arms with at least
    ``min_clips_per_arm`` clips, needing two such arms. Lets a published table of arm counts be
    checked against this implementation.
    """
    counts = [ArmCount(name, n=int(n), hits=int(h)) for name, (h, n) in arms.items()]
    s = _summarize(counts, min_clips_per_arm)
    return {"switch": s.switch, "ci95": list(s.ci95) if s.ci95 else None, "limiting_arm": s.limiting_arm, "status": s.status}


def orthographic_switch_by_model(
    refs: Mapping[K, str],
    hyps_by_model: Mapping[str, Mapping[K, str | None]] | Mapping[str, Mapping[K, str]],
    families: Sequence[OrthoFamily] | None = None,
    min_clips_per_arm: int = 5,
    pool: bool = False,
) -> dict[str, dict[str, Any]]:
    """``{model: OrthoResult.to_dict()}`` for summary.json ``probes.orthography``."""
    fams = list(families) if families is not None else default_families()
    return {model: orthographic_switch(refs, hyps, fams, min_clips_per_arm, pool).to_dict() for model, hyps in hyps_by_model.items()}
