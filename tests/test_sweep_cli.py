"""`audit sweep` end to end through the command line, with simulated models in a temporary
registry: selection by tag, list and all; models skipped up front only for a definite "no"; a
model whose weights only the loading process can judge is attempted and recorded with that
process's reason; bad input stops before anything loads; an unreachable --address fails fast."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from audits.cli.main import app
from tests.test_gpu_placement import sim_dataset


def _registry(cfg: Path, trace: Path) -> None:
    (cfg / "models").mkdir(parents=True)
    t = f"trace_dir: '{trace}'"
    (cfg / "models" / "sim.yaml").write_text(
        "models:\n"
        f"  sim-a: {{backend: simulated, options: {{rtfx: 1000, {t}}}, batch_size: 4, params_m: 10, tags: [sim, fast, rweq]}}\n"
        f"  sim-b: {{backend: simulated, options: {{rtfx: 500, seed: 1, {t}}}, batch_size: 4, params_m: 20, tags: [sim, rweq]}}\n"
        f"  sim-hub: {{backend: simulated, options: {{unavailable: weights not in this worker's cache, {t}}}, tags: [sim]}}\n"
        f"  sim-missing: {{backend: simulated, options: {{missing: needs package foo, {t}}}, tags: [sim]}}\n"
        f"  sim-control: {{backend: simulated, options: {{{t}}}, tags: [control]}}\n"
    )


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    cfg, trace = tmp_path / "configs", tmp_path / "trace"
    trace.mkdir()
    _registry(cfg, trace)
    monkeypatch.setenv("AUDIT_CONFIG_DIR", str(cfg))
    monkeypatch.setenv("COLUMNS", "250")
    ds = sim_dataset(tmp_path / "data", 4, shard_size=2)
    recipe = tmp_path / "sweep.yaml"
    recipe.write_text(f"name: sweep\ndataset: {{path: {ds.source}}}\nmodels: [sim-a]\nshard_size: 2\nwarmup: 0\nscoring: {{n_boot: 20}}\n")
    return {"recipe": str(recipe), "trace": trace, "tmp": tmp_path, "data": ds.source}


def audit(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def loaded(trace: Path) -> set[str]:
    return {json.loads(line)["model"] for p in trace.glob("*.jsonl") for line in p.read_text().splitlines() if '"load"' in line}


def test_sweep_by_tag_attempts_advisory_models_and_skips_definite_ones(env: dict[str, Any]) -> None:
    out = env["tmp"] / "run"
    res = audit("sweep", env["recipe"], "--models", "sim", "--out", str(out))
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    sweep = summary["sweep"]
    assert sweep["run"] == ["sim-a", "sim-b", "sim-hub"]
    assert sweep["skipped"] == {"sim-missing": "simulated: needs package foo"}
    assert "sim-hub" in sweep["not_checked_by_driver"]
    hub = summary["models"]["sim-hub"]
    assert hub["status"] == "unavailable" and "weights not in this worker's cache" in hub["error"]
    assert summary["models"]["sim-a"]["n_utts"] == 4 and summary["models"]["sim-b"]["n_utts"] == 4
    assert "sim-hub did not run" in res.output and "sim-missing" in res.output


def test_sweep_all_skips_the_control_and_a_list_selects_exactly(env: dict[str, Any]) -> None:
    res = audit("sweep", env["recipe"], "--models", "all", "--out", str(env["tmp"] / "all"))
    assert res.exit_code == 0, res.output
    sweep = json.loads((env["tmp"] / "all" / "summary.json").read_text())["sweep"]
    assert "positive control" in sweep["skipped"]["sim-control"] and "sim-missing" in sweep["skipped"]
    res = audit("sweep", env["recipe"], "--models", "sim-b,sim-control", "--out", str(env["tmp"] / "list"))
    assert res.exit_code == 0, res.output
    summary = json.loads((env["tmp"] / "list" / "summary.json").read_text())
    assert summary["sweep"]["run"] == ["sim-b", "sim-control"] and sorted(summary["models"]) == ["sim-b", "sim-control"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--models", "sim-a,sim-a"], "model 'sim-a' is named twice"),
        (["--models", "sim-a,sim-z"], "unknown model 'sim-z'"),
        (["--models", "nosuchtag"], "'nosuchtag' is neither a registry model nor a tag"),
        (["--models", "sim", "--dataset", "/nonexistent/track.jsonl"], "dataset '/nonexistent/track.jsonl'"),
    ],
)
def test_bad_input_stops_before_anything_loads(env: dict[str, Any], args: list[str], message: str) -> None:
    out = env["tmp"] / "bad"
    res = audit("sweep", env["recipe"], *args, "--out", str(out))
    assert res.exit_code == 2
    assert message in res.output
    assert loaded(env["trace"]) == set() and not out.exists()


def test_every_model_skipped_is_a_clear_error(env: dict[str, Any]) -> None:
    res = audit("sweep", env["recipe"], "--models", "sim-missing", "--out", str(env["tmp"] / "none"))
    assert res.exit_code == 2 and "no selected model can run" in res.output and "needs package foo" in res.output


def test_unreachable_address_fails_fast_saying_what_was_tried(env: dict[str, Any]) -> None:
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    res = audit("sweep", env["recipe"], "--models", "sim-a", "--address", f"127.0.0.1:{port}", "--out", str(env["tmp"] / "addr"))
    took = time.monotonic() - t0
    assert res.exit_code == 2, res.output
    assert took <= 30, f"took {took:.0f} s"
    assert f"cannot reach the Ray cluster at '127.0.0.1:{port}': tried a TCP connection to 127.0.0.1:{port}" in res.output
    assert loaded(env["trace"]) == set()


@pytest.mark.slow
def test_check_asks_the_workers_and_runs_nothing(env: dict[str, Any]) -> None:
    res = audit("sweep", env["recipe"], "--models", "sim", "--check")
    assert res.exit_code == 0, res.output
    lines = {ln.split("│")[1].strip(): ln for ln in res.output.splitlines() if ln.count("│") >= 4 and "sim-" in ln}
    assert "yes" in lines["sim-a"] and "worker" in lines["sim-a"]
    assert "no" in lines["sim-missing"] and "needs package foo" in lines["sim-missing"]
    assert "weights not in this worker's cache" in lines["sim-hub"]
    assert loaded(env["trace"]) == set()
    assert not (Path("runs") / "sweep-sweep").exists()


def test_tracks_give_per_track_wer_and_the_average(env: dict[str, Any]) -> None:
    second = sim_dataset(env["tmp"] / "data2", 6, shard_size=3, seconds=0.5)
    out = env["tmp"] / "tracks"
    res = audit(
        "sweep",
        env["recipe"],
        "--models",
        "sim-a,sim-b",
        "--tracks",
        f"accent={env['data']},noise={second.source}",
        "--out",
        str(out),
        "--gpu-hour-usd",
        "0.5",
    )
    assert res.exit_code == 0, res.output
    tracks = json.loads((out / "tracks.json").read_text())
    assert tracks["trade_offs"]["gpu_hour_usd"] == 0.5 and set(tracks["trade_offs"]["tracks"]) == {"accent", "noise"}
    sim_a = tracks["trade_offs"]["average"]["models"]["sim-a"]
    assert sim_a["cost_per_audio_hour_usd"] == pytest.approx(0.5 / sim_a["rtfx"])
    for name in ("accent", "noise"):
        run = json.loads((out / name / "summary.json").read_text())
        for model in ("sim-a", "sim-b"):
            assert tracks["models"][model]["tracks"][name]["wer"] == pytest.approx(run["models"][model]["wer"])
    for model in ("sim-a", "sim-b"):
        m = tracks["models"][model]
        assert m["average_wer"] == pytest.approx((m["tracks"]["accent"]["wer"] + m["tracks"]["noise"]["wer"]) / 2)
        # the simulated models miss every word of every clip: no clip varies, so no interval can be drawn
        assert m["average_ci95"] is None, m
        assert m["average_not_testable"] == "no variance: every clip of track 'accent' has the same WER (100.0%)"
    assert tracks["ranking"] == sorted(["sim-a", "sim-b"], key=lambda x: tracks["models"][x]["average_wer"])
    assert set(tracks["winners"]) == {"accent", "noise"}
    assert "Average WER" in (out / "tracks.md").read_text()
    page = (out / "tracks.html").read_text()
    assert "<th>accent</th><th>noise</th><th>Average WER</th>" in page and "sim-a" in page
    again = audit("tracks", f"accent={out / 'accent'}", f"noise={out / 'noise'}", "--out", str(env["tmp"] / "t2"), "--n-boot", "20")
    assert again.exit_code == 0, again.output
    t2 = json.loads((env["tmp"] / "t2" / "tracks.json").read_text())
    assert t2["models"]["sim-a"]["average_wer"] == pytest.approx(tracks["models"]["sim-a"]["average_wer"])


def test_a_sweep_of_the_study_line_up_scores_with_the_leaderboard_normalizer(env: dict[str, Any]) -> None:
    """--models rweq: the runs, the tracks and the profiles gap table use open-asr-leaderboard (recorded with the
    leaderboard commit it follows); --normalizer keeps the recipe's."""
    from normalizers.leaderboard_tables import LEADERBOARD_COMMIT

    recipe = Path(env["recipe"])
    recipe.write_text(recipe.read_text() + "profiles: {n_boot: 20}\n")
    second = sim_dataset(env["tmp"] / "data2", 4, shard_size=2, seconds=0.5)
    out = env["tmp"] / "rweq"
    res = audit("sweep", str(recipe), "--models", "rweq", "--tracks", f"accent={env['data']},noise={second.source}", "--out", str(out))
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert "scored with open-asr-leaderboard (the study's normalizer) instead of the recipe's whisper-english" in said
    leaderboard = {"name": "open-asr-leaderboard", "version": f"huggingface/open_asr_leaderboard@{LEADERBOARD_COMMIT}"}
    tracks = json.loads((out / "tracks.json").read_text())
    assert tracks["normalizer"] == leaderboard
    for name in ("accent", "noise"):
        summary = json.loads((out / name / "summary.json").read_text())
        assert summary["normalizer"] == leaderboard and summary["sweep"]["run"] == ["sim-a", "sim-b"]
        assert summary["profiles"]["normalizer"] == "open-asr-leaderboard"
        assert json.loads((out / name / "run.json").read_text())["normalizer_version"] == leaderboard["version"]
    kept = env["tmp"] / "kept"
    res = audit("sweep", str(recipe), "--models", "rweq", "--normalizer", "whisper-english", "--out", str(kept))
    assert res.exit_code == 0, res.output
    assert json.loads((kept / "summary.json").read_text())["normalizer"]["name"] == "whisper-english"
    res = audit("sweep", str(recipe), "--models", "rweq", "--normalizer", "whisper-englsh", "--out", str(env["tmp"] / "typo"))
    assert res.exit_code == 2 and "did you mean 'whisper-english'" in res.output and not (env["tmp"] / "typo").exists()


def test_a_track_with_a_missing_dataset_stops_before_anything_loads(env: dict[str, Any]) -> None:
    res = audit(
        "sweep",
        env["recipe"],
        "--models",
        "sim-a",
        "--tracks",
        f"accent={env['data']},noise=/nonexistent/noise.jsonl",
        "--out",
        str(env["tmp"] / "t"),
    )
    assert res.exit_code == 2 and "track 'noise': dataset '/nonexistent/noise.jsonl'" in res.output
    assert loaded(env["trace"]) == set() and not (env["tmp"] / "t").exists()
    res = audit(
        "sweep",
        env["recipe"],
        "--models",
        "sim-a",
        "--tracks",
        f"accent={env['data']},accent={env['data']}",
        "--out",
        str(env["tmp"] / "t"),
    )
    assert res.exit_code == 2 and "track 'accent' is named twice" in res.output
