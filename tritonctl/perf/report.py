"""Perf results as a rich table, CSV or JSON."""

from __future__ import annotations

import csv
import io
import json

from tritonctl.perf.intervals import describe as describe_intervals, mean_rate
from tritonctl.perf.run import PerfResult

CSV_COLUMNS = (
    "concurrency", "request_rate", "throughput_infer_per_s", "avg_latency_us", "p50_latency_us", "p90_latency_us",
    "p95_latency_us", "p99_latency_us", "server_queue_us", "server_compute_us", "server_compute_input_us",
    "server_compute_infer_us", "server_compute_output_us", "request_count", "server_request_count", "error_count",
    "delayed_count", "client_cpu_pct", "windows", "stable",
)
STREAMING_COLUMNS = ("response_count", "response_throughput_per_s", "responses_per_request", "avg_first_response_us",
                     "avg_inter_response_us")  # with --streaming


def to_json(result: PerfResult) -> str:
    options = result.options
    document = {
        "model": options.model, "url": options.url, "protocol": options.protocol, "streaming": options.streaming,
        "batch_size": options.batch_size, "measurement_mode": options.measurement_mode,
        "levels": [level.as_dict() for level in result.levels],
        "request_intervals": ({"count": len(options.request_intervals), "total_us": sum(options.request_intervals),
                               "mean_rate_per_s": round(mean_rate(options.request_intervals), 6)}
                              if options.request_intervals else None),
        "total_requests_sent": result.total_sent,
        "server_requests_total": result.server_total.success_count if result.server_total else None,
        "warnings": result.warnings,
    }
    return json.dumps(document, indent=2) + "\n"


def to_csv(result: PerfResult) -> str:
    buffer = io.StringIO()
    columns = CSV_COLUMNS + (STREAMING_COLUMNS if result.options.streaming else ())
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for level in result.levels:
        writer.writerow({k: ("" if v is None else v) for k, v in level.as_dict().items()})
    return buffer.getvalue()


def render_table(result: PerfResult):
    """A rich Table: one row per load level, latencies in ms."""
    from rich import box
    from rich.table import Table

    rate_mode, trace = bool(result.options.request_rates), result.options.request_intervals
    table = Table(title=f"{result.options.model} over {result.options.protocol}, batch "
                        f"{result.options.batch_size}" + (f", {describe_intervals(trace)}" if trace else "")
                        + " (latencies in ms; queue/compute from the server)",
                  box=box.SIMPLE_HEAD, padding=0, pad_edge=False,  # 11 columns: whole numbers in 80 columns
                  min_width=80)  # and the title on as few lines as the terminal allows
    streamed = result.options.streaming
    table.add_column("Mean/s" if trace else "Rate/s" if rate_mode else "Conc", justify="right", no_wrap=True)
    for title in ("Infer/s", *(("Resp/s",) if streamed else ()), "Avg", "p50", "p90", "p95", "p99", "Queue",
                  "Compute", "CPU", "Stable"):
        table.add_column(title, justify="right", no_wrap=True)
    for level in result.levels:
        p = level.percentiles_us
        server = level.server is not None
        table.add_row(
            f"{mean_rate(trace):.4g}" if trace else f"{level.request_rate:g}" if rate_mode else str(level.concurrency),
            f"{level.throughput:.1f}",
            *((f"{level.response_throughput:.1f}",) if streamed else ()),
            *(f"{v / 1000:.2f}" for v in (level.avg_latency_us, p[50], p[90], p[95], p[99])),
            f"{level.server_queue_us / 1000:.2f}" if server else "-",
            f"{level.server_compute_us / 1000:.2f}" if server else "-",
            f"{level.client_cpu_pct:.0f}%", "yes" if level.stable else "[yellow]no[/yellow]",
        )
    return table


def to_perf_analyzer_csv(result: PerfResult, verbose: bool = False) -> str:
    """perf_analyzer's ``-f`` file: one row per load level sorted by throughput, times in whole µs. The
    client's send and receive times are not measured apart from the latency, so they read 0 and the
    network share is the latency less the server's queue and compute."""
    levels = sorted(result.levels, key=lambda level: level.throughput)
    with_server = bool(levels) and all(level.server is not None for level in levels)
    percentiles = sorted(levels[0].percentiles_us) if levels else [50, 90, 95, 99]
    decoupled = result.model.decoupled  # perf_analyzer adds the response throughput for decoupled models
    header = ["Concurrency" if result.options.concurrency else "Request Rate", "Inferences/Second",
              *(["Response Throughput"] if decoupled else []), "Client Send"]
    if with_server:
        header += ["Network+Server Send/Recv", "Server Queue", "Server Compute Input", "Server Compute Infer",
                   "Server Compute Output"]
    header += ["Client Recv"] + [f"p{p} latency" for p in percentiles]
    if verbose:
        header += (["Avg latency"] if result.options.latency_percentile is None else []) + [
            "request/response", "response wait"]
    lines = [",".join(header)]
    for level in levels:
        lines.append(",".join(_perf_analyzer_row(result, level, with_server, percentiles, verbose)))
    return "\n".join(lines) + "\n"


def _perf_analyzer_row(result: PerfResult, level, with_server: bool, percentiles: list[int],
                       verbose: bool) -> list[str]:
    trace = result.options.request_intervals
    load = level.concurrency if result.options.concurrency else (
        level.request_rate if level.request_rate else mean_rate(trace))
    row = [f"{load:g}", f"{level.throughput:.6g}", *([f"{level.response_throughput:.6g}"] if result.model.decoupled
                                                     else []), "0"]
    if with_server:
        server = level.server
        network = max(level.avg_latency_us - level.server_queue_us - level.server_compute_us, 0.0)
        row += [str(int(v)) for v in (network, level.server_queue_us, server.per_request_us(server.compute_input_ns),
                                      server.per_request_us(server.compute_infer_ns),
                                      server.per_request_us(server.compute_output_ns))]
    row += ["0"] + [str(int(level.percentiles_us[p])) for p in percentiles]
    if verbose:
        row += ([str(int(level.avg_latency_us))] if result.options.latency_percentile is None else []) + [
            "0", str(int(level.avg_latency_us))]
    return row
