"""Every kind of backend declares its options once (engine/options.py) and refuses the same bad values.

One parametrized table of refusals runs against a hosted vendor and a judge (each pointed at its
local fake server, tests/fake_vendors.py), two TTS engines, a speaker encoder and two emotion
backends: a quoted "false" for a boolean, a string for a number, NaN and infinities at any depth,
a value out of range and an unknown key (with its "did you mean"). Each refusal names the backend
and the key, says what is allowed, and happens when the backend is built: the fake server sees no
request. The response cache keys and the judges' answer settings are the ones recorded before
the options were declared, so existing caches and run directories keep matching.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.backends import ASR_BACKENDS, JUDGE_BACKENDS, SER_BACKENDS, SV_BACKENDS, TTS_BACKENDS
from engine.backends.hosted.cache import options_digest
from engine.errors import ConfigError
from tests.fake_vendors import KEY_ENV, FakeVendor, options_for

KEY = "sk-test-0123456789abcdef"
JUDGE_ENV = {"gemini": "GEMINI_API_KEY", "openai": "OPENAI_API_KEY"}

# (registry, backend, good options, bad key, bad value, what the message must say)
REFUSALS: list[tuple[str, str, dict[str, Any], str, Any, str]] = [
    # hosted ASR vendor (the fake server fills in model and base_url)
    ("hosted", "deepgram", {}, "smart_format", "false", r"expected a boolean \(true/false, unquoted\), got str 'false'"),
    ("hosted", "deepgram", {}, "cache", "false", r"expected a boolean"),
    ("hosted", "deepgram", {}, "timeout_s", "30", r"expected a number, got str '30'"),
    ("hosted", "deepgram", {}, "timeout_s", math.nan, r"expected a finite number"),
    ("hosted", "deepgram", {}, "price_per_audio_hour_usd", -math.inf, r"expected a finite number"),
    ("hosted", "deepgram", {}, "params", {"keywords": [1.0, math.nan]}, r"params\.keywords\[1\]: expected a finite number"),
    ("hosted", "deepgram", {}, "max_retries", 2.5, r"expected an integer"),
    ("hosted", "deepgram", {}, "max_concurrency", 0, r"out of range; it must be >= 1"),
    ("hosted", "deepgram", {}, "smart_fromat", True, r"unknown option 'smart_fromat' \(did you mean 'smart_format'\?\); allowed: "),
    # audio-LM judge
    ("judge", "gemini", {}, "cache", "false", r"expected a boolean"),
    ("judge", "gemini", {}, "temperature", "0.5", r"expected a number, got str '0.5'"),
    ("judge", "gemini", {}, "temperature", math.inf, r"expected a finite number"),
    ("judge", "gemini", {}, "temperature", 3, r"out of range; it must be >= 0 and <= 2"),
    ("judge", "gemini", {}, "temprature", 0.0, r"did you mean 'temperature'"),
    # TTS
    ("tts", "espeak-ng", {}, "pitch", "50", r"expected an integer, got str '50'"),
    ("tts", "espeak-ng", {}, "pitch", "false", r"expected an integer"),
    ("tts", "espeak-ng", {}, "rate", 500, r"out of range; it must be >= 80 and <= 450"),
    ("tts", "espeak-ng", {}, "sample_rate", math.nan, r"expected an integer"),
    ("tts", "flite", {}, "rate", math.nan, r"expected a finite number"),
    ("tts", "flite", {}, "amplitude", "2", r"expected a number, got str '2'"),
    ("tts", "flite", {}, "voise", "slt", r"did you mean 'voice'"),
    # speaker verification
    ("sv", "resemblyzer", {}, "trim_silence", "false", r"expected a boolean \(true/false, unquoted\), got str 'false'"),
    ("sv", "resemblyzer", {}, "min_speech_s", "0.5", r"expected a number, got str '0.5'"),
    ("sv", "resemblyzer", {}, "min_speech_s", math.inf, r"expected a finite number"),
    ("sv", "resemblyzer", {}, "num_threads", 0, r"out of range; it must be >= 1"),
    ("sv", "resemblyzer", {}, "trim_silenc", True, r"did you mean 'trim_silence'"),
    ("sv", "speechbrain-ecapa", {}, "min_duration_s", math.nan, r"expected a finite number"),
    # speech emotion
    ("ser", "prosody", {}, "min_duration_s", "0.1", r"expected a number, got str '0.1'"),
    ("ser", "prosody", {}, "reference", {"rms_db": [-26.0, math.nan]}, r"reference\.rms_db\[1\]: expected a finite number"),
    ("ser", "prosody", {}, "reference", {"rms_db": ["-26", 6.0]}, r"reference\.rms_db\[0\] \(mean\): expected a number"),
    ("ser", "prosody", {}, "reference", {"rms_db": [-26.0, 0.0]}, r"reference\.rms_db\[1\] \(sd\): 0.0 is out of range"),
    ("ser", "prosody", {}, "min_duration", 0.1, r"did you mean 'min_duration_s'"),
    ("ser", "emotion2vec", {}, "hub", "false", r"'false' is not allowed.*; use one of hf, ms"),
    ("ser", "gemini-judge", {"model": "m", "labels": ["calm", "angry"]}, "labels", ["calm"], r"at least two non-empty emotion labels"),
    ("ser", "gemini-judge", {"model": "m", "labels": ["calm", "angry"]}, "cache", "false", r"expected a boolean"),
]
REGISTRIES = {"hosted": ASR_BACKENDS, "judge": JUDGE_BACKENDS, "tts": TTS_BACKENDS, "sv": SV_BACKENDS, "ser": SER_BACKENDS}


@pytest.fixture()
def fakes(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, FakeVendor]]:
    """A fake Deepgram and a fake Gemini, each with its key in the environment."""
    out = {"hosted": FakeVendor("deepgram", KEY), "judge": FakeVendor("gemini", KEY)}
    monkeypatch.setenv(KEY_ENV["deepgram"], KEY)
    monkeypatch.setenv(JUDGE_ENV["gemini"], KEY)
    yield out
    for f in out.values():
        f.close()


def _good(kind: str, options: dict[str, Any], fakes: dict[str, FakeVendor], tmp_path: Path) -> dict[str, Any]:
    if kind == "hosted":
        return options_for(fakes["hosted"], cache_dir=str(tmp_path / "cache"), **options)
    if kind == "judge":
        fake = fakes["judge"]
        return {"model": "gemini-2.5-flash", "base_url": fake.base_url, "backoff_s": 0.01, "cache_dir": str(tmp_path / "cache"), **options}
    return dict(options)


@pytest.mark.parametrize(("kind", "name", "options", "key", "value", "says"), REFUSALS, ids=lambda v: v if isinstance(v, str) else None)
def test_a_bad_option_is_refused_when_the_backend_is_built(
    kind: str, name: str, options: dict[str, Any], key: str, value: Any, says: str, fakes: dict[str, FakeVendor], tmp_path: Path
) -> None:
    cls = REGISTRIES[kind].get(name)
    good = _good(kind, options, fakes, tmp_path)
    cls(**good)  # the same options without the bad value build
    with pytest.raises(ConfigError) as caught:
        cls(**{**good, key: value})
    message = str(caught.value)
    assert message.startswith(f"{name} backend options"), message  # names the backend ...
    assert key in message, message  # ... and the key
    assert re.search(says, message), message  # ... and says what is allowed
    assert all(not f.requests for f in fakes.values())  # refused before any request


def test_the_declared_backends_still_run_against_their_fakes(fakes: dict[str, FakeVendor], tmp_path: Path) -> None:
    """The records reach the requests: the vendor gets the documented fields; the judge asks and parses."""
    deepgram = ASR_BACKENDS.get("deepgram")(
        **options_for(fakes["hosted"], cache_dir=str(tmp_path / "c"), smart_format=False, language="en")
    )
    deepgram.load()
    clip = (0.2 * np.sin(np.arange(8000) / 5.0)).astype(np.float32)
    assert deepgram.transcribe_batch([clip]) == ["hello world"]
    (req,) = [r for _, r in fakes["hosted"].seen]
    assert req.query["smart_format"] == ["false"] and req.query["language"] == ["en"] and not fakes["hosted"].violations
    fakes["judge"].replies = ['{"label": "Happy"}']
    judge = JUDGE_BACKENDS.get("gemini")(**_good("judge", {"temperature": 1}, fakes, tmp_path))
    judge.load()
    answer = judge.emotion_label(clip, ["neutral", "happy"])
    assert answer.parsed and answer.value == "happy" and fakes["judge"].billable == 1


# Digests of the options part of hosted response-cache keys, recorded before the backends declared
# their options: the same options must keep finding the same cached answers.
RECORDED_DIGESTS = [
    ("deepgram", {}, "ce335087617d552c9dea0adfe91f03fd"),
    ("deepgram", {"smart_format": False, "params": {"keywords": ["a", 1.5]}}, "38361ad25444fcdb990abe2c8cdb402f"),
    ("azure-fast", {"prompt": ["x", "y"], "region": "westeurope"}, "bbd3ac67e992e199f8ac89c172e592cb"),
    ("openai-compatible", {"batch_size": 3, "temperature": 0, "prompt": "hi", "api_key_env": ""}, "fc1013fc3ab05ec2678e5e7ace2e85c6"),
    ("google-stt-v2", {"project": "p", "location": "global", "auth": "bearer"}, "ade86cfa7efac652ae5a8e6bdecd298f"),
]


@pytest.mark.parametrize(("name", "options", "digest"), RECORDED_DIGESTS)
def test_response_cache_keys_are_the_recorded_ones(name: str, options: dict[str, Any], digest: str) -> None:
    backend = ASR_BACKENDS.get(name)(model="m-1", **options)
    assert options_digest(backend.request_options()) == digest


def test_numbers_reach_caches_and_answer_settings_as_written() -> None:
    """A temperature written 1 stays 1 (not 1.0) in a judge's answer settings; openai's batch_size still sets max_concurrency."""
    judge = JUDGE_BACKENDS.get("gemini")(model="g", temperature=1, base_url="http://127.0.0.1:1")
    opts = judge.answer_settings("emotion_label")["options"]
    assert opts == {"model": "g", "base_url": "http://127.0.0.1:1", "temperature": 1} and type(opts["temperature"]) is int
    openai = ASR_BACKENDS.get("openai-compatible")(model="m", batch_size=3)
    assert openai.options.max_concurrency == 3 and "batch_size" not in openai.request_options()
    assert ASR_BACKENDS.get("openai-compatible")(model="m", batch_size=3, max_concurrency=2).options.max_concurrency == 2


def test_every_builtin_backend_declares_its_options_and_has_its_table() -> None:
    """No built-in backend of any kind takes a plain dict of options any more; docs/options.md lists each one."""
    from engine.backends import DIAR_BACKENDS

    page = (Path(__file__).resolve().parents[1] / "docs" / "options.md").read_text(encoding="utf-8")
    kinds = (
        ("ASR", ASR_BACKENDS),
        ("Diarization", DIAR_BACKENDS),
        ("Speaker verification", SV_BACKENDS),
        ("Speech emotion", SER_BACKENDS),
        ("Text to speech", TTS_BACKENDS),
        ("Audio-LM judge", JUDGE_BACKENDS),
    )
    seen = 0
    for kind, registry in kinds:
        for entry in registry.entries():
            if not entry.target.startswith("engine."):
                continue
            cls: Any = registry.get(entry.name)
            assert cls.OPTIONS is not None, f"{kind} backend {entry.name} declares no options record"
            assert f"## {kind}: `{entry.name}`" in page, entry.name
            seen += 1
    assert seen >= 35
