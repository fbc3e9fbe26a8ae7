"""``tritonctl analyze``: find the best serving config of a model by measuring candidates."""

from __future__ import annotations

import enum
from pathlib import Path

import typer

from tritonctl.cli.errors import CliError


class Strategy(str, enum.Enum):
    smart = "smart"
    exhaustive = "exhaustive"


class EngineKind(str, enum.Enum):
    subprocess = "subprocess"
    inprocess = "inprocess"
    url = "url"
    triton = "triton"


class Protocol(str, enum.Enum):
    http = "http"
    grpc = "grpc"


HELP = (
    "Find the best serving config of a model: measure candidate configs (max batch size, preferred batch size, "
    "queue delay, instance count and kind, queue size and timeout) with a load sweep each (concurrency, request "
    "rate or a replayed trace), choose the best one under your constraints, and write it with a report.\n\n"
    "By default the bundled server runs the model in a subprocess; --url uses a running server in explicit "
    "model-control mode (tritonctl serve or Triton), --engine triton a local tritonserver. Every measurement is "
    "checkpointed: after Ctrl-C or a crash, run the same command with --resume.\n\n"
) + """[bold]Examples[/bold]

  tritonctl analyze model_repository --model mlp

  tritonctl analyze models -m resnet --max-p99-ms 20 --objective throughput --apply

  tritonctl analyze models -m bert --url localhost:8000 --batch-sizes 1:16 --queue-delays 0,1000,5000

  tritonctl analyze models -m mlp --strategy exhaustive --instance-counts 1:2 --resume

  tritonctl analyze models -m mlp --request-rate 100,200,400 --max-queue-sizes 0,16 --max-p99-ms 30

  tritonctl analyze models -m mlp --request-intervals trace.txt --queue-timeouts 0,20000 --max-reject-rate 1%

  tritonctl analyze models --time-budget 2h          # every model of the repository, within two hours

  tritonctl analyze models --ray head-node:6379      # the models spread over a Ray cluster's nodes

  tritonctl analyze models --models a,b --concurrent # the best configs of a and b for sharing one server
"""


def analyze(
    repository: Path = typer.Argument(..., help="The model repository."),
    model: str = typer.Option(None, "-m", "--model", help="The model to tune. Leave it out to tune every model of "
                                                           "the repository, one after the other."),
    models: str = typer.Option(None, "--models", help="Tune these models (comma-separated), one after the other."),
    time_budget: str = typer.Option(None, "--time-budget", metavar="DURATION",
                                    help="Finish within this time (90s, 20m, 1h30m), final rounds included; a "
                                         "repository run shares it fairly among its models."),
    output_dir: Path = typer.Option(None, "-o", "--output-dir", help="Where results go (default ./analyze-MODEL, "
                                                                     "or ./analyze-REPOSITORY for several models, "
                                                                     "each in its own folder)."),
    strategy: Strategy = typer.Option(Strategy.smart, "--strategy", help="smart (noise-aware line searches "
                                                                         "within a budget) or exhaustive (all "
                                                                         "candidates); both confirm the best "
                                                                         "three head to head."),
    objective: str = typer.Option("throughput", "--objective", help="throughput, latency (p99) or weighted[:W] "
                                                                    "(W = weight of throughput, 0..1)."),
    max_p99_ms: float = typer.Option(None, "--max-p99-ms", help="Constraint: p99 latency at most this (ms)."),
    min_throughput: float = typer.Option(None, "--min-throughput", help="Constraint: at least this many infer/s."),
    max_reject_rate: str = typer.Option(None, "--max-reject-rate", help="Constraint: at most this share of the "
                                                                        "requests rejected or failed, e.g. 0.01 or "
                                                                        "1% (default 0)."),
    batch_sizes: str = typer.Option(None, "--batch-sizes", help="max_batch_size values: START:END (powers of two) "
                                                                "or a list (default 1:64)."),
    queue_delays: str = typer.Option(None, "--queue-delays", help="max_queue_delay_microseconds values "
                                                                  "(default 0,100,500,2000,10000)."),
    instance_counts: str = typer.Option(None, "--instance-counts", help="Instance counts: START:END or a list "
                                                                        "(default 1 to the CPU cores, 2..4)."),
    instance_kinds: str = typer.Option(None, "--instance-kinds", help="cpu, gpu or cpu,gpu (default the "
                                                                      "model's kind)."),
    preferred_batch_sizes: str = typer.Option(None, "--preferred-batch-sizes",
                                              help="none, auto (powers of two below each max batch size) or a "
                                                   "list such as none,4,8 (default none)."),
    max_queue_sizes: str = typer.Option(None, "--max-queue-sizes", help="dynamic_batching.default_queue_policy "
                                                                        "max_queue_size values, 0 = unbounded "
                                                                        "(default: the model's)."),
    queue_timeouts: str = typer.Option(None, "--queue-timeouts", help="Queue timeouts in µs after which a queued "
                                                                      "request is rejected (timeout_action REJECT), "
                                                                      "0 = none (default: the model's)."),
    concurrency: str = typer.Option(None, "--concurrency", help="Concurrency sweep: START:END (powers of two) or "
                                                                "a list (default 1:256)."),
    request_rate: str = typer.Option(None, "--request-rate", help="Request-rate sweep instead (per second): a list "
                                                                  "or START[:END[:STEP]]."),
    request_intervals: Path = typer.Option(None, "--request-intervals", metavar="FILE",
                                           help="Replay this trace instead: one interval between sends in µs per "
                                                "line (perf_analyzer's format)."),
    composing_models: str = typer.Option(None, "--composing-models",
                                         help="For a Python model that calls others through BLS: the models it "
                                              "calls (comma-separated), tuned together at its endpoint. An "
                                              "ensemble's steps are found in its config."),
    budget: int = typer.Option(None, "--budget", help="smart: the most configs to measure (default a quarter "
                                                      "of the candidates, at least enough for every knob's "
                                                      "line)."),
    engine: EngineKind = typer.Option(None, "--engine", help="subprocess (default), inprocess, url or triton."),
    url: str = typer.Option(None, "-u", "--url", help="A running server in explicit model-control mode "
                                                      "(implies --engine url)."),
    protocol: Protocol = typer.Option(Protocol.http, "-i", "--protocol", help="Protocol of the load: http or grpc."),
    tritonserver: str = typer.Option(None, "--tritonserver", help="With --engine triton: the tritonserver binary "
                                                                  "(default: from PATH)."),
    triton_arg: list[str] = typer.Option([], "--triton-arg", help="With --engine triton: an extra tritonserver "
                                                                  "argument, e.g. --triton-arg=--backend-directory=D."),
    measurement_interval: float = typer.Option(1000, "-p", "--measurement-interval", help="Window in ms."),
    stability_percentage: float = typer.Option(10, "-s", "--stability-percentage",
                                               help="Allowed spread of the last 3 windows, in percent."),
    max_trials: int = typer.Option(6, "-r", "--max-trials", help="Most windows per point."),
    shape: list[str] = typer.Option([], "--shape", help="NAME:D1,D2 for an input with variable dims (no batch "
                                                        "dim). Repeatable."),
    input_data: str = typer.Option("random", "--input-data", help="random, zero, a perf JSON file or a "
                                                                  "directory of raw input files."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in the output directory."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Start again, discarding the measurements there."),
    apply: bool = typer.Option(False, "--apply", help="Write the best config into the model directory "
                                                      "(the old one is kept as config.pbtxt.orig)."),
    ray: str = typer.Option(None, "--ray", metavar="ADDRESS",
                            help="Run on the nodes of this Ray cluster (HOST:PORT, or auto): one model per node at "
                                 "a time, each with its own server there. Needs the ray extra."),
    concurrent: bool = typer.Option(False, "--concurrent",
                                    help="The models will share one server: after tuning each alone, measure "
                                         "combinations of their best configs loaded together under load on all of "
                                         "them, and choose the best combination."),
) -> None:
    from rich.console import Console

    from tritonctl.analyzer.analyze import AnalyzeOptions, run_analyze
    from tritonctl.analyzer.objective import Constraints, Objective
    from tritonctl.perf.options import PerfError, parse_shapes
    from tritonctl.analyzer.search import AnalyzeError, SearchSpace
    from tritonctl.analyzer.repository import repository_models, run_repository
    from tritonctl.analyzer.space_options import (parse_counts, parse_delays, parse_duration, parse_kinds,
                                                  parse_powers, parse_preferred, parse_queue_sizes, parse_rates,
                                                  parse_share, parse_timeouts)
    from tritonctl.perf.intervals import read_intervals
    from tritonctl.cli.analyze_view import ProgressReporter, RepositoryProgress, print_repository, print_result
    from tritonctl.optional import require

    require("pandas", "tritonctl analyze")  # the measurements are written as they come: missing it fails now
    err = Console(stderr=True)
    try:
        if resume and overwrite:
            raise AnalyzeError("--resume continues a run and --overwrite discards it: give one of them")
        if budget is not None and budget < 1:
            raise AnalyzeError("--budget must be at least 1")
        if model and models:
            raise AnalyzeError("give --model for one model or --models for several, not both")
        loads = [flag for flag, value in (("--concurrency", concurrency), ("--request-rate", request_rate),
                                          ("--request-intervals", request_intervals)) if value]
        if len(loads) > 1:
            raise AnalyzeError(f"give one kind of load: {' or '.join(loads)}, not "
                               + ("both" if len(loads) == 2 else "all three"))
        if composing_models and not model:
            raise AnalyzeError("--composing-models names the models that --model calls: give --model too")
        names = [n.strip() for n in (models or "").split(",") if n.strip()]
        whole = model is None
        if whole:
            names = repository_models(repository, names)
        space = SearchSpace(
            batch_sizes=parse_powers(batch_sizes, "--batch-sizes") if batch_sizes else None,
            queue_delays_us=parse_delays(queue_delays) if queue_delays else None,
            instance_counts=parse_counts(instance_counts) if instance_counts else None,
            instance_kinds=parse_kinds(instance_kinds) if instance_kinds else None,
            preferred_batch_sizes=parse_preferred(preferred_batch_sizes) if preferred_batch_sizes else None,
            concurrency=parse_powers(concurrency, "--concurrency") if concurrency else None,
            max_queue_sizes=parse_queue_sizes(max_queue_sizes) if max_queue_sizes else None,
            queue_timeouts_us=parse_timeouts(queue_timeouts) if queue_timeouts else None,
            request_rates=parse_rates(request_rate) if request_rate else None,
            request_intervals_us=read_intervals(request_intervals) if request_intervals else None,
            request_intervals_file=str(request_intervals) if request_intervals else "",
        )
        options = AnalyzeOptions(
            repository=repository, model=model or "", space=space,
            output_dir=output_dir if output_dir is not None else
            Path(f"analyze-{repository.resolve().name if whole else model}"),
            time_budget_s=parse_duration(time_budget, "--time-budget") if time_budget else None,
            strategy=strategy.value, objective=Objective.parse(objective),
            constraints=Constraints(max_p99_ms, min_throughput,
                                    parse_share(max_reject_rate, "--max-reject-rate") if max_reject_rate else None),
            budget=budget,
            engine=(engine.value if engine else ("url" if url else "subprocess")), url=url, protocol=protocol.value,
            tritonserver=tritonserver, triton_args=tuple(triton_arg), measurement_interval_ms=measurement_interval,
            stability_percentage=stability_percentage, max_trials=max_trials, shapes=parse_shapes(shape),
            input_data=input_data, resume=resume, overwrite=overwrite, apply=apply,
            composing_models=tuple(n.strip() for n in (composing_models or "").split(",") if n.strip()),
        )
        if concurrent:
            from tritonctl.cli.analyze_cluster import analyze_concurrent

            if ray:
                raise AnalyzeError("--concurrent measures the models together on one server, and --ray tunes them "
                                   "on different nodes: run --concurrent without --ray")
            if not whole:
                raise AnalyzeError("--concurrent measures several models together: give --models a,b (or no "
                                   "--model for every model of the repository)")
            return analyze_concurrent(options, names, err)
        if ray:
            from tritonctl.cli.analyze_cluster import analyze_on_ray

            return analyze_on_ray(options, names if whole else None, ray, err)
        if whole:
            with RepositoryProgress(err) as repository_reporter:
                run = run_repository(options, names, repository_reporter)
        else:
            with ProgressReporter(err) as reporter:
                result = run_analyze(options, reporter)
    except (AnalyzeError, PerfError) as exc:
        raise CliError(str(exc), 2) from None
    if whole:
        print_repository(run, Console(), err)
        if run.interrupted:
            raise typer.Exit(130)
        return
    print_result(result, options, Console(), err)
    if result.interrupted:
        raise typer.Exit(130)
    if result.best is None:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``tritonctl analyze`` to ``app``."""
    app.command("analyze", help=HELP,
                short_help="Find the best serving config of a model by measuring candidate configs under load.")(analyze)
