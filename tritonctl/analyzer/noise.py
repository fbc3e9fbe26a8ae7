"""How sure a comparison of two configs is: an estimate of each, with a band for noise.

One measurement of a config at one concurrency gives an objective value and a band around it: the
relative half-range of its stability windows (throughput and p99 weighted as the objective weighs
them), at least ``MIN_SPREAD``. Several measurements of the same point give their median, and a
band that narrows as repeats agree: the larger of the windows' band and two standard errors of the
repeats (both divided by the square root of their number), at least ``MIN_SPREAD``.

One config beats another only when its gain exceeds the two bands together ("beyond noise"). Two
configs are equivalent only when the difference and both bands together stay within
``EQUIVALENCE`` (5 %): then the cheaper config wins, that is fewer instances, then a smaller max
batch size, then a shorter queue delay, then a smaller (or no) preferred batch size. Between the
two lies "undecided": the measurements can tell neither a winner nor an equivalence, and more
of them are needed (or, when there is no time left, the better median is taken, and said to be
within noise).

Measured head to head in rounds (``paired``), two configs are compared round by round: the
margin is the median of the per-round ratios, and it is beyond noise when it exceeds two standard
errors of those ratios, so that a load that slows a whole round down cancels out.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

from tritonctl.analyzer.objective import Constraints, Objective
from tritonctl.analyzer.point import Point
from tritonctl.analyzer.search import Knobs

MIN_SPREAD = 0.015  # a band is at least +-1.5 %: two measurements within 3 % are never told apart
EQUIVALENCE = 0.05  # configs whose difference, bands included, stays within 5 % are equivalent


@dataclass
class Estimate:
    """What the measurements of one config at one concurrency say, and how sure they are."""

    config_id: str
    knobs: Knobs
    samples: list[Point]  # the measurements that worked
    point: Point | None  # their median throughput, latencies and batch size; None if none worked
    tier: int  # 2: meets the constraints, 1: misses them, 0: nothing measured
    value: float  # tier 2: the objective; tier 1: closeness to the constraints (1 / (1 + violation))
    spread: float  # the band: relative half-width around value

    @property
    def score(self) -> tuple[int, float]:
        return self.tier, self.value

    def describe(self) -> str:
        if self.point is None:
            return "nothing measured"
        times = f", median of {len(self.samples)}" if len(self.samples) > 1 else ""
        return f"{self.point.describe()}, +-{self.spread:.1%}{times}"


def point_spread(point: Point, objective: Objective) -> float:
    """The band of one measurement's objective: its windows' spread, weighted as the objective is."""
    w = objective.throughput_weight
    return max(MIN_SPREAD, w * point.throughput_spread + (1.0 - w) * point.p99_spread)


def estimate(config_id: str, knobs: Knobs, samples: list[Point], objective: Objective,
             constraints: Constraints) -> Estimate:
    """The estimate from measurements of one point (failed ones are left out)."""
    ok = [p for p in samples if p.ok]
    if not ok:
        return Estimate(config_id, knobs, [], None, 0, 0.0, 0.0)
    middle = sorted(ok, key=objective.value)[(len(ok) - 1) // 2]
    point = replace(middle, throughput=statistics.median(p.throughput for p in ok),
                    p50_ms=statistics.median(p.p50_ms for p in ok), p99_ms=statistics.median(p.p99_ms for p in ok))
    spread = statistics.median(point_spread(p, objective) for p in ok)
    if constraints.meets(point):
        tier, value = 2, objective.value(point)
        values = [objective.value(p) for p in ok]
    else:
        tier, value = 1, 1.0 / (1.0 + constraints.violation(point))
        values = [1.0 / (1.0 + constraints.violation(p)) for p in ok]
    if len(values) > 1 and value > 0:
        root = math.sqrt(len(values))
        spread = max(MIN_SPREAD, spread / root, 2.0 * statistics.stdev(values) / statistics.fmean(values) / root)
    return Estimate(config_id, knobs, ok, point, tier, value, spread)


def beats(a: Estimate, b: Estimate) -> bool:
    """Whether ``a`` is better than ``b`` beyond noise: meeting the constraints beats missing them;
    otherwise the gain must exceed both bands together."""
    if a.tier != b.tier:
        return a.tier > b.tier
    return a.tier > 0 and a.value > b.value * (1.0 + a.spread + b.spread)


def equivalent(a: Estimate, b: Estimate) -> bool:
    """Whether ``a`` and ``b`` are the same within EQUIVALENCE, their bands included."""
    return (a.tier == b.tier == 2 and a.value > 0 and b.value > 0
            and abs(math.log(a.value / b.value)) + a.spread + b.spread <= EQUIVALENCE)


def cost(knobs: Knobs) -> tuple[int, int, int, int]:
    """What a config costs, for choosing between equivalent ones (lower is cheaper)."""
    return knobs.resources


def margin(a: Estimate, b: Estimate) -> float:
    """How much better ``a`` is than ``b``, as a fraction (negative when it is worse)."""
    return a.value / b.value - 1.0 if b.value > 0 else float("inf")


@dataclass
class Paired:
    """Two configs measured head to head in the same rounds: a over b."""

    ratio: float  # the median of the per-round ratios of the objective
    band: float  # how far the margin (ratio - 1) must be from 0 to count: two standard errors of the log ratios
    rounds: int

    @property
    def margin(self) -> float:
        return self.ratio - 1.0

    @property
    def beyond_noise(self) -> bool:
        return self.rounds > 0 and abs(math.log(self.ratio)) > self.band

    @property
    def equivalent(self) -> bool:
        return self.rounds > 0 and abs(math.log(self.ratio)) + self.band <= EQUIVALENCE


def paired(a: list[Point], b: list[Point], objective: Objective) -> Paired:
    """Round k of ``a`` against round k of ``b`` (rounds in which either failed are left out); it takes
    two rounds at least to say anything."""
    logs = [math.log(objective.value(x) / objective.value(y)) for x, y in zip(a, b)
            if x.ok and y.ok and objective.value(x) > 0 and objective.value(y) > 0]
    if len(logs) < 2:  # one pair says nothing about how much the pairs vary
        return Paired(math.exp(logs[0]) if logs else 1.0, float("inf"), len(logs))
    band = max(2.0 * MIN_SPREAD, 2.0 * statistics.stdev(logs) / math.sqrt(len(logs)))
    return Paired(math.exp(statistics.median(logs)), band, len(logs))
