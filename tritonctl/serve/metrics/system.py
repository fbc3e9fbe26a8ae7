"""The server-wide gauges Triton publishes beside the per-model families: the pinned memory pool,
CPU utilization and memory (Linux's /proc/stat and /proc/meminfo, as Triton reads them), and the
response cache's totals. CPU utilization is sampled at most once per ``--metrics-interval-ms``."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tritonctl.serve.core.cache import ResponseCache

PROC = Path("/proc")


def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs; idle and iowait are not busy."""
    try:
        fields = [int(v) for v in (PROC / "stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guest is within user)
    return total - fields[3] - (fields[4] if len(fields) > 4 else 0), total


def _memory() -> tuple[int, int]:
    """(total, used) bytes: MemTotal and MemTotal - MemAvailable."""
    values: dict[str, int] = {}
    try:
        for line in (PROC / "meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            values[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return 0, 0
    total = values.get("MemTotal", 0)
    return total, total - values.get("MemAvailable", total)


class CpuMetrics:
    """nv_cpu_utilization over the last interval, refreshed when a scrape finds it older than that."""

    def __init__(self, interval_ms: int):
        self.interval_s = max(interval_ms, 1) / 1000
        self._lock = threading.Lock()
        self._last = _cpu_times()
        self._last_at = time.monotonic()
        self.utilization = 0.0

    def sample(self) -> float:
        with self._lock:
            now = time.monotonic()
            if now - self._last_at >= self.interval_s:
                times = _cpu_times()
                if times is not None and self._last is not None and times[1] > self._last[1]:
                    self.utilization = (times[0] - self._last[0]) / (times[1] - self._last[1])
                self._last, self._last_at = times, now
            return self.utilization


def _gauge(name: str, help_text: str, value) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name} {value}"]


def pinned_memory_lines() -> list[str]:
    """The pinned memory pool: this server has none (CPU tensors live in ordinary memory)."""
    return (_gauge("nv_pinned_memory_pool_total_bytes", "Pinned memory pool total memory size, in bytes", 0)
            + _gauge("nv_pinned_memory_pool_used_bytes", "Pinned memory pool used memory size, in bytes", 0))


def cpu_lines(cpu: CpuMetrics) -> list[str]:
    total, used = _memory()
    return (_gauge("nv_cpu_utilization", "CPU utilization rate [0.0 - 1.0]", repr(cpu.sample()))
            + _gauge("nv_cpu_memory_total_bytes", "CPU total memory (RAM), in bytes", total)
            + _gauge("nv_cpu_memory_used_bytes", "CPU used memory (RAM), in bytes", used))


def cache_lines(cache: ResponseCache) -> list[str]:
    """The response cache's totals, in Triton's order and words (durations in microseconds)."""
    return (_gauge("nv_cache_util", "Cache utilization [0.0 - 1.0]", repr(cache.utilization()))
            + _gauge("nv_cache_num_entries", "Number of responses stored in response cache", len(cache))
            + _gauge("nv_cache_num_hits", "Number of cache hits in response cache", cache.hits)
            + _gauge("nv_cache_num_misses", "Number of cache misses in response cache", cache.misses)
            + _gauge("nv_cache_num_lookups", "Number of cache lookups in response cache", cache.hits + cache.misses)
            + _gauge("nv_cache_num_evictions", "Number of cache evictions in response cache", cache.evictions)
            + _gauge("nv_cache_lookup_duration", "Total cache lookup duration (hit and miss), in microseconds",
                     cache.lookup_ns // 1000)
            + _gauge("nv_cache_insertion_duration", "Total cache insertion duration, in microseconds",
                     cache.insertion_ns // 1000))
