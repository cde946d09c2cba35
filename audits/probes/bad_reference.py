"""Bad-reference acceptance: does a model write the benchmark's (wrong) reference or what was said?

Some references are not transcripts of their audio: VoxPopuli's come from the parliamentary
record, so they hold words nobody said ("madam president") and lack words somebody did ("thank
you"). A model that listens writes the audio's version there; only a model that has learned the
benchmark's text writes the reference's. Where those spans are is decided without the models
under test, either by a panel of independent models (a supermajority making the same edit to
the reference) or by human-verified corrected references.

accept-ref of a model = share of the spans it is eligible for where it reproduced the reference.
It is a rate over disagreements, not a WER, and its denominator differs between models, so it is
always reported with ``n_eligible`` and a Wilson 95% interval.

The default settings reproduce the published result of the reference implementation
(HumeAI/asr-benchmark-optimization) on its VoxPopuli-150 prediction files exactly, which is why
the default aligner is :mod:`difflib` (its opcodes decide which reference words count as missed)
and why the deletion CER is difflib's character coverage rather than an edit distance.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Callable, Literal, Mapping, Sequence

from rapidfuzz.distance import Levenshtein

from audits.asr.stats import wilson_interval
from audits.normalizing import get_normalizer
from engine.errors import ConfigError, RegistryError
from normalizers import Normalizer

log = logging.getLogger(__name__)

SpanKind = Literal["delete", "insert"]
Position = Literal["start", "end", "middle"]
Verdict = Literal["ref", "consensus", "ineligible"]
SpanSource = Literal["panel", "corrections", "panel+corrections"]
Aligner = Literal["difflib", "levenshtein"]

# Keys of BadReferenceReport.to_dict() besides the per-model entries; a model may not use them.
RESERVED_KEYS = frozenset({"spans", "n_spans", "n_clips", "panel", "settings", "normalizer", "source"})


# --------------------------------------------------------------------------------------------
# settings and records


@dataclass(frozen=True)
class BadRefSettings:
    """Thresholds of the panel consensus; the defaults are the published ones."""

    supermajority: float = 0.8
    """Share of the eligible panel that must make the same edit (rounded up: 4 members need 4)."""
    min_agree: int = 2
    """Never fewer agreeing members than this, however small the eligible panel."""
    min_ref_match: float = 0.5
    """A model is eligible on a clip when it reproduces floor(min_ref_match * n_ref) reference tokens."""
    min_eligible_panel: int = 3
    """Clips with fewer eligible panel members are skipped: no trustworthy consensus."""
    min_deletion_cer: float = 0.30
    """Deletions whose median panel replacement is closer than this (CER) are normalization artifacts."""
    min_span_tokens: int = 1
    """Shortest span worth counting, in tokens."""
    boundary_deletions_only: bool = True
    """Only deletions touching the first or last reference token (interior alignment is ambiguous)."""
    boundary_insertions_only: bool = True
    """Only insertions before the first or after the last reference token."""
    normalizer: str = "whisper-english"
    """Normalizer name (normalizers.get_normalizer) applied to references and hypotheses."""
    canonicalize_numbers: bool = True
    """Also rewrite spelled-out numbers as digits (text2num), as the reference implementation does."""
    aligner: Aligner = "difflib"
    """Word aligner: 'difflib' (reference implementation) or 'levenshtein' (minimum edit)."""

    def __post_init__(self) -> None:
        if not 0.0 < self.supermajority <= 1.0:
            raise ConfigError(f"bad_reference.supermajority must be in (0, 1], got {self.supermajority}")
        if self.min_agree < 1:
            raise ConfigError(f"bad_reference.min_agree must be >= 1, got {self.min_agree}")
        if not 0.0 <= self.min_ref_match <= 1.0:
            raise ConfigError(f"bad_reference.min_ref_match must be in [0, 1], got {self.min_ref_match}")
        if self.min_eligible_panel < 1:
            raise ConfigError(f"bad_reference.min_eligible_panel must be >= 1, got {self.min_eligible_panel}")
        if not 0.0 <= self.min_deletion_cer <= 1.0:
            raise ConfigError(f"bad_reference.min_deletion_cer must be in [0, 1], got {self.min_deletion_cer}")
        if self.min_span_tokens < 1:
            raise ConfigError(f"bad_reference.min_span_tokens must be >= 1, got {self.min_span_tokens}")
        if self.aligner not in ("difflib", "levenshtein"):
            raise ConfigError(f"bad_reference.aligner must be 'difflib' or 'levenshtein', got '{self.aligner}'")

    def agree_threshold(self, n_eligible_panel: int) -> int:
        """Members that must make an edit; the epsilon keeps 0.8 * 5 at 4, not 5."""
        return max(self.min_agree, math.ceil(self.supermajority * n_eligible_panel - 1e-9))

    def min_matched(self, n_ref_tokens: int) -> int:
        """Reference tokens a model must reproduce to be eligible on a clip."""
        return int(self.min_ref_match * n_ref_tokens)

    def to_dict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class BadSpan:
    """One reference error on one clip.

    ``delete``: the reference holds words that were not spoken (``ref_span``); ``replacement`` is
    what the panel wrote instead (often nothing). ``insert``: the reference lacks spoken words
    (``replacement``) at reference position ``token_indices[0]`` (0 = before the first token).
    """

    clip_id: str
    kind: SpanKind
    position: Position
    ref_span: str
    replacement: str
    token_indices: tuple[int, ...]
    n_panel_agree: int
    n_panel_eligible: int
    median_cer: float | None = None
    source: SpanSource = "panel"

    @property
    def text(self) -> str:
        """The disputed words: the reference's for a deletion, the spoken ones for an insertion."""
        return self.ref_span if self.kind == "delete" else self.replacement

    def describe(self) -> str:
        return f"{self.kind} at {self.position} '{self.text}'"

    def to_dict(self) -> dict[str, object]:
        return {
            "clip_id": self.clip_id,
            "kind": self.kind,
            "position": self.position,
            "text": self.text,
            "ref_span": self.ref_span,
            "replacement": self.replacement,
            "token_indices": list(self.token_indices),
            "n_panel_agree": self.n_panel_agree,
            "n_panel_eligible": self.n_panel_eligible,
            "median_cer": self.median_cer,
            "source": self.source,
        }


@dataclass(frozen=True)
class SpanDecision:
    """One model's verdict on one span (``span_index`` indexes the span list it was scored on)."""

    clip_id: str
    span_index: int
    verdict: Verdict


@dataclass(frozen=True)
class AcceptRefResult:
    """accept-ref of one model: n_ref of n_eligible spans where it wrote the reference."""

    model: str
    n_ref: int
    n_eligible: int
    rate: float | None
    ci95: tuple[float, float] | None
    decisions: tuple[SpanDecision, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "rate": self.rate,
            "ci95": list(self.ci95) if self.ci95 is not None else None,
            "n_ref": self.n_ref,
            "n_eligible": self.n_eligible,
        }


@dataclass(frozen=True)
class BadReferenceReport:
    """Spans found plus every model's accept-ref; ``to_dict`` is ``summary.json``'s ``probes.bad_reference``."""

    n_clips: int
    panel: tuple[str, ...]
    spans: tuple[BadSpan, ...]
    results: Mapping[str, AcceptRefResult]
    settings: BadRefSettings
    normalizer_name: str
    normalizer_version: str
    source: SpanSource = "panel"

    def ordered_models(self) -> list[str]:
        """Highest accept-ref first (the most benchmark-optimized lead), then by name."""
        return sorted(self.results, key=lambda m: (-(self.results[m].rate or 0.0), m))

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {m: self.results[m].to_dict() for m in self.ordered_models()}
        verdicts: list[dict[str, str]] = [{} for _ in self.spans]
        for model, res in self.results.items():
            for d in res.decisions:
                verdicts[d.span_index][model] = d.verdict
        out.update(
            {
                "n_clips": self.n_clips,
                "panel": list(self.panel),
                "n_spans": len(self.spans),
                "source": self.source,
                "settings": self.settings.to_dict(),
                "normalizer": {"name": self.normalizer_name, "version": self.normalizer_version},
                "spans": [dict(s.to_dict(), verdicts=v) for s, v in zip(self.spans, verdicts)],
            }
        )
        return out

    def format_table(self) -> str:
        """Plain-text table in the layout of the reference implementation's output."""
        header = ("model", "accept-ref", "95% CI", "n_ref", "n_eligible")
        rows = []
        for m in self.ordered_models():
            r = self.results[m]
            rate = "n/a" if r.rate is None else f"{r.rate:.3f}"
            ci = "n/a" if r.ci95 is None else f"[{r.ci95[0]:.3f}, {r.ci95[1]:.3f}]"
            rows.append((m, rate, ci, str(r.n_ref), str(r.n_eligible)))
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

        def line(cells: Sequence[str]) -> str:
            return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

        title = f"clips: {self.n_clips}   panel: {len(self.panel)}   reference errors found: {len(self.spans)}"
        return "\n".join([title, "", line(header), *(line(r) for r in rows)])


# --------------------------------------------------------------------------------------------
# text preparation and alignment


class Tokenizer:
    """Normalizes (and optionally digitizes numbers) once per distinct text, then splits."""

    def __init__(self, normalizer: Normalizer, canonicalize_numbers: bool) -> None:
        self._normalize = normalizer
        self._numbers = _number_canonicalizer() if canonicalize_numbers else None
        self._cache: dict[str, tuple[str, ...]] = {}

    def __call__(self, text: str | None) -> tuple[str, ...]:
        key = text or ""
        hit = self._cache.get(key)
        if hit is None:
            norm = self._normalize(key) if key else ""
            if norm and self._numbers is not None:
                norm = self._numbers(norm)
            hit = tuple(norm.split())
            self._cache[key] = hit
        return hit


@lru_cache(maxsize=1)
def _number_canonicalizer() -> Callable[[str], str]:
    """text2num's English digitizer (a declared dependency: without it results would differ by machine)."""
    try:
        from text_to_num import alpha2digit
    except ImportError:
        raise ConfigError("the bad-reference probe needs text2num to canonicalize spelled-out numbers: pip install text2num") from None

    def digitize(text: str) -> str:
        try:
            return str(alpha2digit(text, "en"))
        except Exception:  # text2num raises on odd inputs; the normalized text is still usable
            log.debug("text2num could not digitize %r", text)
            return text

    return digitize


@dataclass(frozen=True)
class _Alignment:
    """What one hypothesis did to one reference, at word level."""

    n_matched: int
    missed: frozenset[int]
    replaced: tuple[tuple[int, int, tuple[str, ...]], ...]
    inserted: Mapping[int, tuple[str, ...]]

    def replacement_for(self, span: frozenset[int]) -> tuple[str, ...]:
        """Hypothesis words substituted for any of ``span``; a pure deletion contributes nothing."""
        out: list[str] = []
        for i1, i2, words in self.replaced:
            if any(i in span for i in range(i1, i2)):
                out.extend(words)
        return tuple(out)


def _opcodes(ref: Sequence[str], hyp: Sequence[str], aligner: Aligner) -> list[tuple[str, int, int, int, int]]:
    if aligner == "difflib":
        # autojunk off: it would discard frequent tokens, i.e. the function words at the boundaries
        return [(str(t), i1, i2, j1, j2) for t, i1, i2, j1, j2 in SequenceMatcher(None, ref, hyp, autojunk=False).get_opcodes()]
    return [(op.tag, op.src_start, op.src_end, op.dest_start, op.dest_end) for op in Levenshtein.opcodes(list(ref), list(hyp))]


def _align(ref: Sequence[str], hyp: Sequence[str], aligner: Aligner) -> _Alignment:
    matched = 0
    missed: set[int] = set()
    replaced: list[tuple[int, int, tuple[str, ...]]] = []
    inserted: dict[int, list[str]] = {}
    for tag, i1, i2, j1, j2 in _opcodes(ref, hyp, aligner):
        if tag == "equal":
            matched += i2 - i1
        elif tag == "insert":
            inserted.setdefault(i1, []).extend(hyp[j1:j2])
        else:  # delete or replace: the reference words at i1:i2 were not reproduced
            missed.update(range(i1, i2))
            if tag == "replace":
                replaced.append((i1, i2, tuple(hyp[j1:j2])))
    return _Alignment(matched, frozenset(missed), tuple(replaced), {k: tuple(v) for k, v in inserted.items()})


def span_cer(ref_text: str, hyp_text: str) -> float:
    """Whitespace-blind character error: 1 - (reference characters difflib matches) / len(reference).

    Blind to spaces so that "l actuelle" vs "lactuelle" scores 0; only thresholded.
    """
    r = "".join(ref_text.split())
    h = "".join(hyp_text.split())
    if not r:
        return 0.0 if not h else 1.0
    covered = sum(block.size for block in SequenceMatcher(None, r, h, autojunk=False).get_matching_blocks())
    return 1.0 - covered / len(r)


def _position(first: int, last: int, n_ref: int) -> Position:
    if first == 0:
        return "start"
    if last == n_ref - 1:
        return "end"
    return "middle"


def _insert_position(anchor: int, n_ref: int) -> Position:
    if anchor == 0:
        return "start"
    if anchor == n_ref:
        return "end"
    return "middle"


def _emitted(model_insert: Sequence[str], chunk: Sequence[str], anchored_right: bool) -> bool:
    """Did a model insert ``chunk`` hard against the anchor (suffix before the first word, prefix otherwise)?"""
    n = len(chunk)
    if n == 0 or len(model_insert) < n:
        return False
    part = model_insert[-n:] if anchored_right else model_insert[:n]
    return tuple(part) == tuple(chunk)


def _consensus_insertion(lists: Sequence[Sequence[str]], anchored_right: bool, threshold: int) -> tuple[str, ...]:
    """Words at least ``threshold`` members inserted at the same distance from the anchor.

    Grows outward from the anchor one word at a time and stops at the first distance without a
    qualifying word, so one verbose member cannot stretch the span.
    """
    chunk: list[str] = []
    depth = 0
    while True:
        counts: dict[str, int] = {}
        for words in lists:
            if depth < len(words):
                w = words[-1 - depth] if anchored_right else words[depth]
                counts[w] = counts.get(w, 0) + 1
        if not counts:
            break
        best = max(counts, key=lambda w: counts[w])  # ties: first seen, in panel order
        if counts[best] < threshold:
            break
        chunk.append(best)
        depth += 1
    return tuple(reversed(chunk)) if anchored_right else tuple(chunk)


def _verdict(span: BadSpan, align: _Alignment, eligible: bool) -> Verdict:
    if not eligible:
        return "ineligible"
    if span.kind == "delete":
        return "consensus" if align.missed & frozenset(span.token_indices) else "ref"
    anchor = span.token_indices[0]
    words = align.inserted.get(anchor, ())
    chunk = tuple(span.replacement.split())
    if span.position == "middle" and span.source == "corrections":
        hit = any(tuple(words[k : k + len(chunk)]) == chunk for k in range(len(words) - len(chunk) + 1))
        return "consensus" if hit else "ref"
    return "consensus" if _emitted(words, chunk, anchored_right=anchor == 0) else "ref"


# --------------------------------------------------------------------------------------------
# input checks


def _check_coverage(who: str, hyps: Mapping[str, str], clip_ids: Sequence[str]) -> None:
    missing = [c for c in clip_ids if c not in hyps]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ConfigError(
            f"{who} has no hypothesis for {len(missing)} of {len(clip_ids)} clips ({shown}); "
            "re-run it on the full set or restrict the references to the clips it covers"
        )


def _check_panel(panel_hyps: Mapping[str, Mapping[str, str]], settings: BadRefSettings) -> None:
    if not panel_hyps:
        raise ConfigError(
            f"bad_reference: the panel is empty; name at least {settings.min_eligible_panel} independent ASR models as the panel"
        )
    if len(panel_hyps) < settings.min_eligible_panel:
        raise ConfigError(
            f"bad_reference: the panel has {len(panel_hyps)} model(s) ({', '.join(panel_hyps)}) but "
            f"min_eligible_panel is {settings.min_eligible_panel}; add panel models or lower min_eligible_panel"
        )


def resolve_normalizer(settings: BadRefSettings, normalizer: Normalizer | None) -> Normalizer:
    if normalizer is not None:
        return normalizer
    try:
        return get_normalizer(settings.normalizer)
    except RegistryError as exc:
        raise ConfigError(f"bad_reference.normalizer: {exc}") from None


# --------------------------------------------------------------------------------------------
# finding spans


def find_bad_spans(
    refs: Mapping[str, str],
    panel_hyps: Mapping[str, Mapping[str, str]],
    settings: BadRefSettings | None = None,
    normalizer: Normalizer | None = None,
) -> list[BadSpan]:
    """Reference spans a supermajority of the eligible panel contradicts, in clip order.

    ``refs`` maps clip id to raw reference; ``panel_hyps`` maps panel model to clip id to raw
    hypothesis, and must cover every clip in ``refs``.
    """
    settings = settings or BadRefSettings()
    _check_panel(panel_hyps, settings)
    clip_ids = list(refs)
    for member, hyps in panel_hyps.items():
        _check_coverage(f"panel model '{member}'", hyps, clip_ids)
    tok = Tokenizer(resolve_normalizer(settings, normalizer), settings.canonicalize_numbers)

    spans: list[BadSpan] = []
    n_skipped = 0
    for clip_id in clip_ids:
        ref = tok(refs[clip_id])
        if not ref:
            continue
        need = settings.min_matched(len(ref))
        aligned = {m: _align(ref, tok(h[clip_id]), settings.aligner) for m, h in panel_hyps.items()}
        eligible = [a for a in aligned.values() if a.n_matched >= need]
        if len(eligible) < settings.min_eligible_panel:
            n_skipped += 1
            continue
        threshold = settings.agree_threshold(len(eligible))
        spans.extend(_deletion_spans(clip_id, ref, eligible, threshold, settings))
        spans.extend(_insertion_spans(clip_id, ref, eligible, threshold, settings))
    log.info(
        "bad_reference: %d spans on %d clips (%d clips skipped: fewer than %d eligible panel members)",
        len(spans),
        len(clip_ids),
        n_skipped,
        settings.min_eligible_panel,
    )
    return spans


def _deletion_spans(
    clip_id: str, ref: Sequence[str], panel: Sequence[_Alignment], threshold: int, settings: BadRefSettings
) -> list[BadSpan]:
    """Maximal runs of reference words that at least ``threshold`` members did not reproduce."""
    n_ref = len(ref)
    votes = [sum(1 for a in panel if i in a.missed) for i in range(n_ref)]
    runs: list[list[int]] = []
    current: list[int] = []
    for i, v in enumerate(votes + [0]):  # sentinel closes a run that reaches the end
        if i < n_ref and v >= threshold:
            current.append(i)
            continue
        if len(current) >= settings.min_span_tokens:
            runs.append(current)
        current = []
    if settings.boundary_deletions_only:
        runs = [r for r in runs if r[0] == 0 or r[-1] == n_ref - 1]

    out: list[BadSpan] = []
    for run in runs:
        span = frozenset(run)
        ref_text = " ".join(ref[i] for i in run)
        candidates = []
        for a in panel:
            if a.missed & span:
                repl = " ".join(a.replacement_for(span))
                candidates.append((span_cer(ref_text, repl), repl))
        candidates.sort(key=lambda c: c[0])
        median_cer, replacement = candidates[len(candidates) // 2] if candidates else (1.0, "")
        if median_cer < settings.min_deletion_cer:
            log.debug("clip %s: '%s' -> '%s' dropped as a normalization artifact", clip_id, ref_text, replacement)
            continue
        out.append(
            BadSpan(
                clip_id=clip_id,
                kind="delete",
                position=_position(run[0], run[-1], n_ref),
                ref_span=ref_text,
                replacement=replacement,
                token_indices=tuple(run),
                n_panel_agree=min(votes[i] for i in run),
                n_panel_eligible=len(panel),
                median_cer=round(median_cer, 3),
            )
        )
    return out


def _insertion_spans(
    clip_id: str, ref: Sequence[str], panel: Sequence[_Alignment], threshold: int, settings: BadRefSettings
) -> list[BadSpan]:
    """Words at least ``threshold`` members inserted at the same reference position."""
    n_ref = len(ref)
    anchors = (0, n_ref) if settings.boundary_insertions_only else tuple(range(n_ref + 1))
    out: list[BadSpan] = []
    for anchor in anchors:
        right = anchor == 0  # before the first word, the inserted words hug the reference from the left
        lists = [a.inserted.get(anchor, ()) for a in panel]
        chunk = _consensus_insertion(lists, right, threshold)
        if len(chunk) < settings.min_span_tokens:
            continue
        n_agree = sum(1 for words in lists if _emitted(words, chunk, right))
        if n_agree < threshold:
            continue
        out.append(
            BadSpan(
                clip_id=clip_id,
                kind="insert",
                position=_insert_position(anchor, n_ref),
                ref_span="",
                replacement=" ".join(chunk),
                token_indices=(anchor,),
                n_panel_agree=n_agree,
                n_panel_eligible=len(panel),
            )
        )
    return out


def find_spans_from_corrections(
    refs: Mapping[str, str],
    corrected_refs: Mapping[str, str],
    normalizer: Normalizer | None = None,
    settings: BadRefSettings | None = None,
) -> list[BadSpan]:
    """Spans where a human-verified corrected reference differs from the original (after normalization).

    Reference words the correction removes or replaces become ``delete`` spans; words it adds
    become ``insert`` spans. Clips absent from ``corrected_refs`` yield nothing.
    """
    settings = settings or BadRefSettings()
    unknown = [c for c in corrected_refs if c not in refs]
    if unknown:
        raise ConfigError(
            f"corrections name {len(unknown)} clip(s) with no reference ({', '.join(unknown[:5])}); "
            "check that the corrections file belongs to this dataset"
        )
    tok = Tokenizer(resolve_normalizer(settings, normalizer), settings.canonicalize_numbers)
    spans: list[BadSpan] = []
    for clip_id in refs:
        if clip_id not in corrected_refs:
            continue
        ref = tok(refs[clip_id])
        fixed = tok(corrected_refs[clip_id])
        n_ref = len(ref)
        for tag, i1, i2, j1, j2 in _opcodes(ref, fixed, settings.aligner):
            if tag == "equal":
                continue
            if tag == "insert":
                spans.append(
                    BadSpan(clip_id, "insert", _insert_position(i1, n_ref), "", " ".join(fixed[j1:j2]), (i1,), 0, 0, None, "corrections")
                )
            else:
                spans.append(
                    BadSpan(
                        clip_id,
                        "delete",
                        _position(i1, i2 - 1, n_ref),
                        " ".join(ref[i1:i2]),
                        " ".join(fixed[j1:j2]),
                        tuple(range(i1, i2)),
                        0,
                        0,
                        None,
                        "corrections",
                    )
                )
    return spans


def confirm_spans(panel_spans: Sequence[BadSpan], correction_spans: Sequence[BadSpan], reviewed_clips: Sequence[str]) -> list[BadSpan]:
    """Keep panel spans a correction confirms; drop those on reviewed clips it does not confirm.

    A span is confirmed by a correction span of the same clip and kind whose token indices
    overlap (deletions) or share the anchor (insertions). Spans on clips nobody reviewed stay,
    marked ``source='panel'``.
    """
    reviewed = set(reviewed_clips)
    by_clip: dict[str, list[BadSpan]] = {}
    for c in correction_spans:
        by_clip.setdefault(c.clip_id, []).append(c)
    out: list[BadSpan] = []
    for s in panel_spans:
        if s.clip_id not in reviewed:
            out.append(s)
            continue
        idx = set(s.token_indices)
        if any(c.kind == s.kind and idx & set(c.token_indices) for c in by_clip.get(s.clip_id, [])):
            out.append(replace(s, source="panel+corrections"))
        else:
            log.info("clip %s: panel span %s rejected by the corrections", s.clip_id, s.describe())
    return out


# --------------------------------------------------------------------------------------------
# scoring models


def accept_ref(
    spans: Sequence[BadSpan],
    model_hyps: Mapping[str, str],
    refs: Mapping[str, str],
    settings: BadRefSettings | None = None,
    normalizer: Normalizer | None = None,
    model: str = "model",
) -> AcceptRefResult:
    """Score one model (``model_hyps``: clip id -> raw hypothesis) against ``spans``.

    Eligible spans are those on clips where the model reproduced enough of the reference
    (``settings.min_ref_match``); ``n_ref`` counts those where it wrote the reference's version.
    """
    settings = settings or BadRefSettings()
    clips = list(dict.fromkeys(s.clip_id for s in spans))
    no_ref = [c for c in clips if c not in refs]
    if no_ref:
        raise ConfigError(f"spans name {len(no_ref)} clip(s) missing from the references ({', '.join(no_ref[:5])})")
    _check_coverage(f"model '{model}'", model_hyps, clips)
    tok = Tokenizer(resolve_normalizer(settings, normalizer), settings.canonicalize_numbers)

    cache: dict[str, tuple[_Alignment, bool]] = {}
    decisions: list[SpanDecision] = []
    for idx, span in enumerate(spans):
        if span.clip_id not in cache:
            ref = tok(refs[span.clip_id])
            a = _align(ref, tok(model_hyps[span.clip_id]), settings.aligner)
            cache[span.clip_id] = (a, a.n_matched >= settings.min_matched(len(ref)))
        a, ok = cache[span.clip_id]
        decisions.append(SpanDecision(span.clip_id, idx, _verdict(span, a, ok)))
    n_elig = sum(1 for d in decisions if d.verdict != "ineligible")
    n_ref = sum(1 for d in decisions if d.verdict == "ref")
    if n_elig == 0:
        return AcceptRefResult(model, 0, 0, None, None, tuple(decisions))
    return AcceptRefResult(model, n_ref, n_elig, n_ref / n_elig, wilson_interval(n_ref, n_elig), tuple(decisions))


def run_bad_reference_probe(
    refs: Mapping[str, str],
    panel_hyps: Mapping[str, Mapping[str, str]],
    models_hyps: Mapping[str, Mapping[str, str]],
    settings: BadRefSettings | None = None,
    normalizer: Normalizer | None = None,
    corrections: Mapping[str, str] | None = None,
    corrections_mode: Literal["replace", "confirm"] = "replace",
) -> BadReferenceReport:
    """Find the spans (panel, corrections, or panel confirmed by corrections) and score every model.

    With ``corrections`` and ``corrections_mode='replace'`` the panel may be empty: the human
    corrections alone define the spans.
    """
    settings = settings or BadRefSettings()
    if not refs:
        raise ConfigError("bad_reference: no references given; the dataset has no clips")
    if not models_hyps:
        raise ConfigError("bad_reference: no models to score; give at least one model's hypotheses")
    if corrections_mode not in ("replace", "confirm"):
        raise ConfigError(f"bad_reference: corrections_mode must be 'replace' or 'confirm', got '{corrections_mode}'")
    clash = sorted(RESERVED_KEYS & set(models_hyps))
    if clash:
        raise ConfigError(f"bad_reference: model name(s) {clash} collide with report keys; rename the model(s)")
    norm = resolve_normalizer(settings, normalizer)
    clip_ids = list(refs)
    for m, hyps in models_hyps.items():
        _check_coverage(f"model '{m}'", hyps, clip_ids)
    overlap = sorted(set(panel_hyps) & set(models_hyps))
    if overlap:
        log.info("bad_reference: %s are both panel members and models under test", ", ".join(overlap))

    source: SpanSource
    if corrections is not None and corrections_mode == "replace":
        spans = find_spans_from_corrections(refs, corrections, norm, settings)
        source = "corrections"
    else:
        spans = find_bad_spans(refs, panel_hyps, settings, norm)
        source = "panel"
        if corrections is not None:
            fixed = find_spans_from_corrections(refs, corrections, norm, settings)
            spans = confirm_spans(spans, fixed, list(corrections))
            source = "panel+corrections"

    results = {m: accept_ref(spans, hyps, refs, settings, norm, model=m) for m, hyps in models_hyps.items()}
    return BadReferenceReport(
        n_clips=len(refs),
        panel=() if source == "corrections" else tuple(panel_hyps),
        spans=tuple(spans),
        results=results,
        settings=settings,
        normalizer_name=getattr(norm, "name", type(norm).__name__),
        normalizer_version=getattr(norm, "version", ""),
        source=source,
    )


# --------------------------------------------------------------------------------------------
# Open ASR Leaderboard prediction files
