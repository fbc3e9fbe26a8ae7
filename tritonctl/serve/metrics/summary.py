"""Latency summaries as Triton publishes them (prometheus-cpp ``Summary``): a cumulative count and
sum, and quantiles over a sliding window of ``MAX_AGE_S`` seconds kept in ``AGE_BUCKETS`` parts."""

from __future__ import annotations

import math
import threading
import time
from array import array
from collections import deque

from tritonctl.serve.core.stats import ModelStats

MAX_AGE_S = 60.0
AGE_BUCKETS = 5
# Summary family -> (ModelStats phase, help text), in Triton's order and words.
SUMMARY_FAMILIES = {
    "nv_inference_request_summary_us": (
        "success", "Summary of inference request duration in microseconds (includes cached requests)"),
    "nv_inference_queue_summary_us": (
        "queue", "Summary of inference queuing duration in microseconds (includes cached requests)"),
    "nv_inference_compute_input_summary_us": (
        "compute_input", "Cumulative compute input duration in microseconds (does not include cached requests)"),
    "nv_inference_compute_infer_summary_us": (
        "compute_infer", "Cumulative compute inference duration in microseconds (does not include cached requests)"),
    "nv_inference_compute_output_summary_us": (
        "compute_output",
        "Cumulative inference compute output duration in microseconds (does not include cached requests)"),
}
# For models whose config enables the response cache, after the others.
CACHE_SUMMARY_FAMILIES = {
    "nv_cache_hit_summary_per_model": (
        "cache_hit", "Summary of cache hit counts/durations per model, in microseconds."),
    "nv_cache_miss_summary_per_model": (
        "cache_miss", "Summary of cache miss counts/durations per model, in microseconds."),
}
OBSERVED_PHASES = {"success": "success", "fail": "success", "queue": "queue", "compute_input": "compute_input",
                   "compute_infer": "compute_infer", "compute_output": "compute_output",
                   "cache_hit": "cache_hit", "cache_miss": "cache_miss"}


class SlidingSummary:
    """Observations in microseconds: count and sum since the start, quantiles over the last minute."""

    def __init__(self, quantiles: tuple[tuple[float, float], ...], clock=time.monotonic):
        self.quantiles = quantiles
        self.count = 0
        self.total = 0
        self._clock = clock
        self._windows: deque[tuple[float, array]] = deque()
        self._lock = threading.Lock()

    def observe(self, value_us: int, times: int = 1) -> None:
        with self._lock:
            self.count += times
            self.total += value_us * times
            self._current_window().extend([value_us] * times)

    def _current_window(self) -> array:
        now = self._clock()
        width = MAX_AGE_S / AGE_BUCKETS
        if not self._windows or now - self._windows[-1][0] >= width:
            self._windows.append((now, array("q")))
        while now - self._windows[0][0] >= MAX_AGE_S:
            self._windows.popleft()
        return self._windows[-1][1]

    def snapshot(self) -> tuple[int, int, list[tuple[float, float]]]:
        """(count, sum, [(quantile, value)]): NaN for a quantile with nothing observed in the window."""
        with self._lock:
            now = self._clock()
            values = sorted(v for start, window in self._windows if now - start < MAX_AGE_S for v in window)
            return self.count, self.total, [(q, self._rank_value(values, q)) for q, _ in self.quantiles]

    def _rank_value(self, values: list[int], quantile: float) -> float:
        """The value prometheus-cpp's CKMS estimator answers when it holds every observation."""
        if not values:
            return math.nan
        desired = int(quantile * len(values))
        bound = desired + self._allowable_error(desired, len(values)) / 2
        position = min(len(values), max(1, math.floor(bound)))
        return float(values[position - 1])

    def _allowable_error(self, rank: int, size: int) -> float:
        errors = [2 * error * (size - rank) / (1 - q) if rank <= q * size else 2 * error * rank / q
                  for q, error in self.quantiles if 0 < q < 1]
        return min([size + 1.0, *errors])


class LatencySummaries:
    """The summaries of each model version, fed by its ModelStats once attached (each phase's
    Duration calls them: they go with the version when it is unloaded)."""

    def __init__(self, quantiles: tuple[tuple[float, float], ...]):
        self.quantiles = quantiles
        self._lock = threading.Lock()

    def attach(self, stats: ModelStats) -> dict[str, SlidingSummary]:
        """The summaries of ``stats`` (by the phase they summarize), made and attached the first time."""
        with self._lock:
            attached = {o.target: o.summary for phase in OBSERVED_PHASES for o in stats.phases[phase].listeners
                        if isinstance(o, _Observer) and o.owner is self}
            if attached:
                return attached
            summaries = {target: SlidingSummary(self.quantiles) for target in set(OBSERVED_PHASES.values())}
            for phase, target in OBSERVED_PHASES.items():
                stats.phases[phase].listeners.append(_Observer(self, target, summaries[target]))
            return summaries


class _Observer:
    """A Duration listener observing each request's mean share of a recorded duration, in us."""

    def __init__(self, owner: LatencySummaries, target: str, summary: SlidingSummary):
        self.owner, self.target, self.summary = owner, target, summary

    def __call__(self, ns: int, count: int) -> None:
        if count > 0:
            self.summary.observe(ns // count // 1000, count)
