"""Audio-LM judges (Gemini generateContent, OpenAI chat completions with audio) against local fakes:
request shapes, strict parsing with unparseable answers counted, the cache, and prompt-file errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.backends import JUDGE_BACKENDS
from engine.backends.hosted.judges import AudioJudge, JudgeTask, load_prompts, parse_answer
from engine.errors import ConfigError, HostedAuthError
from tests.fake_vendors import FakeVendor

KEY = "judge-key-987"
ENV = {"gemini": "GEMINI_API_KEY", "openai": "OPENAI_API_KEY"}
BACKEND = {"gemini": "gemini", "openai": "openai-audio"}
MODEL = {"gemini": "gemini-2.5-flash", "openai": "gpt-audio"}


def tone(freq: float, seconds: float = 0.5) -> np.ndarray:
    t = np.arange(int(16000 * seconds)) / 16000
    return (0.2 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


@pytest.fixture(params=["gemini", "openai"])
def fake(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeVendor]:
    f = FakeVendor(request.param, KEY)
    monkeypatch.setenv(ENV[request.param], KEY)
    yield f
    f.close()


def judge(fake: FakeVendor, tmp_path: Path, **extra: Any) -> AudioJudge:
    j: AudioJudge = JUDGE_BACKENDS.get(BACKEND[fake.vendor])(
        model=MODEL[fake.vendor], base_url=fake.base_url, cache_dir=str(tmp_path / "cache"), backoff_s=0.01, **extra
    )
    j.load()
    return j


def test_four_tasks_and_strict_parsing(fake: FakeVendor, tmp_path: Path) -> None:
    fake.replies = [
        '{"label": "Happy"}',  # canonical choice, case-insensitive
        "The speaker sounds happy.",  # prose: unparseable, never guessed
        '```json\n{"answer": "A"}\n```',  # a code fence is tolerated
        '{"answer": "different"}',
        '{"probability": 0.8}',
        '{"probability": 1.7}',  # out of range: unparseable
    ]
    j = judge(fake, tmp_path)
    labels = ["neutral", "happy", "sad", "angry"]
    a = j.emotion_label(tone(200), labels)
    assert a.parsed and a.value == "happy"
    b = j.emotion_label(tone(210), labels)
    assert not b.parsed and b.value is None and b.raw == "The speaker sounds happy."
    assert j.emotion_compare(tone(200), tone(300), "aroused").value == "A"
    assert j.same_speaker(tone(200), tone(300)).value == "different"
    assert j.synthetic_likelihood(tone(400)).value == pytest.approx(0.8)
    assert not j.synthetic_likelihood(tone(410)).parsed
    assert fake.audio_parts == [1, 1, 2, 2, 1, 1]
    u = j.usage()
    assert u["billable_calls"] == 6 and u["tasks"]["emotion_label"] == {"n": 2, "unparseable": 1, "unparseable_rate": 0.5}
    assert u["tasks"]["synthetic_speech"]["unparseable"] == 1 and u["input_tokens"] > 0
    assert KEY not in str(j.info().as_dict())


def test_repeated_judging_is_served_from_the_cache(fake: FakeVendor, tmp_path: Path) -> None:
    fake.replies = ['{"answer": "same"}']
    assert judge(fake, tmp_path).same_speaker(tone(200), tone(200)).value == "same"
    again = judge(fake, tmp_path)
    ans = again.same_speaker(tone(200), tone(200))
    assert ans.cached and ans.value == "same" and fake.billable == 1 and again.usage()["cache_hits"] == 1
    again.same_speaker(tone(300), tone(200))  # other audio: a new call
    assert fake.billable == 2


def test_bad_key_and_bad_calls(fake: FakeVendor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    j = judge(fake, tmp_path)
    with pytest.raises(ConfigError, match="takes 2 clip"):
        j.judge("same_speaker", [tone(200)])
    with pytest.raises(ConfigError, match="unknown judge task"):
        j.judge("gender", [tone(200)])
    monkeypatch.setenv(ENV[fake.vendor], "wrong")
    with pytest.raises(HostedAuthError, match=ENV[fake.vendor]):
        j.synthetic_likelihood(tone(500))


def test_parse_answer_rules() -> None:
    t = JudgeTask("x", "p", "answer", "choice", ("same", "different"))
    assert parse_answer(t, ' {"answer": " SAME "} ') == "same"
    for bad in ('{"answer": "maybe"}', '{"verdict": "same"}', '["same"]', "same", '{"answer": 1}', ""):
        assert parse_answer(t, bad) is None, bad
    p = JudgeTask("y", "p", "probability", "probability")
    assert parse_answer(p, '{"probability": 0}') == 0.0
    for bad in ('{"probability": true}', '{"probability": "0.5"}', '{"probability": -0.1}'):
        assert parse_answer(p, bad) is None, bad


def test_prompt_file_errors_name_the_key(tmp_path: Path) -> None:
    path = tmp_path / "prompts.yaml"
    path.write_text("tasks:\n  t:\n    prompt: hi\n    answer: {key: a, type: number}\n")
    with pytest.raises(ConfigError, match=r"tasks\.t\.answer\.type"):
        load_prompts(path)
    path.write_text("tasks:\n  t:\n    promt: hi\n    answer: {key: a, type: choice}\n")
    with pytest.raises(ConfigError, match="did you mean 'prompt'"):
        load_prompts(path)


def test_judge_as_emotion_backend_in_the_emotion_audit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The emotion audit runs the Gemini judge unchanged: parsed labels are scored, the unparseable
    reply is a failed clip with its reason, and nothing is guessed."""
    import json

    import soundfile as sf

    from audits.pipeline import run_recipe
    from audits.recipes import parse_recipe

    fake = FakeVendor("gemini", KEY)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.setenv("AUDIT_CACHE", str(tmp_path / "cache"))
    try:
        truth = ["happy", "sad", "happy", "sad"]
        replies = ['{"label": "happy"}', '{"label": "sad"}', '{"label": "sad"}', "Sadness, I would say."]
        lines = []
        for i, (lab, reply) in enumerate(zip(truth, replies)):
            n = 16000 + 1600 * i  # distinct lengths: the fake picks its reply by WAV size
            sf.write(tmp_path / f"c{i}.wav", tone(200 + 50 * i, n / 16000), 16000, subtype="PCM_16")
            fake.reply_by_size[44 + 2 * n] = reply
            lines.append(
                json.dumps({"utt_id": f"c{i}", "audio_filepath": str(tmp_path / f"c{i}.wav"), "text": "x", "speaker": "s", "emotion": lab})
            )
        (tmp_path / "m.jsonl").write_text("\n".join(lines) + "\n")
        opts = {"model": "gemini-2.5-flash", "base_url": fake.base_url, "backoff_s": 0.01, "labels": ["happy", "sad"]}
        recipe = parse_recipe(
            {
                "name": "judge",
                "dataset": {"path": str(tmp_path / "m.jsonl")},
                "models": [],
                "scoring": {"n_boot": 10},
                "emotion": {
                    "backends": ["gemini-judge"],
                    "label": "emotion",
                    "warmup": 0,
                    "pairs": "none",
                    "backend_options": {"gemini-judge": opts},
                },
            },
            "judge.yaml",
        )
        summary = run_recipe(recipe, tmp_path / "run")
        entry = summary["emotion"]["gemini-judge"]
        assert entry["n_failed_clips"] == 1 and "unparseable judge answer" in json.dumps(entry["failed_clips"])
        assert fake.billable == 4
        usage = entry["facts"]["info"]["usage"]
        assert usage["billable_calls"] == 4 and usage["tasks"]["emotion_label"]["unparseable"] == 1
        assert entry["n_scored"] == 3 and entry["wa"] == pytest.approx(2 / 3)  # c2 judged wrongly; c3 not scored
        assert KEY not in json.dumps(summary)
    finally:
        fake.close()
