"""The transport-free server: what every HTTP / gRPC endpoint asks for, in protocol terms."""

from __future__ import annotations

import asyncio
import threading
import time

from tritonctl.repo_schema.pb_config import config_to_json
from tritonctl.serve.core.errors import ServeError, Status, invalid_arg, not_found
from tritonctl.serve.core.in_flight import InFlight
from tritonctl.serve.core.log_settings import LogSettings
from tritonctl.serve.core.manager import ModelManager
from tritonctl.serve.core.model import ModelVersion
from tritonctl.serve.core.names import check_model_name, check_version
from tritonctl.serve.core.shm import SharedMemoryManager
from tritonctl.serve.core.trace import TraceManager
from tritonctl.serve.core.trace_config import TraceConfig
from tritonctl.serve.core.types import InferRequest, Stream

EXTENSIONS = ["classification", "sequence", "model_repository", "model_repository(unload_dependents)",
              "schedule_policy", "model_configuration", "system_shared_memory", "cuda_shared_memory",
              "binary_tensor_data", "parameters", "statistics", "trace", "logging"]
SERVER_NAME = "triton"
PROTOCOL_VERSION = "2.51.0"  # the Triton release whose protocol behaviour this server follows


class InferenceServer:
    def __init__(self, manager: ModelManager, trace_config: TraceConfig | None = None,
                 log_settings: LogSettings | None = None, name: str = SERVER_NAME):
        self.manager = manager
        self.name = name  # the server metadata's name (tritonserver's --id)
        manager.host.server = self  # the handle the manager's model instances got at load (BLS)
        self.shm = SharedMemoryManager()
        self.traces = TraceManager(trace_config)
        self.live = True
        self.stopping = False
        self.in_flight = InFlight()  # requests taken and not yet answered
        self.streams: set = set()  # open gRPC streams (grpc.stream.StreamSession), which ``end`` on a stop
        self.log_settings = log_settings or LogSettings()

    # ---- health and metadata -------------------------------------------------------------------
    def ready(self) -> bool:
        return self.live and not self.stopping and self.manager.server_ready()

    def metadata(self) -> dict:
        return {"name": self.name, "version": PROTOCOL_VERSION, "extensions": EXTENSIONS}

    def model_metadata(self, name: str, version: str = "") -> dict:
        model = self.manager.get(name, version)
        config = model.config

        def tensors(specs) -> list[dict]:
            return [{"name": s.name, "datatype": s.datatype, "shape": list(s.dims)} for s in specs.values()]

        return {
            "name": name,
            "versions": [model.version_str] if version else self.manager.ready_versions(name),
            "platform": config.platform or config.backend,
            "inputs": tensors(model.inputs),
            "outputs": tensors(model.outputs),
        }

    def model_config(self, name: str, version: str = ""):
        return self.manager.get(name, version).config

    def model_config_json(self, name: str, version: str = "") -> dict:
        return config_to_json(self.model_config(name, version))

    def statistics(self, name: str = "", version: str = "") -> dict:
        if not name:
            stats = [mv.stats.to_json() for entry in self.manager.models.values()
                     for _, mv in sorted(entry.versions.items())]
            return {"model_stats": stats}
        check_model_name(name)
        check_version(name, version)
        entry = self.manager.models.get(name)
        if entry is None or not entry.versions:  # INVALID_ARG, as Triton answers statistics
            raise invalid_arg(f"requested model '{name}' is not available")
        if version:
            model_version = entry.versions.get(int(version))
            if model_version is None:
                raise invalid_arg(f"requested model version is not available for model '{name}'")
            return {"model_stats": [model_version.stats.to_json()]}
        return {"model_stats": [mv.stats.to_json() for _, mv in sorted(entry.versions.items())]}

    # ---- inference ---------------------------------------------------------------------------
    def submit(self, request: InferRequest, endpoint: str = "") -> ModelVersion:
        """Check and queue ``request``; raises ServeError when it is refused at once. A decoupled
        model needs a request that takes several responses (``stream``); ``endpoint`` names the
        endpoint in the refusal (Triton's text). Returns the model version it was queued on."""
        model = self.manager.get(request.model_name, request.model_version)
        if model.decoupled and request.stream is None:
            raise ServeError(Status.UNSUPPORTED, f"{endpoint or 'this endpoint'} doesn't support models with "
                                                 "decoupled transaction policy")
        if request.trace is not None:
            request.trace.started(model.name, model.version, request)
        model.prepare(request)
        self.in_flight.add(request)
        try:
            model.enqueue(request)
        except ServeError as exc:
            if not model.scheduler.accepting and not self.stopping:
                # The version was replaced by a reload between lookup and enqueue: use the new one.
                try:
                    model = self.manager.get(request.model_name, request.model_version)
                    model.prepare(request)
                    model.enqueue(request)
                except BaseException:
                    self.in_flight.discard(request)
                    raise
                return model
            self.in_flight.discard(request)
            if exc.counted:
                model.stats.record_failure(time.monotonic_ns() - request.arrival_ns, "REJECTED")
            raise exc
        except BaseException:
            self.in_flight.discard(request)
            raise
        return model

    def trace_setting(self, model: str = "", changes: dict | None = None) -> dict:
        """The trace settings of ``model`` ("" = global), after applying ``changes`` if given."""
        if model and not self.manager.is_ready(model):
            raise invalid_arg(f"Request for unknown model : {model}")
        if changes:
            return self.traces.update(model, changes)
        return self.traces.setting(model)

    def close(self) -> None:
        """Release shared-memory regions and write the buffered traces (server stop)."""
        self.shm.close()
        self.traces.close()
        self.log_settings.close()

    def infer_stream(self, request: InferRequest, push: Stream) -> bool:
        """Submit from an event loop for a client that takes several responses per request (gRPC
        streaming): ``push(response, error, final)`` runs on that loop for each response of a
        decoupled model, and once (final) for any other model. Returns whether the model is
        decoupled. Once the server is stopping, a stream's new request is refused as Triton refuses it
        (its models are unloading)."""
        if self.stopping:
            self.manager.get(request.model_name, request.model_version)  # an unknown model is refused as such
            raise not_found(f"Request for unknown model: '{request.model_name}' has no available versions")
        loop = asyncio.get_running_loop()
        request.complete = lambda response, error: loop.call_soon_threadsafe(push, response, error, True)
        request.stream = lambda response, error, final: loop.call_soon_threadsafe(push, response, error, final)
        return self.submit(request).decoupled


class LoopCompletions:
    """Hands finished requests from worker threads to one event loop, waking the loop once per
    burst (a batch of N requests costs one wake-up, not N)."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self._items: list = []
        self._lock = threading.Lock()
        self._scheduled = False

    def push(self, future: asyncio.Future, response, error) -> None:
        with self._lock:
            self._items.append((future, response, error))
            if self._scheduled:
                return
            self._scheduled = True
        self.loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self._lock:
            items, self._items = self._items, []
            self._scheduled = False
        for future, response, error in items:
            _resolve(future, response, error)


def _resolve(future: asyncio.Future, response, error) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(response)




