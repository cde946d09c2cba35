"""Hosted-API usage under the Ray engine: the same calls billed, cache hits, audio hours and cost in
summary.json as the in-process runner, and an interrupted Ray sweep resumed makes no repeated
billable call (counted on a local fake Deepgram server)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fake_vendors import BACKENDS, KEY_ENV, FakeVendor, options_for
from tests.test_hosted_pipeline import Interrupted, make_dataset, recipe

KEY = "sk-ray-usage-test-key-7"
BILLED = ("billable_calls", "audio_s_billed", "audio_hours_billed", "price_per_audio_hour_usd", "estimated_cost_usd")
SAME = (
    "clips",
    "billable_calls",
    "cache_hits",
    "audio_s_billed",
    "audio_s_cached",
    "audio_hours_billed",
    "price_per_audio_hour_usd",
    "estimated_cost_usd",
)


@pytest.fixture()
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeVendor]:
    monkeypatch.setenv(KEY_ENV["deepgram"], KEY)
    f = FakeVendor("deepgram", KEY)
    yield f
    f.close()


def _registry(cfg: Path, fake: FakeVendor, cache_dir: Path) -> None:
    opts = options_for(fake, cache_dir=str(cache_dir), price_per_audio_hour_usd=0.5)
    model = {"backend": BACKENDS["deepgram"][0], "options": opts, "batch_size": 2, "tags": ["hosted"]}
    (cfg / "models").mkdir(parents=True, exist_ok=True)
    (cfg / "models" / "fake.yaml").write_text(yaml.safe_dump({"models": {"fake-deepgram": model}}))


@pytest.mark.slow
def test_ray_run_counts_usage_like_in_process_and_resume_never_pays_twice(
    fake: FakeVendor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray

    from audits.pipeline import run_recipe
    from engine.engine import EngineOptions
    from engine.run.ray_runner import init_ray
    from engine.run.store import RunStore

    cfg = tmp_path / "cfg"
    monkeypatch.setenv("AUDIT_CONFIG_DIR", str(cfg))
    n = 5
    r = recipe(make_dataset(tmp_path / "data", n), ["fake-deepgram"], shard_size=1)

    _registry(cfg, fake, tmp_path / "cache-inproc")  # cache_dir is transport: same request options, separate caches
    inproc = run_recipe(r, tmp_path / "inproc")["models"]["fake-deepgram"]["backend_info"]["usage"]
    assert fake.billable == n and inproc["billable_calls"] == n

    fake.billable = 0
    init_ray(num_cpus=2, runtime_env={"env_vars": {KEY_ENV["deepgram"]: KEY}})
    try:
        _registry(cfg, fake, tmp_path / "cache-ray")
        whole = run_recipe(r, tmp_path / "ray-whole", engine=EngineOptions(kind="ray"))["models"]["fake-deepgram"]["backend_info"]["usage"]
        assert fake.billable == n
        assert {k: whole[k] for k in SAME} == {k: inproc[k] for k in SAME}

        _registry(cfg, fake, tmp_path / "cache-ray-resumed")
        fake.billable = 0
        units = 0

        def stop_after_two(event: str, count: int, info: dict[str, Any]) -> None:
            nonlocal units
            if event == "unit":
                units += 1
                if units == 2:
                    raise Interrupted

        out = tmp_path / "ray"
        with pytest.raises(Interrupted):
            run_recipe(r, out, progress=stop_after_two, engine=EngineOptions(kind="ray"))
        first = fake.billable
        assert 2 <= first <= n
        # the interrupted session recorded every call it paid for (in-flight units included)
        assert RunStore(out).read_model_facts()["fake-deepgram"]["info"]["usage"]["billable_calls"] == first
        summary = run_recipe(r, out, engine=EngineOptions(kind="ray"))
    finally:
        ray.shutdown()
    assert fake.billable == n, "the resumed Ray run paid again for clips the interrupted one had bought"
    usage = summary["models"]["fake-deepgram"]["backend_info"]["usage"]
    assert {k: usage[k] for k in BILLED} == {k: inproc[k] for k in BILLED}
    # units in flight when the run stopped were paid for then and are cache hits on resume
    assert usage["clips"] == n + usage["cache_hits"] and usage["cache_hits"] == first - 2
    assert usage["estimated_cost_usd"] == pytest.approx(usage["audio_s_billed"] / 3600 * 0.5, abs=1e-6)
