"""The conversation audit as one section of a recipe run: ``parse_section`` before any model
loads, ``run_section`` after the ASR rows exist. It returns the dict stored under
``summary.json``'s ``conversation`` key; report.md and report.html render it with
:func:`audits.conversation.run.markdown_lines` and :func:`~audits.conversation.run.html_section`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audits.conversation.run import (
    ConversationConfig,
    ConversationData,
    conversation_summary,
    load_conversation_data,
    parse_conversation_config,
    resolve_dataset,
    run_conversation,
    write_recordings_csv,
)


@dataclass
class ConversationSection:
    """Validated settings plus the checked data, ready to run."""

    config: ConversationConfig
    data: ConversationData


def parse_section(recipe: Any) -> ConversationSection:
    """Validate the recipe's ``conversation:`` block and read and cross-check the set's
    references (a missing recording or a bad RTTM line fails here, before models load)."""
    from audits.recipes import data_dir

    cfg = parse_conversation_config(recipe.conversation, recipe.source)
    spec = cfg.dataset
    if spec == "dataset":  # the recipe's own dataset folder
        spec = recipe.dataset.path
    if spec.startswith("builtin:"):
        root = resolve_dataset(spec, data_dir())
    else:
        root = Path(spec)
    return ConversationSection(cfg, load_conversation_data(root))


def run_section(section: ConversationSection, recipe: Any, specs: Sequence[Any], out: Path, progress: Any = None) -> dict[str, Any]:
    """Run (or resume) and score; per-recording rows go to ``conversation/recordings.csv``."""
    from normalizers import get_normalizer

    asr_specs = [s for s in specs if getattr(s, "backend", "") != "predictions"]
    facts = run_conversation(section.config, section.data, asr_specs, out, progress)
    summary, rows = conversation_summary(section.config, section.data, [s.name for s in asr_specs], out, get_normalizer(recipe.normalizer), facts)
    write_recordings_csv(rows, out)
    summary["normalizer"] = recipe.normalizer
    return summary
