"""Experiment trackers (audits/trackers/): MLflow into a local file store, read back with MlflowClient;
Weights & Biases in offline mode, read back from the run's own .wandb file. Both real clients, no server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from audits.cli.main import app

pytest.importorskip("mlflow")
pytest.importorskip("wandb")

FIXTURE = Path(__file__).parent / "fixtures" / "voxpopuli-150-predictions"
MODELS = ("whisper-tiny.en", "distil-small.en")
N_CLIPS = 24


def _preds_with_labels(folder: Path) -> Path:
    """Two models' prediction files, 24 clips each, with an 'accent' label (two slices)."""
    folder.mkdir()
    for model in MODELS:
        lines = (FIXTURE / f"{model}.jsonl").read_text(encoding="utf-8").splitlines()[:N_CLIPS]
        rows = [dict(json.loads(line), accent="a" if i % 2 else "b") for i, line in enumerate(lines)]
        (folder / f"{model}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


def _recipe(path: Path, dataset: Path) -> Path:
    path.write_text(
        f"name: tracked\ndataset:\n  path: {dataset}\n  reader: oasr-predictions\nmodels: []\nnormalizer: whisper-english\n"
        "shard_size: 12\nscoring:\n  n_boot: 100\n  seed: 0\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def tracked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One `audit run --tracker mlflow --tracker wandb` of a small predictions recipe."""
    tmp = tmp_path_factory.mktemp("trackers")
    mp = pytest.MonkeyPatch()
    mp.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps the file store behind this switch
    mp.setenv("WANDB_MODE", "offline")
    mp.setenv("WANDB_DIR", str(tmp / "wandb-home"))
    mp.setenv("WANDB_CACHE_DIR", str(tmp / "wandb-cache"))
    mp.setenv("WANDB_DATA_DIR", str(tmp / "wandb-data"))
    mp.setenv("WANDB_CONFIG_DIR", str(tmp / "wandb-config"))
    recipe = _recipe(tmp / "tracked.yaml", _preds_with_labels(tmp / "preds"))
    out, store, wb = tmp / "run", tmp / "mlruns", tmp / "wb"
    res = CliRunner().invoke(
        app,
        [
            "run",
            str(recipe),
            "--out",
            str(out),
            "--tracker",
            "mlflow",
            "--tracker",
            "wandb",
            "--tracker-opt",
            f"mlflow.tracking_uri=file:{store}",
            "--tracker-opt",
            "mlflow.experiment=asr-audits",
            "--tracker-opt",
            f"wandb.dir={wb}",
            "--tracker-opt",
            "wandb.project=audits",
        ],
    )
    yield {"res": res, "out": out, "store": store, "wb": wb, "tmp": tmp, "mp": mp}
    mp.undo()


def _summary(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "summary.json").read_text(encoding="utf-8")))


def test_run_logs_to_both_trackers(tracked: dict[str, Any]) -> None:
    res = tracked["res"]
    assert res.exit_code == 0, res.output
    record = json.loads((tracked["out"] / "trackers.json").read_text(encoding="utf-8"))
    assert record["mlflow"]["ok"] and record["wandb"]["ok"], record
    assert record["mlflow"]["where"]["experiment"] == "asr-audits"
    assert record["wandb"]["where"]["mode"] == "offline"


def test_mlflow_run_read_back(tracked: dict[str, Any]) -> None:
    from mlflow.tracking import MlflowClient

    summary = _summary(tracked["out"])
    client = MlflowClient(tracking_uri=f"file:{tracked['store']}")
    exp = client.get_experiment_by_name("asr-audits")
    assert exp is not None
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    p, m = run.data.params, run.data.metrics
    # model facts and how the numbers were made
    for model in MODELS:
        assert p[f"model.{model}.backend"] == "predictions"
        assert p[f"model.{model}.status"] == "loaded"
        assert p[f"model.{model}.batch_size"] == "null" and p[f"model.{model}.device"] == "null"  # no audio was run: said, not invented
    assert p["normalizer.name"] == "whisper-english" and p["normalizer.version"] == summary["normalizer"]["version"]
    assert p["recipe.name"] == "tracked" and p["recipe.scoring.n_boot"] == "100"
    assert p["dataset.fingerprint"] == summary["dataset"]["fingerprint"]
    # per-model and per-slice figures, equal to summary.json's
    for model in MODELS:
        fig = summary["models"][model]
        assert m[f"{model}/wer"] == pytest.approx(fig["wer"])
        assert m[f"{model}/wer_ci95_low"] == pytest.approx(fig["ci95"][0])
        assert m[f"{model}/n_utts"] == N_CLIPS
        for value in ("a", "b"):
            assert m[f"{model}/slice/accent/{value}/wer"] == pytest.approx(fig["slices"][f"accent={value}"]["wer"])
            assert m[f"{model}/slice/accent/{value}/n_utts"] == N_CLIPS // 2
        assert f"{model}/rtfx" not in m  # null figure (no audio): left out, never 0
    assert run.data.tags["audit.summary_sha256"] == summary["digest"]["sha256"]
    # artifacts: the report, summary.json and the resolved recipe
    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"summary.json", "report.md", "recipe.json"} <= names
    local = Path(client.download_artifacts(run.info.run_id, "summary.json", str(tracked["tmp"] / "dl")))
    assert json.loads(local.read_text(encoding="utf-8")) == summary
    recipe = json.loads(Path(client.download_artifacts(run.info.run_id, "recipe.json", str(tracked["tmp"] / "dl"))).read_text())
    assert recipe == summary["recipe"]


def _wandb_records(run_file: Path) -> list[Any]:
    """The records of a W&B offline run file (a LevelDB-style log of protobuf ``Record``s: 7-byte header,
    32 KiB blocks, each chunk with a 7-byte header of checksum, length and type FULL/FIRST/MIDDLE/LAST)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = run_file.read_bytes()
    assert data[:4] == b":W&B", run_file
    pos, block, pending, out = 7, 32768, b"", []
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 0:
            continue
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(pending)
            out.append(rec)
            pending = b""
    return out


def test_wandb_offline_run_read_back(tracked: dict[str, Any]) -> None:
    summary = _summary(tracked["out"])
    (run_file,) = list(Path(tracked["wb"]).glob("wandb/offline-run-*/run-*.wandb"))
    records = _wandb_records(run_file)
    runs = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert runs and runs[0].project == "audits" and runs[0].display_name == "run"
    config = {i.key: json.loads(i.value_json) for r in runs for i in r.config.update}
    models = config["models"]["value"] if "value" in config["models"] else config["models"]
    assert models["whisper-tiny.en"]["backend"] == "predictions"
    norm = config["normalizer"]["value"] if "value" in config["normalizer"] else config["normalizer"]
    assert norm == summary["normalizer"]
    history = {
        "/".join(i.nested_key) or i.key: json.loads(i.value_json)
        for r in records
        if r.WhichOneof("record_type") == "history"
        for i in r.history.item
    }
    fig = summary["models"]["distil-small.en"]
    assert history["distil-small.en/wer"] == pytest.approx(fig["wer"])
    assert history["distil-small.en/slice/accent/a/wer"] == pytest.approx(fig["slices"]["accent=a"]["wer"])
    arts = [r.artifact for r in records if r.WhichOneof("record_type") == "artifact"]
    assert len(arts) == 1 and arts[0].type == "audit-run"
    assert {c.path for c in arts[0].manifest.contents} == {"summary.json", "report.md", "recipe.json"}


def test_tracker_failure_keeps_results(tracked: dict[str, Any]) -> None:
    """A tracker that cannot log (its store is a file, not a folder) fails the command, not the run: the results stay and read back."""
    from audits.run_dir import read_run

    blocker = tracked["tmp"] / "not-a-folder"
    blocker.write_text("x")
    before = (tracked["out"] / "summary.json").read_bytes()
    res = CliRunner().invoke(
        app, ["track", str(tracked["out"]), "--tracker", "mlflow", "--tracker-opt", f"mlflow.tracking_uri=file:{blocker}/store"]
    )
    assert res.exit_code == 1, res.output
    assert "tracker mlflow failed" in res.output and f"audit track {tracked['out']} --tracker mlflow" in " ".join(res.output.split())
    record = json.loads((tracked["out"] / "trackers.json").read_text(encoding="utf-8"))
    assert record["mlflow"]["ok"] is False and record["mlflow"]["error"]
    assert record["wandb"]["ok"] is True  # the earlier success is kept
    assert (tracked["out"] / "summary.json").read_bytes() == before
    read_run(tracked["out"], strict=True)  # digests still hold


def test_secrets_never_reach_a_tracker(tracked: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A value held in a secret-named variable is scrubbed from names, parameters, tags and uploaded files."""
    secret = "tok-9f8e7d6c5b4a39281706"
    run = tracked["tmp"] / f"run-{secret}"
    import shutil

    shutil.copytree(tracked["out"], run)
    monkeypatch.setenv("VENDOR_API_KEY", secret)
    store, wb = tmp_path / "mlruns", tmp_path / "wb"
    res = CliRunner().invoke(
        app,
        [
            "track",
            str(run),
            "--tracker",
            "mlflow",
            "--tracker",
            "wandb",
            "--tracker-opt",
            f"mlflow.tracking_uri=file:{store}",
            "--tracker-opt",
            f"wandb.dir={wb}",
        ],
    )
    assert res.exit_code == 0, res.output
    assert secret not in res.output
    leaked = [p for p in [*store.rglob("*"), *wb.rglob("*")] if p.is_file() and secret.encode() in p.read_bytes()]
    leaked += [p for p in [*store.rglob("*"), *wb.rglob("*")] if secret in p.name]
    assert not leaked, leaked
    from mlflow.tracking import MlflowClient

    (mrun,) = MlflowClient(tracking_uri=f"file:{store}").search_runs(
        [MlflowClient(f"file:{store}").get_experiment_by_name("tracked").experiment_id]
    )
    assert "[redacted]" in mrun.info.run_name and "[redacted]" in mrun.data.tags["audit.run_dir"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tracker", "mlfow"], "did you mean 'mlflow'"),
        (["--tracker", "mlflow", "--tracker-opt", "mlflow.uri=x"], "has no option 'uri'"),
        (["--tracker", "wandb", "--tracker-opt", "wandb.mode=offlin"], "did you mean 'offline'"),
        (["--tracker", "mlflow", "--tracker-opt", "wandb.mode=offline"], "add --tracker wandb"),
        (["--tracker-opt", "mlflow.experiment=x"], "--tracker-opt needs --tracker"),
        (["--tracker", "mlflow", "--tracker-opt", "experiment=x"], "expected TRACKER.KEY=VALUE"),
    ],
)
def test_tracker_flags_refused_before_the_run(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "score-predictions", "--out", str(out), *args])
    assert res.exit_code == 2, res.output
    assert message in " ".join(res.output.split())
    assert not out.exists()  # nothing ran


def test_tracker_kind_is_a_registry_group() -> None:
    from audits.trackers import TRACKERS

    assert TRACKERS.group == "audit_engine.trackers"
    assert {"mlflow", "wandb"} <= set(TRACKERS.names())
    assert TRACKERS.get("mlflow").name == "mlflow" and TRACKERS.get("wandb").name == "wandb"


def test_docs_option_tables_match_the_code() -> None:
    """docs/trackers.md's option tables are the trackers' options records, row for row."""
    from audits.trackers import TRACKERS

    doc = (Path(__file__).resolve().parents[1] / "docs" / "trackers.md").read_text(encoding="utf-8")
    for name in ("mlflow", "wandb"):
        for row in TRACKERS.get(name).OPTIONS.doc_rows():
            assert row in doc, f"docs/trackers.md lacks the {name} option row: {row}"
