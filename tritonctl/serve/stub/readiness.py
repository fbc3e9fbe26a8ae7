"""A Python model's own readiness check, ``TritonPythonModel.is_ready()``, as Triton's Python
backend calls it when a client asks whether the model is ready (``/v2/models/<model>/ready``,
gRPC ``ModelReady``): a model without the method is ready while its instance can execute; one
with it is ready when the method (plain or ``async def``) returns ``True``. An exception, another
return value, or no answer within ``TIMEOUT_S`` make it not ready; requests are served as before.

``run_is_ready`` runs the method (in the stub, or in the server's process with
``--python-isolation thread``); ``ReadinessCheck`` keeps one check in flight per instance: a
caller that asks while one runs waits for that one (at most ``TIMEOUT_S`` each), as Triton reuses
its in-flight message. Standard library only: the stub imports it.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Callable

TIMEOUT_S = 5.0
METHOD = "is_ready"


def has_is_ready(model) -> bool:
    return callable(getattr(model, METHOD, None))


def run_is_ready(model, loop: asyncio.AbstractEventLoop | None = None) -> str | None:
    """Call the model's ``is_ready()``: None when it says ready, else why not. A coroutine runs
    on ``loop`` (the model's own event loop) when given, else on a loop of its own."""
    try:
        result = getattr(model, METHOD)()
        if inspect.iscoroutine(result):
            result = asyncio.run_coroutine_threadsafe(result, loop).result() if loop else asyncio.run(result)
    except Exception as exc:
        return f"{METHOD}() raised {type(exc).__name__}: {exc}"
    if not isinstance(result, bool):
        return f"{METHOD}() must return a bool, got {type(result).__name__}"
    return None if result else f"{METHOD}() returned False"


class _Pending:
    def __init__(self):
        self.done = threading.Event()
        self.reason: str | None = None


class ReadinessCheck:
    """``check()``: None when the instance's ``is_ready()`` says ready, else why not. ``start(done)``
    begins one run and makes sure ``done(reason)`` is called once it ends."""

    def __init__(self, start: Callable[[Callable[[str | None], None]], None]):
        self._start = start
        self._lock = threading.Lock()
        self._pending: _Pending | None = None

    def check(self) -> str | None:
        with self._lock:
            pending, begin = self._pending, self._pending is None
            if begin:
                pending = self._pending = _Pending()
        if begin:
            self._start(lambda reason: self._finish(pending, reason))
        if not pending.done.wait(TIMEOUT_S):
            return f"{METHOD}() did not answer within {TIMEOUT_S:g} seconds"
        return pending.reason

    def _finish(self, pending: _Pending, reason: str | None) -> None:
        with self._lock:
            if self._pending is pending:
                self._pending = None
        pending.reason = reason
        pending.done.set()
