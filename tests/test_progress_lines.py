"""Progress as plain lines (output not a terminal): one per finished unit and per corpus block, throttled;
the ETA from each model's own measured speed; the pass named in every line."""

from __future__ import annotations

from audits.cli.progress_log import LineProgress, UnitEta


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _rows(n: int, dur: float, infer: float) -> list[dict[str, float]]:
    return [{"duration_s": dur, "infer_s": infer} for _ in range(n)]


def test_unit_lines_name_pass_model_shard_rtfx_and_eta() -> None:
    clock, lines = Clock(), []
    lp = LineProgress(lines.append, min_interval_s=5.0, clock=clock)
    lp("loading", 0, {"model": "whisper-tiny.en"})
    lp("start", 4, {})  # a runner that sends no details: the pass is "units", the ETA counts units
    clock.t += 10
    lp("unit", 1, {"model": "whisper-tiny.en", "shard": "000000", "rows": _rows(16, 5.0, 0.5)})
    assert lines[0] == "loading whisper-tiny.en" and lines[1] == "units: 4 unit(s) to run"
    assert lines[2] == "units: units 1/4: whisper-tiny.en shard 000000 (16 rows), RTFx 10.0, elapsed 0:10, ETA 0:30"
    clock.t += 1  # within the interval: no line
    lp("unit", 1, {"model": "pocketsphinx-en-us", "shard": "000000", "rows": _rows(16, 5.0, 2.5)})
    assert len(lines) == 3
    clock.t += 9
    lp("unit", 1, {"model": "pocketsphinx-en-us", "shard": "000001", "rows": _rows(16, 5.0, 2.5)})
    assert lines[3].startswith("units: units 3/4: pocketsphinx-en-us shard 000001") and "RTFx 2.0" in lines[3] and "ETA 0:07" in lines[3]
    clock.t += 0.5  # the last unit always gets its line
    lp("unit", 1, {"model": "whisper-tiny.en", "shard": "000001", "rows": _rows(16, 5.0, 0.5)})
    assert lines[4].startswith("units: units 4/4:") and lines[4].endswith("ETA 0:00")
    assert lp.rtfx("whisper-tiny.en") == 10.0 and lp.rtfx("missing") is None


def test_passes_are_named_and_each_restarts_its_count() -> None:
    clock, lines = Clock(), []
    lp = LineProgress(lines.append, min_interval_s=0.0, clock=clock)
    lp("start", 1, {"pass": "asr", "units": [("m", "000000")]})
    clock.t += 1
    lp("unit", 1, {"model": "m", "shard": "000000", "rows": _rows(2, 1.0, 0.1)})
    lp("start", 2, {"pass": "sv", "units": [("ecapa", "000000"), ("ecapa", "000001")]})
    clock.t += 1
    lp("unit", 1, {"model": "ecapa", "shard": "000000", "rows": _rows(2, 1.0, 0.1)})
    assert lines[0] == "asr: 1 unit(s) to run" and lines[1].startswith("asr: units 1/1: m shard 000000")
    assert lines[2] == "sv: 2 unit(s) to run" and lines[3].startswith("sv: units 1/2: ecapa shard 000000")


def test_eta_follows_each_models_own_speed() -> None:
    """A fast model then a slow one, shard-major: the unit-count ETA would say the slow model's
    remaining units take as long as the fast one's; the per-model ETA prices each at its own rate."""
    clock = Clock()
    eta = UnitEta(clock)
    units = [(m, s) for s in ("000000", "000001", "000002") for m in ("fast", "slow")]
    eta.start(units)
    clock.t += 1.0  # fast: 1 s for 10 s of audio
    eta.finished("fast", "000000", _rows(2, 5.0, 0.5))
    assert eta.rate("fast") == 0.1 and eta.rate("slow") == 0.1  # slow not measured yet: the mean rate
    assert eta.eta(6) == 5 * 0.1 * 10.0
    clock.t += 20.0  # slow: 20 s for the same 10 s
    eta.finished("slow", "000000", _rows(2, 5.0, 10.0))
    assert eta.rate("slow") == 2.0
    # left: fast x2 shards (1 s each) + slow x2 shards (20 s each); unit counting would say 4 x 10.5 s = 42 s
    assert eta.eta(6) == 2 * 1.0 + 2 * 20.0
    clock.t += 2.0  # a shard with twice the audio
    eta.finished("fast", "000001", _rows(4, 5.0, 0.5))
    # fast's rate is now 3 s / 30 s; the unseen shard 000002 is priced at the mean shard audio (15 s)
    assert abs(eta.eta(6) - (0.1 * 15.0 + 2.0 * 20.0 + 2.0 * 15.0)) < 1e-9
    clock.t += 30.0  # a load group's model loads: not counted as processing
    eta.loading()
    clock.t += 1.0
    eta.finished("fast", "000002", _rows(2, 5.0, 0.5))
    assert eta.rate("fast") == 4.0 / 40.0
    assert eta.pending is not None
    eta.pending.add(("fast", "000002"))  # back, for the skips below
    eta.skipped({"shard": "000002"})  # in-process: a shard whose models did not load
    assert abs(eta.eta(6) - 2.0 * 20.0) < 1e-9
    eta.skipped({"model": "slow", "reason": "actor failed"})  # Ray: a model's remaining units
    assert eta.eta(6) == 0.0 and eta.pending == set()


def test_eta_for_a_bar_is_recomputed_at_most_once_a_second() -> None:
    clock = Clock()
    eta = UnitEta(clock)
    eta.start([("m", "a"), ("m", "b")])
    clock.t += 2.0
    eta.finished("m", "a", _rows(1, 1.0, 0.1))
    assert eta.eta_every(2) == 2.0
    clock.t += 0.5  # within the second: the cached estimate, counted down
    assert eta.eta_every(2) == 1.5
    clock.t += 0.5
    assert eta.eta_every(2) == eta.eta(2) == 2.0  # measured rate: 2 s per audio second x 1 s of audio


def test_eta_without_unit_details_counts_units() -> None:
    clock = Clock()
    eta = UnitEta(clock)
    eta.start(None)
    assert eta.eta(4) == 0.0
    clock.t += 3.0
    eta.finished("m", "000000", _rows(1, 1.0, 0.1))
    assert eta.eta(4) == 9.0


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
    lp("start", 2, {"pass": "asr", "units": [("m", "000003"), ("n", "000003")]})
    lp("skip", 2, {"shard": "000003"})
    assert lines[-1] == "asr: skipped 2 unit(s) of shard 000003 (model unavailable)"
