"""Prometheus text exposition with Triton's metric names and labels (serving_protocol.md A.11)."""

from __future__ import annotations

from tritonctl.serve.core.custom_metrics import HISTOGRAM, KIND_NAMES, CustomMetrics
from tritonctl.serve.core.manager import ModelManager
from tritonctl.serve.core.stats import ModelStats
from tritonctl.serve.metrics.config import MetricsConfig
from tritonctl.serve.metrics.summary import CACHE_SUMMARY_FAMILIES, SUMMARY_FAMILIES, LatencySummaries
from tritonctl.serve.metrics.system import CpuMetrics, cache_lines, cpu_lines, pinned_memory_lines

# (metric, type, help, value from ModelStats)
COUNTERS = [
    ("nv_inference_request_success", "Number of successful inference requests, all batch sizes",
     lambda s: s.phases["success"].count),
    ("nv_inference_count", "Number of inferences performed (does not include cached requests)",
     lambda s: s.inference_count),
    ("nv_inference_exec_count", "Number of model executions performed (does not include cached requests)",
     lambda s: s.execution_count),
    # successful requests only, as Triton counts it (a failed request's time is in the statistics' fail)
    ("nv_inference_request_duration_us", "Cumulative inference request duration in microseconds "
     "(includes cached requests)", lambda s: s.phases["success"].ns // 1000),
    ("nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds "
     "(includes cached requests)", lambda s: s.phases["queue"].ns // 1000),
    ("nv_inference_compute_input_duration_us", "Cumulative compute input duration in microseconds "
     "(does not include cached requests)", lambda s: s.phases["compute_input"].ns // 1000),
    ("nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds "
     "(does not include cached requests)", lambda s: s.phases["compute_infer"].ns // 1000),
    ("nv_inference_compute_output_duration_us", "Cumulative inference compute output duration in microseconds "
     "(does not include cached requests)", lambda s: s.phases["compute_output"].ns // 1000),
]
# tritonctl's own, beside Triton's: requests run although stale (see ModelStats.stale_executions).
STALE_COUNTER = ("tritonctl_inference_stale_exec_count", "Number of requests handed to the model after their "
                 "client had gone or their queue timeout (timeout_action REJECT) had passed",
                 lambda s: s.stale_executions)
FAILURE_REASONS = ("OTHER", "BACKEND", "CANCELED", "REJECTED")  # Triton's order
# Only for models whose config enables the response cache, as in Triton (and in its order).
CACHE_COUNTERS = [
    ("nv_cache_num_hits_per_model", "Number of cache hits per model", lambda s: s.phases["cache_hit"].count),
    ("nv_cache_hit_duration_per_model", "Total cache hit duration per model, in microseconds",
     lambda s: s.phases["cache_hit"].ns // 1000),
    ("nv_cache_num_misses_per_model", "Number of cache misses per model", lambda s: s.phases["cache_miss"].count),
    ("nv_cache_miss_duration_per_model", "Total cache miss (insert+lookup) duration per model, in microseconds",
     lambda s: s.phases["cache_miss"].ns // 1000),
]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def label_set(**labels: str) -> str:
    """``{a="..",b=".."}`` with the labels sorted by name, as Triton (prometheus-cpp) writes every
    metric: ``nv_inference_request_failure{model="m",reason="BACKEND",version="1"}``; dashboards and
    tests match that text."""
    return "{" + ",".join(f'{key}="{_escape(value)}"' for key, value in sorted(labels.items())) + "}"


LATENCY_COUNTERS = frozenset(name for name, _, _ in COUNTERS if name.endswith("_duration_us"))


def model_stats(manager: ModelManager) -> list[ModelStats]:
    return [mv.stats for entry in list(manager.models.values()) for _, mv in sorted(entry.versions.items())]


def exposition(manager: ModelManager, config: MetricsConfig = MetricsConfig(),
               summaries: LatencySummaries | None = None, cpu: CpuMetrics | None = None) -> bytes:
    """The families in Triton's order: the per-model counters (the cache's last), the pending count,
    the server-wide gauges (pinned memory, CPU, the response cache's totals), the summaries; then
    tritonctl's own and the models' custom families."""
    stats = model_stats(manager)
    lines: list[str] = []

    def labels(s, **extra: str) -> str:
        return label_set(model=s.name, version=str(s.version), **extra)

    for name, help_text, value in COUNTERS:
        if name in LATENCY_COUNTERS and not config.counter_latencies:
            continue
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
        lines += [f"{name}{labels(s)} {value(s)}" for s in stats]
        if name == "nv_inference_request_success":  # Triton's order: success, then failure
            lines += ["# HELP nv_inference_request_failure Number of failed inference requests, all batch sizes",
                      "# TYPE nv_inference_request_failure counter"]
            lines += [f"nv_inference_request_failure{labels(s, reason=reason)} {s.failures.get(reason, 0)}"
                      for s in stats for reason in FAILURE_REASONS]
    cached = [s for s in stats if s.cache_enabled]
    for name, help_text, value in CACHE_COUNTERS if cached else ():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
        lines += [f"{name}{labels(s)} {value(s)}" for s in cached]
    lines += ["# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting "
              "execution per-model.", "# TYPE nv_inference_pending_request_count gauge"]
    lines += [f"nv_inference_pending_request_count{labels(s)} {s.pending}" for s in stats]
    lines += pinned_memory_lines()
    if cpu is not None:
        lines += cpu_lines(cpu)
    if manager.response_cache is not None:
        lines += cache_lines(manager.response_cache)
    if summaries is not None:
        lines += summary_lines(stats, summaries)
    name, help_text, value = STALE_COUNTER  # tritonctl's own, after Triton's
    lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
    lines += [f"{name}{labels(s)} {value(s)}" for s in stats]
    lines += custom_lines(manager.host.metrics)
    return ("\n".join(lines) + "\n").encode()


def summary_lines(stats: list[ModelStats], summaries: LatencySummaries) -> list[str]:
    """The latency summaries, each sample labelled model and version, then quantile, as Triton writes them."""
    by_stats = [(s, summaries.attach(s)) for s in stats]
    lines: list[str] = []
    cached = any(s.cache_enabled for s in stats)
    families = {**SUMMARY_FAMILIES, **(CACHE_SUMMARY_FAMILIES if cached else {})}
    for name, (phase, help_text) in families.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} summary"]
        for s, phases in by_stats:
            if phase == "success" and s.cache_enabled:  # Triton leaves it out for models using the cache
                continue
            if phase.startswith("cache_") and not s.cache_enabled:
                continue
            count, total, quantiles = phases[phase].snapshot()
            model_labels = f'model="{_escape(s.name)}",version="{_escape(str(s.version))}"'
            lines.append(f"{name}_count{{{model_labels}}} {count}")
            lines.append(f"{name}_sum{{{model_labels}}} {total}")
            lines += [f'{name}{{{model_labels},quantile="{_number(q)}"}} {_number(value)}'
                      for q, value in quantiles]
    return lines


def custom_lines(metrics: CustomMetrics) -> list[str]:
    """The families models defined (pb_utils.MetricFamily), each metric with its own labels."""
    lines: list[str] = []
    for family, members in metrics.snapshot():
        name = family.name
        lines += [f"# HELP {name} {_escape_help(family.description)}", f"# TYPE {name} {KIND_NAMES[family.kind]}"]
        for key, metric in members:
            labels = label_set(**dict(key)) if key else ""
            if family.kind != HISTOGRAM:
                lines.append(f"{name}{labels} {_number(metric.value)}")
                continue
            lines.append(f"{name}_count{labels} {sum(metric.counts)}")
            lines.append(f"{name}_sum{labels} {_number(metric.value)}")
            before_le = labels[:-1] + "," if labels else "{"  # le last, as prometheus-cpp writes it
            total = 0
            for bound, count in zip([*map(_number, metric.buckets), "+Inf"], metric.counts):
                total += count
                lines.append(f'{name}_bucket{before_le}le="{bound}"}} {total}')
    return lines


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    """As Prometheus' client writes a value: 2023, 999.9, 1e+20, +Inf."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


class MetricsApp:
    """ASGI app answering ``GET /metrics``."""

    def __init__(self, manager: ModelManager, config: MetricsConfig = MetricsConfig(), cpu: CpuMetrics | None = None):
        self.manager = manager
        self.config = config
        self.cpu = cpu  # None: --allow-cpu-metrics=false
        self.summaries = LatencySummaries(config.summary_quantiles) if config.summary_latencies else None
        if self.summaries is not None:
            manager.version_listeners.append(lambda version: self.summaries.attach(version.stats))
            for stats in model_stats(manager):
                self.summaries.attach(stats)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] != "/metrics":
            status, body, ctype = 404, b"Not Found", b"text/plain"
        elif scope["method"] != "GET":
            status, body, ctype = 405, b"Method Not Allowed", b"text/plain"
        else:
            status, body, ctype = 200, exposition(self.manager, self.config, self.summaries, self.cpu), b"text/plain; charset=utf-8"
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", ctype), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
