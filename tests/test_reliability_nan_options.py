"""Reliability class 18: one rule per thing on every surface.

Every hosted transport option (timeouts, retries, back-off, concurrency, rate, body cap) goes
through one typed definition (``engine.backends.hosted.http.TRANSPORT_FIELDS``) on every surface
that takes it: each hosted ASR vendor, each audio-LM judge, the shared HTTP client and its rate
limiter. NaN, infinities, negatives, booleans and strings are refused naming the key; a rate of 0
is refused (null means "no limit", so a NaN or 0 rate can no longer silently mean it). A NaN or
an infinity anywhere inside a backend option (a nested ``params`` field) is refused too.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.backends import ASR_BACKENDS, JUDGE_BACKENDS
from engine.backends.hosted.base import HostedASRBackend
from engine.backends.hosted.http import HostedClient, RateLimiter
from engine.errors import ConfigError


def _hosted() -> list[str]:
    out = []
    for name in ASR_BACKENDS.names():
        cls = ASR_BACKENDS.get(name)
        if isinstance(cls, type) and issubclass(cls, HostedASRBackend):
            out.append(name)
    return out


BAD = [math.nan, math.inf, -math.inf, np.float64("nan"), -1, True, "nan", "30"]
KEYS = ["timeout_s", "requests_per_minute", "backoff_s", "max_backoff_s", "max_concurrency", "max_retries"]


@pytest.mark.parametrize("backend", _hosted())
@pytest.mark.parametrize("key", KEYS)
def test_every_hosted_vendor_refuses_a_bad_transport_number(backend: str, key: str) -> None:
    cls = ASR_BACKENDS.get(backend)
    for value in BAD:
        with pytest.raises(ConfigError, match=key):
            cls(model="m", **{key: value})
    with pytest.raises(ConfigError, match=r"requests_per_minute.*out of range"):
        cls(model="m", requests_per_minute=0)  # null is "no limit"; 0 is not a rate


@pytest.mark.parametrize("judge", ["gemini", "openai-audio"])
@pytest.mark.parametrize("key", KEYS)
def test_every_judge_refuses_a_bad_transport_number(judge: str, key: str) -> None:
    cls = JUDGE_BACKENDS.get(judge)
    for value in BAD:
        with pytest.raises(ConfigError, match=key):
            cls(model="m", **{key: value})
    for key2, value in (("temperature", -0.5), ("temperature", "hot"), ("cache", "false")):
        with pytest.raises(ConfigError, match=key2):
            cls(model="m", **{key2: value})


def test_the_client_and_its_rate_limiter_refuse_nan_themselves() -> None:
    """Whatever builds them: a NaN rate would otherwise mean no limit, a NaN deadline no deadline."""
    for bad in (math.nan, math.inf, 0.0, -5.0):
        with pytest.raises(ConfigError, match="requests_per_minute"):
            RateLimiter(bad)
    assert RateLimiter(None).interval == 0.0 and RateLimiter(120).interval == pytest.approx(0.5)
    for kwargs in (
        {"timeout_s": math.nan},
        {"requests_per_minute": math.nan},
        {"max_backoff_s": math.inf},
        {"backoff_s": -1.0},
        {"max_concurrency": 0},
        {"max_response_bytes": 10},
    ):
        with pytest.raises(ConfigError, match=next(iter(kwargs))):
            HostedClient("vendor", "https://api.example.com", dict, list, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [math.nan, math.inf, [1.0, math.nan], {"deep": {"x": -math.inf}}])
def test_a_nan_inside_a_nested_option_is_refused(value: object) -> None:
    cls = ASR_BACKENDS.get("deepgram")
    with pytest.raises(ConfigError, match=r"^deepgram backend options\.params\.keywords.*: expected a finite number"):
        cls(model="m", params={"keywords": value})
