"""The inference requests the server has taken and not yet answered: what a stop waits for, and
what it cuts when ``--exit-timeout-secs`` is up."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

from tritonctl.serve.core.errors import ServeError
from tritonctl.serve.core.types import InferRequest


class InFlight:
    """Requests are added when the server takes them and leave when their (final) response is
    delivered (``InferRequest.finish`` / ``send``), from whatever thread delivers it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._requests: dict[int, InferRequest] = {}
        self._on_empty = None  # called (on any thread) when the last request leaves

    def add(self, request: InferRequest) -> None:
        request.tracker = self
        with self._lock:
            self._requests[id(request)] = request

    def discard(self, request: InferRequest) -> None:
        with self._lock:
            if self._requests.pop(id(request), None) is None or self._requests:
                return
            on_empty = self._on_empty
        if on_empty is not None:
            on_empty()

    def __len__(self) -> int:
        return len(self._requests)

    def by_model(self) -> Counter:
        """How many requests each model has in flight."""
        with self._lock:
            return Counter(request.model_name for request in self._requests.values())

    async def drained(self, timeout_s: float) -> bool:
        """Wait (on the running loop) until no request is in flight, up to ``timeout_s``; True when none is."""
        loop = asyncio.get_running_loop()
        empty = asyncio.Event()
        self._on_empty = lambda: loop.call_soon_threadsafe(empty.set)
        try:
            if not self._requests:
                return True
            await asyncio.wait_for(empty.wait(), max(timeout_s, 0))
            return True
        except asyncio.TimeoutError:
            return not self._requests
        finally:
            self._on_empty = None

    def cut(self, error_of) -> Counter:
        """Answer every request still in flight with ``error_of(model_name)`` (a ServeError);
        what the model sends for them later goes nowhere. Returns how many each model had."""
        with self._lock:
            requests, self._requests = list(self._requests.values()), {}
        cut: Counter = Counter()
        for request in requests:
            cut[request.model_name] += 1
            error: ServeError = error_of(request.model_name)
            request.cancelled = True
            if request.stream is not None:
                request.send(None, error, final=True)
            else:
                request.finish(None, error)
        return cut
