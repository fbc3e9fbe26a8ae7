"""``tritonctl perf``: a perf_analyzer-style load generator against any KServe v2 server."""

from __future__ import annotations

import enum
from pathlib import Path

import typer

from tritonctl.cli.errors import CliError


class Protocol(str, enum.Enum):
    http = "http"
    grpc = "grpc"


class Distribution(str, enum.Enum):
    constant = "constant"
    poisson = "poisson"


class MeasurementMode(str, enum.Enum):
    time_windows = "time_windows"
    count_windows = "count_windows"


HELP = """Measure throughput and latency of a model on a running server (tritonctl serve or Triton),
the way perf_analyzer does: windows are repeated until the last 3 agree within 10%.

[bold]Examples[/bold]

  tritonctl perf -m simple --concurrency-range 1:4

  tritonctl perf -m resnet -i grpc -u localhost:8001 --request-rate-range 50:200:50 --request-distribution poisson

  tritonctl perf -m mlp --request-intervals trace.txt

  tritonctl perf -m model --shape INPUT0:3,224,224 --measurement-interval 1000 --json results.json
"""


def perf(
    model: str = typer.Option(..., "-m", "--model", help="Model name."),
    url: str = typer.Option(None, "-u", "--url", help="Server address (default localhost:8000 for http, "
                                                      "localhost:8001 for grpc)."),
    protocol: Protocol = typer.Option(Protocol.http, "-i", "--protocol", help="http or grpc."),
    model_version: str = typer.Option("", "-x", "--model-version", help="Model version (default: the server's)."),
    concurrency_range: str = typer.Option(None, "--concurrency-range", help="START[:END[:STEP]] requests in flight "
                                                                            "(default 1)."),
    request_rate_range: str = typer.Option(None, "--request-rate-range", help="START[:END[:STEP]] requests per "
                                                                              "second, instead of concurrency."),
    request_intervals: Path = typer.Option(None, "--request-intervals", metavar="FILE",
                                           help="Replay these gaps between sends instead: one interval in "
                                                "microseconds per line (perf_analyzer's format), in a loop."),
    request_distribution: Distribution = typer.Option(Distribution.constant, "--request-distribution",
                                                      help="Gaps between sends in request-rate mode."),
    batch_size: int = typer.Option(1, "-b", "--batch-size", help="Batch size of each request."),
    shape: list[str] = typer.Option([], "--shape", help="NAME:D1,D2 for an input with variable dims "
                                                        "(no batch dim). Repeatable."),
    input_data: str = typer.Option("random", "--input-data", help="random, zero or a JSON file "
                                                                  "({\"data\": [{\"INPUT0\": [...]}]})."),
    measurement_mode: MeasurementMode = typer.Option(MeasurementMode.time_windows, "--measurement-mode",
                                                     help="Windows by time or by completed requests."),
    measurement_interval: float = typer.Option(5000, "-p", "--measurement-interval", help="Time window in ms."),
    measurement_request_count: int = typer.Option(50, "--measurement-request-count",
                                                  help="Requests per window in count_windows mode."),
    stability_percentage: float = typer.Option(10, "-s", "--stability-percentage",
                                               help="Allowed spread of the last 3 windows, in percent."),
    max_trials: int = typer.Option(10, "-r", "--max-trials", help="Most windows per load level."),
    percentile: int = typer.Option(None, "--percentile", help="Stabilize on this latency percentile "
                                                              "instead of the average."),
    warmup_request_count: int = typer.Option(0, "--warmup-request-count", help="Requests before measuring."),
    csv_path: str = typer.Option(None, "--csv", help="Write CSV to this file ('-' for stdout)."),
    json_path: str = typer.Option(None, "--json", help="Write JSON to this file ('-' for stdout)."),
) -> None:
    from rich.console import Console

    from tritonctl.perf.intervals import read_intervals
    from tritonctl.perf.options import (PerfError, PerfOptions, parse_concurrency_range,
                                            parse_request_rate_range, parse_shapes)
    from tritonctl.perf.run import run_perf
    from tritonctl.perf.report import render_table, to_csv, to_json

    err = Console(stderr=True)
    try:
        given = [flag for flag, value in (("--concurrency-range", concurrency_range),
                                          ("--request-rate-range", request_rate_range),
                                          ("--request-intervals", request_intervals)) if value]
        if len(given) > 1:
            raise PerfError(f"give one kind of load: {' or '.join(given)}, not both"
                            if len(given) == 2 else "give one kind of load, not all three")
        options = PerfOptions(
            model=model, url=url or ("localhost:8001" if protocol is Protocol.grpc else "localhost:8000"),
            protocol=protocol.value, model_version=model_version,
            concurrency=() if given and not concurrency_range else parse_concurrency_range(concurrency_range or "1"),
            request_rates=parse_request_rate_range(request_rate_range) if request_rate_range else (),
            request_intervals=read_intervals(request_intervals) if request_intervals else (),
            request_distribution=request_distribution.value, batch_size=batch_size, shapes=parse_shapes(shape),
            input_data=input_data, measurement_mode=measurement_mode.value,
            measurement_interval_ms=measurement_interval, measurement_request_count=measurement_request_count,
            stability_percentage=stability_percentage, max_trials=max_trials, latency_percentile=percentile,
            warmup_requests=warmup_request_count,
        )
        result = run_perf(options, progress=lambda message: err.print(f"[dim]{message}[/dim]"))
    except PerfError as exc:
        raise CliError(str(exc), 2) from None
    stdout_used = False
    for path, text in ((csv_path, to_csv), (json_path, to_json)):
        if path == "-":
            typer.echo(text(result), nl=False)
            stdout_used = True
        elif path:
            Path(path).write_text(text(result))
    if not stdout_used:
        Console().print(render_table(result))
    for warning in result.warnings:
        err.print(f"[yellow]warning:[/yellow] {warning}")
    if any(not level.stable for level in result.levels):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``tritonctl perf`` to ``app``."""
    app.command("perf", help=HELP)(perf)
