"""The embedded demo corpus: deterministic, balanced slices, correct levels, readable storage."""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from engine.audio.shards import encode_audio
from engine.corpus import DEFAULT_N_UTTS, build_demo_corpus, plan_design, slice_counts
from engine.corpus import demo as demo_mod
from engine.corpus import transforms as tf
from engine.corpus.demo import FAMILIES, VOICES, DemoCorpus, quotas
from engine.corpus.texts import NUMBER_WORDS, SENTENCES, SPELLING_VARIANTS, number_tokens, spelling_variant_tokens, words
from engine.errors import AudioError, BackendUnavailable, ConfigError

SR = 16000
SMALL = 14  # one clip per voice


def _audio_bytes(corpus: DemoCorpus) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for shard in corpus.shards:
        t = pq.read_table(shard, columns=["utt_id", "audio"]).to_pylist()
        out.update({r["utt_id"]: r["audio"]["bytes"] for r in t})
    return out


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> DemoCorpus:
    return build_demo_corpus(tmp_path_factory.mktemp("demo-a"), seed=0, n_utts=SMALL)


# ----------------------------------------------------------------------------- texts


def test_texts_are_many_distinct_and_speakable() -> None:
    texts = [s.text for s in SENTENCES]
    assert len(texts) >= 60
    assert len(set(texts)) == len(texts)
    for s in SENTENCES:
        assert 5 <= len(s.text.split()) <= 20, s.text
        assert s.text[0].isupper() and s.text[-1] in ".?!", s.text
        if "$" in s.text:  # espeak-ng reads "$4" as "dollar four": a spoken form is required
            assert s.say is not None and "$" not in s.say and "dollars" in s.say, s.text
        assert s.tts_text == (s.say or s.text)


def test_texts_have_numbers_years_amounts_and_percentages() -> None:
    joined = " ".join(s.text for s in SENTENCES)
    assert len(re.findall(r"\b(19|20)\d\d\b", joined)) >= 8  # years
    assert len(re.findall(r"\$\d", joined)) >= 5  # dollar amounts
    assert len(re.findall(r"\d%", joined)) >= 3 and joined.count(" percent") >= 5
    assert re.search(r"\d,\d{3}", joined) and re.search(r"\d\.\d", joined) and re.search(r"\d:\d\d", joined)
    spelled = [t for s in SENTENCES for t in number_tokens(s.text) if t.lower() in NUMBER_WORDS]
    digits = [t for s in SENTENCES for t in number_tokens(s.text) if re.search(r"\d", t)]
    assert len(spelled) >= 10 and len(digits) >= 30


def test_texts_have_non_initial_proper_nouns() -> None:
    with_noun = 0
    for s in SENTENCES:
        toks = words(s.text)
        for noun in s.proper_nouns:
            assert noun in toks, (noun, s.text)
            assert noun[0].isupper()
        if any(n in toks[1:] for n in s.proper_nouns):
            with_noun += 1
    assert with_noun >= 55


def test_texts_cover_every_spelling_variant_form() -> None:
    seen: dict[str, set[str]] = {}
    for s in SENTENCES:
        for family, forms in spelling_variant_tokens(s.text).items():
            seen.setdefault(family, set()).update(forms)
    for family in ("mister", "doctor", "colour", "favourite", "centre", "organise", "percent", "okay"):
        required = {f for f in SPELLING_VARIANTS[family] if f not in {"organised", "organized"}}
        assert required <= seen[family], (family, seen.get(family))
    assert "mrs." in seen["missus"] and "$" in seen["dollar"]


# ----------------------------------------------------------------------------- design


SPEECH_FREE_VALUES = {("content", "speech-free"), *(("background", k) for k in demo_mod.SPEECH_FREE_KINDS)}


def test_default_design_has_enough_per_slice_value() -> None:
    plans = plan_design(DEFAULT_N_UTTS, seed=0)
    free = demo_mod.plan_speech_free(DEFAULT_N_UTTS, seed=0)
    assert 160 <= len(plans) <= 200 and len(free) == 12
    counts = slice_counts(plans, free)
    for family, values in FAMILIES.items():
        for value in values:
            least = 4 if (family, value) in SPEECH_FREE_VALUES else 14 if family == "accent" else 20
            assert counts[family][value] >= least, (family, value, counts[family])
    assert counts["emotion"]["neutral"] > len(plans) / 3
    assert counts["background"]["clean"] > len(plans) / 2
    assert counts["conversation"]["single"] > len(plans) / 2


def test_design_is_balanced_and_one_channel_change_at_a_time() -> None:
    plans = plan_design(DEFAULT_N_UTTS, seed=3)
    # background and conversation never both perturbed
    assert not [p for p in plans if p.background != "clean" and p.conversation != "single"]
    # emotion mix is the same (within one utterance) in every channel condition
    by_channel: dict[tuple[str, str], Counter[str]] = {}
    for p in plans:
        by_channel.setdefault((p.background, p.conversation), Counter())[p.emotion] += 1
    for cond, emo in by_channel.items():
        size = sum(emo.values())
        assert abs(emo["neutral"] - size / 2) <= 1, (cond, emo)
        for e in ("positive-high-arousal", "negative-high-arousal", "negative-low-arousal"):
            assert abs(emo[e] - size / 6) <= 1, (cond, emo)
    # every voice gets every channel condition
    per_voice = Counter((p.voice.accent, p.background, p.conversation) for p in plans)
    assert len(per_voice) == len(VOICES) * len(demo_mod.CHANNELS)
    # no voice reads the same sentence twice, except an emotional clip re-voicing its neutral parent
    roots = [p for p in plans if p.parent is None]
    assert len({(p.voice.voice, p.sentence) for p in roots}) == len(roots)
    children = [p for p in plans if p.parent is not None]
    assert len(children) >= 40 and len({p.parent for p in children}) == len(children)
    for p in children:
        parent = plans[p.parent or 0]
        assert p.emotion != "neutral" and parent.emotion == "neutral"
        assert (parent.voice, parent.sentence, parent.background, parent.conversation) == (
            p.voice,
            p.sentence,
            p.background,
            p.conversation,
        )
    for p in plans:
        if p.conversation == "single":
            assert p.second_voice is None and not p.second_sentences
        else:
            assert p.second_voice is not None and p.second_voice != p.voice
            assert p.sentence not in p.second_sentences


def test_design_is_seeded() -> None:
    assert plan_design(40, seed=5) == plan_design(40, seed=5)
    assert plan_design(40, seed=5) != plan_design(40, seed=6)
    assert [p.utt_id for p in plan_design(40)][:2] == ["demo-0001", "demo-0002"]


def test_quotas_sum_and_cover() -> None:
    assert quotas(180, [3, 1, 1, 1, 1, 1, 1]) == [60, 20, 20, 20, 20, 20, 20]
    for n in (7, 12, 50, 161):
        q = quotas(n, [3, 1, 1, 1, 1, 1, 1])
        assert sum(q) == n and min(q) >= 1
    counts = slice_counts(plan_design(SMALL))
    for family, values in FAMILIES.items():
        assert all(counts[family][v] >= 1 for v in values if (family, v) not in SPEECH_FREE_VALUES), (family, counts[family])
    assert demo_mod.n_speech_free(47) == 0 and demo_mod.n_speech_free(48) == 3 and demo_mod.n_speech_free(1000) == 12
    with pytest.raises(ConfigError, match="n_utts"):
        plan_design(0)


# ----------------------------------------------------------------------------- signal transforms


def _speech_like(seconds: float = 2.0) -> np.ndarray:
    """Bursts of a harmonic tone separated by silence, padded with silence (like TTS output)."""
    t = np.arange(int(seconds * SR)) / SR
    x = 0.3 * np.sin(2 * np.pi * 140 * t) + 0.1 * np.sin(2 * np.pi * 420 * t)
    x *= (np.sin(2 * np.pi * 2 * t) > 0).astype(float)
    return np.concatenate([np.zeros(SR // 2), x, np.zeros(SR // 2)]).astype(np.float32)


def test_active_power_ignores_silence() -> None:
    x = _speech_like()
    padded = np.concatenate([np.zeros(3 * SR, np.float32), x, np.zeros(2 * SR, np.float32)])
    assert tf.active_power(padded, SR) == pytest.approx(tf.active_power(x, SR), rel=1e-6)
    assert tf.active_power(x, SR) > 2 * float(np.mean(x.astype(np.float64) ** 2))


@pytest.mark.parametrize("snr", [20.0, 10.0, 5.0, 0.0])
@pytest.mark.parametrize("kind", ["pink", "music"])
def test_mix_at_snr_is_within_half_a_db(snr: float, kind: str) -> None:
    rng = np.random.default_rng(7)
    speech = _speech_like()
    if kind == "pink":
        bg = tf.pink_noise(SR, rng)  # shorter than the clip: it is tiled
    else:
        bg, _ = tf.synth_music(len(speech) + SR, SR, rng)  # longer: it is cut
    mix, info = tf.mix_at_snr(speech, bg, snr, SR)
    assert len(mix) == len(speech)
    assert tf.measured_snr_db(speech, mix, SR) == pytest.approx(snr, abs=0.01)
    # still within 0.5 dB after peak limiting and 16-bit FLAC storage
    limited, scale = tf.peak_protect(mix)
    decoded, sr = sf.read(io.BytesIO(encode_audio(limited, SR)), dtype="float32")
    assert sr == SR
    assert abs(tf.measured_snr_db(speech * scale, decoded, SR) - snr) < 0.5
    assert info["snr_db"] == snr


def test_pink_noise_spectrum_falls_with_frequency() -> None:
    x = tf.pink_noise(SR * 4, np.random.default_rng(1))
    spec = np.abs(np.fft.rfft(x)) ** 2
    f = np.fft.rfftfreq(len(x), 1 / SR)
    low = spec[(f > 100) & (f < 200)].mean()
    high = spec[(f > 3200) & (f < 6400)].mean()
    assert 10 * np.log10(low / high) == pytest.approx(10 * np.log10(32), abs=2.0)  # 3 dB/octave, 5 octaves


def test_music_is_tonal_and_seeded() -> None:
    a, info = tf.synth_music(SR * 3, SR, np.random.default_rng(2))
    b, _ = tf.synth_music(SR * 3, SR, np.random.default_rng(2))
    assert np.array_equal(a, b)
    assert 84 <= info["bpm"] <= 126
    spec = np.abs(np.fft.rfft(a)) ** 2
    top = np.sort(spec)[::-1]
    assert top[:200].sum() > 0.5 * spec.sum()  # energy sits in a few harmonic lines, unlike noise


def test_overlay_talker_sets_relative_level() -> None:
    p, q = _speech_like(2.0), 0.5 * _speech_like(1.0)
    out, info = tf.overlay_talker(p, q, SR, offset_s=1.5, level_db=-10.0)
    start = int(1.5 * SR)
    assert len(out) == max(len(p), start + len(q))
    second = out.astype(np.float64).copy()
    second[: len(p)] -= p
    level = tf.power_db(tf.active_power(second, SR)) - tf.power_db(tf.active_power(p, SR))
    assert level == pytest.approx(-10.0, abs=0.05)
    assert info["offset_s"] == 1.5


def _formants(x: np.ndarray) -> tuple[float, float]:
    import parselmouth

    f = parselmouth.Sound(x.astype(np.float64), SR).to_formant_burg(max_number_of_formants=5, maximum_formant=5500)
    values = [[f.get_value_at_time(k, t) for t in f.ts()] for k in (1, 2)]
    return float(np.nanmedian(values[0])), float(np.nanmedian(values[1]))


def _f0(x: np.ndarray) -> float:
    import parselmouth

    pitch = parselmouth.Sound(x.astype(np.float64), SR).to_pitch(pitch_floor=60, pitch_ceiling=600)
    f0 = pitch.selected_array["frequency"]
    return float(np.median(f0[f0 > 0]))


def test_emotion_render_changes_pitch_and_rate_but_keeps_formants() -> None:
    from engine.backends.tts.flite import FliteTTS
    from engine.backends.tts.program import resample

    raw, sr = FliteTTS().synthesize("The weather in Boston was warm and sunny all week.", "slt")
    x = resample(raw, sr, SR)
    hi = tf.EMOTIONS["positive-high-arousal"]
    y, info = tf.render_emotion(x, SR, hi)
    assert info["method"] == "praat-psola-change-gender" and info["formant_shift_ratio"] == 1.0
    assert _f0(y) / _f0(x) == pytest.approx(hi.pitch, rel=0.06)
    assert len(y) / len(x) == pytest.approx(1 / hi.rate, rel=0.03)
    (f1, f2), (g1, g2) = _formants(x), _formants(y)
    assert g1 / f1 == pytest.approx(1.0, abs=0.08) and g2 / f2 == pytest.approx(1.0, abs=0.05)
    # the transform this replaces (resampling) moves the formants with f0
    shifted = resample(x, SR * hi.pitch, SR)
    assert _formants(shifted)[1] / f2 > 1.08
    lo = tf.EMOTIONS["negative-low-arousal"]
    z, _ = tf.render_emotion(x, SR, lo)
    assert _f0(z) < _f0(x) < _f0(y) and len(z) > len(x) > len(y)
    again, _ = tf.render_emotion(x, SR, hi)
    assert np.array_equal(again, y)  # seeded: the same seed gives the same samples
    same, ident = tf.render_emotion(x, SR, tf.EMOTIONS["neutral"])
    assert ident == {"method": "none"} and np.array_equal(same, x)


# ----------------------------------------------------------------------------- built corpus


def test_other_seed_differs(small: DemoCorpus, tmp_path: Path) -> None:
    """(The same seed giving the same bytes is proved by the forced rebuild in ``test_corpus_json_and_reuse``.)"""
    a = _audio_bytes(small)
    other = _audio_bytes(build_demo_corpus(tmp_path / "c", seed=1, n_utts=SMALL))
    assert list(other) == list(a) and sum(a[k] != other[k] for k in a) >= SMALL - 1


def test_built_audio_is_16k_mono_and_matches_files(small: DemoCorpus) -> None:
    data = _audio_bytes(small)
    assert len(data) == SMALL
    for utt_id, blob in data.items():
        info = sf.info(io.BytesIO(blob))
        assert info.samplerate == SR and info.channels == 1 and info.format == "FLAC"
        x, _ = sf.read(io.BytesIO(blob), dtype="float32")
        assert 1.0 < len(x) / SR < 15.0
        assert np.sqrt(np.mean(x**2)) > 0.005 and np.abs(x).max() <= 0.99
        assert (small.root / "audio" / f"{utt_id}.flac").read_bytes() == blob


def test_manifest_matches_shards(small: DemoCorpus) -> None:
    lines = [json.loads(line) for line in small.manifest.read_text(encoding="utf-8").splitlines()]
    utts = small.utterances()
    assert [r["utt_id"] for r in lines] == [u.utt_id for u in utts] == [f"demo-{i:04d}" for i in range(1, SMALL + 1)]
    for rec, u in zip(lines, utts):
        assert rec["text"] == u.reference and rec["duration"] == pytest.approx(u.duration_s)
        assert rec["audio_filepath"] == u.audio_path and Path(u.audio_path or "").exists()
        assert rec["speaker"] == u.speaker
        for family in FAMILIES:
            assert rec[family] == u.labels[family]
        assert u.labels["emotion_source"] == "simulated"
        assert u.reference and u.reference[0].isupper()  # raw text, not normalized
        assert rec.get("parent_id") == u.parent_id


def test_labels_and_derivation_records(small: DemoCorpus) -> None:
    utts = small.utterances()
    for family, values in FAMILIES.items():
        present = {u.labels[family] for u in utts}
        assert present == {v for v in values if (family, v) not in SPEECH_FREE_VALUES}, family
    for u in utts:
        d = u.derivation or {}
        assert d["emotion"]["label"] == u.labels["emotion"] and d["emotion"]["source"] == "simulated"
        assert {"pitch", "rate", "gain_db", "pitch_range", "transform"} <= set(d["emotion"])
        assert d["emotion"]["from_rendition_of"] == u.parent_id
        assert d["tts"]["voice"] in {v.voice for v in VOICES}
        assert u.speaker == f"{d['tts']['engine']}:{d['tts']['voice']}"
        bg = d["background"]
        if u.labels["background"].startswith("noise-"):
            assert bg["snr_db"] == float(u.labels["background"][6:-2]) and bg["type"] == "pink-noise"
        elif u.labels["background"] == "music":
            assert bg["snr_db"] == demo_mod.MUSIC_SNR_DB and bg["type"] == "synth-music"
        conv = d["conversation"]
        if u.labels["conversation"] == "overlap":
            assert conv["reference_scope"] == "both-turns-in-onset-order"
            assert u.reference and u.reference.endswith(conv["second_texts"][0])
        else:
            assert conv["reference_scope"] == "primary-talker"
            assert u.reference == SENTENCES[d["sentence_index"]].text


def test_corpus_json_and_reuse_and_same_seed_same_bytes(small: DemoCorpus, monkeypatch: pytest.MonkeyPatch) -> None:
    meta = small.info()
    assert meta["name"] == "demo" and meta["seed"] == 0 and meta["n_utts"] == SMALL
    assert meta["builder_version"] == demo_mod.BUILDER_VERSION
    assert "eSpeak NG" in meta["tool_versions"]["espeak-ng"] and "flite" in meta["tool_versions"]["flite"]
    assert "kokoro-82m" in meta["tool_versions"]["kokoro"]
    assert len(meta["voices"]) == 14 and meta["slice_design"]["counts"]["accent"]
    calls: list[object] = []
    original = demo_mod._Synth.run

    def counting_run(self: object, job: object) -> object:
        calls.append(job)
        return original(self, job)  # type: ignore[arg-type]

    monkeypatch.setattr(demo_mod._Synth, "run", counting_run)
    # a complete corpus is returned without synthesizing anything ...
    assert build_demo_corpus(small.root, seed=0, n_utts=SMALL) == small
    assert calls == []
    # ... unless force is set (or the seed or size differ); the same seed gives the same bytes, also
    # with one synthesis worker instead of the default pool
    before = _audio_bytes(small)
    forced = build_demo_corpus(small.root, seed=0, n_utts=SMALL, force=True, workers=1)
    assert len(calls) >= SMALL and forced.info()["n_utts"] == SMALL
    again = _audio_bytes(forced)
    assert list(again) == list(before) and again == before


def test_failed_build_leaves_no_complete_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_run(self: object, job: object) -> object:
        raise AudioError("synthesizer broke")

    monkeypatch.setattr(demo_mod._Synth, "run", failing_run)
    with pytest.raises(AudioError, match="synthesizer broke"):
        build_demo_corpus(tmp_path, n_utts=3)
    assert not (tmp_path / "corpus.json").exists()


def test_progress_is_reported(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    build_demo_corpus(tmp_path, seed=2, n_utts=3, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(1, 3), (2, 3), (3, 3)]


def test_missing_tts_programs_name_the_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BackendUnavailable, match=r"the demo corpus needs the espeak-ng voices: .*apt-get install espeak-ng"):
        build_demo_corpus(tmp_path / "x", n_utts=2)


@pytest.mark.slow  # builds the full corpus once per session (shared with the end-to-end tests)
def test_full_default_corpus(demo_corpus: Path) -> None:
    corpus = build_demo_corpus(demo_corpus)
    assert corpus.n_utts == DEFAULT_N_UTTS and len(corpus.shards) == 4
    utts = corpus.utterances()
    assert len(utts) == DEFAULT_N_UTTS + 12
    for family, values in FAMILIES.items():
        counts = Counter(u.labels[family] for u in utts if family in u.labels)
        assert set(counts) == set(values), (family, counts)
    free = [u for u in utts if u.labels["content"] == "speech-free"]
    assert len(free) == 12 and all(u.reference == "" and u.speaker is None and u.parent_id is None for u in free)
    ids = {u.utt_id: u for u in utts}
    pairs = [(ids[u.parent_id], u) for u in utts if u.parent_id]
    assert len(pairs) >= 40
    for parent, child in pairs:
        assert parent.reference == child.reference and parent.speaker == child.speaker
        assert parent.labels["emotion"] == "neutral" != child.labels["emotion"]
    hours = sum(u.duration_s or 0 for u in utts) / 3600
    assert 0.1 < hours < 0.5


def test_small_subset_is_balanced_and_taken_from_the_full_design() -> None:
    """The quick demo's corpus: every voice, channel, emotion and speech-free kind, clips unchanged."""
    full = {p.index: p for p in plan_design(DEFAULT_N_UTTS)}
    plans, free = demo_mod.select_plans("small", DEFAULT_N_UTTS, 0)
    assert len(plans) == demo_mod.SMALL_PER_VOICE * len(VOICES) and len(free) == 3
    assert all(full[p.index] == p for p in plans), "a chosen clip is the full design's clip (same id, text, slices)"
    assert [f.background for f in free] == list(demo_mod.SPEECH_FREE_KINDS)
    assert all(f in demo_mod.plan_speech_free(DEFAULT_N_UTTS) for f in free)
    counts = slice_counts(plans, free)
    for family in ("accent", "emotion", "background", "conversation", "tts_engine", "accent_group", "content"):
        assert all(n > 0 for n in counts[family].values()), (family, counts[family])
    assert set(Counter(p.voice.speaker for p in plans).values()) == {demo_mod.SMALL_PER_VOICE}
    chosen = {p.index for p in plans}
    assert any(p.parent is not None and p.parent in chosen for p in plans), "some emotional clips come with their neutral parent"
    assert demo_mod.select_plans("small", DEFAULT_N_UTTS, 0) == (plans, free), "deterministic"
    with pytest.raises(ConfigError, match="subset 'tiny'"):
        demo_mod.select_plans("tiny", DEFAULT_N_UTTS, 0)


def test_a_full_corpus_is_not_reused_as_the_small_one(small: DemoCorpus) -> None:
    assert demo_mod._existing(small.root, 0, SMALL, "full") == small
    assert demo_mod._existing(small.root, 0, SMALL, "small") is None
