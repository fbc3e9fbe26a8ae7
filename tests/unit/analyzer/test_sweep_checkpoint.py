"""The concurrency sweep's early stop, and the checkpoint's write / read / resume rules."""

from __future__ import annotations

import json
import os
import signal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tritonctl.analyzer.checkpoint import CHECKPOINT_NAME, Checkpoint, read
from tritonctl.analyzer.objective import Constraints, Objective, best_point
from tritonctl.analyzer.point import Point
from tritonctl.analyzer.search import AnalyzeError, Knobs
from tritonctl.analyzer.sweep import SweepRule, sweep

LEVELS = (1, 2, 4, 8, 16, 32, 64)


def series(values: dict[int, tuple[float, float]]):
    """A measure function over recorded (throughput, p99) per concurrency; records what was asked."""
    asked: list[int] = []

    def measure(concurrency: int) -> Point:
        asked.append(concurrency)
        throughput, p99 = values[concurrency]
        return Point("b8-d0-i1-cpu", "h", Knobs(8), False, concurrency, "explore", throughput=throughput,
                     p99_ms=p99, stable=True)

    return measure, asked


SATURATING = {1: (500, 2.0), 2: (950, 2.2), 4: (1800, 2.4), 8: (2500, 3.5), 16: (2560, 7.0), 32: (2580, 14.0),
              64: (2590, 28.0)}


def test_stops_once_throughput_stops_growing():
    measure, asked = series(SATURATING)
    points, reason = sweep(LEVELS, measure, Objective(), Constraints())
    assert asked == [1, 2, 4, 8, 16, 32] and len(points) == 6
    assert reason == "stopped at concurrency 32: the objective grew less than 5% over 2 points"
    measure, asked = series(SATURATING)
    _, reason = sweep(LEVELS, measure, Objective(), Constraints(), SweepRule(patience=1))
    assert asked == [1, 2, 4, 8, 16] and reason.endswith("grew less than 5% over 1 point")


def test_one_point_without_gain_does_not_end_the_sweep():
    noisy = {**SATURATING, 4: (900, 2.4)}  # a bad measurement at 4; 8 still grows a lot
    measure, asked = series(noisy)
    sweep(LEVELS, measure, Objective(), Constraints())
    assert asked == [1, 2, 4, 8, 16, 32]
    measure, asked = series(noisy)
    sweep(LEVELS, measure, Objective(), Constraints(), SweepRule(patience=1))
    assert asked == [1, 2, 4]


def test_stops_at_the_first_point_over_the_latency_limit():
    measure, asked = series(SATURATING)
    _, reason = sweep(LEVELS, measure, Objective(), Constraints(max_p99_ms=3.0))
    assert asked == [1, 2, 4, 8] and reason == "stopped at concurrency 8: p99 3.50 ms is over the 3 ms limit"


def test_climbs_until_the_throughput_floor_is_met():
    measure, asked = series(SATURATING)
    sweep(LEVELS, measure, Objective(0.0), Constraints(min_throughput=1500))
    # Latency objective: below 1,500 infer/s it follows throughput; at 4 it passes, then latency only worsens.
    assert asked == [1, 2, 4, 8, 16]


def test_failed_point_ends_the_sweep():
    def measure(concurrency: int) -> Point:
        return Point("c", "h", Knobs(8), False, concurrency, "explore", error="load failed: out of memory")

    points, reason = sweep(LEVELS, measure, Objective(), Constraints())
    assert len(points) == 1 and reason == "stopped at concurrency 1: load failed: out of memory"


def test_a_warm_start_climbs_from_below_the_peak_and_walks_down_when_it_began_on_it():
    measure, asked = series(SATURATING)
    points, reason = sweep(LEVELS, measure, Objective(), Constraints(), near=32)
    # From 8 (two levels below 32): 16 and 32 add less than 5 %, so the start was the peak; 4 is
    # clearly lower, so the walk down stops there. The best point is the one a full sweep finds.
    assert asked == [8, 16, 32, 4] and [p.concurrency for p in points] == [4, 8, 16, 32]
    assert reason.endswith("(started at concurrency 8, then measured down to concurrency 4)")
    full, _ = sweep(LEVELS, series(SATURATING)[0], Objective(), Constraints())
    # As records: NaN fields (unmeasured) are never equal under Python 3.13's dataclass equality.
    assert best_point(points, Objective(), Constraints()).to_record() == \
        best_point(full, Objective(), Constraints()).to_record()

    growing = {c: (100.0 * c, 2.0) for c in LEVELS}  # still growing at the start: no walk down
    measure, asked = series(growing)
    _, reason = sweep(LEVELS, measure, Objective(), Constraints(), near=16)
    assert asked == [4, 8, 16, 32, 64] and reason == "measured every concurrency up to 64 (started at concurrency 4)"


def test_a_warm_start_on_a_plateau_finds_the_lowest_load_that_reaches_it():
    plateau = {1: (500, 1.0), 2: (1000, 1.1), **{c: (1000, c * 0.5) for c in (4, 8, 16, 32, 64)}}
    measure, asked = series(plateau)
    points, _ = sweep(LEVELS, measure, Objective(), Constraints(), near=64)
    assert asked == [16, 32, 64, 8, 4, 2, 1]
    assert best_point(points, Objective(), Constraints()).concurrency == 2


def test_a_warm_start_over_the_latency_limit_walks_down_until_it_meets_it():
    measure, asked = series(SATURATING)
    points, reason = sweep(LEVELS, measure, Objective(), Constraints(max_p99_ms=3.0), near=64)
    assert asked == [16, 8, 4, 2]  # 16 and 8 are over 3 ms; 4 meets it; 2 serves half as much
    assert reason.startswith("stopped at concurrency 16: p99 7.00 ms is over the 3 ms limit (started at")
    assert best_point(points, Objective(), Constraints(max_p99_ms=3.0)).concurrency == 4


@given(st.lists(st.tuples(st.floats(1, 1e4), st.floats(0.1, 100)), min_size=7, max_size=7),
       st.sampled_from(LEVELS), st.sampled_from([None, 2.0, 10.0]))
def test_a_warm_start_measures_each_level_once_and_returns_them_in_order(values, near, limit):
    measure, asked = series(dict(zip(LEVELS, values)))
    points, _ = sweep(LEVELS, measure, Objective(), Constraints(max_p99_ms=limit), near=near)
    assert len(asked) == len(set(asked)) and [p.concurrency for p in points] == sorted(asked)


SETTINGS = {"model": "m", "measurement_interval_ms": 500.0, "shapes": {"X": (3,)}}


def test_checkpoint_round_trip_and_resume(tmp_path):
    checkpoint = Checkpoint.open(tmp_path, SETTINGS, resume=False, overwrite=False)
    first = Point("b8-d0-i1-cpu", "h1", Knobs(8, 0, 1), True, 4, "baseline", throughput=10.5, p99_ms=2.0,
                  stable=True, measured_s=3.2)  # server numbers unknown: NaN, written as null
    checkpoint.record(first)
    checkpoint.record(Point("b8-d0-i1-cpu", "h1", Knobs(8, 0, 1), True, 8, "baseline", error="every request failed"))
    checkpoint.close()
    lines = (tmp_path / CHECKPOINT_NAME).read_text().splitlines()
    assert json.loads(lines[0])["kind"] == "run" and json.loads(lines[1])["avg_batch_size"] is None
    with pytest.raises(AnalyzeError, match="already holds measurements .* pass --resume"):
        Checkpoint.open(tmp_path, SETTINGS, resume=False, overwrite=False)
    resumed = Checkpoint.open(tmp_path, SETTINGS, resume=True, overwrite=False)
    again = resumed.lookup("b8-d0-i1-cpu", "h1", 4)
    assert again.throughput == 10.5 and again.knobs == Knobs(8, 0, 1) and again.is_default and again.stable
    assert again.avg_batch_size != again.avg_batch_size  # NaN survives the round trip
    assert resumed.lookup("b8-d0-i1-cpu", "h1", 8).error == "every request failed"
    assert resumed.lookup("b8-d0-i1-cpu", "other-config-hash", 4) is None
    resumed.close()
    with pytest.raises(AnalyzeError, match=r"other settings \(measurement_interval_ms: 500.0 then, 1000 now\)"):
        Checkpoint.open(tmp_path, {**SETTINGS, "measurement_interval_ms": 1000}, resume=True, overwrite=False)
    fresh = Checkpoint.open(tmp_path, SETTINGS, resume=False, overwrite=True)
    fresh.close()
    assert read(tmp_path / CHECKPOINT_NAME)[1] == []


def test_re_measurements_of_a_point_are_kept_apart_by_their_repeat_number(tmp_path):
    checkpoint = Checkpoint.open(tmp_path, SETTINGS, resume=False, overwrite=False)
    for repeat, throughput in ((0, 10.0), (1, 12.0), (2, 9.0)):
        checkpoint.record(Point("a", "h", Knobs(8), False, 16, "final" if repeat else "explore", throughput=throughput,
                                p99_ms=1.0, throughput_spread=0.04, repeat=repeat))
    checkpoint.close()
    resumed = Checkpoint.open(tmp_path, SETTINGS, resume=True, overwrite=False)
    assert [resumed.lookup("a", "h", 16, r).throughput for r in (0, 1, 2)] == [10.0, 12.0, 9.0]
    assert resumed.lookup("a", "h", 16).repeat == 0 and resumed.lookup("a", "h", 16, 3) is None
    assert resumed.lookup("a", "h", 16, 1).throughput_spread == 0.04
    resumed.close()


def test_a_checkpoint_written_before_spreads_and_repeats_still_resumes(tmp_path):
    checkpoint = Checkpoint.open(tmp_path, SETTINGS, resume=False, overwrite=False)
    checkpoint.record(Point("a", "h", Knobs(8), False, 4, "explore", throughput=5.0, p99_ms=1.0))
    checkpoint.close()
    path = tmp_path / CHECKPOINT_NAME
    old = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        for key in ("repeat", "throughput_spread", "p99_spread"):
            record.pop(key, None)
        old.append(json.dumps(record))
    path.write_text("\n".join(old) + "\n")
    point = Checkpoint.open(tmp_path, SETTINGS, resume=True, overwrite=False).lookup("a", "h", 4)
    assert point.repeat == 0 and point.throughput_spread == 0.0 and point.throughput == 5.0


def test_a_line_cut_off_by_a_kill_is_dropped(tmp_path):
    checkpoint = Checkpoint.open(tmp_path, SETTINGS, resume=False, overwrite=False)
    checkpoint.record(Point("a", "h", Knobs(8), False, 1, "explore", throughput=5.0, p99_ms=1.0))
    checkpoint.close()
    path = tmp_path / CHECKPOINT_NAME
    path.write_text(path.read_text() + '{"kind": "point", "config_id": "b", "thr')
    resumed = Checkpoint.open(tmp_path, SETTINGS, resume=True, overwrite=False)
    assert resumed.dropped_line and [p.config_id for p in resumed.recorded] == ["a"]
    resumed.record(Point("c", "h", Knobs(8), False, 1, "explore", throughput=6.0, p99_ms=1.0))
    resumed.close()
    assert [p.config_id for p in read(path)[1]] == ["a", "c"]  # the file is valid JSON lines again


def test_ctrl_c_while_a_point_is_recorded_waits_for_the_record():
    """Ctrl-C between writing a point to the checkpoint and keeping it for the tables would make
    the two disagree: inside ``_ctrl_c_deferred`` it takes effect once the block is done."""
    from tritonctl.analyzer.analyze import _ctrl_c_deferred, _noting_ctrl_c

    steps = []
    with pytest.raises(KeyboardInterrupt):
        with _noting_ctrl_c(), _ctrl_c_deferred():
            steps.append("written")
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs between bytecodes, within these
                pass
            steps.append("kept")
    assert steps == ["written", "kept"]
