"""Per model-version statistics, accounted as Triton does (serving_protocol.md B.10) and
reported in Triton's JSON shape (A.10)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Duration:
    count: int = 0
    ns: int = 0
    # called with (ns, count) on each add: a listener (the metrics' latency summaries) sees every observation
    listeners: list[Callable[[int, int], None]] = field(default_factory=list, repr=False, compare=False)

    def add(self, ns: int, count: int = 1) -> None:
        self.count += count
        self.ns += ns
        for listener in self.listeners:
            listener(ns, count)

    def to_json(self) -> dict:
        return {"count": self.count, "ns": self.ns}


PHASES = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output", "cache_hit", "cache_miss")


@dataclass
class ModelStats:
    name: str
    version: str
    inference_count: int = 0
    execution_count: int = 0
    last_inference_ms: int = 0
    phases: dict[str, Duration] = field(default_factory=lambda: {p: Duration() for p in PHASES})
    # batch size -> (compute_input, compute_infer, compute_output)
    batches: dict[int, tuple[Duration, Duration, Duration]] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)  # reason -> count (REJECTED, CANCELED, BACKEND, OTHER)
    pending: int = 0  # requests queued, not yet executing
    # Requests handed to the model although their client had gone or their queue timeout (REJECT)
    # had passed: the schedulers drop such requests, so this stays 0 unless one fails to.
    stale_executions: int = 0
    cache_enabled: bool = False  # the config enables the response cache (its metrics exist, as in Triton)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record_execution(self, batch_requests: int, batch_size: int, input_ns: int, infer_ns: int,
                         output_ns: int) -> None:
        with self._lock:
            self.execution_count += 1
            self.last_inference_ms = int(time.time() * 1000)
            for phase, ns in (("compute_input", input_ns), ("compute_infer", infer_ns), ("compute_output", output_ns)):
                self.phases[phase].add(ns * batch_requests, batch_requests)
            per_size = self.batches.setdefault(batch_size, (Duration(), Duration(), Duration()))
            for duration, ns in zip(per_size, (input_ns, infer_ns, output_ns)):
                duration.add(ns)

    def record_stale_executions(self, count: int) -> None:
        with self._lock:
            self.stale_executions += count

    def record_success(self, request_ns: int, queue_ns: int, batch_size: int) -> None:
        """A request answered successfully. As in Triton, ``inference_count`` sums the batch sizes
        of such requests only: rows of failed requests and of idle sequence slots' fillers run
        in an execution (``record_execution``) without counting."""
        with self._lock:
            self.inference_count += batch_size
            self.phases["success"].add(request_ns)
            self.phases["queue"].add(queue_ns)

    def record_failure(self, request_ns: int, reason: str) -> None:
        with self._lock:
            self.phases["fail"].add(request_ns)
            self.failures[reason] = self.failures.get(reason, 0) + 1

    def record_cache_hit(self, request_ns: int, queue_ns: int, lookup_ns: int) -> None:
        """A response cache hit: a success with its (short) queue time, no execution (B.7)."""
        with self._lock:
            self.phases["success"].add(request_ns)
            self.phases["queue"].add(queue_ns)
            self.phases["cache_hit"].add(lookup_ns)

    def record_cache_miss(self, lookup_and_insert_ns: int) -> None:
        """A miss whose response was stored: its lookup and insert time also lengthen the
        request's duration, as in Triton (the success itself was recorded by the execution)."""
        with self._lock:
            self.phases["success"].ns += lookup_and_insert_ns
            self.phases["cache_miss"].add(lookup_and_insert_ns)

    def add_pending(self, delta: int) -> None:
        with self._lock:
            self.pending += delta

    def to_json(self) -> dict:
        with self._lock:
            return {
                "name": self.name,
                "version": self.version,
                "last_inference": self.last_inference_ms,
                "inference_count": self.inference_count,
                "execution_count": self.execution_count,
                "inference_stats": {p: d.to_json() for p, d in self.phases.items()},
                "response_stats": {},
                "batch_stats": [
                    {"batch_size": size, "compute_input": i.to_json(), "compute_infer": n.to_json(),
                     "compute_output": o.to_json()}
                    for size, (i, n, o) in sorted(self.batches.items())
                ],
                "memory_usage": [],
            }
