"""Reliability class 4: tracks.

Each track's WER is the run's own WER, from the run's own scored rows (failed rows and
speech-free clips left out), so the Average WER is the mean of figures users can find in each
run's summary. The same run given twice, a copy of a run, or a run whose utterances.parquet
changed after scoring is refused. Track names that cannot be folder names are refused before
anything runs. Track names reach tracks.md and tracks.html through the escaping layer, and the
HTML table is built from cells, never by splitting the Markdown.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from audits.asr.tracks import track_summary, tracks_html, tracks_markdown, write_tracks
from engine.errors import ConfigError
from tests.reliability_env import Env, audit, noise, refused_before_work, speech_clips, write_dataset


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two tracks run once by ``audit sweep --tracks``, each with a speech-free clip the models write words on."""
    tmp = tmp_path_factory.mktemp("tracks")
    mp = pytest.MonkeyPatch()
    try:
        env = Env(tmp, mp)
        free = {"audio": noise(1.0, 99, level=0.2), "text": "", "content": "speech-free"}
        a = write_dataset(tmp / "a", [*speech_clips(4, 0), free])
        b = write_dataset(tmp / "b", [*speech_clips(4, 10), free])
        out = tmp / "sweep"
        res = audit("sweep", env.recipe(a, models="[sim-a, sim-b]"), "--models", "sim-a,sim-b", "--tracks", f"accent={a},noise={b}",
            "--out", out)
        assert res.exit_code == 0, res.output
    finally:
        mp.undo()
    return {"out": out, "accent": out / "accent", "noise": out / "noise", "tmp": tmp}


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_each_track_wer_equals_the_runs_own_wer(runs: dict[str, Path]) -> None:
    tracks = json.loads((runs["out"] / "tracks.json").read_text())
    for name in ("accent", "noise"):
        summary = json.loads((runs[name] / "summary.json").read_text())
        for model in ("sim-a", "sim-b"):
            own = summary["models"][model]
            assert own["hallucination"]["n_speech_free"] == 1 and own["hallucination"]["n_hallucinated"] == 1  # words on the free clip
            t = tracks["models"][model]["tracks"][name]
            assert t["wer"] == own["wer"], "the track's WER is not the run's own WER"
            assert t["n_speech_free"] == 1
    for model in ("sim-a", "sim-b"):
        m = tracks["models"][model]
        assert m["average_wer"] == pytest.approx((m["tracks"]["accent"]["wer"] + m["tracks"]["noise"]["wer"]) / 2)


def test_every_run_records_the_fingerprint_of_the_rows_it_scored(runs: dict[str, Path]) -> None:
    from audits.asr.tracks import rows_fingerprint

    summary = json.loads((runs["accent"] / "summary.json").read_text())
    assert summary["rows"]["sha256"] == rows_fingerprint(runs["accent"] / "utterances.parquet")
    assert summary["rows"]["n_rows"] == 10


def test_the_same_run_twice_is_refused(runs: dict[str, Path]) -> None:
    res = audit("tracks", f"x={runs['accent']}", f"y={runs['accent']}/", "--out", runs["tmp"] / "dup")
    assert res.exit_code == 2 and "are the same run" in " ".join(res.output.split())
    copy = _copy(runs["accent"], runs["tmp"] / "copy-of-accent")
    res = audit("tracks", f"x={runs['accent']}", f"y={copy}", "--out", runs["tmp"] / "dup2")
    assert res.exit_code == 2 and "hold the same rows" in " ".join(res.output.split())
    assert not (runs["tmp"] / "dup2" / "tracks.json").exists()


@pytest.mark.parametrize("change", ["drop-rows", "edit-hypothesis", "append-duplicate"])
def test_a_run_changed_after_scoring_is_refused(runs: dict[str, Path], change: str) -> None:
    run = _copy(runs["noise"], runs["tmp"] / f"changed-{change}")
    table = pq.read_table(run / "utterances.parquet")
    if change == "drop-rows":
        table = table.slice(0, table.num_rows - 3)
    elif change == "edit-hypothesis":
        hyp = table.column("hyp_raw").to_pylist()
        hyp[0] = "a b c"
        table = table.set_column(table.schema.get_field_index("hyp_raw"), "hyp_raw", __import__("pyarrow").array(hyp))
    else:
        table = __import__("pyarrow").concat_tables([table, table.slice(0, 1)])
    pq.write_table(table, run / "utterances.parquet")
    with pytest.raises(ConfigError, match="changed after the run was scored"):
        track_summary({"a": runs["accent"], "b": run}, n_boot=10)
    res = audit("tracks", f"a={runs['accent']}", f"b={run}", "--out", runs["tmp"] / f"t-{change}")
    assert res.exit_code == 2 and "changed after" in " ".join(res.output.split())


def test_a_run_without_a_recorded_fingerprint_is_checked_against_its_figures(runs: dict[str, Path]) -> None:
    run = _copy(runs["noise"], runs["tmp"] / "old-style")
    summary = json.loads((run / "summary.json").read_text())
    summary.pop("rows")
    (run / "summary.json").write_text(json.dumps(summary))
    track_summary({"a": runs["accent"], "b": run}, n_boot=10)  # untouched rows: accepted
    table = pq.read_table(run / "utterances.parquet")
    pq.write_table(table.slice(1), run / "utterances.parquet")
    with pytest.raises(ConfigError, match="changed after scoring or the run is incomplete"):
        track_summary({"a": runs["accent"], "b": run}, n_boot=10)


@pytest.mark.parametrize("name", ["tracks.json", "a/b", "..", ".hidden", "a b", "x|y", "parts", "é" * 2, "n" * 65])
def test_a_track_name_that_cannot_be_a_folder_is_refused_before_anything_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        name: str) -> None:
    env = Env(tmp_path, monkeypatch)
    a = write_dataset(tmp_path / "a", speech_clips(2))
    out = tmp_path / "sweep"
    res = audit("sweep", env.recipe(a), "--models", "sim-a", "--tracks", f"{name}={a},other={a.parent}", "--out", out)
    refused_before_work(res, env, out, "track name")
    assert not out.exists()


def test_the_same_dataset_as_two_tracks_is_refused_before_anything_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env(tmp_path, monkeypatch)
    a = write_dataset(tmp_path / "a", speech_clips(2))
    out = tmp_path / "sweep"
    res = audit("sweep", env.recipe(a), "--models", "sim-a", "--tracks", f"x={a},y={a}", "--out", out)
    refused_before_work(res, env, out, "given twice")


@pytest.mark.parametrize(("flag", "value"), [("--n-boot", "-1"), ("--n-boot", "0"), ("--n-boot", "1000000000"), ("--seed", "-2")])
def test_bad_bootstrap_flags_are_refused_cleanly(runs: dict[str, Path], flag: str, value: str) -> None:
    out = runs["tmp"] / f"nb{value}"
    res = audit("tracks", f"a={runs['accent']}", f"b={runs['noise']}", "--out", out, flag, value)
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert f"{flag}: {value} is out of range" in " ".join(res.output.split())
    assert not out.exists()


HOSTILE = ["a|b", "<script>alert(1)</script>", "x\u202ey", "line\nbreak"]


def test_hostile_track_names_are_escaped_in_markdown_and_html(runs: dict[str, Path]) -> None:
    names = {HOSTILE[0]: runs["accent"], HOSTILE[1]: runs["noise"]}
    out = runs["tmp"] / "hostile"
    write_tracks(names, out, n_boot=10)
    md = (out / "tracks.md").read_text()
    html = (out / "tracks.html").read_text()
    assert "<script>" not in md and "<script>" not in html
    # every table row of the Markdown has the header's number of unescaped pipes
    rows = [ln for ln in md.splitlines() if ln.startswith("| ")]
    widths = {len(re.findall(r"(?<!\\)\|", ln)) for ln in rows}
    assert widths == {len(names) + 4}, widths
    # the HTML table: one header cell per column, and every body row the same width
    assert html.count("<th>") == len(names) + 3
    body = html.split("<tbody>")[1].split("</tbody>")[0]
    assert {r.count("<td>") for r in body.split("</tr>") if r} == {len(names) + 3}
    assert "a|b" in html and "&lt;script&gt;" in html


def test_hostile_model_names_are_escaped_too(runs: dict[str, Path]) -> None:
    summary = track_summary({"a": runs["accent"], "b": runs["noise"]}, n_boot=10)
    summary["models"] = {f"{HOSTILE[i % 4]}{i}": v for i, v in enumerate(summary["models"].values())}
    summary["ranking"] = list(summary["models"])
    summary["winners"] = {k: HOSTILE[1] for k in summary["winners"]}
    md, html = tracks_markdown(summary), tracks_html(summary)
    assert "<script>" not in md and "<script>" not in html and "\u202e" not in md and "\u202e" not in html
    assert {len(re.findall(r"(?<!\\)\|", ln)) for ln in md.splitlines() if ln.startswith("| ")} == {6}


def test_an_old_style_run_that_lost_a_whole_model_is_refused(runs: dict[str, Path]) -> None:
    import pyarrow.compute as pc

    run = _copy(runs["noise"], runs["tmp"] / "old-style-lost-model")
    summary = json.loads((run / "summary.json").read_text())
    summary.pop("rows")
    (run / "summary.json").write_text(json.dumps(summary))
    table = pq.read_table(run / "utterances.parquet")
    pq.write_table(table.filter(pc.equal(table.column("model"), "sim-a")), run / "utterances.parquet")
    with pytest.raises(ConfigError, match="holds no row of it"):
        track_summary({"a": runs["accent"], "b": run}, n_boot=10)
