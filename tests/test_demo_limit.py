"""Demo recipes that respect the user: --limit builds only the clips it reads (in pairs per speaker where a
section compares clips of one speaker), an empty speaker section stops the run saying why, and a corpus the
user built in the built-in folder is refused, never overwritten."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from audits.cli.main import app
from audits.demo_data import DEFAULT_N_UTTS
from audits.speaker.metrics import generate_trials
from audits.speaker.run import check_trials_formed
from engine.corpus.demo import DEFAULT_N_UTTS as DESIGN_N_UTTS
from engine.corpus.demo import plan_design, select_plans
from engine.errors import ConfigError

needs_tts = pytest.mark.skipif(shutil.which("espeak-ng") is None or shutil.which("flite") is None, reason="needs espeak-ng and flite")


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_default_size_known_without_the_builder() -> None:
    assert DEFAULT_N_UTTS == DESIGN_N_UTTS


def test_first_clips_form_no_pair_but_the_pairs_selection_does() -> None:
    """The design's first 8 clips are 8 voices (no same-speaker trial); limit-8-pairs gives several voices with two clips or more."""
    first = plan_design()[:8]
    trials = generate_trials({p.utt_id: p.voice.speaker for p in first})
    assert not any(t.label == 1 for t in trials.trials)
    with pytest.raises(ConfigError, match="no same-speaker pair: each of the 8 speaker"):
        check_trials_formed(trials, {p.utt_id: p.voice.speaker for p in first}, None)

    plans, free = select_plans("full-limit-8-pairs", DESIGN_N_UTTS, 0)
    assert len(plans) == 8 and free == []
    per_voice = Counter(p.voice.speaker for p in plans)
    assert sum(1 for n in per_voice.values() if n >= 2) >= 3, per_voice
    speakers = {p.utt_id: p.voice.speaker for p in plans}
    trials = generate_trials(speakers)
    check_trials_formed(trials, speakers, None)  # both classes present
    # clips keep their design ids; an emotional clip comes with the neutral clip it re-voices
    full = {p.utt_id: p for p in plan_design()}
    ids = {p.utt_id for p in plans}
    assert all(full[p.utt_id] == p for p in plans)
    assert all(p.parent_id is None or p.parent_id in ids for p in plans)


@pytest.mark.parametrize("n", [1, 5, 8, 13, 44])
def test_limit_selection_size_and_determinism(n: int) -> None:
    for base in ("full", "small"):
        whole, whole_free = select_plans(base, DESIGN_N_UTTS, 0)
        # without pairs: the first N clips of the subset, the clips --limit N read from the built subset
        plans, free = select_plans(f"{base}-limit-{n}", DESIGN_N_UTTS, 0)
        assert [*plans, *free] == [*whole, *whole_free][:n]
        a, _ = select_plans(f"{base}-limit-{n}-pairs", DESIGN_N_UTTS, 0)
        b, _ = select_plans(f"{base}-limit-{n}-pairs", DESIGN_N_UTTS, 0)
        assert len(a) == min(n, len(whole)) and a == b and {p.utt_id for p in a} <= {p.utt_id for p in whole}


def test_unknown_limit_subset_refused() -> None:
    with pytest.raises(ConfigError, match="expected full-limit-N or small-limit-N"):
        select_plans("full-limit-0", DESIGN_N_UTTS, 0)


@needs_tts
def test_limit_builds_only_its_clips_and_an_empty_speaker_section_stops_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """demo-speaker --limit 2: two clips are synthesized (not the corpus), both of one voice (taken in pairs), so no
    different-speaker trial exists: the run stops before any model loads, saying why, with a non-zero exit."""
    monkeypatch.setenv("AUDIT_DATA_DIR", str(tmp_path / "data"))
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "demo-speaker", "--limit", "2", "--out", str(out)])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert "speaker: the section would be empty: no different-speaker pair: all 2 labelled clips are of one speaker" in text
    built = tmp_path / "data" / "demo-limit" / "full-limit-2-pairs"
    meta = json.loads((built / "corpus.json").read_text(encoding="utf-8"))
    assert meta["subset"] == "full-limit-2-pairs" and meta["n_speech"] == 2 and meta["n_speech_free"] == 0
    assert len(list((built / "audio").glob("*.flac"))) == 2
    assert not (tmp_path / "data" / "demo").exists()  # the full corpus was not built


@needs_tts
def test_a_user_built_conversation_set_is_never_overwritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("AUDIT_DATA_DIR", str(data))
    folder = data / "conversation"
    made = CliRunner().invoke(app, ["corpus", "conversation", "--n", "1", "--min-s", "5", "--max-s", "6", "--out", str(folder)])
    assert made.exit_code == 0, made.output
    before = _digest(folder)
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "demo-conversation", "--out", str(out)])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert "holds a conversation set built with other settings (1 recordings of 5.0-6.0 s, seed 0)" in text
    assert f"audit corpus conversation --out {folder} --force" in text
    assert _digest(folder) == before and not out.exists()


def test_a_user_built_demo_corpus_is_never_overwritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A corpus.json of other settings (as `audit corpus demo --n 4` writes) in data/demo: `audit run demo-full` refuses it."""
    data = tmp_path / "data"
    monkeypatch.setenv("AUDIT_DATA_DIR", str(data))
    folder = data / "demo"
    (folder / "shards").mkdir(parents=True)
    (folder / "corpus.json").write_text(json.dumps({"name": "demo", "seed": 0, "n_utts": 4, "n_speech": 4, "subset": "full"}))
    before = _digest(folder)
    res = CliRunner().invoke(app, ["run", "demo-full", "--out", str(tmp_path / "run")])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert "holds a demo corpus built with other settings (4 clips, subset full, seed 0)" in text
    assert f"audit corpus demo --out {folder} --force" in text and f"--dataset {folder / 'manifest.jsonl'}" in text
    assert _digest(folder) == before


def test_a_built_subset_serves_a_plain_limit(tmp_path: Path) -> None:
    """A built subset serves --limit N without pairs (its first N clips; nothing is built); with pairs, the limited folder."""
    from audits.demo_data import ensure_demo_corpus

    folder = tmp_path / "demo-small"
    (folder / "shards").mkdir(parents=True)
    (folder / "corpus.json").write_text(json.dumps({"name": "demo", "seed": 0, "n_utts": 196, "subset": "small"}))
    assert ensure_demo_corpus(folder, limit=12) == folder
    assert ensure_demo_corpus(folder, limit=45) == folder  # the whole subset: no limited corpus
    limited = tmp_path / "demo-limit" / "small-limit-4-pairs"
    (limited / "shards").mkdir(parents=True)
    meta = {"name": "demo", "seed": 0, "n_utts": 196, "subset": "small-limit-4-pairs", "builder_version": "demo-2"}
    shard = limited / "shards" / "shard-00000.parquet"
    shard.write_bytes(b"")
    (limited / "manifest.jsonl").write_text("")
    (limited / "corpus.json").write_text(json.dumps({**meta, "shards": ["shards/shard-00000.parquet"]}))
    assert ensure_demo_corpus(folder, limit=4, pairs=True) == limited  # complete and current: reused, not rebuilt


def test_conversation_limit_reads_a_built_default_set(tmp_path: Path) -> None:
    """With the default conversation set built, --limit reads its first recordings: nothing is built; a user's set is refused."""
    from audits.demo_data import ensure_conversation_set
    from engine.corpus.conversation import BUILDER_VERSION, DEFAULT_N_RECORDINGS

    folder = tmp_path / "conversation"
    folder.mkdir()
    for name in ("manifest.jsonl", "reference.rttm", "reference.json"):
        (folder / name).write_text("")
    meta = {"seed": 0, "n_recordings": DEFAULT_N_RECORDINGS, "min_s": 60.0, "max_s": 120.0, "builder_version": BUILDER_VERSION}
    (folder / "corpus.json").write_text(json.dumps(meta))
    assert ensure_conversation_set(folder, limit=2) == folder.resolve()
    assert not (tmp_path / "demo-limit").exists()
    (folder / "corpus.json").write_text(json.dumps({**meta, "n_recordings": 2}))
    with pytest.raises(ConfigError, match="audit corpus conversation --out .* --force"):
        ensure_conversation_set(folder)
