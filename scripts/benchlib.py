"""Helpers shared by the benchmark scripts: model specs, the benchmark dataset, decoded clips, tables."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

from engine.data import DecodedAudio, DecodeOptions, ModelSpec  # noqa: E402
from engine.datasets import Dataset, open_dataset  # noqa: E402
from engine.datasets.base import in_memory_dataset  # noqa: E402
from engine.errors import AuditError, ConfigError  # noqa: E402
from engine.run.runner import decode_shard  # noqa: E402

log = logging.getLogger("bench")


DEMO = REPO / "data" / "demo"


DEFAULT_DECODE = DecodeOptions()


TESTDATA = Path("/usr/share/pocketsphinx/test/data")


# Used when the model registry (audit_configs/models) cannot be read.
FALLBACK_SPECS = {
    "whisper-tiny.en": ModelSpec("whisper-tiny.en", "faster-whisper", {"model": "tiny.en", "compute_type": "int8", "beam_size": 1}, 8),
    "pocketsphinx-en-us": ModelSpec("pocketsphinx-en-us", "pocketsphinx", {}, 1),
}


# ----------------------------------------------------------------------------------------------
# shared pieces
# ----------------------------------------------------------------------------------------------
def resolve_specs(names: Sequence[str]) -> list[ModelSpec]:
    """Registry models by name (audit_configs/models), or the two built-in fallbacks."""
    try:
        from engine.model_registry import load_model_registry, resolve_models

        return [e.spec() for e in resolve_models(list(names), load_model_registry())]
    except (ImportError, AuditError) as exc:
        missing = [n for n in names if n not in FALLBACK_SPECS]
        if missing:
            raise ConfigError(
                f"unknown model(s) {missing}: the registry could not be used ({exc}); built-in: {sorted(FALLBACK_SPECS)}"
            ) from exc
        return [FALLBACK_SPECS[n] for n in names]


def bench_dataset(n_utts: int, shard_size: int, work: Path, source: str = "auto", demo_dir: Path = DEMO) -> Dataset:
    """The demo corpus (``demo_dir``, by default ``data/demo``, built on demand) or, failing that, the
    pocketsphinx test clips."""
    if source in ("auto", "demo"):
        try:
            if not (demo_dir / "corpus.json").exists():
                from audits.pipeline import ensure_demo_corpus

                ensure_demo_corpus(demo_dir)
            demo = open_dataset(demo_dir, limit=n_utts)
            # the corpus has its own Parquet shards; re-chunk so that shard_size holds here too
            utts = [u for sid in demo.shard_ids for u in demo.load_shard(sid).utterances][:n_utts]
            return in_memory_dataset("demo", demo.source, demo.reader, utts, shard_size, demo.root)
        except Exception as exc:
            if source == "demo":
                raise
            log.warning("demo corpus unavailable (%s); using %s", exc, TESTDATA)
    return open_dataset(testdata_manifest(work / "testdata", n_utts), shard_size=shard_size)


def decoded_clips(ds: Dataset, opts: DecodeOptions = DEFAULT_DECODE) -> list[DecodedAudio]:
    """Every decodable clip of the dataset, in dataset order."""
    return [d for sid in ds.shard_ids for d in decode_shard(ds.load_shard(sid), ds.root, opts) if d.error is None]


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], note: str | None = None) -> None:
    """A plain-text table on stdout (results are the product of this script, so they are printed)."""
    cells = [[c if isinstance(c, str) else (f"{c:.3f}" if isinstance(c, float) else str(c)) for c in r] for r in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) if cells else len(str(h)) for i, h in enumerate(columns)]
    line = "  ".join("-" * w for w in widths)
    out = [f"\n== {title} ==", "  ".join(str(h).ljust(w) for h, w in zip(columns, widths)), line]
    out += ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in cells]
    if note:
        out.append(note)
    print("\n".join(out), flush=True)


def testdata_manifest(folder: Path, n_utts: int) -> Path:
    """Debian's pocketsphinx-testdata clips (real speech), repeated under derived ids to ``n_utts``."""
    wavs = sorted(TESTDATA.glob("*/*.wav"))
    if not wavs:
        raise AuditError(f"no clips under {TESTDATA}: apt-get install pocketsphinx-testdata, or build the demo corpus")
    refs: dict[str, str] = {}
    for trans in TESTDATA.glob("*/*transcription"):
        for line in trans.read_text(errors="replace").splitlines():
            if line.rstrip().endswith(")") and "(" in line:
                text, uid = line.rsplit("(", 1)
                refs[uid.strip().rstrip(")")] = " ".join(text.replace("<s>", " ").replace("</s>", " ").split())
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / "manifest.jsonl"
    with open(manifest, "w", encoding="utf-8") as fh:
        for i in range(n_utts):
            w = wavs[i % len(wavs)]
            fh.write(
                json.dumps({"utt_id": f"{w.parent.name}-{w.stem}-{i:05d}", "audio_filepath": str(w), "text": refs.get(w.stem, "unknown")})
                + "\n"
            )
    return manifest
