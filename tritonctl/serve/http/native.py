"""The HTTP transport in C++ (``_native``, libevent's evhttp on a thread of its own): connections
and HTTP/1.1 parsing run without the GIL, and the event loop sees whole requests in bursts,
through one file descriptor. A thin edge: every request goes to ``handlers.HttpHandlers``, and
what it answers (status, headers, body) is written. An inference request, the hot path, is
decoded on the loop and answered by the thread that finishes it, with no coroutine per request
and no hop back through the loop.

Built when ``pip install`` finds libevent (``pkg-config libevent_pthreads``, Debian's
``libevent-dev``); without it ``available()`` is False and the server uses uvicorn.
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus

from tritonctl.serve.http.chunked import ChunkedBody
from tritonctl.serve.http.handlers import HttpHandlers, HttpRequest, inference_target, not_utf8
from tritonctl.serve.native_front_end import NativeFrontEnd, import_native, make_transport

# Not built where the package was installed without libevent.
_native, UNAVAILABLE_REASON, NOT_BUILT = import_native("tritonctl.serve.http._native")

REASONS = {status.value: status.phrase for status in HTTPStatus}


def available() -> bool:
    return _native is not None


class NativeHttpFrontEnd(NativeFrontEnd):
    """``handlers`` on ``host:port`` (0: any free port)."""

    transport_name = "libevent (C++ transport)"

    def __init__(self, handlers: HttpHandlers, host: str, port: int):
        # The transport keeps the headers as sent (names' spelling, values' trailing whitespace) only
        # where headers are forwarded.
        self.keep_sent_headers = handlers.forwarding is not None
        keeps = {"keep_sent_headers": True} if self.keep_sent_headers else {}
        super().__init__(lambda: make_transport(lambda **keep: _native.Server(host, port, handlers.max_input_size,
                                                                              **keep), keeps, "HTTP", "uvicorn"))
        self.handlers = handlers
        self.running: dict = {}  # http request -> its InferCall, until answered

    def _on_events(self) -> None:
        for kind, http in self.transport.take_events():
            if kind == _native.CANCEL:  # the client has gone: its request is dropped before it runs
                call = self.running.get(http)
                if call is not None:
                    call.cancel()
                continue
            try:
                path = http.path  # as sent, percent-encoded: the handler decodes each segment
            except UnicodeDecodeError:  # raw bytes that are not UTF-8
                self.handlers.refuse(HttpRequest(http.method, "/", http.headers, b""), not_utf8(),
                                     lambda status, headers, body: _write(http, status, headers, body))
                continue
            request = HttpRequest(http.method, path, http.headers, http.take_body(),
                                  http.sent_headers if self.keep_sent_headers else None)
            target = inference_target(request.method, path)
            if target is None:
                asyncio.ensure_future(self._route(http, request))
            else:
                self._infer(http, request, *target)

    async def _route(self, http, request: HttpRequest) -> None:
        await self.handlers.handle(request, lambda status, headers, body: _write(http, status, headers, body))

    def _infer(self, http, request: HttpRequest, action: str, model: str, version: str) -> None:
        call = self.handlers.begin(action, model, version, request,
                                   lambda status, headers, body: self._answer(http, status, headers, body))
        if call is not None:
            self.running[http] = call
            self.handlers.submit_infer(call)

    def _answer(self, http, status: int, headers: list, body) -> None:
        """On the thread that finished the request (the transport is thread-safe). A streamed
        reply stays open, and its request cancellable, until its body ends."""
        if isinstance(body, ChunkedBody):
            http.start(status, REASONS.get(status, ""), headers)
            body.attach(http.write, lambda: self._end(http))
            return
        self.running.pop(http, None)
        _write(http, status, headers, body)

    def _end(self, http) -> None:
        self.running.pop(http, None)
        http.end()


def _write(http, status: int, headers: list, body) -> None:
    http.finish(status, REASONS.get(status, ""), headers, body)
