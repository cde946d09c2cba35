"""Resume is exact, or the run stops: no silent wrong results from what changed between two runs.

Each case was a silent wrong result before (rc 0, a summary over the wrong rows):

1. the driver SIGKILLed after 3 of 8 units, then resumed with the same manifest in reversed line
   order (3 rows doubled, 3 missing, summary n_utts 8);
2. the shard size changed between two runs into one ``--out`` (12 rows for 8 utterances);
3. Parquet shard files whose names collide once escaped (``a b`` / ``a_b``: 2 of 4 rows vanished);
4. model names that collide once escaped (``tiny/a`` / ``tiny_a``: one model had no rows);
5. audio replaced between a crash and the resume (the fingerprint covered ids and references);
7. ``--limit -1`` (dropped the last clip) and a WAV whose header declares a quarter of its data.

Plus the invariant behind them: ``RunStore.consolidate`` returns exactly one row per
``(model, utt_id)`` of the plan or raises ``ResultIntegrityError``, and then nothing is scored.
Audio: real speech from Debian's pocketsphinx-testdata, transcribed by pocketsphinx (fast and
deterministic); the Ray cases run only where Ray is installed.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf
from typer.testing import CliRunner

from audits.cli.main import app
from engine.audio.decoding import decode
from engine.audio.shards import utterances_to_table
from engine.data import ModelSpec, Utterance, WorkUnit
from engine.datasets import open_dataset
from engine.datasets.base import audio_stamp, fingerprint_utterances, in_memory_dataset
from engine.errors import ConfigError, ResultIntegrityError
from engine.run.runner import InProcessRunner
from engine.run.store import RunStore, check_rows
from engine.storage import check_distinct_paths, safe_name
from tests.processes import sigkill_after_markers

REPO = Path(__file__).resolve().parents[1]
CARDS = Path("/usr/share/pocketsphinx/test/data/cards")
PS = ModelSpec("pocketsphinx", "pocketsphinx", {}, batch_size=1)
REGISTRY_PS = "pocketsphinx-en-us"  # the same backend and options in audit_configs/models/local.yaml
ORDER = ["001", "002", "003", "004", "005", "001", "002", "003"]  # 8 utterances, clips repeat under new ids
IDS = [f"u{i}" for i in range(len(ORDER))]

cli = CliRunner()


def _cards_refs() -> dict[str, str]:
    if not CARDS.is_dir():
        pytest.fail(f"pocketsphinx-testdata not found under {CARDS}: `make test` installs it (apt-get install pocketsphinx-testdata)")
    refs = {}
    for line in (CARDS / "cards.transcription").read_text().splitlines():
        text, uid = line.rsplit("(", 1)
        refs[uid.strip().rstrip(")")] = " ".join(text.replace("<s>", " ").replace("</s>", " ").split())
    return refs


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """u0..u7 as separate WAV files (copies of the five cards clips) with their references."""
    refs = _cards_refs()
    folder = tmp_path_factory.mktemp("clips")
    out = {}
    for uid, clip in zip(IDS, ORDER):
        dst = folder / f"{uid}.wav"
        shutil.copyfile(CARDS / f"{clip}.wav", dst)
        out[uid] = (dst, refs[clip])
    return out


def manifest(path: Path, clips: dict[str, tuple[Path, str]], ids: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"utt_id": u, "audio_filepath": str(clips[u][0]), "text": clips[u][1]}) + "\n" for u in ids))
    return path


@pytest.fixture(scope="module")
def baseline(clips: dict[str, tuple[Path, str]], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """pocketsphinx hypotheses of one uninterrupted run over the 8 utterances."""
    tmp = tmp_path_factory.mktemp("baseline")
    ds = open_dataset(manifest(tmp / "m.jsonl", clips, IDS), shard_size=8)
    store = RunStore(tmp / "out")
    InProcessRunner(ds, [PS], store).run()
    t = store.consolidate().to_pandas()
    assert t["error"].isna().all() and len(t) == 8
    return dict(zip(t["utt_id"], t["hyp_raw"]))


def hyps(out: Path, model: str) -> dict[str, str]:
    t = pd.read_parquet(out / "utterances.parquet")
    t = t[t["model"] == model]
    assert not t.duplicated(["model", "utt_id"]).any(), "doubled rows"
    return dict(zip(t["utt_id"], t["hyp_raw"]))


def recipe_file(folder: Path, dataset: Path, model: str, shard_size: int) -> Path:
    p = folder / f"resume-{shard_size}.yaml"
    p.write_text(
        json.dumps(
            {
                "name": "resume",
                "dataset": {"path": str(dataset)},
                "models": [model],
                "shard_size": shard_size,
                "warmup": 0,
                "scoring": {"n_boot": 20},
            }
        )
    )
    return p


def markers(out: Path, model: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((out / "markers" / safe_name(model)).glob("*.json"))]


class Crash(Exception):
    """Stands for the process dying right after a unit was written."""


def crash_after(n: int) -> Any:
    done = {"n": 0}

    def progress(event: str, k: int, info: dict[str, Any]) -> None:
        if event == "unit":
            done["n"] += 1
            if done["n"] >= n:
                raise Crash(f"crashed after {n} units")

    return progress


# -- 1. reordered manifest after kill -9 (CLI, in-process engine) ----------------------------------


def _config_dir(tmp: Path, sleep_s: float) -> Path:
    cfg = tmp / f"configs-{sleep_s}"
    shutil.copytree(REPO / "audit_configs", cfg)
    entry = {
        "backend": "fault-inject",
        "options": {"inner": "pocketsphinx", "inner_options": {}, "after_batch_sleep_s": sleep_s},
        "batch_size": 1,
    }
    (cfg / "models" / "slow.yaml").write_text(json.dumps({"models": {"ps-slow": entry}}))
    return cfg


def _cli_env(cfg: Path) -> dict[str, str]:
    return dict(
        os.environ, AUDIT_CONFIG_DIR=str(cfg), PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), COLUMNS="200"
    )


def test_reordered_manifest_after_sigkill_resumes_exactly(
    clips: dict[str, tuple[Path, str]], baseline: dict[str, str], tmp_path: Path
) -> None:
    """kill -9 after 3 of 8 units (shard_size 1); resume with the manifest's lines reversed: every
    utterance once with its own hypothesis, summary n_utts 8, and the 3 finished clips are not
    transcribed again (their units are rebuilt from the stored rows)."""
    m = manifest(tmp_path / "data" / "manifest.jsonl", clips, IDS)
    recipe = recipe_file(tmp_path, m, "ps-slow", 1)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "audits.cli", "run", str(recipe), "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=REPO, env=_cli_env(_config_dir(tmp_path, 1.0)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    folder = out / "markers" / "ps-slow"
    sigkill_after_markers(proc, folder, 3, 180, pattern="*.json", poll_s=0.02)
    finished = len(list(folder.glob("*.json")))
    assert 3 <= finished < 8
    manifest(m, clips, IDS[::-1])  # same file, lines reversed
    res = subprocess.run(cmd, cwd=REPO, env=_cli_env(_config_dir(tmp_path, 0.0)), capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert hyps(out, "ps-slow") == baseline
    summary = json.loads((out / "summary.json").read_text())["models"]["ps-slow"]
    assert summary["n_utts"] == 8 and summary["n_failed"] == 0
    got = markers(out, "ps-slow")
    assert len(got) == 8 and sum("rebuilt_from" in mk for mk in got) == finished  # finished clips were reused, not redone


# -- 2. shard size changed between runs (CLI) -------------------------------------------------------


def test_shard_size_change_keeps_one_row_per_utterance(
    clips: dict[str, tuple[Path, str]], baseline: dict[str, str], tmp_path: Path
) -> None:
    """shard_size 4, then 2, into the same --out: 8 rows, not 12; every new unit is rebuilt from
    the rows of the first run (nothing transcribed twice), and consolidation reads only the
    current layout's parts."""
    m = manifest(tmp_path / "m.jsonl", clips, IDS)
    out = tmp_path / "out"
    for size in (4, 2):
        res = cli.invoke(app, ["run", str(recipe_file(tmp_path, m, REGISTRY_PS, size)), "--out", str(out)])
        assert res.exit_code == 0, res.output
        assert hyps(out, REGISTRY_PS) == baseline
        assert json.loads((out / "summary.json").read_text())["models"][REGISTRY_PS]["n_utts"] == 8
    got = markers(out, REGISTRY_PS)
    assert len(got) == 4 and all(mk["layout"]["shard_size"] == 2 and mk["rebuilt_from"] for mk in got)
    assert len(pd.read_parquet(out / "utterances.parquet")) == 8


def test_layout_changes_in_process_rebuild_or_redo_exactly(
    clips: dict[str, tuple[Path, str]], baseline: dict[str, str], tmp_path: Path
) -> None:
    """Through the runner API: after a crash under shard_size 4 (1 unit done), shard_size 3 plans
    s0 = u0..u2 (all stored: rebuilt), s1 = u3..u5 (u3 stored, u4-u5 not: transcribed), s2. The
    stale markers never count as done, and the table is exact."""
    m = manifest(tmp_path / "m.jsonl", clips, IDS)
    store = RunStore(tmp_path / "out")
    with pytest.raises(Crash):
        InProcessRunner(open_dataset(m, shard_size=4), [PS], store, progress=crash_after(1)).run()
    ds3 = open_dataset(m, shard_size=3)
    store = RunStore(tmp_path / "out")
    runner = InProcessRunner(ds3, [PS], store)
    assert [u.shard_id for u in runner.pending()] == ["s00000", "s00001", "s00002"]  # s00000's marker is from shard_size 4
    problem = store.unit_problem(WorkUnit("pocketsphinx", "s00000"))
    assert problem is not None and problem[0] == "stale" and "shard_size 4" in problem[1]
    ran: list[str] = []
    runner.progress = lambda ev, n, info: ran.append(info["shard"]) if ev == "unit" else None
    runner.run()
    assert ran == ["s00001", "s00002"]
    t = store.consolidate().to_pandas()
    assert len(t) == 8 and dict(zip(t["utt_id"], t["hyp_raw"])) == baseline
    assert sorted(t[t["shard"] == "s00000"]["utt_id"]) == ["u0", "u1", "u2"]  # rebuilt rows carry their new shard


# -- 3. / 4. names that collide once escaped ---------------------------------------------------------


def test_safe_names_are_distinct_and_collisions_refused() -> None:
    assert safe_name("s00012") == "s00012" and safe_name("whisper-tiny.en") == "whisper-tiny.en"
    names = ["a b", "a_b", "tiny/a", "tiny_a", "A", "a", "..", "x" * 300]
    paths = [safe_name(n) for n in names]
    assert len({p.casefold() for p in paths}) == len(names), paths
    assert all(len(p) <= 120 and "/" not in p and not p.startswith(".") for p in paths)
    check_distinct_paths(names, "model")
    with pytest.raises(ConfigError, match=r"share one result file.*'tiny/a'"):
        check_distinct_paths(["tiny/a", safe_name("tiny/a")], "model")
    with pytest.raises(ConfigError, match="repeated: m"):
        check_distinct_paths(["m", "m"], "model")


def test_parquet_shard_names_that_collide_when_escaped(
    clips: dict[str, tuple[Path, str]], baseline: dict[str, str], tmp_path: Path
) -> None:
    """`a b.parquet` and `a_b.parquet` used to share one part file: 2 of 4 utterances vanished."""
    folder = tmp_path / "pq"
    folder.mkdir()
    for name, ids in (("a b", ["u0", "u1"]), ("a_b", ["u2", "u3"])):
        utts = [Utterance(u, clips[u][1], audio_bytes=clips[u][0].read_bytes()) for u in ids]
        pq.write_table(utterances_to_table(utts), folder / f"{name}.parquet")
    ds = open_dataset(folder, shard_size=64)
    assert sorted(ds.shard_ids) == ["a b", "a_b"] and ds.n_utts == 4
    out = tmp_path / "out"
    res = cli.invoke(app, ["run", str(recipe_file(tmp_path, folder, REGISTRY_PS, 64)), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert hyps(out, REGISTRY_PS) == {u: baseline[u] for u in ["u0", "u1", "u2", "u3"]}
    assert json.loads((out / "summary.json").read_text())["models"][REGISTRY_PS]["n_utts"] == 4


def test_model_names_that_collide_when_escaped(clips: dict[str, tuple[Path, str]], baseline: dict[str, str], tmp_path: Path) -> None:
    """`tiny/a` and `tiny_a` in one run: both models have all their rows."""
    ds = open_dataset(manifest(tmp_path / "m.jsonl", clips, IDS[:2]), shard_size=2)
    specs = [ModelSpec("tiny/a", "pocketsphinx", {}, batch_size=1), ModelSpec("tiny_a", "pocketsphinx", {}, batch_size=1)]
    store = RunStore(tmp_path / "out")
    InProcessRunner(ds, specs, store).run()
    t = store.consolidate([s.name for s in specs]).to_pandas()
    for s in specs:
        assert dict(zip(t[t["model"] == s.name]["utt_id"], t[t["model"] == s.name]["hyp_raw"])) == {u: baseline[u] for u in IDS[:2]}
    assert len({p.parent.name for p in (tmp_path / "out" / "parts").glob("*/*.parquet")}) == 2


def test_models_that_would_share_a_file_are_refused_before_loading(clips: dict[str, tuple[Path, str]], tmp_path: Path) -> None:
    ds = open_dataset(manifest(tmp_path / "m.jsonl", clips, IDS[:2]), shard_size=2)
    specs = [ModelSpec("tiny/a", "pocketsphinx", {}), ModelSpec(safe_name("tiny/a"), "pocketsphinx", {})]
    with pytest.raises(ConfigError, match="share one result file"):
        InProcessRunner(ds, specs, RunStore(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


# -- 5. audio replaced between a crash and the resume -----------------------------------------------


def test_fingerprint_covers_audio_not_line_order(clips: dict[str, tuple[Path, str]], tmp_path: Path) -> None:
    fwd = open_dataset(manifest(tmp_path / "fwd.jsonl", clips, IDS), shard_size=3)
    rev = open_dataset(manifest(tmp_path / "rev.jsonl", clips, IDS[::-1]), shard_size=2)
    assert fwd.fingerprint == rev.fingerprint  # ids are sorted: order and sharding do not matter
    copy = dict(clips)
    moved = tmp_path / "other.wav"
    shutil.copyfile(CARDS / "005.wav", moved)
    copy["u0"] = (moved, clips["u0"][1])  # same id and reference, other audio
    assert open_dataset(manifest(tmp_path / "swap.jsonl", copy, IDS), shard_size=3).fingerprint != fwd.fingerprint
    # in-memory audio is hashed in full
    a = [Utterance("x", "r", audio_bytes=b"RIFF" + bytes(100))]
    b = [Utterance("x", "r", audio_bytes=b"RIFF" + bytes(99) + b"\x01")]
    assert fingerprint_utterances(a) != fingerprint_utterances(b)


def test_replaced_audio_is_refused_by_the_run_directory(clips: dict[str, tuple[Path, str]], tmp_path: Path) -> None:
    """Crash, replace a finished clip's audio, resume: the run directory refuses (exit 2, no summary)."""
    from audits.pipeline import run_recipe
    from audits.recipes import load_recipe

    local = {u: (tmp_path / f"{u}.wav", r) for u, (p, r) in clips.items() if u in IDS[:3]}
    for u in local:
        shutil.copyfile(clips[u][0], local[u][0])
    m = manifest(tmp_path / "m.jsonl", local, IDS[:3])
    recipe = recipe_file(tmp_path, m, REGISTRY_PS, 1)
    out = tmp_path / "out"
    with pytest.raises(Crash):
        run_recipe(load_recipe(str(recipe)), out, progress=crash_after(2))
    shutil.copyfile(CARDS / "005.wav", local["u0"][0])
    res = cli.invoke(app, ["run", str(recipe), "--out", str(out)])
    assert res.exit_code == 2 and "another dataset" in res.output and "audio content" in res.output, res.output
    assert not (out / "summary.json").exists()


def test_replaced_audio_redoes_its_unit_in_the_runner(clips: dict[str, tuple[Path, str]], baseline: dict[str, str], tmp_path: Path) -> None:
    """At the runner level (no run.json check) the unit whose clip changed is stale and redone; the
    others are kept; the new row is the new audio's transcript."""
    local = {u: (tmp_path / f"{u}.wav", r) for u, (p, r) in clips.items() if u in IDS[:3]}
    for u in local:
        shutil.copyfile(clips[u][0], local[u][0])
    m = manifest(tmp_path / "m.jsonl", local, IDS[:3])
    out = tmp_path / "out"
    with pytest.raises(Crash):
        InProcessRunner(open_dataset(m, shard_size=1), [PS], RunStore(out), progress=crash_after(2)).run()
    shutil.copyfile(clips["u3"][0], local["u0"][0])  # u0 now holds u3's audio (cards 004)
    runner = InProcessRunner(open_dataset(m, shard_size=1), [PS], RunStore(out))
    assert [u.shard_id for u in runner.pending()] == ["s00000", "s00002"]
    runner.run()
    got = runner.store.consolidate().to_pandas()
    assert dict(zip(got["utt_id"], got["hyp_raw"])) == {"u0": baseline["u3"], "u1": baseline["u1"], "u2": baseline["u2"]}


def test_edit_in_the_middle_of_a_long_clip(tmp_path: Path) -> None:
    """Same size, same first and last 64 KiB, other middle: the cheap content stamp cannot see it,
    the modification time can (the unit is stale), and the full hash does on request."""
    x = (0.3 * np.sin(np.arange(16000 * 8) / 7.0)).astype(np.float32)
    wav = tmp_path / "long.wav"
    sf.write(wav, x, 16000, subtype="PCM_16")
    utts = [Utterance("long", "ref", audio_path=str(wav))]
    before, before_full, stamp = fingerprint_utterances(utts), fingerprint_utterances(utts, full=True), audio_stamp(utts[0], None)
    ds = in_memory_dataset("t", "t", "memory", utts, 1, None)
    data = bytearray(wav.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 1000] = bytes(1000)
    wav.write_bytes(bytes(data))
    os.utime(wav, ns=(time.time_ns(), os.stat(wav).st_mtime_ns + 5_000_000_000))
    assert fingerprint_utterances(utts) == before  # content stamp: size + edges (documented limit)
    assert fingerprint_utterances(utts, full=True) != before_full
    assert audio_stamp(utts[0], None)[1] != stamp[1]
    assert in_memory_dataset("t", "t", "memory", utts, 1, None).shard_index("s00000").clips != ds.shard_index("s00000").clips


# -- 7. --limit and a WAV header that declares too little ----------------------------------------------


@pytest.mark.parametrize("limit", [-1, 0])
def test_bad_limit_is_an_error(limit: int, clips: dict[str, tuple[Path, str]], tmp_path: Path) -> None:
    m = manifest(tmp_path / "m.jsonl", clips, IDS[:3])
    with pytest.raises(ConfigError, match="limit must be >= 1 or absent"):
        open_dataset(m, limit=limit)
    res = cli.invoke(app, ["run", str(recipe_file(tmp_path, m, REGISTRY_PS, 1)), "--limit", str(limit), "--out", str(tmp_path / "out")])
    assert res.exit_code == 2 and f"--limit: {limit} is out of range; it must be >= 1" in " ".join(res.output.split()), res.output
    assert open_dataset(m, limit=2).n_utts == 2


def _wav_bytes(seconds: float = 1.0) -> bytes:
    buf = io.BytesIO()
    x = (0.3 * np.sin(np.arange(int(16000 * seconds)) / 5.0)).astype(np.float32)
    sf.write(buf, x, 16000, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def _set_data_size(data: bytes, size: int) -> bytes:
    i = data.find(b"data")
    return data[: i + 4] + struct.pack("<I", size) + data[i + 8 :]


def test_wav_header_declaring_a_quarter_of_the_data_is_an_error_row(tmp_path: Path) -> None:
    good = _wav_bytes()
    n = len(good) - good.find(b"data") - 8
    short = tmp_path / "quarter.wav"
    short.write_bytes(_set_data_size(good, n // 4))
    d = decode(Utterance("q", "r", audio_path=str(short)))
    assert d.samples is None and d.error is not None
    assert "declares 8000 bytes" in d.error and "the clip was not read" in d.error and "ignore_length" in d.error, d.error
    d = decode(Utterance("q", "r", audio_bytes=_set_data_size(good, n // 4)))
    assert d.error is not None and "WAV header is wrong" in d.error
    # legitimate trailing data is still read: a LIST chunk and zero padding after the audio
    listed = good + b"LIST" + struct.pack("<I", 10) + b"INFOIART\x00\x00"
    assert decode(Utterance("l", "r", audio_bytes=listed)).error is None
    assert decode(Utterance("z", "r", audio_bytes=good + bytes(512))).error is None
    assert decode(Utterance("g", "r", audio_bytes=good)).error is None


# -- the invariant: exactly one row per (model, utterance), or no summary --------------------------------


def test_check_rows_names_missing_doubled_and_unexpected() -> None:
    t = pa.table({"model": ["m", "m", "m", "x"], "utt_id": ["a", "a", "b", "a"]})
    with pytest.raises(ResultIntegrityError) as info:
        check_rows(t, ["m"], ["a", "b", "c"], where="out")
    msg = str(info.value)
    assert "1 missing (e.g. m/c)" in msg and "1 doubled (e.g. m/a x2)" in msg and "1 unexpected (e.g. x/a)" in msg, msg
    assert "expected 3 utterance(s) x 1 model(s) = 3 rows, found 4" in msg and "Nothing was scored" in msg
    check_rows(pa.table({"model": ["m", "m"], "utt_id": ["a", "b"]}), ["m"], ["b", "a"])


def test_consolidate_without_plan_refuses_two_layouts(clips: dict[str, tuple[Path, str]], tmp_path: Path) -> None:
    """A tool that reads a store with no plan still never gets doubled rows: it gets an error."""
    m = manifest(tmp_path / "m.jsonl", clips, IDS[:4])
    out = tmp_path / "out"
    InProcessRunner(open_dataset(m, shard_size=1), [PS], RunStore(out)).run()  # s00000..s00003, one id each
    InProcessRunner(open_dataset(m, shard_size=4), [PS], RunStore(out)).run()  # s00000 rebuilt with 4 ids
    with pytest.raises(ResultIntegrityError, match=r"3 doubled \(e.g. pocketsphinx/u1 x2"):
        RunStore(out).consolidate()  # the 1-layout markers of s00001..s00003 still agree with their parts
    plan_store = RunStore(out)
    InProcessRunner(open_dataset(m, shard_size=4), [PS], plan_store)
    assert len(plan_store.consolidate().to_pandas()) == 4  # with the plan: only the current layout's parts


def test_store_refuses_rows_that_are_not_the_unit(clips: dict[str, tuple[Path, str]], tmp_path: Path) -> None:
    ds = open_dataset(manifest(tmp_path / "m.jsonl", clips, IDS[:2]), shard_size=1)
    store = RunStore(tmp_path / "out")
    InProcessRunner(ds, [PS], store)
    with pytest.raises(ResultIntegrityError, match="not the 1 planned"):
        store.write_unit(WorkUnit("pocketsphinx", "s00000"), [{"utt_id": "u1", "model": "pocketsphinx"}], [])


def test_no_summary_when_rows_are_missing(clips: dict[str, tuple[Path, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A part that disappears after the runner finished (the runner believes all is done): the
    pipeline stops with ResultIntegrityError naming the missing rows, and writes no summary."""
    from audits.pipeline import run_recipe
    from audits.recipes import load_recipe

    m = manifest(tmp_path / "m.jsonl", clips, IDS[:3])
    out = tmp_path / "out"
    real_run = InProcessRunner.run

    def run_then_lose_a_part(self: InProcessRunner) -> Any:
        facts = real_run(self)
        self.store.part_path(WorkUnit(REGISTRY_PS, "s00001")).unlink()
        return facts

    monkeypatch.setattr(InProcessRunner, "run", run_then_lose_a_part)
    with pytest.raises(ResultIntegrityError) as info:
        run_recipe(load_recipe(str(recipe_file(tmp_path, m, REGISTRY_PS, 1))), out)
    msg = str(info.value)
    assert f"1 missing (e.g. {REGISTRY_PS}/u1)" in msg and f"{REGISTRY_PS}::s00001" in msg, msg
    assert not (out / "summary.json").exists()
    monkeypatch.setattr(InProcessRunner, "run", real_run)
    summary = run_recipe(load_recipe(str(recipe_file(tmp_path, m, REGISTRY_PS, 1))), out)  # the resume redoes it
    assert summary["models"][REGISTRY_PS]["n_utts"] == 3


def test_settings_change_makes_units_stale(clips: dict[str, tuple[Path, str]], tmp_path: Path) -> None:
    """A marker records the model spec and decode settings: changing them redoes the units, and
    the reason names what changed."""
    from engine.data import DecodeOptions

    ds = open_dataset(manifest(tmp_path / "m.jsonl", clips, IDS[:1]), shard_size=1)
    store = RunStore(tmp_path / "out")
    InProcessRunner(ds, [PS], store).run()
    assert InProcessRunner(ds, [PS], store).pending() == []
    assert InProcessRunner(ds, [ModelSpec("pocketsphinx", "pocketsphinx", {}, batch_size=4)], store).pending() != []
    runner = InProcessRunner(ds, [PS], store, decode_options=DecodeOptions(max_duration_s=30.0))
    assert runner.pending() == [WorkUnit("pocketsphinx", "s00000")]
    problem = store.unit_problem(WorkUnit("pocketsphinx", "s00000"))
    assert problem is not None and "decode.max_duration_s: 1800.0 -> 30.0" in problem[1], problem


# -- Ray: the same store, the same guarantees ----------------------------------------------------------


@pytest.fixture(scope="module")
def ray_session(ray_local: str) -> str:
    """The session's local 2-CPU Ray instance (tests/conftest.py)."""
    return ray_local


@pytest.mark.slow
def test_ray_reordered_manifest_after_crash(
    ray_session: Any, clips: dict[str, tuple[Path, str]], baseline: dict[str, str], tmp_path: Path
) -> None:
    """Crash after 3 of 8 units, resume on Ray with the manifest reversed: exact rows, summary n_utts 8."""
    from audits.pipeline import run_recipe
    from audits.recipes import load_recipe
    from engine.engine import EngineOptions

    m = manifest(tmp_path / "m.jsonl", clips, IDS)
    recipe = recipe_file(tmp_path, m, REGISTRY_PS, 1)
    out = tmp_path / "out"
    with pytest.raises(Crash):
        run_recipe(load_recipe(str(recipe)), out, progress=crash_after(3))
    manifest(m, clips, IDS[::-1])
    summary = run_recipe(load_recipe(str(recipe)), out, engine=EngineOptions(kind="ray"))
    assert summary["models"][REGISTRY_PS]["n_utts"] == 8 and summary["models"][REGISTRY_PS]["n_failed"] == 0
    assert hyps(out, REGISTRY_PS) == baseline
    assert sum("rebuilt_from" in mk for mk in markers(out, REGISTRY_PS)) == 3


@pytest.mark.slow
def test_ray_shard_size_change(ray_session: Any, clips: dict[str, tuple[Path, str]], baseline: dict[str, str], tmp_path: Path) -> None:
    """shard_size 4 (crash after 1 unit), then 2 on Ray: s0-s1 rebuilt, s2-s3 run by actors; 8 rows."""
    from audits.pipeline import run_recipe
    from audits.recipes import load_recipe
    from engine.engine import EngineOptions

    m = manifest(tmp_path / "m.jsonl", clips, IDS)
    out = tmp_path / "out"
    with pytest.raises(Crash):
        run_recipe(load_recipe(str(recipe_file(tmp_path, m, REGISTRY_PS, 4))), out, progress=crash_after(1))
    events: list[tuple[str, dict[str, Any]]] = []
    summary = run_recipe(
        load_recipe(str(recipe_file(tmp_path, m, REGISTRY_PS, 2))),
        out,
        engine=EngineOptions(kind="ray"),
        progress=lambda e, n, i: events.append((e, i)),
    )
    assert sorted(i["shard"] for e, i in events if e == "unit") == ["s00002", "s00003"]
    assert summary["models"][REGISTRY_PS]["n_utts"] == 8
    assert hyps(out, REGISTRY_PS) == baseline
    assert len(pd.read_parquet(out / "utterances.parquet")) == 8
