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

from audits.asr.summary import write_summary
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
        res = audit(
            "sweep", env.recipe(a, models="[sim-a, sim-b]"), "--models", "sim-a,sim-b", "--tracks", f"accent={a},noise={b}", "--out", out
        )
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


def test_a_run_without_a_recorded_rows_digest_is_refused(runs: dict[str, Path]) -> None:
    """A summary that records no digest of its rows cannot rule out rows changed after scoring: refused, naming the file."""
    run = _copy(runs["noise"], runs["tmp"] / "old-style")
    summary = json.loads((run / "summary.json").read_text())
    summary.pop("rows")
    write_summary(run, summary)
    with pytest.raises(ConfigError, match=r"records no digest of .*utterances.parquet"):
        track_summary({"a": runs["accent"], "b": run}, n_boot=10)


@pytest.mark.parametrize("name", ["tracks.json", "a/b", "..", ".hidden", "a b", "x|y", "parts", "é" * 2, "n" * 65])
def test_a_track_name_that_cannot_be_a_folder_is_refused_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
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
    # every row of the tracks table has the header's number of unescaped pipes (the trade-off tables follow)
    rows = [ln for ln in md.split("## Trade-offs")[0].splitlines() if ln.startswith("| ")]
    widths = {len(re.findall(r"(?<!\\)\|", ln)) for ln in rows}
    assert widths == {len(names) + 4}, widths
    # the HTML table: one header cell per column, and every body row the same width
    first = html.split("</table>")[0]
    assert first.count("<th>") == len(names) + 3
    body = first.split("<tbody>")[1].split("</tbody>")[0]
    assert {r.count("<td>") for r in body.split("</tr>") if r} == {len(names) + 3}
    assert "a|b" in html and "&lt;script&gt;" in html


def test_hostile_model_names_are_escaped_too(runs: dict[str, Path]) -> None:
    summary = track_summary({"a": runs["accent"], "b": runs["noise"]}, n_boot=10)
    summary["models"] = {f"{HOSTILE[i % 4]}{i}": v for i, v in enumerate(summary["models"].values())}
    summary["ranking"] = list(summary["models"])
    summary["winners"] = {k: HOSTILE[1] for k in summary["winners"]}
    md, html = tracks_markdown(summary), tracks_html(summary)
    assert "<script>" not in md and "<script>" not in html and "\u202e" not in md and "\u202e" not in html
    assert {len(re.findall(r"(?<!\\)\|", ln)) for ln in md.split("## Trade-offs")[0].splitlines() if ln.startswith("| ")} == {6}


def test_a_run_that_lost_a_whole_model_is_refused(runs: dict[str, Path]) -> None:
    import pyarrow.compute as pc

    run = _copy(runs["noise"], runs["tmp"] / "lost-model")
    table = pq.read_table(run / "utterances.parquet")
    pq.write_table(table.filter(pc.equal(table.column("model"), "sim-a")), run / "utterances.parquet")
    with pytest.raises(ConfigError, match="changed after the run was scored"):
        track_summary({"a": runs["accent"], "b": run}, n_boot=10)


# --- trade-offs: WER against RTFx and against cost per audio hour, per track and on the Average WER ---


def _dominated(m: str, pts: dict[str, tuple[float, float]], higher_better: bool) -> bool:
    """Brute force: another model at least as good on both figures and better on one."""
    w, x = pts[m]
    for m2, (w2, x2) in pts.items():
        better_x = x2 > x if higher_better else x2 < x
        as_good_x = x2 >= x if higher_better else x2 <= x
        if m2 != m and w2 <= w and as_good_x and (w2 < w or better_x):
            return True
    return False


def _check_view(view: dict) -> None:
    models = view["models"]
    speed = {m: (r["wer"], r["rtfx"]) for m, r in models.items() if r["wer"] is not None and r["rtfx"]}
    cost = {
        m: (r["wer"], r["cost_per_audio_hour_usd"])
        for m, r in models.items()
        if r["wer"] is not None and r["cost_per_audio_hour_usd"] is not None
    }
    assert set(view["pareto_wer_rtfx"]) == {m for m in speed if not _dominated(m, speed, True)}
    assert set(view["pareto_wer_cost"]) == {m for m in cost if not _dominated(m, cost, False)}
    for m, r in models.items():
        assert r["on_front_rtfx"] == (m in view["pareto_wer_rtfx"]) and r["on_front_cost"] == (m in view["pareto_wer_cost"])


def test_trade_off_fronts_match_a_brute_force_dominance_check() -> None:
    import random

    from audits.asr.tracks import _trade_view

    rng = random.Random(7)
    for trial in range(40):
        pts = {}
        for i in range(rng.randint(1, 9)):
            hosted = rng.random() < 0.3
            pts[f"m{i}"] = {
                "wer": rng.choice([0.1, 0.2, 0.3, rng.random()]),
                "ci95": [None, None],
                "audio_s": rng.choice([0.0, 10.0, 20.0]),
                "infer_s": rng.choice([0.0, 1.0, 2.0, 4.0]),
                "hosted": hosted,
                "price": rng.choice([None, 0.21, 0.96]) if hosted else None,
            }
        view = _trade_view(pts, rng.choice([None, 0.4]))
        _check_view(view)
        for m, r in view["models"].items():
            p = pts[m]
            if p["hosted"]:
                assert r["cost_per_audio_hour_usd"] == p["price"]
            elif r["rtfx"] is None:
                assert r["cost_per_audio_hour_usd"] is None, "unknown speed must leave cost unknown, never 0"


def _priced_copy(runs: dict[str, Path], name: str, price: float | None) -> Path:
    """A copy of a track whose sim-b is recorded as a hosted model with a registry price (summary only; rows untouched)."""
    run = _copy(runs[name], runs["tmp"] / f"priced-{name}-{price}")
    summary = json.loads((run / "summary.json").read_text())
    summary["models"]["sim-b"].setdefault("backend_info", {})["usage"] = {"price_per_audio_hour_usd": price}
    write_summary(run, summary)  # as a run of a priced model would have sealed it
    return run


def test_tracks_report_wer_against_rtfx_and_cost_with_fronts(runs: dict[str, Path]) -> None:
    a, b = _priced_copy(runs, "accent", 0.21), _priced_copy(runs, "noise", 0.21)
    out = runs["tmp"] / "trade"
    write_tracks({"accent": a, "noise": b}, out, n_boot=10, gpu_hour_usd=0.4)
    t = json.loads((out / "tracks.json").read_text())
    to = t["trade_offs"]
    assert to["gpu_hour_usd"] == 0.4 and set(to["tracks"]) == {"accent", "noise"}
    for name, run in (("accent", a), ("noise", b)):
        own = json.loads((run / "summary.json").read_text())["models"]
        view = to["tracks"][name]
        for m in ("sim-a", "sim-b"):
            assert view["models"][m]["wer"] == t["models"][m]["tracks"][name]["wer"]
            assert view["models"][m]["rtfx"] == pytest.approx(own[m]["rtfx"]), "a track's RTFx is the run's own"
        assert view["models"]["sim-a"]["cost_per_audio_hour_usd"] == pytest.approx(0.4 / own["sim-a"]["rtfx"])
        assert view["models"]["sim-b"]["cost_per_audio_hour_usd"] == 0.21 and "registry" in view["models"]["sim-b"]["cost_basis"]
        _check_view(view)
    avg = to["average"]
    _check_view(avg)
    for m in ("sim-a", "sim-b"):
        assert avg["models"][m]["wer"] == t["models"][m]["average_wer"]
    sa = [json.loads((r / "summary.json").read_text())["models"]["sim-a"] for r in (a, b)]
    pooled = sum(x["audio_s"] for x in sa) / sum(x["infer_s"] for x in sa)  # every sim clip is timed
    assert avg["models"]["sim-a"]["rtfx"] == pytest.approx(pooled)
    assert avg["models"]["sim-a"]["cost_per_audio_hour_usd"] == pytest.approx(0.4 / pooled)
    md, html = (out / "tracks.md").read_text(), (out / "tracks.html").read_text()
    assert "## Trade-offs: WER, speed, cost" in md and "### track accent" in md and "on front" in md
    assert html.count("<table class='trade-offs'>") == 3 and html.count("WER against cost per audio hour</title>") == 3
    assert "data-front" in html


def test_unknown_cost_stays_unknown_never_zero(runs: dict[str, Path]) -> None:
    a, b = _priced_copy(runs, "accent", None), _priced_copy(runs, "noise", None)
    s = track_summary({"accent": a, "noise": b}, n_boot=10)  # no gpu_hour_usd, no price
    for view in [s["trade_offs"]["average"], *s["trade_offs"]["tracks"].values()]:
        assert all(r["cost_per_audio_hour_usd"] is None for r in view["models"].values())
        assert view["pareto_wer_cost"] == [] and view["pareto_wer_rtfx"]
    assert "unknown" in tracks_markdown(s) and "| 0.0000 |" not in tracks_markdown(s)


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_a_bad_gpu_hour_price_is_refused_before_any_run_is_read(runs: dict[str, Path], value: str) -> None:
    out = runs["tmp"] / f"gpu{value}"
    res = audit("tracks", f"a={runs['accent']}", f"b={runs['noise']}", "--out", out, "--gpu-hour-usd", value)
    assert res.exit_code == 2 and "Traceback" not in res.output and "--gpu-hour-usd" in res.output
    assert not out.exists()


def test_hostile_model_names_are_escaped_in_the_trade_offs(runs: dict[str, Path]) -> None:
    s = track_summary({"a": runs["accent"], "b": runs["noise"]}, n_boot=10, gpu_hour_usd=0.4)
    rename = {"sim-a": "<script>alert(1)</script>", "sim-b": "x|y"}
    s["models"] = {rename[m]: v for m, v in s["models"].items()}
    s["ranking"] = [rename[m] for m in s["ranking"]]
    s["winners"] = {k: rename[w] for k, w in s["winners"].items()}
    for view in [s["trade_offs"]["average"], *s["trade_offs"]["tracks"].values()]:
        view["models"] = {rename[m]: v for m, v in view["models"].items()}
        for key in ("pareto_wer_rtfx", "pareto_wer_cost"):
            view[key] = [rename[m] for m in view[key]]
    md, html = tracks_markdown(s), tracks_html(s)
    assert "<script>" not in md and "<script>" not in html
    assert "&lt;script&gt;" in html and "x|y" in html
    trade_rows = [ln for ln in md.split("## Trade-offs")[1].splitlines() if ln.startswith("| ")]
    assert len(trade_rows) == 3 * 4 and {len(re.findall(r"(?<!\\)\|", ln)) for ln in trade_rows} == {7}
    assert "x\\|y" in md
