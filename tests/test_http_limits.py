"""Client limits of the one HTTP client: a whole-request deadline, a cap on answer bodies, a
defensive Retry-After, clean errors for unusable redirects, and cache entries served only for the
request they answer. Fake vendors on 127.0.0.1; every wait is bounded.
"""

from __future__ import annotations

import json
import math
import shutil
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.backends import ASR_BACKENDS
from engine.backends.hosted.http import DEFAULT_MAX_RESPONSE_BYTES, ResponseTooLargeError, parse_retry_after
from engine.errors import ConfigError, HostedRequestError
from tests.fake_vendors import OPENAI_STT, FakeVendor, options_for

KEY = "sk-limits-0123456789abcdef"
CLIP = (0.1 * np.sin(np.arange(8000) / 3.0)).astype(np.float32)


@pytest.fixture()
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeVendor]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    f = FakeVendor(OPENAI_STT, KEY)
    yield f
    f.close()


def stt(fake: FakeVendor, tmp_path: Path, **extra: Any) -> Any:
    b = ASR_BACKENDS.get("openai-compatible")(**options_for(fake, cache_dir=str(tmp_path / "cache"), **extra))
    b.load()
    return b


# -- whole-request deadline --------------------------------------------------------------------------


def test_trickling_server_is_cut_at_the_deadline(fake: FakeVendor, tmp_path: Path) -> None:
    """A server sending a byte every 0.25 s never trips a per-read timeout; the 2 s deadline cuts it."""
    b = stt(fake, tmp_path, timeout_s=2.0, max_retries=0)
    fake.inject("trickle:30")
    t0 = time.perf_counter()
    with pytest.raises(HostedRequestError, match=r"timeout_s=2 s \(a whole-request deadline\)"):
        b.transcribe_batch([CLIP])
    elapsed = time.perf_counter() - t0
    assert 1.8 <= elapsed < 3.5, elapsed
    assert not list((tmp_path / "cache").rglob("*.json"))  # the partial answer was not kept


def test_deadline_then_retry_succeeds(fake: FakeVendor, tmp_path: Path) -> None:
    b = stt(fake, tmp_path, timeout_s=1.0, max_retries=1)
    fake.inject("trickle:10")
    t0 = time.perf_counter()
    assert b.transcribe_batch([CLIP]) == ["hello world"]
    assert time.perf_counter() - t0 < 3.0 and b.usage()["retries"] == 1


# -- answer size cap ---------------------------------------------------------------------------------


def test_declared_oversized_answer_is_refused_before_reading(fake: FakeVendor, tmp_path: Path) -> None:
    b = stt(fake, tmp_path, max_response_bytes=64 * 1024, max_retries=2)
    fake.inject("huge:50000000")
    t0 = time.perf_counter()
    with pytest.raises(ResponseTooLargeError, match=r"max_response_bytes \(65536 bytes\) \(Content-Length 50000000\)"):
        b.transcribe_batch([CLIP])
    assert time.perf_counter() - t0 < 2.0
    assert len(fake.requests) == 1  # not retried: the same request would get the same answer


def test_unsized_oversized_answer_is_dropped_while_streaming(fake: FakeVendor, tmp_path: Path) -> None:
    cap = 1 << 20
    b = stt(fake, tmp_path, max_response_bytes=cap, max_retries=0)
    fake.inject("huge-unsized:40000000")
    tracemalloc.start()
    try:
        with pytest.raises(ResponseTooLargeError, match="never|without reading it whole"):
            b.transcribe_batch([CLIP])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * cap, peak  # held at most about the cap, never the 40 MB answer


def test_size_cap_option_is_checked() -> None:
    cls = ASR_BACKENDS.get("openai-compatible")
    assert cls(model="m").options.max_response_bytes == DEFAULT_MAX_RESPONSE_BYTES == 64 * 1024 * 1024
    for bad in (0, 10, -1, 1.5e9, "64MiB", True):
        with pytest.raises(ConfigError, match="max_response_bytes"):
            cls(model="m", max_response_bytes=bad)
    for key in ("timeout_s", "max_backoff_s", "backoff_s"):
        for value in (math.nan, math.inf):
            with pytest.raises(ConfigError, match=key):
                cls(model="m", **{key: value})


# -- Retry-After --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,expected",
    [
        ("nan", None),
        ("NaN", None),
        ("-5", None),
        ("-inf", None),
        ("soon", None),
        ("", None),
        ("\x00", None),
        ("0x10", None),
        ("Mon, 99 Foo 2015 07:28:00 GMT", None),
        ("inf", 60.0),
        ("Infinity", 60.0),
        ("1e400", 60.0),
        ("1e308", 60.0),
        ("99999999999999999999", 60.0),
        ("Fri, 31 Dec 9999 23:59:59 GMT", 60.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
        ("Wed, 21 Oct 2015 07:28:00", 0.0),
        ("0", 0.0),
        (" 2 ", 2.0),
        ("1.5", 1.5),
    ],
)
def test_retry_after_is_bounded_and_finite(value: str, expected: float | None) -> None:
    got = parse_retry_after(value, 60.0)
    assert got == expected
    assert got is None or (math.isfinite(got) and 0.0 <= got <= 60.0)


def test_retry_after_with_a_bad_cap_is_still_finite() -> None:
    for cap in (math.nan, math.inf, -1.0):
        got = parse_retry_after("inf", cap)
        assert got is not None and math.isfinite(got)


@pytest.mark.parametrize("header", ["nan", "inf", "-3", "1e400", "Fri, 31 Dec 9999 23:59:59 GMT", "garbage"])
def test_bad_retry_after_never_fails_the_clip(fake: FakeVendor, tmp_path: Path, header: str) -> None:
    b = stt(fake, tmp_path, backoff_s=0.01, max_backoff_s=0.3)
    fake.inject(f"retry-after:{header}")
    t0 = time.perf_counter()
    assert b.transcribe_batch([CLIP]) == ["hello world"]
    assert time.perf_counter() - t0 < 2.0 and b.usage()["retries"] == 1


# -- redirects to unusable URLs ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target,problem", [("http://127.0.0.1:99999/v1/audio/transcriptions", "Port out of range"), ("http://[::1/x", "Invalid IPv6 URL")]
)
def test_redirect_to_an_invalid_url_is_a_clean_error(fake: FakeVendor, tmp_path: Path, target: str, problem: str) -> None:
    b = stt(fake, tmp_path, max_retries=2)
    fake.inject(f"redirect:{target}")
    with pytest.raises(HostedRequestError, match="not a valid URL") as info:
        b.transcribe_batch([CLIP])
    assert problem in str(info.value) and "refused" in str(info.value)
    assert len(fake.requests) == 1  # not retried


def test_redirect_error_is_a_clean_row_error(fake: FakeVendor, tmp_path: Path) -> None:
    """Through the runner: the row's error names the problem, not a library ValueError."""
    from engine.data import DecodedAudio, Shard, Utterance
    from engine.run.runner import process_unit

    b = stt(fake, tmp_path, max_retries=0)
    fake.inject("redirect:http://127.0.0.1:99999/x", "redirect:http://127.0.0.1:99999/x")
    shard = Shard("s0", (Utterance("u0", "hello world"),))
    (row,) = process_unit(b, "m", shard, [DecodedAudio("u0", CLIP, 16000)], 1)
    assert row["error"].startswith("backend error: HostedRequestError:") and "Port out of range" in row["error"], row["error"]


def test_base_url_with_a_bad_port_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="base_url.*not a valid URL"):
        ASR_BACKENDS.get("openai-compatible")(model="m", base_url="http://127.0.0.1:99999")


# -- the cache answers only the request it recorded ----------------------------------------------------


def test_cache_entry_for_another_model_is_not_served(fake: FakeVendor, tmp_path: Path) -> None:
    a = stt(fake, tmp_path, model="whisper-1")
    assert a.transcribe_batch([CLIP]) == ["hello world"] and fake.billable == 1
    (entry,) = list((tmp_path / "cache").rglob("*.json"))
    b = stt(fake, tmp_path, model="whisper-large")
    fake.transcript = "the other model"
    assert b.cache is not None
    from engine.backends.hosted.base import wav_bytes
    from engine.backends.hosted.cache import audio_digest, options_digest

    key = b.cache.key("whisper-large", options_digest(b.request_options()), audio_digest(wav_bytes(CLIP)))
    b.cache.path(key).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(entry, b.cache.path(key))  # a copied (or stale, or tampered) entry at b's key
    assert b.transcribe_batch([CLIP]) == ["the other model"] and fake.billable == 2
    assert json.loads(b.cache.path(key).read_text())["model"] == "whisper-large"  # replaced by the real answer


def test_cache_entry_with_other_request_options_is_not_served(fake: FakeVendor, tmp_path: Path) -> None:
    a = stt(fake, tmp_path)
    a.transcribe_batch([CLIP])
    (entry,) = list((tmp_path / "cache").rglob("*.json"))
    record = json.loads(entry.read_text())
    record["options_digest"] = "0" * 32
    record["text"] = "stale"
    entry.write_text(json.dumps(record))
    assert stt(fake, tmp_path).transcribe_batch([CLIP]) == ["hello world"] and fake.billable == 2
