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
                                server_header=False, date_header=False, timeout_keep_alive=IDLE_TIMEOUT_S)
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


# The most a request's line and headers may take, as in the C++ transport (over_limit.h kMaxHead).
MAX_HEAD_BYTES = 64 * 1024
# Seconds a connection may stay silent while no request of it is being answered: idle between
# requests, before its first, or in the middle of a head; as the C++ transport (evhttp_set_timeout).
IDLE_TIMEOUT_S = 30


def _chunked_with_length_protocol(keep_sent_headers: bool = False):
    """uvicorn's httptools protocol, except that a request carrying both ``Transfer-Encoding:
    chunked`` and ``Content-Length`` is read as chunked (RFC 9112 6.3: Transfer-Encoding wins)
    instead of refused with 400. Triton (libevent) and the C++ transport accept it, and clients
    such as ``requests`` send both when given a pre-chunked body and the header (Triton's L0_http).
    ``keep_sent_headers``: the scope also gets the headers' names as sent (ASGI's are lower case),
    in the order of its ``headers``, under ``SENT_NAMES``: forwarded headers are named so (httptools
    keeps a value's trailing whitespace, as Triton does).

    A head (request line and headers, without their line ends, as libevent counts them) over
    ``MAX_HEAD_BYTES`` is refused with 400 and the connection closed, as in the C++ transport:
    uvicorn keeps a head whole in memory and sets no bound of its own. The head's complete lines
    are counted as the parser gives them; a line still incomplete is counted over the reads that
    find the head begun and still not complete, so memory stays within the limit plus one read.
    A connection silent for ``IDLE_TIMEOUT_S`` before its first request or within a head is closed."""
    import json

    import httptools
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from tritonctl.serve.http.asgi import SENT_NAMES

    refusal = json.dumps({"error": f"Request header exceeds the maximum allowed size of {MAX_HEAD_BYTES} bytes"},
                         separators=(",", ":")).encode()

    class Protocol(HttpToolsProtocol):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.parser.set_dangerous_leniencies(lenient_chunked_length=True)
            self._in_head = False
            self._head_lines = 0  # the bytes of the head's complete lines
            self._head_reads = 0  # the bytes of the reads that found the head begun and left it incomplete
            self._refused = False

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._await_data()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._in_head = True
            self._head_lines = self._head_reads = 0

        def on_url(self, url: bytes) -> None:
            super().on_url(url)
            self._count(len(url) + len("GET  HTTP/1.1"))

        def on_header(self, name: bytes, value: bytes) -> None:
            super().on_header(name, value)
            if keep_sent_headers:
                self.scope.setdefault(SENT_NAMES, []).append(name)
            self._count(len(name) + len(value) + 2)

        def on_headers_complete(self) -> None:
            self._in_head = False
            super().on_headers_complete()

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            in_head = self._in_head
            super().data_received(data)
            if in_head and self._in_head and not self._refused:
                self._head_reads += len(data)
                if self._head_reads > MAX_HEAD_BYTES:
                    self._refuse()
            if not self._refused:
                self._await_data()

        def _await_data(self) -> None:
            """Close the connection if it stays silent for IDLE_TIMEOUT_S with no request being
            answered: uvicorn times out only the wait between requests, so a connection that
            never sends, or stops in the middle of a head, would stay open for good."""
            if self.cycle is not None and not self.cycle.response_complete:
                return  # a request is being answered: its reply comes first
            if self.timeout_keep_alive_task is not None:
                self.timeout_keep_alive_task.cancel()
            self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive,
                                                                self.timeout_keep_alive_handler)

        def send_400_response(self, msg: str) -> None:
            if not self._refused:  # else refused already, and the parser stopped on it
                super().send_400_response(msg)

        def _count(self, size: int) -> None:
            self._head_lines += size
            if self._head_lines > MAX_HEAD_BYTES:
                self._refuse()
                raise httptools.HttpParserError("request head too long")  # stops the parser

        def _refuse(self) -> None:
            self._refused = True
            self.transport.write(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
                                 b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(refusal), refusal))
            self.transport.close()

    return Protocol
