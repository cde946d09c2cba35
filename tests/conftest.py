"""Shared fixtures: real speech from Debian's pocketsphinx-testdata and the fixtures under tests/fixtures."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


# ------------------------------------------------------------------ one local Ray instance per session

#: The local Ray instances tests ask for, by fixture name. Starting one costs seconds, so the modules that
#: ask for the same one share it: pytest_collection_modifyitems runs them one after another at the end of
#: the session, and the instance is stopped before any other module runs.
#: ``address="local"``: always a new instance of this process, never a cluster that ``ray start`` left running on the machine.
RAY_INSTANCES: dict[str, dict[str, Any]] = {
    # 2 CPUs; every worker registers the fault-injection backend (tests/test_faults.py, tests/test_ray_engine.py)
    "ray_local": {
        "address": "local",
        "num_cpus": 2,
        "runtime_env": {"worker_process_setup_hook": "engine.backends.asr.fault.ensure_registered"},
    },
    # 4 logical CPUs and 8 logical GPUs: placement on GPUs without a GPU
    "ray_gpus8": {"address": "local", "num_cpus": 4, "num_gpus": 8},
}


class SharedRay:
    """The session's local Ray instance: started on first use, reused by the next module that asks for the
    same configuration while all its resources are free again, restarted otherwise (another configuration,
    a test that shut it down or built its own cluster, resources still held by a test's leftovers)."""

    def __init__(self) -> None:
        self.name: str | None = None
        self.address: str | None = None

    def use(self, name: str) -> str:
        import ray

        from engine.run.ray_setup import init_ray

        config = RAY_INSTANCES[name]
        if self.name == name and self._intact(config):
            return str(self.address)
        self.stop()
        if ray.is_initialized():  # an instance a test left behind
            ray.shutdown()
        init_ray(**config)
        self.name, self.address = name, ray.get_runtime_context().gcs_address
        return self.address

    def _intact(self, config: dict[str, Any]) -> bool:
        import ray

        if not ray.is_initialized() or ray.get_runtime_context().gcs_address != self.address:
            return False
        want = {"CPU": float(config["num_cpus"]), "GPU": float(config.get("num_gpus") or 0)}
        if {k: ray.cluster_resources().get(k, 0.0) for k in want} != want:
            return False
        deadline = time.monotonic() + 10  # actors of a finished (or killed) driver are released asynchronously
        while time.monotonic() < deadline:
            if {k: ray.available_resources().get(k, 0.0) for k in want} == want:
                return True
            time.sleep(0.2)
        return False

    def stop(self) -> None:
        if self.name is None:
            return
        import ray

        if ray.is_initialized() and ray.get_runtime_context().gcs_address == self.address:
            ray.shutdown()
        self.name = self.address = None


_SHARED_RAY = SharedRay()
_RAY_MODULES: dict[str, str] = {}  # module node id -> the RAY_INSTANCES name its tests use


def _module_id(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules that use a shared Ray instance run last, grouped by instance (each module's own order kept)."""
    for item in items:
        for name in RAY_INSTANCES:
            if name in getattr(item, "fixturenames", ()):
                _RAY_MODULES.setdefault(_module_id(item), name)
    order = {name: i + 1 for i, name in enumerate(RAY_INSTANCES)}
    items[:] = sorted(items, key=lambda it: order.get(_RAY_MODULES.get(_module_id(it), ""), 0))  # stable


@pytest.fixture(scope="module", autouse=True)
def _shared_ray_only_where_asked(request: pytest.FixtureRequest) -> None:
    """A module that does not use the shared instance runs without it, as if it had never started."""
    if _module_id(request.node) not in _RAY_MODULES:
        _SHARED_RAY.stop()


@pytest.fixture(scope="session")
def shared_ray() -> Iterator[SharedRay]:
    yield _SHARED_RAY
    _SHARED_RAY.stop()


@pytest.fixture(scope="module")
def ray_local(shared_ray: SharedRay) -> str:
    """The session's local Ray instance with 2 CPUs (RAY_INSTANCES); its address lets subprocess drivers join."""
    pytest.importorskip("ray")
    return shared_ray.use("ray_local")


@pytest.fixture(scope="module")
def ray_gpus8(shared_ray: SharedRay) -> str:
    """The session's local Ray instance with 4 logical CPUs and 8 logical GPUs; its address lets subprocess drivers join."""
    pytest.importorskip("ray")
    return shared_ray.use("ray_gpus8")
