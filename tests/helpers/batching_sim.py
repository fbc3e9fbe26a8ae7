"""A simulated batching server for the search tests: throughput and p99 of a config at a
concurrency from a small queueing model, with seeded multiplicative noise.

A batch of n rows takes ``t0 + t1 * n`` ms; every extra instance slows each one down by
``contention`` (they share the cores); the batcher fills batches up to max_batch_size from the
requests in flight, better with a longer queue delay, which adds latency while a batch is not
full; the front end caps throughput at ``4 / overhead``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from tritonctl.analyzer.objective import ConfigResult, Constraints, Objective, best_point
from tritonctl.analyzer.point import Point
from tritonctl.analyzer.search import Candidate, Knobs
from tritonctl.analyzer.sweep import sweep


@dataclass(frozen=True)
class SimulatedServer:
    t0_ms: float
    t1_ms: float
    contention: float
    overhead_ms: float
    noise: float = 0.02
    seed: int = 0

    def measure(self, knobs: Knobs, concurrency: int, repeat: int = 0) -> tuple[float, float]:
        """(throughput infer/s, p99 ms); each ``repeat`` of a measurement draws its own noise."""
        size, count, delay = max(knobs.max_batch_size, 1), knobs.instance_count, knobs.max_queue_delay_us
        per_instance = concurrency / count
        fill = min(1.0, 0.5 + 0.5 * min(1.0, delay / 1000.0) + (0.2 if knobs.preferred_batch_size else 0.0))
        batch = max(1.0, min(size, per_instance * fill)) if knobs.dynamic_batching else 1.0
        run_ms = (self.t0_ms + self.t1_ms * batch) * (1 + self.contention * (count - 1))
        waiting = delay / 1000.0 * max(0.0, 1.0 - per_instance / size) if knobs.dynamic_batching and size > 1 else 0.0
        throughput = min(count * batch / run_ms * 1000.0,
                         concurrency / (self.overhead_ms + run_ms + waiting) * 1000.0,
                         4000.0 / self.overhead_ms)
        p99 = concurrency / throughput * 1000.0 * (1.4 + 0.08 * math.log2(concurrency)) + waiting
        rng = random.Random(f"{self.seed}-{knobs}-{concurrency}-{repeat}")
        return throughput * math.exp(rng.gauss(0, self.noise)), p99 * math.exp(rng.gauss(0, self.noise))

    def point(self, candidate: Candidate, concurrency: int, stage: str, repeat: int = 0) -> Point:
        """A measured point; its windows' spread is the noise level (as perf's stability windows show it)."""
        throughput, p99 = self.measure(candidate.knobs, concurrency, repeat)
        return Point(candidate.config_id, candidate.config_hash, candidate.knobs, candidate.is_default, concurrency,
                     stage, throughput=throughput, p50_ms=p99 / 2, p90_ms=p99 * 0.8, p95_ms=p99 * 0.9, p99_ms=p99,
                     avg_ms=p99 / 2, stable=True, throughput_spread=self.noise, p99_spread=self.noise,
                     repeat=repeat)

    def sampler(self, measured: list | None = None):
        """A ``Sample`` for the strategies: one more measurement of a point."""

        def sample(candidate: Candidate, concurrency: int, repeat: int, stage: str) -> Point:
            if measured is not None:
                measured.append((candidate.config_id, concurrency))
            return self.point(candidate, concurrency, stage, repeat)

        return sample

    def evaluator(self, levels: tuple[int, ...], objective: Objective, constraints: Constraints,
                  measured: list | None = None):
        """An ``Evaluate`` for the strategies: the real sweep over simulated points."""

        def evaluate(candidate: Candidate, stage: str, near: float | None = None) -> ConfigResult:
            def measure(concurrency: int) -> Point:
                if measured is not None:
                    measured.append((candidate.config_id, concurrency))
                return self.point(candidate, concurrency, stage)

            points, reason = sweep(levels, measure, objective, constraints, near=near)
            return ConfigResult(candidate.config_id, candidate.knobs, candidate.is_default, points,
                                best_point(points, objective, constraints), reason)

        return evaluate
