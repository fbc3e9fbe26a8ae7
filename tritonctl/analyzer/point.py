"""One measured point of ``tritonctl analyze``: a candidate config at one concurrency."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

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
    repeat: int = 0  # 0: the concurrency sweep; 1, 2, ...: a re-measurement of the same point

    @property
    def key(self) -> tuple[str, str, int, int]:
        """What identifies a measurement in the checkpoint."""
        return self.config_id, self.config_hash, self.concurrency, self.repeat

    @property
    def ok(self) -> bool:
        return not self.error

    @classmethod
    def from_level(cls, candidate: Candidate, level, stage: str, measured_s: float, repeat: int = 0) -> "Point":
        """From perf's ``LevelResult``; latencies in ms, server numbers NaN when the server gave none."""
        server = level.server
        batch = server.inference_count / server.execution_count if server and server.execution_count else NAN
        p = level.percentiles_us
        return cls(
            candidate.config_id, candidate.config_hash, candidate.knobs, candidate.is_default, level.concurrency,
            stage, throughput=level.throughput, p50_ms=p[50] / 1e3, p90_ms=p[90] / 1e3, p95_ms=p[95] / 1e3,
            p99_ms=p[99] / 1e3, avg_ms=level.avg_latency_us / 1e3, avg_batch_size=batch,
            queue_us=level.server_queue_us if server else NAN, compute_us=level.server_compute_us if server else NAN,
            stable=level.stable, request_count=level.request_count, error_count=level.error_count,
            measured_s=measured_s, throughput_spread=level.throughput_spread, p99_spread=level.p99_spread,
            repeat=repeat,
        )

    @classmethod
    def failure(cls, candidate: Candidate, concurrency: int, stage: str, error: str, repeat: int = 0) -> "Point":
        return cls(candidate.config_id, candidate.config_hash, candidate.knobs, candidate.is_default, concurrency,
                   stage, error=error, repeat=repeat)

    def to_record(self) -> dict:
        """A JSON-ready dict (NaN as null) for the checkpoint."""
        record = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "knobs"}
        record["knobs"] = asdict(self.knobs)
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in record.items()}

    @classmethod
    def from_record(cls, record: dict) -> "Point":
        values = dict(record)
        values["knobs"] = Knobs(**values["knobs"])
        for f in fields(cls):
            if f.type == "float" and f.name in values and values[f.name] is None:
                values[f.name] = NAN
        return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})

    def describe(self) -> str:
        if self.error:
            return f"concurrency {self.concurrency}: {self.error}"
        return f"{self.throughput:,.1f} infer/s, p99 {self.p99_ms:.2f} ms at concurrency {self.concurrency}"
