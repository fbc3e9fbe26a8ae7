"""perf_analyzer's ``--profile-export-file``: every request of every level, with its send time and the
arrival time of each of its responses (one for a unary request; with --streaming every response, the
empty final one included, as perf_analyzer records them), and the windows' boundaries, in the JSON that
perf_analyzer writes and genai-perf reads."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from tritonctl.perf.intervals import mean_rate
from tritonctl.perf.measurement import Window
from tritonctl.perf.options import PerfError, PerfOptions

FORMAT_VERSION = "tritonctl"


@dataclass
class LevelRecord:
    """The requests of one level's windows; times in ns since the epoch."""

    concurrency: int | None
    request_rate: float | None
    window_boundaries: list[int]
    requests: list[tuple[int, tuple[int, ...]]]  # (sent, response times), answered requests only


def record_level(options: PerfOptions, concurrency: int | None, rate: float | None, windows: list[Window],
                 completions: list) -> LevelRecord:
    """A level's record from its windows and completions (perf_counter times, turned into wall-clock)."""
    offset = time.time_ns() - time.perf_counter_ns()
    boundaries: list[int] = []
    for window in windows:
        for edge in (window.start_ns + offset, window.end_ns + offset):
            if not boundaries or boundaries[-1] != edge:
                boundaries.append(edge)
    if not concurrency and not rate:
        rate = mean_rate(options.request_intervals)  # a trace: its mean rate, as perf_analyzer labels it
    requests = []
    for c in completions:
        if c.ok:
            answered = c.responses.times_ns if c.responses is not None else (c.end_ns,)
            requests.append((c.end_ns - c.latency_ns + offset, tuple(t + offset for t in answered)))
    return LevelRecord(concurrency, rate, boundaries, requests)


def check_export_path(path: str) -> None:
    """perf_analyzer refuses to overwrite: the path must not exist yet."""
    if Path(path).exists():
        raise PerfError(f"--profile-export-file {path}: Path must not already exist")


def to_profile_export(records: list[LevelRecord]) -> str:
    experiments = []
    for record in records:
        mode, value = (("concurrency", record.concurrency) if record.concurrency
                       else ("request_rate", record.request_rate))
        experiments.append({
            "experiment": {"mode": mode, "value": value},
            "requests": [{"timestamp": sent, "request_inputs": {}, "response_timestamps": list(answered),
                          "response_outputs": [{} for _ in answered]} for sent, answered in record.requests],
            "window_boundaries": record.window_boundaries,
        })
    return json.dumps({"experiments": experiments, "version": FORMAT_VERSION, "service_kind": "triton",
                       "endpoint": ""})
