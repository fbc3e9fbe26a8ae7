"""Choosing the best config from recorded measurements: objectives, constraints, near-ties."""

from __future__ import annotations

import math

import pytest

from tritonctl.analyzer.objective import (ConfigResult, Constraints, Objective, best_point, choose_best,
                                          summarize)
from tritonctl.analyzer.point import Point
from tritonctl.analyzer.search import AnalyzeError, Knobs


def point(config: Knobs | str, concurrency: int, throughput: float, p99: float, default: bool = False) -> Point:
    knobs = config if isinstance(config, Knobs) else Knobs(8)
    name = config if isinstance(config, str) else config.config_id
    return Point(name, "hash", knobs, default, concurrency, "explore", throughput=throughput, p50_ms=p99 / 2,
                 p99_ms=p99, avg_ms=p99 / 2, stable=True)


B8_I1 = Knobs(8, 500, 1)
B8_I2 = Knobs(8, 500, 2)
B32_I1 = Knobs(32, 2000, 1)
B1 = Knobs(1, 0, 1)


def recorded() -> list[Point]:
    """Four configs' sweeps: the biggest throughput (b32) only at a p99 over 10 ms."""
    return [
        point(B1, 1, 900, 1.4, default=True), point(B1, 2, 1100, 2.5), point(B1, 4, 1120, 4.9),
        point(B8_I1, 1, 700, 1.9), point(B8_I1, 4, 2400, 2.8), point(B8_I1, 16, 4100, 6.0),
        point(B8_I1, 32, 4150, 11.0),
        point(B8_I2, 4, 2300, 3.0), point(B8_I2, 16, 4050, 6.1), point(B8_I2, 32, 4400, 12.5),
        point(B32_I1, 16, 3900, 7.5), point(B32_I1, 64, 6000, 14.0),
    ]


def results(points, objective=Objective(), constraints=Constraints()) -> list[ConfigResult]:
    return list(summarize(points, objective, constraints).values())


def test_best_throughput_without_constraints():
    best = choose_best(results(recorded()), Objective())
    assert best.config_id == B32_I1.config_id and best.best.throughput == 6000


def test_best_throughput_under_a_p99_limit():
    constraints = Constraints(max_p99_ms=10)
    best = choose_best(results(recorded(), constraints=constraints), Objective())
    # b8-i1 (4,100 at 6.0 ms) and b8-i2 (4,050 at 6.1 ms) tie within noise: fewer instances win.
    assert best.config_id == B8_I1.config_id and (best.best.concurrency, best.best.throughput) == (16, 4100)


def test_within_a_config_the_lowest_latency_point_that_reaches_its_throughput():
    # b8-i1 at concurrency 32 has 1 % more throughput than at 16 but twice the p99.
    chosen = best_point([p for p in recorded() if p.config_id == B8_I1.config_id], Objective(), Constraints())
    assert (chosen.concurrency, chosen.p99_ms) == (16, 6.0)


def test_latency_objective_with_a_throughput_floor():
    points = recorded()
    assert choose_best(results(points), Objective.parse("latency")).config_id == B1.config_id
    floor = Constraints(min_throughput=2000)
    best = choose_best(results(points, Objective(0.0), floor), Objective(0.0))
    assert best.config_id == B8_I1.config_id and best.best.concurrency == 4  # 2,400 infer/s at 2.8 ms


def test_weighted_objective_trades_throughput_for_latency():
    objective = Objective.parse("weighted:0.5")
    value = objective.value(point(B1, 1, 900, 1.4))
    assert value == pytest.approx(math.sqrt(900 * 1000 / 1.4))
    assert choose_best(results(recorded(), objective), objective).config_id == B8_I1.config_id


def test_nothing_meets_the_constraints():
    constraints = Constraints(max_p99_ms=1.0)
    found = results(recorded(), constraints=constraints)
    assert choose_best(found, Objective()) is None
    closest = max(found, key=lambda r: r.score(Objective(), constraints))
    assert closest.config_id == B1.config_id  # 1.4 ms is 40 % over, the least of all
    assert "no point meets the constraints (closest: 900.0 infer/s, p99 1.40 ms" in \
        closest.describe(Objective(), constraints)


def test_near_ties_go_to_lower_latency_then_fewer_resources():
    small, big = Knobs(4, 0, 1), Knobs(16, 0, 2)
    tie_on_both = [point(big, 8, 1000, 5.0), point(small, 8, 985, 5.2)]
    assert choose_best(results(tie_on_both), Objective()).config_id == small.config_id
    lower_latency = [point(big, 8, 1000, 3.0), point(small, 8, 985, 5.2)]
    assert choose_best(results(lower_latency), Objective()).config_id == big.config_id
    clear_win = [point(big, 8, 1100, 5.0), point(small, 8, 985, 5.0)]
    assert choose_best(results(clear_win), Objective()).config_id == big.config_id


@pytest.mark.parametrize("text", ["fast", "weighted:2", "weighted:x", "latency:0.5"])
def test_bad_objectives(text):
    with pytest.raises(AnalyzeError, match="--objective"):
        Objective.parse(text)


def test_bad_constraints():
    with pytest.raises(AnalyzeError, match="--max-p99-ms must be a positive"):
        Constraints(max_p99_ms=0)
    assert Constraints(5, 100).describe() == "p99 <= 5 ms, throughput >= 100 infer/s"
