"""Measurement windows: latency percentiles, throughput, perf_analyzer's stability rule and merging."""

from __future__ import annotations

from dataclasses import dataclass, field

STABILITY_WINDOWS = 3
PERCENTILES = (50, 90, 95, 99)


@dataclass(frozen=True)
class Responses:
    """When each response of a streamed request arrived (perf_counter ns). The last one may be the
    empty response that only carries the final flag (``empty_final``), which is not counted."""

    times_ns: tuple[int, ...]
    empty_final: bool = False

    @property
    def count(self) -> int:
        return len(self.times_ns) - self.empty_final

    @property
    def last_ns(self) -> int:
        """The last response with outputs, as perf_analyzer ends a request's latency; the final flag
        alone when no response had outputs."""
        return self.times_ns[self.count - 1] if self.count else self.times_ns[-1]


@dataclass
class ResponseStats:
    """The responses of streamed requests (--streaming), summed over a window's completed requests."""

    requests: int = 0
    responses: int = 0
    answered: int = 0  # requests with at least one response
    first_ns: int = 0  # sum of those requests' times to their first response
    gaps: int = 0
    gaps_ns: int = 0  # sum of the gaps between successive responses of a request

    def add(self, start_ns: int, responses: Responses) -> None:
        times = responses.times_ns[:responses.count]
        self.requests += 1
        self.responses += len(times)
        if times:
            self.answered += 1
            self.first_ns += times[0] - start_ns
            self.gaps += len(times) - 1
            self.gaps_ns += times[-1] - times[0]

    def __add__(self, other: "ResponseStats") -> "ResponseStats":
        return ResponseStats(**{k: getattr(self, k) + getattr(other, k) for k in self.__dataclass_fields__})

    def as_dict(self) -> dict:
        """Per request: responses, the time to the first one and between two (µs)."""
        return {
            "response_count": self.responses,
            "responses_per_request": round(self.responses / self.requests, 3) if self.requests else 0.0,
            "avg_first_response_us": round(self.first_ns / self.answered / 1e3, 1) if self.answered else 0.0,
            "avg_inter_response_us": round(self.gaps_ns / self.gaps / 1e3, 1) if self.gaps else 0.0,
        }


@dataclass
class Window:
    """One measurement window: the requests that completed in it and the server statistics delta."""

    start_ns: int
    end_ns: int
    latencies_ns: list[int] = field(default_factory=list)
    errors: int = 0
    delayed: int = 0  # request-rate mode: sends that left later than scheduled
    client_cpu_s: float = 0.0
    server: "ServerStats | None" = None
    responses: ResponseStats | None = None  # streamed requests only

    @classmethod
    def of(cls, start_ns: int, end_ns: int, done: list, delayed: int, client_cpu_s: float,
           server: "ServerStats | None", streamed: bool = False) -> "Window":
        """The window of the requests ``done`` (the load generator's completions) between two edges;
        ``streamed``: with their responses counted."""
        ok = [c for c in done if c.ok]
        responses = ResponseStats() if streamed else None
        for c in ok:
            if responses is not None and c.responses is not None:
                responses.add(c.end_ns - c.latency_ns, c.responses)
        return cls(start_ns, end_ns, [c.latency_ns for c in ok], len(done) - len(ok), delayed, client_cpu_s,
                   server, responses)

    @property
    def duration_s(self) -> float:
        return max(self.end_ns - self.start_ns, 1) / 1e9

    @property
    def count(self) -> int:
        return len(self.latencies_ns)

    @property
    def throughput(self) -> float:
        return self.count / self.duration_s

    def latency_us(self, percentile: int | None = None) -> float:
        """Average latency, or the given percentile (nearest rank, as perf_analyzer picks it), in µs."""
        if not self.latencies_ns:
            return 0.0
        if percentile is None:
            return sum(self.latencies_ns) / len(self.latencies_ns) / 1e3
        return percentile_ns(sorted(self.latencies_ns), percentile) / 1e3


@dataclass
class ServerStats:
    """Cumulative (or delta) counters from the statistics endpoint for one model."""

    success_count: int = 0
    success_ns: int = 0
    queue_ns: int = 0
    compute_input_ns: int = 0
    compute_infer_ns: int = 0
    compute_output_ns: int = 0
    inference_count: int = 0
    execution_count: int = 0

    def __sub__(self, other: "ServerStats") -> "ServerStats":
        return ServerStats(**{k: getattr(self, k) - getattr(other, k) for k in self.__dataclass_fields__})

    def __add__(self, other: "ServerStats") -> "ServerStats":
        return ServerStats(**{k: getattr(self, k) + getattr(other, k) for k in self.__dataclass_fields__})

    def per_request_us(self, value_ns: int) -> float:
        return value_ns / self.success_count / 1e3 if self.success_count else 0.0


def percentile_ns(sorted_values: list[int], percentile: float) -> int:
    """Nearest rank: index round(P/100 * (n-1)) of the sorted values."""
    if not sorted_values:
        return 0
    index = int(round(percentile / 100 * (len(sorted_values) - 1)))
    return sorted_values[min(max(index, 0), len(sorted_values) - 1)]


def is_stable(windows: list[Window], stability_percentage: float, latency_percentile: int | None = None,
              check_latency: bool = True) -> bool:
    """perf_analyzer's rule: over the last 3 windows throughput and latency vary by at most ``s`` percent
    (max/min <= 1 + s/100) and no window has zero throughput. Without ``check_latency`` (perf_analyzer's
    asynchronous mode) only the throughput has to agree."""
    return series_stable([w.throughput for w in windows],
                         [w.latency_us(latency_percentile) for w in windows] if check_latency else None,
                         stability_percentage)


def series_stable(throughputs: list[float], latencies: list[float] | None, stability_percentage: float) -> bool:
    """The stability rule on plain series (the last 3 values of each); ``latencies`` None: throughput only."""
    bound = 1 + stability_percentage / 100
    for series in (throughputs, latencies):
        if series is None:
            continue
        last = series[-STABILITY_WINDOWS:]
        if len(last) < STABILITY_WINDOWS or min(last) <= 0 or max(last) / min(last) > bound:
            return False
    return True


@dataclass
class LevelResult:
    """The merged result of one load level (a concurrency value or a request rate)."""

    concurrency: int | None
    request_rate: float | None
    stable: bool
    windows: int
    request_count: int
    error_count: int
    delayed_count: int
    duration_s: float
    throughput: float
    avg_latency_us: float
    percentiles_us: dict[int, float]
    client_cpu_pct: float
    server: ServerStats | None
    # How much the merged windows disagree, as a relative half-range ((max - min) / (max + min)):
    # a repeat of the measurement is expected within about this much of the merged value.
    throughput_spread: float = 0.0
    p99_spread: float = 0.0
    responses: ResponseStats | None = None  # streamed requests only

    @property
    def response_throughput(self) -> float:
        """Responses per second (perf_analyzer's response throughput of a decoupled model); 0 unless streamed."""
        return self.responses.responses / self.duration_s if self.responses and self.duration_s else 0.0

    @property
    def server_queue_us(self) -> float:
        return self.server.per_request_us(self.server.queue_ns) if self.server else 0.0

    @property
    def server_compute_us(self) -> float:
        if not self.server:
            return 0.0
        s = self.server
        return s.per_request_us(s.compute_input_ns + s.compute_infer_ns + s.compute_output_ns)

    def as_dict(self) -> dict:
        row = {
            "concurrency": self.concurrency, "request_rate": self.request_rate, "stable": self.stable,
            "windows": self.windows, "request_count": self.request_count, "error_count": self.error_count,
            "delayed_count": self.delayed_count, "throughput_infer_per_s": round(self.throughput, 3),
            "avg_latency_us": round(self.avg_latency_us, 1),
        }
        row.update({f"p{p}_latency_us": round(v, 1) for p, v in self.percentiles_us.items()})
        row["client_cpu_pct"] = round(self.client_cpu_pct, 1)
        row["server_request_count"] = self.server.success_count if self.server else None
        row["server_queue_us"] = round(self.server_queue_us, 1) if self.server else None
        row["server_compute_us"] = round(self.server_compute_us, 1) if self.server else None
        if self.server:
            s = self.server
            row["server_compute_input_us"] = round(s.per_request_us(s.compute_input_ns), 1)
            row["server_compute_infer_us"] = round(s.per_request_us(s.compute_infer_ns), 1)
            row["server_compute_output_us"] = round(s.per_request_us(s.compute_output_ns), 1)
        if self.responses is not None:
            row["response_throughput_per_s"] = round(self.response_throughput, 3)
            row.update(self.responses.as_dict())
        return row


def merge_windows(windows: list[Window], batch_size: int, concurrency: int | None, request_rate: float | None,
                  stable: bool, total_windows: int, extra_percentile: int | None = None) -> LevelResult:
    """Merge windows into one result: percentiles over all their requests (p50/90/95/99 and
    ``extra_percentile``), throughput over their time."""
    latencies = sorted(lat for w in windows for lat in w.latencies_ns)
    duration = sum(w.duration_s for w in windows)
    server = _total([w.server for w in windows], ServerStats)
    return LevelResult(
        concurrency=concurrency, request_rate=request_rate, stable=stable, windows=total_windows,
        request_count=len(latencies), error_count=sum(w.errors for w in windows),
        delayed_count=sum(w.delayed for w in windows), duration_s=duration,
        throughput=len(latencies) * batch_size / duration if duration else 0.0,
        avg_latency_us=sum(latencies) / len(latencies) / 1e3 if latencies else 0.0,
        percentiles_us={p: percentile_ns(latencies, p) / 1e3
                        for p in sorted(set(PERCENTILES) | ({extra_percentile} if extra_percentile else set()))},
        client_cpu_pct=100 * sum(w.client_cpu_s for w in windows) / duration if duration else 0.0,
        server=server,
        throughput_spread=relative_spread([w.throughput for w in windows]),
        p99_spread=relative_spread([w.latency_us(99) for w in windows]),
        responses=_total([w.responses for w in windows], ResponseStats),
    )


def _total(parts: list, kind: type):
    """The sum of the windows' parts, or None when a window has none."""
    if not parts or any(part is None for part in parts):
        return None
    total = kind()
    for part in parts:
        total = total + part
    return total


def relative_spread(values: list[float]) -> float:
    """(max - min) / (max + min): the half-width of the values' range relative to its middle; 0 for
    fewer than two values."""
    if len(values) < 2 or max(values) <= 0:
        return 0.0
    return (max(values) - min(values)) / (max(values) + min(values))
