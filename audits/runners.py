"""What a recipe run asks of its runner: the ``--engine`` name checked up front, and how the run decodes audio.

The runners themselves are registry entries of the engine (``engine.engine.RUNNERS``, entry-point
group ``audit_engine.runners``): each declares the pass kinds it runs, and the engine asks that
declaration, so nothing here or in the pipeline branches on a runner's name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.data import DecodeOptions
from engine.engine import runner_class

if TYPE_CHECKING:
    from audits.recipes import Recipe


def decode_options(recipe: Recipe) -> DecodeOptions:
    """How a run decodes audio (duration bound, paths outside the dataset root): the one definition,
    used by the runners and by the audit sections' context."""
    return DecodeOptions(max_duration_s=recipe.dataset.max_duration_s, allow_outside_root=recipe.dataset.allow_outside_root)


def check_runner(kind: str) -> None:
    """Refuse an unknown runner name, or an entry that declares no pass kinds the engine knows, before
    anything opens (``ConfigError`` with close matches)."""
    runner_class(kind)
