"""Experiment trackers: a finished run's recipe, model facts, figures and report logged to MLflow,
Weights & Biases or a plug-in's tracker (entry-point group ``audit_engine.trackers``)."""

from __future__ import annotations

from audits.trackers.base import TRACKERS, TrackedRun, Tracker, TrackerOutcome, log_run_to_trackers, make_trackers, tracked_run

__all__ = ["TRACKERS", "Tracker", "TrackedRun", "TrackerOutcome", "log_run_to_trackers", "make_trackers", "tracked_run"]
