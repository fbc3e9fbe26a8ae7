"""``inference.GRPCInferenceService`` (serving_protocol.md A.2), built from tritonclient's own
``service_pb2(_grpc)``, and ``grpc.health.v1.Health/Check``: the methods, and the front end that
serves them over grpc.aio where the C++ transport (native.py) is not built."""

from __future__ import annotations

import asyncio
import logging

import grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tritonctl.serve.core.errors import ServeError, Status
from tritonctl.serve.core.server import InferenceServer
from tritonctl.serve.core.shm import CUDA, SYSTEM
from tritonctl.serve.core.trace_config import grpc_update
from tritonctl.serve.grpc.codec import decode_request, encode_response, parameter_value
from tritonctl.serve.grpc.stream import StreamSession

log = logging.getLogger("tritonctl.serve.grpc")

MAX_MESSAGE = 2**31 - 1  # Triton's MAX_GRPC_MESSAGE_SIZE
SERVER_OPTIONS = [("grpc.max_send_message_length", MAX_MESSAGE), ("grpc.max_receive_message_length", MAX_MESSAGE),
                  ("grpc.so_reuseport", 0)]


async def _abort(context, error: ServeError):
    await context.abort(getattr(grpc.StatusCode, error.status.grpc_code_name), error.message)


class InferenceService(service_pb2_grpc.GRPCInferenceServiceServicer):
    def __init__(self, server: InferenceServer):
        self.server = server

    async def ServerLive(self, request, context):
        return service_pb2.ServerLiveResponse(live=self.server.live)

    async def ServerReady(self, request, context):
        return service_pb2.ServerReadyResponse(ready=self.server.ready())

    async def ModelReady(self, request, context):
        return service_pb2.ModelReadyResponse(ready=self.server.manager.is_ready(request.name, request.version))

    async def ServerMetadata(self, request, context):
        meta = self.server.metadata()
        return service_pb2.ServerMetadataResponse(name=meta["name"], version=meta["version"],
                                                  extensions=meta["extensions"])

    async def ModelMetadata(self, request, context):
        try:
            meta = self.server.model_metadata(request.name, request.version)
        except ServeError as exc:
            await _abort(context, exc)
        response = service_pb2.ModelMetadataResponse(name=meta["name"], versions=meta["versions"],
                                                     platform=meta["platform"])
        for item in meta["inputs"]:
            response.inputs.add(**item)
        for item in meta["outputs"]:
            response.outputs.add(**item)
        return response

    async def ModelConfig(self, request, context):
        try:
            config = self.server.model_config(request.name, request.version)
        except ServeError as exc:
            await _abort(context, exc)
        return service_pb2.ModelConfigResponse(config=config)

    async def ModelStatistics(self, request, context):
        from google.protobuf import json_format

        try:
            stats = self.server.statistics(request.name, request.version)
        except ServeError as exc:
            await _abort(context, exc)
        return json_format.ParseDict(stats, service_pb2.ModelStatisticsResponse(), ignore_unknown_fields=True)

    async def RepositoryIndex(self, request, context):
        response = service_pb2.RepositoryIndexResponse()
        for row in self.server.manager.index(ready_only=request.ready):
            response.models.add(**row)
        return response

    async def _repository_action(self, action: str, request, context):
        manager = self.server.manager
        loop = asyncio.get_running_loop()
        try:
            if action == "load":
                params = {k: parameter_value(v) for k, v in request.parameters.items()}
                await loop.run_in_executor(None, manager.load_from_api, request.model_name, params)
            else:
                await loop.run_in_executor(None, manager.unload_from_api, request.model_name)
        except ServeError as exc:
            await _abort(context, exc)

    async def RepositoryModelLoad(self, request, context):
        await self._repository_action("load", request, context)
        return service_pb2.RepositoryModelLoadResponse()

    async def RepositoryModelUnload(self, request, context):
        await self._repository_action("unload", request, context)
        return service_pb2.RepositoryModelUnloadResponse()

    async def LogSettings(self, request, context):
        settings = self.server.log_settings
        for key, value in request.settings.items():
            if key in settings and key != "log_file":
                settings[key] = parameter_value(value)
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

    def decode(self, message, trace=None):
        """The InferRequest of a ModelInferRequest; raises ServeError when it is malformed."""
        if trace is not None:  # the transport hands the message over already read: an empty wait/read span
            trace.capture("GRPC_WAITREAD_END")
        request = decode_request(message, self.server.shm)
        if trace is not None:
            request.trace = trace
        return request

    def infer_reply(self, request, response, trace=None):
        """The ModelInferResponse of a finished request; raises ServeError when an output does
        not fit its shared-memory region."""
        encoded = encode_response(response, service_pb2, request)
        if trace is not None:
            trace.capture("INFER_RESPONSE_COMPLETE")
            trace.record_tensors("TENSOR_BACKEND_OUTPUT", response.outputs)
            trace.capture("GRPC_SEND_START")
        return encoded

    def sample_trace(self, model_name: str):
        """A trace of this request when tracing samples it, else None."""
        traces = self.server.traces
        trace = traces.sample(model_name) if traces.enabled else None
        if trace is not None:
            trace.capture("GRPC_WAITREAD_START")
        return trace

    async def ModelInfer(self, message, context):
        trace = self.sample_trace(message.model_name)
        if trace is not None:
            context.add_done_callback(lambda _context: send_ended(trace))
        try:
            request = self.decode(message, trace)
            future = self.server.infer_future(request, "ModelInfer RPC")
            try:
                response = await future
            except asyncio.CancelledError:  # the client cancelled or its deadline passed
                request.cancelled = True
                raise
            return self.infer_reply(request, response, trace)
        except ServeError as exc:
            await _abort(context, exc)

    # ---- shared memory and trace extensions ------------------------------------------------------
    async def _shm_status(self, context, kind: str, name: str, response):
        """The regions of ``kind`` (all, or the one named) in ``response``, a *StatusResponse."""
        for region in await _call(context, self.server.shm.status, kind, name):
            response.regions[region["name"]].MergeFrom(type(response).RegionStatus(**region))
        return response

    async def SystemSharedMemoryStatus(self, request, context):
        return await self._shm_status(context, SYSTEM, request.name, service_pb2.SystemSharedMemoryStatusResponse())

    async def SystemSharedMemoryRegister(self, request, context):
        await _call(context, self.server.shm.register_system, request.name, request.key, request.offset,
                    request.byte_size)
        return service_pb2.SystemSharedMemoryRegisterResponse()

    async def SystemSharedMemoryUnregister(self, request, context):
        self.server.shm.unregister(SYSTEM, request.name)
        return service_pb2.SystemSharedMemoryUnregisterResponse()

    async def CudaSharedMemoryStatus(self, request, context):
        return await self._shm_status(context, CUDA, request.name, service_pb2.CudaSharedMemoryStatusResponse())

    async def CudaSharedMemoryRegister(self, request, context):
        await _call(context, self.server.shm.register_cuda, request.name, request.raw_handle, request.device_id,
                    request.byte_size)
        return service_pb2.CudaSharedMemoryRegisterResponse()

    async def CudaSharedMemoryUnregister(self, request, context):
        self.server.shm.unregister(CUDA, request.name)
        return service_pb2.CudaSharedMemoryUnregisterResponse()

    async def TraceSetting(self, request, context):
        server = self.server
        settings = await _call(context, server.trace_setting, request.model_name)  # unknown model first
        if request.settings:
            changes = await _call(context, grpc_update, request.settings)
            settings = await _call(context, server.trace_setting, request.model_name, changes)
        response = service_pb2.TraceSettingResponse()
        for key, value in settings.items():
            response.settings[key].value.extend(value if isinstance(value, list) else [value])
        return response

    async def ModelStreamInfer(self, request_iterator, context):
        async for message in StreamSession(self.server, request_iterator).run():
            yield message


async def _call(context, function, *args):
    """``function(*args)``, a ServeError becoming the RPC's status."""
    try:
        return function(*args)
    except ServeError as exc:
        await _abort(context, exc)


def send_ended(trace) -> None:
    trace.capture("GRPC_SEND_END")
    trace.finish()


def _health_request(data: bytes) -> bytes:
    return data  # HealthCheckRequest{service}: every service name gets the server's readiness


def health_status(server: InferenceServer) -> bytes:
    """The HealthCheckResponse: SERVING (1) when the server is ready, else NOT_SERVING (2). The
    two-field messages are encoded by hand to avoid another dependency."""
    return b"\x08\x01" if server.ready() else b"\x08\x02"


def health_handler(server: InferenceServer) -> grpc.GenericRpcHandler:
    """``grpc.health.v1.Health/Check``, answered with ``health_status``."""

    async def check(_request: bytes, _context) -> bytes:
        return health_status(server)

    method = grpc.unary_unary_rpc_method_handler(check, request_deserializer=_health_request,
                                                 response_serializer=lambda b: b)
    return grpc.method_handlers_generic_handler("grpc.health.v1.Health", {"Check": method})


class AioFrontEnd:
    """The service over grpc.aio: the front end where the C++ transport is not built."""

    transport_name = "grpc.aio (Python transport)"

    def __init__(self, server: InferenceServer, address: str):
        self.grpc_server = grpc.aio.server(options=SERVER_OPTIONS)
        service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(InferenceService(server), self.grpc_server)
        self.grpc_server.add_generic_rpc_handlers((health_handler(server),))
        try:
            self.port = self.grpc_server.add_insecure_port(address)
        except RuntimeError:  # grpcio's "Failed to bind to address"
            self.port = 0
        if self.port == 0:
            raise OSError(f"cannot bind the gRPC port at {address}")

    async def start(self) -> None:
        await self.grpc_server.start()

    async def stop(self, grace_s: float) -> None:
        """Stop accepting; calls in flight get ``grace_s`` seconds to finish, then are cancelled."""
        await self.grpc_server.stop(grace_s)
