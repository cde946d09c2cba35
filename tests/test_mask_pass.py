"""The masked-word probe's derivation on the engine's workers (audits/probes/mask_pass.py,
engine.keyed.probe_workers.MaskWorker): the driver plans and writes, a worker decodes and masks each clip.
The derived set is byte for byte the one the in-process derivation writes (audio, derivation
records, skips, Parquet shards, and so every figure computed from them), in-process and on Ray (in an
actor, not the driver); a second run derives nothing; an altered derived file is derived again."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audits.probes.config import TimingConfig
from audits.probes.helper_passes import Clip, EngineTimings
from audits.probes.mask_pass import derive_masked_set
from audits.probes.masking import MaskBuild, MaskSettings, build_masked_set, clips_needing_timings, records_from_rows
from audits.probes.masking_score import gated_leak_rate
from engine.audio.shards import encode_audio
from engine.data import SAMPLE_RATE, Utterance
from engine.datasets import Dataset, open_dataset
from engine.datasets.base import in_memory_dataset
from engine.engine import EngineOptions
from engine.storage import safe_name

TEXTS = (
    "We flew to Lisbon in two thousand sixteen with our friends.",
    "The meeting in Berlin starts at nine.",
    "we went there again and again",  # no target
)
WHISPER = TimingConfig(method="whisper", model="whisper-tiny.en")
SETTINGS = MaskSettings(variants=("silence", "attenuate", "noise"))


@pytest.fixture(scope="module")
def spoken() -> Dataset:
    """Three espeak-ng clips in memory, a clip too short to mask and one that cannot be decoded."""
    from audits.probes.synthetic_voice import SyntheticSettings, make_tts, synthesize

    tts = make_tts(SyntheticSettings())
    utts = []
    for i, text in enumerate(TEXTS):
        x = synthesize(tts, text)
        utts.append(
            Utterance(
                f"c{i}",
                text,
                audio_bytes=encode_audio(x, SAMPLE_RATE, "FLAC"),
                duration_s=len(x) / SAMPLE_RATE,
                speaker=f"s{i % 2}",
                labels={"accent": "x"},
            )
        )
    tts.close()
    tone = (0.1 * np.sin(np.arange(8000) * 0.05)).astype(np.float32)
    utts.append(Utterance("short", "Paris in 2016", audio_bytes=encode_audio(tone, SAMPLE_RATE, "FLAC"), duration_s=0.5))
    utts.append(Utterance("broken", "We met in Paris", audio_bytes=b"not audio at all", duration_s=2.0))
    return in_memory_dataset("spoken", "memory", "parquet", utts, shard_size=64, root=None)


def _timings(ds: Dataset, probes: Path, engine: EngineOptions) -> EngineTimings:
    timings = EngineTimings(WHISPER, probes, engine)
    need = clips_needing_timings(ds, SETTINGS)
    timings.compute([Clip(u.utt_id, u, ds.root) for u in need], {u.utt_id: u.reference or "" for u in need})
    return timings


def _in_driver(ds: Dataset, timings: EngineTimings, out: Path) -> MaskBuild:
    """The derivation in this process: decode and mask here, with the same timings."""

    def timings_for(u: Utterance, x: np.ndarray) -> Any:
        return timings.timings(u.utt_id, u.reference or "", len(x) / SAMPLE_RATE)

    return build_masked_set(ds, timings_for, SETTINGS, out)


def _written(build: MaskBuild) -> dict[str, Any]:
    """Everything the derivation wrote and reports: shard and skip files byte for byte, the rows, counts and a leak figure."""
    out = build.derived_dir
    rows = {
        u.utt_id: (bytes(u.audio_bytes or b""), u.derivation_json(), u.duration_s, u.parent_id, u.speaker, dict(u.labels))
        for s in open_dataset(out, "parquet").iter_shards()
        for u in s.utterances
    }
    hyps = {("m", uid): ("Lisbon in 2016" if k % 2 else "") for k, uid in enumerate(sorted(build.derivations))}
    base = {("m", p): "Lisbon Berlin in 2016 at nine" for p in build.parents.values()}
    leak = gated_leak_rate(records_from_rows(build.derivations, build.parents, hyps, base, ["m"]), "silence").to_dict()
    return {
        "shards": {p.name: p.read_bytes() for p in sorted(out.glob("shard-*.parquet"))},
        # libsndfile's error names the in-memory file object by its address, which differs from one decode to the next
        "skipped": re.sub(rb"0x[0-9a-f]+", b"0x?", (out / "skipped.jsonl").read_bytes()),
        "rows": rows,
        "derivations": build.derivations,
        "parents": build.parents,
        "counts": (build.n_clips, build.n_clips_masked, build.skip_counts()),
        "leak": leak,
    }


@pytest.fixture
def count_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Clips the mask worker derived in this process."""
    from engine.keyed.probe_workers import MaskWorker

    calls: list[str] = []
    real = MaskWorker.run

    def run(self: MaskWorker, payload: Any) -> Any:
        calls.append(str(payload["utt"]["utt_id"]))
        return real(self, payload)

    monkeypatch.setattr(MaskWorker, "run", run)
    return calls


def test_workers_derive_the_same_set_as_the_driver_and_resume_exactly(spoken: Dataset, tmp_path: Path, count_runs: list[str]) -> None:
    timings = _timings(spoken, tmp_path / "probes", EngineOptions())
    expected = _written(_in_driver(spoken, timings, tmp_path / "driver"))
    assert len(expected["rows"]) == 6 and set(expected["parents"].values()) == {"c0", "c1"}  # 2 clips x 1 target x 3 variants
    assert expected["counts"][2] == {"no-maskable-word": 1, "clip-too-short": 1, "audio-error": 1}

    build = derive_masked_set(spoken, timings, SETTINGS, tmp_path / "derived", tmp_path / "work", EngineOptions())
    assert _written(build) == expected  # audio, records, skips, shards and figures, byte for byte
    assert sorted(count_runs) == ["broken", "c0", "c1", "c2", "short"]  # every clip's audio work ran in a worker
    assert build.facts["runner"] == "inprocess" and build.facts["pid"] == os.getpid() and build.facts["pending"] == 5
    assert sorted(p.name for p in (tmp_path / "work" / "audio").iterdir()) == sorted(f"{safe_name(uid)}.flac" for uid in expected["rows"])

    # the same command again: every unit is vouched for by its marker and its files, nothing is derived
    again = derive_masked_set(spoken, timings, SETTINGS, tmp_path / "derived", tmp_path / "work", EngineOptions())
    assert len(count_runs) == 5 and again.facts == {} and _written(again) == expected

    # a derived file altered on disk: only its clip is derived again, and the set is the same as before
    victim = tmp_path / "work" / "audio" / f"{safe_name('c1~mask-0-noise')}.flac"
    victim.write_bytes(victim.read_bytes()[:-10] + b"0123456789")
    fixed = derive_masked_set(spoken, timings, SETTINGS, tmp_path / "derived", tmp_path / "work", EngineOptions())
    assert count_runs[5:] == ["c1"] and _written(fixed) == expected


def test_other_audio_settings_derive_again(spoken: Dataset, tmp_path: Path, count_runs: list[str]) -> None:
    """The marker's settings are the audio settings: another seed derives every clip again (and changes only the noise)."""
    timings = _timings(spoken, tmp_path / "probes", EngineOptions())
    first = _written(derive_masked_set(spoken, timings, SETTINGS, tmp_path / "d1", tmp_path / "work", EngineOptions()))
    second = derive_masked_set(spoken, timings, replace(SETTINGS, seed=7), tmp_path / "d2", tmp_path / "work", EngineOptions())
    assert len(count_runs) == 10
    rows1, rows2 = first["rows"], _written(second)["rows"]
    assert rows1.keys() == rows2.keys()
    assert [uid for uid in rows1 if rows1[uid][0] != rows2[uid][0]] == ["c0~mask-0-noise", "c1~mask-0-noise"]


def test_renditions_are_encoded_and_masked_by_workers_as_in_one_process(spoken: Dataset, tmp_path: Path, count_runs: list[str]) -> None:
    """The synthetic-voice probe's renditions (float WAV files): each comes back as the FLAC the shards hold, those of the
    masking source masked again, exactly as reading, encoding and masking them in the driver gave."""
    import soundfile as sf

    from audits.probes.mask_pass import derive_renditions
    from audits.probes.masking import mask_clip
    from engine.audio.decoding import decode
    from engine.keyed.probe_workers import float_wav

    clips: list[tuple[Clip, bool]] = []
    utts = [u for s in spoken.iter_shards() for u in s.utterances]
    for u, mask in ((utts[0], True), (utts[1], False), (utts[2], True)):
        path = tmp_path / "voices" / f"{u.utt_id}~tts.wav"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(float_wav(decode(u).samples, SAMPLE_RATE))
        uid = f"{u.utt_id}~tts"
        clips.append((Clip(uid, Utterance(uid, u.reference, audio_path=str(path), derivation={"probe": "synthetic_voice"})), mask))
    timings = EngineTimings(WHISPER, tmp_path / "probes", EngineOptions())
    need = [c for c, mask in clips if mask and c.utt.reference and "Lisbon" in c.utt.reference]
    timings.compute(need, {c.unit: c.utt.reference or "" for c in need})

    made, facts = derive_renditions(clips, timings, SETTINGS, tmp_path / "work", EngineOptions())
    assert sorted(count_runs) == ["c0~tts", "c1~tts", "c2~tts"] and facts["runner"] == "inprocess"
    for c, mask in clips:
        x, _ = sf.read(str(c.utt.audio_path), dtype="float32")
        clean = encode_audio(x, SAMPLE_RATE, "FLAC")
        d = made[c.unit]
        assert d.source == clean and d.duration_s == len(x) / SAMPLE_RATE
        if not mask:
            assert d.clips == [] and d.skips == []
            continue
        masked, skips = mask_clip(
            Utterance(c.unit, c.utt.reference, audio_bytes=clean),
            x,
            lambda c=c, x=x: timings.timings(c.unit, c.utt.reference or "", len(x) / SAMPLE_RATE),
            SETTINGS,
        )
        assert [(uid, data, Utterance("x", None, derivation=der).derivation_json()) for uid, data, der in d.clips] == [
            (m.utt_id, m.audio_bytes, m.derivation_json()) for m in masked
        ]
        assert d.skips == skips
    assert len(made["c0~tts"].clips) == 3 and [s.reason for s in made["c2~tts"].skips] == ["no-maskable-word"]
    again, facts = derive_renditions(clips, timings, SETTINGS, tmp_path / "work", EngineOptions())
    assert (
        len(count_runs) == 3
        and facts == {}
        and {k: (d.source, d.clips) for k, d in again.items()} == {k: (d.source, d.clips) for k, d in made.items()}
    )


@pytest.fixture(scope="module")
def ray_engine(ray_local: str) -> EngineOptions:
    """The Ray engine on the session's local 2-CPU instance (tests/conftest.py)."""
    return EngineOptions(kind="ray")


@pytest.mark.slow
def test_on_ray_the_set_is_derived_in_an_actor_and_equal(spoken: Dataset, tmp_path: Path, ray_engine: EngineOptions) -> None:
    timings = _timings(spoken, tmp_path / "probes", EngineOptions())
    expected = _written(_in_driver(spoken, timings, tmp_path / "driver"))
    build = derive_masked_set(spoken, timings, SETTINGS, tmp_path / "derived", tmp_path / "work", ray_engine)
    assert _written(build) == expected
    assert build.facts["runner"] == "ray" and build.facts["pending"] == 5
    assert [a["pid"] != os.getpid() for a in build.facts["actors"]] == [True]
    again = derive_masked_set(spoken, timings, SETTINGS, tmp_path / "derived", tmp_path / "work", ray_engine)
    assert again.facts == {} and _written(again) == expected
