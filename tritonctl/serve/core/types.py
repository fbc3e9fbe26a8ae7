"""Requests, responses and tensors of the data plane, independent of any transport."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from tritonctl.repo_schema.datatypes import DATATYPES
from tritonctl.serve.core.errors import ServeError

# Protocol datatype -> numpy dtype. BF16 has no numpy type: its raw 2-byte words are kept as uint16.
NUMPY_DTYPE: dict[str, np.dtype] = {t.wire: np.dtype(t.numpy) for t in DATATYPES}
DATATYPE_OF_NUMPY: dict[np.dtype, str] = {
    dtype: name for name, dtype in NUMPY_DTYPE.items() if name not in ("BF16",)
}


@dataclass(slots=True)
class InferTensor:
    """A named tensor: the protocol datatype and its data (BYTES: an object array of bytes)."""

    name: str
    datatype: str
    data: np.ndarray

    @property
    def shape(self) -> list[int]:
        return list(self.data.shape)


@dataclass(slots=True)
class RequestedOutput:
    name: str
    classification: int = 0  # top-N classification when > 0
    parameters: dict[str, Any] = field(default_factory=dict)  # transport options such as binary_data
    shm: Any = None  # shm.OutputTarget: the transport writes the output into shared memory


@dataclass(slots=True)
class InferResponse:
    model_name: str
    model_version: str
    id: str
    outputs: list[InferTensor]
    parameters: dict[str, Any] = field(default_factory=dict)


class ModelOutputs(dict):
    """A model's outputs by name, with the parameters its response carries (a Python model's
    ``InferenceResponse(..., parameters=...)``)."""

    __slots__ = ("parameters",)

    def __init__(self, outputs: dict, parameters: dict[str, Any]):
        super().__init__(outputs)
        self.parameters = parameters


Completion = Callable[["InferResponse | None", "ServeError | None"], None]
# One response of a decoupled model: (response, error, final). A final call may carry neither (the
# flag alone), and nothing follows it.
Stream = Callable[["InferResponse | None", "ServeError | None", bool], None]


# Slots with a weakref slot (ensembles and BLS hold requests weakly) need Python 3.11; on 3.10 the
# request keeps an instance dict.
_SLOTS = {"slots": True, "weakref_slot": True} if sys.version_info >= (3, 11) else {}


@dataclass(eq=False, **_SLOTS)
class InferRequest:
    """One inference request as the scheduler sees it.

    ``complete`` is called exactly once, from whatever thread finishes the request, with either a
    response or an error; transports turn that into a reply on their own event loop. A decoupled
    model answers through ``stream`` instead (``send``), which only transports that take several
    responses per request set (gRPC streaming, BLS ``exec(decoupled=True)``).
    """

    model_name: str
    inputs: dict[str, InferTensor]
    model_version: str = ""  # "" = the model's latest ready version
    id: str = ""
    requested_outputs: list[RequestedOutput] | None = None  # None = every output
    parameters: dict[str, Any] = field(default_factory=dict)
    priority: int = 0  # 0 = the model's default level; 1 is the highest
    timeout_us: int = 0  # requested queue timeout; 0 = the model's default
    complete: Completion | None = None
    stream: Stream | None = None
    cancelled: bool = False  # set (by ``cancel``) when the client has gone
    on_cancel: Callable[["InferRequest"], None] | None = None  # the scheduler's, while it queues the request
    trace: Any = None  # trace.Trace when the request is traced
    sequence_id: int | str = 0  # correlation id of a sequence (uint64 or string); 0 or "" = none
    sequence_start: bool = False
    sequence_end: bool = False
    arrival_ns: int = field(default_factory=time.monotonic_ns)
    # Filled by the server while scheduling:
    batch_size: int = 1
    batch_key: tuple = ()  # requests with equal keys may share a batch (scheduler.DynamicBatchScheduler)
    deadline_ns: int = 0  # 0 = no queue deadline
    reject_after_ns: int = 0  # the queue deadline when its policy rejects (REJECT): running it later is stale
    delayed: bool = False  # timed out under a DELAY policy
    queue_start_ns: int = 0
    state: Any = None  # the sequence's implicit state (sequence_state.SequenceState) its outputs update
    padding: bool = False  # fills an idle sequence slot of a batch: it runs, but answers no one
    # Told (input_ns, infer_ns, output_ns) of the execution that ran the request: how an ensemble
    # adds up its steps' compute times (Triton's secondary stats aggregator).
    compute_sink: Callable[[int, int, int], None] | None = None
    # The backend released the request with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE: it runs again
    # (an iterative sequence's next step) instead of ending.
    reschedule: bool = False
    tracker: Any = None  # in_flight.InFlight, told when the request is answered
    shm_holds: Any = None  # shm.Holds: the shared-memory regions it names, held until it is answered
    _done: bool = False

    def release_shm(self) -> None:
        """Let go of the shared-memory regions the request names (its outputs are written): one
        unregistered meanwhile goes now. Transports call it before the answer leaves; finishing
        calls it too."""
        if self.shm_holds is not None:
            self.shm_holds.release()

    def finish(self, response: InferResponse | None, error: ServeError | None = None) -> None:
        """Deliver the result once; later calls are ignored."""
        if self._done:
            return
        self._done = True
        if self.trace is not None:
            self.trace.capture("REQUEST_END")
        try:
            if self.complete is not None:
                self.complete(response, error)
        finally:
            self.release_shm()
            if self.tracker is not None:
                self.tracker.discard(self)

    def cancel(self) -> None:
        """The client has gone: a request still queued is dropped now (answered CANCELLED)."""
        self.cancelled = True
        if self.on_cancel is not None:
            self.on_cancel(self)

    def send(self, response: InferResponse | None, error: ServeError | None = None, final: bool = False) -> None:
        """Deliver one response (or error) of a decoupled model and/or its final flag; nothing
        is delivered after the final flag."""
        if self._done:
            return
        if final:
            self._done = True
            if self.trace is not None:
                self.trace.capture("REQUEST_END")
        try:
            self.stream(response, error, final)
        finally:
            if final:
                self.release_shm()
            if final and self.tracker is not None:
                self.tracker.discard(self)

    @property
    def done(self) -> bool:
        return self._done
