"""The probes' helper models run as keyed passes on the run's engine (audits/probes/helper_passes.py,
engine/keyed/probe_workers.py): word timings for the masking probe, and for the synthetic-voice probe
the speaker encoder and the TTS. Each gives exactly what the model gives when called directly,
the same on Ray (in an actor, not the driver) as in-process, and a second identical run computes
nothing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audits.probes.config import TimingConfig
from audits.probes.helper_passes import Clip, EngineTimings
from audits.probes.masking import MaskSettings, build_masked_set, clips_needing_timings
from audits.probes.word_timings import align_timings
from engine.audio.decoding import decode
from engine.audio.shards import encode_audio
from engine.data import SAMPLE_RATE, Utterance
from engine.datasets import Dataset, open_dataset
from engine.datasets.base import in_memory_dataset
from engine.engine import EngineOptions
from engine.errors import ConfigError

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
        utts.append(
            Utterance(f"c{i}", text, audio_bytes=encode_audio(x, SAMPLE_RATE, "FLAC"), duration_s=len(x) / SAMPLE_RATE, speaker=f"s{i % 2}")
        )
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
def ray_engine(ray_local: str) -> EngineOptions:
    """The Ray engine on the session's local 2-CPU instance (tests/conftest.py)."""
    return EngineOptions(kind="ray")


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


# ------------------------------------------------------------------ TTS and speaker encoder (synthetic-voice probe)

POOL = ("flite:slt", "espeak-ng:en-us+m3")


def _voices(probes: Path, engine: EngineOptions) -> Any:
    from audits.probes.helper_passes import EngineVoices
    from audits.probes.synthetic_voice import LEAD_S, TAIL_S

    return EngineVoices(probes, engine, {}, "resemblyzer", {"num_threads": 1}, LEAD_S, TAIL_S)


def _render_and_embed(voices: Any, ds: Dataset) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The pool's calibration renditions (TTS units) and the embeddings of them and of the dataset's clips (encoder units)."""
    from audits.probes.helper_passes import Speech
    from audits.probes.voice_match import CALIBRATION_TEXT

    files = voices.render([Speech(f"voice:{v}", v, CALIBRATION_TEXT) for v in POOL])
    clips = [Clip(k, Utterance(k, None, audio_path=str(f.path), derivation={"probe": "synthetic_voice"})) for k, f in files.items()]
    clips += [Clip(f"clip:{u.utt_id}", u, ds.root) for s in ds.iter_shards() for u in s.utterances]
    return files, voices.embed(clips)


def _render(voices: Any) -> dict[str, Any]:
    from audits.probes.helper_passes import Speech
    from audits.probes.voice_match import CALIBRATION_TEXT

    return dict(voices.render([Speech(f"voice:{v}", v, CALIBRATION_TEXT) for v in POOL]))


def test_tts_units_write_the_rendered_samples_and_rerender_only_an_altered_file(tmp_path: Path) -> None:
    """TTS units write exactly the samples the TTS renders when called directly (read back by the
    engine's decoder); a second run renders nothing; a file altered on disk is rendered again."""
    from audits.probes.voice_match import CALIBRATION_TEXT, VoiceBank

    voices = _voices(tmp_path / "probes", EngineOptions())
    files = _render(voices)
    bank = VoiceBank()
    for v in POOL:
        direct = bank.render(v, CALIBRATION_TEXT)
        assert np.array_equal(files[f"voice:{v}"].read(), direct)  # sample for sample
        assert np.array_equal(decode(Utterance("x", None, audio_path=str(files[f"voice:{v}"].path))).samples, direct)
    for key in ("tts:flite", "tts:espeak-ng"):
        assert voices.facts[key]["runner"] == "inprocess" and voices.facts[key]["pid"] == os.getpid()
    again = _voices(tmp_path / "probes", EngineOptions())
    assert {k: f.sha256 for k, f in _render(again).items()} == {k: f.sha256 for k, f in files.items()} and again.facts == {}
    files["voice:flite:slt"].path.write_bytes(b"not audio")
    third = _voices(tmp_path / "probes", EngineOptions())
    assert {k: f.sha256 for k, f in _render(third).items()} == {k: f.sha256 for k, f in files.items()}
    assert set(third.facts) == {"tts:flite"} and third.facts["tts:flite"]["pending"] == 1


def test_a_wildcard_pool_entry_asks_the_tts_worker_for_its_voices(tmp_path: Path) -> None:
    from engine.backends import TTS_BACKENDS

    flite = TTS_BACKENDS.get("flite")()
    flite.load()
    listed = [f"flite:{v}" for v in flite.voices()]
    voices = _voices(tmp_path / "probes", EngineOptions())
    got, notes = voices.expand(["espeak-ng:en-us+m3", "flite:*"], 16)
    assert got == ["espeak-ng:en-us+m3", *listed] and not notes
    assert set(voices.facts) == {"tts:flite"} and voices.facts["tts:flite"]["pid"] == os.getpid()  # the worker listed them
    again = _voices(tmp_path / "probes", EngineOptions())
    assert again.expand(["espeak-ng:en-us+m3", "flite:*"], 16) == (got, []) and again.facts == {}  # stored: nothing loads
    with pytest.raises(ConfigError, match="would take"):
        again.expand(["flite:*"], 1)


@pytest.mark.slow
def test_speaker_encoder_units_equal_the_encoder_called_directly_and_resume(spoken: Dataset, tmp_path: Path) -> None:
    """Encoder units give the encoder's embeddings of the pool renditions and the real clips (what the
    voice match used to compute in the driver); a second run loads nothing."""
    pytest.importorskip("resemblyzer")
    from audits.probes.voice_match import VoiceBank, speaker_embeddings, voice_embeddings
    from engine.backends import SV_BACKENDS

    voices = _voices(tmp_path / "probes", EngineOptions())
    _, emb = _render_and_embed(voices, spoken)
    encoder = SV_BACKENDS.get("resemblyzer")(num_threads=1)
    encoder.load()
    pool_direct, notes = voice_embeddings(VoiceBank(), list(POOL), encoder)
    real = {u.utt_id: decode(u).samples for s in spoken.iter_shards() for u in s.utterances}
    spk_direct, _ = speaker_embeddings({k: [x] for k, x in real.items()}, encoder)
    encoder.close()
    assert not notes
    for v in POOL:
        got = np.asarray(emb[f"voice:{v}"]["embedding"])
        assert np.allclose(got / np.linalg.norm(got), pool_direct[v], atol=1e-5)
    for k in real:
        got = np.asarray(emb[f"clip:{k}"]["embedding"])
        assert np.allclose(got / np.linalg.norm(got), spk_direct[k], atol=1e-5)
    f = voices.facts["encoder:resemblyzer"]
    assert f["runner"] == "inprocess" and f["pid"] == os.getpid() and f["pending"] == len(POOL) + len(real)
    again = _voices(tmp_path / "probes", EngineOptions())
    _, emb2 = _render_and_embed(again, spoken)
    assert again.facts == {} and emb2 == emb


@pytest.mark.slow
def test_tts_and_speaker_encoder_on_ray_run_in_actors_and_equal_inprocess(
    spoken: Dataset, tmp_path: Path, ray_engine: EngineOptions
) -> None:
    pytest.importorskip("resemblyzer")
    files, emb = _render_and_embed(_voices(tmp_path / "local", EngineOptions()), spoken)
    remote = _voices(tmp_path / "ray", ray_engine)
    rfiles, remb = _render_and_embed(remote, spoken)
    assert {k: f.sha256 for k, f in rfiles.items()} == {k: f.sha256 for k, f in files.items()}
    assert set(remb) == set(emb)
    for k in emb:
        assert np.allclose(remb[k]["embedding"], emb[k]["embedding"], atol=1e-5)
    for key in ("tts:flite", "tts:espeak-ng", "encoder:resemblyzer"):
        f = remote.facts[key]
        assert f["runner"] == "ray" and f["actors"] and all(a["pid"] != os.getpid() for a in f["actors"])
    again = _voices(tmp_path / "ray", ray_engine)
    _, emb2 = _render_and_embed(again, spoken)
    assert again.facts == {} and emb2 == remb


def test_ctc_timings_without_torchaudio_fail_naming_the_package_and_auto_uses_whisper(spoken: Dataset, tmp_path: Path) -> None:
    import importlib.util

    from engine.keyed.keyed_pass import KeyedPassError

    if importlib.util.find_spec("torchaudio") is not None:
        pytest.skip("torchaudio is installed")
    u = next(iter(spoken.iter_shards())).utterances[0]
    ctc = EngineTimings(TimingConfig(method="ctc"), tmp_path / "probes")
    with pytest.raises(KeyedPassError, match="word timings: 1 unit.*needs torchaudio"):
        ctc.compute([Clip(u.utt_id, u)], {u.utt_id: u.reference or ""})
    assert EngineTimings(TimingConfig(method="auto"), tmp_path / "probes").resolved() == "whisper-word-timestamps"
