"""SV/SER backends through the engine (embed runner) and the speaker / emotion audits end to end.

The dataset is built here with real TTS: four Flite voices reading three sentences (distinct
speakers, neutral delivery), espeak-ng en-us reading the same sentences neutral, aroused
(higher pitch, faster, louder) and subdued (lower, slower, softer) -- the aroused and subdued
renditions carry ``parent_id`` = their neutral source -- plus a speaker with a single clip and a
clip too short to embed.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from audits.emotion.metrics import categorical_scores
from audits.emotion.report import emotion_lines
from audits.emotion.results import ComparisonFigures, EmotionBackendResult, EmotionResult
from audits.emotion.run import parse_emotion_config, rendition_pairs, run_emotion_audit
from audits.recipes import load_recipe
from audits.reports.formatting import rate_text
from audits.speaker.metrics import Trial, cosine_scores, eer, write_trials
from audits.speaker.results import SliceFigures, SpeakerBackendResult, SpeakerResult
from audits.speaker.run import build_trials, parse_speaker_config, run_speaker_audit
from audits.utterance_meta import UttMeta, collect_meta
from engine.backends import SER_BACKENDS, SV_BACKENDS
from engine.backends.base import BackendInfo, EmotionOutput, SERBackend, SVBackend
from engine.data import SAMPLE_RATE
from engine.datasets import open_dataset
from engine.errors import BackendUnavailable, ConfigError, ManifestError
from engine.run.embed_runner import EmbedSpec, EmbedStore, read_embeddings, read_emotion_outputs, read_errors, run_embed_backends

SENTENCES = (
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Please call Stella and ask her to bring these things with her from the store.",
    "A large red ball rolled slowly down the long and narrow hallway.",
)
FLITE_VOICES = ("slt", "awb", "rms", "kal")
# espeak-ng deliveries: (label, pitch -p, rate -s, amplitude -a)
DELIVERIES = (
    ("neutral", 50, 170, 100),
    ("positive-high-arousal", 80, 240, 190),
    ("negative-low-arousal", 25, 120, 40),
)
RESEMBLYZER = {"resemblyzer": {"num_threads": 1}}


# --------------------------------------------------------------------------------------------
# Test-only backends (registered once under names no real backend uses)
# --------------------------------------------------------------------------------------------


class _UnavailableSV(SVBackend):
    """Stands in for a hub model whose library is missing."""

    name = "test-unavailable-sv"

    def load(self) -> None:
        raise BackendUnavailable("test backend: pretend 'somelib' is not installed; fix: pip install somelib")

    def info(self) -> BackendInfo:
        return BackendInfo(self.name, "none")

    def embed_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> np.ndarray:
        raise AssertionError("never called")


class _LoudnessSER(SERBackend):
    """A categorical 'classifier' by loudness, so the categorical path (UA, WA, F1) runs for real."""

    name = "test-loudness-ser"

    def load(self) -> None:
        pass

    def info(self) -> BackendInfo:
        return BackendInfo(self.name, "rms-thresholds")

    def predict_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[EmotionOutput]:
        outs = []
        for i, a in enumerate(audios):
            x = np.asarray(a, dtype=np.float64)
            if len(x) < 0.1 * sample_rate:
                raise ValueError(f"clip {i} too short")
            db = 10 * math.log10(float(np.mean(x**2)) + 1e-12)
            label = "happy" if db > -17 else "sad" if db < -30 else "neutral"
            post = {k: (0.8 if k == label else 0.1) for k in ("happy", "neutral", "sad")}
            outs.append(EmotionOutput(posteriors=post, dimensions={"arousal": db}))
        return outs


for _reg, _cls in ((SV_BACKENDS, _UnavailableSV), (SER_BACKENDS, _LoudnessSER)):
    if _cls.name not in _reg:
        _reg.register(_cls.name)(_cls)


# --------------------------------------------------------------------------------------------
# The dataset
# --------------------------------------------------------------------------------------------


def _tts_available() -> None:
    for prog in ("flite", "espeak-ng"):
        if shutil.which(prog) is None:
            raise FileNotFoundError(f"{prog} is not installed (apt-get install {prog})")


def _write(path: Path, x: np.ndarray, sr: int) -> float:
    from engine.backends.tts.espeak import resample

    y = resample(np.asarray(x, dtype=np.float32), sr, SAMPLE_RATE)
    sf.write(path, y, SAMPLE_RATE)
    return len(y) / SAMPLE_RATE


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """NeMo manifest of 22 clips with speaker, emotion and tts_engine labels."""
    from engine.backends.tts.espeak import EspeakTTS
    from engine.backends.tts.flite import FliteTTS

    _tts_available()
    root = tmp_path_factory.mktemp("sv-ser-corpus")
    flite, espeak = FliteTTS(), EspeakTTS()
    flite.load()
    espeak.load()
    rows: list[dict[str, Any]] = []
    for v in FLITE_VOICES:
        for k, text in enumerate(SENTENCES):
            uid = f"flite-{v}-{k}"
            x, sr = flite.synthesize(text, v)
            dur = _write(root / f"{uid}.wav", x, sr)
            rows.append(
                {
                    "audio_filepath": f"{uid}.wav",
                    "duration": dur,
                    "text": text,
                    "utt_id": uid,
                    "speaker": f"flite:{v}",
                    "emotion": "neutral",
                    "tts_engine": "flite",
                }
            )
    for k, text in enumerate(SENTENCES):
        for label, p, s, a in DELIVERIES:
            uid = f"espeak-us-{k}-{label}"
            x, sr = espeak.synthesize(text, "en-us", pitch=p, rate=s, amplitude=a)
            dur = _write(root / f"{uid}.wav", x, sr)
            row = {
                "audio_filepath": f"{uid}.wav",
                "duration": dur,
                "text": text,
                "utt_id": uid,
                "speaker": "espeak-ng:en-us",
                "emotion": label,
                "tts_engine": "espeak-ng",
            }
            if label != "neutral":  # derived audio of the dataset: parent_id with its derivation record
                row["parent_id"] = f"espeak-us-{k}-neutral"
                row["derivation"] = {"espeak": {"pitch": p, "rate": s, "amplitude": a}}
            rows.append(row)
    # a speaker with a single clip
    x, sr = espeak.synthesize(SENTENCES[0], "en-gb-x-rp")
    dur = _write(root / "espeak-rp-0.wav", x, sr)
    rows.append(
        {
            "audio_filepath": "espeak-rp-0.wav",
            "duration": dur,
            "text": SENTENCES[0],
            "utt_id": "espeak-rp-0",
            "speaker": "espeak-ng:en-gb-x-rp",
            "emotion": "neutral",
            "tts_engine": "espeak-ng",
        }
    )
    # a clip far too short to embed (50 ms of a Flite slt clip)
    x, sr = flite.synthesize("Hello.", "slt")
    _write(root / "too-short.wav", x[: int(0.05 * sr)], sr)
    rows.append(
        {
            "audio_filepath": "too-short.wav",
            "duration": 0.05,
            "text": "hello",
            "utt_id": "too-short",
            "speaker": "flite:slt",
            "emotion": "neutral",
            "tts_engine": "flite",
        }
    )
    with open(root / "manifest.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    return root / "manifest.jsonl"


@pytest.fixture(scope="module")
def speaker_run(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SpeakerResult, list[tuple]]:
    """One speaker audit (resemblyzer + an unavailable backend), shared by the tests below."""
    out = tmp_path_factory.mktemp("run")
    ds = open_dataset(corpus, shard_size=8)
    cfg = parse_speaker_config(
        {
            "backends": ["resemblyzer", "test-unavailable-sv"],
            "max_per_class": None,
            "backend_options": RESEMBLYZER,
            "batch_size": 4,
            "combined_clips": 2,
            "slice_keys": ["tts_engine"],
            "subsets": {"flite": {"tts_engine": "flite"}},
        },
        "test",
    )
    events: list[tuple] = []
    result = run_speaker_audit(cfg, ds, out, progress=lambda kind, n, info: events.append((kind, n, info.get("model"))))
    return out, result, events


# --------------------------------------------------------------------------------------------
# Config validation (pure, before any model loads)
# --------------------------------------------------------------------------------------------


def test_speaker_config_rejects_unknown_and_bad_values() -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'treshold' \(did you mean 'threshold'\?\)"):
        parse_speaker_config({"backends": ["resemblyzer"], "treshold": 0.5}, "r.yaml")
    with pytest.raises(ConfigError, match="missing required key 'backends'"):
        parse_speaker_config({}, "r.yaml")
    with pytest.raises(ConfigError, match="resemblyzr.*did you mean 'resemblyzer'"):
        parse_speaker_config({"backends": ["resemblyzr"]}, "r.yaml")
    with pytest.raises(ConfigError, match="cohort"):
        parse_speaker_config({"backends": ["resemblyzer"], "cohort": "z-norm"}, "r.yaml")
    with pytest.raises(ConfigError, match="trial list .* does not exist"):
        parse_speaker_config({"backends": ["resemblyzer"], "trials": "/nonexistent/trials.txt"}, "r.yaml")
    with pytest.raises(ConfigError, match="backend_options: 'prosody' is not in backends"):
        parse_speaker_config({"backends": ["resemblyzer"], "backend_options": {"prosody": {}}}, "r.yaml")
    cfg = parse_speaker_config({"backends": ["resemblyzer"], "cohort": "as-norm", "top_k": 5, "threshold": 0.7}, "r.yaml")
    assert (cfg.cohort, cfg.top_k, cfg.threshold) == ("as-norm", 5, 0.7)


def test_emotion_config_rejects_unknown_and_bad_values() -> None:
    with pytest.raises(ConfigError, match="unknown key 'pair'"):
        parse_emotion_config({"backends": ["prosody"], "pair": "auto"}, "r.yaml")
    with pytest.raises(ConfigError, match="expected high, neutral, low or a number"):
        parse_emotion_config({"backends": ["prosody"], "expected_arousal": {"angry": "very"}}, "r.yaml")
    with pytest.raises(ConfigError, match=r"emotion\.pairs: .random. is not allowed; use one of auto"):
        parse_emotion_config({"backends": ["prosody"], "pairs": "random"}, "r.yaml")
    with pytest.raises(ConfigError, match="emotion2vek.*did you mean 'emotion2vec'"):
        parse_emotion_config({"backends": ["emotion2vek"]}, "r.yaml")
    cfg = parse_emotion_config({"backends": ["prosody"], "expected_arousal": {"a": "high", "b": -2}}, "r.yaml")
    assert cfg.expected_arousal == {"a": 1.0, "b": -2.0}


def test_recipes_parse_and_validate() -> None:
    for name in ("demo-speaker", "speaker-match"):
        r = load_recipe(name)
        assert r.models == () and r.section("speaker")
        assert parse_speaker_config(r.section("speaker"), r.source).backends == ("resemblyzer",)
    for name in ("demo-emotion", "emotion"):
        r = load_recipe(name)
        assert r.models == () and r.section("emotion")
        assert parse_emotion_config(r.section("emotion"), r.source).backends == ("prosody",)
    assert load_recipe("demo-speaker").dataset.path == "builtin:demo"


def test_trial_list_naming_a_missing_utterance_fails_before_models_load(corpus: Path, tmp_path: Path) -> None:
    trials = tmp_path / "trials.txt"
    write_trials([Trial(1, "flite-slt-0", "flite-slt-1"), Trial(0, "flite-slt-0", "no-such-clip")], trials)
    cfg = parse_speaker_config({"backends": ["resemblyzer"], "trials": str(trials)}, "test")
    ds = open_dataset(corpus, shard_size=8)
    with pytest.raises(ManifestError, match=r"line 2, field 'test': unknown utterance id 'no-such-clip'"):
        run_speaker_audit(cfg, ds, tmp_path / "out")
    assert not (tmp_path / "out" / "embeddings").exists()  # nothing ran


def test_single_clip_speaker_listed_and_unlabelled_dataset_rejected(corpus: Path) -> None:
    meta = collect_meta(open_dataset(corpus, shard_size=8))
    cfg = parse_speaker_config({"backends": ["resemblyzer"], "max_per_class": None}, "test")
    tl, cohort = build_trials(cfg, meta)
    assert tl.single_clip_speakers == ["espeak-ng:en-gb-x-rp"]
    assert any("single clip" in w for w in tl.warnings)
    assert cohort == []
    assert any("espeak-rp-0" in (t.enroll, t.test) for t in tl.trials if t.label == 0)  # still used as impostor
    bare = {u: UttMeta(u, None, m.labels, m.reference, None, None, m.shard_id) for u, m in meta.items()}
    with pytest.raises(ConfigError, match="no speaker labels"):
        build_trials(cfg, bare)


def test_rendition_pairs_by_parent_and_by_text_and_speaker(corpus: Path) -> None:
    meta = collect_meta(open_dataset(corpus, shard_size=8))
    cfg = parse_emotion_config({"backends": ["prosody"]}, "test")
    found = rendition_pairs(meta, cfg)
    assert found["pairing"] == "parent"
    assert sorted(found["pairs"]) == sorted(
        (f"espeak-us-{k}-neutral", f"espeak-us-{k}-{lab}") for k in range(3) for lab in ("positive-high-arousal", "negative-low-arousal")
    )
    no_parent = {u: UttMeta(u, m.speaker, m.labels, m.reference, None, m.duration_s, m.shard_id) for u, m in meta.items()}
    found2 = rendition_pairs(no_parent, cfg)
    assert found2["pairing"] == "text-speaker"
    assert sorted(found2["pairs"]) == sorted(found["pairs"])  # neutral anchors, same text and voice
    cross = rendition_pairs(no_parent, parse_emotion_config({"backends": ["prosody"], "pairs": "text"}, "test"))
    assert cross["pairing"] == "text" and len(cross["pairs"]) > len(found["pairs"])
    assert all(meta[a].speaker != meta[b].speaker for a, b in cross["control"])


# --------------------------------------------------------------------------------------------
# Engine side: embeddings stored, resumed, errors kept
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_embeddings_written_with_error_rows(speaker_run: tuple[Path, SpeakerResult, list[tuple]]) -> None:
    out, _, events = speaker_run
    parts = sorted((out / "embeddings" / "resemblyzer").glob("*.parquet"))
    assert [p.stem for p in parts] == ["s00000", "s00001", "s00002"]
    table = pq.read_table(parts)
    assert table.schema.field("embedding").type.value_type.bit_width == 32
    assert table.num_rows == 23
    errors = read_errors(out, "sv", "resemblyzer")
    assert list(errors) == ["too-short"] and "AudioError" in errors["too-short"]
    emb = read_embeddings(out, "resemblyzer")
    assert len(emb) == 22 and "too-short" not in emb
    assert all(v.dtype == np.float32 and v.shape == (256,) for v in emb.values())
    for m in sorted((out / "markers-embed" / "sv" / "resemblyzer").glob("*.json")):
        info = json.loads(m.read_text())
        assert info["rows"] == pq.read_metadata(out / "embeddings" / "resemblyzer" / f"{m.stem}.parquet").num_rows
    assert [e for e in events if e[0] == "unit"] == [("unit", 1, "resemblyzer")] * 3


@pytest.mark.slow
def test_resume_loads_and_computes_nothing(corpus: Path, speaker_run: tuple[Path, SpeakerResult, list[tuple]]) -> None:
    out, _, _ = speaker_run
    markers = sorted((out / "markers-embed" / "sv" / "resemblyzer").glob("*.json"))
    before = {m: m.stat().st_mtime_ns for m in markers}
    parts_before = {p: p.stat().st_mtime_ns for p in (out / "embeddings" / "resemblyzer").glob("*.parquet")}
    events: list[tuple] = []
    facts = run_embed_backends(
        open_dataset(corpus, shard_size=8),
        [EmbedSpec("resemblyzer", "resemblyzer", "sv", RESEMBLYZER["resemblyzer"], 4)],
        out,
        progress=lambda kind, n, info: events.append((kind, n)),
    )
    assert facts["resemblyzer"]["status"] == "done"  # not loaded
    assert facts["resemblyzer"]["n_units_run"] == 0
    assert facts["resemblyzer"]["n_failed"] == 1 and facts["resemblyzer"]["n_utts"] == 23
    assert facts["resemblyzer"]["info"]["model_id"].startswith("resemblyzer")  # kept from the first run
    assert events == [("start", 0)]
    assert before == {m: m.stat().st_mtime_ns for m in markers}
    assert parts_before == {p: p.stat().st_mtime_ns for p in (out / "embeddings" / "resemblyzer").glob("*.parquet")}
    # a unit whose part disagrees with its marker is redone (here only checked, not rerun)
    json_marker = markers[0]
    info = json.loads(json_marker.read_text())
    json_marker.write_text(json.dumps({**info, "rows": info["rows"] + 1}))
    assert not EmbedStore(out).is_done("sv", "resemblyzer", info["shard"])
    json_marker.write_text(json.dumps(info))


# --------------------------------------------------------------------------------------------
# Speaker audit
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_speaker_audit_separates_flite_voices(speaker_run: tuple[Path, SpeakerResult, list[tuple]]) -> None:
    out, result, _ = speaker_run
    entry = result.entry("resemblyzer")
    assert isinstance(entry, SpeakerBackendResult) and entry.status == "ok"
    assert entry.eer is not None and entry.min_dcf is not None and entry.accuracy is not None and entry.threshold is not None
    assert entry.slices is not None and entry.subsets is not None and entry.speakers is not None
    assert entry.dropped_trials is not None and entry.failed_clips is not None and entry.facts is not None
    flite = entry.slices["tts_engine=flite"]
    assert isinstance(flite, SliceFigures) and flite.n_target > 0 and flite.n_nontarget > 0
    assert flite.eer is not None and flite.eer < 0.05, flite
    flite_subset = entry.subsets["flite"]
    assert flite_subset.error is None and flite_subset.eer is not None and flite_subset.eer < 0.05
    assert flite_subset.filter == {"tts_engine": ("flite",)} and flite_subset.threshold == entry.threshold
    # independent check of the flite EER from the stored embeddings
    emb = read_embeddings(out, "resemblyzer")
    ids = sorted(u for u in emb if u.startswith("flite-"))
    trials = [Trial(int(a.split("-")[1] == b.split("-")[1]), a, b) for i, a in enumerate(ids) for b in ids[i + 1 :]]
    value, _ = eer(cosine_scores(emb, trials), [t.label for t in trials])
    assert value < 0.05
    # the too-short clip is reported, its trials are dropped and listed, the rest is scored
    assert entry.n_failed_clips == 1 and "too-short" in entry.failed_clips
    assert entry.n_dropped_trials is not None and entry.n_dropped_trials > 0
    assert all("too-short" in (d.enroll, d.test) for d in entry.dropped_trials)
    assert entry.single_clip_speakers == ("espeak-ng:en-gb-x-rp",)
    assert entry.facts["info"]["embedding_dim"] == 256 and entry.batch_size == 4
    assert set(entry.speakers.per_speaker) >= {"flite:slt", "flite:awb", "flite:rms", "flite:kal"}
    assert entry.speakers.n_speaker_pairs >= len(entry.speakers.confusable_pairs) > 0
    assert isinstance(entry.notes, tuple)
    assert entry.det is not None and len(entry.det.p_fa) == len(entry.det.p_miss) > 1
    assert entry.score_hist is not None and len(entry.score_hist.edges) == len(entry.score_hist.target) + 1
    assert entry.scores_path is not None
    scores = pq.read_table(entry.scores_path)
    assert scores.num_rows == entry.n_trials
    text = json.dumps(result.to_json(), allow_nan=False)  # strict JSON for summary.json
    assert json.dumps(SpeakerResult.from_json(json.loads(text)).to_json(), allow_nan=False) == text


@pytest.mark.slow
def test_unavailable_backend_reported_others_go_on(speaker_run: tuple[Path, SpeakerResult, list[tuple]]) -> None:
    out, result, _ = speaker_run
    bad = result.entry("test-unavailable-sv")
    assert bad.status == "unavailable" and bad.error is not None
    assert "pip install somelib" in bad.error
    assert bad.eer is None and "eer" not in bad.to_json()  # a backend that did not run has no figures
    assert not (out / "embeddings" / "test-unavailable-sv").exists()
    assert result.entry("resemblyzer").status == "ok"


@pytest.mark.slow
def test_combined_clips_written_as_derived_audio(speaker_run: tuple[Path, SpeakerResult, list[tuple]]) -> None:
    _, result, _ = speaker_run
    combined = result.entry("resemblyzer").combined_clips
    assert combined is not None and combined.n_clips == 2 and combined.skipped == ()
    assert result.entry("test-unavailable-sv").combined_clips == combined  # every backend's entry names the clips
    recs = [json.loads(line) for line in Path(combined.manifest).read_text().splitlines()]
    assert sorted(r["same_speaker"] for r in recs) == ["0", "1"]
    for r in recs:
        info = sf.info(r["audio_filepath"])
        assert info.samplerate == SAMPLE_RATE and info.duration > 2.0
        assert r["parent_id"] == r["derivation"]["enroll"]


# --------------------------------------------------------------------------------------------
# Emotion audit
# --------------------------------------------------------------------------------------------


def test_emotion_audit_prosody_and_categorical(corpus: Path, tmp_path: Path) -> None:
    ds = open_dataset(corpus, shard_size=8)
    cfg = parse_emotion_config(
        {
            "backends": ["prosody", "test-loudness-ser"],
            "batch_size": 4,
            "derive_labels": True,
            "unmapped": "error",
            "label_map": {"positive-high-arousal": "happy", "negative-low-arousal": "sad"},
        },
        "test",
    )
    typed = run_emotion_audit(cfg, ds, tmp_path)
    result = typed.to_json()
    text = json.dumps(result, allow_nan=False)
    assert json.dumps(EmotionResult.from_json(json.loads(text)).to_json(), allow_nan=False) == text
    pros = result["prosody"]
    assert pros["status"] == "ok" and pros["categorical"] is None
    assert pros["n_failed_clips"] == 1 and "too-short" in pros["failed_clips"]
    ao = pros["arousal_ordering"]
    assert ao["dimension"] == "arousal_proxy"
    assert ao["expected_arousal"] == {"negative-low-arousal": -1.0, "neutral": 0.0, "positive-high-arousal": 1.0}
    by_pair = ao["by_label_pair_within_speaker"]
    assert by_pair["positive-high-arousal>neutral"]["n_pairs"] == 9
    assert by_pair["positive-high-arousal>neutral"]["accuracy"] == 1.0  # louder, faster, higher ranks above neutral
    assert by_pair["neutral>negative-low-arousal"]["accuracy"] >= 8 / 9
    assert ao["within_speaker"]["accuracy"] >= 0.9
    pc = pros["prosody_contrast"]
    assert pc["pairing"] == "parent" and pc["n_pairs"] == 6 and pc["confounded_by_voice"] is False
    assert all(p["a"].endswith("-neutral") for p in pc["pairs"])
    assert pc["mean_score"] >= 4 and pc["n_below_threshold"] == len(pc["below_threshold"])
    assert len((tmp_path / "emotion" / "prosody" / "contrast_pairs.jsonl").read_text().splitlines()) == 6
    assert pros["model_derived_labels"]["model_derived"] is True and "skipped" in pros["model_derived_labels"]

    cat = result["test-loudness-ser"]
    assert cat["status"] == "ok"
    # UA / WA recomputed independently from the stored posteriors
    outs = read_emotion_outputs(tmp_path, "test-loudness-ser")
    refs = {r["utt_id"]: r["emotion"] for r in map(json.loads, corpus.read_text().splitlines())}
    mapping = {"positive-high-arousal": "happy", "negative-low-arousal": "sad", "neutral": "neutral"}
    ids = sorted(u for u in refs if u in outs)
    y, p = [mapping[refs[u]] for u in ids], [outs[u].label for u in ids]
    recalls = [np.mean([pp == c for yy, pp in zip(y, p) if yy == c]) for c in sorted(set(y))]
    assert cat["ua"] == pytest.approx(float(np.mean(recalls)))
    assert cat["wa"] == pytest.approx(float(np.mean([a == b for a, b in zip(y, p)])))
    assert cat["macro_f1"] == pytest.approx(categorical_scores(y, p).macro_f1)
    assert cat["n_missing"] == 1 and cat["missing_utts"] == ["too-short"]
    assert sum(map(sum, cat["confusion"]["matrix"])) == len(ids)
    assert cat["arousal_ordering"]["dimension"] == "arousal"
    derived = cat["model_derived_labels"]
    assert derived["model_derived"] is True and derived["label_key"] == "model_emotion:test-loudness-ser"
    assert sum(derived["counts"].values()) == len(ids)
    assert cat["prosody_contrast"]["skipped"].startswith("backend gives no acoustic descriptors")
    # the same figures, typed
    tp, tc = typed.entry("prosody"), typed.entry("test-loudness-ser")
    assert isinstance(tp, EmotionBackendResult) and tp.categorical is None and tp.ua is None
    assert tp.arousal_ordering is not None and tp.arousal_ordering.within_speaker is not None
    assert tp.arousal_ordering.by_label_pair_within_speaker is not None
    assert tp.arousal_ordering.by_label_pair_within_speaker["positive-high-arousal>neutral"] == ComparisonFigures(1.0, 9, 0)
    assert tp.prosody_contrast is not None and tp.prosody_contrast.pairs is not None
    assert tp.prosody_contrast.n_pairs == 6 and all(p.a.endswith("-neutral") for p in tp.prosody_contrast.pairs)
    assert isinstance(tp.prosody_contrast.skipped, tuple) and tp.model_derived_labels is not None and tp.model_derived_labels.skipped
    assert tc.ua == cat["ua"] and tc.confusion is not None and tc.confusion.labels == tuple(cat["confusion"]["labels"])
    assert tc.per_class is not None and sum(c.support for c in tc.per_class.values()) == len(ids)
    assert tc.prosody_contrast is not None and isinstance(tc.prosody_contrast.skipped, str)
    lines = emotion_lines(typed, "Speech emotion")
    i = lines.index("### test-loudness-ser")
    assert lines[i + 1] == f"- UA {rate_text(tc.ua)}, WA {rate_text(tc.wa)}, macro-F1 {rate_text(tc.macro_f1)}"
    assert "- prosody contrast: not measured (backend gives no acoustic descriptors" in lines[i + 3]
    assert not any(line.startswith("- UA") for line in lines[: lines.index("### test-loudness-ser")])  # prosody gives no categories


def test_emotion_unmapped_label_is_a_clear_error_and_missing_label_column(corpus: Path, tmp_path: Path) -> None:
    ds = open_dataset(corpus, shard_size=8)
    cfg = parse_emotion_config({"backends": ["test-loudness-ser"]}, "test")
    entry = run_emotion_audit(cfg, ds, tmp_path).entry("test-loudness-ser")
    assert entry.status == "error" and entry.error is not None and entry.ua is None
    assert re.search(r"emotion label '(positive-high|negative-low)-arousal' is not in the label map; add a line", entry.error)
    cfg2 = parse_emotion_config({"backends": ["prosody"], "label": "mood"}, "test")
    with pytest.raises(ConfigError, match="no clip carries the emotion label 'mood'"):
        run_emotion_audit(cfg2, ds, tmp_path / "other")


def test_prosody_contrast_definition_is_a_recipe_option() -> None:
    """The paper's definition is the default; the earlier variant is chosen by name; a typo is an error."""
    from engine.errors import ConfigError

    assert parse_emotion_config({"backends": ["prosody"]}, "r.yaml").contrast_definition == "speecheq"
    cfg = parse_emotion_config({"backends": ["prosody"], "contrast_definition": "semitone-syllable"}, "r.yaml")
    assert cfg.contrast_definition == "semitone-syllable" and cfg.as_dict()["contrast_definition"] == "semitone-syllable"
    with pytest.raises(
        ConfigError,
        match=r"r.yaml: emotion.contrast_definition: 'speechEQ' is not allowed \(did you mean 'speecheq'\?\); use one of speecheq",
    ):
        parse_emotion_config({"backends": ["prosody"], "contrast_definition": "speechEQ"}, "r.yaml")
