"""Conversation results go through the engine's keyed unit contract (issue class: results reused
or crossed): a changed recording or a changed reference speaker count (with ``oracle_speakers``)
recomputes exactly the units that read it, and ids ``a/b`` / ``a_b`` or models ``sim x`` /
``sim_x`` never share a file. Each case is compared with a fresh run into a new directory.

Recordings: two Flite voices, one sentence each, so Silero VAD finds speech. ASR: the
``simulated`` backend (text is a hash of the chunk's samples). Diarization: a small stand-in
registered here whose turns are a function of the audio and of the speaker count it is given.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from audits.conversation.results import ConversationResult
from engine.backends import DIAR_BACKENDS
from engine.backends.base import BackendInfo, DiarizationBackend, SpeakerTurn
from engine.data import SAMPLE_RATE, ModelSpec
from engine.errors import ResultIntegrityError

pytestmark = pytest.mark.skipif(shutil.which("flite") is None, reason="needs flite")


class _BandDiarizer(DiarizationBackend):
    """One turn per voiced second; its speaker is the loudest of ``num_speakers`` (default 2) frequency bands."""

    name = "test-band-diar"

    def load(self) -> None:
        pass

    def info(self) -> BackendInfo:
        return BackendInfo(backend=self.name, model_id=self.name)

    def diarize(self, audio: np.ndarray, sample_rate: int = SAMPLE_RATE, num_speakers: int | None = None) -> list[SpeakerTurn]:
        k = num_speakers or 2
        out = []
        for i in range(0, len(audio) - sample_rate + 1, sample_rate):
            w = np.asarray(audio[i : i + sample_rate], dtype=np.float64)
            if float(np.sqrt(np.mean(w * w))) < 1e-3:
                continue
            bands = [float(b.sum()) for b in np.array_split(np.abs(np.fft.rfft(w))[:2000], k)]
            out.append(SpeakerTurn(i / sample_rate, (i + sample_rate) / sample_rate, f"spk{int(np.argmax(bands))}"))
        return out


if _BandDiarizer.name not in DIAR_BACKENDS:
    DIAR_BACKENDS.register(_BandDiarizer.name)(_BandDiarizer)

TEXTS = ("The quick brown fox jumps over the lazy dog.", "Please call me back when you can.")


def _voice(text: str, voice: str) -> np.ndarray:
    from engine.backends.tts.espeak import resample
    from engine.backends.tts.flite import FliteTTS

    tts = FliteTTS()
    tts.load()
    x, sr = tts.synthesize(text, voice)
    return resample(np.asarray(x, np.float32), sr, SAMPLE_RATE)


@pytest.fixture(scope="module")
def voices() -> dict[str, np.ndarray]:
    return {"slt": _voice(TEXTS[0], "slt"), "kal": _voice(TEXTS[1], "kal")}


def make_set(root: Path, voices: dict[str, np.ndarray], recordings: Sequence[tuple[str, str, float]]) -> Path:
    """``recordings``: (id, file stem, gain of the second voice); each is slt then kal, with references."""
    root.mkdir(parents=True, exist_ok=True)
    manifest, rttm, seglst = [], [], []
    for rec, stem, gain in recordings:
        a, b = voices["slt"], voices["kal"] * gain
        gap = np.zeros(SAMPLE_RATE // 2, np.float32)
        sf.write(root / f"{stem}.wav", np.concatenate([a, gap, b]).astype(np.float32), SAMPLE_RATE)
        t1 = len(a) / SAMPLE_RATE
        t2 = t1 + 0.5
        t3 = t2 + len(b) / SAMPLE_RATE
        manifest.append({"id": rec, "audio_filepath": f"{stem}.wav"})
        rttm += [f"SPEAKER {rec} 1 0.000 {t1:.3f} <NA> <NA> A <NA> <NA>", f"SPEAKER {rec} 1 {t2:.3f} {t3 - t2:.3f} <NA> <NA> B <NA> <NA>"]
        seglst += [
            {"session_id": rec, "speaker": "A", "start_time": 0.0, "end_time": round(t1, 3), "words": TEXTS[0]},
            {"session_id": rec, "speaker": "B", "start_time": round(t2, 3), "end_time": round(t3, 3), "words": TEXTS[1]},
        ]
    (root / "manifest.jsonl").write_text("".join(json.dumps(m) + "\n" for m in manifest))
    (root / "reference.rttm").write_text("\n".join(rttm) + "\n")
    (root / "reference.json").write_text(json.dumps(seglst))
    return root


def sim(name: str, seed: int = 0) -> ModelSpec:
    return ModelSpec(name, "simulated", {"seed": seed, "time_scale": 0.0}, batch_size=4)


def run(root: Path, out: Path, specs: Sequence[ModelSpec], **cfg: Any) -> tuple[dict[str, Any], ConversationResult, list[dict[str, Any]]]:
    from audits.conversation.run import conversation_summary, load_conversation_data, parse_conversation_config, run_conversation
    from audits.normalizing import get_normalizer

    config = parse_conversation_config({"diarization": "test-band-diar", "segmentation": {"max_chunk_s": 10}, **cfg}, "t.yaml")
    data = load_conversation_data(root)
    facts = run_conversation(config, data, specs, out)
    summary, rows = conversation_summary(config, data, specs, out, get_normalizer("whisper-english"))
    return facts, summary, rows


def figures(result: ConversationResult) -> dict[str, Any]:
    """What a user reads: DER and each model's WER / cpWER, per recording set."""
    assert result.diarization is not None and result.models is not None
    return {"der": result.diarization.der, **{m: (v.wer, v.cpwer.wer if v.cpwer else None, v.n_chunks) for m, v in result.models.items()}}


def test_changed_audio_recomputes_its_units_and_matches_a_fresh_run(voices: dict[str, np.ndarray], tmp_path: Path) -> None:
    root = make_set(tmp_path / "set", voices, [("r1", "r1", 1.0), ("r2", "r2", 1.0)])
    out = tmp_path / "out"
    facts, before, _ = run(root, out, [sim("sim")])
    assert facts["diarization"]["pending"] == 2 and facts["pending"]["sim"] == 2
    again, _, _ = run(root, out, [sim("sim")])
    assert again["diarization"]["pending"] == 0 and again["pending"]["sim"] == 0  # exact resume
    other = make_set(tmp_path / "other", voices, [("r2", "r2", 0.0)])  # r2 loses its second voice: other audio
    shutil.copyfile(other / "r2.wav", root / "r2.wav")  # only r2's file changes
    facts, after, _ = run(root, out, [sim("sim")])
    assert facts["diarization"]["pending"] == 1 and facts["pending"]["sim"] == 1  # only r2
    _, fresh, _ = run(root, tmp_path / "fresh", [sim("sim")])
    assert figures(after) == figures(fresh)
    assert figures(after) != figures(before)


def test_changed_reference_speakers_with_oracle_recomputes_diarization(voices: dict[str, np.ndarray], tmp_path: Path) -> None:
    root = make_set(tmp_path / "set", voices, [("r1", "r1", 1.0)])
    out = tmp_path / "out"
    run(root, out, [sim("sim")], oracle_speakers=True)
    # the reference now says three speakers: the diarizer was told 2, so its turns must be redone
    rttm = (root / "reference.rttm").read_text().splitlines()
    rttm.append(
        rttm[-1]
        .replace(" B ", " C ")
        .replace(rttm[-1].split()[3], f"{float(rttm[-1].split()[3]) + 0.1:.3f}", 1)
        .replace(rttm[-1].split()[4], "0.500", 1)
    )
    (root / "reference.rttm").write_text("\n".join(rttm) + "\n")
    facts, after, _ = run(root, out, [sim("sim")], oracle_speakers=True)
    assert facts["diarization"]["pending"] == 1
    _, fresh, _ = run(root, tmp_path / "fresh", [sim("sim")], oracle_speakers=True)
    assert figures(after) == figures(fresh)
    # without oracle_speakers the speaker count is not an input: nothing is recomputed
    out2 = tmp_path / "out2"
    run(root, out2, [sim("sim")])
    (root / "reference.rttm").write_text("\n".join(rttm[:2]) + "\n")
    facts, _, _ = run(root, out2, [sim("sim")])
    assert facts["diarization"]["pending"] == 0 and facts["pending"]["sim"] == 0


def test_ids_and_models_that_escape_alike_never_share_a_file(voices: dict[str, np.ndarray], tmp_path: Path) -> None:
    from audits.conversation.run import _stores

    root = make_set(tmp_path / "set", voices, [("a/b", "ab1", 1.0), ("a_b", "ab2", 0.05)])
    out = tmp_path / "out"
    specs = [sim("sim x", seed=1), sim("sim_x", seed=2)]
    facts, summary, rows = run(root, out, specs)
    _, asr = _stores(out)
    paths = {asr.result_path(m.name, r) for m in specs for r in ("a/b", "a_b")}
    assert len(paths) == 4 and all(p.exists() for p in paths)
    assert len({r["recording"] for r in rows}) == 2 and len(rows) == 4
    # each (model, recording) holds its own transcript: the same as a run with that model and recording alone
    for spec in specs:
        for rec, stem, gain in (("a/b", "ab1", 1.0), ("a_b", "ab2", 0.05)):
            alone = make_set(tmp_path / f"alone-{stem}", voices, [(rec, stem, gain)])
            run(alone, tmp_path / f"alone-{stem}-{spec.name}", [spec])
            _, solo = _stores(tmp_path / f"alone-{stem}-{spec.name}")
            mine = json.loads(asr.result_path(spec.name, rec).read_text())
            theirs = json.loads(solo.result_path(spec.name, rec).read_text())
            assert mine["longform"] == theirs["longform"] and mine["attributed"] == theirs["attributed"]
    a = json.loads(asr.result_path("sim x", "a/b").read_text())["longform"]
    b = json.loads(asr.result_path("sim_x", "a/b").read_text())["longform"]
    assert [c["text"] for c in a] != [c["text"] for c in b]  # two models, two transcripts


def test_a_result_its_marker_does_not_vouch_for_is_refused(voices: dict[str, np.ndarray], tmp_path: Path) -> None:
    from audits.conversation.run import _stores

    root = make_set(tmp_path / "set", voices, [("r1", "r1", 1.0)])
    out = tmp_path / "out"
    run(root, out, [sim("sim")])
    _, asr = _stores(out)
    path = asr.result_path("sim", "r1")
    stored = json.loads(path.read_text())
    stored["longform"] = [{"start": 0.0, "end": 1.0, "text": "words nobody said"}]
    path.write_text(json.dumps(stored))
    from audits.conversation.run import conversation_summary, load_conversation_data, parse_conversation_config
    from audits.normalizing import get_normalizer

    cfg = parse_conversation_config({"diarization": "test-band-diar", "segmentation": {"max_chunk_s": 10}}, "t.yaml")
    with pytest.raises(ResultIntegrityError, match="not the one its marker describes"):
        conversation_summary(cfg, load_conversation_data(root), [sim("sim")], out, get_normalizer("whisper-english"))
    facts, _, _ = run(root, out, [sim("sim")])  # the same command recomputes it
    assert facts["pending"]["sim"] == 1
