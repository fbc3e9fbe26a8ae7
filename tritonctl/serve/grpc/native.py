"""The gRPC front end over the C++ transport (``_native``, gRPC's C++ callback API): HTTP/2 and
message framing run on gRPC's threads without the GIL, and the event loop sees whole request
messages in bursts, through one file descriptor. The methods themselves are the ones of
``service.InferenceService``; ModelInfer, the hot path, is answered by the thread that
finishes the request, with no coroutine per call and no hop back through the loop. A ModelInfer
message that arrives while no other is unanswered skips the loop on the way in as well: the
gRPC thread that read it decodes and queues it (``_infer`` runs on either thread).

Built when ``pip install`` finds gRPC's C++ library (``pkg-config grpc++``, Debian's
``libgrpc++-dev``); without it ``available()`` is False and the server uses grpc.aio.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

import grpc
from google.protobuf.message import DecodeError
from tritonclient.grpc import service_pb2

from tritonctl.serve.core.errors import ServeError, internal
from tritonctl.serve.core.server import InferenceServer
from tritonctl.serve.grpc.service import MAX_MESSAGE, InferenceService, health_status, send_ended
from tritonctl.serve.grpc.stream import StreamSession
from tritonctl.serve.native_front_end import NativeFrontEnd

try:
    from tritonctl.serve.grpc import _native
except ImportError as exc:  # not built: no gRPC C++ library where the package was installed
    _native = None
    UNAVAILABLE_REASON = str(exc)
    NOT_BUILT = isinstance(exc, ModuleNotFoundError)  # else built, but it does not load
else:
    UNAVAILABLE_REASON = ""
    NOT_BUILT = False

log = logging.getLogger("tritonctl.serve.grpc")

SERVICE = "/inference.GRPCInferenceService/"
INFER = SERVICE + "ModelInfer"
STREAM = SERVICE + "ModelStreamInfer"
HEALTH = "/grpc.health.v1.Health/Check"
OK = grpc.StatusCode.OK.value[0]
INTERNAL = grpc.StatusCode.INTERNAL.value[0]
UNIMPLEMENTED = grpc.StatusCode.UNIMPLEMENTED.value[0]


def available() -> bool:
    return _native is not None


class Aborted(Exception):
    """``context.abort``: ends the call with a status."""

    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(details)
        self.code = code.value[0]
        self.details = details


class _Context:
    """What the servicer's unary methods use of a grpc.aio context."""

    async def abort(self, code: grpc.StatusCode, details: str = ""):
        raise Aborted(code, details)


def _status(error: ServeError) -> int:
    return grpc.StatusCode[error.status.grpc_code_name].value[0]


class NativeGrpcFrontEnd(NativeFrontEnd):
    """``inference.GRPCInferenceService`` and ``grpc.health.v1.Health/Check`` on ``address``;
    calls still open when ``stop``'s grace ends are cancelled."""

    transport_name = "gRPC C++ (C++ transport)"

    def __init__(self, server: InferenceServer, address: str):
        super().__init__(lambda: _native.Server(address, MAX_MESSAGE, STREAM, INFER))
        self.server = server
        self.service = InferenceService(server)
        self.unary = _unary_methods(self.service)
        self.open: dict = {}  # call -> what to stop when the client goes: request, task or stream

    async def start(self) -> None:
        await super().start()
        self.transport.set_inline_handler(self._infer)

    async def stop(self, grace_s: float) -> None:
        self.transport.set_inline_handler(None)
        await super().stop(grace_s)

    def _on_events(self) -> None:
        for kind, call, payload in self.transport.take_events():
            if kind == _native.MESSAGE:
                stream = self.open.get(call) if call.method == STREAM else None
                if stream is not None:
                    stream.inbox.put_nowait(payload)
                else:
                    self._start(call, payload)
            elif kind == _native.HALF_CLOSE:
                stream = self.open.get(call)
                if stream is not None:
                    stream.inbox.put_nowait(None)
                else:  # a stream that sent nothing
                    call.finish(OK, "", None)
            else:
                self._cancel(self.open.pop(call, None))

    def _start(self, call, payload: bytes) -> None:
        method = call.method
        if method == INFER:
            self._infer(call, payload)
        elif method == STREAM:
            stream = _Stream(self, call)
            self.open[call] = stream
            stream.inbox.put_nowait(payload)
        elif method == HEALTH:
            call.finish(OK, "", health_status(self.server))
        elif method in self.unary:
            self.open[call] = asyncio.ensure_future(self._unary(call, payload, *self.unary[method]))
        else:
            call.finish(UNIMPLEMENTED, "Method not found!", None)

    @staticmethod
    def _cancel(what) -> None:
        if what is None:
            return
        if isinstance(what, (asyncio.Task, _Stream)):
            what.cancel()
        else:  # a ModelInfer request: dropped before it runs
            what.cancelled = True

    # ---- ModelInfer ------------------------------------------------------------------------------
    def _infer(self, call, payload: bytes) -> None:
        try:
            message = service_pb2.ModelInferRequest.FromString(payload)
        except DecodeError as exc:
            call.finish(INTERNAL, str(exc), None)
            return
        trace = self.service.sample_trace(message.model_name)
        try:
            request = self.service.decode(message, trace)
            # Answered from the thread that finishes the request: a hop through the event loop
            # costs a thread wake-up per request.
            request.complete = partial(self._answer, call, request, trace)
            self.open[call] = request
            if call.cancelled:  # the client went while this ran on a gRPC thread; the loop may have missed it
                self.open.pop(call, None)
                return
            self.server.submit(request, "ModelInfer RPC")
        except ServeError as exc:
            self.open.pop(call, None)
            call.finish(_status(exc), exc.message, None)

    def _answer(self, call, request, trace, response, error: ServeError | None) -> None:
        """``request.complete``, on a model instance's thread (the transport is thread-safe)."""
        if self.open.pop(call, None) is None:  # cancelled: the transport has answered it
            return
        try:
            if error is None:
                reply = self.service.infer_reply(request, response, trace).SerializeToString()
        except ServeError as exc:  # an output that does not fit its shared-memory region
            error = exc
        except Exception as exc:  # a bug: the client still gets an answer, the instance goes on
            log.exception("encoding a response of model '%s' failed", request.model_name)
            error = internal(f"encoding the response failed: {exc}")
        if error is None:
            call.finish(OK, "", reply)
        else:
            call.finish(_status(error), error.message, None)
        if trace is not None:
            send_ended(trace)

    # ---- every other unary method --------------------------------------------------------------
    async def _unary(self, call, payload: bytes, request_type, method) -> None:
        try:
            response = await method(request_type.FromString(payload), _Context())
        except DecodeError as exc:
            call.finish(INTERNAL, str(exc), None)
        except Aborted as exc:
            call.finish(exc.code, exc.details, None)
        except asyncio.CancelledError:  # the client went away; the transport has answered
            pass
        except Exception as exc:  # a bug: the client still gets an answer
            log.exception("gRPC %s failed", call.method)
            call.finish(INTERNAL, f"Unexpected error: {exc}", None)
        else:
            call.finish(OK, "", response.SerializeToString())
        finally:
            self.open.pop(call, None)


class _Stream:
    """One ModelStreamInfer call: messages from the transport feed a StreamSession, whose
    responses go back as they come."""

    def __init__(self, front: NativeGrpcFrontEnd, call):
        self.front = front
        self.call = call
        self.inbox: asyncio.Queue = asyncio.Queue()  # request payloads; None once the client closed
        self.task = asyncio.ensure_future(self._run())

    def cancel(self) -> None:
        self.task.cancel()

    async def _requests(self):
        while (payload := await self.inbox.get()) is not None:
            try:
                yield service_pb2.ModelInferRequest.FromString(payload)
            except DecodeError as exc:
                self.call.finish(INTERNAL, str(exc), None)
                return

    async def _run(self) -> None:
        try:
            async for message in StreamSession(self.front.server, self._requests()).run():
                self.call.write(message.SerializeToString())
            self.call.finish(OK, "", None)
        except asyncio.CancelledError:
            pass
        finally:
            self.front.open.pop(self.call, None)


def _unary_methods(service: InferenceService) -> dict:
    """path -> (request message type, servicer method) for every unary RPC but ModelInfer."""
    descriptor = service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    return {SERVICE + m.name: (getattr(service_pb2, m.input_type.name), getattr(service, m.name))
            for m in descriptor.methods
            if not (m.client_streaming or m.server_streaming) and m.name != "ModelInfer"}
