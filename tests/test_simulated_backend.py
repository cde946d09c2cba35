"""The simulated backend: options checked, text a function of the samples, sleeps as configured,
seeded failures, availability answers (advisory vs definite)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from engine.backends.asr.simulated import SimulatedBackend, SimulatedFailure
from engine.backends.availability import model_availability
from engine.errors import BackendUnavailable, ConfigError


def clips(n: int, seconds: float = 1.0, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(0, 0.1, int(16_000 * seconds)).astype(np.float32) for _ in range(n)]


def test_bad_options_name_the_key() -> None:
    with pytest.raises(ConfigError, match="rtfx"):
        SimulatedBackend(rtfx=0)
    with pytest.raises(ConfigError, match="failure_prob"):
        SimulatedBackend(failure_prob=1.5)
    with pytest.raises(ConfigError, match="unknown option.*'rtf'.*did you mean 'rtfx'"):
        SimulatedBackend(rtf=10)


def test_text_is_deterministic_and_depends_on_the_clip_and_seed() -> None:
    a, b = SimulatedBackend(seed=1), SimulatedBackend(seed=1)
    a.load()
    b.load()
    x = clips(3)
    assert a.transcribe_batch(x) == b.transcribe_batch(x)
    assert len(set(a.transcribe_batch(x))) == 3
    c = SimulatedBackend(seed=2)
    c.load()
    assert c.transcribe_batch(x) != a.transcribe_batch(x)
    assert len(a.transcribe_batch(clips(1, 4.0))[0].split()) == 10  # 2.5 words per second


def test_sleeps_follow_load_time_rtfx_and_time_scale() -> None:
    b = SimulatedBackend(load_s=2.0, rtfx=10.0, time_scale=0.1)
    t0 = time.perf_counter()
    b.load()
    assert 0.18 <= time.perf_counter() - t0 < 1.0
    t0 = time.perf_counter()
    b.transcribe_batch(clips(2, 2.0))  # 4 s of audio / RTFx 10 = 0.4 s, x 0.1
    assert 0.035 <= time.perf_counter() - t0 < 0.5


def test_failures_are_seeded() -> None:
    always = SimulatedBackend(failure_prob=1.0)
    always.load()
    with pytest.raises(SimulatedFailure):
        always.transcribe_batch(clips(1))
    half = SimulatedBackend(failure_prob=0.5, seed=3)
    half.load()
    outcomes = []
    for i in range(40):
        try:
            half.transcribe_batch(clips(1, seed=i))
            outcomes.append(True)
        except SimulatedFailure:
            outcomes.append(False)
    assert 5 < sum(outcomes) < 35
    again = SimulatedBackend(failure_prob=0.5, seed=3)
    again.load()
    for i in range(40):
        try:
            again.transcribe_batch(clips(1, seed=i))
            assert outcomes[i]
        except SimulatedFailure:
            assert not outcomes[i]


def test_availability_advisory_versus_definite() -> None:
    hub = model_availability("simulated", {"unavailable": "weights not cached"})
    assert not hub.runnable and hub.checked is False
    missing = model_availability("simulated", {"missing": "needs package foo"})
    assert not missing.runnable and missing.checked is True
    with pytest.raises(BackendUnavailable, match="weights not cached"):
        SimulatedBackend(unavailable="weights not cached").load()
    info = SimulatedBackend(device="cuda").info().as_dict()
    assert info["device"] == "cuda" and info["gpu_ids"] == []
