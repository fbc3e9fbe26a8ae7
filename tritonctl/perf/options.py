"""Options of a perf run and the parsers for their command-line spellings."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path


class PerfError(ValueError):
    """A problem the user can fix: a bad argument, an unknown model, a server that does not answer."""


@dataclass(frozen=True)
class PerfOptions:
    """Everything ``run_perf`` needs. Exactly one of ``concurrency`` / ``request_rates`` /
    ``request_intervals`` is non-empty."""

    model: str
    url: str = "localhost:8000"
    protocol: str = "http"  # "http" | "grpc"
    model_version: str = ""
    concurrency: tuple[int, ...] = (1,)
    request_rates: tuple[float, ...] = ()
    request_distribution: str = "constant"  # "constant" | "poisson"
    request_intervals: tuple[int, ...] = ()  # gaps between sends in µs, replayed in a loop (one level)
    batch_size: int = 1
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    input_data: str = "random"  # "random" | "zero" | path to a JSON file
    measurement_mode: str = "time_windows"  # "time_windows" | "count_windows"
    measurement_interval_ms: float = 5000.0
    measurement_request_count: int = 50
    stability_percentage: float = 10.0
    max_trials: int = 10
    latency_percentile: int | None = None  # stabilize on this percentile instead of the average
    warmup_requests: int = 0
    request_timeout_s: float = 60.0


def parse_concurrency_range(text: str) -> tuple[int, ...]:
    """``START[:END[:STEP]]`` (inclusive) -> the concurrency values."""
    values = _split_range(text, "--concurrency-range")
    try:
        start, end, step = (int(v) for v in values)
    except ValueError:
        raise PerfError(f"--concurrency-range {text!r}: values must be whole numbers (START:END:STEP)") from None
    if start < 1 or end < start or step < 1:
        raise PerfError(f"--concurrency-range {text!r}: needs 1 <= START <= END and STEP >= 1")
    return tuple(range(start, end + 1, step))


def parse_request_rate_range(text: str) -> tuple[float, ...]:
    """``START[:END[:STEP]]`` in requests per second (inclusive, floats)."""
    values = _split_range(text, "--request-rate-range")
    try:
        start, end, step = (float(v) for v in values)
    except ValueError:
        raise PerfError(f"--request-rate-range {text!r}: values must be numbers (START:END:STEP)") from None
    if not all(math.isfinite(v) for v in (start, end, step)) or start <= 0 or end < start or step <= 0:
        raise PerfError(f"--request-rate-range {text!r}: needs 0 < START <= END and STEP > 0")
    rates: list[float] = []
    rate = start
    while rate <= end * (1 + 1e-9) and len(rates) < 1000:
        rates.append(round(rate, 6))
        rate += step
    return tuple(rates)


def _split_range(text: str, flag: str) -> list[str]:
    parts = text.split(":")
    if not 1 <= len(parts) <= 3 or any(not p.strip() for p in parts):
        raise PerfError(f"{flag} {text!r}: expected START, START:END or START:END:STEP")
    if len(parts) == 1:
        parts = [parts[0], parts[0], "1"]
    elif len(parts) == 2:
        parts.append("1")
    return parts


def parse_shapes(specs: list[str]) -> dict[str, tuple[int, ...]]:
    """``NAME:D1,D2,...`` (without the batch dimension) -> {name: dims}."""
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        name, sep, dims_text = spec.rpartition(":")
        if not sep or not name or not dims_text:
            raise PerfError(f"--shape {spec!r}: expected NAME:DIMS, e.g. INPUT0:3,224,224")
        try:
            dims = tuple(int(d) for d in dims_text.split(","))
        except ValueError:
            raise PerfError(f"--shape {spec!r}: dimensions must be whole numbers separated by commas") from None
        if any(d < 0 for d in dims):
            raise PerfError(f"--shape {spec!r}: dimensions must not be negative")
        shapes[name] = dims
    return shapes


def check_options(options: PerfOptions) -> None:
    """Reject combinations that cannot produce a measurement, before any connection is made."""
    if options.protocol not in ("http", "grpc"):
        raise PerfError(f"-i {options.protocol!r}: the protocol is 'http' or 'grpc'")
    loads = sum(bool(v) for v in (options.concurrency, options.request_rates, options.request_intervals))
    if loads != 1:
        raise PerfError("give one kind of load: a concurrency range, a request-rate range or request intervals, "
                        + ("not both" if loads == 2 else "not all three" if loads == 3 else "none was given"))
    if options.request_intervals and (min(options.request_intervals) < 0 or not sum(options.request_intervals)):
        raise PerfError("request intervals must be whole microseconds >= 0 with a positive sum")
    if options.request_distribution not in ("constant", "poisson"):
        raise PerfError(f"--request-distribution {options.request_distribution!r}: use 'constant' or 'poisson'")
    if options.batch_size < 1:
        raise PerfError(f"-b {options.batch_size}: the batch size must be at least 1")
    if options.measurement_mode not in ("time_windows", "count_windows"):
        raise PerfError(f"--measurement-mode {options.measurement_mode!r}: use 'time_windows' or 'count_windows'")
    if options.measurement_interval_ms <= 0:
        raise PerfError("--measurement-interval must be a positive number of milliseconds")
    if options.measurement_request_count < 1:
        raise PerfError("--measurement-request-count must be at least 1")
    if options.max_trials < 3:
        raise PerfError("--max-trials must be at least 3: stability compares the last 3 windows")
    if options.stability_percentage <= 0:
        raise PerfError("--stability-percentage must be positive")
    if options.latency_percentile is not None and not 1 <= options.latency_percentile <= 99:
        raise PerfError("--percentile must be between 1 and 99")
    if options.input_data not in ("random", "zero") and not Path(options.input_data).is_file():
        raise PerfError(f"--input-data {options.input_data!r}: use 'random', 'zero' or the path of a JSON file")
