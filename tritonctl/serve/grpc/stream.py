"""``ModelStreamInfer`` (serving_protocol.md A.2): a bidirectional stream of ModelInferRequests and
ModelStreamInferResponses, the only way to call a decoupled model over gRPC.

As Triton's stream handler does: an ordinary model's response leaves in the order its request
came, a decoupled model's responses leave as the model sends them; an error is a message with
``error_message`` and the stream stays open; every response carries the parameter
``triton_final_response`` (true on a request's last response). An error's ``infer_response`` names
the request's id; a failed response's also names the model, the version asked for and the final
flag (a request refused before it ran has the id alone). A decoupled model's final flag
sent alone becomes a message of its own - an empty response with ``triton_final_response: true``
and no model version - only when the request asked for it with
``triton_enable_empty_final_response: true`` (tritonclient's
``async_stream_infer(..., enable_empty_final_response=True)``). The stream ends once the client
has stopped sending and every request has had its final response; a client that goes away
cancels its requests still in flight. A stream opened with the header ``triton_grpc_error: true``
(Triton 24.08+) ends at its first error instead, with that error as the gRPC status (Triton's code
and text), and its requests still in flight are cancelled. The stream's metadata that
``--grpc-header-forward-pattern`` forwards reaches each of its requests as parameters.
"""

from __future__ import annotations

import asyncio

from tritonclient.grpc import service_pb2

from tritonctl.serve.core.errors import ServeError
from tritonctl.serve.core.server import InferenceServer
from tritonctl.serve.core.types import InferRequest, InferResponse
from tritonctl.serve.grpc.codec import ENABLE_EMPTY_FINAL, decode_request, encode_response

FINAL_RESPONSE = "triton_final_response"


class _Pending:
    """A request of the stream waiting for its (final) response."""

    __slots__ = ("request", "ticket", "decoupled", "empty_final")

    def __init__(self, request: InferRequest, ticket: int, empty_final: bool):
        self.request = request
        self.ticket = ticket  # its place among the ordinary requests' responses
        self.decoupled = False
        self.empty_final = empty_final


class StreamSession:
    """One ModelStreamInfer call: ``async for message in StreamSession(server, requests).run()``."""

    def __init__(self, server: InferenceServer, request_iterator, grpc_error: bool = False,
                 forwarded: dict | None = None):
        self.server = server
        self.request_iterator = request_iterator
        self.grpc_error = grpc_error  # errors end the stream as its status (header triton_grpc_error)
        self.forwarded = forwarded or {}  # the stream's headers that every request gets as parameters
        self.outbox: asyncio.Queue = asyncio.Queue()
        self.reading = True
        self.in_flight: set[_Pending] = set()
        self.next_ticket = 0
        self.next_out = 0
        self.parked: dict[int, object] = {}  # ticket -> message (None: nothing to send in that place)
        self.reader: asyncio.Task | None = None
        self.failure: Exception | None = None  # why reading the client's messages failed

    async def run(self):
        self.reader = asyncio.ensure_future(self._read())
        self.server.streams.add(self)
        try:
            while True:
                message = await self.outbox.get()
                if message is None:
                    break
                if isinstance(message, ServeError):  # triton_grpc_error: the status ends the stream
                    raise message
                yield message
            if self.failure is not None:  # reading the client's messages failed: the stream ends with that status
                raise self.failure
        finally:
            self.server.streams.discard(self)
            self.reader.cancel()
            for pending in self.in_flight:  # the client is gone: drop what has not run yet
                pending.request.cancelled = True

    def end(self) -> None:
        """Read no more requests: the stream ends once those in flight are answered (the server stops)."""
        self.reader.cancel()

    async def _read(self) -> None:
        try:
            async for message in self.request_iterator:
                self._start(message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the transport could not give the client's next message
            self.failure = exc
        finally:
            self.reading = False
            self._maybe_end()

    def _start(self, message) -> None:
        ticket = self.next_ticket
        self.next_ticket += 1
        try:
            request = decode_request(message, self.server.shm)
            request.parameters.update(self.forwarded)
            param = message.parameters.get(ENABLE_EMPTY_FINAL)
            pending = _Pending(request, ticket, param is not None and param.bool_param)
            pending.decoupled = self.server.infer_stream(
                request, lambda response, error, final: self._on_response(pending, response, error, final))
        except ServeError as exc:
            self._place(ticket, self._refusal(exc, message.id))
            return
        self.in_flight.add(pending)
        if pending.decoupled:
            self._place(ticket, None)  # its responses leave as they come, holding no place

    def _on_response(self, pending: _Pending, response: InferResponse | None, error: ServeError | None,
                     final: bool) -> None:
        message = self._message(pending, response, error, final)
        if final:
            pending.request.release_shm()  # before the last answer leaves, as for a unary call
        if pending.decoupled:
            if message is not None:
                self.outbox.put_nowait(message)
        else:
            self._place(pending.ticket, message)
        if final:
            self.in_flight.discard(pending)
            self._maybe_end()

    def _message(self, pending: _Pending, response: InferResponse | None, error: ServeError | None, final: bool):
        if response is not None and error is None:
            try:
                encoded = encode_response(response, service_pb2, pending.request)
            except ServeError as exc:  # an output that does not fit its shared-memory region
                error = exc
            else:
                encoded.parameters[FINAL_RESPONSE].bool_param = final
                return service_pb2.ModelStreamInferResponse(infer_response=encoded)
        if error is not None:
            return self._failed(pending.request, error, final)
        if not pending.empty_final:  # the final flag alone, which the client did not ask to see
            return None
        request = pending.request
        empty = service_pb2.ModelInferResponse(model_name=request.model_name, id=request.id)
        empty.parameters[FINAL_RESPONSE].bool_param = True
        return service_pb2.ModelStreamInferResponse(infer_response=empty)

    def _refusal(self, error: ServeError, request_id: str):
        """A request refused before it ran: the error and the request's id, as Triton sends it."""
        if self.grpc_error:
            return error
        return service_pb2.ModelStreamInferResponse(error_message=error.message,
                                                    infer_response=service_pb2.ModelInferResponse(id=request_id))

    def _failed(self, request: InferRequest, error: ServeError, final: bool):
        """A failed response: the error, with the request's id, model and requested version and the
        final flag, as Triton sends it."""
        if self.grpc_error:
            return error
        failed = service_pb2.ModelInferResponse(model_name=request.model_name, model_version=request.model_version,
                                                id=request.id)
        failed.parameters[FINAL_RESPONSE].bool_param = final
        return service_pb2.ModelStreamInferResponse(error_message=error.message, infer_response=failed)

    def _place(self, ticket: int, message) -> None:
        """An ordinary request's message, sent once every earlier request's has been."""
        self.parked[ticket] = message
        while self.next_out in self.parked:
            ready = self.parked.pop(self.next_out)
            self.next_out += 1
            if ready is not None:
                self.outbox.put_nowait(ready)

    def _maybe_end(self) -> None:
        if not self.reading and not self.in_flight and self.next_out == self.next_ticket:
            self.outbox.put_nowait(None)
