"""Shared set-up for the reliability regression tests (tests/test_reliability_*.py).

A temporary model registry of simulated models (real sleeps, hash-derived text, no weights) that
append a line to a trace folder whenever one loads, so a test can prove that a refusal came
before any model loaded; tiny datasets and conversation sets written on the spot; and the
``audit`` command line driven in-process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from typer.testing import CliRunner

from audits.cli.main import app

SR = 16_000


def make_registry(cfg: Path, trace: Path) -> None:
    """``sim-a`` and ``sim-b``: simulated ASR models that record each load under ``trace``."""
    (cfg / "models").mkdir(parents=True, exist_ok=True)
    t = f"trace_dir: '{trace}'"
    (cfg / "models" / "sim.yaml").write_text(
        "models:\n"
        f"  sim-a: {{backend: simulated, options: {{rtfx: 1000, {t}}}, batch_size: 4, params_m: 10, tags: [sim]}}\n"
        f"  sim-b: {{backend: simulated, options: {{rtfx: 1000, seed: 1, {t}}}, batch_size: 4, params_m: 20, tags: [sim]}}\n"
    )


def noise(seconds: float, seed: int, level: float = 0.1) -> np.ndarray:
    return (np.random.default_rng(seed).normal(0, level, int(SR * seconds))).astype(np.float32)


def write_dataset(folder: Path, clips: list[dict[str, Any]]) -> Path:
    """A NeMo manifest: each clip dict has ``audio`` (samples) and the manifest fields (``text``, labels)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, clip in enumerate(clips):
        clip = dict(clip)
        wav = folder / f"clip{i:03d}.wav"
        sf.write(wav, clip.pop("audio"), SR)
        lines.append(json.dumps({"utt_id": f"u{i:03d}", "audio_filepath": str(wav), **clip}))
    manifest = folder / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


def speech_clips(n: int, seed: int = 0) -> list[dict[str, Any]]:
    return [{"audio": noise(1.0, seed + i), "text": "a b c", "speaker": f"s{i % 2}", "accent": "x" if i % 2 else "y"} for i in range(n)]


def write_conversation_set(folder: Path, n: int = 2, seconds: float = 4.0) -> Path:
    """A valid conversation set: ``n`` recordings, two speakers each, RTTM turns and a SegLST transcript."""
    folder.mkdir(parents=True, exist_ok=True)
    manifest, rttm, seglst = [], [], []
    for i in range(n):
        rec = f"rec{i}"
        wav = folder / f"{rec}.wav"
        sf.write(wav, noise(seconds, 100 + i), SR)
        manifest.append(json.dumps({"audio_filepath": wav.name, "duration": seconds, "n_speakers": 2}))
        for spk, (start, end) in (("A", (0.0, 1.5)), ("B", (2.0, 3.5))):
            rttm.append(f"SPEAKER {rec} 1 {start:.2f} {end - start:.2f} <NA> <NA> {spk} <NA> <NA>")
            seglst.append({"session_id": rec, "speaker": spk, "start_time": start, "end_time": end, "words": "the a of"})
    (folder / "manifest.jsonl").write_text("\n".join(manifest) + "\n")
    (folder / "reference.rttm").write_text("\n".join(rttm) + "\n")
    (folder / "reference.json").write_text(json.dumps(seglst))
    return folder


class Env:
    """A temporary registry, trace folder and working folder for one test."""

    def __init__(self, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp = tmp
        self.trace = tmp / "trace"
        self.trace.mkdir()
        make_registry(tmp / "configs", self.trace)
        monkeypatch.setenv("AUDIT_CONFIG_DIR", str(tmp / "configs"))
        monkeypatch.setenv("COLUMNS", "250")

    def recipe(self, dataset: Path, extra: str = "", name: str = "r", models: str = "[sim-a]") -> Path:
        path = self.tmp / f"{name}.yaml"
        path.write_text(
            f"name: {name}\ndataset: {{path: '{dataset}'}}\nmodels: {models}\nshard_size: 4\nwarmup: 0\nscoring: {{n_boot: 20}}\n{extra}"
        )
        return path

    def loads(self) -> int:
        """How many model loads the trace recorded."""
        return sum(1 for p in self.trace.glob("*.jsonl") for line in p.read_text().splitlines() if '"load"' in line)


def audit(*args: str) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def refused_before_work(res: Any, env: Env, out: Path, *needles: str) -> None:
    """The command failed with exit status 2, saying each of ``needles``; nothing loaded, no run.json."""
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    for n in needles:
        assert n in text, f"{n!r} not in: {text}"
    assert env.loads() == 0, "a model loaded before the refusal"
    assert not (out / "run.json").exists(), "run.json was written before the refusal"
