"""Speaker-attributed error rates, each by its published definition and reference tool.

- **cpWER** (concatenated minimum-permutation WER, CHiME-6): per session, each speaker's words
  are concatenated in time order, reference and hypothesis speakers are paired by the
  permutation (Hungarian assignment) that minimises the summed word errors, and unpaired
  speakers count all their words as deletions or insertions. Computed by ``meeteval``.
- **tcpWER** (time-constrained cpWER, CHiME-8): as cpWER, but a word can only match a word
  whose time span, widened by ``collar`` seconds, overlaps its own. Word times come from the
  segment times (meeteval's ``character_based`` pseudo-word timing for the reference and
  ``character_based_points`` for the hypothesis, its defaults).
- **DER** (NIST): (missed speech + false alarm + speaker confusion) / total reference speech,
  with the optimal one-to-one speaker mapping; **JER** (DIHARD II): 1 − mean over reference
  speakers of the Jaccard index with the mapped hypothesis speaker. Both by
  ``pyannote.metrics``. ``collar`` is pyannote's: the total width of the no-score zone centred
  on every reference boundary (``collar=0.5`` removes 0.25 s each side, the NIST convention of
  a 0.25 s collar). ``skip_overlap`` removes regions where two reference speakers talk at once.
  Defaults are the strict DIHARD/CHiME setting: no collar, overlap scored.

Text is normalized by the caller (the run's normalizer) before it reaches these functions.
Corpus figures pool counts over sessions (errors / reference words; error seconds / reference
seconds), never average per-session rates.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from audits.conversation.readers import Segment

DEFAULT_COLLAR_S = 0.0
DEFAULT_SKIP_OVERLAP = False
DEFAULT_TCP_COLLAR_S = 5.0


@dataclass(frozen=True)
class SpeakerWER:
    """Word-error counts of one session (or pooled over sessions) for cpWER or tcpWER."""

    errors: int
    length: int
    substitutions: int
    deletions: int
    insertions: int
    missed_speakers: int
    falarm_speakers: int

    @property
    def rate(self) -> float | None:
        return self.errors / self.length if self.length else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "wer": self.rate,
            "errors": self.errors,
            "n_words": self.length,
            "substitutions": self.substitutions,
            "deletions": self.deletions,
            "insertions": self.insertions,
            "missed_speakers": self.missed_speakers,
            "falarm_speakers": self.falarm_speakers,
        }


def pool(rates: Iterable[SpeakerWER]) -> SpeakerWER:
    """Corpus figure: counts summed over sessions."""
    items = list(rates)
    return SpeakerWER(*(sum(getattr(r, f) for r in items) for f in SpeakerWER.__dataclass_fields__))


def _seglst(segments: Iterable[Segment], normalize: Callable[[str], str] | None) -> Any:
    from meeteval.io import SegLST

    return SegLST(
        [
            {
                "session_id": s.session_id,
                "speaker": s.speaker,
                "start_time": float(s.start),
                "end_time": float(s.end),
                "words": normalize(s.words) if normalize else s.words,
            }
            for s in segments
        ]
    )


def _sessions(ref: Sequence[Segment], hyp: Sequence[Segment]) -> tuple[list[Segment], list[Segment]]:
    """meeteval refuses a hypothesis session without reference; an empty hypothesis session is
    legitimate (the model said nothing) and gets a placeholder with no words."""
    ref_sessions = {s.session_id for s in ref}
    hyp = [s for s in hyp if s.session_id in ref_sessions]
    missing = ref_sessions - {s.session_id for s in hyp}
    hyp = hyp + [Segment(sid, "__none__", 0.0, 0.0, "") for sid in sorted(missing)]
    return list(ref), hyp


def _convert(res: Mapping[str, Any]) -> dict[str, SpeakerWER]:
    return {
        sid: SpeakerWER(
            int(e.errors),
            int(e.length),
            int(e.substitutions),
            int(e.deletions),
            int(e.insertions),
            int(e.missed_speaker),
            int(e.falarm_speaker),
        )
        for sid, e in res.items()
    }


def cpwer(ref: Sequence[Segment], hyp: Sequence[Segment], normalize: Callable[[str], str] | None = None) -> dict[str, SpeakerWER]:
    """cpWER per session (meeteval). A hypothesis session absent from the reference is ignored
    by the caller's dataset check before this point."""
    from meeteval.wer.api import cpwer as _cpwer

    ref, hyp = _sessions(ref, hyp)
    return _convert(_cpwer(_seglst(ref, normalize), _seglst(hyp, normalize)))


def tcpwer(
    ref: Sequence[Segment],
    hyp: Sequence[Segment],
    collar: float = DEFAULT_TCP_COLLAR_S,
    normalize: Callable[[str], str] | None = None,
) -> dict[str, SpeakerWER]:
    """tcpWER per session (meeteval), with ``collar`` seconds of tolerance on word times."""
    from meeteval.wer.api import tcpwer as _tcpwer

    ref, hyp = _sessions(ref, hyp)
    return _convert(_tcpwer(_seglst(ref, normalize), _seglst(hyp, normalize), collar=collar))


@dataclass(frozen=True)
class DiarizationScore:
    """Seconds of each DER component, the JER, and the speaker counts of one session (or pooled)."""

    total_s: float
    missed_s: float
    false_alarm_s: float
    confusion_s: float
    jer: float | None
    n_ref_speakers: int
    n_hyp_speakers: int

    @property
    def der(self) -> float | None:
        return (self.missed_s + self.false_alarm_s + self.confusion_s) / self.total_s if self.total_s > 0 else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "der": self.der,
            "jer": self.jer,
            "missed_s": round(self.missed_s, 4),
            "false_alarm_s": round(self.false_alarm_s, 4),
            "confusion_s": round(self.confusion_s, 4),
            "scored_s": round(self.total_s, 4),
            "n_ref_speakers": self.n_ref_speakers,
            "n_hyp_speakers": self.n_hyp_speakers,
        }


def _annotation(segments: Iterable[Segment]) -> Any:
    from pyannote.core import Annotation
    from pyannote.core import Segment as PSegment

    ann = Annotation()
    for i, s in enumerate(segments):
        if s.end > s.start:
            ann[PSegment(s.start, s.end), i] = s.speaker
    return ann


def diarization_scores(
    ref: Sequence[Segment],
    hyp: Sequence[Segment],
    durations: Mapping[str, float],
    collar: float = DEFAULT_COLLAR_S,
    skip_overlap: bool = DEFAULT_SKIP_OVERLAP,
) -> dict[str, DiarizationScore]:
    """DER components and JER per session (pyannote.metrics). The scored region (UEM) is the
    whole recording, ``[0, durations[session]]``, so false alarms in leading or trailing silence
    count."""
    from pyannote.core import Segment as PSegment
    from pyannote.core import Timeline
    from pyannote.metrics.diarization import DiarizationErrorRate, JaccardErrorRate

    per_ref: dict[str, list[Segment]] = defaultdict(list)
    per_hyp: dict[str, list[Segment]] = defaultdict(list)
    for s in ref:
        per_ref[s.session_id].append(s)
    for s in hyp:
        per_hyp[s.session_id].append(s)
    out: dict[str, DiarizationScore] = {}
    for sid in sorted(per_ref):
        r, h = _annotation(per_ref[sid]), _annotation(per_hyp.get(sid, []))
        uem = Timeline([PSegment(0.0, float(durations[sid]))])
        d = DiarizationErrorRate(collar=collar, skip_overlap=skip_overlap)(r, h, uem=uem, detailed=True)
        jer: float | None
        if len(r.labels()):
            jer = float(JaccardErrorRate(collar=collar, skip_overlap=skip_overlap)(r, h, uem=uem))
        else:
            jer = None
        out[sid] = DiarizationScore(
            float(d["total"]),
            float(d["missed detection"]),
            float(d["false alarm"]),
            float(d["confusion"]),
            jer,
            len(r.labels()),
            len(h.labels()),
        )
    return out


def pool_diarization(scores: Iterable[DiarizationScore]) -> DiarizationScore:
    """Corpus DER: error seconds over reference seconds; corpus JER: mean of session JERs
    weighted by reference speakers (JER is a mean over reference speakers)."""
    items = list(scores)
    jw = [(s.jer, s.n_ref_speakers) for s in items if s.jer is not None]
    n = sum(w for _, w in jw)
    return DiarizationScore(
        sum(s.total_s for s in items),
        sum(s.missed_s for s in items),
        sum(s.false_alarm_s for s in items),
        sum(s.confusion_s for s in items),
        sum(j * w for j, w in jw) / n if n else None,
        sum(s.n_ref_speakers for s in items),
        sum(s.n_hyp_speakers for s in items),
    )


def scoring_notes(collar: float, skip_overlap: bool, tcp_collar: float) -> dict[str, str]:
    """One line per metric for summary.json's ``scoring``."""
    return {
        "cpwer": "meeteval cpWER: per session, speakers' words concatenated; min-permutation speaker pairing; pooled counts",
        "tcpwer": f"meeteval tcpWER, collar {tcp_collar} s, pseudo-word timing character_based (ref) / character_based_points (hyp)",
        "der": f"pyannote.metrics DER, collar {collar} s total (centred on reference boundaries), "
        f"overlap {'skipped' if skip_overlap else 'scored'}, UEM = whole recording; pooled seconds",
        "jer": "pyannote.metrics JER, same collar and overlap handling; corpus = mean weighted by reference speakers",
    }
