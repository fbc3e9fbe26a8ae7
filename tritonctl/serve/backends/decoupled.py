"""What a Python model answers requests with besides execute()'s return value: the response
sender of each request (``request.get_response_sender()``), which a decoupled model
(``model_transaction_policy { decoupled: true }``) uses to send 0..N responses and then the final
flag, from any thread, also after execute() returned; and the asyncio event loop that runs an
instance's ``async def execute``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Callable

from tritonctl.serve.backends import pb_utils
from tritonctl.serve.core.errors import ServeError
from tritonctl.serve.core.responder import is_failure
from tritonctl.serve.core.types import InferRequest

log = logging.getLogger("tritonctl.serve")

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class InferenceResponseSender:
    """``send(response=None, flags=0)`` and ``is_cancelled()``, as Triton's. ``convert`` turns a
    pb_utils.InferenceResponse into outputs by name or a ServeError; ``deliver`` is the model
    version's ``Responder.deliver``."""

    def __init__(self, request: InferRequest, decoupled: bool, convert: Callable, deliver: Callable,
                 started_ns: int):
        self._request = request
        self._decoupled = decoupled
        self._convert = convert
        self._deliver = deliver
        self._started_ns = started_ns
        self._lock = threading.Lock()  # responses of one request leave in the order they were sent
        self._closed = False
        self._failed = False
        self._sent = 0  # responses and final flags sent

    def send(self, response: pb_utils.InferenceResponse | None = None, flags: int = 0) -> None:
        pb_utils.check_send_arguments(response, flags)
        final = flags == FINAL
        with self._lock:
            if not self._decoupled:  # one response, then the final flag (with it or alone); Triton's texts
                if response is not None and self._sent:
                    raise pb_utils.TritonModelException("Unable to send response. Non-decoupled model cannot send more "
                                                        "than one response.")
                if response is None and not self._sent:
                    raise pb_utils.TritonModelException("Unable to send response. Non-decoupled model cannot send "
                                                        "complete final before sending a response.")
            if self._closed:
                raise pb_utils.TritonModelException("Unable to send response. Response sender has been closed.")
            self._closed = final
            self._sent += 1
            result = None if response is None else self._convert(response)
            # the model's own error response counts as a success in Triton's statistics; only an
            # error of the server's making (an output it cannot send) fails the request
            self._failed = self._failed or is_failure(result)
            self._deliver(self._request, result, final, self._failed, self._started_ns)

    def claim_for_return(self) -> bool:
        """Whether the response execute() returned for this request answers it: not when the
        model sent a response (or the final flag) through this sender already, which Triton
        ignores. Either way the sender is closed afterwards."""
        with self._lock:
            unused = not self._sent and not self._closed
            self._closed = True
            return unused

    def fail(self, error: ServeError) -> None:
        """End the request with ``error`` unless the model already sent its final flag."""
        with self._lock:
            if self._closed:
                return
            self._closed = self._failed = True
            self._deliver(self._request, error, True, True, self._started_ns)

    def is_cancelled(self) -> bool:
        return self._request.cancelled


class BatchSenders:
    """The response senders of one batch's requests, each made when the model first asks for it."""

    __slots__ = ("decoupled", "convert", "deliver", "started_ns", "made")

    def __init__(self, decoupled: bool, convert: Callable, deliver: Callable, started_ns: int):
        self.decoupled = decoupled
        self.convert = convert
        self.deliver = deliver
        self.started_ns = started_ns
        self.made: dict[int, InferenceResponseSender] = {}

    def sender(self, index: int, request: InferRequest) -> InferenceResponseSender:
        sender = self.made.get(index)
        if sender is None:
            sender = self.made[index] = InferenceResponseSender(request, self.decoupled, self.convert, self.deliver,
                                                                self.started_ns)
        return sender


class ModelEventLoop:
    """The asyncio loop of one model instance, in a thread of its own, running its ``async def
    execute`` coroutines: an ordinary model's batch waits for its coroutine; a decoupled model's
    does not, so the instance takes its next batch while earlier ones await (Triton 24.04+)."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name=f"{name}-asyncio")
        self._thread.start()

    def run(self, coroutine):
        """Run ``coroutine`` on the loop and wait for its result (or exception)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def start(self, coroutine, on_error: Callable[[BaseException], None]) -> None:
        """Run ``coroutine`` on the loop without waiting; ``on_error`` gets what it raises."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        future.add_done_callback(lambda f: None if f.cancelled() or f.exception() is None else on_error(f.exception()))

    def close(self) -> None:
        """Cancel what still runs and stop the loop (model unload)."""
        def shutdown() -> None:
            for task in asyncio.all_tasks(self.loop):
                task.cancel()
            self.loop.call_soon(self.loop.stop)

        self.loop.call_soon_threadsafe(shutdown)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()
