"""``POST v2/models/MODEL[/versions/V]/generate`` and ``/generate_stream``, Triton's generate
extension, without a transport: the request decoded (generate_codec.py), and the reply made of
the model's responses as Triton 2.51 makes it.

- ``generate``: one JSON object once the request is complete. A model that answers with other
  than exactly one response gets Triton's "generate expects model to produce exactly 1 response"
  error in the body.
- ``generate_stream``: Server-Sent Events, ``data: JSON\\n\\n`` per response (an error as
  ``data: {"error": ...}``), each sent as it comes, in a chunked reply of type
  ``text/event-stream; charset=utf-8``.

The status is decided by the first response: 400 when it is an error, else 200; later errors only
show in the body. A request refused before it runs (bad JSON, an unknown model, missing inputs)
is answered with a plain JSON error, as for ``infer``."""

from __future__ import annotations

import threading
from typing import Callable

from tritonctl.serve.core.errors import ServeError, invalid_arg
from tritonctl.serve.core.names import check_model_name
from tritonctl.serve.core.types import InferRequest
from tritonctl.serve.http.chunked import ChunkedBody
from tritonctl.serve.http.codec import error_body
from tritonctl.serve.http.generate_codec import GenerateDecoder, encode_response
from tritonctl.serve.http.json_reader import JsonSyntaxError, read

JSON = [(b"content-type", b"application/json")]
EVENT_STREAM = [(b"content-type", b"text/event-stream; charset=utf-8")]
ONE_RESPONSE = ("generate expects model to produce exactly 1 response, use generate stream for model that "
                "generates various number of responses")
ACTIONS = {"generate": False, "generate_stream": True}  # route -> whether it streams


def decode_generate(server, model: str, version: str, encoding: bytes | None, body: bytes) -> InferRequest:
    """The InferRequest of a generate request's body, checked in Triton's order: the model, the
    Content-Encoding (only identity), the JSON, then each key."""
    check_model_name(model)
    inputs = server.model_metadata(model, version)["inputs"]
    if encoding is not None and encoding != b"identity":
        raise invalid_arg("Unsupported content-encoding, only 'identity' is supported.")
    try:
        doc = read(body)
    except JsonSyntaxError as exc:
        raise invalid_arg(f"failed to parse the request JSON buffer: {exc}") from None
    return GenerateDecoder(model, version, inputs).decode(doc)


class GenerateReply:
    """Turns one request's responses (``on_response``, from the threads that send them) into its
    reply: ``answer(status, headers, body)`` once, with bytes, or for a stream with a
    ChunkedBody that gets each event. ``finished()`` runs once the reply is complete."""

    def __init__(self, streaming: bool, answer: Callable, finished: Callable[[], None]):
        self.streaming = streaming
        self.answer = answer
        self.finished = finished
        self.lock = threading.Lock()
        self.calls = 0
        self.status = 200
        self.events: list[bytes] = []
        self.body: ChunkedBody | None = None
        self.done = False

    def on_response(self, response, error: ServeError | None, final: bool) -> None:
        with self.lock:
            if self.done:
                return
            event = None
            if response is not None or error is not None:
                event, error = self.event(response, error)
            if self.calls == 0:  # the first call, a flag alone included, decides the status
                self.status = 200 if error is None else 400
            self.calls += 1
            if self.streaming:
                self.stream(event, final)
            elif event is not None:
                self.events.append(event)
            if final:
                self.done = True
                if not self.streaming:
                    body = self.events[0] if len(self.events) == 1 else error_body(ONE_RESPONSE)
                    self.answer(self.status, JSON, body)
                self.finished()

    @staticmethod
    def event(response, error: ServeError | None) -> tuple[bytes, ServeError | None]:
        if error is None:
            try:
                return encode_response(response), None
            except ServeError as exc:
                error = exc
        return error_body(error), error

    def stream(self, event: bytes | None, final: bool) -> None:
        if self.body is None:
            self.body = ChunkedBody()
            self.answer(self.status, EVENT_STREAM, self.body)
        if event is not None:
            self.body.push(b"data: " + event + b"\n\n")
        if final:
            self.body.end()
