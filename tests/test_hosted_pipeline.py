"""A sweep over the seven fake vendors through the real pipeline (``audits.pipeline.run_recipe``):
interrupted and resumed, killed mid-unit and resumed, and repeated, it never pays twice for a clip
(billable calls are counted on the servers), and its usage and cost reach summary.json and report.md."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
import yaml

from tests.fake_vendors import BACKENDS, KEY_ENV, VENDORS, FakeVendor, options_for

REPO = Path(__file__).resolve().parents[1]
KEY = "sk-pipeline-test-key-42"


class Interrupted(Exception):
    """Raised from the progress callback: the run stops between two units, as Ctrl-C would."""


def make_dataset(folder: Path, n: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(n):
        t = np.arange(int(16000 * (0.4 + 0.1 * i))) / 16000
        path = folder / f"clip{i}.wav"
        sf.write(path, 0.2 * np.sin(2 * np.pi * (200 + 40 * i) * t), 16000)
        lines.append(json.dumps({"utt_id": f"u{i}", "audio_filepath": str(path), "text": "hello world", "speaker": f"s{i % 2}"}))
    manifest = folder / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


def write_registry(cfg: Path, fakes: dict[str, FakeVendor], **extra: Any) -> list[str]:
    models = {}
    for vendor, fake in fakes.items():
        opts = options_for(fake, price_per_audio_hour_usd=1.0, **extra)
        models[f"fake-{vendor}"] = {"backend": BACKENDS[vendor][0], "options": opts, "batch_size": 8, "tags": ["hosted"]}
    (cfg / "models").mkdir(parents=True, exist_ok=True)
    (cfg / "models" / "fake.yaml").write_text(yaml.safe_dump({"models": models}))
    return sorted(models)


def recipe(manifest: Path, models: list[str], shard_size: int) -> Any:
    from audits.recipes import parse_recipe

    data = {
        "name": "hosted",
        "dataset": {"path": str(manifest)},
        "models": models,
        "shard_size": shard_size,
        "warmup": 1,
        "scoring": {"n_boot": 10},
    }
    return parse_recipe(data, "hosted.yaml")


@pytest.fixture()
def fakes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, FakeVendor]]:
    out = {v: FakeVendor(v, KEY) for v in VENDORS}
    for v in VENDORS:
        monkeypatch.setenv(KEY_ENV[v], KEY)
    monkeypatch.setenv("AUDIT_CACHE", str(tmp_path / "audit-cache"))
    yield out
    for f in out.values():
        f.close()


def test_interrupted_resumed_and_repeated_sweep_pays_once(
    fakes: dict[str, FakeVendor], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from audits.pipeline import run_recipe

    cfg = tmp_path / "cfg"
    models = write_registry(cfg, fakes)
    monkeypatch.setenv("AUDIT_CONFIG_DIR", str(cfg))
    manifest = make_dataset(tmp_path / "data", 4)
    r = recipe(manifest, models, shard_size=2)
    out = tmp_path / "run"
    units = 0

    def stop_after_three(event: str, count: int, info: dict[str, Any]) -> None:
        nonlocal units
        if event == "unit":
            units += 1
            if units == 3:
                raise Interrupted

    with pytest.raises(Interrupted):
        run_recipe(r, out, progress=stop_after_three)
    assert sum(f.billable for f in fakes.values()) == 3 * 2  # three units of two clips; warm-up is never billed
    summary = run_recipe(r, out)
    assert {v: f.billable for v, f in fakes.items()} == dict.fromkeys(VENDORS, 4)  # each clip paid exactly once
    audio_s = sum(0.4 + 0.1 * i for i in range(4))
    for name in models:
        m = summary["models"][name]
        assert m["n_utts"] == 4 and m["n_failed"] == 0 and m["wer"] == 0.0
        usage = m["backend_info"]["usage"]
        assert usage["billable_calls"] == 4 and usage["audio_s_billed"] == pytest.approx(audio_s, abs=1e-3)
        assert usage["estimated_cost_usd"] == pytest.approx(audio_s / 3600, abs=1e-6)
        assert KEY not in json.dumps(m)
    report = (out / "report.md").read_text()
    assert "Hosted APIs" in report and "fake-deepgram" in report and KEY not in report
    assert KEY not in (out / "summary.json").read_text()

    again = run_recipe(r, tmp_path / "repeat")  # a new run directory, the same cache
    assert {v: f.billable for v, f in fakes.items()} == dict.fromkeys(VENDORS, 4)
    for name in models:
        usage = again["models"][name]["backend_info"]["usage"]
        assert usage["billable_calls"] == 0 and usage["cache_hits"] == 4 and usage["estimated_cost_usd"] == 0.0


def test_killed_mid_unit_then_resumed_pays_only_for_answers_never_received(
    fakes: dict[str, FakeVendor], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL while a unit is half done: answers already received are in the cache and are not
    bought again on resume; only clips whose answer never arrived are sent again."""
    from audits.pipeline import run_recipe

    n = 6
    fake = fakes["deepgram"]
    cfg = tmp_path / "cfg"
    models = write_registry(cfg, {"deepgram": fake}, max_concurrency=1)
    manifest = make_dataset(tmp_path / "data", n)
    fake.inject(*["slow:0.3"] * n)
    out = tmp_path / "run"
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from audits.recipes import parse_recipe
        from audits.pipeline import run_recipe
        data = {{"name": "hosted", "dataset": {{"path": {str(manifest)!r}}}, "models": {models!r}, "shard_size": {n}, """
        f""""warmup": 0, "scoring": {{"n_boot": 10}}}}
        run_recipe(parse_recipe(data, "hosted.yaml"), Path({str(out)!r}))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "AUDIT_CONFIG_DIR": str(cfg)}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 90
        while fake.billable < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "child exited early"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    time.sleep(0.6)  # let the server finish a request that was in flight (billed, but its answer never arrived)
    billed_before = fake.billable
    cached = sum(1 for p in (tmp_path / "audit-cache" / "hosted").rglob("*.json"))
    assert 1 <= cached <= billed_before <= cached + 2 and cached < n  # at most the clips in flight are lost
    assert not (out / "markers").exists() or not any((out / "markers").rglob("*.json"))  # the unit was not finished

    monkeypatch.setenv("AUDIT_CONFIG_DIR", str(cfg))
    summary = run_recipe(recipe(manifest, models, shard_size=n), out)
    assert fake.billable - billed_before == n - cached  # nothing received before the kill is bought again
    usage = summary["models"]["fake-deepgram"]["backend_info"]["usage"]
    assert usage["cache_hits"] == cached and usage["billable_calls"] == n - cached
    assert summary["models"]["fake-deepgram"]["n_failed"] == 0
