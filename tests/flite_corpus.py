"""Six Flite clips (two voices, three sentences) with a JSONL manifest: the speech the pass tests
embed and transcribe, so the real SV/SER backends get speech."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from engine.data import SAMPLE_RATE

SENTENCES = ("The quick brown fox jumps over the lazy dog.", "A large red ball rolled slowly down the hallway.", "Please call me back.")


def build_flite_corpus(root: Path, utt_id: Callable[[str, int], str], **extra: Any) -> Path:
    """Synthesize the clips into ``root``; ``utt_id(voice, k)`` names each row, ``extra`` adds columns. Returns the manifest."""
    if shutil.which("flite") is None:
        pytest.skip("flite is not installed (apt-get install flite)")
    from engine.backends.tts.espeak import resample
    from engine.backends.tts.flite import FliteTTS

    tts = FliteTTS()
    tts.load()
    rows = []
    for voice in ("slt", "kal"):
        for k, text in enumerate(SENTENCES):
            x, sr = tts.synthesize(text, voice)
            sf.write(root / f"{voice}-{k}.wav", resample(np.asarray(x, np.float32), sr, SAMPLE_RATE), SAMPLE_RATE)
            rows.append({"utt_id": utt_id(voice, k), "audio_filepath": f"{voice}-{k}.wav", "text": text, "speaker": voice, **extra})
    (root / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root / "manifest.jsonl"
