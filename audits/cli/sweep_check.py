"""``audit sweep RECIPE --check [--smoke]``: ask before running.

Per model: can it run where it would be scheduled (every reason it would not, one per line), its
family, the pip extra it needs, where its weights are, and on which worker that was checked. ``--smoke`` then loads each runnable model in
a fresh worker process and transcribes one clip (the recipe's first clip; an espeak-ng phrase when
the dataset is the demo corpus and it has not been built yet), with load seconds and peak memory.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from engine.data import SAMPLE_RATE
from engine.errors import AuditError, ConfigError

log = logging.getLogger(__name__)

SMOKE_PHRASE = "The quick brown fox jumps over the lazy dog."


def smoke_clip(rec: Any) -> tuple[np.ndarray, str]:
    """One 16 kHz clip for ``--smoke`` and where it came from."""

    from audits.pipeline import open_recipe_dataset
    from audits.recipes import builtin_dataset_path
    from engine.data import DecodeOptions
    from engine.run.runner import decode_shard

    path = rec.dataset.path
    built = not path.startswith("builtin:") or (builtin_dataset_path(path) / "corpus.json").exists()
    if built:
        ds = open_recipe_dataset(rec)
        for sid in ds.shard_ids:
            shard = ds.load_shard(sid)
            for u, d in zip(shard.utterances, decode_shard(shard, ds.root, DecodeOptions())):
                if d.error is None and d.samples is not None and d.samples.size:
                    return np.asarray(d.samples, dtype=np.float32), f"{u.utt_id} of {path}"
    import soxr

    from engine.backends import TTS_BACKENDS

    tts = TTS_BACKENDS.get("espeak-ng")()
    tts.load()
    audio, sr = tts.synthesize(SMOKE_PHRASE)
    clip = soxr.resample(audio, sr, SAMPLE_RATE) if sr != SAMPLE_RATE else audio
    return np.asarray(clip, dtype=np.float32), f"espeak-ng: {SMOKE_PHRASE!r}"


def run_check(
    reg: Any,
    chosen: list[str],
    address: str | None,
    rec: Any,
    smoke: bool,
    console: Console,
    out: Console,
    runtime_env: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Print the per-model table; returns the answers (for tests and scripts)."""
    from engine.sweep import check_in_workers

    clip = None
    if smoke:
        try:
            clip, where = smoke_clip(rec)
        except AuditError as exc:
            raise ConfigError(f"--smoke needs one clip: {exc}") from exc
        console.print(f"smoke clip: {escape(where)} ({clip.shape[0] / SAMPLE_RATE:.1f} s)", soft_wrap=True)
    answers = check_in_workers(reg, chosen, address, smoke_clip=clip, runtime_env=runtime_env)
    n_ok = sum(1 for a in answers.values() if a["runnable"])
    t = Table(title=f"availability in the Ray workers ({n_ok} of {len(answers)} can run)")
    cols = ["model", "family", "extra", "weights", "runnable", "checked by", "reason"]
    if smoke:
        cols += ["smoke", "load s", "peak RSS MB", "peak GPU MB", "text / error"]
    for col in cols:
        t.add_column(col)
    for n, a in answers.items():
        reasons = "\n".join(f"- {p}" for p in a["problems"]) if len(a.get("problems") or ()) > 1 else str(a["reason"])
        row = [
            n,
            str(a.get("family", "—")),
            str(a.get("extra", "")),
            str(a.get("weights", "?")),
            "yes" if a["runnable"] else "no",
            escape(str(a["where"])),
            escape(reasons),
        ]
        if smoke:
            s = a.get("smoke") or {}
            verdict = "ok" if s.get("ok") else ("skipped" if s.get("ok") is None else "FAILED")
            detail = s.get("text") if s.get("ok") else s.get("error", "")
            row += [
                verdict,
                str(s.get("load_s", "—")),
                str(s.get("peak_rss_mb", "—")),
                str(s.get("peak_gpu_mb", "—")),
                escape(str(detail)[:120]),
            ]
        t.add_row(*row)
    out.print(t)
    return answers
