"""Weights & Biases: one W&B run per audit run; offline mode writes it to disk for a later ``wandb sync``.

Options (``--tracker-opt wandb.KEY=VALUE``): ``project`` (default: ``audit-engine``), ``entity``,
``mode`` (``online``, ``offline`` or ``disabled``; default: W&B's own, i.e. ``WANDB_MODE``),
``dir`` (where W&B keeps its files; default: W&B's, i.e. ``WANDB_DIR`` or the working directory)
and ``run_name`` (default: the run directory's name). The configuration is the nested facts
(recipe, normalizer, dataset, models); the figures are logged once, at step 0, and set as the run's
summary; ``summary.json``, ``report.md`` and ``recipe.json`` form one artifact of type ``audit-run``.
W&B's code, git and system-metrics capture are off: the run's own facts are what is logged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from audits.trackers.base import TrackedRun, Tracker, staging_dir
from engine.options import Options, option

_ARTIFACT_NAME = re.compile(r"[^A-Za-z0-9_\-.]")


@dataclass(frozen=True)
class WandbOptions(Options):
    """The ``wandb`` tracker's options (``--tracker-opt wandb.KEY=VALUE``)."""

    project: str = option("audit-engine", "W&B project")
    entity: str | None = option(None, "W&B entity (user or team); null: the account's default")
    mode: Literal["online", "offline", "disabled"] | None = option(None, "online, offline or disabled; null: W&B's default (WANDB_MODE)")
    dir: str | None = option(None, "folder for W&B's files; null: W&B's default (WANDB_DIR or the working directory)")
    run_name: str | None = option(None, "the W&B run's name; null: the run directory's name")


class WandbTracker(Tracker):
    """Logs the run's configuration, figures and files to Weights & Biases."""

    name: ClassVar[str] = "wandb"
    package: ClassVar[str] = "wandb"
    OPTIONS = WandbOptions
    options: WandbOptions

    def log(self, run: TrackedRun) -> dict[str, Any]:
        import wandb

        if self.options.dir:
            Path(self.options.dir).mkdir(parents=True, exist_ok=True)
        settings = wandb.Settings(save_code=False, disable_git=True, x_disable_stats=True, console="off", quiet=True)
        wb = wandb.init(
            project=self.options.project,
            entity=self.options.entity,
            mode=self.options.mode,
            dir=self.options.dir,
            name=self.options.run_name or run.name,
            config=run.config,
            tags=[str(run.recipe.get("name") or "audit")[:64]],
            settings=settings,
            reinit="create_new",
        )
        try:
            wb.log(dict(run.metrics), step=0)
            for k, v in run.tags.items():
                wb.summary[k] = v
            art = wandb.Artifact(_ARTIFACT_NAME.sub("_", f"audit-{run.name}")[:128], type="audit-run")
            with staging_dir() as tmp:
                for path in run.staged_files(Path(tmp)):
                    art.add_file(str(path), name=path.name)
                wb.log_artifact(art)
            where = {"run_id": wb.id, "project": wb.project, "mode": str(wb.settings.mode), "dir": str(Path(wb.dir).parent)}
            url = wb.url
            if url:
                where["url"] = url
        except BaseException:
            wb.finish(exit_code=1)
            raise
        wb.finish()
        return where
