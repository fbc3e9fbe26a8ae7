"""Objectives, constraints, and how the best config is chosen from measured points.

A config is judged by its best point: among its points that meet every constraint, the one with
the best objective, or, when several are within noise of that, the one with the lowest p99 (the
lowest concurrency that already reaches the config's throughput). The best config is chosen the
same way over the configs' best points, with near-ties going to lower latency and then to fewer
resources (instances, then max batch size, queue delay, preferred size).

Rejected requests (a full queue, a queue timeout, any failed request) are not served: throughput
and latencies count only the requests that were, and a point meets the constraints only when the
share of requests rejected is at most ``max_reject_rate`` (0 unless given). So a bounded queue that
keeps p99 under ``--max-p99-ms`` by turning requests away wins only where the user allows that
many rejections, and then by the throughput it actually served.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tritonctl.analyzer.point import Point
from tritonctl.analyzer.search import AnalyzeError, Knobs

NOISE = 0.03  # objectives closer than 3 % are a tie
LATENCY_NOISE = 0.10  # p99 values closer than 10 % are a tie (stable windows may differ by 10 %)


@dataclass(frozen=True)
class Objective:
    """``throughput ** w * (1000 / p99_ms) ** (1 - w)``: higher is better, ratios read as "x % better".

    w = 1 is throughput (infer/s), w = 0 is p99 latency (as 1000 / p99 ms), between is a weighted mix.
    """

    throughput_weight: float = 1.0

    @classmethod
    def parse(cls, text: str) -> "Objective":
        name, _, weight = text.strip().lower().partition(":")
        if name == "throughput" and not weight:
            return cls(1.0)
        if name in ("latency", "p99") and not weight:
            return cls(0.0)
        if name == "weighted":
            try:
                value = float(weight) if weight else 0.5
            except ValueError:
                value = -1.0
            if 0.0 <= value <= 1.0:
                return cls(value)
            raise AnalyzeError(f"--objective {text!r}: the weight of throughput must be between 0 and 1, "
                               "e.g. weighted:0.7")
        raise AnalyzeError(f"--objective {text!r}: use throughput, latency or weighted[:W] "
                           "(W = weight of throughput, 0..1)")

    @property
    def name(self) -> str:
        if self.throughput_weight == 1.0:
            return "throughput"
        if self.throughput_weight == 0.0:
            return "latency"
        return f"weighted:{self.throughput_weight:g}"

    def describe(self) -> str:
        if self.throughput_weight == 1.0:
            return "maximize throughput (infer/s)"
        if self.throughput_weight == 0.0:
            return "minimize p99 latency (objective = 1000 / p99 ms)"
        w = self.throughput_weight
        return f"maximize throughput^{w:g} x (1000 / p99 ms)^{1 - w:g}"

    def value(self, point: Point) -> float:
        if not point.ok or point.throughput <= 0 or not point.p99_ms > 0:
            return 0.0
        w = self.throughput_weight
        return point.throughput ** w * (1000.0 / point.p99_ms) ** (1.0 - w)


@dataclass(frozen=True)
class Constraints:
    max_p99_ms: float | None = None
    min_throughput: float | None = None
    max_reject_rate: float | None = None  # the share of requests that may be rejected; None: none may be

    def __post_init__(self) -> None:
        if self.max_reject_rate is not None and not 0.0 <= self.max_reject_rate < 1.0:
            raise AnalyzeError("--max-reject-rate must be a share of the requests from 0 up to (not including) 1, "
                               "e.g. 0.01 or 1%")
        if self.max_p99_ms is not None and not self.max_p99_ms > 0:
            raise AnalyzeError("--max-p99-ms must be a positive number of milliseconds")
        if self.min_throughput is not None and not self.min_throughput > 0:
            raise AnalyzeError("--min-throughput must be a positive number of inferences per second")

    def as_dict(self) -> dict[str, float]:
        values = {"max_p99_ms": self.max_p99_ms, "min_throughput": self.min_throughput,
                  "max_reject_rate": self.max_reject_rate}
        return {k: v for k, v in values.items() if v is not None}

    def describe(self) -> str:
        parts = []
        if self.max_p99_ms is not None:
            parts.append(f"p99 <= {self.max_p99_ms:g} ms")
        if self.min_throughput is not None:
            parts.append(f"throughput >= {self.min_throughput:g} infer/s")
        if self.max_reject_rate:
            parts.append(f"rejected <= {self.max_reject_rate:.2%}")
        return ", ".join(parts) or "none"

    @property
    def reject_limit(self) -> float:
        return self.max_reject_rate or 0.0

    def rejects_too_many(self, point: Point) -> bool:
        """More load only rejects more: a sweep can stop at the first point over the limit."""
        return point.ok and getattr(point, "reject_rate", 0.0) > self.reject_limit

    def latency_exceeded(self, point: Point) -> bool:
        """More load only raises latency: a sweep can stop at the first point over the limit."""
        return self.max_p99_ms is not None and point.ok and point.p99_ms > self.max_p99_ms

    def meets(self, point: Point) -> bool:
        return point.ok and self.violation(point) == 0.0

    def violation(self, point: Point) -> float:
        """How far a point is from meeting every constraint, as a fraction (0 when it meets them)."""
        if not point.ok:
            return float("inf")
        excess = 0.0
        if self.max_p99_ms is not None:
            excess = max(excess, point.p99_ms / self.max_p99_ms - 1.0)
        if self.min_throughput is not None:
            excess = max(excess, self.min_throughput / point.throughput - 1.0 if point.throughput > 0 else 1e9)
        excess = max(excess, getattr(point, "reject_rate", 0.0) - self.reject_limit)
        return max(excess, 0.0)


@dataclass
class ConfigResult:
    """One config's measured points and its best point."""

    config_id: str
    knobs: Knobs
    is_default: bool
    points: list[Point] = field(default_factory=list)
    best: Point | None = None  # the best point meeting every constraint, None if none does
    stop_reason: str = ""

    @property
    def failed(self) -> str:
        """The error that stopped the config before any point was measured, or ''."""
        ok = [p for p in self.points if p.ok]
        return "" if ok else next((p.error for p in self.points if p.error), "not measured")

    def score(self, objective: Objective, constraints: Constraints) -> tuple[int, float]:
        """Ordering for the search: passing configs by objective, then failing ones by closeness."""
        if self.best is not None:
            return 2, objective.value(self.best)
        ok = [p for p in self.points if p.ok]
        if not ok:
            return 0, 0.0
        return 1, 1.0 / (1.0 + min(constraints.violation(p) for p in ok))

    def describe(self, objective: Objective, constraints: Constraints) -> str:
        if self.best is not None:
            return self.best.describe()
        if self.failed:
            return f"failed: {self.failed}"
        ok = [p for p in self.points if p.ok]
        closest = min(ok, key=constraints.violation)
        return f"no point meets the constraints (closest: {closest.describe()})"


def best_point(points: list[Point], objective: Objective, constraints: Constraints,
               tolerance: float = NOISE) -> Point | None:
    """The point meeting the constraints with the best objective; within noise of it, the lowest p99."""
    passing = [p for p in points if constraints.meets(p)]
    if not passing:
        return None
    top = max(objective.value(p) for p in passing)
    near = [p for p in passing if objective.value(p) >= top * (1.0 - tolerance)]
    return min(near, key=lambda p: (p.p99_ms, p.level))


def summarize(points: list[Point], objective: Objective, constraints: Constraints) -> dict[str, ConfigResult]:
    """Points grouped by config, in the order configs were first measured, each with its best point."""
    results: dict[str, ConfigResult] = {}
    for point in points:
        result = results.setdefault(point.config_id, ConfigResult(point.config_id, point.knobs, point.is_default))
        result.points.append(point)
    for result in results.values():
        result.best = best_point(result.points, objective, constraints)
    return results


def choose_best(results: list[ConfigResult], objective: Objective, tolerance: float = NOISE) -> ConfigResult | None:
    """The config with the best objective among those meeting every constraint; near-ties go to the
    lower p99, then to fewer resources. None when no config meets the constraints."""
    passing = [r for r in results if r.best is not None]
    if not passing:
        return None
    top = max(objective.value(r.best) for r in passing)
    near = [r for r in passing if objective.value(r.best) >= top * (1.0 - tolerance)]
    lowest_p99 = min(r.best.p99_ms for r in near)
    near = [r for r in near if r.best.p99_ms <= lowest_p99 * (1.0 + LATENCY_NOISE)]
    return min(near, key=lambda r: (r.knobs.resources, -objective.value(r.best)))
