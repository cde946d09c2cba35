"""The one HTTP client keeps connections alive: the fake vendors (HTTP/1.1, keep-alive, like the
vendors' servers) count the TCP connections they accept. One backend reuses one connection for
clip after clip, over TLS too; ``max_concurrency`` threads share at most that many; a kept-alive
connection the server closed is replaced without spending a retry; a forked process builds its
own pool. Everything else the client guarantees is in test_http_limits, test_redirect_auth,
test_secrets and test_hosted*, which run on the same pooled client.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.backends import ASR_BACKENDS
from tests.fake_vendors import OPENAI_STT, FakeVendor, options_for

KEY = "sk-pool-0123456789abcdef"
CLIPS = [(0.1 * np.sin(np.arange(4000 + 160 * i) / 3.0)).astype(np.float32) for i in range(12)]


@pytest.fixture(params=[False, True], ids=["http", "https"])
def fake(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeVendor]:
    monkeypatch.setenv("DEEPGRAM_API_KEY", KEY)
    f = FakeVendor("deepgram", KEY, tls=request.param)
    yield f
    f.close()


def backend(fake: FakeVendor, **extra: Any) -> Any:
    b = ASR_BACKENDS.get("deepgram")(**options_for(fake, cache=False, **extra))
    b.load()
    return b


def test_one_connection_serves_every_clip(fake: FakeVendor) -> None:
    b = backend(fake, max_concurrency=1)
    for clip in CLIPS:
        assert b.transcribe_batch([clip]) == ["hello world"]
    assert fake.billable == len(CLIPS) and b.usage()["http_requests"] == len(CLIPS)
    assert fake.connections == 1, f"{fake.connections} TCP connections for {len(CLIPS)} requests"


def test_threads_share_at_most_max_concurrency_connections(fake: FakeVendor) -> None:
    fake.latency_s = 0.02  # requests overlap, so every thread holds a connection at once
    b = backend(fake, max_concurrency=4)
    assert b.transcribe_batch(CLIPS * 3) == ["hello world"] * len(CLIPS) * 3
    assert b.transcribe_batch(CLIPS) == ["hello world"] * len(CLIPS)  # a second batch: the same connections
    assert 1 <= fake.connections <= 4 and fake.billable == len(CLIPS) * 4


def test_a_connection_closed_by_the_server_is_replaced_without_a_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    fake = FakeVendor(OPENAI_STT, KEY)
    try:
        b = ASR_BACKENDS.get("openai-compatible")(**options_for(fake, cache=False, max_retries=0))
        b.load()
        assert b.transcribe_batch([CLIPS[0]]) == ["hello world"]
        fake.inject("drop")  # the next request arrives on the kept-alive connection, which the server closes unanswered
        assert b.transcribe_batch([CLIPS[1]]) == ["hello world"]  # max_retries=0: only a fresh connection can have saved it
        usage = b.usage()
        assert usage["retries"] == 0 and usage["http_requests"] == 3 and fake.connections == 2 and fake.billable == 2
        # on a fresh connection the same failure is an ordinary transport error, retried as before
        b2 = ASR_BACKENDS.get("openai-compatible")(**options_for(fake, cache=False, max_retries=1))
        b2.load()
        fake.inject("drop")
        assert b2.transcribe_batch([CLIPS[2]]) == ["hello world"] and b2.usage()["retries"] == 1
    finally:
        fake.close()


def test_each_process_builds_its_own_pool(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import engine.backends.hosted.http as http

    client = http.HostedClient("v", "http://127.0.0.1:9", dict, list)
    first = client.pool()
    assert client.pool() is first
    pid = os.getpid()
    monkeypatch.setattr(http.os, "getpid", lambda: pid + 1)  # as in a forked child
    assert client.pool() is not first
