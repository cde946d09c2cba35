"""Audio-LM judges wired into the audits, against the local fake Gemini and OpenAI servers: same/different speaker
in the speaker audit (scored on its trials beside the embedding backend), relative emotion on the
emotion audit's rendition pairs, synthetic-speech likelihood per arm of the synthetic-voice probe.
The fake judge answers from what it hears (it knows which clip each WAV is), with planted wrong
and unparseable answers; every figure is checked against counts made here from the per-item rows."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from audits.schema import CompareFigures, JudgeFigures, SeparationFigures
from engine.backends import SER_BACKENDS, SV_BACKENDS
from engine.backends.base import BackendInfo, EmotionOutput, SERBackend, SVBackend
from engine.backends.hosted.base import wav_bytes
from engine.data import SAMPLE_RATE
from engine.datasets import Dataset, open_dataset
from engine.errors import ConfigError
from tests.fake_vendors import FakeVendor

KEY = "judge-audit-key-31"
FREQ = {"s0": 150.0, "s1": 250.0, "s2": 350.0}
LEVEL = {"neutral": (0.1, 0), "positive-high-arousal": (0.4, 1), "negative-low-arousal": (0.03, -1)}


class _SpectrumSV(SVBackend):
    """Speaker embedding = normalised magnitude spectrum in 64 bands (tones: one voice per pitch)."""

    name = "test-spectrum-sv"

    def load(self) -> None:
        pass  # computed from the signal: no weights to load

    def info(self) -> BackendInfo:
        return BackendInfo(self.name, "spectrum-64")

    def embed_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> np.ndarray:
        out = []
        for a in audios:
            mag = np.abs(np.fft.rfft(np.asarray(a, float), n=8192))[:1024]
            e = mag.reshape(64, 16).sum(axis=1)
            out.append(e / (np.linalg.norm(e) + 1e-12))
        return np.asarray(out, dtype=np.float32)


class _LoudSER(SERBackend):
    name = "test-loud-ser"

    def load(self) -> None:
        pass  # computed from the signal: no weights to load

    def info(self) -> BackendInfo:
        return BackendInfo(self.name, "rms")

    def predict_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[EmotionOutput]:
        return [EmotionOutput(dimensions={"arousal": 10 * math.log10(float(np.mean(np.asarray(a, float) ** 2)) + 1e-12)}) for a in audios]


for _reg, _cls in ((SV_BACKENDS, _SpectrumSV), (SER_BACKENDS, _LoudSER)):
    if _cls.name not in _reg:
        _reg.register(_cls.name)(_cls)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Dataset, dict[str, dict[str, str]]]:
    """18 tone clips: 3 'speakers' (pitches) x 2 texts x 3 deliveries; emotional ones derive from the neutral one."""
    root = tmp_path_factory.mktemp("judge-corpus")
    rows, info = [], {}
    for spk, f in FREQ.items():
        for k in range(2):
            for label, (amp, _) in LEVEL.items():
                uid = f"{spk}-{k}-{label}"
                t = np.arange(int(SAMPLE_RATE * (0.6 + 0.1 * k))) / SAMPLE_RATE
                sf.write(root / f"{uid}.wav", amp * np.sin(2 * np.pi * f * t), SAMPLE_RATE, subtype="PCM_16")
                row = {"utt_id": uid, "audio_filepath": f"{uid}.wav", "text": f"sentence {k}", "speaker": spk, "emotion": label}
                if label != "neutral":  # derived audio of the dataset: parent_id with its derivation record
                    row["parent_id"] = f"{spk}-{k}-neutral"
                    row["derivation"] = {"amplitude": amp}
                rows.append(row)
                info[uid] = {"speaker": spk, "emotion": label}
    (root / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return open_dataset(root / "manifest.jsonl", shard_size=8), info


def _digests(ds: Dataset) -> dict[str, str]:
    """SHA-256 of the WAV bytes a judge sends for each clip -> utt_id (how the fake 'recognises' clips)."""
    from engine.audio.decoding import decode

    out = {}
    for sid in ds.shard_ids:
        for u in ds.load_shard(sid).utterances:
            d = decode(u, root=ds.root)
            out[hashlib.sha256(wav_bytes(d.samples)).hexdigest()] = u.utt_id
    return out


JUDGE = {"gemini": ("gemini", "gemini-2.5-flash", "GEMINI_API_KEY"), "openai": ("openai-audio", "gpt-audio", "OPENAI_API_KEY")}


@pytest.fixture(params=["gemini", "openai"])
def judge_fake(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeVendor]:
    """A local fake judge vendor (Gemini generateContent or OpenAI chat completions), key set."""
    f = FakeVendor(request.param, KEY)
    monkeypatch.setenv(JUDGE[request.param][2], KEY)
    yield f
    f.close()


def judges_block(fake: FakeVendor, tmp_path: Path, **extra: Any) -> dict[str, Any]:
    backend, model, _ = JUDGE[fake.vendor]
    opts = {"model": model, "base_url": fake.base_url, "backoff_s": 0.01, "cache_dir": str(tmp_path / "cache")}
    return {"backends": [backend], "backend_options": {backend: opts}, **extra}


def judge_name(fake: FakeVendor) -> str:
    return JUDGE[fake.vendor][0]


def test_same_speaker_judge_scored_on_the_speaker_audits_trials(corpus: Any, judge_fake: FakeVendor, tmp_path: Path) -> None:
    from audits.speaker.report import render_speaker, speaker_lines
    from audits.speaker.run import parse_speaker_config, run_speaker_audit

    ds, info = corpus
    who = _digests(ds)

    def reply(prompt: str, clips: list[bytes]) -> str:
        assert "same person" in prompt and len(clips) == 2
        a, b = (info[who[hashlib.sha256(c).hexdigest()]]["speaker"] for c in clips)
        if a == b == "s2":
            return "Yes, I believe it is the same voice."  # prose: unparseable
        if {a, b} == {"s0", "s1"}:
            return '{"answer": "same"}'  # a planted false accept
        return json.dumps({"answer": "same" if a == b else "different"})

    judge_fake.reply_fn = reply
    cfg = parse_speaker_config(
        {
            "backends": ["test-spectrum-sv"],
            "max_per_class": None,
            "warmup": 0,
            "judges": judges_block(judge_fake, tmp_path, max_items=40, seed=3),
        },
        "test",
    )
    typed = run_speaker_audit(cfg, ds, tmp_path / "run")
    result = typed.to_json()
    j = result["judges"][judge_name(judge_fake)]
    rows = [json.loads(line) for line in Path(j["rows_path"]).read_text().splitlines()]
    assert j["n_items"] == len(rows) == 40 == judge_fake.billable
    assert sum(r["label"] for r in rows) == 20  # balanced over target / non-target
    spk = {r["enroll"]: info[r["enroll"]]["speaker"] for r in rows} | {r["test"]: info[r["test"]]["speaker"] for r in rows}
    unparseable = [r for r in rows if spk[r["enroll"]] == spk[r["test"]] == "s2"]
    fa = [r for r in rows if {spk[r["enroll"]], spk[r["test"]]} == {"s0", "s1"}]
    answered = len(rows) - len(unparseable)
    n_non = sum(1 for r in rows if r["label"] == 0)
    assert unparseable and fa
    assert j["n_unparseable"] == len(unparseable) and all(r["status"] == "unparseable" and r["answer"] is None for r in unparseable)
    assert j["n_trials"] == answered and j["n_nontarget"] == n_non
    assert j["accuracy"] == pytest.approx((answered - len(fa)) / answered)
    assert j["false_accept_rate"] == pytest.approx(len(fa) / n_non) and j["false_reject_rate"] == 0.0
    same = j["on_judged_trials"]["test-spectrum-sv"]
    assert same["n_trials"] == answered and same["accuracy"] is not None
    assert j["usage"]["billable_calls"] == 40 and j["usage"]["tasks"]["same_speaker"]["unparseable"] == len(unparseable)
    assert KEY not in json.dumps(result)
    md = "\n".join(speaker_lines(typed, "Speaker verification"))
    assert "Audio-LM judges" in md and "false accept" in md and "| judges |" not in md
    assert f"data-judge='{judge_name(judge_fake)}'" in render_speaker(typed)

    assert set(j) <= set(JudgeFigures.__annotations__), set(j) - set(JudgeFigures.__annotations__)
    assert typed.judges is not None and typed.judges[judge_name(judge_fake)].on_judged_trials is not None
    assert typed.judges[judge_name(judge_fake)].on_judged_trials["test-spectrum-sv"].threshold == typed.entry("test-spectrum-sv").threshold
    again = run_speaker_audit(cfg, ds, tmp_path / "run2")  # the response cache: nothing is bought twice
    assert again.judges is not None
    assert judge_fake.billable == 40 and again.judges[judge_name(judge_fake)].accuracy == j["accuracy"]


def test_relative_emotion_judge_on_rendition_pairs(corpus: Any, judge_fake: FakeVendor, tmp_path: Path) -> None:
    from audits.emotion.report import emotion_lines, render_emotion
    from audits.emotion.run import parse_emotion_config, run_emotion_audit

    ds, info = corpus
    who = _digests(ds)

    def reply(prompt: str, clips: list[bytes]) -> str:
        if "more positive" in prompt:
            return "B sounds happier to me."  # every valence answer is unparseable
        assert "more aroused" in prompt
        la, lb = (LEVEL[info[who[hashlib.sha256(c).hexdigest()]]["emotion"]][1] for c in clips)
        if {la, lb} == {0, -1}:
            return '{"answer": "same"}'  # planted: cannot hear neutral vs low arousal
        return json.dumps({"answer": "A" if la > lb else "B"})

    judge_fake.reply_fn = reply
    cfg = parse_emotion_config(
        {
            "backends": ["test-loud-ser"],
            "label": "emotion",
            "pairs": "parent",
            "warmup": 0,
            "judges": judges_block(judge_fake, tmp_path, dimensions=["aroused", "positive"]),
        },
        "test",
    )
    typed = run_emotion_audit(cfg, ds, tmp_path / "run")
    result = typed.to_json()
    j = result["judges"][judge_name(judge_fake)]
    assert typed.judges is not None and typed.judges[judge_name(judge_fake)].dimensions is not None
    assert typed.judges[judge_name(judge_fake)].dimensions["aroused"].n_same_answers == 6
    assert j["n_pairs_available"] == 12 and j["n_items"] == 24 == judge_fake.billable
    ar = j["dimensions"]["aroused"]
    assert (
        ar["n_scored"] == 12
        and ar["n_same_answers"] == 6
        and ar["accuracy"] == pytest.approx(0.5)
        and ar["accuracy_ordered"] == pytest.approx(0.5)
    )
    pos = j["dimensions"]["positive"]
    assert pos["n_unparseable"] == 12 and pos["accuracy"] is None and j["n_unparseable"] == 12
    rows = [json.loads(line) for line in Path(j["rows_path"]).read_text().splitlines()]
    flips = {(r["a"], r["b"]) for r in rows if r["dimension"] == "aroused" and r["label_a"] != "neutral"}
    assert 0 < len(flips) < 12  # the A/B order is drawn per pair, not always neutral first
    md = "\n".join(emotion_lines(typed, "Emotion"))
    assert "more aroused: accuracy 50.0%" in md and "### judges" not in md
    assert "data-task='emotion_compare'" in render_emotion(typed)
    assert set(j) <= set(JudgeFigures.__annotations__) and set(ar) <= set(CompareFigures.__annotations__)


def test_synthetic_speech_judge_per_arm(corpus: Any, judge_fake: FakeVendor, tmp_path: Path) -> None:
    from audits.judging import parse_judge_config
    from audits.probes.config import parse_probe_config
    from audits.probes.report import probe_lines, probes_data, render_probes
    from audits.probes.results import ProbesResult
    from audits.probes.synthetic_judge import judge_synthetic, real_and_rendered_arms
    from engine.audio.shards import encode_audio
    from engine.data import Utterance

    ds, _ = corpus
    originals = {u.utt_id: u for sid in ds.shard_ids for u in ds.load_shard(sid).utterances}
    real_ids = ["s0-0-neutral", "s1-0-neutral", "s2-1-neutral"]
    generic = []
    for i, uid in enumerate(real_ids):
        t = np.arange(SAMPLE_RATE) / SAMPLE_RATE
        x = (0.3 * np.sign(np.sin(2 * np.pi * (120 + 10 * i) * t))).astype(np.float32)  # a buzzy 'generic voice'
        generic.append(
            Utterance(
                f"{uid}~tts",
                "x",
                audio_bytes=encode_audio(x, SAMPLE_RATE, "FLAC"),
                duration_s=1.0,
                parent_id=uid,
                derivation={"probe": "synthetic_voice", "source": "masking"},
            )
        )
        generic.append(
            Utterance(
                f"{uid}~tts~masked",
                "x",
                audio_bytes=encode_audio(x * 0.5, SAMPLE_RATE, "FLAC"),
                duration_s=1.0,
                parent_id=uid,
                derivation={"probe": "synthetic_voice", "target_index": 0},
            )
        )
    clips = real_and_rendered_arms(generic, originals, ds.root, max_items=10)
    assert sorted((c.arm, c.clip_id) for c in clips) == sorted(
        [("real", u) for u in real_ids] + [("generic", f"{u}~tts") for u in real_ids]
    )
    from engine.audio.decoding import decode

    arm_of = {hashlib.sha256(wav_bytes(decode(c.utt, root=c.root).samples)).hexdigest(): c for c in clips}

    def reply(prompt: str, audio: list[bytes]) -> str:
        assert "speech synthesizer" in prompt
        c = arm_of[hashlib.sha256(audio[0]).hexdigest()]
        if c.clip_id == "s2-1-neutral":
            return '{"probability": "high"}'  # unparseable (not a number)
        return json.dumps({"probability": 0.9 if c.arm == "generic" else 0.2 if c.clip_id.startswith("s0") else 0.4})

    judge_fake.reply_fn = reply
    cfg = parse_judge_config(judges_block(judge_fake, tmp_path), "probes.synthetic_voice.judges")
    assert cfg is not None
    j = judge_synthetic(cfg, clips, tmp_path / "probe")[judge_name(judge_fake)]
    assert j["arms"]["real"] == {
        "n_clips": 3,
        "n_answered": 2,
        "n_unparseable": 1,
        "n_failed_requests": 0,
        "mean_likelihood": pytest.approx(0.3),
        "median_likelihood": pytest.approx(0.3),
    }
    assert j["arms"]["generic"]["mean_likelihood"] == pytest.approx(0.9) and j["n_unparseable"] == 1
    sep = j["separation"]["generic"]
    assert sep["auc"] == 1.0 and sep["n_real"] == 2 and sep["n_arm"] == 3 and sep["paired_higher_rate"] == 1.0 and sep["n_paired"] == 2
    assert set(j) <= set(JudgeFigures.__annotations__) and set(sep) <= set(SeparationFigures.__annotations__)
    probes = {"synthetic_voice": {"status": "ok", "judges": {judge_name(judge_fake): j}}}
    assert "AUC generic vs real 1.000" in "\n".join(probe_lines(ProbesResult.from_json(probes), "Probes"))
    assert "data-task='synthetic_speech'" in render_probes(probes_data(ProbesResult.from_json(probes), {}), {})
    pc = parse_probe_config({"masking": {}, "synthetic_voice": {"judges": judges_block(judge_fake, tmp_path, max_items=5)}}, "r.yaml")
    assert pc.synthetic_judges is not None and pc.synthetic_judges.max_items == 5


def test_judges_block_errors_name_the_key(tmp_path: Path) -> None:
    from audits.emotion.run import parse_emotion_config
    from audits.speaker.run import parse_speaker_config

    with pytest.raises(ConfigError, match=r"speaker\.judges\.backends: .*gemni"):
        parse_speaker_config({"backends": ["test-spectrum-sv"], "judges": {"backends": ["gemni"]}}, "r.yaml")
    with pytest.raises(ConfigError, match=r"judges\.backend_options\.gemini: gemini backend options: missing required option 'model'"):
        parse_speaker_config({"backends": ["test-spectrum-sv"], "judges": {"backends": ["gemini"]}}, "r.yaml")
    with pytest.raises(ConfigError, match=r"judges\.max_items"):
        parse_speaker_config(
            {
                "backends": ["test-spectrum-sv"],
                "judges": {"backends": ["gemini"], "max_items": 0, "backend_options": {"gemini": {"model": "m"}}},
            },
            "r.yaml",
        )
    with pytest.raises(ConfigError, match=r"emotion\.judges\.dimensions"):
        parse_emotion_config(
            {
                "backends": ["test-loud-ser"],
                "judges": {"backends": ["gemini"], "dimensions": ["angrier"], "backend_options": {"gemini": {"model": "m"}}},
            },
            "r.yaml",
        )
    with pytest.raises(ConfigError, match="did you mean 'max_items'"):
        parse_speaker_config({"backends": ["test-spectrum-sv"], "judges": {"backends": ["gemini"], "max_item": 3}}, "r.yaml")


def test_a_refused_key_stops_the_judge_and_is_reported(
    corpus: Any, judge_fake: FakeVendor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from audits.speaker.run import parse_speaker_config, run_speaker_audit

    ds, _ = corpus
    monkeypatch.setenv(JUDGE[judge_fake.vendor][2], "a-wrong-key")
    block = judges_block(judge_fake, tmp_path, max_items=10)
    block["backend_options"][judge_name(judge_fake)]["max_concurrency"] = 1  # one request in flight: the first 401 is the only call
    cfg = parse_speaker_config({"backends": ["test-spectrum-sv"], "max_per_class": None, "warmup": 0, "judges": block}, "test")
    j = run_speaker_audit(cfg, ds, tmp_path / "run").to_json()["judges"][judge_name(judge_fake)]
    assert j["status"] == "error" and JUDGE[judge_fake.vendor][2] in j["error"] and j["n_failed_requests"] == 10 and j["n_answered"] == 0
    assert len(judge_fake.requests) == 1  # the first 401 stops the rest without another request
    assert "a-wrong-key" not in json.dumps(j)
