"""The load sweep of one candidate config, with Model Analyzer's early stop.

Load levels (concurrency values or request rates) are measured in increasing order. The sweep stops
at the first point whose p99 is over ``--max-p99-ms`` (more load only adds latency) or that rejects
more requests than ``--max-reject-rate`` allows (more load only rejects more), or once the sweep's aim has not grown by
more than ``min_gain`` for ``patience`` points: the aim is the objective of points meeting the
constraints, or, until one does, throughput (to reach ``--min-throughput``).

A sweep may start higher up (``near``: the level where a similar config peaked, for a throughput
objective): it climbs from ``WARM_START_STEPS`` levels below ``near``, and when its first point is
already the best it reaches (or misses the constraints), it walks down, one level at a time, while
the lower levels lose nothing, so the config's best point is still the lowest load that reaches its
throughput.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from tritonctl.analyzer.objective import Constraints, Objective
from tritonctl.analyzer.point import Point

MIN_GAIN = 0.05  # Model Analyzer's THROUGHPUT_MINIMUM_GAIN
WARM_START_STEPS = 2  # levels below ``near`` a warm-started sweep begins at


@dataclass(frozen=True)
class SweepRule:
    min_gain: float = MIN_GAIN
    patience: int = 2  # points in a row without gain before stopping (one noisy window must not end a sweep)


def start_index(levels: tuple[float, ...], near: float | None) -> int:
    """Where a sweep begins: ``WARM_START_STEPS`` levels below the highest level at or under ``near``."""
    if near is None:
        return 0
    at = sum(1 for level in levels if level <= near) - 1
    return max(0, at - WARM_START_STEPS)


def sweep(levels: tuple[float, ...], measure: Callable[[float], Point], objective: Objective,
          constraints: Constraints, rule: SweepRule = SweepRule(), near: float | None = None) -> tuple[list[Point], str]:
    """Measure ``levels`` in order until the early stop (from below ``near`` when given, walking down
    from there if needed); returns the points, lowest level first, and why the sweep stopped."""
    first = start_index(levels, near)
    points, reason, best_at_start = _climb(levels[first:], measure, objective, constraints, rule)
    if first == 0 or not best_at_start:
        return points, reason + (f" (started at {points[0].load_words()})" if first else "")
    below = _descend(levels[first - 1::-1], measure, objective, constraints, rule, points[0])
    reason += f" (started at {points[0].load_words()}, then measured down to {below[-1].load_words()})"
    return below[::-1] + points, reason


def _aim(point: Point, objective: Objective, constraints: Constraints) -> tuple[int, float]:
    return (1, objective.value(point)) if constraints.meets(point) else (0, point.throughput)


def _climb(levels, measure, objective, constraints, rule) -> tuple[list[Point], str, bool]:
    """The upward sweep; also whether its first point is the best it reached (or it stopped there)."""
    points: list[Point] = []
    best: tuple[int, float] | None = None
    best_index = 0
    stale = 0
    for level in levels:
        point = measure(level)
        points.append(point)
        at = point.load_words()
        if not point.ok:
            return points, f"stopped at {at}: {point.error}", best_index == 0
        if constraints.latency_exceeded(point):
            return points, (f"stopped at {at}: p99 {point.p99_ms:.2f} ms is over the "
                            f"{constraints.max_p99_ms:g} ms limit"), best_index == 0
        if constraints.rejects_too_many(point):
            return points, (f"stopped at {at}: {point.reject_rate:.1%} of the requests were rejected, over the "
                            f"{constraints.reject_limit:.1%} allowed (--max-reject-rate)"), best_index == 0
        aim = _aim(point, objective, constraints)
        if best is None or aim[0] > best[0] or aim[1] > best[1] * (1.0 + rule.min_gain):
            best, best_index, stale = aim, len(points) - 1, 0
            continue
        stale += 1
        if stale >= rule.patience:
            what = "the objective" if aim[0] else "throughput"
            return points, (f"stopped at {at}: {what} grew less than "
                            f"{rule.min_gain:.0%} over {rule.patience} point{'s' * (rule.patience > 1)}"), best_index == 0
    if not points:
        return points, "no load level to measure", False
    last = points[-1]
    return points, (f"measured every concurrency up to {last.concurrency}" if last.load == "concurrency" else
                    f"measured every request rate up to {last.request_rate:g} req/s" if last.load == "request_rate"
                    else "measured the trace"), best_index == 0


def _descend(levels, measure, objective, constraints, rule, top: Point) -> list[Point]:
    """Walk down from a warm start (``levels`` highest first): past levels over the p99 or reject limit,
    then on while each level meeting the constraints is within ``min_gain`` of the best of them; stop
    at the first that loses (or misses the constraints otherwise: less load only serves less)."""
    points: list[Point] = []
    best = objective.value(top) if constraints.meets(top) else None
    for level in levels:
        point = measure(level)
        points.append(point)
        if not point.ok:
            break
        if _over(point, constraints):
            continue
        if not constraints.meets(point):
            break
        value = objective.value(point)
        if best is not None and value < best * (1.0 - rule.min_gain):
            break
        best = value if best is None else max(best, value)
    return points


def _over(point: Point, constraints: Constraints) -> bool:
    return constraints.latency_exceeded(point) or constraints.rejects_too_many(point)
