"""``inference.GRPCInferenceService`` (serving_protocol.md A.2) over grpc.aio, built from
tritonclient's own ``service_pb2(_grpc)``, and ``grpc.health.v1.Health/Check``."""

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

    async def _infer(self, message, trace=None):
        """(response message, None) or (None, ServeError)."""
        if trace is not None:  # grpc.aio hands the message over already read: an empty wait/read span
            trace.capture("GRPC_WAITREAD_END")
        try:
            request = decode_request(message, self.server.shm)
            if trace is not None:
                request.trace = trace
            future = self.server.infer_future(request, "ModelInfer RPC")
        except ServeError as exc:
            return None, exc
        try:
            response = await future
        except ServeError as exc:
            return None, exc
        except asyncio.CancelledError:  # the client cancelled or its deadline passed
            request.cancelled = True
            raise
        try:
            encoded = encode_response(response, service_pb2, request)
        except ServeError as exc:  # an output that does not fit its shared-memory region
            return None, exc
        if trace is not None:
            trace.capture("INFER_RESPONSE_COMPLETE")
            trace.record_tensors("TENSOR_BACKEND_OUTPUT", response.outputs)
        return encoded, None

    async def ModelInfer(self, request, context):
        trace = self.server.traces.sample(request.model_name) if self.server.traces.enabled else None
        if trace is not None:
            trace.capture("GRPC_WAITREAD_START")
            context.add_done_callback(lambda _context: _send_ended(trace))
        response, error = await self._infer(request, trace)
        if error is not None:
            await _abort(context, error)
        if trace is not None:
            trace.capture("GRPC_SEND_START")
        return response

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


def _send_ended(trace) -> None:
    trace.capture("GRPC_SEND_END")
    trace.finish()


def _health_request(data: bytes) -> bytes:
    return data  # HealthCheckRequest{service}: every service name gets the server's readiness


def health_handler(server: InferenceServer) -> grpc.GenericRpcHandler:
    """``grpc.health.v1.Health/Check``: SERVING (1) when the server is ready, else NOT_SERVING (2).
    The two-field messages are encoded by hand to avoid another dependency."""

    async def check(_request: bytes, _context) -> bytes:
        return b"\x08\x01" if server.ready() else b"\x08\x02"

    method = grpc.unary_unary_rpc_method_handler(check, request_deserializer=_health_request,
                                                 response_serializer=lambda b: b)
    return grpc.method_handlers_generic_handler("grpc.health.v1.Health", {"Check": method})


def build_server(server: InferenceServer, address: str) -> tuple[grpc.aio.Server, int]:
    """A grpc.aio server bound to ``address``; returns it and the bound port."""
    grpc_server = grpc.aio.server(options=SERVER_OPTIONS)
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(InferenceService(server), grpc_server)
    grpc_server.add_generic_rpc_handlers((health_handler(server),))
    port = grpc_server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot bind the gRPC port at {address}")
    return grpc_server, port
