"""Smoke tests of the performance scripts: each piece runs on tiny sizes and returns sane numbers.

No timing assertions (the machines that run tests are shared and noisy); the benchmarks
themselves are run by hand (see the README, Performance section).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"
sys.path.insert(0, str(SCRIPTS))

import bench
import oasr_compare

from audits.asr.scoring import ScoringOptions, normalize_unique, score_table, summarize_models
from normalizers import EnglishNormalizer, fast_normalizer


def _positive(x: float) -> bool:
    return isinstance(x, float) and math.isfinite(x) and x > 0


def test_synthetic_sweep_shape_and_scoring_figures() -> None:
    table = bench.synthetic_sweep(3, 120, n_speakers=20, seed=1)
    assert len(table) == 360 and table["model"].nunique() == 3
    assert {"accent", "background", "emotion", "conversation", "speaker"} <= set(table.columns)
    # the same references for every model, hypotheses that differ between models
    assert (table.groupby("utt_id")["ref_raw"].nunique() == 1).all()
    assert table["hyp_raw"].nunique() > 120
    r = bench.score_once(table, n_boot=50, workers=1)
    assert r["rows"] == 360 and r["models"] == 3 and r["slices"] >= 3 * (6 + 4 + 4 + 2) - 3
    assert _positive(r["pairs_per_s"]) and _positive(r["total_s"])


def test_fast_normalizer_matches_the_original_on_corpus_and_tricky_text() -> None:
    norm = EnglishNormalizer()
    fast = fast_normalizer(norm)
    assert fast is not norm
    texts = list(bench.synthetic_sweep(2, 150, seed=3)["hyp_raw"]) + [
        "Mr. O'Neil's 2nd-place finish cost £3.50 (roughly) — ok?",
        "The colour of the theatre, ninety nine percent, one oh one, double seven",
        "point and point five; and a half; two and a half million dollars",
        "  ÉLAN, naïve café\tcrème brûlée… 1,234.56 $ 7 ¢ 3% uh um hmm  ",
        "[inaudible] <unk> won't can't y'all gonna st. dr. jr.",
    ]
    rng = np.random.default_rng(0)
    alphabet = list("abc xyz,.'$%£€¢0123456789()[]<>-éß\t") + ["one", " and ", "point", "half", " mr ", "'s", "n't"]
    texts += ["".join(rng.choice(alphabet, size=int(rng.integers(0, 40)))) for _ in range(300)]
    for t in texts:
        assert fast(t) == norm(t), t


def test_parallel_normalization_and_summary_do_not_change_results() -> None:
    table = bench.synthetic_sweep(3, 80, n_speakers=12, seed=2)
    norm = EnglishNormalizer()
    texts = list(table["hyp_raw"]) + list(table["ref_raw"])
    assert normalize_unique(texts, norm, workers=2) == normalize_unique(texts, norm, workers=1)
    one = score_table(table, norm, workers=1)
    two = score_table(table, norm, workers=2)
    pd.testing.assert_frame_equal(one.frame, two.frame)
    opts = ScoringOptions(n_boot=40)
    assert summarize_models(one, opts, workers=1) == summarize_models(two, opts, workers=2)


def test_bare_loop_and_inprocess_engine_agree_on_audio(demo_corpus: Path, tmp_path: Path) -> None:
    """Real clips of the demo corpus (the session's, not a second build in data/demo) through both paths;
    the null backend keeps it fast."""
    spec = bench.ModelSpec("null", bench.register_null_backend(), {}, 2)
    ds = bench.bench_dataset(6, 3, tmp_path, source="demo", demo_dir=demo_corpus)
    assert ds.name == "demo" and len(ds.shard_ids) == 2  # six demo clips re-chunked into shards of three
    bare = bench.bare_loop(spec, ds)
    eng = bench.inprocess_run(spec, ds, tmp_path)
    assert bare["audio_s"] == pytest.approx(eng["audio_s"])
    for r in (bare, eng):
        assert _positive(r["rtfx_wall"]) and _positive(r["rtfx_infer"])
        assert r["rtfx_infer"] >= r["rtfx_wall"] * 0.999  # summed batch time never exceeds the wall time
    assert eng["failed"] == 0


def test_memory_child_reports_peak_rss(tmp_path: Path) -> None:
    r = bench.memory_child(200, tmp_path / "mem")
    assert r["n_utts"] == 200 and r["peak_rss_mib"] >= r["rss_before_mib"] > 0
    ds = bench.streaming_dataset(130, shard_size=64)
    assert ds.shard_ids == ["s00000", "s00001", "s00002"] and len(ds.load_shard("s00002")) == 2


def test_leaderboard_formulas() -> None:
    wer, kept = oasr_compare.leaderboard_wer(["Hello, World!", "", "Mr. Smith"], ["hello world", "anything", "mister smyth"])
    assert kept == 2  # the empty reference is dropped, as the leaderboard does
    assert wer == pytest.approx(1 / 4)
    assert oasr_compare.leaderboard_rtfx([10.0, 20.0], [1.0, 2.0]) == pytest.approx(10.0)


def test_bench_cli_quick_scoring(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / "bench.py"), "scoring", "--quick", "--json", str(out)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "pairs/s" in proc.stdout and out.exists()


@pytest.mark.slow
def test_gpu_check_runs_on_cpu_without_optional_packages(tmp_path: Path) -> None:
    """``--device cpu --quick`` with soundfile, soxr, rapidfuzz, whisper-normalizer, jiwer, ray and
    mistral-common hidden, as on the GPU image: the engine still decodes (stand-in WAV reader) and both
    sides report RTFx. (mistral-common needs soundfile; installed without it, transformers fails to
    load any processor, so it is hidden with it, as the GPU image has neither.)"""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\nfrom importlib.machinery import PathFinder\n"
        "B = {'soundfile', '_soundfile', '_soundfile_data', 'soxr', 'rapidfuzz', 'whisper_normalizer', 'jiwer', 'ray', 'mistral_common'}\n"
        "class H(PathFinder):\n"
        "    @classmethod\n"
        "    def find_spec(cls, name, path=None, target=None):\n"
        "        return None if name.split('.')[0] in B else PathFinder.find_spec(name, path, target)\n"
        "sys.meta_path[:] = [H if m is PathFinder else m for m in sys.meta_path]\n"
    )
    env = dict(os.environ, PYTHON=sys.executable, PYTHONPATH=str(hide))
    out = tmp_path / "gpu.json"
    proc = subprocess.run(
        ["bash", str(SCRIPTS / "gpu_check.sh"), "--device", "cpu", "--quick", "--json", str(out)],
        check=False,
        capture_output=True,
        text=True,
        timeout=400,
        cwd=REPO,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "stdlib wave stand-in" in proc.stdout and "no Ray" in proc.stdout
    import json

    report = json.loads(out.read_text())
    assert {"soundfile", "ray", "rapidfuzz"} <= set(report["environment"]["missing_optional"])
    (worker,) = report["workers"]
    assert worker["n_clips"] == 12
    for side in ("bare", "engine"):
        assert _positive(worker["median"][f"{side}_rtfx_wall"]) and _positive(worker["median"][f"{side}_rtfx_infer"])
    assert all(run["failed"] == 0 and run["rows"] == 12 for run in worker["engine"])


@pytest.mark.slow
def test_gpu_check_models_runs_one_shard_per_model(tmp_path: Path) -> None:
    """``gpu_check.py --models TAG --device cpu``: each model in its own process on one shard, with
    load seconds, RTFx and WER; a model that cannot run is a row with its reason; hosted is skipped."""
    import json

    pytest.importorskip("transformers")
    from tests.conftest import espeak_wav, write_manifest
    from tests.tiny_families import build_ctc

    model = build_ctc(tmp_path / "hubert", "hubert")
    rows = [
        {"audio_filepath": str(espeak_wav(tmp_path / f"c{i}.wav", t)), "text": t} for i, t in enumerate(["the cat sat", "one two three"])
    ]
    manifest = write_manifest(tmp_path / "m.jsonl", rows)
    cfg = tmp_path / "cfg"
    (cfg / "models").mkdir(parents=True)
    (cfg / "recipes").mkdir()
    (cfg / "recipes" / "demo.yaml").write_text((REPO / "audit_configs" / "recipes" / "demo.yaml").read_text())
    (cfg / "models" / "t.yaml").write_text(
        "models:\n"
        f"  tiny-hubert: {{backend: transformers, family: ctc, options: {{model: {model}, device: cpu}}, batch_size: 2, tags: [t]}}\n"
        f"  gone: {{backend: transformers, family: ctc, options: {{model: {tmp_path / 'absent'}}}, tags: [t]}}\n"
        "  velma: {backend: modulate, family: hosted, options: {model: velma-2-stt-batch}, tags: [t]}\n"
    )
    out = tmp_path / "lineup.json"
    env = dict(os.environ, AUDIT_CONFIG_DIR=str(cfg), PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPTS / "gpu_check.py"),
            "--models",
            "t",
            "--device",
            "cpu",
            "--dataset",
            str(manifest),
            "--limit",
            "2",
            "--json",
            str(out),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    models = json.loads(out.read_text())["models"]
    tiny = models["tiny-hubert"]
    assert tiny["status"] == "loaded" and tiny["family"] == "ctc" and tiny["n_utts"] == 2
    assert _positive(tiny["load_s"]) and _positive(tiny["rtfx"]) and tiny["wer"] is not None
    assert models["gone"]["status"] == "unavailable" and "does not exist" in models["gone"]["error"]
    assert models["velma"]["status"] == "skipped" and "--include-hosted" in models["velma"]["error"]
    assert "| tiny-hubert | ctc | loaded |" in proc.stdout
