"""MLflow: one MLflow run per audit run, through ``MlflowClient`` (no global active run is touched).

Options (``--tracker-opt mlflow.KEY=VALUE``): ``tracking_uri`` (default: MLflow's own, i.e.
``MLFLOW_TRACKING_URI``), ``experiment`` (default: the recipe's name) and ``run_name`` (default:
the run directory's name). Parameters, metrics and tags go in batches of MLflow's size limits.
"""

from __future__ import annotations

import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from audits.trackers.base import TrackedRun, Tracker, staging_dir
from engine.options import Options, option

#: MLflow's per-request limits of log_batch (mlflow.utils.validation)
_MAX_PARAMS, _MAX_METRICS, _MAX_TAGS = 100, 1000, 100


def _safe_uri(uri: str) -> str:
    """A tracking URI as recorded: without any user and password it carries."""
    parts = urllib.parse.urlsplit(uri)
    if parts.username is None and parts.password is None:
        return uri
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


@dataclass(frozen=True)
class MlflowOptions(Options):
    """The ``mlflow`` tracker's options (``--tracker-opt mlflow.KEY=VALUE``)."""

    tracking_uri: str | None = option(None, "MLflow tracking URI (http://..., databricks, sqlite:///..., file:...); null: MLflow's default")
    experiment: str | None = option(None, "experiment name; null: the recipe's name")
    run_name: str | None = option(None, "the MLflow run's name; null: the run directory's name")


class MlflowTracker(Tracker):
    """Logs the run's parameters, metrics, tags and artifacts to an MLflow tracking server or store."""

    name: ClassVar[str] = "mlflow"
    package: ClassVar[str] = "mlflow"
    OPTIONS = MlflowOptions
    options: MlflowOptions

    def log(self, run: TrackedRun) -> dict[str, Any]:
        from mlflow.entities import Metric, Param, RunTag
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=self.options.tracking_uri)
        experiment = self.options.experiment or str(run.recipe.get("name") or "audit-engine")
        found = client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found is not None else client.create_experiment(experiment)
        mlrun = client.create_run(experiment_id, run_name=self.options.run_name or run.name, tags=run.tags)
        run_id = mlrun.info.run_id
        try:
            stamp = int(time.time() * 1000)
            params = [Param(k, v) for k, v in sorted(run.params.items())]
            metrics = [Metric(k, v, stamp, 0) for k, v in sorted(run.metrics.items())]
            for i in range(0, len(params), _MAX_PARAMS):
                client.log_batch(run_id, params=params[i : i + _MAX_PARAMS])
            for i in range(0, len(metrics), _MAX_METRICS):
                client.log_batch(run_id, metrics=metrics[i : i + _MAX_METRICS])
            client.log_batch(run_id, tags=[RunTag("audit.n_metrics", str(len(metrics)))])
            with staging_dir() as tmp:
                for path in run.staged_files(Path(tmp)):
                    client.log_artifact(run_id, str(path))
        except BaseException:
            client.set_terminated(run_id, "FAILED")
            raise
        client.set_terminated(run_id, "FINISHED")
        return {
            "run_id": run_id,
            "experiment": experiment,
            "experiment_id": experiment_id,
            "tracking_uri": _safe_uri(str(client.tracking_uri)),
        }
