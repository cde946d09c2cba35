"""The Ray engine as cluster operators run it: a head node started with ``ray start --head`` (its own
ports and temp dir, the dashboard on), ``audit run ... --engine ray`` submitted through the Jobs API
(``JobSubmissionClient``), so the driver finds the cluster through ``RAY_ADDRESS`` as under
``ray job submit``. The job must succeed, its run directory must equal an in-process run's, the
``--runtime-env`` file must be merged with the job's own and recorded in summary.json, and an
actor's log line must reach the job's logs. Audio: real speech from Debian's pocketsphinx-testdata; model: the bundled pocketsphinx.

The head node is stopped by killing the process group this test started (never ``ray stop``,
which would stop every Ray instance on the machine).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.test_ray_engine import TESTDATA, _testdata_clips

REPO = Path(__file__).resolve().parents[1]
RAY = Path(sys.executable).with_name("ray")
CLIPS = ["cards-001", "cards-002", "cards-003"]
MARK = "audit-job-test-7f3a"


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports nothing listens on now (bound to 0 together, then released)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Head:
    """``ray start --head --block`` in its own process group, every port chosen here (another Ray
    instance on the machine keeps its own), workers importing this checkout."""

    def __init__(self) -> None:
        # A short temp dir: Ray's socket paths must stay under the 107-byte limit.
        self.temp = Path(tempfile.mkdtemp(prefix="rayjob", dir="/tmp"))
        gcs, dash, client, agent, agent_grpc, metrics, rt_agent, node_mgr, obj_mgr = free_ports(9)
        self.gcs = f"127.0.0.1:{gcs}"
        self.dashboard = f"http://127.0.0.1:{dash}"
        # Token authentication off on this throwaway head (bound to 127.0.0.1): the test needs no token file in the home
        # directory; the engine passes nothing auth-related either way, Ray's client and workers handle it.
        env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
        env.pop("RAY_ADDRESS", None)
        cmd = [
            str(RAY),
            "start",
            "--head",
            "--block",
            f"--port={gcs}",
            "--node-ip-address=127.0.0.1",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dash}",
            f"--ray-client-server-port={client}",
            f"--dashboard-agent-listen-port={agent}",
            f"--dashboard-agent-grpc-port={agent_grpc}",
            f"--metrics-export-port={metrics}",
            f"--runtime-env-agent-port={rt_agent}",
            f"--node-manager-port={node_mgr}",
            f"--object-manager-port={obj_mgr}",
            "--num-cpus=2",
            "--num-gpus=0",
            f"--temp-dir={self.temp}",
            "--disable-usage-stats",
        ]
        self.log = open(self.temp / "head.log", "w")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def client(self, timeout_s: float = 90.0) -> Any:
        """A Jobs API client, once the dashboard answers."""
        from ray.job_submission import JobSubmissionClient

        end = time.monotonic() + timeout_s
        last: Exception | None = None
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ray start exited {self.proc.returncode}: {(self.temp / 'head.log').read_text()[-3000:]}")
            try:
                c = JobSubmissionClient(self.dashboard)
                c.list_jobs()
                return c
            except Exception as exc:  # noqa: BLE001 - the dashboard is still starting
                last = exc
                time.sleep(1.0)
        raise RuntimeError(f"the dashboard at {self.dashboard} did not answer in {timeout_s:.0f} s: {last}")

    def stop(self) -> None:
        """End the process group this test started (the head, GCS, raylet, dashboard, workers): SIGTERM, then
        SIGKILL for whatever is left after two seconds."""
        for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        self.log.close()
        shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture()
def head() -> Iterator[Head]:
    h = Head()
    try:
        yield h
    finally:
        h.stop()


def write_recipe(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    by_id = {c[0]: c for c in _testdata_clips()}
    manifest = folder / "manifest.jsonl"
    manifest.write_text(
        "".join(
            json.dumps({"utt_id": n, "audio_filepath": str(by_id[n][1]), "text": by_id[n][2], "speaker": n.split("-")[0]}) + "\n"
            for n in CLIPS
        )
    )
    recipe = folder / "job.yaml"
    recipe.write_text(
        f"name: ray-job\ndataset: {{path: {manifest}}}\nmodels: [pocketsphinx-en-us]\nshard_size: 2\nwarmup: 1\nscoring: {{n_boot: 50}}\n"
    )
    return recipe


def scored(run: Path) -> list[dict[str, Any]]:
    cols = ["utt_id", "model", "hyp_raw", "ref_raw", "hyp", "ref", "error", "errors", "ref_words", "shard"]
    table = pq.read_table(run / "utterances.parquet")
    return table.select([c for c in cols if c in table.column_names]).to_pylist()


@pytest.mark.skipif(not TESTDATA.is_dir(), reason="needs Debian's pocketsphinx-testdata")
def test_audit_run_submitted_as_a_ray_job(head: Head, tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path / "data")
    env_file = tmp_path / "runtime_env.yaml"
    env_file.write_text(f"env_vars:\n  AUDIT_JOB_MARK: {MARK}\n  HF_HUB_OFFLINE: '1'\n")
    client = head.client()
    out = tmp_path / "ray-run"
    cli = [sys.executable, "-m", "audits.cli", "run", str(recipe), "--out", str(out), "--engine", "ray", "--runtime-env", str(env_file)]
    # The job's own runtime_env (PYTHONPATH: this checkout) is merged by Ray with --runtime-env's (other keys).
    job = client.submit_job(
        entrypoint=f"cd {shlex.quote(str(REPO))} && {shlex.join(cli)}", runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}}
    )
    end = time.monotonic() + 240
    status = client.get_job_status(job)
    while not status.is_terminal() and time.monotonic() < end:
        time.sleep(1.0)
        status = client.get_job_status(job)
    logs = client.get_job_logs(job)
    assert str(status) == "SUCCEEDED", f"job {job}: {status}\n{logs[-4000:]}"
    assert "_system_config must not be provided" not in logs

    # a worker's logging record reached the job's logs through the driver (log_to_driver)
    assert "(ModelActor pid=" in logs and "model pocketsphinx-en-us loaded in" in logs, logs[-4000:]

    # the run directory is complete
    for name in ("summary.json", "utterances.parquet", "report.md", "report.html", "run.json"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())
    engine = summary["engine"]
    assert engine["runner"] == "ray" and engine["ray"]["cluster"] == "joined" and engine["ray"]["via"] == "RAY_ADDRESS"
    assert engine["runtime_env"] == {"env_vars": {"AUDIT_JOB_MARK": MARK, "HF_HUB_OFFLINE": "1"}}
    facts = summary["models"]["pocketsphinx-en-us"]
    assert facts["status"] == "loaded" and facts["n_utts"] == len(CLIPS) and facts["n_failed"] == 0

    # ... and equals an in-process run of the same recipe
    from typer.testing import CliRunner

    from audits.cli.main import app

    local = tmp_path / "local-run"
    res = CliRunner().invoke(app, ["run", str(recipe), "--out", str(local)])
    assert res.exit_code == 0, res.output[-3000:]
    assert scored(out) == scored(local) and len(scored(out)) == len(CLIPS)
    mine = json.loads((local / "summary.json").read_text())["models"]["pocketsphinx-en-us"]
    for key in ("wer", "cer", "ci95", "n_utts", "n_failed"):
        assert facts.get(key) == mine.get(key), key


# -- no cluster needed ----------------------------------------------------------------------------


def test_address_is_resolved_as_ray_init_does(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.errors import ConfigError
    from engine.run.ray_setup import ray_target

    monkeypatch.setenv("RAY_ADDRESS", "10.1.2.3:6379")
    assert ray_target(None) == "10.1.2.3:6379" and ray_target("auto") == "10.1.2.3:6379"  # as under `ray job submit`
    assert ray_target("10.9.9.9:6380") == "10.9.9.9:6380"  # an explicit address wins over RAY_ADDRESS
    assert ray_target("ray://head:10001") == "ray://head:10001"
    monkeypatch.setenv("RAY_ADDRESS", "http://127.0.0.1:8265")  # the Jobs API's address, set for `ray job submit`
    with pytest.raises(ConfigError, match=r"RAY_ADDRESS is http://127.0.0.1:8265, a dashboard \(Jobs API\) address.*HEAD_IP:6379"):
        ray_target(None)
    monkeypatch.delenv("RAY_ADDRESS")
    assert ray_target("local") is None


def test_runtime_env_flag_is_read_checked_and_recorded(tmp_path: Path) -> None:
    from engine.errors import ConfigError
    from engine.run.ray_setup import load_runtime_env, runtime_env_record

    inline = load_runtime_env('{"env_vars": {"HF_HOME": "/shared/hf"}, "working_dir": "."}')
    path = tmp_path / "env.yaml"
    path.write_text("env_vars:\n  HF_HOME: /shared/hf\nworking_dir: .\n")
    assert load_runtime_env(str(path)) == inline == {"env_vars": {"HF_HOME": "/shared/hf"}, "working_dir": "."}
    bad = {
        '{"env_var": {}}': r"unknown key 'env_var' \(did you mean 'env_vars'\?\)",
        '{"env_vars": {"OMP_NUM_THREADS": 4}}': r"env_vars.OMP_NUM_THREADS: Ray takes strings only, got int 4",
        '{"pip": 5}': "Ray refuses this runtime_env",
        '{"env_vars": ': "not valid JSON",
        str(tmp_path / "missing.yaml"): "neither inline JSON",
    }
    for text, problem in bad.items():
        with pytest.raises(ConfigError, match=problem):
            load_runtime_env(text)
    nan = tmp_path / "nan.yaml"
    nan.write_text("config: {setup_timeout_seconds: .nan}\n")
    with pytest.raises(ConfigError, match=f"--runtime-env {nan}: every value must be plain JSON"):
        load_runtime_env(str(nan))
    record = runtime_env_record({"env_vars": {"HF_HOME": "/shared/hf", "OPENAI_API_KEY": "sk-0123456789abcdef"}, "pip": ["jiwer"]})
    assert record == {"env_vars": {"HF_HOME": "/shared/hf", "OPENAI_API_KEY": "[redacted]"}, "pip": ["jiwer"]}


def test_bad_runtime_env_stops_the_cli_before_anything_runs(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from audits.cli.main import app

    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "demo", "--engine", "ray", "--out", str(out), "--runtime-env", '{"env_vars": {"N": 1}}'])
    assert res.exit_code == 2 and "env_vars.N: Ray takes strings only" in res.output, res.output
    assert not out.exists()


def test_audio_a_worker_missed_but_the_driver_reads_is_named(tmp_path: Path) -> None:
    """A node without the shared storage: its decode errors name paths this driver can read."""
    from engine.run.ray_setup import missing_on_workers

    here = tmp_path / "a.wav"
    here.write_bytes(b"RIFF")
    rows = [
        {"error": f"audio file not found: '{here}'"},
        {"error": f"audio file not found: '{tmp_path / 'gone.wav'}'"},
        {"error": None},
        {"error": "backend error: RuntimeError: boom"},
    ]
    assert missing_on_workers(rows) == [str(here)]  # a file missing everywhere is the dataset's problem, not the cluster's
