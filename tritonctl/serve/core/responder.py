"""Responses a model sends for a request itself, through a Python model's response sender, rather
than by returning them from execute(): one per request for an ordinary model, any number (then
the final flag) for a decoupled model (``model_transaction_policy { decoupled: true }``), from any
thread, also after execute() returned. Triton's statistics count a request when its final flag
arrives: a success, error responses of the model's own included (Triton 2.51 counts a request
failed only where execute() raised or the server could not send a response)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from tritonctl.serve.core.errors import ServeError, internal
from tritonctl.serve.core.types import InferRequest

if TYPE_CHECKING:
    from tritonctl.serve.core.model import ModelVersion


class ErrorResponse(ServeError):
    """An error a model returned from execute() as a request's response: the client gets it, and
    Triton's statistics count the request (and its rows) as a success."""


def is_failure(result) -> bool:
    """Whether Triton counts a request answered with ``result`` as failed: an error, but not the
    model's own error response."""
    return isinstance(result, ServeError) and not isinstance(result, ErrorResponse)


class Responder:
    """Turns what a model sends into responses of one model version's requests."""

    def __init__(self, model: ModelVersion):
        self.model = model
        self.decoupled: bool = model.decoupled

    def deliver(self, request: InferRequest, result: dict[str, np.ndarray] | ServeError | None, final: bool,
                failed: bool, started_ns: int) -> None:
        """``result``: the outputs by name, the error the model sent, or None (the final flag
        alone). ``failed``: the request failed before (execute() raised, or a response could not
        be sent); ``started_ns``: when the execution that received the request began (its queue
        time ends there)."""
        model = self.model
        response = error = None
        if isinstance(result, ServeError):
            error = result
        elif result is not None:
            try:
                response = model._response(request, result, strict=False)
            except ServeError as exc:
                error = exc
        if self.decoupled and request.stream is not None:
            request.send(response, error, final)
        elif response is not None or error is not None:  # one response per request: the first answers it
            request.finish(response, error)
        elif not request.done:  # the final flag alone, with no response before it
            error = internal(f"model '{model.name}' sent the final flag without a response")
            request.finish(None, error)
        if not final or request.padding:
            return
        now = time.monotonic_ns()
        if failed or is_failure(error):
            model.stats.record_failure(now - request.arrival_ns, "BACKEND")
        else:
            model.stats.record_success(now - request.arrival_ns, started_ns - request.queue_start_ns,
                                       request.batch_size)
