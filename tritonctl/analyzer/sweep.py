"""The load sweep of one candidate config, with Model Analyzer's early stop.

Load levels (concurrency values or request rates) are measured in increasing order. The sweep stops
at the first point whose p99 is over ``--max-p99-ms`` (more load only adds latency) or that rejects
more requests than ``--max-reject-rate`` allows (more load only rejects more), or once the sweep's aim has not grown by
more than ``min_gain`` for ``patience`` points: the aim is the objective of points meeting the
constraints, or, until one does, throughput (to reach ``--min-throughput``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from tritonctl.analyzer.objective import Constraints, Objective
from tritonctl.analyzer.point import Point

MIN_GAIN = 0.05  # Model Analyzer's THROUGHPUT_MINIMUM_GAIN


@dataclass(frozen=True)
class SweepRule:
    min_gain: float = MIN_GAIN
    patience: int = 2  # points in a row without gain before stopping (one noisy window must not end a sweep)


def sweep(levels: tuple[float, ...], measure: Callable[[float], Point], objective: Objective,
          constraints: Constraints, rule: SweepRule = SweepRule()) -> tuple[list[Point], str]:
    """Measure ``levels`` in order until the early stop; returns the points and why it stopped."""
    points: list[Point] = []
    best: tuple[int, float] | None = None
    stale = 0
    for level in levels:
        point = measure(level)
        points.append(point)
        at = point.load_words()
        if not point.ok:
            return points, f"stopped at {at}: {point.error}"
        if constraints.latency_exceeded(point):
            return points, (f"stopped at {at}: p99 {point.p99_ms:.2f} ms is over the "
                            f"{constraints.max_p99_ms:g} ms limit")
        if constraints.rejects_too_many(point):
            return points, (f"stopped at {at}: {point.reject_rate:.1%} of the requests were rejected, over the "
                            f"{constraints.reject_limit:.1%} allowed (--max-reject-rate)")
        aim = (1, objective.value(point)) if constraints.meets(point) else (0, point.throughput)
        if best is None or aim[0] > best[0] or aim[1] > best[1] * (1.0 + rule.min_gain):
            best, stale = aim, 0
            continue
        stale += 1
        if stale >= rule.patience:
            what = "the objective" if aim[0] else "throughput"
            return points, (f"stopped at {at}: {what} grew less than "
                            f"{rule.min_gain:.0%} over {rule.patience} point{'s' * (rule.patience > 1)}")
    if not points:
        return points, "no load level to measure"
    last = points[-1]
    return points, (f"measured every concurrency up to {last.concurrency}" if last.load == "concurrency" else
                    f"measured every request rate up to {last.request_rate:g} req/s" if last.load == "request_rate"
                    else "measured the trace")
