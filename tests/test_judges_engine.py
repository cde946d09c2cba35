"""Audio-LM judges on the run's engine (keyed passes; audits/judging.ask_judges, engine/keyed/judge_worker.py),
against the local fake Gemini and OpenAI servers that follow the vendors' documented APIs.

* a second identical run asks nothing (requests counted at the fake server) and gives the same
  figures; a changed clip re-asks only the trials that play it; changed options re-ask every
  item; a changed prompt re-asks only the task whose prompt changed;
* a refused key (401) makes the judge ``error`` as before, and nothing is stored;
* the answers of an in-process run equal a Ray run's, and the facts name the runner.

Every run here turns the response cache off, so what is not asked again is the keyed store's doing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from engine.data import SAMPLE_RATE
from engine.datasets import Dataset, open_dataset
from tests.fake_vendors import FakeVendor

KEY = "judge-engine-key-77"
ENV = {"gemini": "GEMINI_API_KEY", "openai": "OPENAI_API_KEY"}
JUDGE = {"gemini": ("gemini", "gemini-2.5-flash"), "openai": ("openai-audio", "gpt-audio")}
FREQ = {"s0": 150.0, "s1": 250.0, "s2": 350.0}


def _tone(f: float, seconds: float, amp: float = 0.2) -> np.ndarray:
    t = np.arange(int(SAMPLE_RATE * seconds)) / SAMPLE_RATE
    return (amp * np.sin(2 * np.pi * f * t)).astype(np.float32)


def make_corpus(root: Path) -> Dataset:
    """9 tone clips, 3 'speakers' (pitches) x 3 lengths; lengths differ so the fake can tell clips apart by size."""
    root.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, (spk, f) in enumerate(FREQ.items()):
        for k in range(3):
            uid = f"{spk}-{k}"
            sf.write(root / f"{uid}.wav", _tone(f, 0.5 + 0.1 * k + 0.03 * i), SAMPLE_RATE, subtype="PCM_16")
            rows.append({"utt_id": uid, "audio_filepath": f"{uid}.wav", "text": f"sentence {k}", "speaker": spk})
    (root / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return open_dataset(root / "manifest.jsonl", shard_size=4)


def same_if_equal_pitch(prompt: str, clips: list[bytes]) -> str:
    """A judge that hears pitch: the dominant frequency of each WAV (equal pitch = same speaker)."""
    import io

    peaks = []
    for c in clips:
        x, sr = sf.read(io.BytesIO(c), dtype="float32")
        peaks.append(round(float(np.argmax(np.abs(np.fft.rfft(x)))) * sr / len(x) / 20))
    if "same person" in prompt:
        return json.dumps({"answer": "same" if peaks[0] == peaks[1] else "different"})
    return json.dumps({"probability": 0.9 if peaks[0] > 22 else 0.1})  # above 440 Hz: the "synthetic" voices


@pytest.fixture(params=["gemini", "openai"])
def fake(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeVendor]:
    f = FakeVendor(request.param, KEY)
    f.reply_fn = same_if_equal_pitch
    monkeypatch.setenv(ENV[request.param], KEY)
    yield f
    f.close()


def block(fake: FakeVendor, **options: Any) -> dict[str, Any]:
    name, model = JUDGE[fake.vendor]
    opts = {"model": model, "base_url": fake.base_url, "backoff_s": 0.01, "cache": False, **options}
    return {"backends": [name], "backend_options": {name: opts}, "max_items": 12, "seed": 1}


def speaker_run(ds: Dataset, fake: FakeVendor, out: Path, **options: Any) -> dict[str, Any]:
    from audits.speaker.run import parse_speaker_config, run_speaker_audit

    cfg = parse_speaker_config({"backends": ["simulated-sv"], "max_per_class": None, "warmup": 0, "judges": block(fake, **options)}, "test")
    return run_speaker_audit(cfg, ds, out).to_json()["judges"][JUDGE[fake.vendor][0]]


def _figures(entry: dict[str, Any]) -> dict[str, Any]:
    keys = ("n_items", "n_answered", "n_unparseable", "n_trials", "accuracy", "false_accept_rate", "false_reject_rate")
    return {k: entry[k] for k in keys}


def test_a_rerun_asks_only_what_is_missing_or_changed(fake: FakeVendor, tmp_path: Path) -> None:
    ds = make_corpus(tmp_path / "data")
    out = tmp_path / "run"
    first = speaker_run(ds, fake, out)
    n = first["n_items"]
    assert n == 12 == fake.billable and first["accuracy"] == 1.0 and first["status"] == "ok"
    assert first["facts"]["runner"] == "inprocess" and first["facts"]["answers_asked"] == 12 and first["facts"]["answers_reused"] == 0
    assert first["usage"]["billable_calls"] == 12
    stored = sorted((out / "speaker" / "judges" / "units" / "same_speaker").rglob("*.json"))
    assert len(stored) == 12 and all("value" in json.loads(p.read_text()) for p in stored)

    # the same command again: nothing is asked, the figures are the same
    again = speaker_run(ds, fake, out)
    assert fake.billable == 12 and _figures(again) == _figures(first)
    assert again["facts"]["answers_asked"] == 0 and again["facts"]["answers_reused"] == 12 and again["usage"]["billable_calls"] == 0
    rows = [json.loads(line) for line in Path(again["rows_path"]).read_text().splitlines()]
    assert len(rows) == 12

    # one clip's audio changes: only the trials that play it are asked again
    changed = "s1-2"
    sf.write(Path(ds.root or ".") / f"{changed}.wav", _tone(FREQ["s1"], 0.77, amp=0.3), SAMPLE_RATE, subtype="PCM_16")
    ds2 = open_dataset(Path(ds.source), shard_size=4)
    playing = sum(1 for r in rows if changed in (r["enroll"], r["test"]))
    assert 0 < playing < 12
    third = speaker_run(ds2, fake, out)
    assert fake.billable == 12 + playing and third["facts"]["answers_asked"] == playing and _figures(third) == _figures(first)

    # an option that changes answers (temperature) asks every item again; a transport option does not
    speaker_run(ds2, fake, out, max_retries=2, timeout_s=30.0)
    assert fake.billable == 12 + playing
    hot = speaker_run(ds2, fake, out, temperature=0.5)
    assert fake.billable == 24 + playing and hot["facts"]["answers_asked"] == 12


def test_a_changed_prompt_reasks_only_its_task(fake: FakeVendor, tmp_path: Path) -> None:
    """Editing one task's prompt in the prompt file re-asks that task's items; the other task's answers stay."""
    import yaml

    from audits.judging import JudgeItem, ask_judges, parse_judge_config
    from engine.backends.hosted.judges import default_prompts_path
    from engine.config import load_yaml

    ds = make_corpus(tmp_path / "data")
    utts = {u.utt_id: u for sid in ds.shard_ids for u in ds.load_shard(sid).utterances}
    prompts = load_yaml(default_prompts_path())
    path = tmp_path / "prompts.yaml"
    path.write_text(yaml.safe_dump(prompts))
    cfg = parse_judge_config(block(fake, prompts=str(path)), "test.judges")
    assert cfg is not None
    same = [JudgeItem(f"{a}|{b}", ((utts[a], ds.root), (utts[b], ds.root))) for a, b in (("s0-0", "s0-1"), ("s0-0", "s1-0"))]
    synth = [JudgeItem(u, ((utts[u], ds.root),)) for u in ("s0-0", "s2-2")]
    folder = tmp_path / "judges"

    def ask_both() -> tuple[list[Any], list[Any]]:
        a = ask_judges(cfg, folder, "same_speaker", same)[JUDGE[fake.vendor][0]].results
        b = ask_judges(cfg, folder, "synthetic_likelihood", synth)[JUDGE[fake.vendor][0]].results
        return a, b

    a1, b1 = ask_both()
    assert fake.billable == 4 and [r.value for r in a1] == ["same", "different"] and [r.value for r in b1] == [0.1, 0.1]
    prompts["tasks"]["synthetic_speech"]["prompt"] += " Answer carefully."
    path.write_text(yaml.safe_dump(prompts))
    a2, b2 = ask_both()
    assert fake.billable == 6 and [r.value for r in a2] == ["same", "different"] and [r.value for r in b2] == [0.1, 0.1]


def test_a_refused_key_is_an_error_and_stores_nothing(fake: FakeVendor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = make_corpus(tmp_path / "data")
    out = tmp_path / "run"
    monkeypatch.setenv(ENV[fake.vendor], "a-wrong-key-9")
    bad = speaker_run(ds, fake, out, max_concurrency=1)
    assert bad["status"] == "error" and ENV[fake.vendor] in bad["error"] and bad["n_failed_requests"] == 12 and bad["n_answered"] == 0
    assert len(fake.requests) == 1 and fake.billable == 0  # the first 401 stops the rest without another request
    assert "a-wrong-key-9" not in json.dumps(bad)
    judges = out / "speaker" / "judges"
    assert not list((judges / "units").rglob("*.json")) and not list((judges / "markers").rglob("*.json"))
    # with the right key, every item is asked: nothing wrong was kept
    monkeypatch.setenv(ENV[fake.vendor], KEY)
    good = speaker_run(ds, fake, out)
    assert good["status"] == "ok" and fake.billable == 12 and good["accuracy"] == 1.0
    # no key at all: the judge is unavailable, nothing is asked and the audit goes on
    monkeypatch.delenv(ENV[fake.vendor])
    gone = speaker_run(ds, fake, tmp_path / "run-nokey")
    assert gone["status"] == "unavailable" and ENV[fake.vendor] in gone["error"] and fake.billable == 12


@pytest.mark.slow
def test_judge_answers_are_the_same_in_process_and_on_ray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The synthetic-voice judge over real clips (paths) and renditions (bytes): the same answers and
    figures on both runners; the facts name the runner and, on Ray, the actor's host, pid and GPU ids."""
    import ray

    from audits.judging import parse_judge_config
    from audits.probes.synthetic_judge import judge_synthetic, real_and_rendered_arms
    from engine.audio.shards import encode_audio
    from engine.data import Utterance
    from engine.engine import EngineOptions
    from engine.run.ray_setup import init_ray

    f = FakeVendor("gemini", KEY)
    f.reply_fn = same_if_equal_pitch
    monkeypatch.setenv(ENV["gemini"], KEY)
    try:
        ds = make_corpus(tmp_path / "data")
        originals = {u.utt_id: u for sid in ds.shard_ids for u in ds.load_shard(sid).utterances}
        generic = [
            Utterance(
                f"{u}~tts",
                "x",
                audio_bytes=encode_audio(_tone(500.0 + 20 * i, 0.6), SAMPLE_RATE, "FLAC"),
                duration_s=0.6,
                parent_id=u,
                derivation={"probe": "synthetic_voice", "source": "masking"},
            )
            for i, u in enumerate(("s0-0", "s1-1", "s2-2"))
        ]
        clips = real_and_rendered_arms(generic, originals, ds.root, max_items=10)
        cfg = parse_judge_config(block(f), "probes.synthetic_voice.judges")
        assert cfg is not None
        local = judge_synthetic(cfg, clips, tmp_path / "local")["gemini"]
        assert f.billable == 6 and local["separation"]["generic"]["auc"] == 1.0
        started = init_ray(num_cpus=2, runtime_env={"env_vars": {ENV["gemini"]: KEY}})
        try:
            remote = judge_synthetic(cfg, clips, tmp_path / "ray", EngineOptions(kind="ray", workers=3))["gemini"]
        finally:
            if started:
                ray.shutdown()
        assert f.billable == 12
        strip = ("facts", "usage", "rows_path")
        assert {k: v for k, v in local.items() if k not in strip} == {k: v for k, v in remote.items() if k not in strip}
        rows = [Path(e["rows_path"]).read_text() for e in (local, remote)]
        assert rows[0] == rows[1]
        assert local["facts"]["runner"] == "inprocess" and local["facts"]["pid"] > 0 and "host" in local["facts"]
        assert remote["facts"]["runner"] == "ray" and remote["usage"]["billable_calls"] == 6
        assert len(remote["facts"]["actors"]) == 1  # one actor per judge whatever --workers: its request limits hold
        actor = remote["facts"]["actors"][0]
        assert actor["pid"] != local["facts"]["pid"] and {"host", "node_id", "gpu_ids"} <= set(actor)
    finally:
        f.close()
