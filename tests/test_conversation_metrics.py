"""cpWER / tcpWER / DER / JER against hand-computed answers, and the annotation readers'
handling of bad input (each a clear error naming the place, or a counted problem)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audits.conversation.metrics import cpwer, diarization_scores, pool, pool_diarization, tcpwer
from audits.conversation.readers import (
    Segment,
    check_durations,
    check_recordings,
    check_speakers,
    read_annotations,
    read_nemo_offsets,
    read_rttm,
    read_seglst,
    read_stm,
    write_rttm,
    write_seglst,
)
from engine.errors import ManifestError

pytest.importorskip("meeteval")
pytest.importorskip("pyannote.metrics")


def S(spk: str, start: float, end: float, words: str = "", sid: str = "s1") -> Segment:
    return Segment(sid, spk, start, end, words)


def test_cpwer_permutation_is_minimal() -> None:
    # Hypothesis labels are swapped relative to the reference: cpWER must pair A<->y, B<->x.
    ref = [S("A", 0, 2, "the cat sat"), S("B", 2, 4, "on the mat"), S("A", 4, 5, "today")]
    hyp = [S("y", 0, 2, "the cat sat"), S("x", 2, 4, "on a mat"), S("y", 4, 5, "today")]
    r = cpwer(ref, hyp)["s1"]
    assert (r.errors, r.length, r.substitutions) == (1, 7, 1)
    assert r.rate == pytest.approx(1 / 7)


def test_cpwer_speaker_confusion_costs_words() -> None:
    # The last turn of A is attributed to B: A loses "today" (deletion), B gains it (insertion).
    ref = [S("A", 0, 2, "the cat sat"), S("B", 2, 4, "on the mat"), S("A", 4, 5, "today")]
    hyp = [S("1", 0, 2, "the cat sat"), S("2", 2, 4, "on the mat"), S("2", 4, 5, "today")]
    r = cpwer(ref, hyp)["s1"]
    assert (r.errors, r.deletions, r.insertions, r.length) == (2, 1, 1, 7)


def test_cpwer_extra_and_missing_speakers() -> None:
    # Reference has 2 speakers, hypothesis 3: the unpaired hypothesis speaker's words are insertions.
    ref = [S("A", 0, 1, "a b"), S("B", 1, 2, "c d")]
    hyp = [S("x", 0, 1, "a b"), S("y", 1, 2, "c d"), S("z", 2, 3, "e f g")]
    r = cpwer(ref, hyp)["s1"]
    assert (r.errors, r.insertions, r.falarm_speakers) == (3, 3, 1)
    # Hand-computed: A 'a b c' vs x 'a b' (1 deletion), B 'd e' vs y 'd e f' (1 insertion): 2 / 5.
    ref2 = [S("A", 0, 1, "a b c"), S("B", 1, 2, "d e")]
    hyp2 = [S("x", 0, 1, "a b"), S("y", 1, 2, "d e f")]
    r2 = cpwer(ref2, hyp2)["s1"]
    assert (r2.errors, r2.length, r2.insertions, r2.deletions) == (2, 5, 1, 1)


def test_empty_hypothesis_session_counts_all_deletions() -> None:
    ref = [S("A", 0, 1, "a b"), S("B", 1, 2, "c", sid="s2")]
    r = cpwer(ref, [S("x", 0, 1, "a b")])
    assert r["s2"].deletions == 1 and r["s1"].errors == 0
    assert pool(r.values()).rate == pytest.approx(1 / 3)


def test_tcpwer_time_constraint() -> None:
    ref = [S("A", 0, 1, "hello"), S("A", 10, 11, "world")]
    hyp_ok = [S("x", 0, 1, "hello"), S("x", 10, 11, "world")]
    hyp_late = [S("x", 0, 1, "hello"), S("x", 30, 31, "world")]  # right word, 20 s away
    assert tcpwer(ref, hyp_ok, collar=1.0)["s1"].errors == 0
    assert tcpwer(ref, hyp_late, collar=1.0)["s1"].errors == 2  # one deletion + one insertion
    assert cpwer(ref, hyp_late)["s1"].errors == 0  # cpWER ignores time


def test_der_constructed_case() -> None:
    ref = [S("A", 0, 10), S("B", 10, 20)]
    hyp = [S("x", 0, 12), S("y", 12, 18), S("x", 22, 24)]
    d = diarization_scores(ref, hyp, {"s1": 25.0})["s1"]
    # confusion 10-12, missed 18-20, false alarm 22-24; 20 s of reference speech.
    assert (d.confusion_s, d.missed_s, d.false_alarm_s, d.total_s) == pytest.approx((2, 2, 2, 20))
    assert d.der == pytest.approx(0.3)
    # JER: A~x: |A∩x|=10, |A∪x|=14 -> 4/14; B~y: 6/10 -> 0.4; mean.
    assert d.jer == pytest.approx((4 / 14 + 0.4) / 2)
    # collar 0.5 (0.25 s each side of 0, 10 and 20): 19 s scored, 1.75 + 1.75 + 2 s of error.
    dc = diarization_scores(ref, hyp, {"s1": 25.0}, collar=0.5)["s1"]
    assert dc.total_s == pytest.approx(19.0) and dc.der == pytest.approx(5.5 / 19)


def test_der_overlap_handling() -> None:
    ref = [S("A", 0, 10), S("B", 8, 12)]  # 2 s of overlap
    hyp = [S("x", 0, 10), S("y", 10, 12)]  # misses B during the overlap
    full = diarization_scores(ref, hyp, {"s1": 12.0})["s1"]
    assert full.total_s == pytest.approx(14) and full.missed_s == pytest.approx(2)
    skip = diarization_scores(ref, hyp, {"s1": 12.0}, skip_overlap=True)["s1"]
    assert skip.total_s == pytest.approx(10) and skip.der == pytest.approx(0.0)
    pooled = pool_diarization([full, skip])
    assert pooled.der == pytest.approx(2 / 24)


def test_rttm_stm_seglst_nemo_round_trip(tmp_path: Path) -> None:
    segs = [S("A", 0.5, 2.25, "hello there"), S("B", 2.0, 3.0, "hi")]
    write_rttm(segs, tmp_path / "r.rttm")
    write_seglst(segs, tmp_path / "r.json")
    rttm = read_rttm(tmp_path / "r.rttm")
    assert [(s.speaker, s.start, s.end) for s in rttm.segments] == [("A", 0.5, 2.25), ("B", 2.0, 3.0)]
    assert read_seglst(tmp_path / "r.json").segments[0].words == "hello there"
    (tmp_path / "r.stm").write_text(";; comment\ns1 1 A 0.5 2.25 <o,f0,male> hello there\ns1 1 B 2.0 3.0 hi\n")
    stm = read_stm(tmp_path / "r.stm")
    assert [(s.speaker, s.words) for s in stm.segments] == [("A", "hello there"), ("B", "hi")]
    lines = [{"audio_filepath": "/x/s1.wav", "offset": 0.5, "duration": 1.75, "text": "hello there", "speaker": "A"}]
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    nemo = read_annotations(tmp_path / "m.jsonl")
    assert nemo.segments[0].session_id == "s1" and nemo.segments[0].end == pytest.approx(2.25)


def test_bad_rttm_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.rttm"
    p.write_text("SPEAKER s1 1 0.0 1.0 <NA> <NA> A <NA> <NA>\nSPEAKER s1 1 zero 1.0 <NA> <NA> A <NA> <NA>\n")
    with pytest.raises(ManifestError, match=r"bad.rttm, line 2.*start 'zero'"):
        read_rttm(p)
    p.write_text("SPEAKER s1 1 0.0 -1.0 <NA> <NA> A <NA> <NA>\n")
    with pytest.raises(ManifestError, match="line 1.*negative"):
        read_rttm(p)


def test_rttm_recording_missing_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "ref.rttm"
    p.write_text("SPEAKER s1 1 0.0 1.0 <NA> <NA> A <NA> <NA>\nSPEAKER s9 1 0.0 1.0 <NA> <NA> A <NA> <NA>\n")
    ann = read_rttm(p)
    with pytest.raises(ManifestError, match=r"no audio.*s9.*ref.rttm:2"):
        check_recordings(ann, ["s1"], "ref.rttm")
    with pytest.raises(ManifestError, match="s2 have no segment"):
        check_recordings(ann, ["s1", "s9", "s2"], "ref.rttm")


def test_self_overlap_is_counted_not_dropped(tmp_path: Path) -> None:
    p = tmp_path / "o.rttm"
    p.write_text(
        "SPEAKER s1 1 0.0 2.0 <NA> <NA> A <NA> <NA>\nSPEAKER s1 1 1.5 1.0 <NA> <NA> A <NA> <NA>\n"
        "SPEAKER s1 1 1.0 1.0 <NA> <NA> B <NA> <NA>\nSPKR-INFO s1 1 <NA> <NA> <NA> unknown A <NA> <NA>\n"
    )
    ann = read_rttm(p)
    assert len(ann.segments) == 3
    assert len(ann.problems) == 2
    assert any("o.rttm:2" in x and "'A'" in x and "overlaps itself" in x for x in ann.problems)
    assert any("SPKR-INFO" in x for x in ann.problems)


def test_seglst_unknown_speaker_and_bad_keys(tmp_path: Path) -> None:
    p = tmp_path / "h.json"
    p.write_text(json.dumps([{"session_id": "s1", "speaker": "C", "start_time": 0, "end_time": 1, "words": "x"}]))
    with pytest.raises(ManifestError, match=r"h.json\[0\].*speaker 'C' is unknown.*known: A, B"):
        check_speakers(read_seglst(p), {"s1": {"A", "B"}}, "h.json")
    p.write_text(json.dumps([{"session_id": "s1", "speaker": "A", "start_time": 0, "words": "x"}]))
    with pytest.raises(ManifestError, match="segment 0 lacks key.*end_time"):
        read_seglst(p)


def test_audio_shorter_than_annotation(tmp_path: Path) -> None:
    p = tmp_path / "r.rttm"
    p.write_text("SPEAKER s1 1 0.0 1.0 <NA> <NA> A <NA> <NA>\nSPEAKER s1 1 9.0 3.0 <NA> <NA> B <NA> <NA>\n")
    with pytest.raises(ManifestError, match=r"r.rttm:2.*ends at 12.000 s.*lasts only 10.000 s"):
        check_durations(read_rttm(p), {"s1": 10.0})


def test_nemo_offsets_needs_speaker(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    p.write_text(json.dumps({"audio_filepath": "a.wav", "offset": 0, "duration": 1, "text": "x"}) + "\n")
    with pytest.raises(ManifestError, match="line 1.*speaker"):
        read_nemo_offsets(p)


def test_pyannote_backend_says_what_is_missing(tmp_path: Path) -> None:
    from engine.backends import DIAR_BACKENDS
    from engine.errors import BackendUnavailable, ConfigError

    cls = DIAR_BACKENDS.get("pyannote")
    with pytest.raises(ConfigError, match="checkpoint"):
        cls()
    avail = cls.availability({"checkpoint": str(tmp_path / "nowhere")})
    assert not avail.runnable
    assert "diarization" in avail.reason or "does not exist" in avail.reason
    with pytest.raises(BackendUnavailable, match="config.yaml does not exist"):
        cls(checkpoint=str(tmp_path)).load()


def test_pyannote_broken_checkpoint_is_a_clear_error_and_telemetry_stays_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A config.yaml that names no loadable pipeline: without pyannote.audio installed the error
    says which extra to install, with it the error names the checkpoint; either way nothing is
    returned half-loaded, and the vendor's usage telemetry is switched off before the import."""
    from engine.backends import DIAR_BACKENDS
    from engine.errors import BackendUnavailable

    (tmp_path / "config.yaml").write_text("pipeline:\n  name: no_such_package.NoSuchPipeline\n  params: {}\n")
    monkeypatch.delenv("PYANNOTE_METRICS_ENABLED", raising=False)
    backend = DIAR_BACKENDS.get("pyannote")(checkpoint=str(tmp_path))
    avail = backend.availability({"checkpoint": str(tmp_path)})
    assert avail.runnable or "'.[diarization]'" in avail.reason
    with pytest.raises(BackendUnavailable, match=r"pyannote.*(diarization|torchaudio|config\.yaml)"):
        backend.load()
    assert os.environ["PYANNOTE_METRICS_ENABLED"] == "false"
    assert backend._pipeline is None


def test_pyannote_refuses_configs_that_would_download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A downloaded speaker-diarization-3.1 folder names its models by hub id: loading it would
    fetch them, so the backend says which entries to point at local files (or that
    HF_HUB_OFFLINE=1 reads them from the local cache) before importing anything."""
    from engine.backends import DIAR_BACKENDS
    from engine.errors import BackendUnavailable

    cls = DIAR_BACKENDS.get("pyannote")
    (tmp_path / "config.yaml").write_text(
        "version: 3.1.0\npipeline:\n  name: pyannote.audio.pipelines.SpeakerDiarization\n  params:\n"
        "    segmentation: pyannote/segmentation-3.0\n    embedding: $model/embedding\n    plda: $model/plda\n"
    )
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    avail = cls.check_weights({"checkpoint": str(tmp_path)})
    assert not avail.runnable and "segmentation: pyannote/segmentation-3.0" in avail.reason and "embedding" not in avail.reason
    with pytest.raises(BackendUnavailable, match=r"config\.yaml refers to hub models .*segmentation-3\.0.*HF_HUB_OFFLINE=1"):
        cls(checkpoint=str(tmp_path)).load()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert cls.check_weights({"checkpoint": str(tmp_path)}).runnable
    (tmp_path / "config.yaml").write_text("segmentation: x\n")
    with pytest.raises(BackendUnavailable, match="not a pyannote pipeline config"):
        cls(checkpoint=str(tmp_path)).load()


@st.composite
def _sessions(draw: st.DrawFn) -> tuple[list[Segment], list[Segment]]:
    words = st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=0, max_size=5)

    def side(prefix: str, n: int) -> list[Segment]:
        segs = []
        for k in range(n):
            for j in range(draw(st.integers(1, 2))):
                segs.append(S(f"{prefix}{k}", 10.0 * j + k, 10.0 * j + k + 1, " ".join(draw(words))))
        return segs

    return side("R", draw(st.integers(1, 3))), side("H", draw(st.integers(1, 3)))


@settings(max_examples=60, deadline=None)
@given(_sessions())
def test_cpwer_equals_brute_force_permutation(pair: tuple[list[Segment], list[Segment]]) -> None:
    """cpWER by definition: the minimum over speaker pairings of the summed word errors of each
    speaker's concatenated words (unpaired speakers against nothing)."""
    import itertools

    from audits.asr.align import error_count

    ref, hyp = pair

    def streams(segs: list[Segment]) -> list[list[str]]:
        spk = sorted({s.speaker for s in segs})
        return [[w for s in sorted(segs, key=lambda s: s.start) if s.speaker == k for w in s.words.split()] for k in spk]

    r, h = streams(ref), streams(hyp)
    n = max(len(r), len(h))
    r += [[]] * (n - len(r))
    h += [[]] * (n - len(h))
    best = min(sum(error_count(r[i], h[p[i]]) for i in range(n)) for p in itertools.permutations(range(n)))
    assert cpwer(ref, hyp)["s1"].errors == best
