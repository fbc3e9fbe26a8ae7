"""One measured point of ``tritonctl analyze``: a candidate config at one load level (a concurrency,
a request rate, or a replayed trace of request intervals)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from tritonctl.analyzer.pipeline_space import knobs_from_record
from tritonctl.analyzer.search import Candidate, Knobs

NAN = float("nan")


@dataclass
class Point:
    """The merged result of one perf level, or (``error`` set) why the candidate could not be measured."""

    config_id: str
    config_hash: str
    knobs: Knobs
    is_default: bool
    concurrency: int
    stage: str
    throughput: float = 0.0  # infer/s
    p50_ms: float = NAN
    p90_ms: float = NAN
    p95_ms: float = NAN
    p99_ms: float = NAN
    avg_ms: float = NAN
    avg_batch_size: float = NAN  # server-side inference_count / execution_count over the windows
    queue_us: float = NAN  # server-side averages per request
    compute_us: float = NAN
    stable: bool = False
    request_count: int = 0
    error_count: int = 0
    measured_s: float = 0.0  # wall time the measurement took
    error: str = ""
    # The relative half-range of throughput and p99 over the merged windows (measurement.relative_spread).
    throughput_spread: float = 0.0
    p99_spread: float = 0.0
    repeat: int = 0  # 0: the load sweep; 1, 2, ...: a re-measurement of the same point
    # The load: "concurrency" (``concurrency`` requests in flight), "request_rate" (``request_rate``
    # sends per second) or "request_intervals" (a replayed trace; ``request_rate`` is its mean rate).
    load: str = "concurrency"
    request_rate: float = 0.0
    # A pipeline's point: per step, its server-side time per pipeline request and its share of the latency.
    steps: dict | None = None
    hardware: str = ""  # the fingerprint id of the machine that measured it (analyzer.hardware); "" before them

    @property
    def level(self) -> float:
        """The load level: the concurrency, or the (mean) request rate; one sweep's points differ in it."""
        return self.concurrency if self.load == "concurrency" else self.request_rate

    @property
    def key(self) -> tuple[str, str, float, int, str]:
        """What identifies a measurement in the checkpoint: the same point on other hardware is another one."""
        return self.config_id, self.config_hash, self.level, self.repeat, self.hardware

    @property
    def ok(self) -> bool:
        return not self.error

    @property
    def reject_rate(self) -> float:
        """The share of the requests sent in the measured windows that were rejected or failed (a full
        queue, a queue timeout): throughput and latencies count only the requests that were served."""
        sent = self.request_count + self.error_count
        return self.error_count / sent if sent else 0.0

    def load_words(self) -> str:
        """``concurrency 4``, ``50 req/s`` or ``the trace (mean 37.5 req/s)``."""
        if self.load == "request_rate":
            return f"{self.request_rate:g} req/s"
        if self.load == "request_intervals":
            return f"the trace (mean {self.request_rate:.4g} req/s)"
        return f"concurrency {self.concurrency}"
    @classmethod
    def from_level(cls, candidate: Candidate, level, stage: str, measured_s: float, repeat: int = 0,
                   load: str = "concurrency", request_rate: float = 0.0) -> "Point":
        """From perf's ``LevelResult``; latencies in ms, server numbers NaN when the server gave none."""
        server = level.server
        batch = server.inference_count / server.execution_count if server and server.execution_count else NAN
        p = level.percentiles_us
        return cls(
            candidate.config_id, candidate.config_hash, candidate.knobs, candidate.is_default, level.concurrency or 0,
            stage, throughput=level.throughput, p50_ms=p[50] / 1e3, p90_ms=p[90] / 1e3, p95_ms=p[95] / 1e3,
            p99_ms=p[99] / 1e3, avg_ms=level.avg_latency_us / 1e3, avg_batch_size=batch,
            queue_us=level.server_queue_us if server else NAN, compute_us=level.server_compute_us if server else NAN,
            stable=level.stable, request_count=level.request_count, error_count=level.error_count,
            measured_s=measured_s, throughput_spread=level.throughput_spread, p99_spread=level.p99_spread,
            repeat=repeat, load=load, request_rate=request_rate,
        )

    @classmethod
    def failure(cls, candidate: Candidate, level: float, stage: str, error: str, repeat: int = 0,
                load: str = "concurrency") -> "Point":
        concurrency, rate = (int(level), 0.0) if load == "concurrency" else (0, float(level))
        return cls(candidate.config_id, candidate.config_hash, candidate.knobs, candidate.is_default, concurrency,
                   stage, error=error, repeat=repeat, load=load, request_rate=rate)

    def to_record(self) -> dict:
        """A JSON-ready dict (NaN as null) for the checkpoint."""
        record = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "knobs"}
        record["knobs"] = asdict(self.knobs)
        if self.steps is None:
            del record["steps"]
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in record.items()}

    @classmethod
    def from_record(cls, record: dict) -> "Point":
        values = dict(record)
        values["knobs"] = knobs_from_record(values["knobs"])
        for f in fields(cls):
            if f.type == "float" and f.name in values and values[f.name] is None:
                values[f.name] = NAN
        return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})

    def describe(self) -> str:
        if self.error:
            return f"{self.load_words()}: {self.error}"
        rejected = f", {self.reject_rate:.1%} rejected" if self.error_count else ""
        return f"{self.throughput:,.1f} infer/s, p99 {self.p99_ms:.2f} ms{rejected} at {self.load_words()}"
