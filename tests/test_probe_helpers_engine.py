"""The probes' helper models run as keyed passes on the run's engine (audits/probes/helper_passes.py,
engine/probe_workers.py): word timings for the masking probe, and for the synthetic-voice probe
the speaker encoder and the TTS. Each gives exactly what the model gives when called directly,
the same on Ray (in an actor, not the driver) as in-process, and a second identical run computes
nothing."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audits.probes.config import TimingConfig
from audits.probes.helper_passes import Clip, EngineTimings
from audits.probes.masking import MaskSettings, build_masked_set, clips_needing_timings, mask_clip
from audits.probes.word_timings import align_timings
from engine.audio import decode
from engine.data import SAMPLE_RATE, Utterance
from engine.datasets import Dataset, open_dataset
from engine.datasets.base import in_memory_dataset
from engine.pass_engine import EngineOptions
from engine.shards import encode_audio

TEXTS = (
    "We flew to Lisbon in two thousand sixteen with our friends.",
    "The meeting in Berlin starts at nine.",
    "we went there again and again",  # no target: no timing unit
)
WHISPER = TimingConfig(method="whisper", model="whisper-tiny.en")


@pytest.fixture(scope="module")
def spoken(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    """Three espeak-ng clips in memory (FLAC bytes), the layout of a Parquet dataset."""
    from audits.probes.synthetic_voice import SyntheticSettings, make_tts, synthesize

    tts = make_tts(SyntheticSettings())
    utts = []
    for i, text in enumerate(TEXTS):
        x = synthesize(tts, text)
        utts.append(Utterance(f"c{i}", text, audio_bytes=encode_audio(x, SAMPLE_RATE, "FLAC"), duration_s=len(x) / SAMPLE_RATE,
                              speaker=f"s{i % 2}"))
    tts.close()
    return in_memory_dataset("spoken", "memory", "parquet", utts, shard_size=64, root=None)


def _masked(ds: Dataset, timings_for: Any, out: Path) -> dict[str, tuple[bytes, str]]:
    """Masked clips as (audio bytes, derivation JSON) per id, from ``build_masked_set``."""
    build_masked_set(ds, timings_for, MaskSettings(variants=("silence", "noise")), out)
    derived = open_dataset(out, "parquet")
    return {u.utt_id: (bytes(u.audio_bytes or b""), str(u.derivation_json())) for s in derived.iter_shards() for u in s.utterances}


def _engine_masked(ds: Dataset, probes: Path, engine: EngineOptions, out: Path) -> tuple[EngineTimings, dict[str, tuple[bytes, str]]]:
    timings = EngineTimings(WHISPER, probes, engine)
    need = clips_needing_timings(ds, MaskSettings(variants=("silence", "noise")))
    timings.compute([Clip(u.utt_id, u, ds.root) for u in need], {u.utt_id: u.reference or "" for u in need})

    def timings_for(u: Utterance, x: np.ndarray) -> Any:
        return timings.timings(u.utt_id, u.reference or "", len(x) / SAMPLE_RATE)

    return timings, _masked(ds, timings_for, out)


@pytest.fixture(scope="module")
def ray_engine() -> Iterator[EngineOptions]:
    ray = pytest.importorskip("ray")
    from engine.ray_setup import init_ray

    started = init_ray(num_cpus=2)
    try:
        yield EngineOptions(kind="ray")
    finally:
        if started:
            ray.shutdown()


def test_word_timings_on_the_engine_mask_exactly_as_the_model_called_directly(spoken: Dataset, tmp_path: Path) -> None:
    """In-process keyed units give the masked audio the model gives when the probe calls it itself; the
    second run loads nothing; only clips with a target get a unit."""
    from engine.backends import build_backend

    spec = EngineTimings(WHISPER, tmp_path / "spec").spec
    assert spec is not None
    model = build_backend(spec)
    model.load()
    try:
        def direct(u: Utterance, x: np.ndarray) -> Any:
            words = model.transcribe_with_word_timestamps(x)
            return align_timings(u.reference or "", [(w.word, w.start, w.end) for w in words], len(x) / SAMPLE_RATE)

        expected = _masked(spoken, direct, tmp_path / "direct")
    finally:
        model.close()
    timings, got = _engine_masked(spoken, tmp_path / "probes", EngineOptions(), tmp_path / "engine")
    assert len(expected) == 4 and got == expected  # 2 clips x 1 target x 2 variants, byte for byte
    assert set(timings.results) == {"c0", "c1"}  # the clip without a target never reached the model
    f = timings.facts[spec.name]
    assert f["runner"] == "inprocess" and f["pending"] == 2 and f["pid"] == os.getpid()
    # the same clips and settings again: every unit is vouched for by its marker, no model loads
    again, got2 = _engine_masked(spoken, tmp_path / "probes", EngineOptions(), tmp_path / "engine2")
    assert got2 == expected and again.facts == {} and again.results == timings.results


@pytest.mark.slow
def test_word_timings_on_ray_run_in_an_actor_and_equal_inprocess(spoken: Dataset, tmp_path: Path, ray_engine: EngineOptions) -> None:
    local, masked_local = _engine_masked(spoken, tmp_path / "local", EngineOptions(), tmp_path / "m-local")
    remote, masked_remote = _engine_masked(spoken, tmp_path / "ray", ray_engine, tmp_path / "m-ray")
    assert remote.results == local.results and masked_remote == masked_local  # words and times exactly, audio byte for byte
    (f,) = remote.facts.values()
    assert f["runner"] == "ray" and f["pending"] == 2 and [a["pid"] != os.getpid() for a in f["actors"]] == [True]
    again, _ = _engine_masked(spoken, tmp_path / "ray", ray_engine, tmp_path / "m-ray2")
    assert again.facts == {} and again.results == local.results
