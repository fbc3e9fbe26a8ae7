"""The HTTP front end over the C++ transport (``_native``, libevent's evhttp on a thread of its
own): connections and HTTP/1.1 parsing run without the GIL, and the event loop sees whole
requests in bursts, through one file descriptor. Every endpoint is ``HttpApp``'s; an inference
request, the hot path, is decoded on the loop and answered by the thread that finishes it, with
no coroutine per request and no hop back through the loop.

Built when ``pip install`` finds libevent (``pkg-config libevent_pthreads``, Debian's
``libevent-dev``); without it ``available()`` is False and the server uses uvicorn.
"""

from __future__ import annotations

import asyncio
from functools import partial
from http import HTTPStatus
from urllib.parse import unquote

from tritonctl.serve.http.app import HttpApp, Reply, failure_reply, infer_reply, wire_form
from tritonctl.serve.native_front_end import NativeFrontEnd

try:
    from tritonctl.serve.http import _native
except ImportError as exc:  # not built: no libevent where the package was installed
    _native = None
    UNAVAILABLE_REASON = str(exc)
    NOT_BUILT = isinstance(exc, ModuleNotFoundError)  # else built, but it does not load
else:
    UNAVAILABLE_REASON = ""
    NOT_BUILT = False

REASONS = {status.value: status.phrase for status in HTTPStatus}


def available() -> bool:
    return _native is not None


def infer_target(method: str, path: str) -> tuple[str, str] | None:
    """(model, version) when ``path`` is ``/v2/models/NAME[/versions/N]/infer`` and the method POST."""
    if method != "POST" or not path.endswith("/infer"):
        return None
    parts = path.strip("/").split("/")
    if parts[:2] != ["v2", "models"] or not parts[2]:
        return None
    if len(parts) == 4:
        return parts[2], ""
    if len(parts) == 6 and parts[3] == "versions" and parts[4].isdigit():
        return parts[2], parts[4]
    return None


class NativeHttpFrontEnd(NativeFrontEnd):
    """``app`` on ``host:port`` (0: any free port)."""

    transport_name = "libevent (C++ transport)"

    def __init__(self, app: HttpApp, host: str, port: int):
        super().__init__(lambda: _native.Server(host, port, app.max_input_size))
        self.app = app
        self.running: dict = {}  # http request -> its InferRequest, until answered

    def _on_events(self) -> None:
        for kind, http in self.transport.take_events():
            if kind == _native.CANCEL:  # the client has gone: its request is dropped before it runs
                request = self.running.get(http)
                if request is not None:
                    request.cancelled = True
                continue
            path = http.path
            if "%" in path:
                path = unquote(path)
            target = infer_target(http.method, path)
            if target is None:
                asyncio.ensure_future(self._route(http, path))
            else:
                self._infer(http, *target)

    async def _route(self, http, path: str) -> None:
        """Every endpoint but inference, through the app's router."""
        headers = http.headers
        body = http.take_body()

        async def receive() -> dict:
            return {"type": "http.request", "body": body, "more_body": False}

        scope = {"type": "http", "method": http.method, "path": path, "query_string": http.query, "headers": headers}
        try:
            reply = await self.app.route(scope, receive)
        except Exception as exc:
            reply = failure_reply(exc, path)
        _send(http, reply, headers)

    # ---- inference -----------------------------------------------------------------------------
    def _infer(self, http, model: str, version: str) -> None:
        app = self.app
        headers = http.headers
        trace = app.server.traces.sample(model) if app.server.traces.enabled else None
        try:
            if trace is not None:
                trace.capture("HTTP_RECV_START")
            body = app.decoded_body(headers, http.take_body())
            if trace is not None:
                trace.capture("HTTP_RECV_END")
            request, options = app.infer_request(model, version, headers, body, trace)
            # Answered from the thread that finishes the request: a hop through the event loop
            # costs a thread wake-up, which at low load is a good part of the latency.
            request.complete = partial(self._answer, http, headers, request, options, trace)
            self.running[http] = request
            app.server.submit(request, "HTTP end point")
        except Exception as exc:
            self.running.pop(http, None)
            reply = failure_reply(exc, http.path)
            reply.trace = trace
            _send(http, reply, headers)

    def _answer(self, http, headers, request, options, trace, response, error) -> None:
        """``request.complete``, on a model instance's thread (the transport is thread-safe)."""
        self.running.pop(http, None)
        if error is not None:
            reply = failure_reply(error, http.path)
        else:
            try:
                reply = infer_reply(response, request, options, trace)
            except Exception as exc:  # an output that does not fit its shared-memory region, or a bug
                reply = failure_reply(exc, http.path)
        reply.trace = trace
        _send(http, reply, headers)


def _send(http, reply: Reply, request_headers: list) -> None:
    trace = reply.trace
    headers, body = wire_form(reply, request_headers)
    if trace is not None:
        trace.capture("HTTP_SEND_START")
    http.finish(reply.status, REASONS.get(reply.status, ""), headers, body)
    if trace is not None:
        trace.capture("HTTP_SEND_END")
        trace.finish()
