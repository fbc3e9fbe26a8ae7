"""The HTTP transport in Python: an ASGI application on uvicorn, where the C++ one (native.py) is
not built. A thin edge: it reads the whole request, hands it to ``handlers.HttpHandlers`` and
writes what it answers (status, headers, body); an inference reply is made on the thread that
finishes the request and handed to the loop only to be written."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

from tritonctl.serve.core.errors import ServeError, Status
from tritonctl.serve.core.server import LoopCompletions
from tritonctl.serve.http.handlers import HttpHandlers, HttpRequest, header_value, infer_target, not_utf8, too_large

# The scope key under which the HTTP protocol (``_chunked_with_length_protocol``) keeps the
# headers' names as the client spelled them, in the order of the scope's ``headers``.
SENT_NAMES = "tritonctl.sent_header_names"


class AsgiApp:
    def __init__(self, handlers: HttpHandlers):
        self.handlers = handlers
        self._completions: LoopCompletions | None = None  # inference replies, handed to the loop

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        answered: list = []  # (status, headers, body), once answered

        def answer(*reply) -> None:
            answered.append(reply)

        try:
            path = _raw_path(scope)
            request = HttpRequest(scope["method"], path, scope["headers"], await self._read(receive, scope["headers"]),
                                  _sent_headers(scope))
        except ServeError as exc:  # not UTF-8, too large, or the client went away
            request = HttpRequest(scope["method"], "/", scope["headers"], b"")
            self.handlers.refuse(request, exc, answer)
        else:
            target = infer_target(request.method, request.path)
            if target is None:
                await self.handlers.handle(request, answer)
            else:
                answered.append(await self._infer(request, *target, receive))
        status, headers, body = answered[0]
        if isinstance(body, list):
            body = b"".join(body)
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _read(self, receive, headers: list) -> bytes:
        limit = self.handlers.max_input_size
        declared = header_value(headers, b"content-length")
        if declared and declared.isdigit() and int(declared) > limit:  # refused before the body is read
            raise too_large(limit, int(declared))
        chunks = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ServeError(Status.CANCELLED, "the client closed the connection")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise too_large(limit)
            chunks.append(chunk)
            if not message.get("more_body"):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _infer(self, request: HttpRequest, model: str, version: str, receive) -> tuple:
        loop = asyncio.get_running_loop()
        if self._completions is None or self._completions.loop is not loop:
            self._completions = LoopCompletions(loop)
        completions = self._completions
        future = loop.create_future()
        call = self.handlers.begin_infer(model, version, request,
                                         lambda *answer: completions.push(future, answer, None))
        if call is None:  # refused: answered
            return await future
        self.handlers.submit_infer(call)
        # receive() returns again only when the client disconnects: then the request is marked
        # cancelled, and the batcher drops it if it has not started running.
        watcher = asyncio.ensure_future(receive())
        watcher.add_done_callback(lambda task: _disconnected(task) and call.cancel())
        try:
            return await future
        finally:
            if not watcher.done():
                watcher.cancel()


def _sent_headers(scope) -> list | None:
    """The headers with their names as the client spelled them, where the protocol kept those."""
    names = scope.get(SENT_NAMES)
    if names is None:
        return None
    return [(name, value) for name, (_, value) in zip(names, scope["headers"])]


def _raw_path(scope) -> str:
    """The path as sent (percent-encoded; the handler decodes each segment)."""
    raw = scope.get("raw_path")
    if raw is None:  # a server that gives only the decoded path
        return quote(scope["path"], safe="/")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise not_utf8() from None


def _disconnected(task: asyncio.Future) -> bool:
    return not task.cancelled() and task.exception() is None and task.result().get("type") == "http.disconnect"
