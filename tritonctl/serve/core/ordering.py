"""``dynamic_batching { preserve_ordering: true }`` (serving_protocol.md B.4).

With several instances, a later batch can finish before an earlier one. Triton then holds the
finished responses back until every request taken from the queue before them has been answered,
so clients see responses in the order their requests left the queue (FIFO: the order they were
queued). Requests that never leave the queue (timed out, cancelled) are answered at once, as in
Triton. Models without the flag never pass through here.
"""

from __future__ import annotations

import logging
import threading
from collections import deque

from tritonctl.serve.core.types import InferRequest

log = logging.getLogger("tritonctl.serve")


class _Slot:
    __slots__ = ("deliver", "result")

    def __init__(self, deliver):
        self.deliver = deliver
        self.result: tuple | None = None  # (response, error) once the request has finished


class OrderedCompletions:
    """Delivers the results of the requests handed to ``hold`` in the order they were handed."""

    def __init__(self):
        self._slots: deque[_Slot] = deque()
        self._lock = threading.Lock()
        self._delivering = False  # one thread delivers at a time, which keeps the order

    def hold(self, request: InferRequest) -> None:
        """Take over ``request``'s completion; call in queue order (under the scheduler's lock)."""
        slot = _Slot(request.complete)

        def complete(response, error) -> None:
            with self._lock:
                slot.result = (response, error)
                if self._delivering:
                    return  # the delivering thread picks it up before it stops
                self._delivering = True
            self._deliver()

        with self._lock:
            self._slots.append(slot)
        request.complete = complete

    def _deliver(self) -> None:
        """Deliver finished results from the head until the head is unfinished. A delivery that
        finishes another held request (an ensemble step, a cache hit) only marks it here."""
        while True:
            with self._lock:
                ready = []
                while self._slots and self._slots[0].result is not None:
                    ready.append(self._slots.popleft())
                if not ready:
                    self._delivering = False
                    return
            for slot in ready:
                if slot.deliver is None:
                    continue
                try:
                    slot.deliver(*slot.result)
                except Exception:  # one failing callback must not stall every later response
                    log.exception("delivering an ordered response failed")

    @property
    def waiting(self) -> int:
        """Requests taken from the queue whose results are not delivered yet."""
        with self._lock:
            return len(self._slots)
