"""The synthetic-voice probe with an audio-LM judge, end to end on a demo slice: the probe's real
clips and generic renditions reach the (fake, local) Gemini judge, and its likelihoods per arm,
the separation and the unparseable answers land in the probe's summary and report."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.fake_vendors import FakeVendor

KEY = "probe-judge-key-5"
N_CLIPS = 6


@pytest.fixture(scope="module")
def gemini() -> Iterator[FakeVendor]:
    f = FakeVendor("gemini", KEY)
    old = os.environ.get("GEMINI_API_KEY")
    os.environ["GEMINI_API_KEY"] = KEY
    yield f
    f.close()
    if old is None:
        os.environ.pop("GEMINI_API_KEY", None)
    else:
        os.environ["GEMINI_API_KEY"] = old


@pytest.mark.slow
def test_synthetic_voice_probe_asks_the_judge_about_every_arm(demo_corpus: Path, gemini: FakeVendor, tmp_path: Path) -> None:
    from audits.probes.config import parse_probe_config
    from audits.probes.report import probe_lines
    from audits.probes.results import ProbesResult
    from audits.probes.run import _run_models, run_probes
    from audits.probes.synthetic_voice import DEFAULT_POOL
    from engine.audio.shards import write_shards
    from engine.data import ModelSpec
    from engine.datasets import open_dataset
    from engine.model_registry import load_model_registry, resolve_models
    from tests.test_memorizer import demo_utterances

    calls: list[int] = []

    def reply(prompt: str, clips: list[bytes]) -> str:
        calls.append(len(clips))
        return "It sounds synthetic." if len(calls) == 1 else '{"probability": 0.5}'  # the first answer is unparseable

    gemini.reply_fn = reply
    utts = demo_utterances(demo_corpus, N_CLIPS)
    write_shards([replace(u, audio_path=None) for u in utts], tmp_path / "slice", shard_size=64)
    ds = open_dataset(tmp_path / "slice", "parquet")
    ds.name = "demo"
    specs = []
    for e in resolve_models(["whisper-tiny.en", "memorizer"], load_model_registry()):
        s = e.spec()
        if s.backend == "memorizer":
            s = ModelSpec(s.name, s.backend, {**s.options, "index": ds.source, "index_reader": "parquet"}, s.batch_size, s.meta)
        specs.append(s)
    base, _ = _run_models(ds, specs, tmp_path / "run", None)
    judges = {
        "backends": ["gemini"],
        "backend_options": {
            "gemini": {
                "model": "gemini-2.5-flash",
                "base_url": gemini.base_url,
                "backoff_s": 0.01,
                "max_concurrency": 1,
                "cache_dir": str(tmp_path / "cache"),
            }
        },
    }
    # both voice arms (the default); the matched pool without Kokoro's voices, whose calibration renditions are most of
    # the probe's cost: the default pool, Kokoro included, is proven end to end in tests/test_probes_audio.py
    pool = [v for v in DEFAULT_POOL if not v.startswith("kokoro:")]
    synth = {"n_boot": 200, "judges": judges, "match_encoder_options": {"num_threads": 1}, "matched_pool": pool}
    cfg = parse_probe_config({"masking": {"variants": ["silence"]}, "synthetic_voice": synth}, "test")
    probes = run_probes(cfg, ds, specs, tmp_path / "run", base)
    sv = probes["synthetic_voice"]
    j = sv["judges"]["gemini"]
    arms = j["arms"]
    assert set(arms) == {"real", "generic", "matched"}
    assert sv["n_masking_clips"] >= 1 and arms["generic"]["n_clips"] == sv["n_masking_clips"] == arms["real"]["n_clips"]
    assert 1 <= arms["matched"]["n_clips"] <= sv["n_masking_clips"] and set(sv["matched"]["chosen"]) <= set(pool)
    assert gemini.billable == len(calls) == sum(a["n_clips"] for a in arms.values()) and set(calls) == {1}
    assert j["n_unparseable"] == 1 and sum(a["n_unparseable"] for a in arms.values()) == 1
    # a judge that answers 0.5 to everything cannot separate either arm from the real clips
    assert j["separation"]["generic"]["auc"] == 0.5 and j["separation"]["matched"]["auc"] == 0.5
    rows = [json.loads(line) for line in Path(j["rows_path"]).read_text().splitlines()]
    assert {r["arm"] for r in rows} == {"real", "generic", "matched"}
    assert all(r["pair"] in {x["clip_id"] for x in rows if x["arm"] == "real"} for r in rows)
    assert "AUC generic vs real 0.500" in "\n".join(probe_lines(ProbesResult.from_json(probes), "Probes")) and KEY not in json.dumps(probes)
