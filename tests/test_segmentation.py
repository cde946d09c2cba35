"""Long-form segmentation: chunk-plan guarantees and stitching (property tests), and the real
Silero VAD on synthesized speech separated by silence."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.audio.segmentation import Chunk, SegmentationConfig, plan_chunks, speech_regions, stitch, transcribe_chunks
from engine.data import SAMPLE_RATE
from engine.errors import ConfigError


@st.composite
def word_timelines(draw: st.DrawFn) -> tuple[list[tuple[float, float, str]], float]:
    """Words with times: random durations and gaps (some 0, some long), so regions merge, touch
    and exceed the chunk limit."""
    n = draw(st.integers(1, 60))
    t = draw(st.floats(0, 3))
    words = []
    for i in range(n):
        dur = draw(st.floats(0.05, 1.2))
        words.append((t, t + dur, f"w{i}"))
        t += dur + draw(st.sampled_from([0.0, 0.01, 0.1, 0.4, 2.0, 7.0]))
    return words, t + draw(st.floats(0, 3))


@settings(max_examples=150, deadline=None)
@given(word_timelines(), st.floats(2.0, 20.0), st.floats(0.0, 0.5), st.booleans())
def test_stitching_never_drops_or_duplicates_words(
    timeline: tuple[list[tuple[float, float, str]], float], max_chunk: float, pad: float, group: bool
) -> None:
    words, duration = timeline
    cfg = SegmentationConfig(max_chunk_s=max_chunk, pad_s=pad)
    # Regions as a VAD would see them: words, optionally fused across short gaps.
    regions: list[tuple[float, float]] = []
    for s, e, _ in words:
        if group and regions and s - regions[-1][1] < 0.3:
            regions[-1] = (regions[-1][0], e)
        else:
            regions.append((s, e))
    chunks = plan_chunks(regions, duration, cfg)
    # Plan guarantees: sorted, disjoint, within the recording, at most max_chunk_s long.
    for (s1, e1), (s2, e2) in zip(chunks, chunks[1:]):
        assert e1 <= s2 + 1e-9
    assert all(0 <= s < e <= duration + 1e-9 and e - s <= max_chunk + 1e-6 for s, e in chunks)
    # Every instant of speech is in exactly one chunk.
    for s, e in regions:
        for t in np.linspace(s, e, 7)[1:-1]:
            assert sum(cs <= t < ce for cs, ce in chunks) == 1
    # An oracle model says the words whose centre its chunk holds; stitching restores all words.
    said = [Chunk(s, e, " ".join(w for ws, we, w in words if s <= (ws + we) / 2 < e)) for s, e in chunks]
    assert stitch(said[::-1]).split() == [w for _, _, w in words]


def test_transcribe_chunks_batches_across_recordings() -> None:
    audios = {"a": np.arange(SAMPLE_RATE * 4, dtype=np.float32), "b": np.ones(SAMPLE_RATE * 2, dtype=np.float32)}
    plans = {"a": [(0.0, 1.0), (2.0, 3.5)], "b": [(0.5, 2.0)]}
    sizes: list[int] = []

    def fake_model(clips: list[np.ndarray]) -> list[str]:  # reports what it was given
        sizes.append(len(clips))
        return [f"{len(c)}:{c[0]:.0f}" for c in clips]

    chunks, _ = transcribe_chunks(fake_model, audios, plans, batch_size=2)
    assert sizes == [2, 1]
    assert [c.text for c in chunks["a"]] == ["16000:0", "24000:32000"]
    assert chunks["b"][0].text == "24000:1"


def test_config_refuses_bad_values() -> None:
    with pytest.raises(ConfigError, match="unknown key.*max_chunk"):
        SegmentationConfig.from_mapping({"max_chunk": 20})
    with pytest.raises(ConfigError, match="neg_threshold"):
        SegmentationConfig(threshold=0.3, neg_threshold=0.5)


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
def test_silero_vad_finds_speech_between_silences() -> None:
    from engine.audio.segmentation import SileroVAD
    from engine.backends.tts.espeak import EspeakTTS

    tts = EspeakTTS(sample_rate=SAMPLE_RATE)
    a, sr = tts.synthesize("The quick brown fox jumps over the lazy dog.")
    b, _ = tts.synthesize("Then it ran away into the forest.")
    assert sr == SAMPLE_RATE
    gap = np.zeros(2 * SAMPLE_RATE, dtype=np.float32)
    audio = np.concatenate([gap, a, gap, b, gap])
    probs = SileroVAD().probabilities(audio)
    cfg = SegmentationConfig()
    regions = speech_regions(probs, cfg, len(audio) / SAMPLE_RATE)
    assert len(regions) == 2
    a_start, a_end = 2.0, 2.0 + len(a) / SAMPLE_RATE
    assert abs(regions[0][0] - a_start) < 0.4 and abs(regions[0][1] - a_end) < 0.6
    assert regions[1][0] > a_end + 1.0
