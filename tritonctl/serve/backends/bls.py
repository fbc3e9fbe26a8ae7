"""Business logic scripting (BLS): a Python model's ``pb_utils.InferenceRequest(...).exec()`` and
``await ...async_exec()`` run another model (or the same one) on the server that serves the
calling model, through the target's own scheduler, exactly as a client request would: dynamic
batching, queue policies and statistics included. As in Triton, whatever goes wrong comes back
as the response's error (``has_error()``), never as an exception: a request the server refuses
reads ``Model <name> - Error when running inference: <reason>``; an error of the target's
execution comes back as the target sent it. ``exec(decoupled=True)`` returns an iterator of every
response a (decoupled) model sends; a final flag sent alone ends it as an empty response.

A call that could never be answered (a model calling itself with its only instance, or any
cycle of waiting instances) answers with an error at once instead of hanging: ``bls_deadlock``.
"""

from __future__ import annotations

import asyncio
import queue
import sys
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from tritonctl.serve.backends import bls_deadlock, pb_utils
from tritonctl.serve.backends.bls_deadlock import hold, release
from tritonctl.serve.core.errors import ServeError, Status, invalid_arg
from tritonctl.serve.core.types import DATATYPE_OF_NUMPY, InferRequest, InferTensor, RequestedOutput

# pb_utils.TritonError codes <-> Triton statuses.
STATUS_OF_CODE = {
    pb_utils.TritonError.UNKNOWN: Status.UNKNOWN, pb_utils.TritonError.INTERNAL: Status.INTERNAL,
    pb_utils.TritonError.NOT_FOUND: Status.NOT_FOUND, pb_utils.TritonError.INVALID_ARG: Status.INVALID_ARG,
    pb_utils.TritonError.UNAVAILABLE: Status.UNAVAILABLE, pb_utils.TritonError.UNSUPPORTED: Status.UNSUPPORTED,
    pb_utils.TritonError.ALREADY_EXISTS: Status.ALREADY_EXISTS, pb_utils.TritonError.CANCELLED: Status.CANCELLED,
}
CODE_OF_STATUS = {status: code for code, status in STATUS_OF_CODE.items()}


@dataclass(frozen=True)
class Caller:
    """The model instance whose code makes a BLS call. ``holds_instance``: the instance's worker
    waits for that code (a sync ``execute``, or the coroutine of an ordinary model's ``async def
    execute``), so while the call waits no other request can run on the instance."""

    backend: Any  # python.PythonBackend
    holds_instance: bool


CALLER: ContextVar[Caller | None] = ContextVar("tritonctl_bls_caller", default=None)
# A weakref to its instance, in every model module's globals: finds the caller of a BLS call made
# in a thread the model started (no context there).
INSTANCE_GLOBAL = "__tritonctl_model_instance__"


def current_caller(attempt: str = "a BLS request (exec / async_exec)") -> Caller:
    """The model instance whose code runs ``attempt``: the one executing, else the one whose module
    the calling code belongs to (a thread the model started)."""
    caller = CALLER.get()
    if caller is not None:
        return caller
    frame = sys._getframe(1)
    while frame is not None:
        ref = frame.f_globals.get(INSTANCE_GLOBAL)
        backend = ref() if ref is not None else None
        if backend is not None:
            return Caller(backend, holds_instance=False)
        frame = frame.f_back
    raise pb_utils.TritonModelException(f"{attempt} runs only in the code of a model that tritonctl serve serves: "
                                        "in its methods, or in a thread they start")


def _server_of(backend):
    """The server that serves ``backend`` (python.PythonBackend), as its load handed it over. BLS
    requests are refused before the instance serves and after (initialize, finalize), as in Triton."""
    server = backend.host.server
    if not backend.bls_ready:
        if server is None or not _serves(server, backend):
            raise pb_utils.TritonModelException(f"BLS is only supported during the 'execute' function. (model "
                                                f"instance '{backend.instance.name}' is not serving)")
        backend.bls_ready = True
    return server


class ModelControl:
    """The model loading API of a model (pb_utils.load_model, unload_model, is_model_ready): the
    repository API's load and unload of the server that serves it (explicit model control mode)."""

    def __init__(self, backend):
        server = backend.host.server  # set before any model loads; also in initialize and finalize, as in Triton
        if server is None:
            raise pb_utils.TritonModelException("load_model, unload_model and is_model_ready need the server that "
                                                f"serves model instance '{backend.instance.name}'; none runs")
        self._manager = server.manager

    def load(self, name: str, parameters: dict) -> None:
        _as_value_error(self._manager.load_from_api, name, parameters)

    def unload(self, name: str) -> None:
        _as_value_error(self._manager.unload_from_api, name)

    def ready(self, name: str, version: str) -> bool:
        return _as_value_error(self._manager.is_ready, name, version)


def _as_value_error(method, *args):
    """pb_utils takes a refusal as ValueError, wherever the model runs."""
    try:
        return method(*args)
    except ServeError as exc:
        raise ValueError(exc.message) from None


def _serves(server, backend) -> bool:
    return any(instance is backend for entry in list(server.manager.models.values())
               for version in list(entry.versions.values()) for instance in version.instances)


# ---- requests and responses ------------------------------------------------------------------
Item = tuple  # (InferResponse | None, ServeError | None, final)


class Call:
    """One BLS request in flight: the server's request, its target model version, and where its
    responses go (``deliver`` gets an Item for each, from the thread that answers)."""

    def __init__(self, model_name: str, request: InferRequest, deliver: Callable[[Item], None]):
        self.model_name = model_name
        self.request = request
        self.deliver = deliver
        self.target = None  # core.model.ModelVersion, once queued
        self.started = False  # a decoupled target began executing it (see mark_started)

    def on_complete(self, response, error) -> None:
        self.on_stream(response, error, True)

    def on_stream(self, response, error, final: bool) -> None:
        if final:
            bls_deadlock.forget(self)
        self.deliver((response, error, final))


def failure(model_name: str, reason: str) -> pb_utils.InferenceResponse:
    """A request the server refused, as Triton's Python backend reports it."""
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(
        f"Model {model_name} - Error when running inference: {reason}", pb_utils.TritonError.INTERNAL))


def _deadlocked(call: Call) -> pb_utils.InferenceResponse:
    return failure(call.model_name, bls_deadlock.deadlock_reason(call.model_name))


def to_pb(response, error: ServeError | None) -> pb_utils.InferenceResponse:
    if error is not None:
        return pb_utils.InferenceResponse(error=pb_utils.TritonError(
            error.message, CODE_OF_STATUS.get(error.status, pb_utils.TritonError.INTERNAL)))
    if response is None:  # the final flag alone
        return pb_utils.InferenceResponse()
    tensors = [pb_utils.Tensor(t.name, _as_bytes(t.data) if t.datatype == "BYTES" else pb_utils.model_data(
        t.datatype, t.data)) for t in response.outputs]
    return pb_utils.InferenceResponse(tensors, parameters=response.parameters or None)


def _utf8(value):
    return value.encode("utf-8") if isinstance(value, str) else value


_TO_BYTES = np.frompyfunc(_utf8, 1, 1)


def _as_bytes(data: np.ndarray) -> np.ndarray:
    """BYTES elements as ``bytes``, as they cross Triton's wire (a model may have made them str)."""
    return np.asarray(_TO_BYTES(data), dtype=object).reshape(data.shape)


def _input(tensor: pb_utils.Tensor, model_name: str) -> InferTensor:
    datatype, data = pb_utils.server_data(tensor._host_numpy("BLS input"))
    if data.dtype.kind in "OSU":
        return InferTensor(tensor.name(), "BYTES", _as_bytes(data))
    datatype = datatype or DATATYPE_OF_NUMPY.get(data.dtype)
    if datatype is None:
        raise invalid_arg(f"input '{tensor.name()}' for model '{model_name}' holds numpy dtype {data.dtype}, which "
                          "has no Triton datatype")
    return InferTensor(tensor.name(), datatype, data)


def _server_request(request: pb_utils.InferenceRequest) -> InferRequest:
    name = request.model_name()
    flags = request.flags()
    names = request.requested_output_names()
    return InferRequest(
        name, {t.name(): _input(t, name) for t in request.inputs()},
        model_version="" if request.model_version() < 0 else str(request.model_version()), id=request.request_id(),
        requested_outputs=[RequestedOutput(n) for n in names] if names else None,
        parameters=dict(request._parameters), timeout_us=request.timeout(), sequence_id=request.correlation_id(),
        sequence_start=bool(flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START),
        sequence_end=bool(flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END))


def submit(server, request: pb_utils.InferenceRequest, decoupled: bool,
           deliver: Callable[[Item], None]) -> tuple[Call | None, pb_utils.InferenceResponse | None]:
    """Queue ``request`` on its model: (the call, None), or (None, the refusal as a response)."""
    name = request.model_name()
    version = request.model_version()
    try:
        target = server.manager.get(name, "" if version < 0 else str(version))
    except ServeError:
        return None, failure(name, f"Failed for execute the inference request. Model '{name}' is not ready.")
    if target.decoupled and not decoupled:
        return None, failure(name, f"Model {name} is using the decoupled. The current BLS request call doesn't "
                                   "support models using the decoupled transaction policy. Please use "
                                   "'decoupled=True' argument to the 'exec' or 'async_exec' calls for decoupled "
                                   "models.'")
    try:
        server_request = _server_request(request)
    except ServeError as exc:
        return None, failure(name, exc.message)
    call = Call(name, server_request, deliver)
    server_request.complete = call.on_complete
    if decoupled:
        server_request.stream = call.on_stream
    if target.decoupled:
        bls_deadlock.track(call)
    try:
        call.target = server.submit(server_request, "BLS request")
    except ServeError as exc:
        bls_deadlock.forget(call)
        return None, failure(name, exc.message)
    return call, None


# ---- exec / async_exec ---------------------------------------------------------------------------
def execute(request: pb_utils.InferenceRequest, decoupled: bool):
    """``InferenceRequest.exec``: wait for the response, or an iterator of responses."""
    caller = current_caller()
    items: queue.SimpleQueue = queue.SimpleQueue()
    call, refused = submit(_server_of(caller.backend), request, decoupled, items.put)
    if decoupled:
        return ResponseIterator(items).started(call, refused)
    if refused is not None:
        return refused
    if not hold(caller, call):
        return _deadlocked(call)
    try:
        response, error, _final = items.get()
    finally:
        release(caller, call)
    return to_pb(response, error)


def execute_async(request: pb_utils.InferenceRequest, decoupled: bool) -> asyncio.Future:
    """``InferenceRequest.async_exec``: a future of the running event loop."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise pb_utils.TritonModelException("async_exec() returns an awaitable: call it inside 'async def execute' "
                                            "and await it; use exec() in a plain execute") from None
    caller = current_caller()
    server = _server_of(caller.backend)
    future = loop.create_future()
    if decoupled:  # done once the first response is here, as in Triton: iterating then waits on nothing
        items: queue.SimpleQueue = queue.SimpleQueue()
        iterator = ResponseIterator(items)
        first = [True]

        def deliver_first(item: Item) -> None:
            items.put(item)
            if first:  # the loop is told once, at the first response
                first.clear()
                loop.call_soon_threadsafe(_settle, future, iterator)

        iterator.started(*submit(server, request, True, deliver_first))
        if iterator._call is None:
            future.set_result(iterator)
        return future
    holder: list[Call] = []

    def deliver(item: Item) -> None:
        if holder:
            release(caller, holder[0])
        loop.call_soon_threadsafe(_settle, future, to_pb(item[0], item[1]))

    call, refused = submit(server, request, False, deliver)
    if refused is not None:
        future.set_result(refused)
        return future
    holder.append(call)
    if not hold(caller, call):
        future.set_result(_deadlocked(call))
    return future


def _settle(future: asyncio.Future, response: pb_utils.InferenceResponse) -> None:
    if not future.done():
        future.set_result(response)


class ResponseIterator:
    """The responses of ``exec(decoupled=True)``, in the order the model sends them. As Triton's, an
    iteration that starts after the last response was taken goes over all of them again."""

    def __init__(self, items: queue.SimpleQueue):
        self._items = items
        self._call: Call | None = None
        self._ended = False
        self._seen: list = []
        self._index = 0

    def started(self, call: Call | None, refused: pb_utils.InferenceResponse | None) -> "ResponseIterator":
        """The iterator of the submitted ``call``, or of the one response ``refused`` (no call)."""
        self._call = call
        if call is None:
            self._ended = True
            self._seen.append(refused)
        return self

    def __iter__(self) -> "ResponseIterator":
        if self._ended and self._index >= len(self._seen):
            self._index = 0
        return self

    def __next__(self) -> pb_utils.InferenceResponse:
        if self._ended:
            if self._index >= len(self._seen):
                raise StopIteration
        else:
            self._seen.append(self._receive())
        self._index += 1
        return self._seen[self._index - 1]

    def _receive(self) -> pb_utils.InferenceResponse:
        try:
            response, error, final = self._items.get_nowait()
        except queue.Empty:
            caller = CALLER.get()
            if caller is not None and not hold(caller, self._call):
                self._ended = True
                return _deadlocked(self._call)
            try:
                response, error, final = self._items.get()
            finally:
                if caller is not None:
                    release(caller, self._call)
        self._ended = final
        return to_pb(response, error)

    def cancel(self) -> None:
        """Tell the model the caller no longer wants the responses (``is_cancelled()``)."""
        if self._call is not None:
            self._call.request.cancelled = True
