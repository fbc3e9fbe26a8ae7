"""The gRPC protocol without a transport: ``inference.GRPCInferenceService`` (serving_protocol.md
A.2, tritonclient's own ``service_pb2``) and ``grpc.health.v1.Health/Check``. Both transports
(native.py, the C++ one, and aio.py, grpc.aio) hand it request messages as bytes and send what
it answers; it does the decoding, the encoding, tracing, and the mapping of errors to gRPC
statuses (``status_of``, the one place).

A method's answer is ``(code, details, body)``: the status code (an int), its message, and the
serialized response (None unless the code is OK).
"""

from __future__ import annotations

import asyncio
import logging
from typing import AsyncIterator, Callable

import grpc
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from tritonclient.grpc import service_pb2

from tritonctl.serve.core.errors import ServeError, Status
from tritonctl.serve.core.header_forward import HeaderForwarding
from tritonctl.serve.core import restrictions as restricted
from tritonctl.serve.core.restrictions import Restrictions
from tritonctl.serve.core.server import InferenceServer
from tritonctl.serve.core.shm import CUDA, SYSTEM
from tritonctl.serve.core.trace_config import grpc_update
from tritonctl.serve.core.types import InferRequest
from tritonctl.serve.grpc.codec import (check_named, decode_request, encode_response_parts, log_changes,
                                        parameter_value)
from tritonctl.serve.grpc.stream import StreamSession
from tritonctl.serve.grpc.wire import join_response, split_request

log = logging.getLogger("tritonctl.serve.grpc")

MAX_MESSAGE = 2**31 - 1  # Triton's MAX_GRPC_MESSAGE_SIZE
SERVICE = "inference.GRPCInferenceService"
PREFIX = f"/{SERVICE}/"
INFER = PREFIX + "ModelInfer"
STREAM = PREFIX + "ModelStreamInfer"
HEALTH_SERVICE = "grpc.health.v1.Health"
# A stream opened with this header set to "true" ends at its first error, as its status (Triton 24.08+).
GRPC_ERROR_HEADER = "triton_grpc_error"
HEALTH = f"/{HEALTH_SERVICE}/Check"
OK = grpc.StatusCode.OK.value[0]
INTERNAL = grpc.StatusCode.INTERNAL.value[0]
UNIMPLEMENTED = grpc.StatusCode.UNIMPLEMENTED.value[0]
UNAVAILABLE = grpc.StatusCode.UNAVAILABLE.value[0]
CODES = {code.value[0]: code for code in grpc.StatusCode}  # int -> grpc.StatusCode
# Triton's answer to a request message that does not parse (its string fields must be UTF-8).
UNPARSABLE = (INTERNAL, "Unable to parse request")

Answer = tuple  # (code: int, details: str, body: bytes | None)


def status_of(exc: BaseException, method: str = "") -> tuple[int, str]:
    """The status a call that raised ``exc`` ends with: a ServeError's own (Triton's code and
    text), Triton's ``UNPARSABLE`` for a message that does not parse, INTERNAL for a bug, which is
    logged; the server goes on."""
    if isinstance(exc, ServeError):
        return grpc.StatusCode[exc.status.grpc_code_name].value[0], exc.message
    if isinstance(exc, DecodeError):
        return UNPARSABLE
    log.error("gRPC %s failed", method, exc_info=exc)
    return INTERNAL, f"Unexpected error: {exc}"


def failure(exc: BaseException, method: str = "") -> Answer:
    return (*status_of(exc, method), None)


def check_no_repository_name(request) -> None:
    """Triton serves one repository namespace: a repository RPC that names one is refused."""
    if request.repository_name:
        raise ServeError(Status.UNSUPPORTED, "'repository_name' specification is not supported")


class InferCall:
    """One ModelInfer between its decoding and its reply. ``cancel()``: the client went away
    (the request is dropped if it has not run)."""

    __slots__ = ("request", "trace", "answer")

    def __init__(self, request: InferRequest, trace, answer: Callable[[int, str, bytes | None], None]):
        self.request = request
        self.trace = trace
        self.answer = answer

    def cancel(self) -> None:
        self.request.cancel()


# The category of --grpc-restricted-protocol each method is in (tritonserver's grpc_server.cc).
CATEGORY = {HEALTH: restricted.HEALTH, INFER: restricted.INFERENCE, STREAM: restricted.INFERENCE}
CATEGORY.update({PREFIX + name: category for category, names in (
    (restricted.HEALTH, ("ServerLive", "ServerReady", "ModelReady")),
    (restricted.METADATA, ("ServerMetadata", "ModelMetadata")),
    (restricted.MODEL_CONFIG, ("ModelConfig",)),
    (restricted.STATISTICS, ("ModelStatistics",)),
    (restricted.MODEL_REPOSITORY, ("RepositoryIndex", "RepositoryModelLoad", "RepositoryModelUnload")),
    (restricted.SHARED_MEMORY, ("SystemSharedMemoryStatus", "SystemSharedMemoryRegister",
                                "SystemSharedMemoryUnregister", "CudaSharedMemoryStatus", "CudaSharedMemoryRegister",
                                "CudaSharedMemoryUnregister")),
    (restricted.TRACE, ("TraceSetting",)),
    (restricted.LOGGING, ("LogSettings",))) for name in names})


class GrpcHandlers:
    """Every method of the service, for any transport. ``forwarding``: the client metadata that
    becomes request parameters (``--grpc-header-forward-pattern``), None for none;
    ``restrictions``: the methods that need a header (``--grpc-restricted-protocol``). A
    transport hands each call's client metadata over only where ``wants_metadata``."""

    def __init__(self, server: InferenceServer, forwarding: HeaderForwarding | None = None,
                 restrictions: Restrictions | None = None):
        self.server = server
        self.forwarding = forwarding
        self.restrictions = restrictions if restrictions else None
        self.wants_metadata = forwarding is not None or self.restrictions is not None
        descriptor = service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"]
        # path -> (request message type, method) for every unary RPC but ModelInfer
        self.unary = {PREFIX + m.name: (getattr(service_pb2, m.input_type.name), getattr(self, m.name))
                      for m in descriptor.methods
                      if not (m.client_streaming or m.server_streaming) and m.name != "ModelInfer"}

    def refusal(self, path: str, metadata) -> Answer | None:
        """The answer to a call of ``path`` whose metadata lacks the header its category is
        restricted to, else None (tritonserver's UNAVAILABLE, before anything else of the call)."""
        if self.restrictions is None:
            return None
        message = self.restrictions.refusal(CATEGORY.get(path, ""), metadata)
        return None if message is None else (UNAVAILABLE, message, None)

    # ---- health ------------------------------------------------------------------------------
    def health(self, payload: bytes, metadata=()) -> Answer:
        """The HealthCheckResponse (any service name): SERVING (1) when the server is ready, else
        NOT_SERVING (2); the two-field message is encoded by hand to avoid another dependency. The
        request, a HealthCheckRequest (one string, field 1), is parsed as a message of the same wire
        form from this service."""
        refused = self.refusal(HEALTH, metadata)
        if refused is not None:
            return refused
        try:
            service_pb2.SystemSharedMemoryStatusRequest.FromString(payload)
        except DecodeError:
            return (*UNPARSABLE, None)
        return OK, "", b"\x08\x01" if self.server.ready() else b"\x08\x02"

    # ---- ModelInfer, the hot path ------------------------------------------------------------
    def begin_infer(self, payload: bytes, answer: Callable[[int, str, bytes | None], None],
                    metadata=()) -> InferCall | None:
        """Decode a ModelInferRequest. ``answer(code, details, body)`` runs once: at once when
        the request is refused (then None is returned), else from the thread that finishes it,
        after ``submit_infer``. Between the two the transport may note the call as open.
        ``metadata``: the call's client metadata, (key, value) pairs, where ``wants_metadata``."""
        trace = None
        if self.restrictions is not None:
            refused = self.refusal(INFER, metadata)
            if refused is not None:
                self._send(answer, refused, None)
                return None
        try:
            split = split_request(payload)
            if split is None:  # protobuf's parse says what is wrong
                message, raw = service_pb2.ModelInferRequest.FromString(payload), None
            else:
                message, raw = service_pb2.ModelInferRequest.FromString(split[0]), split[1]
            trace = self._sample_trace(message.model_name)
            request = decode_request(message, self.server.shm, raw)
            if self.forwarding is not None:
                request.parameters.update(self.forwarding.parameters(metadata))
        except Exception as exc:
            self._send(answer, failure(exc, INFER), trace)
            return None
        request.trace = trace
        call = InferCall(request, trace, answer)

        def complete(response, error) -> None:
            reply = self._reply(call, response, error)
            request.release_shm()  # its outputs are written: a region unregistered meanwhile goes before the answer
            self._send(answer, reply, trace)

        request.complete = complete
        return call

    def submit_infer(self, call: InferCall) -> None:
        """Queue the decoded request; a refusal is answered at once."""
        try:
            self.server.submit(call.request, "ModelInfer RPC")
        except Exception as exc:
            self._send(call.answer, failure(exc, INFER), call.trace)

    def _sample_trace(self, model: str):
        """A trace of this request when tracing samples it, else None. The transport hands the
        message over already read: an empty wait/read span."""
        traces = self.server.traces
        trace = traces.sample(model) if traces.enabled else None
        if trace is not None:
            trace.capture("GRPC_WAITREAD_START")
            trace.capture("GRPC_WAITREAD_END")
        return trace

    def _reply(self, call: InferCall, response, error: ServeError | None) -> Answer:
        """The answer to a finished request, on the thread that finished it."""
        if error is not None:
            return failure(error, INFER)
        try:
            message, raw = encode_response_parts(response, service_pb2, call.request)
            body = join_response(message.SerializeToString(), raw)
        except Exception as exc:  # an output that does not fit its shared-memory region, or a bug
            return failure(exc, INFER)
        trace = call.trace
        if trace is not None:
            trace.capture("INFER_RESPONSE_COMPLETE")
            trace.record_tensors("TENSOR_BACKEND_OUTPUT", response.outputs)
            trace.capture("GRPC_SEND_START")
        return OK, "", body

    @staticmethod
    def _send(answer, result: Answer, trace) -> None:
        answer(*result)
        if trace is not None:
            trace.capture("GRPC_SEND_END")
            trace.finish()

    # ---- ModelStreamInfer --------------------------------------------------------------------
    async def stream(self, payloads: AsyncIterator[bytes], grpc_error: bool = False,
                     metadata=()) -> AsyncIterator[bytes]:
        """The serialized ModelStreamInferResponses of a stream of ModelInferRequests; a message
        that does not parse ends the reading, as the client's half-close does (Triton's gRPC reads
        it as a failed read): the requests in flight are answered and the stream ends OK.
        ``grpc_error``: the client's header ``triton_grpc_error: true``; the first error ends the
        stream too (raises it as a ServeError). ``metadata``: the stream's client metadata, whose
        forwarded headers every request of the stream gets, as in Triton. A stream restricted to a
        header it lacks ends before its first message is read (raises the refusal as a ServeError)."""
        refused = self.refusal(STREAM, metadata)
        if refused is not None:
            raise ServeError(Status.UNAVAILABLE, refused[1])
        forwarded = self.forwarding.parameters(metadata) if self.forwarding is not None else {}

        async def messages():
            async for payload in payloads:
                try:
                    message = service_pb2.ModelInferRequest.FromString(payload)
                except DecodeError:
                    return
                yield message

        async for message in StreamSession(self.server, messages(), grpc_error, forwarded).run():
            yield message.SerializeToString()

    # ---- every other unary method ------------------------------------------------------------
    async def call_unary(self, path: str, payload: bytes, metadata=()) -> Answer:
        """A unary method by its path: its answer, whatever happens. ``metadata``: the call's
        client metadata, where ``wants_metadata``."""
        entry = self.unary.get(path)
        if entry is None:  # as gRPC C++ answers a method no service has
            return UNIMPLEMENTED, "", None
        refused = self.refusal(path, metadata)
        if refused is not None:
            return refused
        request_type, method = entry
        try:
            response = await method(request_type.FromString(payload))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return failure(exc, path)
        return OK, "", response.SerializeToString()

    async def ServerLive(self, request):
        return service_pb2.ServerLiveResponse(live=self.server.live)

    async def ServerReady(self, request):
        return service_pb2.ServerReadyResponse(ready=self.server.ready())

    async def ModelReady(self, request):
        ready = bool(request.name) and await asyncio.get_running_loop().run_in_executor(
            None, self.server.manager.is_ready, request.name, request.version)  # is_ready() may take seconds
        return service_pb2.ModelReadyResponse(ready=ready)

    async def ServerMetadata(self, request):
        meta = self.server.metadata()
        return service_pb2.ServerMetadataResponse(name=meta["name"], version=meta["version"],
                                                  extensions=meta["extensions"])

    async def ModelMetadata(self, request):
        check_named(request.name)
        meta = self.server.model_metadata(request.name, request.version)
        response = service_pb2.ModelMetadataResponse(name=meta["name"], versions=meta["versions"],
                                                     platform=meta["platform"])
        for item in meta["inputs"]:
            response.inputs.add(**item)
        for item in meta["outputs"]:
            response.outputs.add(**item)
        return response

    async def ModelConfig(self, request):
        check_named(request.name)
        return service_pb2.ModelConfigResponse(config=self.server.model_config(request.name, request.version))

    async def ModelStatistics(self, request):
        stats = self.server.statistics(request.name, request.version)
        return json_format.ParseDict(stats, service_pb2.ModelStatisticsResponse(), ignore_unknown_fields=True)

    async def RepositoryIndex(self, request):
        check_no_repository_name(request)
        response = service_pb2.RepositoryIndexResponse()
        for row in self.server.manager.index(ready_only=request.ready):
            response.models.add(**row)
        return response

    async def RepositoryModelLoad(self, request):
        check_no_repository_name(request)
        params = {k: parameter_value(v) for k, v in request.parameters.items()}
        await asyncio.get_running_loop().run_in_executor(None, self.server.manager.load_from_api,
                                                         request.model_name, params)
        return service_pb2.RepositoryModelLoadResponse()

    async def RepositoryModelUnload(self, request):
        check_no_repository_name(request)
        await asyncio.get_running_loop().run_in_executor(None, self.server.manager.unload_from_api,
                                                         request.model_name)
        return service_pb2.RepositoryModelUnloadResponse()

    async def LogSettings(self, request):
        settings = self.server.log_settings.update(log_changes(request.settings))
        response = service_pb2.LogSettingsResponse()
        for key, value in settings.items():
            target = response.settings[key]
            if isinstance(value, bool):
                target.bool_param = value
            elif isinstance(value, int):
                target.uint32_param = value
            else:
                target.string_param = str(value)
        return response

    # ---- shared memory and trace extensions --------------------------------------------------
    def _shm_status(self, kind: str, name: str, response):
        """The regions of ``kind`` (all, or the one named) in ``response``, a *StatusResponse."""
        for region in self.server.shm.status(kind, name):
            response.regions[region["name"]].MergeFrom(type(response).RegionStatus(**region))
        return response

    async def SystemSharedMemoryStatus(self, request):
        return self._shm_status(SYSTEM, request.name, service_pb2.SystemSharedMemoryStatusResponse())

    async def SystemSharedMemoryRegister(self, request):
        self.server.shm.register_system(request.name, request.key, request.offset, request.byte_size)
        return service_pb2.SystemSharedMemoryRegisterResponse()

    async def SystemSharedMemoryUnregister(self, request):
        self.server.shm.unregister(SYSTEM, request.name)
        return service_pb2.SystemSharedMemoryUnregisterResponse()

    async def CudaSharedMemoryStatus(self, request):
        return self._shm_status(CUDA, request.name, service_pb2.CudaSharedMemoryStatusResponse())

    async def CudaSharedMemoryRegister(self, request):
        self.server.shm.register_cuda(request.name, request.raw_handle, request.device_id, request.byte_size)
        return service_pb2.CudaSharedMemoryRegisterResponse()

    async def CudaSharedMemoryUnregister(self, request):
        self.server.shm.unregister(CUDA, request.name)
        return service_pb2.CudaSharedMemoryUnregisterResponse()

    async def TraceSetting(self, request):
        server = self.server
        settings = server.trace_setting(request.model_name)  # an unknown model is refused first
        if request.settings:
            settings = server.trace_setting(request.model_name, grpc_update(request.settings))
        response = service_pb2.TraceSettingResponse()
        for key, value in settings.items():
            response.settings[key].value.extend(value if isinstance(value, list) else [value])
        return response
