"""The demo conversation set: deterministic, references consistent with the audio, readable by
the conversation loader; the recipe block is validated before models load; the diarization
baseline separates two voices."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from engine.errors import ConfigError, ManifestError, ResultIntegrityError

pytestmark = pytest.mark.skipif(shutil.which("espeak-ng") is None or shutil.which("flite") is None, reason="needs espeak-ng and flite")


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.name.encode())
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def small_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from engine.corpus.conversation import build_conversation_set

    return build_conversation_set(tmp_path_factory.mktemp("conv") / "a", n_recordings=2, min_s=12, max_s=16).root


def test_build_is_deterministic_and_consistent(small_set: Path, tmp_path: Path) -> None:
    from audits.conversation.run import load_conversation_data
    from engine.corpus.conversation import build_conversation_set

    again = build_conversation_set(tmp_path / "b", n_recordings=2, min_s=12, max_s=16).root
    assert _digest(small_set) == _digest(again)
    data = load_conversation_data(small_set)  # cross-checks recordings, durations and speakers
    assert sorted(data.recordings) == ["conv-000", "conv-001"]
    assert not [p for p in data.problems if "overlaps itself" in p]
    spk = data.turns.speakers()
    assert len(spk["conv-000"]) == 2 and len(spk["conv-001"]) == 3
    for rec, info in data.recordings.items():
        assert 12 <= info["duration"] <= 16
        assert info["labels"]["n_speakers"] == str(len(spk[rec]))
    # SegLST words are the reference text of the turns, in the same places as the RTTM turns.
    seg = json.loads((small_set / "reference.json").read_text())
    rttm = {(s.session_id, s.speaker, round(s.start, 3)) for s in data.turns.segments}
    assert {(s["session_id"], s["speaker"], round(s["start_time"], 3)) for s in seg} == rttm


def test_loader_reports_missing_recording_and_short_audio(small_set: Path, tmp_path: Path) -> None:
    from audits.conversation.run import load_conversation_data

    bad = tmp_path / "bad"
    shutil.copytree(small_set, bad)
    (bad / "audio" / "conv-001.flac").unlink()
    with pytest.raises(ManifestError, match="conv-001.flac does not exist"):
        load_conversation_data(bad)
    shutil.rmtree(bad)
    shutil.copytree(small_set, bad)
    lines = (bad / "reference.rttm").read_text().splitlines()
    lines.append("SPEAKER conv-000 1 100.000 2.000 <NA> <NA> flite:slt <NA> <NA>")
    (bad / "reference.rttm").write_text("\n".join(lines) + "\n")
    with pytest.raises(ManifestError, match=rf"reference.rttm:{len(lines)}.*ends at 102.000 s.*conv-000"):
        load_conversation_data(bad)


def test_recipe_block_is_validated() -> None:
    from audits.conversation.run import parse_conversation_config

    cfg = parse_conversation_config({"segmentation": {"max_chunk_s": 20}, "collar": 0.5}, "r.yaml")
    assert cfg.segmentation.max_chunk_s == 20 and cfg.collar == 0.5 and not cfg.skip_overlap
    with pytest.raises(ConfigError, match="r.yaml: conversation: unknown key.*colar"):
        parse_conversation_config({"colar": 0.25}, "r.yaml")
    with pytest.raises(ConfigError, match="diarization backend"):
        parse_conversation_config({"diarization": "pyanote"}, "r.yaml")
    with pytest.raises(ConfigError, match="segmentation: unknown key"):
        parse_conversation_config({"segmentation": {"max_len": 20}}, "r.yaml")


@pytest.mark.slow
def test_baseline_diarizer_separates_two_voices(small_set: Path) -> None:
    pytest.importorskip("resemblyzer")
    from audits.conversation.metrics import diarization_scores
    from audits.conversation.readers import Segment
    from audits.conversation.run import load_conversation_data
    from engine.backends import DIAR_BACKENDS
    from engine.keyed.keyed_workers import load_recording as _load_audio

    data = load_conversation_data(small_set)
    diar = DIAR_BACKENDS.get("vad-resemblyzer")()
    diar.load()
    rec = "conv-000"
    turns = diar.diarize(_load_audio(data.recordings[rec]["path"]))
    hyp = [Segment(rec, t.speaker, t.start, t.end) for t in turns]
    ref = [s for s in data.turns.segments if s.session_id == rec]
    score = diarization_scores(ref, hyp, {rec: data.recordings[rec]["duration"]})[rec]
    assert score.n_hyp_speakers == 2
    assert score.der is not None and score.der < 0.25
    # The threshold sweep reuses one analysis per recording: at any threshold it must give
    # exactly what a fresh diarizer with that threshold gives.
    audio = _load_audio(data.recordings[rec]["path"])
    analysis = diar.analyse(audio)
    for thr in (0.2, 0.6):
        diar.threshold = thr
        assert diar.turns(analysis) == DIAR_BACKENDS.get("vad-resemblyzer")(threshold=thr).diarize(audio)


@pytest.mark.slow
def test_conversation_section_runs_scores_and_resumes(small_set: Path, tmp_path: Path) -> None:
    pytest.importorskip("resemblyzer")
    from audits.conversation.run import (
        conversation_summary,
        load_conversation_data,
        markdown_lines,
        parse_conversation_config,
        run_conversation,
    )
    from audits.normalizing import get_normalizer
    from engine.backends.availability import missing_modules
    from engine.model_registry import load_model_registry, resolve_models

    if missing_modules(("pocketsphinx",)):
        pytest.fail("pocketsphinx is a core dependency and is missing: pip install pocketsphinx")
    spec = resolve_models(["pocketsphinx-en-us"], load_model_registry())[0].spec(None)
    cfg = parse_conversation_config({"segmentation": {"max_chunk_s": 10}}, "t.yaml")
    data = load_conversation_data(small_set)
    run_conversation(cfg, data, [spec], tmp_path)
    stored = sorted((tmp_path / "conversation" / "units").rglob("*.json"))
    assert len(stored) == 2 + 2  # diarization x2, asr x2, each vouched for by a marker
    assert len(sorted((tmp_path / "conversation" / "markers").rglob("*.json"))) == 4
    norm = get_normalizer("whisper-english")
    result, rows = conversation_summary(cfg, data, [spec], tmp_path, norm)
    m = result.model(spec.name)
    assert m.cpwer is not None and result.diarization is not None
    assert m.n_words == sum(len(norm(s.words).split()) for s in data.reference.segments) == m.cpwer.n_words
    assert m.wer is not None and 0 <= m.wer < 1.0 and m.cpwer.wer is not None and 0 <= m.cpwer.wer < 1.2 and (m.rtfx or 0) > 0
    assert result.diarization.der is not None and len(rows) == 2
    assert any("cpWER" in line for line in markdown_lines(result))
    # Resume: only the removed file is redone; the other keeps its bytes and time.
    keep = tmp_path / "conversation" / "units" / "asr" / spec.name / "conv-000.json"
    gone = tmp_path / "conversation" / "units" / "asr" / spec.name / "conv-001.json"
    before = keep.stat().st_mtime_ns
    gone.unlink()
    facts = run_conversation(cfg, data, [spec], tmp_path)
    assert gone.exists() and keep.stat().st_mtime_ns == before and facts["diarization"]["pending"] == 0
    assert facts["pending"][spec.name] == 1
    # Other segmentation settings in the same directory: every ASR unit is recomputed, diarization reused.
    other = parse_conversation_config({"segmentation": {"max_chunk_s": 12}}, "t.yaml")
    with pytest.raises(ResultIntegrityError):  # the stored ASR results were made with other settings
        conversation_summary(other, data, [spec], tmp_path, norm)
    facts = run_conversation(other, data, [spec], tmp_path)
    assert facts["diarization"]["pending"] == 0 and facts["pending"][spec.name] == 2


@pytest.mark.slow
def test_conversation_passes_on_ray_equal_inprocess_and_run_in_actors(small_set: Path, ray_local: str, tmp_path: Path) -> None:
    """Diarization and long-form ASR are keyed passes on the run's engine: on Ray they run in
    actors (not the driver) and store exactly what an in-process run stores."""
    import os

    from audits.conversation.run import load_conversation_data, parse_conversation_config, run_conversation
    from engine.engine import EngineOptions
    from engine.model_registry import load_model_registry, resolve_models

    spec = resolve_models(["pocketsphinx-en-us"], load_model_registry())[0].spec(None)
    cfg = parse_conversation_config({"segmentation": {"max_chunk_s": 10}}, "t.yaml")
    data = load_conversation_data(small_set)
    run_conversation(cfg, data, [spec], tmp_path / "local")
    facts = run_conversation(cfg, data, [spec], tmp_path / "ray", engine=EngineOptions(kind="ray"))
    timing = {"seconds", "vad_s", "infer_longform_s", "infer_attributed_s"}

    def stored(root: Path) -> dict[str, Any]:
        base = root / "conversation" / "units"
        return {
            str(p.relative_to(base)): {k: v for k, v in json.loads(p.read_text()).items() if k not in timing}
            for p in sorted(base.rglob("*.json"))
        }

    local, remote = stored(tmp_path / "local"), stored(tmp_path / "ray")
    assert len(local) == 4 and local == remote
    for f in (facts["diarization"], facts[spec.name]):
        assert f["runner"] == "ray" and f["actors"] and all(a["pid"] != os.getpid() for a in f["actors"])
