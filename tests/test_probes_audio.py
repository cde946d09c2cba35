"""Probes from audio: word timings, masking, planted reference errors, config checks, and the
end-to-end run on a demo slice where every probe flags the memorizer and not whisper-tiny.en."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audits.probes.config import ReferenceErrors, parse_probe_config
from audits.probes.masking import MaskSettings, active_rms, apply_mask, mask_clip, records_from_rows
from audits.probes.masking_score import gated_leak_rate, select_mask_targets
from audits.probes.run import plant_reference_errors, run_probes
from audits.probes.synthetic_voice import Pair, corrected_from_spans, summarize_pairs
from audits.probes.word_timings import WordTiming, align_timings, merge_fragments, span_timing, spoken_words
from engine.data import Utterance
from engine.errors import ConfigError

SR = 16000


# ------------------------------------------------------------------ word timings


def test_timings_group_number_words_against_digits() -> None:
    hyp = [
        ("Our", 0.0, 0.3),
        ("friend", 0.3, 0.6),
        ("Mister", 0.6, 0.9),
        ("Davies", 0.9, 1.3),
        ("for", 1.3, 1.5),
        ("23", 1.5, 2.1),
        ("years.", 2.1, 2.6),
    ]
    t = align_timings("Our friend Mr. Davies for twenty three years.", hyp, 3.0)
    assert [x.how for x in t] == ["aligned"] * 8
    assert (t[2].start, t[2].end) == (0.6, 0.9)  # Mr. = Mister
    assert t[5].start == 1.5 and t[6].end == 2.1 and t[5].end == t[6].start  # "twenty three" shares "23"
    assert all(x.method == "whisper-word-timestamps" for x in t)


def test_timings_interpolate_skipped_words_or_mark_them_unknown() -> None:
    t = align_timings("the red Bolzano car", [("the", 0.0, 0.2), ("red", 0.2, 0.5), ("car", 1.0, 1.3)], 2.0)
    assert t[2].how == "interpolated" and (t[2].start, t[2].end) == (0.5, 1.0)
    t = align_timings("the red Bolzano car", [("the", 0.0, 0.2), ("red", 0.2, 0.5), ("car", 0.5, 0.8)], 2.0)
    assert t[2].how == "unknown" and not t[2].known
    assert span_timing(t, 2, 3, 2.0) is None


def test_fragments_join_and_spoken_forms() -> None:
    assert merge_fragments([("350", 1.0, 1.4), (",000", 1.4, 1.9), ("to", 1.9, 2.0)]) == [("350,000", 1.0, 1.9), ("to", 1.9, 2.0)]
    assert spoken_words("2016") == ["twenty", "sixteen"]
    assert spoken_words("$120") == ["one", "hundred", "twenty", "dollars"]
    assert spoken_words("1,500") == ["one", "thousand", "five", "hundred"]
    assert spoken_words("8%") == ["eight", "percent"]


# ------------------------------------------------------------------ masking audio


def _tone(seconds: float = 3.0) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def test_mask_variants_change_only_the_span() -> None:
    x = _tone()
    s = MaskSettings(variants=("silence", "attenuate", "noise"))
    rng = np.random.default_rng(0)
    a, b = int(1.0 * SR), int(1.5 * SR)
    sil = apply_mask(x, 1.0, 1.5, "silence", s, rng)
    assert np.array_equal(sil[:a], x[:a]) and np.array_equal(sil[b:], x[b:])
    assert np.max(np.abs(sil[a + 100 : b - 100])) == 0.0
    att = apply_mask(x, 1.0, 1.5, "attenuate", s, rng)
    ratio = np.sqrt(np.mean(att[a + 100 : b - 100] ** 2) / np.mean(x[a + 100 : b - 100] ** 2))
    assert 20 * np.log10(ratio) == pytest.approx(-30.0, abs=0.1)
    noi = apply_mask(x, 1.0, 1.5, "noise", s, rng)
    assert np.sqrt(np.mean(noi[a + 100 : b - 100] ** 2)) == pytest.approx(active_rms(x), rel=0.1)
    with pytest.raises(ConfigError, match="unknown masking variant"):
        apply_mask(x, 1.0, 1.5, "reverse", s, rng)


def _timings(ref: str, step: float = 0.3, lead: float = 0.2) -> list[WordTiming]:
    return [
        WordTiming(i, w, lead + i * step, lead + (i + 1) * step - 0.02, "whisper-word-timestamps", "aligned")
        for i, w in enumerate(ref.split())
    ]


def test_mask_clip_writes_derived_utterances_with_parent_and_target() -> None:
    ref = "We flew to Lisbon in 2016 with friends."
    u = Utterance("c1", ref, speaker="s1", labels={"accent": "x"})
    x = _tone(3.0)
    s = MaskSettings(variants=("silence", "noise"), max_targets=2)
    out, skips = mask_clip(u, x, lambda: _timings(ref), s)
    assert not skips
    assert [m.utt_id for m in out] == ["c1~mask-0-silence", "c1~mask-0-noise", "c1~mask-1-silence", "c1~mask-1-noise"]
    d = out[0].derivation
    assert out[0].parent_id == "c1" and out[0].reference == ref and out[0].labels == {"accent": "x"}
    assert d["probe"] == "masking" and d["variant"] == "silence" and d["timing_method"] == "whisper-word-timestamps"
    texts = {m.derivation["target"]["text"] for m in out}
    assert texts == {"Lisbon", "2016"}
    lo, hi = d["span_s"]
    assert hi > lo and d["pad_s"] == 0.05


def test_bad_inputs_are_skipped_with_reasons_not_zeros() -> None:
    s = MaskSettings()
    x = _tone(3.0)
    called: list[int] = []

    def timings() -> list[WordTiming]:
        called.append(1)
        return _timings("we went there again")

    out, skips = mask_clip(Utterance("a", "we went there again and again"), x, timings, s)
    assert out == [] and skips[0].reason == "no-maskable-word" and "no number" in skips[0].detail
    assert not called  # no alignment spent on a clip without a target
    out, skips = mask_clip(Utterance("b", "Paris in 2016"), _tone(0.5), timings, s)
    assert out == [] and skips[0].reason == "clip-too-short" and "0.50 s" in skips[0].detail
    unknown = [WordTiming(i, w, None, None, "whisper-word-timestamps", "unknown") for i, w in enumerate(["we", "saw", "Paris", "today"])]
    out, skips = mask_clip(Utterance("c", "we saw Paris today"), x, lambda: unknown, s)
    assert out == [] and skips[0].reason == "timing-unknown" and skips[0].target == "Paris"
    out, skips = mask_clip(Utterance("d", ""), x, timings, s)
    assert skips[0].reason == "no-reference"


def test_numbers_match_across_digits_and_words_in_the_leak_rate() -> None:
    ref = "They moved to Denver in 2016 with two daughters."
    (target,) = select_mask_targets(ref, 1, kinds=("number",))
    assert target.text == "2016"
    der = {"u~mask-0-silence": {"target": target.to_dict(), "variant": "silence"}}
    parents = {"u~mask-0-silence": "u"}
    orig = {
        ("m_words", "u"): "they moved to denver in twenty sixteen with two daughters",
        ("m_digits", "u"): "They moved to Denver in 2016.",
        ("m_miss", "u"): "They moved to Denver in 2015.",
    }
    masked = {
        ("m_words", "u~mask-0-silence"): "They moved to Denver in 2016 with two daughters.",
        ("m_digits", "u~mask-0-silence"): "they moved to denver in two thousand and sixteen",
        ("m_miss", "u~mask-0-silence"): "They moved to Denver in 2016.",
    }
    recs = records_from_rows(der, parents, masked, orig, ["m_words", "m_digits", "m_miss"])
    res = gated_leak_rate(recs).to_dict()
    assert (res["m_words"]["n_gated"], res["m_words"]["n_leaked"]) == (1, 1)
    assert (res["m_digits"]["n_gated"], res["m_digits"]["n_leaked"]) == (1, 1)
    assert res["m_miss"]["n_gated"] == 0 and res["m_miss"]["rate"] is None and res["m_miss"]["status"] == "no-gated-clips"


# ------------------------------------------------------------------ configuration


def test_probe_config_rejects_bad_input_with_clear_messages() -> None:
    with pytest.raises(ConfigError, match="unknown key 'maskng'"):
        parse_probe_config({"maskng": {}}, "r.yaml")
    with pytest.raises(ConfigError, match="masking: unknown key 'pads'"):
        parse_probe_config({"masking": {"pads": 0.1}}, "r.yaml")
    with pytest.raises(ConfigError, match="panel is empty"):
        parse_probe_config({"bad_reference": {"panel": []}}, "r.yaml")
    with pytest.raises(ConfigError, match=r"panel has 2 model\(s\).*min_eligible_panel is 3"):
        parse_probe_config({"bad_reference": {"panel": ["whisper-base", "whisper-tiny.en"]}}, "r.yaml")
    with pytest.raises(ConfigError, match="did you mean"):
        parse_probe_config({"bad_reference": {"panel": ["whisper-bse", "whisper-tiny.en"], "min_eligible_panel": 2}}, "r.yaml")
    with pytest.raises(ConfigError, match="memorizer"):
        parse_probe_config({"bad_reference": {"panel": ["memorizer", "whisper-tiny.en"], "min_eligible_panel": 2}}, "r.yaml")
    with pytest.raises(ConfigError, match="variant"):
        parse_probe_config({"masking": {"variants": ["silence", "mute"]}}, "r.yaml")
    with pytest.raises(ConfigError, match="need the masking or bad_reference probe"):
        parse_probe_config({"synthetic_voice": {}}, "r.yaml")
    with pytest.raises(ConfigError, match="TTS backend"):
        parse_probe_config({"masking": {}, "synthetic_voice": {"tts": "espeak"}}, "r.yaml")
    # human corrections alone define the spans: no panel needed
    cfg = parse_probe_config({"bad_reference": {"corrections": "fixed.jsonl"}}, "r.yaml")
    assert cfg.bad_reference is not None and cfg.bad_reference.panel == ()


def test_probe_config_defaults_and_enabled_flags() -> None:
    cfg = parse_probe_config({"masking": {"variants": ["noise", "silence"]}, "orthography": {"enabled": False}}, "r.yaml")
    assert cfg.enabled == ["masking"]
    assert cfg.masking is not None and cfg.masking.primary_variant == "silence" and cfg.masking.pad_s == 0.05


def test_planted_reference_errors_are_deterministic_and_recorded() -> None:
    utts = [Utterance(f"u{i}", f"The price rose by {i + 2} percent in Spain.") for i in range(8)]
    a, plan = plant_reference_errors(utts, ReferenceErrors(fraction=0.5, seed=3))
    _, plan2 = plant_reference_errors(utts, ReferenceErrors(fraction=0.5, seed=3))
    assert plan == plan2 and len(plan) == 4
    assert sorted(p["kind"] for p in plan.values()) == ["append", "drop-first", "drop-last", "prepend"]
    for u in a:
        if u.utt_id in plan:
            p = plan[u.utt_id]
            assert u.reference == p["corrupted"] != p["original"]
            assert u.derivation["planted_reference_error"]["kind"] == p["kind"]
            if p["kind"] == "prepend":
                assert u.reference.startswith("Madam President, the price")
            if p["kind"] == "drop-last":
                assert u.reference.endswith("percent in.")
        else:
            assert u.reference == utts[int(u.utt_id[1:])].reference


def test_corrected_text_and_paired_difference() -> None:
    from audits.probes.bad_reference import BadSpan

    spans = [
        BadSpan("c", "delete", "start", "madam president", "", (0, 1), 2, 2),
        BadSpan("c", "insert", "end", "", "thank you", (7,), 2, 2),
    ]
    assert corrected_from_spans(["madam", "president", "the", "vote", "is", "now", "closed"], spans) == "the vote is now closed thank you"
    pairs = [Pair("mem", "masking", f"c{i}", "t0", 1, 0) for i in range(6)] + [
        Pair("asr", "masking", f"c{i}", "t0", 0, 0) for i in range(6)
    ]
    out = summarize_pairs(pairs, ["mem", "asr", "absent"], n_boot=200)
    assert out["mem"]["rate"] == 1.0 and out["mem"]["real_rate"] == 1.0 and out["mem"]["generic_rate"] == 0.0
    assert out["asr"]["rate"] == 0.0 and out["asr"]["ci95"] == [0.0, 0.0]
    assert out["absent"]["rate"] is None and out["absent"]["status"] == "no-pairs"


def test_both_voice_arms_are_summarized_with_intervals() -> None:
    pairs = [Pair("mem", "masking", f"c{i}", "t0", 1, 0, "generic") for i in range(6)]
    pairs += [Pair("mem", "masking", f"c{i}", "t0", 1, int(i == 0), "matched") for i in range(6)]
    pairs += [Pair("asr", "masking", f"c{i}", "t0", int(i < 3), int(i < 2), arm) for i in range(6) for arm in ("generic", "matched")]
    out = summarize_pairs(pairs, ["mem", "asr"], n_boot=200, arms=("generic", "matched"))
    mem = out["mem"]
    assert mem["rate"] == 1.0 and mem["rate_definition"] == "real - generic"
    assert mem["arms"]["matched"]["rate"] == pytest.approx(5 / 6) and mem["arms"]["matched"]["matched_rate"] == pytest.approx(1 / 6)
    assert mem["real_minus_matched"]["rate"] == pytest.approx(5 / 6) and mem["real_minus_generic"]["n_pairs"] == 6
    assert mem["arms"]["generic"]["real_ci95"] == [1.0, 1.0]
    lo, hi = out["asr"]["arms"]["matched"]["synthetic_ci95"]
    assert 0.0 <= lo <= 2 / 6 <= hi <= 1.0
    assert out["asr"]["real_minus_matched"]["rate"] == pytest.approx(1 / 6)
    # matched arm only: it is the headline
    only = summarize_pairs([p for p in pairs if p.arm == "matched"], ["mem"], n_boot=200, arms=("matched",))
    assert only["mem"]["rate"] == pytest.approx(5 / 6) and only["mem"]["rate_definition"] == "real - matched"


def test_voice_arms_reach_reports_and_exports() -> None:
    from audits.probes.report import probe_lines, probes_data, render_probes
    from audits.probes.results import ProbesResult
    from audits.reports.tables import summary_frames

    pairs = [Pair("memorizer", "masking", f"c{i}", "t0", 1, 0, arm) for i in range(5) for arm in ("generic", "matched")]
    pairs += [Pair("whisper-tiny.en", "masking", f"c{i}", "t0", 0, 0, arm) for i in range(5) for arm in ("generic", "matched")]
    section = {
        **summarize_pairs(pairs, ["memorizer", "whisper-tiny.en"], n_boot=200, arms=("generic", "matched")),
        "arms": ["generic", "matched"],
        "status": "ok",
        "matched": {
            "n_speakers": 2,
            "chosen": {"flite:awb": 1, "kokoro:jm_kumo": 1},
            "encoder": "resemblyzer",
            "similarity": {"mean": 0.8, "min": 0.75, "max": 0.85},
        },
    }
    summary = {"probes": {"synthetic_voice": section}, "models": {"memorizer": {"backend": "memorizer"}}}
    md_text = "\n".join(probe_lines(ProbesResult.from_json(summary["probes"]), "Probes"))
    assert "| memorizer | matched | 5 | 1.000 [1.000, 1.000] | 0.000 [0.000, 0.000] | 1.000 [1.000, 1.000] |" in md_text
    assert "flite:awb (1), kokoro:jm_kumo (1)" in md_text
    data = probes_data(ProbesResult.from_json(summary["probes"]), summary)
    page = render_probes(data, {})
    assert page.count("class='arm-row'") == 4 and 'data-arm="matched"' in page
    arms = summary_frames(summary)["synthetic_voice_arms"]
    row = arms[(arms["model"] == "memorizer") & (arms["arm"] == "matched")].iloc[0]
    assert row["diff"] == 1.0 and row["real_rate"] == 1.0 and row["synthetic_rate"] == 0.0 and row["n_pairs"] == 5


def test_voice_arm_settings_are_checked() -> None:
    base = {"masking": {}}
    cfg = parse_probe_config({**base, "synthetic_voice": {}}, "r.yaml")
    assert cfg.synthetic_voice is not None and cfg.synthetic_voice.arms == ("generic", "matched")
    assert "flite:slt" in cfg.synthetic_voice.matched_pool and "kokoro:*" in cfg.synthetic_voice.matched_pool
    cfg = parse_probe_config(
        {**base, "synthetic_voice": {"arms": ["matched"], "matched_pool": ["flite:slt", "espeak-ng:en-us+m3"]}}, "r.yaml"
    )
    assert cfg.synthetic_voice is not None and cfg.synthetic_voice.matched_pool == ("flite:slt", "espeak-ng:en-us+m3")
    bad = {
        "arms": (["generic", "cloned"], r"synthetic_voice.arms: \['cloned'\]"),
        "matched_pool": (["slt"], r"matched_pool\[0\]: 'slt' is not 'engine:voice'"),
        "match_encoder": ("ecapa", "match_encoder: .*speaker-verification backend"),
        "exclude_source_voice": ("yes", "exclude_source_voice: expected a boolean"),
        "match_clips_per_speaker": (0, "match_clips_per_speaker: 0 is out of range; it must be >= 1"),
    }
    for key, (value, msg) in bad.items():
        with pytest.raises(ConfigError, match=msg):
            parse_probe_config({**base, "synthetic_voice": {key: value}}, "r.yaml")
    with pytest.raises(ConfigError, match="TTS backend"):
        parse_probe_config({**base, "synthetic_voice": {"matched_pool": ["festival:kal"]}}, "r.yaml")
    with pytest.raises(ConfigError, match="listed twice"):
        parse_probe_config({**base, "synthetic_voice": {"matched_pool": ["flite:slt", "flite:slt"]}}, "r.yaml")
    with pytest.raises(ConfigError, match="matched_pool is empty"):
        parse_probe_config({**base, "synthetic_voice": {"matched_pool": []}}, "r.yaml")


def test_the_closest_voice_is_chosen_and_the_source_voice_excluded() -> None:
    from audits.probes.voice_match import choose_voices

    pool = {"flite:slt": np.array([1.0, 0.0, 0.0]), "flite:awb": np.array([0.0, 1.0, 0.0]), "kokoro:jm_kumo": np.array([0.6, 0.8, 0.0])}
    speakers = {"ann": np.array([0.9, 0.1, 0.1]), "bob": np.array([0.1, 0.9, 0.2])}
    got = choose_voices(speakers, pool, {"ann": 3, "bob": 2})
    assert got["ann"].voice == "flite:slt" and got["bob"].voice == "flite:awb"
    assert got["ann"].runner_up == "kokoro:jm_kumo" and got["ann"].similarity > got["ann"].runner_up_similarity  # type: ignore[operator]
    assert got["ann"].n_clips == 3
    cos = float(np.dot(speakers["ann"], pool["flite:slt"]) / np.linalg.norm(speakers["ann"]))
    assert got["ann"].similarity == pytest.approx(cos)
    got = choose_voices(speakers, pool, exclude={"ann": {"flite:slt"}})
    assert got["ann"].voice == "kokoro:jm_kumo"


def test_speakers_are_matched_to_their_own_voices_by_embedding() -> None:
    """Real TTS and the resemblyzer encoder: clips of two flite voices pick those voices from a pool."""
    pytest.importorskip("resemblyzer")
    from audits.probes.voice_match import VoiceBank, choose_voices, speaker_embeddings, voice_embeddings
    from engine.backends import SV_BACKENDS

    bank = VoiceBank()
    pool = ["flite:slt", "flite:awb", "espeak-ng:en-us+m3", "espeak-ng:en-us+f2"]
    texts = [
        "Please call Stella and ask her to bring these things with her from the store.",
        "Six spoons of fresh snow peas, five thick slabs of blue cheese, and maybe a snack.",
    ]
    clips = {spk: [bank.render(spk, t) for t in texts] for spk in ("flite:slt", "flite:awb")}
    encoder = SV_BACKENDS.get("resemblyzer")(num_threads=1)  # torch threads oversubscribe a shared CPU
    encoder.load()
    pool_emb, notes = voice_embeddings(bank, pool, encoder)
    assert not notes and set(pool_emb) == set(pool)
    spk_emb, counts = speaker_embeddings(clips, encoder)
    assert counts == {"flite:slt": 2, "flite:awb": 2}
    got = choose_voices(spk_emb, pool_emb, counts)
    assert {s: m.voice for s, m in got.items()} == {"flite:slt": "flite:slt", "flite:awb": "flite:awb"}
    assert all(m.similarity > 0.8 and m.similarity > (m.runner_up_similarity or 0) for m in got.values())
    excluded = choose_voices(spk_emb, pool_emb, counts, {s: {s} for s in spk_emb})
    assert all(m.voice != s for s, m in excluded.items())


# ------------------------------------------------------------------ work folders (engine unit contract)


def _loads(trace: Path) -> int:
    return sum(1 for p in trace.glob("*.jsonl") for line in p.read_text().splitlines() if '"load"' in line)


def test_probe_work_folders_are_keyed_by_settings_and_resume_exactly(tmp_path: Path) -> None:
    """Changed probe settings never reuse another configuration's derived results; the same settings
    resume without recomputing; going back to old settings finds their work intact."""
    from audits.probes.engine_io import fresh_workspace, run_models
    from engine.data import ModelSpec
    from engine.datasets import open_dataset
    from engine.keyed.unit_store import WORKSPACE_MARKER
    from tests.reliability_env import noise, write_dataset

    data = write_dataset(tmp_path / "asr", [{"audio": noise(1.0, i), "text": "a b c"} for i in range(3)])
    ds = open_dataset(data, shard_size=100)
    trace = tmp_path / "trace"
    trace.mkdir()
    spec = ModelSpec("sim", "simulated", {"rtfx": 1000, "trace_dir": str(trace)}, 4)
    probes = tmp_path / "probes"
    a = {"settings": {"variants": ["silence"]}, "dataset": ds.fingerprint}
    b = {"settings": {"variants": ["noise"]}, "dataset": ds.fingerprint}

    root_a = fresh_workspace(probes, "masking", a)
    rows_a, _ = run_models(ds, [spec], root_a, None)
    assert _loads(trace) == 1 and len(rows_a) == 3
    marker = json.loads((root_a / WORKSPACE_MARKER).read_text())
    assert marker["settings"] == a and root_a.name == marker["settings_digest"]

    # the same settings: the same folder, nothing recomputed (the runs' unit markers vouch for the rows)
    assert fresh_workspace(probes, "masking", dict(a)) == root_a
    rows_again, _ = run_models(ds, [spec], root_a, None)
    assert _loads(trace) == 1 and rows_again.equals(rows_a)

    # other settings: another folder, computed afresh; the first configuration's work is kept
    root_b = fresh_workspace(probes, "masking", b)
    assert root_b != root_a and not (root_b / "markers").exists()
    run_models(ds, [spec], root_b, None)
    assert _loads(trace) == 2 and (root_a / "markers").is_dir()
    assert fresh_workspace(probes, "masking", a) == root_a and (root_a / "markers").is_dir()

    # a folder whose marker does not vouch for it (damaged, or of another configuration) is started afresh
    (root_a / WORKSPACE_MARKER).write_text(json.dumps({"v": 1, "name": "masking", "settings_digest": "0" * 16}))
    assert fresh_workspace(probes, "masking", a) == root_a and not (root_a / "markers").exists()
    # names go through the engine's safe names: probe names that escape alike never share a folder
    assert fresh_workspace(probes, "a/b", a).parent != fresh_workspace(probes, "a_b", a).parent


def test_the_probes_have_no_stamp_of_their_own() -> None:
    """The old per-probe ``probe.json`` fingerprint is gone: work folders are the engine's keyed workspaces."""
    import audits.probes.engine_io as engine_io

    root = Path(engine_io.__file__).parent
    assert not hasattr(engine_io, "fresh_dir") and not hasattr(engine_io, "fingerprint")
    assert not [p.name for p in root.glob("*.py") if "probe.json" in p.read_text() or "fresh_dir" in p.read_text()]


# ------------------------------------------------------------------ end to end on a demo slice

N_CLIPS = 10


@pytest.fixture(scope="module")
def e2e(demo_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from audits.probes.run import _run_models
    from engine.audio.shards import write_shards
    from engine.data import ModelSpec
    from engine.datasets import open_dataset
    from engine.model_registry import load_model_registry, resolve_models
    from tests.test_memorizer import demo_utterances

    root = tmp_path_factory.mktemp("probes")
    utts = demo_utterances(demo_corpus, N_CLIPS)
    write_shards([replace(u, audio_path=None) for u in utts], root / "slice", shard_size=64)
    ds = open_dataset(root / "slice", "parquet")
    ds.name = "demo"
    specs = []
    for e in resolve_models(["whisper-tiny.en", "memorizer"], load_model_registry()):
        s = e.spec()
        if s.backend == "memorizer":  # what audits.pipeline.model_specs does: memorize the run's dataset
            s = ModelSpec(s.name, s.backend, {**s.options, "index": ds.source, "index_reader": "parquet"}, s.batch_size, s.meta)
        else:  # greedy decoding, as the thresholds below were set: on 10 clips, temperature fallback moves
            # whisper-tiny.en's orthography rate to 1.0 (too few clips for the probe to separate an honest model)
            s = ModelSpec(s.name, s.backend, {**s.options, "temperature": 0}, s.batch_size, s.meta)
        specs.append(s)
    out = root / "run"
    base, _ = _run_models(ds, specs, out, None)
    cfg = parse_probe_config(
        {
            "masking": {"variants": ["silence", "noise"]},
            "orthography": {"min_clips_per_arm": 2, "pool": True},
            "bad_reference": {
                "panel": ["whisper-tiny.en", "whisper-base"],
                "min_eligible_panel": 2,
                "reference_errors": {"fraction": 0.8, "datasets": ["demo"]},
            },
            "synthetic_voice": {"voice": "en-gb-x-gbcwmd", "n_boot": 200, "match_encoder_options": {"num_threads": 1}},
        },
        "test",
    )
    return {"probes": run_probes(cfg, ds, specs, out, base), "out": out}


@pytest.mark.slow
def test_masking_flags_the_memorizer_not_whisper(e2e: dict[str, Any]) -> None:
    m = e2e["probes"]["masking"]
    mem, tiny = m["memorizer"], m["whisper-tiny.en"]
    assert mem["n_gated"] >= 8 and mem["rate"] >= 0.9
    # noise at speech level over a long target (a year, "$500 million") can spoil a third of a short
    # clip's frames, past what the median-cosine fingerprint tolerates; most noise-masked clips match
    assert mem["by_variant"]["noise"]["rate"] >= 0.7
    assert tiny["n_gated"] >= 3 and tiny["rate"] < mem["ci95"][0]
    assert tiny["rate"] <= 0.34
    assert m["n_derived"] >= 2 * 8 and m["timing_method"] in ("ctc-forced", "whisper-word-timestamps")
    # resumable engine store, in the folder keyed by the probe's settings (engine.keyed.unit_store.keyed_workspace)
    (work,) = [p.parent for p in (e2e["out"] / "probes" / "masking").glob("*/workspace.json")]
    assert (work / "markers").is_dir()


@pytest.mark.slow
def test_orthography_flags_the_memorizer_not_whisper(e2e: dict[str, Any]) -> None:
    o = e2e["probes"]["orthography"]
    assert o["memorizer"]["rate"] == 1.0 and o["memorizer"]["n"] >= 5
    assert o["whisper-tiny.en"]["rate"] is not None and o["whisper-tiny.en"]["rate"] < 0.9


@pytest.mark.slow
def test_bad_reference_flags_the_memorizer_not_whisper(e2e: dict[str, Any]) -> None:
    b = e2e["probes"]["bad_reference"]
    # a planted error is found where both panel members are eligible (whisper-tiny.en fails on many hard demo clips)
    assert b["planted"]["n_planted"] == 8 and b["planted"]["n_planted_found"] >= 2
    assert b["planted"]["n_spans_on_unplanted_clips"] == 0
    assert b["memorizer"]["rate"] >= 0.9 and b["memorizer"]["n_eligible"] >= 2
    assert b["whisper-tiny.en"]["rate"] <= 0.2
    assert b["panel_overlap"] == ["whisper-tiny.en"]


@pytest.mark.slow
def test_synthetic_voice_flags_the_memorizer_not_whisper(e2e: dict[str, Any]) -> None:
    s = e2e["probes"]["synthetic_voice"]
    assert s["memorizer"]["rate"] >= 0.6 and s["memorizer"]["n_pairs"] >= 4 and s["memorizer"]["ci95"][0] > 0
    assert abs(s["whisper-tiny.en"]["rate"]) <= 0.2
    assert s["tts"]["engine"] == "espeak-ng" and s["arms"] == ["generic", "matched"]
    # the matched arm: a voice close to each original speaker, never the voice that made the clip
    mem, tiny = s["memorizer"]["arms"]["matched"], s["whisper-tiny.en"]["arms"]["matched"]
    assert mem["rate"] >= 0.6 and mem["n_pairs"] >= 4 and mem["ci95"][0] > 0
    # whisper-tiny.en sometimes adds "Thank you." or guesses a masked number on a clean rendition: near 0, not exactly 0
    assert tiny["ci95"][0] <= 0.0 <= tiny["ci95"][1] and abs(tiny["rate"]) <= 0.34 and tiny["ci95"][1] < mem["ci95"][0]
    matched = s["matched"]
    assert matched["n_speakers"] >= 2 and sum(matched["chosen"].values()) == matched["n_speakers"]
    assert 0.5 < matched["similarity"]["mean"] <= 1.0
    import json
    from pathlib import Path

    rows = json.loads(Path(matched["file"]).read_text())
    assert all(r["voice"] not in r["excluded_source_voices"] for r in rows)
    assert s["n_matched_clips"] >= 4
