"""The gRPC transport in Python (grpc.aio), where the C++ one (native.py) is not built. A thin
edge: every method is registered with raw bytes in and out, goes to ``handlers.GrpcHandlers``,
and a status other than OK ends the call through the context."""

from __future__ import annotations

import asyncio

import grpc

from tritonctl.serve.core.header_forward import HeaderForwarding
from tritonctl.serve.core.restrictions import Restrictions
from tritonctl.serve.core.server import InferenceServer, LoopCompletions
from tritonctl.serve.grpc.handlers import (CODES, GRPC_ERROR_HEADER, HEALTH_SERVICE, MAX_MESSAGE, OK, SERVICE, STREAM,
                                           GrpcHandlers, status_of)

SERVER_OPTIONS = [("grpc.max_send_message_length", MAX_MESSAGE), ("grpc.max_receive_message_length", MAX_MESSAGE),
                  ("grpc.so_reuseport", 0)]


class AioFrontEnd:
    """The service over grpc.aio, bound to ``address``."""

    transport_name = "grpc.aio (Python transport)"

    def __init__(self, server: InferenceServer, address: str, forwarding: HeaderForwarding | None = None,
                 restrictions: Restrictions | None = None):
        self.handlers = GrpcHandlers(server, forwarding, restrictions)
        self.completions: LoopCompletions | None = None  # answers of ModelInfer, handed to the loop
        self.grpc_server = grpc.aio.server(options=SERVER_OPTIONS)
        methods = {path.rsplit("/", 1)[1]: grpc.unary_unary_rpc_method_handler(self._unary(path))
                   for path in self.handlers.unary}
        methods["ModelInfer"] = grpc.unary_unary_rpc_method_handler(self._infer)
        methods[STREAM.rsplit("/", 1)[1]] = grpc.stream_stream_rpc_method_handler(self._stream)
        health = {"Check": grpc.unary_unary_rpc_method_handler(self._health)}
        self.grpc_server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, methods),
                                                   grpc.method_handlers_generic_handler(HEALTH_SERVICE, health),
                                                   _UnknownMethods()))
        try:
            self.port = self.grpc_server.add_insecure_port(address)
        except RuntimeError:  # grpcio's "Failed to bind to address"
            self.port = 0
        if self.port == 0:
            raise OSError(f"cannot bind the gRPC port at {address}")

    async def start(self) -> None:
        self.completions = LoopCompletions(asyncio.get_running_loop())
        await self.grpc_server.start()

    async def stop(self, grace_s: float) -> None:
        """Stop accepting; calls in flight get ``grace_s`` seconds to finish, then are cancelled."""
        await self.grpc_server.stop(grace_s)

    @staticmethod
    async def _end(context, code: int, details: str, body: bytes | None) -> bytes:
        if code != OK:
            await context.abort(CODES[code], details)
        return body

    async def _health(self, payload: bytes, context) -> bytes:
        return await self._end(context, *self.handlers.health(payload, self._metadata(context)))

    def _unary(self, path: str):
        async def method(payload: bytes, context) -> bytes:
            return await self._end(context, *await self.handlers.call_unary(path, payload, self._metadata(context)))

        return method

    async def _infer(self, payload: bytes, context) -> bytes:
        future = asyncio.get_running_loop().create_future()
        completions = self.completions
        call = self.handlers.begin_infer(payload, lambda *answer: completions.push(future, answer, None),
                                         self._metadata(context))
        if call is not None:
            self.handlers.submit_infer(call)
        try:
            answer = await future
        except asyncio.CancelledError:  # the client cancelled or its deadline passed
            if call is not None:
                call.cancel()
            raise
        return await self._end(context, *answer)

    def _metadata(self, context):
        """The call's client metadata where the handlers use it, else nothing (not read at all)."""
        return (context.invocation_metadata() or ()) if self.handlers.wants_metadata else ()

    async def _stream(self, payloads, context):
        try:
            metadata = context.invocation_metadata() or ()
            grpc_error = any(key == GRPC_ERROR_HEADER and value == "true" for key, value in metadata)
            async for body in self.handlers.stream(payloads, grpc_error, metadata):
                yield body
        except Exception as exc:
            code, details = status_of(exc, STREAM)
            await context.abort(CODES[code], details)


class _UnknownMethods(grpc.GenericRpcHandler):
    """Any other method: UNIMPLEMENTED with no details, at once, as gRPC C++ answers it (grpc.aio's own
    answer says "Method not found!")."""

    def service(self, handler_call_details):
        return grpc.stream_stream_rpc_method_handler(self._refuse)

    @staticmethod
    async def _refuse(_payloads, context) -> None:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "")
