"""``tritonctl serve``: serve a Triton model repository over KServe v2 HTTP and gRPC."""

from __future__ import annotations

import enum
import logging
from pathlib import Path

import typer

from tritonctl.cli.errors import CliError
from tritonctl.cli.tritonserver_flags import NOTED, TritonserverCommandLine, parse_bool


class ControlMode(str, enum.Enum):
    none = "none"
    poll = "poll"
    explicit = "explicit"


class GrpcTransport(str, enum.Enum):
    auto = "auto"
    native = "native"
    aio = "aio"


class PythonIsolation(str, enum.Enum):
    thread = "thread"
    process = "process"


class HttpTransport(str, enum.Enum):
    auto = "auto"
    native = "native"
    uvicorn = "uvicorn"


class LogFormat(str, enum.Enum):
    default = "default"
    ISO8601 = "ISO8601"


class Engine(str, enum.Enum):
    bundled = "bundled"
    triton = "triton"


HELP = """Serve a Triton model repository: KServe v2 HTTP and gRPC with Triton's extensions,
dynamic batching and instance groups, for tritonclient, curl and Prometheus.

Without REPOSITORY, a small example repository (model 'simple') is created and served.

[bold]Examples[/bold]

  tritonctl serve ./model_repository

  tritonctl serve ./models --model-control-mode explicit --load-model resnet

  curl localhost:8000/v2/models/simple

  tritonctl serve ./models --engine triton      # a real tritonserver, after validating the repository
"""


def serve(
    repository: Path = typer.Argument(None, help="The model repository (default: the example repository)."),
    model_repository: list[Path] = typer.Option([], "--model-repository", "--model-store", metavar="DIR",
                                                help="The model repository, as tritonserver's flag names it (the "
                                                     "same as the REPOSITORY argument)."),
    http_port: int = typer.Option(8000, "--http-port", help="HTTP port (-1 turns HTTP off)."),
    grpc_port: int = typer.Option(8001, "--grpc-port", help="gRPC port (-1 turns gRPC off)."),
    metrics_port: int = typer.Option(8002, "--metrics-port", help="Prometheus metrics port (-1 turns it off)."),
    metrics_config: list[str] = typer.Option(
        [], "--metrics-config", metavar="SETTING=VALUE",
        help="Latency metrics, as tritonserver takes it (repeatable): summary_latencies=true adds the "
             "nv_inference_*_summary_us summaries (quantiles over the last 60 s), summary_quantiles=Q:ERR,... sets "
             "their quantiles (default 0.5:0.05,0.9:0.01,0.95:0.001,0.99:0.001,0.999:0.0001), "
             "counter_latencies=false drops the nv_inference_*_duration_us counters, histogram_latencies=true|false."),
    allow_metrics: str = typer.Option(None, "--allow-metrics", metavar="BOOL",
                                      help="As tritonserver: false serves no metrics (as --metrics-port -1)."),
    allow_cpu_metrics: str = typer.Option(None, "--allow-cpu-metrics", metavar="BOOL",
                                          help="As tritonserver: false leaves out nv_cpu_utilization and "
                                               "nv_cpu_memory_*."),
    allow_gpu_metrics: str = typer.Option(None, "--allow-gpu-metrics", metavar="BOOL",
                                          help="Accepted as tritonserver takes it; this server publishes no GPU "
                                               "metrics."),
    metrics_interval_ms: str = typer.Option(None, "--metrics-interval-ms", metavar="MS",
                                            help="As tritonserver: how often nv_cpu_utilization is sampled "
                                                 "[default: 2000]."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; 0.0.0.0 exposes the server."),
    model_control_mode: ControlMode = typer.Option(ControlMode.none, "--model-control-mode",
                                                   help="none: load everything once; poll: follow changes; "
                                                        "explicit: load through the repository API."),
    load_model: list[str] = typer.Option([], "--load-model", help="With explicit mode: a model to load at start "
                                                                  "('*' for all). Repeatable."),
    repository_poll_secs: float = typer.Option(15.0, "--repository-poll-secs", help="Poll interval in poll mode."),
    strict_readiness: bool = typer.Option(True, "--strict-readiness/--no-strict-readiness",
                                          help="Ready only when every model loaded."),
    exit_on_error: bool = typer.Option(True, "--exit-on-error/--no-exit-on-error",
                                       help="As tritonserver: exit (status 1, 'failed to load all models') when a "
                                            "model fails to load at start-up; --no-exit-on-error serves the others "
                                            "(tritonserver's --exit-on-error=false)."),
    strict_model_config: bool = typer.Option(False, "--strict-model-config/--no-strict-model-config",
                                             help="As tritonserver's --strict-model-config=true "
                                                  "(--disable-auto-complete-config): every model needs its "
                                                  "config file, and no backend completes a config."),
    exit_timeout_secs: float = typer.Option(30.0, "--exit-timeout-secs",
                                            help="On SIGTERM/SIGINT, time allowed for in-flight requests; what is still running then is cut (exit 1)."),
    model_config_name: str = typer.Option(None, "--model-config-name",
                                          help="Use configs/<name>.pbtxt where a model has one."),
    http_max_input_size: int = typer.Option(1 << 26, "--http-max-input-size", help="Largest HTTP request body."),
    cache_config: list[str] = typer.Option([], "--cache-config", metavar="CACHE,KEY=VALUE",
                                           help="Response cache, as tritonserver takes it: local,size=BYTES "
                                                "(repeatable). Models opt in with response_cache { enable: true }."),
    trace_config: list[str] = typer.Option([], "--trace-config", metavar="[triton,]SETTING=VALUE",
                                           help="Request tracing, as tritonserver takes it (repeatable): "
                                                "triton,file=PATH, level=TIMESTAMPS|TENSORS|OFF, rate=N (every N-th "
                                                "request), count=N (-1 = no limit), triton,log-frequency=N."),
    grpc_transport: GrpcTransport = typer.Option(GrpcTransport.auto, "--grpc-transport",
                                                 help="native: gRPC's C++ transport (built at install where "
                                                      "libgrpc++ is found); aio: grpc.aio; auto: native when built."),
    http_header_forward_pattern: str = typer.Option(
        None, "--http-header-forward-pattern", metavar="REGEX",
        help="HTTP request headers whose name matches become request parameters (strings) of the inference "
             "request, as tritonserver's flag: RE2 syntax, matched case-insensitively anywhere in the name "
             "('(?-i)' at its start: case-sensitive). Default: none are."),
    grpc_header_forward_pattern: str = typer.Option(
        None, "--grpc-header-forward-pattern", metavar="REGEX",
        help="The same for gRPC metadata (lower-case names); a stream's metadata reaches each of its requests."),
    http_restricted_api: list[str] = typer.Option(
        [], "--http-restricted-api", metavar="API[,API...]:KEY=VALUE",
        help="As tritonserver's flag (repeatable): HTTP requests to these APIs (health, metadata, inference, "
             "shared-memory, model-config, model-repository, statistics, trace, logging) need the header KEY "
             "with VALUE, else 403. An API may be in one group only."),
    grpc_restricted_protocol: list[str] = typer.Option(
        [], "--grpc-restricted-protocol", metavar="PROTOCOL[,PROTOCOL...]:KEY=VALUE",
        help="The same for gRPC (repeatable): the metadata 'triton-grpc-protocol-KEY' must be VALUE, else "
             "UNAVAILABLE."),
    http_transport: HttpTransport = typer.Option(HttpTransport.auto, "--http-transport",
                                                 help="native: the C++ transport over libevent (built at install "
                                                      "where libevent is found); uvicorn; auto: native when built."),
    python_isolation: PythonIsolation = typer.Option(
        PythonIsolation.process, "--python-isolation",
        help="Python models: process: each instance in a stub process of its own, as Triton runs them (parallel "
             "instances, crashes stay inside the model, EXECUTION_ENV_PATH honoured); thread: all in this "
             "process (less latency per request, one GIL)."),
    backend_directory: Path = typer.Option(
        None, "--backend-directory", metavar="DIR",
        help="Where Python-based backends are found, as in tritonserver: a config's backend 'NAME' that is not "
             "built in runs DIR/NAME/model.py as a Python model (default: /opt/tritonserver/backends)."),
    rate_limit: str = typer.Option("off", "--rate-limit", metavar="off|execution_count",
                                   help="As tritonserver: execution_count runs a model instance only while it holds "
                                        "the resources its instance group's rate_limiter asks for, instances taking "
                                        "turns by priority; off (default) lets every instance run when it is free."),
    rate_limit_resource: list[str] = typer.Option(
        [], "--rate-limit-resource", metavar="NAME:COUNT[:DEVICE]",
        help="As tritonserver (repeatable): how much of a resource there is, on DEVICE or on every device "
             "(default: the most any instance asks for). A resource no flag names then has none."),
    backend_config: list[str] = typer.Option(
        [], "--backend-config", metavar="[BACKEND,]SETTING=VALUE",
        help="As tritonserver (repeatable): default-max-batch-size=N (or onnxruntime,default-max-batch-size=N) is "
             "the max_batch_size onnxruntime's auto-complete gives a model that can batch (default 4; 0: none); "
             "other backends' settings are taken without effect."),
    log_verbose: int = typer.Option(0, "--log-verbose", help="Verbose logging level (0 = off)."),
    log_format: LogFormat = typer.Option(LogFormat.default, "--log-format", help="default or ISO8601."),
    log_file: Path = typer.Option(None, "--log-file", metavar="PATH",
                                  help="As tritonserver: write the log to PATH instead of the console."),
    log_info: str = typer.Option(None, "--log-info", metavar="BOOL", help="As tritonserver: false drops INFO records."),
    log_warning: str = typer.Option(None, "--log-warning", metavar="BOOL",
                                    help="As tritonserver: false drops WARNING records."),
    log_error: str = typer.Option(None, "--log-error", metavar="BOOL",
                                  help="As tritonserver: false drops ERROR records."),
    server_id: str = typer.Option("triton", "--id", help="As tritonserver: the name in the server metadata."),
    without_effect: list[str] = typer.Option([], NOTED, hidden=True),
    engine: Engine = typer.Option(Engine.bundled, "--engine",
                                  help="bundled: this server; triton: validate the repository, then run a real "
                                       "tritonserver with the same options, forwarding signals and exiting with its "
                                       "status."),
    tritonserver: str = typer.Option(None, "--tritonserver", metavar="PATH",
                                     help="With --engine triton: the tritonserver binary (default: the one on PATH)."),
    triton_arg: list[str] = typer.Option([], "--triton-arg", metavar="ARG",
                                         help="With --engine triton: one more tritonserver argument, passed as "
                                              "given (repeatable), e.g. --triton-arg=--backend-directory=DIR."),
    skip_validation: bool = typer.Option(False, "--skip-validation",
                                         help="With --engine triton: start tritonserver even when validate finds "
                                              "errors."),
) -> None:
    from tritonctl.serve.core.backend_config import BackendConfigError, parse_backend_config
    from tritonctl.serve.core.cache import CacheConfigError, parse_cache_config
    from tritonctl.serve.core.header_forward import HeaderPatternError, header_forwarding
    from tritonctl.serve.core.rate_limiter import RateLimitOptionError, make_rate_limiter, parse_mode
    from tritonctl.serve.core.restrictions import RestrictionError, grpc_restrictions, http_restrictions
    from tritonctl.serve.core.trace_config import TraceConfigError, parse_trace_config
    from tritonctl.serve.example import ensure_example_repository
    from tritonctl.serve.metrics.config import MetricsConfigError, parse_metrics_config
    from tritonctl.serve.runtime import ServeOptions, ServerRuntime, exit_now, new_event_loop

    records = {level: _tritonserver_bool(value) for level, value in (("info", log_info), ("warning", log_warning),
                                                                      ("error", log_error))}
    # with --engine triton, tritonserver writes its log file itself
    _configure_logging(log_verbose, log_format, None if engine is Engine.triton else log_file)
    repository = _one_repository(repository, model_repository)
    if repository is None:
        repository = ensure_example_repository()
        logging.getLogger("tritonctl.serve").info("serving the example repository at %s", repository)
    if not repository.is_dir():
        raise CliError(f"{repository} is not a directory", 2)
    if model_control_mode is not ControlMode.explicit and load_model:
        raise CliError("--load-model needs --model-control-mode explicit", 2)
    if engine is not Engine.triton and (tritonserver or triton_arg or skip_validation):
        raise CliError("--tritonserver, --triton-arg and --skip-validation go with --engine triton", 2)
    try:
        parse_cache_config(cache_config)
    except CacheConfigError as exc:
        raise CliError(str(exc), 2) from None
    try:
        parse_trace_config(trace_config)
    except TraceConfigError as exc:
        raise CliError(str(exc), 2) from None
    try:
        parse_metrics_config(metrics_config)
    except MetricsConfigError as exc:
        raise CliError(str(exc), 2) from None
    try:
        parse_backend_config(backend_config)
    except BackendConfigError as exc:
        raise CliError(str(exc), 2) from None
    try:
        execution_count = parse_mode(rate_limit)
        make_rate_limiter(execution_count, rate_limit_resource)
    except RateLimitOptionError as exc:
        raise CliError(str(exc), 2) from None
    metrics_flags = [f"--{flag}={value}" for flag, value in (  # --allow-metrics=false: as --metrics-port -1
        ("allow-cpu-metrics", allow_cpu_metrics),
        ("allow-gpu-metrics", allow_gpu_metrics), ("metrics-interval-ms", metrics_interval_ms)) if value is not None]
    metrics_on, cpu_metrics_on = (_tritonserver_bool(value) for value in (allow_metrics, allow_cpu_metrics))
    _tritonserver_bool(allow_gpu_metrics)
    interval_ms = _tritonserver_int(metrics_interval_ms, 2000)
    if not metrics_on:
        metrics_port = -1
    try:
        header_forwarding(http_header_forward_pattern, "--http-header-forward-pattern")
        header_forwarding(grpc_header_forward_pattern, "--grpc-header-forward-pattern")
    except HeaderPatternError as exc:
        raise CliError(str(exc), 2) from None
    try:
        http_restrictions(http_restricted_api)
        grpc_restrictions(grpc_restricted_protocol)
    except RestrictionError as exc:
        raise CliError(str(exc), 2) from None
    if engine is Engine.triton:
        from tritonctl.cli.serve_triton import serve_with_tritonserver
        from tritonctl.serve.tritonserver import TritonserverOptions

        triton_options = TritonserverOptions(
            repository=repository.resolve(), host=host, http_port=None if http_port < 0 else http_port,
            grpc_port=None if grpc_port < 0 else grpc_port, metrics_port=None if metrics_port < 0 else metrics_port,
            control_mode=model_control_mode.value, load_models=list(load_model),
            repository_poll_secs=repository_poll_secs, strict_readiness=strict_readiness,
            exit_timeout_secs=exit_timeout_secs, model_config_name=model_config_name,
            http_max_input_size=http_max_input_size, cache_config=list(cache_config), trace_config=list(trace_config),
            metrics_config=list(metrics_config), http_header_forward_pattern=http_header_forward_pattern,
            grpc_header_forward_pattern=grpc_header_forward_pattern,
            http_restricted_api=list(http_restricted_api), grpc_restricted_protocol=list(grpc_restricted_protocol),
            log_verbose=log_verbose, log_format=log_format.value,
            extra_args=([f"--backend-directory={backend_directory.resolve()}"] if backend_directory else [])
            + ([] if exit_on_error else ["--exit-on-error=false"])
            + (["--strict-model-config=true"] if strict_model_config else []) + metrics_flags
            + ([f"--rate-limit={rate_limit}"] if rate_limit != "off" else [])
            + [f"--rate-limit-resource={resource}" for resource in rate_limit_resource]
            + [f"--backend-config={setting}" for setting in backend_config]
            + ([f"--log-file={log_file}"] if log_file else [])
            + [f"--log-{level}={value}" for level, value in (("info", log_info), ("warning", log_warning),
                                                             ("error", log_error)) if value is not None]
            + ([f"--id={server_id}"] if server_id != "triton" else [])
            + list(without_effect) + list(triton_arg))  # tritonserver's own tuning options take effect there
        raise typer.Exit(serve_with_tritonserver(triton_options, tritonserver, validate=not skip_validation))
    for setting in without_effect:
        logging.getLogger("tritonctl.serve").warning("%s: a tritonserver option without effect on this server", setting)
    options = ServeOptions(
        repository=repository.resolve(), host=host,
        http_port=None if http_port < 0 else http_port, grpc_port=None if grpc_port < 0 else grpc_port,
        metrics_port=None if metrics_port < 0 else metrics_port, control_mode=model_control_mode.value,
        load_models=list(load_model), repository_poll_secs=repository_poll_secs, strict_readiness=strict_readiness,
        exit_timeout_secs=exit_timeout_secs, model_config_name=model_config_name,
        http_max_input_size=http_max_input_size, cache_config=list(cache_config), trace_config=list(trace_config),
        metrics_config=list(metrics_config), grpc_transport=grpc_transport.value, http_transport=http_transport.value,
        python_isolation=python_isolation.value, http_header_forward_pattern=http_header_forward_pattern,
        grpc_header_forward_pattern=grpc_header_forward_pattern, http_restricted_api=list(http_restricted_api),
        grpc_restricted_protocol=list(grpc_restricted_protocol), log_verbose=log_verbose, log_format=log_format.value,
        log_file=str(log_file or ""), log_info=records["info"], log_warning=records["warning"],
        log_error=records["error"], server_id=server_id,
        backend_directory=backend_directory.resolve() if backend_directory else None, exit_on_error=exit_on_error,
        strict_model_config=strict_model_config,
        rate_limit=execution_count, rate_limit_resources=list(rate_limit_resource), backend_config=list(backend_config),
        allow_cpu_metrics=cpu_metrics_on, metrics_interval_ms=interval_ms)
    runtime = ServerRuntime(options)
    loop = new_event_loop()
    runtime.install_signal_handlers(loop)
    try:
        loop.run_until_complete(runtime.serve())
    except OSError as exc:
        raise CliError(f"cannot start the server: {exc}") from None
    finally:
        loop.close()
    if not runtime.clean_stop:  # something was cut (logged): threads left in a model must not hold the exit
        exit_now(1)


def _one_repository(argument: Path | None, flags: list[Path]) -> Path | None:
    """The repository named by the argument or by --model-repository: one of them, once."""
    named = ([argument] if argument is not None else []) + list(flags)
    if len(named) > 1:
        listed = ", ".join(str(p) for p in named)
        raise CliError(f"serve takes one model repository, got {len(named)} ({listed}); serve each on its own ports, "
                       "or gather the models into one repository", 2)
    return named[0] if named else None


def _configure_logging(verbose: int, log_format: LogFormat, log_file: Path | None) -> None:
    from tritonctl.serve.core.log_settings import DATE_FORMATS

    try:
        logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, filename=log_file,
                            format="%(asctime)s %(levelname).1s %(name)s] %(message)s",
                            datefmt=DATE_FORMATS[log_format.value])
    except OSError as exc:
        raise CliError(f"failed to open log file {log_file}: {exc.strerror}", 2) from None
    if not verbose:
        logging.getLogger("uvicorn").setLevel(logging.WARNING)
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)


def register(app: typer.Typer) -> None:
    """Add ``tritonctl serve`` to ``app``."""
    app.command("serve", help=HELP, cls=TritonserverCommandLine)(serve)


def _tritonserver_bool(value: str | None) -> bool:
    """A tritonserver boolean option's value (absent: true), refused in its words."""
    return value is None or parse_bool(value)


def _tritonserver_int(value: str | None, default: int) -> int:
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise CliError(f"Invalid option value. Got {value}", 2) from None
    if number <= 0:
        raise CliError(f"Invalid option value. Got {value}", 2)
    return number
