"""Hosted ASR backends against local fake vendors (tests/fake_vendors.py): documented request
shapes, auth, retries that honour Retry-After, timeouts, malformed answers, refused cross-origin
redirects, keys kept out of everything written, the response cache and the cost counters."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.backends import ASR_BACKENDS
from engine.backends.hosted.base import HostedASRBackend, combine_usage
from engine.backends.hosted.http import parse_retry_after
from engine.errors import ConfigError, HostedAuthError, HostedQuotaError, HostedRequestError, UnsafeRedirectError
from tests.fake_vendors import BACKENDS, KEY_ENV, VENDORS, FakeVendor, options_for

KEY = "sk-test-0123456789abcdef"


def clip(seconds: float = 0.5, freq: float = 220.0) -> np.ndarray:
    t = np.arange(int(16000 * seconds)) / 16000
    return (0.2 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


@pytest.fixture()
def fake(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeVendor]:
    vendor = getattr(request, "param", "deepgram")
    f = FakeVendor(vendor, KEY)
    monkeypatch.setenv(KEY_ENV[vendor], KEY)
    yield f
    f.close()


def backend(fake: FakeVendor, tmp_path: Path, **extra: Any) -> HostedASRBackend:
    cls = ASR_BACKENDS.get(BACKENDS[fake.vendor][0])
    b: HostedASRBackend = cls(**options_for(fake, cache_dir=str(tmp_path / "cache"), **extra))
    b.load()
    return b


@pytest.mark.parametrize("fake", VENDORS, indirect=True)
def test_each_vendor_transcribes_and_caches(fake: FakeVendor, tmp_path: Path) -> None:
    """Every vendor's documented flow works; the second pass over the same audio is free."""
    b = backend(fake, tmp_path, price_per_audio_hour_usd=3.6)
    clips = [clip(0.5, 220), clip(1.0, 330)]
    assert b.transcribe_batch(clips) == ["hello world", "hello world"]
    assert fake.billable == 2
    u = b.usage()
    assert u["billable_calls"] == 2 and u["cache_hits"] == 0 and u["audio_s_billed"] == pytest.approx(1.5)
    assert u["estimated_cost_usd"] == pytest.approx(1.5 / 3600 * 3.6, abs=1e-6)
    again = backend(fake, tmp_path)  # a new process would build a new backend: same cache on disk
    assert again.transcribe_batch(clips) == ["hello world", "hello world"]
    assert fake.billable == 2 and again.usage()["cache_hits"] == 2 and again.usage()["billable_calls"] == 0
    assert again.usage()["api_rtfx"] is not None  # from the original requests' wall time


def test_changed_request_options_are_a_cache_miss(fake: FakeVendor, tmp_path: Path) -> None:
    backend(fake, tmp_path).transcribe_batch([clip()])
    backend(fake, tmp_path, max_retries=1, timeout_s=9.0).transcribe_batch([clip()])  # transport only
    assert fake.billable == 1
    backend(fake, tmp_path, language="en").transcribe_batch([clip()])  # changes the answer
    assert fake.billable == 2


def test_429_honours_retry_after_and_5xx_is_retried(fake: FakeVendor, tmp_path: Path) -> None:
    b = backend(fake, tmp_path, backoff_s=0.01)
    fake.inject("429", "500")
    t0 = time.perf_counter()
    assert b.transcribe_batch([clip()]) == ["hello world"]
    assert time.perf_counter() - t0 >= 1.0  # Retry-After: 1, not the 0.01 s backoff
    assert fake.billable == 1 and b.usage()["retries"] == 2


def test_rate_limited_past_every_retry_is_a_quota_error(fake: FakeVendor, tmp_path: Path) -> None:
    b = backend(fake, tmp_path, max_retries=1, max_backoff_s=0.05)
    fake.inject("429", "429")
    with pytest.raises(HostedQuotaError, match="429"):
        b.transcribe_batch([clip()])


def test_slow_answer_times_out_then_retries(fake: FakeVendor, tmp_path: Path) -> None:
    b = backend(fake, tmp_path, timeout_s=0.3)
    fake.inject("slow:1.0")
    assert b.transcribe_batch([clip()]) == ["hello world"]
    assert b.usage()["retries"] == 1


def test_malformed_json_is_a_clear_error_and_not_cached(fake: FakeVendor, tmp_path: Path) -> None:
    b = backend(fake, tmp_path)
    fake.inject("malformed")
    with pytest.raises(HostedRequestError, match="malformed JSON"):
        b.transcribe_batch([clip()])
    assert b.usage()["failed_calls"] == 1
    assert b.transcribe_batch([clip()]) == ["hello world"]  # nothing bad was cached


def test_cross_origin_redirect_is_refused_and_the_key_never_leaves(
    fake: FakeVendor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evil = FakeVendor("deepgram", "other-key")
    try:
        b = backend(fake, tmp_path)
        fake.inject(f"redirect:{evil.base_url}/v1/listen?model=nova-3")
        with pytest.raises(UnsafeRedirectError, match="another origin"):
            b.transcribe_batch([clip()])
        assert evil.requests == []
    finally:
        evil.close()


def test_same_origin_redirect_is_followed(fake: FakeVendor, tmp_path: Path) -> None:
    b = backend(fake, tmp_path)
    fake.inject(f"redirect:{fake.base_url}/v1/listen?model=nova-3")
    assert b.transcribe_batch([clip()]) == ["hello world"]


@pytest.mark.parametrize("fake", ["gladia"], indirect=True)
def test_polling_url_on_another_origin_is_refused(fake: FakeVendor, tmp_path: Path) -> None:
    b = backend(fake, tmp_path)
    assert b.client is not None
    with pytest.raises(UnsafeRedirectError):
        b.client.request("GET", "https://api.gladia.io/v2/pre-recorded/x")


def test_bad_key_is_fatal_for_the_model(fake: FakeVendor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPGRAM_API_KEY", "wrong")
    b = backend(fake, tmp_path)
    with pytest.raises(HostedAuthError, match="DEEPGRAM_API_KEY"):
        b.transcribe_batch([clip()])
    n = len(fake.requests)
    with pytest.raises(HostedAuthError):
        b.transcribe_batch([clip(0.3)])
    assert len(fake.requests) == n  # no more requests once the key is known bad


def test_out_of_credit(fake: FakeVendor, tmp_path: Path) -> None:
    fake.inject("402")
    with pytest.raises(HostedQuotaError, match="credit"):
        backend(fake, tmp_path).transcribe_batch([clip()])


def test_key_is_never_in_info_repr_errors_or_cache(fake: FakeVendor, tmp_path: Path) -> None:
    b = backend(fake, tmp_path, max_retries=0)
    fake.inject("echo-key")
    with pytest.raises(HostedRequestError) as err:
        b.transcribe_batch([clip()])
    assert KEY not in str(err.value) and "[redacted]" in str(err.value)
    b.transcribe_batch([clip()])
    assert KEY not in json.dumps(b.info().as_dict()) and KEY not in repr(b)
    for f in (tmp_path / "cache").rglob("*"):
        if f.is_file():
            assert KEY not in f.read_text()


def test_options_are_checked_before_anything_runs(fake: FakeVendor, monkeypatch: pytest.MonkeyPatch) -> None:
    cls = ASR_BACKENDS.get("deepgram")
    with pytest.raises(ConfigError, match="api_key_env"):
        cls(model="nova-3", api_key="x")
    with pytest.raises(ConfigError, match="did you mean 'timeout_s'"):
        cls(model="nova-3", timeout=3)
    with pytest.raises(ConfigError, match="model"):
        cls()
    assert cls.check_weights({"model": "nova-3"}).runnable
    monkeypatch.delenv("DEEPGRAM_API_KEY")
    avail = cls.check_weights({"model": "nova-3"})
    assert not avail.runnable and "DEEPGRAM_API_KEY" in avail.reason


def test_retry_after_forms() -> None:
    assert parse_retry_after("3", 60) == 3.0
    assert parse_retry_after("999", 60) == 60.0
    assert parse_retry_after("soon", 60) is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 60) == 0.0  # a date in the past


def test_usage_adds_up_across_sessions() -> None:
    a = {"billable_calls": 2, "audio_s_billed": 1800.0, "cache_hits": 0, "request_wall_s": 10.0, "price_per_audio_hour_usd": 1.0}
    b = {
        "billable_calls": 1,
        "audio_s_billed": 1800.0,
        "cache_hits": 2,
        "audio_s_cached": 60.0,
        "request_wall_s": 5.0,
        "price_per_audio_hour_usd": 1.0,
    }
    c = combine_usage(a, b)
    assert c["billable_calls"] == 3 and c["cache_hits"] == 2 and c["estimated_cost_usd"] == pytest.approx(1.0)
    assert c["api_rtfx"] == pytest.approx(3660 / 15, rel=1e-3)


def test_hosted_registry_entries() -> None:
    from engine.model_registry import load_model_registry

    hosted = {n: e for n, e in load_model_registry().items() if "hosted" in e.tags}
    # the study line-up's Modulate and Smallest entries are tested against their fakes in test_study_vendors.py
    assert {e.backend for e in hosted.values()} == {b for b, _ in BACKENDS.values()} | {"modulate", "smallest"}
    for name, e in hosted.items():
        assert "price_per_audio_hour_usd" in e.options and e.options.get("price_note"), name
        ASR_BACKENDS.get(e.backend)(**e.options)  # options valid for the backend


def test_missing_price_is_reported_as_unknown_never_as_zero() -> None:
    """A registry entry without a list price (null) gives an unknown cost in summary.json, report.md
    and report.html, never 0; the shipped entries without a confirmed price say why in price_note."""
    from audits.reports.cost import hosted_usage_lines, hosted_usage_sections
    from engine.backends.hosted.base import combine_usage, usage_summary
    from engine.model_registry import load_model_registry

    u = combine_usage(
        usage_summary({"billable_calls": 2, "audio_s_billed": 90.0}, None),
        usage_summary({"billable_calls": 1, "audio_s_billed": 30.0}, None),
    )
    assert u["billable_calls"] == 3 and u["audio_hours_billed"] == pytest.approx(120 / 3600, abs=1e-6) and u["estimated_cost_usd"] is None
    summary = {"models": {"vendor-x": {"backend_info": {"usage": u}}}}
    assert "est. cost unknown (no price)" in "\n".join(hosted_usage_lines(summary))
    ((_, _, html, _),) = hosted_usage_sections(summary)
    assert "unknown (no price)" in html and "data-cost=''" in html and "$0.0000" not in html
    for name, e in load_model_registry().items():
        if "hosted" in e.tags and e.options.get("price_per_audio_hour_usd") is None:
            assert "no " in str(e.options["price_note"]) and "list price" in str(e.options["price_note"]), name
