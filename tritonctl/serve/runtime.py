"""Runs the whole server on one event loop: HTTP (C++ transport or uvicorn), gRPC (C++ transport or grpc.aio),
metrics, repository polling, and a stop that always ends: on SIGTERM or SIGINT the server stops
accepting, in-flight requests get ``--exit-timeout-secs`` to be answered, and what is still in
flight then is answered with UNAVAILABLE and named in the log (exit status 1); SIGTERM or SIGINT
during the stop exits at once."""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import os
import signal
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tritonctl.serve import backends
from tritonctl.serve.core.backend_config import default_max_batch_size, parse_backend_config
from tritonctl.serve.core.cache import ResponseCache, parse_cache_config
from tritonctl.serve.core.config import DEFAULT_MAX_BATCH_SIZE, available_gpus
from tritonctl.serve.core.errors import unavailable
from tritonctl.serve.core.header_forward import header_forwarding
from tritonctl.serve.core.restrictions import grpc_restrictions, http_restrictions
from tritonctl.serve.core.manager import ModelManager
from tritonctl.serve.core.log_settings import LogSettings
from tritonctl.serve.core.rate_limiter import make_rate_limiter
from tritonctl.serve.core.server import InferenceServer
from tritonctl.optional import onnxruntime_conflict
from tritonctl.serve.core.trace_config import parse_trace_config
from tritonctl.serve.metrics.config import parse_metrics_config

log = logging.getLogger("tritonctl.serve")

# After the exit timeout: time for the answers of the requests cut then to be written out.
FLUSH_S = 0.5
# Least time models get to stop (finalize) once nothing is in flight.
MODEL_STOP_S = 1.0
# A process whose stop has not ended this long after the exit timeout (the event loop itself is
# stuck) is ended by faulthandler's watchdog thread, which needs no Python lock: status 1, every
# thread's stack on stderr.
WATCHDOG_S = 5.0


@dataclass
class ServeOptions:
    repository: Path
    host: str = "127.0.0.1"
    http_port: int | None = 8000  # None: not served; 0: any free port
    grpc_port: int | None = 8001
    metrics_port: int | None = 8002
    control_mode: str = "none"  # none | poll | explicit
    load_models: list[str] = field(default_factory=list)
    repository_poll_secs: float = 15.0
    strict_readiness: bool = True
    exit_timeout_secs: float = 30.0
    model_config_name: str | None = None
    http_max_input_size: int = 1 << 26
    # tritonserver's --cache-config values, e.g. ["local,size=1048576"]; empty: no response cache
    cache_config: list[str] = field(default_factory=list)
    # tritonserver's --metrics-config values, e.g. ["summary_latencies=true"]
    metrics_config: list[str] = field(default_factory=list)
    # tritonserver's --allow-cpu-metrics (nv_cpu_utilization, nv_cpu_memory_*) and --metrics-interval-ms
    # (how often the CPU utilization is sampled)
    allow_cpu_metrics: bool = True
    metrics_interval_ms: int = 2000
    # gRPC transport: "native" (C++), "aio" (grpc.aio) or "auto" (native when built)
    grpc_transport: str = "auto"
    # HTTP transport: "native" (C++, libevent), "uvicorn" or "auto" (native when built)
    http_transport: str = "auto"
    # tritonserver's --trace-config values, e.g. ["triton,file=trace.json", "level=TIMESTAMPS", "rate=1"]
    trace_config: list[str] = field(default_factory=list)
    # Python models: each instance in a stub process of its own ("process"), or in the server's ("thread")
    python_isolation: str = "process"
    # tritonserver's --http-header-forward-pattern / --grpc-header-forward-pattern: request headers
    # whose name matches become request parameters (core/header_forward.py); None: none are
    http_header_forward_pattern: str | None = None
    grpc_header_forward_pattern: str | None = None
    # tritonserver's --http-restricted-api / --grpc-restricted-protocol: categories of endpoints
    # that need a header (core/restrictions.py); empty: none do
    http_restricted_api: list[str] = field(default_factory=list)
    grpc_restricted_protocol: list[str] = field(default_factory=list)
    # tritonserver's --exit-on-error: a model that fails to load at start-up stops the server (the
    # CLI's default is tritonserver's, true; here false, so that an embedding program decides)
    exit_on_error: bool = False
    # tritonserver's --strict-model-config (--disable-auto-complete-config): a model without its
    # config file fails to load, and no backend completes a config (a Python model's
    # auto_complete_config is not run)
    strict_model_config: bool = False
    # tritonserver's --backend-directory: where Python-based backends (<dir>/<backend>/model.py) are
    # found; None: Triton's default, /opt/tritonserver/backends
    backend_directory: Path | None = None
    # tritonserver's --rate-limit=execution_count (True; False: off) and --rate-limit-resource values
    # (NAME:COUNT[:DEVICE]): instances run only with the resources their instance group asks for
    rate_limit: bool = False
    rate_limit_resources: list[str] = field(default_factory=list)
    # tritonserver's --backend-config values ([BACKEND,]SETTING=VALUE); default-max-batch-size is used
    backend_config: list[str] = field(default_factory=list)
    # tritonserver's --log-verbose and --log-format: the log settings the server starts with
    log_verbose: int = 0
    log_format: str = "default"
    # tritonserver's --log-file (the CLI writes the log there; it is reported by the logging API),
    # --log-info, --log-warning, --log-error (whether those records are written)
    log_file: str = ""
    log_info: bool = True
    log_warning: bool = True
    log_error: bool = True
    # tritonserver's --id: the name in the server metadata
    server_id: str = "triton"


class ServerRuntime:
    def __init__(self, options: ServeOptions):
        self.options = options
        cache_bytes = parse_cache_config(options.cache_config)  # CacheConfigError (a ValueError) when bad
        self.response_cache = ResponseCache(cache_bytes) if cache_bytes else None
        backend_config = parse_backend_config(options.backend_config)  # BackendConfigError (a ValueError)
        for setting in backend_config.unused():
            log.warning("--backend-config %s: taken, and without effect on this server", setting)
        self.manager = ModelManager(options.repository,
                                    backends.registry(options.python_isolation, options.backend_directory),
                                    options.control_mode,
                                    options.model_config_name, options.strict_readiness, options.exit_timeout_secs,
                                    self.response_cache, auto_complete=not options.strict_model_config,
                                    rate_limiter=make_rate_limiter(options.rate_limit, options.rate_limit_resources),
                                    default_max_batch_size=default_max_batch_size(backend_config,
                                                                                  DEFAULT_MAX_BATCH_SIZE))
        trace = parse_trace_config(options.trace_config)  # TraceConfigError (a ValueError) when bad
        # HeaderPatternError (a ValueError) when a pattern is not a regular expression
        self.http_forwarding = header_forwarding(options.http_header_forward_pattern, "--http-header-forward-pattern")
        self.grpc_forwarding = header_forwarding(options.grpc_header_forward_pattern, "--grpc-header-forward-pattern")
        self.http_restrictions = http_restrictions(options.http_restricted_api)  # RestrictionError (a ValueError)
        self.grpc_restrictions = grpc_restrictions(options.grpc_restricted_protocol)
        self.metrics_config = parse_metrics_config(options.metrics_config)  # MetricsConfigError (a ValueError)
        log_settings = LogSettings(options.log_verbose, options.log_format, options.log_file, options.log_info,
                                   options.log_warning, options.log_error)
        self.server = InferenceServer(self.manager, trace, log_settings, options.server_id)
        self.http_port: int | None = None
        self.grpc_port: int | None = None
        self.metrics_port: int | None = None
        self.started = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.startup_error: BaseException | None = None
        # False once the stop cut something: a request, a model load, a model that did not stop.
        self.clean_stop = True
        self._signalled = False

    def load_initial_models(self) -> None:
        opts = self.options
        if opts.control_mode == "explicit":
            names = self.manager.model_names_on_disk() if "*" in opts.load_models else opts.load_models
            self.manager.load_all(names)
        else:
            self.manager.load_all()

    async def serve(self) -> None:
        """Load the repository, serve until ``request_stop``, then drain and stop."""
        from tritonctl.serve.grpc import start_front_end as start_grpc
        from tritonctl.serve.http import UvicornFrontEnd
        from tritonctl.serve.http import start_front_end as start_http
        from tritonctl.serve.http.handlers import HttpHandlers
        from tritonctl.serve.metrics import MetricsApp
        from tritonctl.serve.metrics.system import CpuMetrics

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        opts = self.options
        loading = self._loop.run_in_executor(None, self.load_initial_models)
        stop = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait([loading, stop], return_when=asyncio.FIRST_COMPLETED)
        if not loading.done():  # stopped while models load: what loads is left behind
            log.error("stopped while loading models: %s cut", describe_loads(self.manager.loading) or "the loads")
            self.clean_stop = False
            self.server.live = False
            return
        stop.cancel()
        loading.result()
        failed = self.manager.failed_models()
        if opts.exit_on_error and failed:  # as tritonserver: "failed to load all models"
            log.error("failed to load all models (%s did not load): exiting, as --exit-on-error asks "
                      "(--no-exit-on-error serves the others)", ", ".join(f"'{name}'" for name in failed))
            self.startup_error = RuntimeError("failed to load all models")
            self.clean_stop = False
            self.server.live = False
            self.started.set()  # whoever waits for the start learns of the failure now
            return
        cpu = CpuMetrics(opts.metrics_interval_ms) if opts.allow_cpu_metrics else None
        metrics_app = MetricsApp(self.manager, self.metrics_config, cpu) if opts.metrics_port is not None else None
        front_ends: list = []  # each with ``port``, ``transport_name`` and ``async stop(grace_s)``
        http = grpc = None
        poller: asyncio.Task | None = None
        try:
            if opts.http_port is not None:
                handlers = HttpHandlers(self.server, opts.http_max_input_size, self.http_forwarding,
                                        self.http_restrictions)
                http = await start_http(handlers, opts.host, opts.http_port, opts.http_transport,
                                        opts.exit_timeout_secs)
                front_ends.append(http)
                self.http_port = http.port
            if opts.grpc_port is not None:
                grpc = await start_grpc(self.server, f"{opts.host}:{opts.grpc_port}", opts.grpc_transport,
                                        self.grpc_forwarding, self.grpc_restrictions)
                front_ends.append(grpc)
                self.grpc_port = grpc.port
            if opts.metrics_port is not None:
                metrics = UvicornFrontEnd(metrics_app, opts.host, opts.metrics_port,
                                          opts.exit_timeout_secs)
                front_ends.append(metrics)
                await metrics.start()
                self.metrics_port = metrics.port
            if opts.control_mode == "poll":
                poller = asyncio.ensure_future(self._poll())
        except BaseException as exc:
            self.startup_error = exc
            self.started.set()
            await self._shutdown(front_ends, poller)
            raise
        log.info("transports: %s", ", ".join(f"{protocol} over {front_end.transport_name}" for protocol, front_end
                                             in (("HTTP", http), ("gRPC", grpc)) if front_end is not None))
        conflict = onnxruntime_conflict()
        if conflict:
            log.warning("%s", conflict)
        # The analyzer's subprocess engine reads the ports from this line (analyzer/engine.py, SERVING_LINE).
        log.info("serving %s: HTTP %s, gRPC %s, metrics %s", opts.repository, self.http_port, self.grpc_port,
                 self.metrics_port)
        self.started.set()
        await self._stop.wait()
        await self._shutdown(front_ends, poller)

    async def _poll(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.options.repository_poll_secs)
            await loop.run_in_executor(None, self.manager.poll)

    async def _shutdown(self, front_ends: list, poller: asyncio.Task | None) -> None:
        """Stop accepting; in-flight requests get --exit-timeout-secs to be answered, then what is
        still in flight is cut (answered UNAVAILABLE, named in the log); then models stop."""
        self.server.stopping = True
        if poller is not None:
            poller.cancel()
        loop = asyncio.get_running_loop()
        timeout = self.options.exit_timeout_secs
        deadline = loop.time() + timeout
        stops = [asyncio.ensure_future(f.stop(timeout + FLUSH_S)) for f in front_ends]
        in_flight = self.server.in_flight
        if not await in_flight.drained(timeout):
            cut = in_flight.cut(lambda model: unavailable(
                f"Server is stopping: the request to model '{model}' was not answered within the exit timeout "
                f"({timeout:g} s)"))
            if cut:
                self.clean_stop = False
                log.error("exit timeout of %g s expired: cut %s", timeout, describe_requests(cut))
        for stream in list(self.server.streams):  # nothing in flight: open streams end
            stream.end()
        if stops:
            await asyncio.wait(stops, timeout=max(deadline - loop.time(), 0) + FLUSH_S + 1)
        if not await self._stop_models(max(deadline - loop.time(), MODEL_STOP_S)):
            self.clean_stop = False
            log.error("%s still running after the exit timeout: exiting without waiting for them",
                      describe_loads(self.manager.loading) or "models")
        self.server.close()  # shared-memory regions released, buffered traces written
        self.server.live = False

    async def _stop_models(self, timeout_s: float) -> bool:
        """Stop every model version (finalize), on a thread of its own that a model stuck in
        execute or finalize may keep: True when all stopped within ``timeout_s``."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def stop() -> None:
            try:
                self.manager.stop(timeout_s)
            finally:
                try:
                    loop.call_soon_threadsafe(lambda: done.done() or done.set_result(None))
                except RuntimeError:  # the loop has closed: the server no longer waits
                    pass

        threading.Thread(target=stop, daemon=True, name="tritonctl-stop-models").start()
        finished, _ = await asyncio.wait([done], timeout=timeout_s + FLUSH_S)
        return bool(finished)

    def install_signal_handlers(self, loop: asyncio.AbstractEventLoop) -> None:
        """For the server's own process: SIGTERM or SIGINT begins the stop, either again exits at once."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)

    def _on_signal(self, sig: int) -> None:
        name = signal.Signals(sig).name
        if self._signalled:
            in_flight = self.server.in_flight.by_model()
            if in_flight:
                log.error("%s while stopping: exiting at once, cutting %s", name, describe_requests(in_flight))
            else:
                log.warning("%s while stopping: exiting at once", name)
            exit_now(1 if in_flight else 0)
        self._signalled = True
        timeout = self.options.exit_timeout_secs
        log.info("%s: stopping; requests in flight get up to %g s (--exit-timeout-secs), SIGTERM or SIGINT "
                 "again exits at once", name, timeout)
        faulthandler.dump_traceback_later(timeout + WATCHDOG_S, exit=True)
        self.request_stop()

    def request_stop(self) -> None:
        """Thread-safe: begin the graceful stop."""
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)


def model_gpus(backend: str) -> tuple[int, ...]:
    """The GPU ids this server gives a model of ``backend`` (none where its runtime here has no CUDA)."""
    return available_gpus(backend)


def describe_requests(counts: Counter) -> str:
    """``2 requests of model 'a', 1 request of model 'b'``"""
    return ", ".join(f"{n} request{'s' if n != 1 else ''} of model '{model}'" for model, n in sorted(counts.items()))


def describe_loads(names) -> str:
    """``the load of model 'a'``, ``the loads of models 'a', 'b'``; "" for none."""
    names = sorted(names)
    if not names:
        return ""
    quoted = ", ".join(f"'{name}'" for name in names)
    return f"the load of model {quoted}" if len(names) == 1 else f"the loads of models {quoted}"


def exit_now(status: int) -> None:
    """End the process at once, logs written: threads stuck in a model must not hold it."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


class BackgroundServer:
    """The server on its own thread and event loop: for tests and embedding. Always ``stop()`` it
    (or use it as a context manager)."""

    def __init__(self, options: ServeOptions):
        self.runtime = ServerRuntime(options)
        self._thread = threading.Thread(target=self._run, daemon=True, name="tritonctl-serve")
        self.error: BaseException | None = None

    def _run(self) -> None:
        loop = new_event_loop()
        try:
            loop.run_until_complete(self.runtime.serve())
        except BaseException as exc:
            self.error = exc
            self.runtime.started.set()
        finally:
            loop.close()

    def start(self, timeout_s: float = 60.0) -> "BackgroundServer":
        self._thread.start()
        if not self.runtime.started.wait(timeout_s):
            raise TimeoutError("the server did not start in time")
        if self.error is not None or self.runtime.startup_error is not None:
            raise RuntimeError(f"the server failed to start: {self.error or self.runtime.startup_error}")
        return self

    def stop(self, timeout_s: float = 60.0) -> None:
        self.runtime.request_stop()
        self._thread.join(timeout_s)

    def __enter__(self) -> "BackgroundServer":
        return self.start()

    def __exit__(self, *_exc) -> None:
        self.stop()

    @property
    def http_url(self) -> str:
        return f"{self.runtime.options.host}:{self.runtime.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{self.runtime.options.host}:{self.runtime.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.runtime.options.host}:{self.runtime.metrics_port}/metrics"
