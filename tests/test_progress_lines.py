"""Progress as plain lines (output not a terminal): one per finished unit and per corpus block, throttled."""

from __future__ import annotations

from audits.cli.progress_log import LineProgress


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _rows(n: int, dur: float, infer: float) -> list[dict[str, float]]:
    return [{"duration_s": dur, "infer_s": infer} for _ in range(n)]


def test_unit_lines_name_model_shard_rtfx_and_eta() -> None:
    clock, lines = Clock(), []
    lp = LineProgress(lines.append, min_interval_s=5.0, clock=clock)
    lp("loading", 0, {"model": "whisper-tiny.en"})
    lp("start", 4, {})
    clock.t += 10
    lp("unit", 1, {"model": "whisper-tiny.en", "shard": "000000", "rows": _rows(16, 5.0, 0.5)})
    assert lines[0] == "loading whisper-tiny.en" and lines[1] == "units: 4 to run"
    assert lines[2] == "unit 1/4: whisper-tiny.en shard 000000 (16 rows), RTFx 10.0, elapsed 0:10, ETA 0:30"
    clock.t += 1  # within the interval: no line
    lp("unit", 1, {"model": "pocketsphinx-en-us", "shard": "000000", "rows": _rows(16, 5.0, 2.5)})
    assert len(lines) == 3
    clock.t += 9
    lp("unit", 1, {"model": "pocketsphinx-en-us", "shard": "000001", "rows": _rows(16, 5.0, 2.5)})
    assert lines[3].startswith("unit 3/4: pocketsphinx-en-us shard 000001") and "RTFx 2.0" in lines[3] and "ETA 0:07" in lines[3]
    clock.t += 0.5  # the last unit always gets its line
    lp("unit", 1, {"model": "whisper-tiny.en", "shard": "000001", "rows": _rows(16, 5.0, 0.5)})
    assert lines[4].startswith("unit 4/4:") and lines[4].endswith("ETA 0:00")
    assert lp.rtfx("whisper-tiny.en") == 10.0 and lp.rtfx("missing") is None


def test_corpus_lines_are_throttled_and_end_with_the_total() -> None:
    clock, lines = Clock(), []
    lp = LineProgress(lines.append, min_interval_s=5.0, clock=clock)
    for done in range(1, 46):
        clock.t += 1.0
        lp.corpus(done, 45)
    assert lines[0] == "demo corpus: 1/45 clips, elapsed 0:01, ETA 0:44"
    assert lines[-1] == "demo corpus: 45/45 clips, elapsed 0:45, ETA 0:00"
    assert 9 <= len(lines) <= 11, lines  # about one line per 5 s, never one per clip


def test_skipped_units_are_reported() -> None:
    lines: list[str] = []
    lp = LineProgress(lines.append)
    lp("start", 2, {})
    lp("skip", 2, {"shard": "000003"})
    assert lines[-1] == "skipped 2 unit(s) of shard 000003 (model unavailable)"
