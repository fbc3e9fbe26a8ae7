"""KServe v2 HTTP/REST with Triton's extensions (handlers.py), over the C++ transport (native.py)
when it is built, else over uvicorn (asgi.py)."""

from __future__ import annotations

import asyncio
import contextlib
import socket


async def start_front_end(handlers, host: str, port: int, transport: str = "auto", exit_timeout_s: float = 30.0):
    """``handlers`` (an HttpHandlers) served on ``host:port`` and started. ``transport``: "native" (the C++
    transport; an error where it is not built), "uvicorn" or "auto" (native when built). The
    front end has ``port`` and ``async stop(grace_s)``."""
    from tritonctl.serve.http import native
    from tritonctl.serve.native_front_end import use_native

    if use_native("HTTP", transport, "uvicorn", native, "libevent", "libevent-dev"):
        front_end = native.NativeHttpFrontEnd(handlers, host, port)
    else:
        from tritonctl.serve.http.asgi import AsgiApp

        front_end = UvicornFrontEnd(AsgiApp(handlers), host, port, exit_timeout_s,
                                    keep_sent_headers=handlers.forwarding is not None)
    await front_end.start()
    return front_end


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound TCP socket with TCP_NODELAY, so accepted connections never wait on Nagle (D.4)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class UvicornFrontEnd:
    """An ASGI app (asgi.AsgiApp, or the metrics app) on uvicorn with httptools, on the running loop."""

    transport_name = "uvicorn (Python transport)"

    def __init__(self, app, host: str, port: int, exit_timeout_s: float, keep_sent_headers: bool = False):
        import uvicorn

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self):  # the server's runtime owns SIGINT/SIGTERM handling
                yield

        self._socket = listening_socket(host, port)
        self.port: int = self._socket.getsockname()[1]
        config = uvicorn.Config(app, http=_chunked_with_length_protocol(keep_sent_headers), loop="none",
                                lifespan="off", access_log=False, log_config=None,
                                timeout_graceful_shutdown=int(max(exit_timeout_s, 1)),
                                server_header=False, date_header=False, timeout_keep_alive=30)
        self._server = Server(config)
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        self._task = asyncio.ensure_future(self._server.serve(sockets=[self._socket]))
        while not self._server.started:
            if self._task.done():
                self._task.result()  # its error, if it raised one
                raise RuntimeError("the HTTP server failed to start")
            await asyncio.sleep(0.01)

    async def stop(self, grace_s: float) -> None:
        """Stop accepting; requests in flight get ``grace_s`` seconds to be answered."""
        self._server.config.timeout_graceful_shutdown = grace_s  # then uvicorn cancels what is left
        self._server.should_exit = True
        if self._task is not None:
            await asyncio.wait([self._task], timeout=grace_s + 1)


def _chunked_with_length_protocol(keep_sent_headers: bool = False):
    """uvicorn's httptools protocol, except that a request carrying both ``Transfer-Encoding:
    chunked`` and ``Content-Length`` is read as chunked (RFC 9112 6.3: Transfer-Encoding wins)
    instead of refused with 400. Triton (libevent) and the C++ transport accept it, and clients
    such as ``requests`` send both when given a pre-chunked body and the header (Triton's L0_http).
    ``keep_sent_headers``: the scope also gets the headers' names as sent (ASGI's are lower case),
    in the order of its ``headers``, under ``SENT_NAMES``: forwarded headers are named so (httptools
    keeps a value's trailing whitespace, as Triton does)."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from tritonctl.serve.http.asgi import SENT_NAMES

    class Protocol(HttpToolsProtocol):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.parser.set_dangerous_leniencies(lenient_chunked_length=True)

        if keep_sent_headers:
            def on_header(self, name: bytes, value: bytes) -> None:
                super().on_header(name, value)
                self.scope.setdefault(SENT_NAMES, []).append(name)

    return Protocol
