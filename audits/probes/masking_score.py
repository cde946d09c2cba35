"""Masked-word probe, text side: pick words to silence, and score the gated leak rate.

A target is a word (or short phrase) in the raw reference that a listener cannot guess
from context: a number (digits or number words, not the trivial "one"), a proper noun
(capitalized, not sentence-initial, not a title or calendar word), or a named entity from
spaCy when that extra and a model are installed. The audio side silences its span; a
model that still writes it has it from somewhere other than the audio.

Gated leak rate, per model: among (clip, target) pairs where the model wrote the target on
the *unmasked* audio, the share where it still writes it on the masked audio. Pairs the
model missed on clean audio say nothing about leakage and are counted as not gated.
Matching: numbers by value across digits and words (:mod:`normalizers.numbers`); names after
Whisper English normalization of both sides, on word boundaries, case-insensitively. A
target the reference writes k times must appear k times in the hypothesis, so another
occurrence elsewhere in the sentence does not count as a leak.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any, Literal

from audits.asr.stats import wilson_interval
from engine.errors import AuditError, ConfigError
from normalizers import EnglishNormalizer
from normalizers.numbers import Number, count_number, find_numbers, is_number_word

log = logging.getLogger(__name__)

TargetKind = Literal["number", "proper-noun", "entity"]
KINDS: tuple[str, ...] = ("number", "proper-noun", "entity")

#: Capitalized words that are not informative names: pronoun I, titles and forms of address,
#: calendar words (guessable from context, and "May"/"March" are also verbs), and the
#: institutional words of parliamentary speech that a language model predicts from context.
DEFAULT_STOPLIST: frozenset[str] = frozenset(
    {
        "i",
        "i'm",
        "i'll",
        "i've",
        "i'd",
        "i’m",
        "i’ll",
        "i’ve",
        "i’d",
        "ok",
        "okay",
        "oh",
        "mr",
        "mrs",
        "ms",
        "miss",
        "mister",
        "missus",
        "dr",
        "doctor",
        "prof",
        "professor",
        "st",
        "saint",
        "sir",
        "madam",
        "madame",
        "lord",
        "lady",
        "dame",
        "king",
        "queen",
        "prince",
        "princess",
        "president",
        "vice-president",
        "commissioner",
        "minister",
        "chairman",
        "chairwoman",
        "chair",
        "chancellor",
        "secretary",
        "rapporteur",
        "speaker",
        "member",
        "members",
        "mep",
        "meps",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "god",
        "christmas",
        "easter",
    }
)
#: Capitalized institution words of parliamentary and news speech. They are names, but a
#: language model predicts them from context ("the ___ has to take action"), so a target made
#: only of them is chosen after every other name (it is still used when nothing else exists).
LOW_PRIORITY_NAMES: frozenset[str] = frozenset(
    {
        "commission",
        "council",
        "parliament",
        "european",
        "union",
        "eu",
        "house",
        "court",
        "government",
        "committee",
        "chamber",
        "assembly",
        "state",
        "states",
        "member",
        "group",
        "treaty",
        "presidency",
        "europe",
        "united",
        "nations",
        "un",
        "us",
        "uk",
    }
)
#: spaCy entity labels that are names (dates, quantities and the like are numbers or guessable).
NER_LABELS: frozenset[str] = frozenset({"PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "PRODUCT", "WORK_OF_ART", "LAW"})
TRIVIAL_NUMBER_VALUES: frozenset[int] = frozenset({1})

_EDGE_LEFT = "\"'“”‘’([{<«"
_EDGE_RIGHT = "\"'“”‘’)]}>».,;:!?"
_SENT_END = re.compile(r"[.!?:]['\"”’)\]]*$")
_POSSESSIVE = re.compile(r"(?:['’]s|s['’])$")
_ABBREV_PERIOD = frozenset({"mr.", "mrs.", "ms.", "dr.", "st.", "prof.", "jr.", "sr.", "vs.", "no.", "mt."})


class NoMaskableWord(AuditError):
    """A reference offers nothing to mask; the message says why."""


@dataclass(frozen=True)
class MaskTarget:
    """One word or phrase to silence; word indices refer to ``reference.split()``."""

    text: str  # as written in the reference, edge punctuation and possessive 's removed
    kind: str  # 'number' | 'proper-noun' | 'entity'
    word_start: int
    word_end: int  # exclusive
    char_start: int
    char_end: int
    value: Number | None = None  # numbers only
    ref_count: int = 1  # times the reference writes this target
    source: str = "rules"  # 'rules' or 'spacy:<model>'

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"mask target kind '{self.kind}' is not one of {KINDS}")
        if not 0 <= self.word_start < self.word_end:
            raise ConfigError(f"mask target '{self.text}': word span [{self.word_start}, {self.word_end}) is empty")
        if self.ref_count < 1:
            raise ConfigError(f"mask target '{self.text}': ref_count must be at least 1")

    @property
    def word_index(self) -> int:
        return self.word_start

    @property
    def n_words(self) -> int:
        return self.word_end - self.word_start

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if isinstance(self.value, Decimal):
            d["value"] = str(self.value)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MaskTarget:
        """Inverse of to_dict (targets travel with derived utterances as JSON)."""
        value = d.get("value")
        if isinstance(value, str):
            dec = Decimal(value)
            value = int(dec) if dec == dec.to_integral_value() else dec
        try:
            return cls(
                text=str(d["text"]),
                kind=str(d["kind"]),
                word_start=int(d["word_start"]),
                word_end=int(d["word_end"]),
                char_start=int(d["char_start"]),
                char_end=int(d["char_end"]),
                value=value,
                ref_count=int(d.get("ref_count", 1)),
                source=str(d.get("source", "rules")),
            )
        except KeyError as exc:
            raise ConfigError(f"mask target record lacks field {exc}; got keys {sorted(d)}") from None


# ------------------------------------------------------------------ selection


@dataclass(frozen=True)
class _Word:
    raw: str
    start: int
    end: int
    core: str  # edge punctuation stripped
    core_start: int


def _words(reference: str) -> list[_Word]:
    out = []
    for m in re.finditer(r"\S+", reference):
        raw = m.group()
        left = len(raw) - len(raw.lstrip(_EDGE_LEFT))
        core = raw[left:].rstrip(_EDGE_RIGHT)
        out.append(_Word(raw, m.start(), m.end(), core, m.start() + left))
    return out


def _word_span(words: Sequence[_Word], a: int, b: int) -> tuple[int, int] | None:
    """Whitespace-token indices covering characters [a, b)."""
    idx = [i for i, w in enumerate(words) if w.start < b and w.end > a]
    return (idx[0], idx[-1] + 1) if idx else None


def _caseless(reference: str) -> bool:
    letters = [c for c in reference if c.isalpha()]
    return not letters or all(c.isupper() for c in letters) or all(c.islower() for c in letters)


def _sentence_initial(words: Sequence[_Word], i: int) -> bool:
    if i == 0:
        return True
    prev = words[i - 1].raw
    if prev.lower() in _ABBREV_PERIOD:
        return False
    if prev in ("-", "–", "—") and i >= 2:
        return _sentence_initial(words, i - 1)
    return bool(_SENT_END.search(prev)) or words[i].raw[:1] in "\"“‘'("


def _strip_possessive(core: str) -> str:
    if _POSSESSIVE.search(core) and len(core) > 3:
        return core[:-2] if core[-2] in "'’" else core[:-1]
    return core


def _is_name_token(core: str) -> bool:
    if len(core) < 2 or not core[0].isupper() or not core[0].isalpha():
        return False
    return bool(re.fullmatch(r"[^\W\d_][\w'’\-.]*", core))


@lru_cache(maxsize=65536)
def _normalize(text: str) -> str:
    return _normalizer()(text)


@lru_cache(maxsize=1)
def _normalizer() -> EnglishNormalizer:
    return EnglishNormalizer()


def _count_phrase(normalized_phrase: str, normalized_text: str) -> int:
    if not normalized_phrase:
        return 0
    return len(re.findall(r"(?<!\S)" + re.escape(normalized_phrase) + r"(?!\S)", normalized_text))


def _number_candidates(reference: str, words: Sequence[_Word]) -> list[MaskTarget]:
    out = []
    for span in find_numbers(reference):
        if isinstance(span.value, int) and span.value in TRIVIAL_NUMBER_VALUES:
            continue
        ws = _word_span(words, span.start, span.end)
        if ws is None:
            continue
        # a number glued to letters ("twenty-something") is not a clean target
        if not all(_number_token(w.core) for w in words[ws[0] : ws[1]]):
            continue
        out.append(
            MaskTarget(
                text=span.text,
                kind="number",
                word_start=ws[0],
                word_end=ws[1],
                char_start=span.start,
                char_end=span.end,
                value=span.value,
                ref_count=max(1, count_number(reference, span.value)),
            )
        )
    return out


_NUMBER_GLUE = frozenset({"and", "a", "point", "oh", "o", "minus", "negative"})


def _number_token(core: str) -> bool:
    """Whether a whitespace token is made only of number material ('twenty-one', '$5', '5%')."""
    core = _strip_possessive(core.strip("$€£¥%"))
    if not core:
        return False
    parts = core.split("-") if not core[:1].isdigit() else [core]
    return all(p and (is_number_word(p) or p.lower() in _NUMBER_GLUE) for p in parts)


def _proper_noun_candidates(reference: str, words: Sequence[_Word], stoplist: frozenset[str]) -> list[MaskTarget]:
    if _caseless(reference):
        return []
    norm_ref = _normalize(reference)
    out: list[MaskTarget] = []
    run: list[int] = []

    def close() -> None:
        if not run:
            return
        a, b = run[0], run[-1]
        text_end = words[b].core_start + len(_strip_possessive(words[b].core))
        text = reference[words[a].core_start : text_end]
        ref_count = max(1, _count_phrase(_normalize(text), norm_ref))
        out.append(MaskTarget(text, "proper-noun", a, b + 1, words[a].core_start, text_end, None, ref_count))
        run.clear()

    for i, w in enumerate(words):
        core = _strip_possessive(w.core)
        ok = (
            _is_name_token(core)
            and core.lower().rstrip(".") not in stoplist
            and core.lower() not in stoplist
            and not _sentence_initial(words, i)
            and not is_number_word(core)
        )
        if ok and run and (words[run[-1]].raw != words[run[-1]].core or _strip_possessive(words[run[-1]].core) != words[run[-1]].core):
            close()  # punctuation or a possessive ends a name ("Merkel, Macron")
        if ok:
            run.append(i)
        else:
            close()
    close()
    return out


_NER_WARNED: set[str] = set()


def _entity_candidates(reference: str, words: Sequence[_Word], model: str) -> list[MaskTarget]:
    """Named entities from spaCy; skipped (with one log line) when spaCy or the model is absent."""
    try:
        nlp = _spacy_model(model)  # spaCy is an optional extra
    except (ImportError, OSError) as exc:
        if model not in _NER_WARNED:
            _NER_WARNED.add(model)
            log.info("NER targets skipped: spaCy model '%s' is not available (%s); numbers and proper nouns still used", model, exc)
        return []
    norm_ref = _normalize(reference)
    out = []
    for ent in nlp(reference).ents:
        if ent.label_ not in NER_LABELS:
            continue
        ws = _word_span(words, ent.start_char, ent.end_char)
        if ws is None:
            continue
        text = reference[ent.start_char : ent.end_char]
        out.append(
            MaskTarget(
                text,
                "entity",
                ws[0],
                ws[1],
                ent.start_char,
                ent.end_char,
                None,
                max(1, _count_phrase(_normalize(text), norm_ref)),
                f"spacy:{model}",
            )
        )
    return out


@lru_cache(maxsize=4)
def _spacy_model(model: str) -> Any:
    import spacy

    return spacy.load(model)


def _rank(t: MaskTarget) -> tuple[int, int, int]:
    """Numbers, then names, then entities; within a kind the less guessable first, then position."""
    kind_rank = {"number": 0, "proper-noun": 1, "entity": 2}[t.kind]
    if t.kind == "number":
        guessable = 0 if (t.n_words > 1 or any(c.isdigit() for c in t.text)) else 1
    else:
        words = re.findall(r"[^\W\d_]+", t.text.lower())
        guessable = 1 if words and all(w in LOW_PRIORITY_NAMES for w in words) else 0
    return (kind_rank, guessable, t.word_start)


def select_mask_targets(
    reference: str,
    max_targets: int = 1,
    *,
    kinds: Sequence[str] = KINDS,
    stoplist: Iterable[str] | None = None,
    ner: str | None = "en_core_web_sm",
) -> list[MaskTarget]:
    """Words to silence in a raw reference, best first, non-overlapping; [] when none.

    Order: numbers (digits or multi-word first), then proper nouns, then spaCy entities
    (``ner=None`` turns that source off). Use :func:`explain_no_targets` to say why a
    reference gave nothing.
    """
    if max_targets < 1:
        raise ConfigError(f"max_targets must be at least 1, got {max_targets}")
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise ConfigError(f"unknown mask target kinds {bad}; choose from {KINDS}")
    if reference is None or not reference.strip():
        return []
    stop = frozenset(s.lower() for s in stoplist) if stoplist is not None else DEFAULT_STOPLIST
    words = _words(reference)
    cands: list[MaskTarget] = []
    if "number" in kinds:
        cands += _number_candidates(reference, words)
    if "proper-noun" in kinds:
        cands += _proper_noun_candidates(reference, words, stop)
    if "entity" in kinds and ner:
        cands += [e for e in _entity_candidates(reference, words, ner) if e.text.lower() not in stop]
    chosen: list[MaskTarget] = []
    taken: set[int] = set()
    chosen_texts: set[str] = set()
    for t in sorted(cands, key=_rank):
        span = set(range(t.word_start, t.word_end))
        same = str(t.value) if t.kind == "number" else t.text.lower()
        if span & taken or same in chosen_texts:
            continue  # overlapping, or a second copy of a word already chosen
        chosen.append(t)
        taken |= span
        chosen_texts.add(same)
        if len(chosen) == max_targets:
            break
    return sorted(chosen, key=lambda t: t.word_start)


def explain_no_targets(reference: str, *, stoplist: Iterable[str] | None = None) -> str:
    """Why a reference has no maskable word, in words a user can act on ('' when it has one)."""
    if reference is None or not reference.strip():
        return "the reference is empty"
    stop = frozenset(s.lower() for s in stoplist) if stoplist is not None else DEFAULT_STOPLIST
    words = _words(reference)
    if _number_candidates(reference, words) or _proper_noun_candidates(reference, words, stop):
        return ""
    reasons = []
    numbers = find_numbers(reference)
    if numbers:
        reasons.append(
            "its only numbers are trivial or glued to letters ("
            + ", ".join(repr(s.text) for s in numbers)
            + "; 'one' is too common to test)"
        )
    else:
        reasons.append("it has no number (digits or number words)")
    if _caseless(reference):
        reasons.append("it is all one case, so capitalization cannot mark proper nouns")
    else:
        caps = [w.core for i, w in enumerate(words) if _is_name_token(_strip_possessive(w.core))]
        initial = [w.core for i, w in enumerate(words) if _is_name_token(w.core) and _sentence_initial(words, i)]
        stopped = [c for c in caps if c.lower().rstrip(".") in stop or _strip_possessive(c).lower() in stop]
        if not caps:
            reasons.append("it has no capitalized word")
        else:
            detail = []
            if initial:
                detail.append("sentence-initial: " + ", ".join(initial))
            if stopped:
                detail.append("on the stoplist: " + ", ".join(stopped))
            reasons.append("its capitalized words are not names (" + "; ".join(detail or ["none qualify"]) + ")")
    return "no maskable word: " + "; ".join(reasons)


def require_mask_targets(reference: str, max_targets: int = 1, utt_id: str | None = None, **kwargs: Any) -> list[MaskTarget]:
    """select_mask_targets, raising NoMaskableWord with the reason when nothing qualifies."""
    targets = select_mask_targets(reference, max_targets, **kwargs)
    if not targets:
        where = f"utterance '{utt_id}': " if utt_id is not None else ""
        raise NoMaskableWord(f"{where}{explain_no_targets(reference, stoplist=kwargs.get('stoplist'))}")
    return targets


# ------------------------------------------------------------------ matching


def target_count(target: MaskTarget, hyp_raw: str | None) -> int:
    """How many times the hypothesis writes the target (numbers by value, names normalized)."""
    if not hyp_raw:
        return 0
    if target.kind == "number" and target.value is not None:
        return count_number(hyp_raw, target.value)
    phrase = _normalize(target.text)
    if not phrase.strip():
        phrase = target.text.lower()
        return _count_phrase(phrase, re.sub(r"\s+", " ", hyp_raw.lower()))
    return _count_phrase(phrase, _normalize(hyp_raw))


def target_in_text(target: MaskTarget, hyp_raw: str | None) -> bool:
    """Whether the hypothesis writes the target as often as the reference does."""
    return target_count(target, hyp_raw) >= target.ref_count


# ------------------------------------------------------------------ scoring


@dataclass(frozen=True)
class MaskRecord:
    """One model's transcripts of a clip before and after masking one target."""

    model: str
    parent_id: str
    target: MaskTarget
    hyp_original: str | None
    hyp_masked: str | None
    variant: str = "silence"  # 'silence' | 'attenuate' | 'noise' ...


@dataclass
class LeakCounts:
    """Gated leak counts; rate is None (with a status) when nothing was gated."""

    n_total: int = 0
    n_failed: int = 0  # a transcript is missing (failed row)
    n_gated: int = 0
    n_leaked: int = 0

    @property
    def n_not_gated(self) -> int:
        return self.n_total - self.n_failed - self.n_gated

    @property
    def rate(self) -> float | None:
        return self.n_leaked / self.n_gated if self.n_gated else None

    @property
    def ci95(self) -> tuple[float, float] | None:
        return wilson_interval(self.n_leaked, self.n_gated) if self.n_gated else None

    @property
    def status(self) -> str:
        if self.n_total == 0:
            return "no-records"
        return "ok" if self.n_gated else "no-gated-clips"

    def add(self, rec: MaskRecord) -> None:
        self.n_total += 1
        if rec.hyp_original is None or rec.hyp_masked is None:
            self.n_failed += 1
            return
        if not target_in_text(rec.target, rec.hyp_original):
            return
        self.n_gated += 1
        if target_in_text(rec.target, rec.hyp_masked):
            self.n_leaked += 1

    def to_dict(self) -> dict[str, Any]:
        ci = self.ci95
        d: dict[str, Any] = {
            "rate": self.rate,
            "ci95": list(ci) if ci else None,
            "n_gated": self.n_gated,
            "n_leaked": self.n_leaked,
            "n_total": self.n_total,
            "n_not_gated": self.n_not_gated,
            "n_failed": self.n_failed,
            "status": self.status,
        }
        if self.status == "no-gated-clips":
            d["note"] = "the model never wrote the target on the unmasked audio, so leakage is undefined"
        return d


@dataclass
class ModelLeak(LeakCounts):
    """Leak counts of one model on the primary variant, with breakdowns."""

    model: str = ""
    variant: str = "silence"
    n_clips: int = 0  # distinct parent clips
    by_kind: dict[str, LeakCounts] = field(default_factory=dict)
    by_variant: dict[str, LeakCounts] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["variant"] = self.variant
        d["n_clips"] = self.n_clips
        d["by_kind"] = {k: v.to_dict() for k, v in sorted(self.by_kind.items())}
        d["by_variant"] = {k: v.to_dict() for k, v in sorted(self.by_variant.items())}
        return d


@dataclass
class LeakResult:
    """Gated leak rate per model (``probes.masking.<model>`` in summary.json)."""

    models: dict[str, ModelLeak]
    variant: str

    def __getitem__(self, model: str) -> ModelLeak:
        return self.models[model]

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {m: r.to_dict() for m, r in sorted(self.models.items())}


def gated_leak_rate(records: Iterable[MaskRecord], primary_variant: str = "silence") -> LeakResult:
    """Per model: among targets written on the unmasked clip, the share still written when masked.

    Top-level counts use one masking variant (``primary_variant`` when several are present,
    else the only one); every variant is also reported under ``by_variant``.
    """
    recs = list(records)
    if not recs:
        raise AuditError("no masked-word records to score: no reference had a maskable word, or no model ran on the masked clips")
    seen: set[tuple[str, str, int, int, str]] = set()
    for r in recs:
        key = (r.model, r.parent_id, r.target.char_start, r.target.char_end, r.variant)
        if key in seen:
            raise AuditError(
                f"duplicate masked-word record: model '{r.model}', clip '{r.parent_id}', target '{r.target.text}', "
                f"variant '{r.variant}'; each (model, clip, target, variant) must be scored once"
            )
        seen.add(key)
    variants = sorted({r.variant for r in recs})
    if len(variants) == 1:
        primary = variants[0]
    elif primary_variant in variants:
        primary = primary_variant
    else:
        raise ConfigError(
            f"records hold masking variants {variants} but not the primary variant '{primary_variant}'; pass primary_variant= one of them"
        )
    models: dict[str, ModelLeak] = {}
    clips: dict[str, set[str]] = defaultdict(set)
    for r in recs:
        ml = models.setdefault(r.model, ModelLeak(model=r.model, variant=primary))
        ml.by_variant.setdefault(r.variant, LeakCounts()).add(r)
        if r.variant != primary:
            continue
        ml.add(r)
        ml.by_kind.setdefault(r.target.kind, LeakCounts()).add(r)
        clips[r.model].add(r.parent_id)
    for m, ml in models.items():
        ml.n_clips = len(clips[m])
    return LeakResult(models, primary)
