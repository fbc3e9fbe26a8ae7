"""The gRPC transport in C++ (``_native``, gRPC's callback API): HTTP/2 and message framing run
on gRPC's threads without the GIL, and the event loop sees whole request messages in bursts,
through one file descriptor. A thin edge: every message goes to ``handlers.GrpcHandlers`` and
what it answers goes back. ModelInfer, the hot path, is answered by the thread that finishes
the request, with no coroutine per call and no hop back through the loop; a ModelInfer message
that arrives while no other is unanswered skips the loop on the way in as well (``_infer`` runs
on the gRPC thread that read it, or on the loop).

Built when ``pip install`` finds gRPC's C++ library (``pkg-config grpc++``, Debian's
``libgrpc++-dev``); without it ``available()`` is False and the server uses grpc.aio.
"""

from __future__ import annotations

import asyncio

from tritonctl.serve.core.header_forward import HeaderForwarding
from tritonctl.serve.core.restrictions import Restrictions
from tritonctl.serve.core.server import InferenceServer
from tritonctl.serve.grpc.handlers import HEALTH, INFER, MAX_MESSAGE, OK, STREAM, GrpcHandlers, status_of
from tritonctl.serve.native_front_end import NativeFrontEnd, import_native, make_transport

# Not built where the package was installed without the gRPC C++ library.
_native, UNAVAILABLE_REASON, NOT_BUILT = import_native("tritonctl.serve.grpc._native")


# A stream opened (where the transport keeps metadata): its metadata is checked before any message.
OPEN = getattr(_native, "OPEN", None)


def available() -> bool:
    return _native is not None


class NativeGrpcFrontEnd(NativeFrontEnd):
    """``inference.GRPCInferenceService`` and ``grpc.health.v1.Health/Check`` on ``address``;
    calls still open when ``stop``'s grace ends are cancelled."""

    transport_name = "gRPC C++ (C++ transport)"

    def __init__(self, server: InferenceServer, address: str, forwarding: HeaderForwarding | None = None,
                 restrictions: Restrictions | None = None):
        self.handlers = GrpcHandlers(server, forwarding, restrictions)
        # The transport keeps each call's client metadata only where it is forwarded or checked.
        keeps = {"keep_metadata": True} if self.handlers.wants_metadata else {}
        super().__init__(lambda: make_transport(lambda **keep: _native.Server(address, MAX_MESSAGE, STREAM, INFER,
                                                                              **keep), keeps, "gRPC", "aio"))
        self.open: dict = {}  # call -> what to stop when the client goes: an InferCall, a task or a stream

    async def start(self) -> None:
        await super().start()
        self.transport.set_inline_handler(self._infer)

    async def stop(self, grace_s: float) -> None:
        self.transport.set_inline_handler(None)
        await super().stop(grace_s)

    def _on_events(self) -> None:
        for kind, call, payload in self.transport.take_events():
            if kind == OPEN:  # a stream, before its first message (only where metadata is kept)
                self.open[call] = _Stream(self, call)
            elif kind == _native.MESSAGE:
                stream = self.open.get(call) if call.method == STREAM else None
                if stream is not None:
                    stream.inbox.put_nowait(payload)
                elif not getattr(call, "answered", False):  # not what a stream's client sent after its end
                    self._start(call, payload)
            elif kind == _native.HALF_CLOSE:
                stream = self.open.get(call)
                if stream is not None:
                    stream.inbox.put_nowait(None)
                else:  # a stream that sent nothing
                    call.finish(OK, "", None)
            else:  # the client went away: the transport has answered it
                what = self.open.pop(call, None)
                if what is not None:
                    what.cancel()

    def _start(self, call, payload: bytes) -> None:
        method = call.method
        if method == INFER:
            self._infer(call, payload)
        elif method == STREAM:
            stream = _Stream(self, call)
            self.open[call] = stream
            stream.inbox.put_nowait(payload)
        elif method == HEALTH:
            call.finish(*self.handlers.health(payload, self._metadata(call)))
        else:
            self.open[call] = asyncio.ensure_future(self._unary(call, payload))

    def _infer(self, call, payload: bytes) -> None:
        infer = self.handlers.begin_infer(payload, lambda code, details, body: self._answer(call, code, details, body),
                                          self._metadata(call))
        if infer is None:  # refused: answered
            return
        self.open[call] = infer
        if call.cancelled:  # the client went while this ran on a gRPC thread; the loop may have missed it
            self.open.pop(call, None)
            return
        self.handlers.submit_infer(infer)

    def _metadata(self, call):
        """The call's client metadata where the handlers use it (the transport keeps it then)."""
        return call.metadata if self.handlers.wants_metadata else ()

    def _answer(self, call, code: int, details: str, body: bytes | None) -> None:
        """On the thread that finished the request (the transport is thread-safe); a call the
        client cancelled has been answered by the transport, and finishing it again does nothing."""
        self.open.pop(call, None)
        call.finish(code, details, body)

    async def _unary(self, call, payload: bytes) -> None:
        try:
            call.finish(*await self.handlers.call_unary(call.method, payload, self._metadata(call)))
        except asyncio.CancelledError:  # the client went away; the transport has answered
            pass
        finally:
            self.open.pop(call, None)


class _Stream:
    """One ModelStreamInfer call: messages from the transport go to the handlers' stream, whose
    responses go back as they come."""

    def __init__(self, front: NativeGrpcFrontEnd, call):
        self.front = front
        self.call = call
        self.inbox: asyncio.Queue = asyncio.Queue()  # request payloads; None once the client closed
        self.task = asyncio.ensure_future(self._run())

    def cancel(self) -> None:
        self.task.cancel()

    async def _payloads(self):
        while (payload := await self.inbox.get()) is not None:
            yield payload

    async def _run(self) -> None:
        try:
            # a transport built before it read the header has no triton_grpc_error
            grpc_error = getattr(self.call, "triton_grpc_error", False)
            async for body in self.front.handlers.stream(self._payloads(), grpc_error, self.call.metadata):
                self.call.write(body)
            self.call.finish(OK, "", None)
        except asyncio.CancelledError:
            pass
        except Exception as exc:
            self.call.finish(*status_of(exc, self.call.method), None)
        finally:
            self.front.open.pop(self.call, None)

