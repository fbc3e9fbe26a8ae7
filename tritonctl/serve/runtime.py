"""Runs the whole server on one event loop: HTTP (C++ transport or uvicorn), gRPC (C++ transport or grpc.aio),
metrics, repository polling, and a graceful stop that answers every in-flight request."""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from tritonctl.serve import backends
from tritonctl.serve.core.cache import ResponseCache, parse_cache_config
from tritonctl.serve.core.manager import ModelManager
from tritonctl.serve.core.server import InferenceServer
from tritonctl.optional import onnxruntime_conflict
from tritonctl.serve.core.trace_config import parse_trace_config

log = logging.getLogger("tritonctl.serve")


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
    # gRPC transport: "native" (C++), "aio" (grpc.aio) or "auto" (native when built)
    grpc_transport: str = "auto"
    # HTTP transport: "native" (C++, libevent), "uvicorn" or "auto" (native when built)
    http_transport: str = "auto"
    # tritonserver's --trace-config values, e.g. ["triton,file=trace.json", "level=TIMESTAMPS", "rate=1"]
    trace_config: list[str] = field(default_factory=list)


class ServerRuntime:
    def __init__(self, options: ServeOptions):
        self.options = options
        cache_bytes = parse_cache_config(options.cache_config)  # CacheConfigError (a ValueError) when bad
        self.response_cache = ResponseCache(cache_bytes) if cache_bytes else None
        self.manager = ModelManager(options.repository, backends.registry(), options.control_mode,
                                    options.model_config_name, options.strict_readiness, options.exit_timeout_secs,
                                    self.response_cache)
        trace = parse_trace_config(options.trace_config)  # TraceConfigError (a ValueError) when bad
        self.server = InferenceServer(self.manager, trace)
        self.http_port: int | None = None
        self.grpc_port: int | None = None
        self.metrics_port: int | None = None
        self.started = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.startup_error: BaseException | None = None

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

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        opts = self.options
        await self._loop.run_in_executor(None, self.load_initial_models)
        front_ends: list = []  # each with ``port``, ``transport_name`` and ``async stop(grace_s)``
        http = grpc = None
        poller: asyncio.Task | None = None
        try:
            if opts.http_port is not None:
                handlers = HttpHandlers(self.server, opts.http_max_input_size)
                http = await start_http(handlers, opts.host, opts.http_port, opts.http_transport,
                                        opts.exit_timeout_secs)
                front_ends.append(http)
                self.http_port = http.port
            if opts.grpc_port is not None:
                grpc = await start_grpc(self.server, f"{opts.host}:{opts.grpc_port}", opts.grpc_transport)
                front_ends.append(grpc)
                self.grpc_port = grpc.port
            if opts.metrics_port is not None:
                metrics = UvicornFrontEnd(MetricsApp(self.manager), opts.host, opts.metrics_port,
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
        """Stop accepting, let in-flight requests finish (up to --exit-timeout-secs), then stop models."""
        self.server.stopping = True
        if poller is not None:
            poller.cancel()
        timeout = self.options.exit_timeout_secs
        if front_ends:
            await asyncio.wait([asyncio.ensure_future(f.stop(timeout)) for f in front_ends], timeout=timeout + 1)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.manager.stop, 1.0)
        self.server.close()  # shared-memory regions released, buffered traces written
        self.server.live = False

    def request_stop(self) -> None:
        """Thread-safe: begin the graceful stop."""
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)


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
