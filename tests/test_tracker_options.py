"""Trackers' options through the typed option layer: each tracker declares a frozen record, and a bad
value, an unknown key or a NaN is refused naming the tracker and the key (no tracker package needed:
options are checked before anything is sent)."""

from __future__ import annotations

import math
from dataclasses import FrozenInstanceError
from typing import Any

import pytest

from audits.trackers import TRACKERS
from audits.trackers.base import Tracker, TrackerError, make_trackers
from audits.trackers.mlflow_tracker import MlflowOptions
from audits.trackers.wandb_tracker import WandbOptions
from engine.errors import ConfigError


def test_a_tracker_receives_its_frozen_record_with_the_defaults() -> None:
    mlflow, wandb = TRACKERS.get("mlflow")(), TRACKERS.get("wandb")({"mode": "offline", "dir": "wb"})
    assert isinstance(mlflow.options, MlflowOptions) and isinstance(wandb.options, WandbOptions)
    assert (mlflow.options.tracking_uri, mlflow.options.experiment, mlflow.options.run_name) == (None, None, None)
    assert (wandb.options.project, wandb.options.mode, wandb.options.dir, wandb.options.entity) == ("audit-engine", "offline", "wb", None)
    with pytest.raises(FrozenInstanceError):
        wandb.options.mode = "online"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("mlflow", {"experiment": 3}, "tracker 'mlflow'.experiment: expected a string, got int 3"),
        ("wandb", {"mode": True}, "tracker 'wandb'.mode: expected a string, got bool True"),
        ("wandb", {"mode": "offlin"}, "tracker 'wandb'.mode: 'offlin' is not allowed (did you mean 'offline'?); use one of online"),
        ("wandb", {"project": math.nan}, "tracker 'wandb'.project: expected a string, got float nan"),
        ("wandb", {"project": None}, "tracker 'wandb'.project: expected a string, got null"),
        ("mlflow", {"experimnt": "x"}, "tracker 'mlflow': unknown key 'experimnt' (did you mean 'experiment'?); allowed: experiment, "),
    ],
)
def test_a_bad_tracker_option_is_refused_naming_tracker_and_key(name: str, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        TRACKERS.get(name)(options)
    assert message in str(info.value)


def test_tracker_opt_values_are_typed_by_the_record() -> None:
    pytest.importorskip("mlflow")
    pytest.importorskip("wandb")
    (wandb,) = make_trackers(["wandb"], ["wandb.mode=offline", "wandb.project=2020"])
    assert (wandb.options.mode, wandb.options.project) == ("offline", "2020")  # text stays text
    with pytest.raises(ConfigError, match=r"tracker 'wandb' has no option 'projct' \(did you mean 'project'\?\); known: dir, "):
        make_trackers(["wandb"], ["wandb.projct=x"])


def test_a_tracker_declaring_the_old_fields_mapping_is_refused_saying_what_to_declare() -> None:
    class OldStyle(Tracker):
        name = "old-style"
        FIELDS: Any = {"url": None}

        def log(self, run: Any) -> dict[str, Any]:
            return {}

    with pytest.raises(TrackerError, match=r"tracker 'old-style' declares its options as a mapping of fields \(FIELDS\).*declare OPTIONS"):
        OldStyle()


def test_a_tracker_without_options_refuses_any() -> None:
    class Bare(Tracker):
        name = "bare"

        def log(self, run: Any) -> dict[str, Any]:
            return {}

    assert Bare().options.as_dict() == {}
    with pytest.raises(ConfigError, match=r"tracker 'bare': unknown key 'url'; allowed: none"):
        Bare({"url": "x"})
