"""The queue policy as knobs of the space, request-rate and trace loads, rejected requests in the
constraints, and the "why it won" section computed from measured points."""

from __future__ import annotations

import pytest
from helpers.analyze_models import fixed_batch_model, onnx_model

from tritonctl.analyzer.checkpoint import read
from tritonctl.analyzer.objective import ConfigResult, Constraints, Objective, best_point
from tritonctl.analyzer.point import Point
from tritonctl.analyzer.search import (AnalyzeError, Knobs, SearchSpace, build_candidates, default_knobs,
                                       load_model_config)
from tritonctl.analyzer.space_options import parse_queue_sizes, parse_rates, parse_share, parse_timeouts
from tritonctl.analyzer.sweep import sweep
from tritonctl.analyzer.why import differs_only_in, explain, why_lines


def test_queue_policy_spellings():
    assert parse_queue_sizes("16,0,4") == (0, 4, 16) and parse_timeouts("0, 20000") == (0, 20000)
    assert parse_rates("200,50,50") == (50.0, 200.0) and parse_rates("50:150:50") == (50.0, 100.0, 150.0)
    assert parse_share("1%", "--max-reject-rate") == pytest.approx(0.01) and parse_share("0", "x") == 0.0
    for bad in ("1", "-0.1", "100%", "lots"):
        with pytest.raises(AnalyzeError, match="from 0 up to 1"):
            parse_share(bad, "--max-reject-rate")
    with pytest.raises(AnalyzeError, match="--request-rate '0:10'"):
        parse_rates("0:10")


def test_the_queue_policy_is_read_set_and_cleared(tmp_path):
    onnx_model(tmp_path, config="dynamic_batching { max_queue_delay_microseconds: 100 default_queue_policy { "
                                "timeout_action: REJECT default_timeout_microseconds: 7000 max_queue_size: 32 } }")
    model_dir, base = load_model_config(tmp_path, "add_sub")
    assert default_knobs(base) == Knobs(8, 100, 1, "KIND_CPU", 0, True, 32, 7000)
    space = SearchSpace(batch_sizes=(8,), queue_delays_us=(100,), instance_counts=(1,), max_queue_sizes=(0, 32),
                        queue_timeouts_us=(0, 7000), concurrency=(1,)).resolved(base)
    candidates = build_candidates(model_dir, base, space)
    by_id = {c.config_id: c for c in candidates.all}
    assert set(by_id) == {"b8-d100-i1-cpu", "b8-d100-i1-cpu-q32", "b8-d100-i1-cpu-t7000", "b8-d100-i1-cpu-q32-t7000"}
    assert candidates.default is by_id["b8-d100-i1-cpu-q32-t7000"]  # the model's own config is a grid point
    assert not by_id["b8-d100-i1-cpu"].config.dynamic_batching.HasField("default_queue_policy")
    policy = by_id["b8-d100-i1-cpu-t7000"].config.dynamic_batching.default_queue_policy
    assert (policy.max_queue_size, policy.default_timeout_microseconds, policy.timeout_action) == (0, 7000, 0)
    assert not candidates.dropped  # every candidate validates


def test_a_delay_policy_is_kept_and_the_space_defaults_to_the_model(tmp_path):
    onnx_model(tmp_path, config="dynamic_batching { default_queue_policy { timeout_action: DELAY "
                                "default_timeout_microseconds: 900 } }")
    model_dir, base = load_model_config(tmp_path, "add_sub")
    assert default_knobs(base).queue_timeout_us == 0  # a timeout that delays rejects nothing
    space = SearchSpace(batch_sizes=(8,), queue_delays_us=(0,), instance_counts=(1,), max_queue_sizes=(0, 4),
                        concurrency=(1,)).resolved(base)
    assert space.queue_timeouts_us == (0,)
    for candidate in build_candidates(model_dir, base, space).candidates:
        policy = candidate.config.dynamic_batching.default_queue_policy
        assert policy.timeout_action == policy.DELAY and policy.default_timeout_microseconds == 900
    fixed_batch_model(tmp_path)
    model_dir, base = load_model_config(tmp_path, "fixed")
    space = SearchSpace(instance_counts=(1,), max_queue_sizes=(0, 4), concurrency=(1,)).resolved(base)
    fixed = build_candidates(model_dir, base, space)
    assert [c.knobs.max_queue_size for c in fixed.candidates] == [0]
    assert fixed.dropped and "no dynamic batcher" in fixed.dropped[0]


def test_one_kind_of_load(tmp_path):
    onnx_model(tmp_path, config="")
    _, base = load_model_config(tmp_path, "add_sub")
    with pytest.raises(AnalyzeError, match="--concurrency or --request-rate, not both"):
        SearchSpace(concurrency=(1,), request_rates=(5.0,)).resolved(base)
    with pytest.raises(AnalyzeError, match="not all three"):
        SearchSpace(concurrency=(1,), request_rates=(5.0,), request_intervals_us=(10,)).resolved(base)
    rate = SearchSpace(request_rates=(5.0, 10.0)).resolved(base)
    assert rate.concurrency is None and rate.load_kind == "request_rate" and rate.load_levels == (5.0, 10.0)
    trace = SearchSpace(request_intervals_us=(10000, 30000), request_intervals_file="t.txt").resolved(base)
    assert trace.load_kind == "request_intervals" and trace.load_levels == (50.0,)
    assert trace.describe()["load"] == {"kind": "request_intervals", "file": "t.txt", "count": 2,
                                        "total_us": 40000, "mean_rate_per_s": 50.0}
    assert SearchSpace().resolved(base).load_kind == "concurrency"


def point(config_id: str, knobs: Knobs, level: float, throughput: float, p99: float, errors: int = 0,
          load: str = "request_rate") -> Point:
    concurrency, rate = (int(level), 0.0) if load == "concurrency" else (0, level)
    return Point(config_id, "h" + config_id, knobs, False, concurrency, "explore", throughput=throughput,
                 p99_ms=p99, stable=True, request_count=100, error_count=errors, load=load, request_rate=rate)


def test_rejected_requests_count_against_the_constraints():
    served = point("a", Knobs(8), 100.0, 95.0, 4.0)
    rejecting = point("b", Knobs(8, max_queue_size=2), 100.0, 99.0, 2.0, errors=25)
    assert served.reject_rate == 0.0 and rejecting.reject_rate == pytest.approx(0.2)
    strict, lenient = Constraints(max_p99_ms=5.0), Constraints(max_p99_ms=5.0, max_reject_rate=0.25)
    assert strict.meets(served) and not strict.meets(rejecting)
    assert strict.violation(rejecting) == pytest.approx(0.2) and lenient.meets(rejecting)
    assert strict.as_dict() == {"max_p99_ms": 5.0} and lenient.as_dict()["max_reject_rate"] == 0.25
    assert "rejected <= 25.00%" in lenient.describe() and "20.0% rejected at 100 req/s" in rejecting.describe()
    with pytest.raises(AnalyzeError, match="--max-reject-rate"):
        Constraints(max_reject_rate=1.0)


def test_a_rate_sweep_stops_where_requests_start_being_rejected():
    table = {50.0: (50.0, 2.0, 0), 100.0: (98.0, 3.0, 0), 200.0: (120.0, 3.5, 40), 400.0: (121.0, 3.6, 90)}
    asked = []

    def measure(rate):
        asked.append(rate)
        throughput, p99, errors = table[rate]
        return point("b8-d0-i1-cpu-q4", Knobs(8, max_queue_size=4), rate, throughput, p99, errors)

    points, reason = sweep(tuple(table), measure, Objective(), Constraints(max_p99_ms=10.0))
    assert asked == [50.0, 100.0, 200.0]
    assert reason == ("stopped at 200 req/s: 28.6% of the requests were rejected, over the 0.0% allowed "
                      "(--max-reject-rate)")
    assert best_point(points, Objective(), Constraints(max_p99_ms=10.0)).request_rate == 100.0


def test_points_keep_their_load_through_the_checkpoint(tmp_path):
    rate = point("a", Knobs(8, queue_timeout_us=500), 150.0, 140.0, 3.0, errors=3)
    record = rate.to_record()
    assert record["load"] == "request_rate" and record["knobs"]["queue_timeout_us"] == 500
    again = Point.from_record(record)
    # Compared as records: a point's unmeasured fields are NaN, which Python 3.13's dataclass
    # equality (field by field, no identity shortcut) never finds equal.
    assert again.to_record() == rate.to_record() and again.key == ("a", "ha", 150.0, 0, "") and again.level == 150.0
    legacy = {k: v for k, v in point("b", Knobs(8), 4, 10.0, 1.0, load="concurrency").to_record().items()
              if k not in ("load", "request_rate")}
    legacy["knobs"] = {k: v for k, v in legacy["knobs"].items() if k not in ("max_queue_size", "queue_timeout_us")}
    old = Point.from_record(legacy)  # written before loads and queue knobs existed
    assert old.load == "concurrency" and old.level == 4 and old.knobs == Knobs(8)
    path = tmp_path / "measurements.jsonl"
    import json
    path.write_text(json.dumps({"kind": "run", "settings": {}}) + "\n" + json.dumps({"kind": "point", **legacy}) + "\n")
    assert read(path)[1][0].key == ("b", "hb", 4, 0, "")


def test_only_one_knob_apart():
    assert differs_only_in(Knobs(8, 500), Knobs(4, 500), "max_batch_size")
    assert not differs_only_in(Knobs(8, 500), Knobs(4, 0), "max_batch_size")
    assert differs_only_in(Knobs(8, 500, preferred_batch_size=4), Knobs(1, 0), "max_batch_size")  # a batch of 1 never waits
    assert differs_only_in(Knobs(8, max_queue_size=4), Knobs(8), "max_queue_size")
    assert not differs_only_in(Knobs(8), Knobs(8), "max_queue_size")


def result(config_id: str, knobs: Knobs, *points: Point, constraints=Constraints(max_p99_ms=10.0)) -> ConfigResult:
    return ConfigResult(config_id, knobs, False, list(points), best_point(list(points), Objective(), constraints))


def test_why_states_each_knobs_effect_and_the_runner_up_from_the_points():
    limits = Constraints(max_p99_ms=10.0)
    winner_knobs = Knobs(8, 500, 2)
    win = result("b8-d500-i2-cpu", winner_knobs, point("w", winner_knobs, 100, 98.0, 4.0),
                 point("w", winner_knobs, 200, 190.0, 6.0))
    fewer = result("b8-d500-i1-cpu", Knobs(8, 500, 1), point("f", Knobs(8, 500, 1), 100, 97.0, 5.0),
                   point("f", Knobs(8, 500, 1), 200, 120.0, 30.0))
    small = result("b1-d0-i2-cpu", Knobs(1, 0, 2), point("s", Knobs(1, 0, 2), 100, 95.0, 12.0))  # misses p99
    queued_base = result("b8-d0-i2-cpu", Knobs(8, 0, 2), point("qb", Knobs(8, 0, 2), 200, 180.0, 5.0))
    queued = result("b8-d0-i2-cpu-q4", Knobs(8, 0, 2, max_queue_size=4),
                    point("q", Knobs(8, 0, 2, max_queue_size=4), 200, 150.0, 3.0, errors=10))
    final = {"runner_up": "b8-d0-i2-cpu", "rounds": 3, "margin": 0.04, "band": 0.02, "beyond_noise": True,
             "finalists": [{"config_id": "b8-d500-i2-cpu", "throughput": 191.0, "p99_ms": 6.1},
                           {"config_id": "b8-d0-i2-cpu", "throughput": 183.0, "p99_ms": 5.2}]}
    searched = {"instance_count": [1, 2], "max_batch_size": [1, 8], "max_queue_delay_us": [0, 500],
                "max_queue_size": [0, 4], "queue_timeout_us": [0, 1000], "instance_kind": ["KIND_CPU"]}
    why = explain([win, fewer, small, queued_base, queued], win, final, Objective(), limits, searched)
    knobs = {k["knob"]: k for k in why["knobs"]}
    assert set(knobs) == {"instance_count", "max_batch_size", "max_queue_delay_us", "max_queue_size",
                          "queue_timeout_us"}
    assert why["winner"]["throughput"] == 190.0 and why["winner"]["level"] == 200
    count = knobs["instance_count"]
    assert count["status"] == "measured" and count["changes"][0]["config_id"] == "b8-d500-i1-cpu"
    assert count["changes"][0]["throughput"] == 97.0  # its best point: 200 req/s broke the p99 limit
    assert count["changes"][0]["throughput_change"] == pytest.approx(97.0 / 190.0 - 1)
    assert "best points at 100 req/s vs 200 req/s" in count["summary"]
    batch = knobs["max_batch_size"]
    assert batch["status"] == "measured" and not batch["changes"][0]["meets_constraints"]
    assert "misses the constraints" in batch["summary"]
    assert knobs["max_queue_delay_us"]["changes"][0]["p99_change_ms"] == pytest.approx(5.0 - 6.0)
    queue = knobs["max_queue_size"]
    assert queue["status"] == "measured elsewhere" and queue["changes"][0]["from_config_id"] == "b8-d0-i2-cpu"
    assert queue["changes"][0]["reject_rate"] == pytest.approx(10 / 110)
    assert knobs["queue_timeout_us"]["status"] == "not measured" and "not measured" in knobs["queue_timeout_us"]["summary"]
    assert [k["status"] for k in why["knobs"]][-2:] == ["measured elsewhere", "not measured"]
    assert why["knobs"][0]["knob"] == "max_batch_size"  # missing the constraints is the largest cost
    runner_up = why["runner_up"]
    assert runner_up["config_id"] == "b8-d0-i2-cpu" and runner_up["chosen_by"] == "final round"
    assert runner_up["final_round"]["winner_throughput"] == 191.0 and runner_up["knobs_that_differ"] == {
        "max_queue_delay_us": [500, 0]}
    assert runner_up["resources"] == {"winner": "2 x CPU, max batch 8", "runner_up": "2 x CPU, max batch 8"}
    assert "191.0 vs 183.0 infer/s" in runner_up["summary"] and "margin +4.0% (beyond noise)" in runner_up["summary"]
    assert why_lines(why)[-1] == runner_up["summary"] and len(why_lines(why)) == 6
    alone = explain([win], win, None, Objective(), limits, searched)
    assert alone["runner_up"] is None and all(k["status"] == "not measured" for k in alone["knobs"])
