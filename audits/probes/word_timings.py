"""Word timings for reference words: where in the clip each word of the reference is spoken.

The masked-word probe needs the time span of a target word to silence it. Two methods:

``ctc-forced``
    forced alignment of the reference's spoken words (:func:`spoken_words`) with a CTC acoustic
    model (torchaudio's MMS_FA bundle: ``torchaudio.functional.forced_align`` under the hood). Exact
    for the reference words; needs the optional ``torchaudio`` package and the bundle's weights
    (downloaded once from pytorch.org).
``whisper-word-timestamps``
    the bundled faster-whisper ``tiny.en`` transcribes the clip with word timestamps; hypothesis
    words are aligned to reference words (:func:`align_timings`: minimum edit over normalized word
    keys). Matched words take the hypothesis word's span, words inside a substituted block share the block's span in
    proportion to their length, words the model skipped are interpolated into the gap between
    their matched neighbours, or marked unknown when there is no gap.

The models run as keyed passes on the run's engine (``audits.probes.helper_passes``,
``engine.keyed.probe_workers.WordTimingWorker``); this module holds the text side. Every timing
records its method and how it was obtained (``how``), so a probe can refuse a guess.
Word indices are those of ``reference.split()`` (the indexing of :class:`MaskTarget`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from engine.audio.masking import SpanTiming
from normalizers.numbers import find_numbers, int_to_words, year_to_words

log = logging.getLogger(__name__)

Method = Literal["ctc-forced", "whisper-word-timestamps"]
How = Literal["aligned", "block", "interpolated", "unknown"]
METHODS = ("auto", "ctc", "whisper")


@dataclass(frozen=True)
class WordTiming:
    """Time span (seconds) of reference word ``index``; ``start``/``end`` are None when unknown."""

    index: int
    word: str
    start: float | None
    end: float | None
    method: str
    how: str  # 'aligned' | 'block' | 'interpolated' | 'unknown'

    @property
    def known(self) -> bool:
        return self.start is not None and self.end is not None and self.end > self.start

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> WordTiming:
        return cls(int(d["index"]), str(d["word"]), d.get("start"), d.get("end"), str(d["method"]), str(d["how"]))


# ------------------------------------------------------------------ keys and alignment

_PUNCT = re.compile(r"^[^\w$€£¥%]+|[^\w%]+$")


def word_key(word: str) -> str:
    """A comparison key for one written word: lower case, edge punctuation off, numbers by value."""
    w = _PUNCT.sub("", word.lower().replace("’", "'"))
    if not w:
        return ""
    spans = find_numbers(w)
    if len(spans) == 1 and spans[0].start == 0 and spans[0].end >= len(w.rstrip("%")):
        return f"#{spans[0].value}"
    return {"mr.": "mister", "mr": "mister", "mrs": "missus", "dr": "doctor", "ok": "okay"}.get(w, w)


def merge_fragments(words: Sequence[tuple[str, float, float]]) -> list[tuple[str, float, float]]:
    """Join Whisper's sub-word continuations ('-a', ',000', '.0') to the word before them."""
    out: list[tuple[str, float, float]] = []
    for w, s, e in words:
        w = w.strip()
        if not w:
            continue
        if out and (w[0] in "-,.'’" and len(w) > 1 and w[1].isalnum() or not any(c.isalnum() for c in w)):
            pw, ps, _ = out[-1]
            out[-1] = (pw + w, ps, max(e, out[-1][2]))
        else:
            out.append((w, float(s), float(e)))
    return out


def _units(words: Sequence[str]) -> list[tuple[str, int, int]]:
    """Comparison units (key, first word, last word + 1): a multi-word number is one unit keyed by value."""
    offsets = []
    pos = 0
    for w in words:
        offsets.append((pos, pos + len(w)))
        pos += len(w) + 1
    joined = " ".join(words)
    groups: dict[int, tuple[int, str]] = {}
    for span in find_numbers(joined):
        idx = [i for i, (a, b) in enumerate(offsets) if a < span.end and b > span.start]
        if len(idx) > 1:
            groups[idx[0]] = (idx[-1] + 1, f"#{span.value}")
    out: list[tuple[str, int, int]] = []
    i = 0
    while i < len(words):
        if i in groups:
            end, key = groups[i]
            out.append((key, i, end))
            i = end
        else:
            out.append((word_key(words[i]) or words[i].lower(), i, i + 1))
            i += 1
    return out


def align_timings(
    reference: str, hyp_words: Sequence[tuple[str, float, float]], duration_s: float, method: str = "whisper-word-timestamps"
) -> list[WordTiming]:
    """Give every reference word a span from timed hypothesis words (see the module docstring)."""
    from rapidfuzz.distance import Levenshtein

    ref_words = reference.split()
    hyp = merge_fragments(hyp_words)
    ref_units = _units(ref_words)
    hyp_units = [(key, hyp[a][1], hyp[b - 1][2]) for key, a, b in _units([w for w, _, _ in hyp])]
    ref_keys = [word_key(w) or w.lower() for w in ref_words]
    spans: list[tuple[float | None, float | None, str]] = [(None, None, "unknown")] * len(ref_words)

    def share(words: Sequence[int], s0: float, e0: float, how: str) -> None:
        weights = np.array([len(ref_keys[i]) + 1 for i in words], dtype=float)
        edges = s0 + (e0 - s0) * np.concatenate([[0.0], np.cumsum(weights) / weights.sum()])
        for k, i in enumerate(words):
            spans[i] = (float(edges[k]), float(edges[k + 1]), how)

    ops: list[tuple[str, int, int, int, int]] = [
        (op.tag, op.src_start, op.src_end, op.dest_start, op.dest_end)
        for op in Levenshtein.opcodes([u[0] for u in ref_units], [u[0] for u in hyp_units])
    ]
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            for k in range(i2 - i1):
                _, a, b = ref_units[i1 + k]
                _, s, e = hyp_units[j1 + k]
                share(range(a, b), s, e, "aligned")
        elif tag == "replace":
            words = range(ref_units[i1][1], ref_units[i2 - 1][2])
            one_to_one = i2 - i1 == 1 and j2 - j1 == 1
            share(words, hyp_units[j1][1], hyp_units[j2 - 1][2], "aligned" if one_to_one else "block")
    # interpolate runs of unknown words into the gap between known neighbours
    i = 0
    n = len(ref_words)
    while i < n:
        if spans[i][2] != "unknown":
            i += 1
            continue
        j = i
        while j < n and spans[j][2] == "unknown":
            j += 1
        left = spans[i - 1][1] if i > 0 else 0.0
        right = spans[j][0] if j < n else duration_s
        if left is not None and right is not None and right - left >= 0.08 * (j - i):
            weights = np.array([len(ref_keys[k]) + 1 for k in range(i, j)], dtype=float)
            edges = left + (right - left) * np.concatenate([[0.0], np.cumsum(weights) / weights.sum()])
            for k in range(i, j):
                spans[k] = (float(edges[k - i]), float(edges[k - i + 1]), "interpolated")
        i = j
    return [WordTiming(k, ref_words[k], s, e, method, how) for k, (s, e, how) in enumerate(spans)]


_HOW_RANK = {"aligned": 0, "block": 1, "interpolated": 2, "unknown": 3}


def span_timing(timings: Sequence[WordTiming], word_start: int, word_end: int, duration_s: float) -> SpanTiming | None:
    """Span of words [word_start, word_end) plus the edges of the known words around it; None if unknown."""
    inside = [t for t in timings if word_start <= t.index < word_end]
    if len(inside) != word_end - word_start or not all(t.known for t in inside):
        return None
    start = min(t.start for t in inside if t.start is not None)
    end = max(t.end for t in inside if t.end is not None)
    before = [t for t in timings if t.index < word_start and t.known]
    after = [t for t in timings if t.index >= word_end and t.known]
    prev = max(before, key=lambda t: t.index) if before else None
    nxt = min(after, key=lambda t: t.index) if after else None
    prev_end = min(float(prev.end), start) if prev is not None and prev.end is not None else 0.0
    next_start = max(float(nxt.start), end) if nxt is not None and nxt.start is not None else duration_s
    prev_start = min(float(prev.start), prev_end) if prev is not None and prev.start is not None else 0.0
    next_end = max(float(nxt.end), next_start) if nxt is not None and nxt.end is not None else duration_s
    how = max((t.how for t in inside), key=_HOW_RANK.__getitem__)
    return SpanTiming(start, end, prev_end, next_start, inside[0].method, how, prev_start, next_end)


# ------------------------------------------------------------------ CTC forced alignment


def spoken_words(raw_word: str) -> list[str]:
    """How a written token is read aloud, as a-z words ('2016' -> twenty sixteen, '8%' -> eight percent)."""
    w = raw_word.lower().replace("’", "'")
    out: list[str] = []
    prefix_money = w.lstrip("\"'([").startswith(("$", "€", "£"))
    for span in find_numbers(w):
        v = span.value
        if isinstance(v, int):
            yr = year_to_words(v) if 1100 <= v <= 2099 and not prefix_money and "," not in span.text else None
            out += (yr or int_to_words(v)).replace("-", " ").split()
        else:
            whole, _, frac = format(v, "f").partition(".")
            out += int_to_words(int(whole)).split() + ["point"] + [int_to_words(int(c)) for c in frac]
    if not find_numbers(w):
        out += re.findall(r"[a-z']+", w)
    if "%" in w:
        out.append("percent")
    if prefix_money:
        out.append({"$": "dollars", "€": "euros", "£": "pounds"}[w.lstrip("\"'([")[0]])
    return [x.strip("'") for x in out if x.strip("'")]
