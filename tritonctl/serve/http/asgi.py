"""The HTTP transport in Python: an ASGI application on uvicorn, where the C++ one (native.py) is
not built. A thin edge: it reads the whole request, hands it to ``handlers.HttpHandlers`` and
writes what it answers (status, headers, body); an inference reply is made on the thread that
finishes the request and handed to the loop only to be written. A streamed reply (a ChunkedBody,
generate_stream's events) is written part by part as the parts come."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

from tritonctl.serve.core.errors import ServeError, Status
from tritonctl.serve.core.server import LoopCompletions
from tritonctl.serve.http.chunked import ChunkedBody
from tritonctl.serve.http.handlers import (HttpHandlers, HttpRequest, header_value, inference_target, not_utf8,
                                           too_large)

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
            target = inference_target(request.method, request.path)
            if target is not None:
                await self._infer(request, target, receive, send)
                return
            await self.handlers.handle(request, answer)
        await _send(send, *answered[0])

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

    async def _infer(self, request: HttpRequest, target: tuple[str, str, str], receive, send) -> None:
        loop = asyncio.get_running_loop()
        if self._completions is None or self._completions.loop is not loop:
            self._completions = LoopCompletions(loop)
        completions = self._completions
        future = loop.create_future()
        call = self.handlers.begin(*target, request, lambda *answer: completions.push(future, answer, None))
        if call is None:  # refused: answered
            await _send(send, *await future)
            return
        self.handlers.submit_infer(call)
        # receive() returns again only when the client disconnects: then the request is marked
        # cancelled, and the batcher drops it if it has not started running (a decoupled model
        # sees it cancelled). A streamed reply is watched until its end.
        watcher = asyncio.ensure_future(receive())
        watcher.add_done_callback(lambda task: _disconnected(task) and call.cancel())
        try:
            await _send(send, *await future)
        finally:
            if not watcher.done():
                watcher.cancel()


async def _send(send, status: int, headers: list, body) -> None:
    if isinstance(body, ChunkedBody):
        await _stream(send, status, headers, body)
        return
    if isinstance(body, list):
        body = b"".join(body)
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _stream(send, status: int, headers: list, body: ChunkedBody) -> None:
    """The head without a length (uvicorn then chunks the body), then each part as it comes."""
    loop = asyncio.get_running_loop()
    parts: asyncio.Queue = asyncio.Queue()

    def hand_over(part) -> None:
        try:
            loop.call_soon_threadsafe(parts.put_nowait, part)
        except RuntimeError:  # the loop is closed: the server has stopped
            pass

    body.attach(hand_over, lambda: hand_over(None))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    while (part := await parts.get()) is not None:
        await send({"type": "http.response.body", "body": part, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


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
