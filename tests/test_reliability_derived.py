"""Reliability class 9: derived clips counted as new clips.

A ``perturbations:`` block derives a copy of every clip at every level; a derived clip is a level
of its source, not a new clip. Every section declares what it reads (``AuditSection.reads``,
``audits.clips``): the source clips (the default) or source and derived clips with the
derivation as a column (the ladders). So:

* the ASR headline, slices, gaps, comparisons and speed, the speaker, emotion and profiles
  sections, the OASR exports and a re-check of the run as a track are the same with the block as
  without it; only the ladders see derived clips;
* no speaker trial pairs a clip with its own derivation, and a derived clip shares its source's
  bootstrap block;
* a dataset that already has a column the engine writes (``perturbation``, ``parent_id`` without a
  derivation record, a confidence or scoring column) is refused before anything runs: no model
  loads and nothing is written under ``--out``; the message names the column, the file and the fix.

Models: the ``simulated`` ASR backend (text hashed from the samples, so a derived copy gets other
words) and the ``simulated-sv`` / ``simulated-ser`` stand-ins (functions of the audio), no weights.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import audits.sections as sections
from audits.clips import DERIVED, SCOPES, SOURCE, block_keys, rows_for, source_ids
from audits.pipeline import run_audit
from audits.recipes import load_recipe
from audits.records import Record
from audits.sections import AuditSection, SectionContext, builtin_registry, get_section, section_names
from audits.speaker.metrics import generate_trials
from engine.datasets.base import open_dataset
from engine.errors import ManifestError, RegistryError
from tests.reliability_env import Env, audit, noise, refused_before_work, write_dataset

TIMING = {
    "infer_s",
    "rtfx",
    "load_s",
    "wall_s",
    "first_actor_ready_s",
    "last_unit_written_s",
    "generated_at",
    "elapsed_s",
    "created_at",
    "cost_per_audio_hour_usd",
    "pareto_wer_rtfx",
    "pareto_wer_cost",
    "scores_path",
    "facts",
    "manifest",
}

PERTURBATIONS = """perturbations:
  seed: 3
  n_boot: 20
  families:
    - {kind: noise, noise: white, levels: [10, 0]}
    - {kind: gain, levels: [-20]}
"""
SECTIONS = """speaker: {backends: [simulated-sv], batch_size: 4, max_per_class: null}
emotion: {backends: [simulated-ser], batch_size: 4}
profiles: {columns: [accent, emotion], n_boot: 20}
"""


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    return Env(tmp_path, monkeypatch)


def _clips(n: int = 8) -> list[dict[str, Any]]:
    """Four speakers with two clips each, two emotions, two accents (noise audio: the stand-ins need no speech)."""
    return [
        {
            "audio": noise(0.6 + 0.1 * i, 40 + i, 0.05 + 0.01 * i),
            "text": "the cat sat on a mat",
            "speaker": f"s{i // 2}",
            "emotion": "neutral" if i % 2 else "angry",
            "accent": "x" if i < n // 2 else "y",
        }
        for i in range(n)
    ]


def _drop(obj: Any) -> Any:
    """A summary part without timing, paths and run-specific facts (what differs between any two runs)."""
    if isinstance(obj, dict):
        return {k: _drop(v) for k, v in obj.items() if k not in TIMING}
    if isinstance(obj, list):
        return [_drop(v) for v in obj]
    return obj


@pytest.fixture(scope="module")
def both_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any], dict[str, Any], Path, Path]]:
    """The same recipe with and without a perturbations block (two ASR models, speaker, emotion, profiles)."""
    with pytest.MonkeyPatch.context() as mp:
        yield _both_runs(Env(tmp_path_factory.mktemp("both"), mp))


def _both_runs(env: Env) -> tuple[dict[str, Any], dict[str, Any], Path, Path]:
    data = write_dataset(env.tmp / "data", _clips())
    plain_path = env.recipe(data, SECTIONS, name="plain", models="[sim-a, sim-b]")
    pert_path = env.recipe(data, SECTIONS + PERTURBATIONS, name="pert", models="[sim-a, sim-b]")
    plain, pert = env.tmp / "plain-run", env.tmp / "pert-run"
    a = run_audit(load_recipe(str(plain_path)), plain).summary
    b = run_audit(load_recipe(str(pert_path)), pert).summary
    return dict(a), dict(b), plain, pert


def test_every_figure_outside_the_ladders_equals_the_run_without_derived_clips(both_runs: Any) -> None:
    plain, pert, plain_dir, pert_dir = both_runs
    rows = pq.read_table(pert_dir / "utterances.parquet").to_pandas()
    assert len(rows) == 2 * 8 * 4 and (rows["perturbation"] != "clean").sum() == 2 * 8 * 3  # the models did run on every derived clip
    # ASR: headline WER, intervals, slices, gaps, hallucination figures, model comparisons
    for m in ("sim-a", "sim-b"):
        a, b = _drop(plain["models"][m]), _drop(pert["models"][m])
        assert b["n_utts"] == 8 and b["wer"] is not None
        assert a == b, m
        assert not any(k.startswith("perturbation") for k in pert["models"][m]["slices"])
    assert _drop(plain["comparisons"]) == _drop(pert["comparisons"])
    for m in ("sim-a", "sim-b"):  # the headline and the trade-off table agree (they read the same clips)
        assert pert["profiles"]["trade_offs"]["models"][m]["wer"] == pytest.approx(pert["models"][m]["wer"])
    # the dataset block: the source clips, with what was derived from them said apart
    assert pert["dataset"]["n_utts"] == plain["dataset"]["n_utts"] == 8
    assert pert["dataset"]["fingerprint"] == plain["dataset"]["fingerprint"]
    assert pert["dataset"]["derived"]["n_utts"] == 24 and pert["dataset"]["derived"]["read_by"] == ["perturbations"]
    # speaker, emotion and profiles sections: as without the block
    for key in ("speaker", "emotion", "profiles"):
        assert _drop(plain[key]) == _drop(pert[key]), key
    # the ladders did see the derived clips, against the clean (source) clips
    lad = {x["name"]: x for x in pert["perturbations"]["ladders"]}
    base = lad["white-noise"]["models"]["sim-a"]["baseline"]
    assert base["n_utts"] == 8 and base["wer"] == pytest.approx(pert["models"]["sim-a"]["wer"])
    assert [lv["n_utts"] for lv in lad["white-noise"]["models"]["sim-a"]["levels"]] == [8, 8]
    # the OASR export and the report's per-row tables hold the source clips only
    lines = (pert_dir / "exports" / "oasr" / "sim-a.jsonl").read_text().splitlines()
    assert len(lines) == 8 and not any("~" in json.loads(x)["audio_filepath"] or "perturbation" in json.loads(x) for x in lines)
    untimed = [
        [{k: v for k, v in json.loads(x).items() if k != "time"} for x in (d / "exports/oasr/sim-a.jsonl").read_text().splitlines()]
        for d in (plain_dir, pert_dir)
    ]
    assert untimed[0] == untimed[1]


def test_the_run_re_checked_as_a_track_gives_its_own_figures(both_runs: Any) -> None:
    """``audit tracks`` re-scores utterances.parquet and checks it against summary.json: it reads the same clips."""
    from audits.asr.tracks import track_summary

    plain, pert, plain_dir, pert_dir = both_runs
    ts = track_summary({"plain": plain_dir, "pert": pert_dir}, n_boot=20)
    for m in ("sim-a", "sim-b"):
        got = ts["models"][m]["tracks"]
        assert got["pert"]["wer"] == pytest.approx(pert["models"][m]["wer"]) == pytest.approx(got["plain"]["wer"])
        assert got["pert"]["n_utts"] == 8


def test_no_speaker_trial_pairs_a_clip_with_its_derivation(both_runs: Any) -> None:
    plain, pert, plain_dir, pert_dir = both_runs
    scores = pq.read_table(pert_dir / "speaker" / "simulated-sv" / "scores.parquet").to_pandas()
    clips = set(scores["enroll"]) | set(scores["test"])
    assert clips and not any("~" in c for c in clips)  # the speaker section read the source clips only
    assert int(scores["label"].sum()) == 4  # one target trial per speaker (two clips each), as without the block
    assert scores.equals(pq.read_table(plain_dir / "speaker" / "simulated-sv" / "scores.parquet").to_pandas())
    # no derived clip was embedded for it
    assert not (pert_dir / "embeddings.parquet").exists() or not any(
        "~" in u for u in pq.read_table(pert_dir / "embeddings.parquet", columns=["utt_id"]).column("utt_id").to_pylist()
    )


def test_trials_never_pair_clips_of_one_source() -> None:
    """Were derived clips handed to the trial generator, a clip and its copies are one source: never a trial."""
    speakers = {"a1": "A", "a1~n:0": "A", "a1~n:10": "A", "a2": "A", "b1": "B", "b1~n:0": "B"}
    sources = {"a1~n:0": "a1", "a1~n:10": "a1", "b1~n:0": "b1"}
    tl = generate_trials(speakers, max_per_class=None, seed=0, sources=sources)
    assert tl.trials
    for t in tl.trials:
        assert sources.get(t.enroll, t.enroll) != sources.get(t.test, t.test), t
    targets = {(t.enroll, t.test) for t in tl.trials if t.label == 1}
    assert targets == {("a1", "a2"), ("a1~n:0", "a2"), ("a1~n:10", "a2")}  # same speaker, other source only
    assert len(generate_trials(speakers, max_per_class=None, seed=0).trials) > len(tl.trials)  # without sources they would pair


def test_a_derived_clip_shares_its_source_block() -> None:
    rows = pd.DataFrame(
        {
            "utt_id": ["u1", "u1~w:0", "u2", "u2~w:0", "u3"],
            "parent_id": [None, "u1", None, "u2", None],
            "speaker": [None, None, "s2", "s2", None],
            "perturbation": ["clean", "w:0", "clean", "w:0", "clean"],
        }
    )
    assert list(source_ids(rows)) == ["u1", "u1", "u2", "u2", "u3"]
    assert list(block_keys(rows)) == ["u1", "u1", "s2", "s2", "u3"]
    src = rows_for(SOURCE, rows)
    assert list(src["utt_id"]) == ["u1", "u2", "u3"] and "perturbation" not in src.columns
    assert rows_for(DERIVED, rows).equals(rows)
    # a dataset's own parent_id (derived audio of the dataset itself, e.g. an emotional re-voicing) is a clip of its own
    own = rows.assign(parent_id=[None, "u1", "u9", "u2", "u1"]).drop(columns="perturbation")
    assert list(block_keys(own.iloc[[0, 4]])) == ["u1", "u3"]


# -- the mechanism: every section declares what it reads --------------------------------------------


def test_every_section_declares_what_it_reads() -> None:
    reads = {name: get_section(name).reads for name in section_names()}
    assert set(reads.values()) <= set(SCOPES)
    assert reads["perturbations"] == DERIVED
    assert all(v == SOURCE for k, v in reads.items() if k != "perturbations"), reads


class _Recorder(AuditSection[dict, Record]):
    """A plug-in section that records the clips and rows it is handed."""

    key = "recorder"
    title = "Recorder"
    result_type = Record
    can_run_without_asr_models = True
    seen: dict[str, Any] = {}

    def parse(self, raw: Any, source: str) -> dict:
        return dict(raw)

    def run(self, config: dict, ctx: SectionContext) -> Record:
        rows = ctx.load_rows()
        self.seen[self.key] = {
            "utts": sorted(u.utt_id for s in ctx.dataset.iter_shards() for u in s.utterances),
            "rows": sorted(rows["utt_id"]),
            "columns": list(rows.columns),
        }
        return Record.from_json({"n": len(rows)})

    def markdown(self, result: Record, run: Any) -> list[str]:
        return []


class _DerivedRecorder(_Recorder):
    key = "derived_recorder"
    reads = DERIVED


class _BadScope(_Recorder):
    key = "bad"
    reads = "derived"


def test_a_plug_in_section_gets_the_clips_it_declares(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    reg = builtin_registry()
    reg.register("recorder")(_Recorder)
    reg.register("derived_recorder")(_DerivedRecorder)
    monkeypatch.setattr(sections, "SECTIONS", reg)
    data = write_dataset(env.tmp / "data", _clips(4))
    path = env.recipe(data, "recorder: {x: 1}\nderived_recorder: {x: 1}\n" + PERTURBATIONS)
    run_audit(load_recipe(str(path)), env.tmp / "run")
    src, der = _Recorder.seen["recorder"], _Recorder.seen["derived_recorder"]
    assert src["utts"] == src["rows"] == ["u000", "u001", "u002", "u003"]
    assert not any(c.startswith("perturbation") for c in src["columns"])
    assert len(der["utts"]) == len(der["rows"]) == 16 and "perturbation" in der["columns"]
    reg.register("bad")(_BadScope)
    with pytest.raises(RegistryError, match="reads = 'derived'; declare one of 'source', 'source\\+derived'"):
        get_section("bad")


# -- reserved columns ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "column, value",
    [
        ("perturbation", "clean"),
        ("perturbation_family", "x"),
        ("perturbation_level", "3"),
        ("parent_id", "u000"),
        ("asr_avg_logprob", "-0.2"),
        ("loop", "no"),
        ("hyp_raw", "hello"),
    ],
)
@pytest.mark.parametrize("fmt", ["nemo", "csv"])
def test_a_dataset_with_an_engine_column_is_refused_before_anything_runs(env: Env, column: str, value: str, fmt: str) -> None:
    clips = _clips(2)
    clips[1][column] = value
    manifest = write_dataset(env.tmp / "data", clips)
    if fmt == "csv":
        recs = [json.loads(x) for x in manifest.read_text().splitlines()]
        pd.DataFrame(recs).to_csv(env.tmp / "data" / "m.csv", index=False)
        manifest = env.tmp / "data" / "m.csv"
    out = env.tmp / "out"
    res = audit("run", env.recipe(manifest, PERTURBATIONS), "--out", out)
    line = "line 2" if fmt == "nemo" else "line 3"
    refused_before_work(res, env, out, f"column '{column}' is reserved", str(manifest), line, "rename the column")
    assert not out.exists(), "something was written under --out before the refusal"


def test_a_parent_id_with_its_derivation_record_is_derived_audio(tmp_path: Path) -> None:
    """A dataset's own derived audio (as the engine writes it: parent_id with the derivation) is read as such."""
    recs = [
        {"utt_id": "p", "audio_filepath": "p.wav", "text": "a"},
        {"utt_id": "d", "audio_filepath": "d.wav", "text": "a", "parent_id": "p", "derivation": {"emotion": {"label": "sad"}}},
    ]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    ds = open_dataset(tmp_path / "m.jsonl")
    u = {x.utt_id: x for s in ds.iter_shards() for x in s.utterances}["d"]
    assert u.parent_id == "p" and u.derivation == {"emotion": {"label": "sad"}}
    del recs[1]["derivation"]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(ManifestError, match=r"m\.jsonl, line 2, field 'parent_id': column 'parent_id' is reserved"):
        open_dataset(tmp_path / "m.jsonl")


def test_an_in_memory_dataset_is_held_to_the_same_rule(tmp_path: Path) -> None:
    from engine.audio.shards import encode_audio
    from engine.data import Utterance
    from engine.datasets.base import in_memory_dataset

    x = encode_audio(np.zeros(1600, np.float32), 16000)
    with pytest.raises(ManifestError, match="column 'perturbation' is reserved"):
        in_memory_dataset("t", "mem", "mem", [Utterance("a", "x", audio_bytes=x, labels={"perturbation": "clean"})], 4, None)
