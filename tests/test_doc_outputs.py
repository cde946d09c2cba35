"""Every command output the docs quote is what the command prints now (scripts/doc_outputs.py lists them;
`python scripts/doc_outputs.py --write` regenerates them)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import doc_outputs  # noqa: E402


@pytest.mark.parametrize("block", doc_outputs.BLOCKS, ids=lambda b: f"{b.doc}:{b.command.split()[2]}")
def test_quoted_output_is_what_the_command_prints(block: doc_outputs.DocBlock, tmp_path: Path) -> None:
    got = doc_outputs.render(block, tmp_path)
    assert len(got) >= 5, got  # a table, not an empty or cut output
    assert got == doc_outputs.quoted(block), (
        f"{block.doc} quotes an output of '$ {block.command}' that the command no longer prints; run: python scripts/doc_outputs.py --write"
    )
