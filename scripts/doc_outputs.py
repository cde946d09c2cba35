"""The command outputs the docs quote, regenerated from the commands themselves.

A quoted output is a fenced block in a doc whose first line is ``$ audit ...`` (continued with
``\\`` on following lines) and whose other lines are what the command prints on stdout. Each block
listed in ``BLOCKS`` is produced by running its command in-process on the repository's fixtures;
``--write`` rewrites the docs, and without it the script lists the blocks that differ (exit 1).
tests/test_doc_outputs.py runs the same check, so a doc that no longer matches fails the suite.

    python scripts/doc_outputs.py            # check
    python scripts/doc_outputs.py --write    # regenerate
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIDTH = "200"
"""Terminal width the commands see: wider than any quoted table, so nothing is cut."""
_BOX = "┏┃┡│└┗━─"


def rich_table(lines: Sequence[str]) -> list[str]:
    """A rich table as printed: its title line and every line drawn with box characters (progress lines dropped)."""
    out: list[str] = []
    for i, line in enumerate(lines):
        if line[:1] in _BOX or (i + 1 < len(lines) and lines[i + 1][:1] == "┏"):
            out.append(line)
    return out


def _all(lines: Sequence[str]) -> list[str]:
    return list(lines)


@dataclass(frozen=True)
class DocBlock:
    """One quoted output: the doc, the command as the doc writes it, and which stdout lines the doc quotes."""

    doc: str
    command: str
    keep: Callable[[Sequence[str]], list[str]] = field(default=_all)


BLOCKS = (
    DocBlock("docs/datasets.md", "audit run score-predictions --out runs/voxpopuli-150", rich_table),
    DocBlock(
        "docs/probes.md",
        "audit probe bad-reference --preds tests/fixtures/voxpopuli-150-predictions "
        "--panel wav2vec2-base-960h,whisper-tiny.en,whisper-base.en,whisper-small.en",
    ),
    DocBlock("docs/probes.md", "audit probe orthography --preds tests/fixtures/voxpopuli-150-predictions --min-per-arm 3"),
)


def render(block: DocBlock, workdir: Path) -> list[str]:
    """The lines the doc should quote: the command run in-process from the repository root (``--out`` under ``workdir``)."""
    import os

    from typer.testing import CliRunner

    from audits.cli.main import app

    args = shlex.split(block.command)[1:]
    if "--out" in args:
        i = args.index("--out") + 1
        args[i] = str(workdir / args[i])
    here = Path.cwd()
    os.chdir(ROOT)  # the fixtures' paths are relative to the repository root
    try:
        res = CliRunner().invoke(app, args, env={"COLUMNS": WIDTH, "NO_COLOR": "1"})
    finally:
        os.chdir(here)
    if res.exit_code != 0:
        raise RuntimeError(f"{block.command} exited {res.exit_code}:\n{res.output}")
    return [line.rstrip() for line in block.keep(res.stdout.splitlines())]


def _find(text: str, block: DocBlock) -> tuple[int, int]:
    """(first, end) line indexes of the block's output in ``text`` (after the ``$`` lines, before the closing fence)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("$ audit "):
            continue
        j, cmd = i, line[2:]
        while cmd.endswith("\\"):
            j += 1
            cmd = cmd[:-1].rstrip() + " " + lines[j].strip()
        if shlex.split(cmd) == shlex.split(block.command):
            end = j + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            return j + 1, end
    raise LookupError(f"{block.doc}: no fenced block starting with '$ {block.command}'")


def quoted(block: DocBlock) -> list[str]:
    """The lines the doc quotes now."""
    text = (ROOT / block.doc).read_text(encoding="utf-8")
    first, end = _find(text, block)
    return [line.rstrip() for line in text.splitlines()[first:end]]


def write(block: DocBlock, lines: Sequence[str]) -> None:
    path = ROOT / block.doc
    text = path.read_text(encoding="utf-8")
    first, end = _find(text, block)
    all_lines = text.splitlines()
    all_lines[first:end] = list(lines)
    path.write_text("\n".join(all_lines) + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="rewrite the docs' quoted outputs")
    args = ap.parse_args(argv)
    stale = 0
    with tempfile.TemporaryDirectory(prefix="doc-outputs-") as tmp:
        for block in BLOCKS:
            got = render(block, Path(tmp))
            if got == quoted(block):
                continue
            stale += 1
            if args.write:
                write(block, got)
                print(f"rewrote {block.doc}: $ {block.command}")
            else:
                print(f"differs: {block.doc}: $ {block.command}")
    return 0 if args.write or not stale else 1


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
