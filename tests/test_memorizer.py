"""The memorizer positive control: matches its indexed clips (masked, attenuated, noised), nothing else."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from audits.probes.masking import MaskSettings, apply_mask
from engine.audio.decoding import decode
from engine.audio.shards import write_shards
from engine.backends.asr.memorizer import MemorizerBackend, fingerprint, similarity
from engine.backends.tts.espeak import EspeakTTS, resample
from engine.data import Utterance
from engine.datasets import open_dataset
from engine.errors import ConfigError

N_INDEXED = 8
N_OTHER = 8


def demo_utterances(demo: Path, n: int) -> list[Utterance]:
    """The first ``n`` clips of the default demo corpus at ``demo`` (the session's ``demo_corpus`` fixture)."""
    ds = open_dataset(demo, "parquet", limit=n)
    return [u for s in ds.iter_shards() for u in s.utterances]


@pytest.fixture(scope="module")
def clips(demo_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("mem")
    utts = demo_utterances(demo_corpus, N_INDEXED + N_OTHER)
    decoded = {u.utt_id: decode(u).samples for u in utts}
    indexed = utts[:N_INDEXED]
    write_shards([replace(u, audio_path=None) for u in indexed], root / "index", shard_size=64)
    mem = MemorizerBackend(index=str(root / "index"), index_reader="parquet")
    mem.load()
    return {"mem": mem, "utts": utts, "audio": decoded, "indexed": indexed, "others": utts[N_INDEXED:]}


def test_answers_indexed_clips_with_their_reference(clips: dict) -> None:
    mem, audio = clips["mem"], clips["audio"]
    got = mem.transcribe_batch([audio[u.utt_id] for u in clips["indexed"]])
    assert got == [u.reference for u in clips["indexed"]]


@pytest.mark.parametrize("variant", ["silence", "attenuate", "noise"])
def test_matches_masked_versions_of_indexed_clips(clips: dict, variant: str) -> None:
    mem, audio = clips["mem"], clips["audio"]
    settings = MaskSettings(variants=(variant,), primary_variant=variant)
    rng = np.random.default_rng(1)
    masked = []
    for u in clips["indexed"]:
        x = audio[u.utt_id]
        mid = len(x) / 16000 / 2
        masked.append(apply_mask(x, mid - 0.3, mid + 0.3, variant, settings, rng))  # 0.6 s: longer than most words
    assert mem.transcribe_batch(masked) == [u.reference for u in clips["indexed"]]


def test_matches_clips_under_mild_added_noise(clips: dict) -> None:
    mem, audio = clips["mem"], clips["audio"]
    rng = np.random.default_rng(2)
    noisy = []
    for u in clips["indexed"]:
        x = audio[u.utt_id]
        noisy.append((x + rng.normal(0, 10 ** (-30 / 20) * float(np.sqrt(np.mean(x**2))), x.shape)).astype(np.float32))  # 30 dB SNR
    assert mem.transcribe_batch(noisy) == [u.reference for u in clips["indexed"]]


def test_does_not_match_other_clips(clips: dict) -> None:
    mem, audio = clips["mem"], clips["audio"]
    # no fallback configured: a clip that matches nothing gets an empty transcript
    assert mem.transcribe_batch([audio[u.utt_id] for u in clips["others"]]) == [""] * len(clips["others"])
    assert mem.n_deferred >= len(clips["others"])


def test_unrelated_clips_score_well_below_threshold(clips: dict) -> None:
    audio = clips["audio"]
    fps = {k: fingerprint(v) for k, v in audio.items()}
    worst = max(similarity(fps[a], fps[b]) for a in fps for b in fps if a != b)
    assert worst < clips["mem"].threshold - 0.05


def test_does_not_match_tts_resynthesis_of_the_same_text(clips: dict) -> None:
    mem = clips["mem"]
    tts = EspeakTTS()
    resynth = []
    for u in clips["indexed"][:4]:
        x, sr = tts.synthesize(u.reference, "en-gb-x-gbcwmd")
        resynth.append(resample(x, sr, 16000))
    assert mem.transcribe_batch(resynth) == [""] * 4


def test_gain_does_not_change_the_fingerprint(clips: dict) -> None:
    x = clips["audio"][clips["indexed"][0].utt_id]
    assert similarity(fingerprint(x * 0.05), fingerprint(x)) > 0.99


def test_bad_options_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown option"):
        MemorizerBackend(index="x", treshold=0.5)
    with pytest.raises(ConfigError, match="'index'"):
        MemorizerBackend().load()


def test_registry_resolves_the_fallback_so_the_backend_never_reads_the_registry() -> None:
    from engine.errors import ConfigError
    from engine.model_registry import load_model_registry

    reg = load_model_registry()
    spec = reg["memorizer"].spec(registry=reg)
    fb = spec.options["fallback"]
    assert fb["name"] == "whisper-tiny.en" and fb["backend"] == "faster-whisper" and fb["options"] == dict(reg["whisper-tiny.en"].options)
    backend = __import__("engine.backends", fromlist=["build_backend"]).build_backend(
        type(spec)(spec.name, spec.backend, {"index": "x", "fallback": "whisper-tiny.en"})
    )
    with pytest.raises(ConfigError, match="index|resolved"):
        backend.load()


def test_indexes_derived_benchmark_clips_but_not_probe_audio(clips: dict, tmp_path: Path) -> None:
    """A benchmark's own derived clips (an emotional re-voicing with its parent_id) are learned;
    audio a probe made from the benchmark is not."""
    a, b, c = clips["others"][:3]
    revoiced = replace(a, audio_path=None, parent_id="some-parent", derivation={"emotion": {"label": "positive-high-arousal"}})
    probe_made = replace(
        b, audio_path=None, parent_id=b.utt_id + "-orig", utt_id=b.utt_id + "~tts", derivation={"probe": "synthetic_voice"}
    )
    plain = replace(c, audio_path=None)
    write_shards([revoiced, probe_made, plain], tmp_path / "index", shard_size=8)
    mem = MemorizerBackend(index=str(tmp_path / "index"), index_reader="parquet")
    mem.load()
    assert sorted(t[0] for t in mem._index) == sorted([revoiced.utt_id, plain.utt_id])
    audio = clips["audio"]
    assert mem.transcribe_batch([audio[a.utt_id], audio[c.utt_id]]) == [a.reference, c.reference]
