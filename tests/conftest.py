"""Shared fixtures: real speech from Debian's pocketsphinx-testdata and the fixtures under tests/fixtures."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

REPO = Path(__file__).resolve().parents[1]


FIXTURES = REPO / "tests" / "fixtures"


def _demo_builder_digest() -> str:
    """A digest of the demo corpus builder's source (the builder, its TTS backends, audio storage and data
    types): a cached corpus is reused only by the code that built it."""
    h = hashlib.sha256()
    engine = REPO / "engine"
    sources = [*(engine / "corpus").rglob("*.py"), *(engine / "backends" / "tts").rglob("*.py"), *(engine / "audio").rglob("*.py")]
    for p in sorted({*sources, engine / "data.py"}):
        h.update(p.relative_to(REPO).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


@pytest.fixture(scope="session")
def demo_corpus(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Path:
    """The full default demo corpus (seed 0, 208 clips), built once and shared by every test that reads it.

    It is the slowest fixture of the suite (about three minutes on 2 cores), so it is kept beside pytest's
    numbered temporary folders, keyed by the builder's source, and a later session reuses it (the builder's
    own reuse rule: a complete corpus of the same seed, size and version). A lock file lets concurrent
    sessions share it. With ``--basetemp`` it is built inside the session's folder instead.
    """
    from engine.corpus.demo import build_demo_corpus

    if pytestconfig.getoption("basetemp"):
        root = tmp_path_factory.mktemp("corpus") / "demo"
        build_demo_corpus(root)
        return root
    cache = tmp_path_factory.getbasetemp().parent / f"demo-corpus-{_demo_builder_digest()}"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            build_demo_corpus(cache / "demo")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return cache / "demo"


@pytest.fixture(scope="session")
def voxpopuli_preds() -> Path:
    """Real VoxPopuli-150 predictions of five models (Apache-2.0; see the folder's NOTICE)."""
    return FIXTURES / "voxpopuli-150-predictions"


def _librivox_dir() -> Path:
    for cand in (Path("/usr/share/pocketsphinx/test/data/librivox"), Path("/usr/share/doc/pocketsphinx-testdata")):
        if cand.is_dir():
            return cand
    out = subprocess.run(["dpkg", "-L", "pocketsphinx-testdata"], capture_output=True, text=True, check=True).stdout.split()
    wavs = [Path(p) for p in out if "librivox" in p and p.endswith(".wav")]
    if not wavs:
        raise FileNotFoundError("pocketsphinx-testdata LibriVox clips not found (apt-get install pocketsphinx-testdata)")
    return wavs[0].parent


@pytest.fixture(scope="session")
def librivox() -> list[tuple[Path, str]]:
    """The five LibriVox clips with their transcripts."""
    d = _librivox_dir()
    wavs = sorted(d.glob("*.wav"))
    trans: dict[str, str] = {}
    for tf in [f for f in (d / "transcription", *d.glob("*.transcription")) if f.exists()]:
        for line in tf.read_text(errors="replace").splitlines():
            line = line.strip()
            if line.endswith(")") and "(" in line:
                text, uid = line.rsplit("(", 1)
                text = text.replace("<s>", " ").replace("</s>", " ")
                trans[uid.rstrip(")").strip()] = " ".join(text.split())
    out = []
    for w in wavs:
        if w.stem in trans:
            out.append((w, trans[w.stem]))
    if len(out) < 5:
        raise FileNotFoundError(f"expected 5 LibriVox clips with transcripts in {d}, found {len(out)}")
    return out[:5]


def write_manifest(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    return path


def espeak_wav(path: Path, text: str, voice: str = "en-us") -> Path:
    if shutil.which("espeak-ng") is None:
        raise FileNotFoundError("espeak-ng is not installed (apt-get install espeak-ng)")
    subprocess.run(["espeak-ng", "-v", voice, "-w", str(path), text], check=True, capture_output=True)
    return path


@pytest.fixture()
def tone_wav(tmp_path: Path):
    def make(name: str, seconds: float = 1.0, sr: int = 16000, channels: int = 1, value: float | None = None) -> Path:
        t = np.arange(int(seconds * sr)) / sr
        x = 0.3 * np.sin(2 * np.pi * 220 * t) if value is None else np.full(t.shape, value)
        data = np.stack([x] * channels, axis=1) if channels > 1 else x
        p = tmp_path / name
        sf.write(p, data, sr)
        return p

    return make
