"""Capabilities, not names: runners declare the pass kinds they run, ASR backends what they can do,
and the code asks those declarations (the family table, the hosted list, word timings, controls)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
import soundfile as sf

import engine.backends
import engine.engine
from engine.backends import ASR_BACKENDS, asr_backends_where, asr_capabilities, family_backends
from engine.backends.asr.families import FAMILIES
from engine.backends.asr.simulated import SimulatedBackend
from engine.backends.base import AsrCapabilities
from engine.data import ModelSpec, Utterance
from engine.engine import ALL_PASSES, KEYED, SHARD_ASR, EngineOptions, Runner, runner_class, runner_for_address
from engine.errors import ConfigError
from engine.registry import Registry


class _Word(NamedTuple):
    word: str
    start: float
    end: float


class TimedSimulated(SimulatedBackend):
    """A backend that is not faster-whisper but declares word timestamps (one word per half second)."""

    name = "timed-simulated"
    capabilities = AsrCapabilities(word_timestamps=True)

    def transcribe_with_word_timestamps(self, audio: np.ndarray) -> list[_Word]:
        n = max(1, int(len(audio) / 16000 / 0.5))
        return [_Word(f"w{i}", 0.5 * i, 0.5 * i + 0.4) for i in range(n)]


class ControlSimulated(SimulatedBackend):
    name = "control-simulated"
    capabilities = AsrCapabilities(positive_control=True)


@pytest.fixture()
def toy_backends(monkeypatch: pytest.MonkeyPatch) -> Registry[type]:
    """The built-in ASR backends plus two toys registered in code."""
    reg: Registry[type] = Registry("ASR backend", "audit_engine.asr_backends")
    reg.register("timed-simulated")(TimedSimulated)
    reg.register("control-simulated")(ControlSimulated)
    monkeypatch.setattr(engine.backends, "ASR_BACKENDS", reg)
    return reg


def test_families_and_hosted_backends_come_from_the_backends_declarations() -> None:
    from engine.backends.hosted.base import HostedASRBackend

    declared = {f for n in ASR_BACKENDS.names() for f in asr_capabilities(n).families}
    assert declared == set(FAMILIES), "every family is run by a backend that declares it, and only those"
    hosted = [n for n in ASR_BACKENDS.names() if issubclass(ASR_BACKENDS.get(n), HostedASRBackend)]
    assert len(hosted) >= 10 and asr_backends_where(hosted=True) == hosted == list(FAMILIES["hosted"].backends)
    assert family_backends("whisper-ct2") == ("faster-whisper",) and "transformers" in FAMILIES["ctc"].backends
    for name in asr_backends_where(word_timestamps=True):  # a declaration the class honours
        assert callable(getattr(ASR_BACKENDS.get(name), "transcribe_with_word_timestamps", None)), name
    assert asr_backends_where(positive_control=True) == ["memorizer"]


def test_word_timings_take_any_backend_that_declares_them(toy_backends: Registry[type], tmp_path: Path) -> None:
    from engine.keyed.probe_workers import WordTimingWorker, clip_payload

    with pytest.raises(ConfigError, match="backend 'simulated', which declares no word timestamps"):
        WordTimingWorker("whisper", ModelSpec("sim", "simulated", {}))
    wav = tmp_path / "a.wav"
    sf.write(wav, (0.1 * np.sin(np.arange(32000) / 5)).astype(np.float32), 16000)
    worker = WordTimingWorker("whisper", ModelSpec("timed", "timed-simulated", {}))
    worker.load()
    out = worker.run(clip_payload(Utterance("a", "x", audio_path=str(wav)), tmp_path))
    assert "error" not in out, out
    assert out["duration_s"] == 2.0 and [w[0] for w in out["words"]] == ["w0", "w1", "w2", "w3"]


def test_positive_controls_are_what_backends_declare(toy_backends: Registry[type]) -> None:
    from audits.reports.findings import control_models

    summary = {"models": {"ctl": {"backend": "control-simulated"}, "sim": {"backend": "simulated"}, "gone": {"backend": "uninstalled"}}}
    assert control_models(summary, ["ctl", "sim", "gone"]) == ["ctl"]


class _NoKinds(Runner):
    runs = frozenset({"shard:video"})


class _LonelyJoint(Runner):
    runs = frozenset({SHARD_ASR, "joint"})


class _Keyed(Runner):
    runs = frozenset({SHARD_ASR, KEYED})

    def run_keyed(self, passes: Sequence[Any], progress: Any) -> Any:
        return ("ran", len(passes))


def test_runners_are_asked_what_they_run(monkeypatch: pytest.MonkeyPatch) -> None:
    reg: Registry[type[Runner]] = Registry("runner", "audit_engine.runners")
    for name, cls in (("no-kinds", _NoKinds), ("lonely-joint", _LonelyJoint), ("keyed", _Keyed), ("not-a-runner", dict)):
        reg.register(name)(cls)  # type: ignore[arg-type]
    monkeypatch.setattr(engine.engine, "RUNNERS", reg)
    assert set(runner_class("inprocess").runs) == set(runner_class("ray").runs) == set(ALL_PASSES)
    with pytest.raises(ConfigError, match=r"runner 'no-kinds' declares unknown pass kind\(s\) shard:video"):
        runner_class("no-kinds")
    with pytest.raises(ConfigError, match="declares 'joint' but fewer than two shard kinds"):
        runner_class("lonely-joint")
    with pytest.raises(ConfigError, match="'not-a-runner' .* is not a subclass of engine.engine.Runner"):
        runner_class("not-a-runner")
    keyed = EngineOptions(kind="keyed")
    assert keyed.run_keyed([]) == ("ran", 0) and keyed.missing(ALL_PASSES) == ["shard:sv", "shard:ser", "joint"]
    assert runner_for_address("inprocess", None) == "inprocess" and runner_for_address("keyed", None) == "keyed"
    assert runner_for_address("inprocess", "auto") == "ray" and runner_for_address("ray", "10.0.0.1:6379") == "ray"
    with pytest.raises(ConfigError, match=r"--address: engine 'keyed' takes no cluster address \(runners that do: --engine ray\)"):
        runner_for_address("keyed", "auto")  # a plug-in runner is never swapped for Ray silently
    with pytest.raises(ConfigError, match=r"a pass of sv models: engine 'keyed' does not run shard:sv passes .* use --engine inprocess or"):
        keyed.runner(None, [ModelSpec("e", "resemblyzer", {}, kind="sv")], None)  # type: ignore[arg-type]


class _QuietTTS:
    """A TTS engine registered in code that has no voices installed."""

    install_hint = "install the toy voices"

    def load(self) -> None:
        pass

    def voices(self) -> list[str]:
        return []

    def version(self) -> str:
        return "0"


def test_corpus_voices_come_from_the_tts_registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The demo corpus and the conversation set build their engines by the names their voice lists use,
    through the TTS registry, and say what each engine's own ``install_hint`` says."""
    import engine.backends.tts as tts
    from engine.corpus import demo
    from engine.corpus.conversation import _Voices
    from engine.errors import BackendUnavailable

    assert demo.FAMILIES["tts_engine"] == ("espeak-ng", "flite", "kokoro")  # derived from the voice list
    reg: Registry[type] = Registry("TTS backend")
    for name in ("espeak-ng", "flite", "kokoro"):
        reg.register_lazy(name, "tests.test_capabilities:_QuietTTS")
    monkeypatch.setattr(tts, "TTS_BACKENDS", reg)
    with pytest.raises(
        BackendUnavailable, match=r"TTS voices missing for the conversation set: espeak-ng:en-us, .*; install the toy voices"
    ):
        _Voices().check()
    monkeypatch.setattr(demo, "require_modules", lambda *a: None)
    with pytest.raises(BackendUnavailable, match=r"TTS voices missing for the demo corpus: .*kokoro.*; install the toy voices"):
        demo._Synth().check()
