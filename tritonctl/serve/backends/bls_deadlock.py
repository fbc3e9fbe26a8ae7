"""The deadlock guard of BLS (``backends.bls``): a BLS call that waits while its model instance
waits for it can never finish. Triton then blocks forever (its documented limitation: "if model A
performs an inference request on itself and there are no more model instances ready to execute
the inference request, the model will block on the inference execution forever").

Every instance that waits for a BLS call is recorded here. A new wait is refused, and the call
answers with an error at once, only when it could certainly never end: its request waits in a
queue of (or runs on) a model whose every instance waits itself, transitively, for requests in
the same situation - a cycle of waiting instances with no way out. A request with a queue deadline
leaves such a cycle when it times out, and a decoupled request that already began executing may be
answered by any thread its model handed it to, so neither is ever called stuck.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tritonctl.serve.backends.bls import Call, Caller
    from tritonctl.serve.core.types import InferRequest

_LOCK = threading.Lock()
_WAITS: dict[int, list[Call]] = {}  # id(model instance) -> the calls it waits for
_CALLS: dict[int, Call] = {}  # id(server request) -> its call, for decoupled targets, until the final response


def track(call: Call) -> None:
    """Follow ``call``, queued on a decoupled model, until its final response (``forget``)."""
    with _LOCK:
        _CALLS[id(call.request)] = call


def forget(call: Call) -> None:
    if _CALLS:
        with _LOCK:
            _CALLS.pop(id(call.request), None)


def mark_started(requests: list[InferRequest]) -> None:
    """A decoupled model begins executing ``requests``: BLS calls among them may now be answered
    by any thread the model hands them to."""
    if _CALLS:
        for request in requests:
            call = _CALLS.get(id(request))
            if call is not None:
                call.started = True


def hold(caller: Caller, call: Call) -> bool:
    """Record that ``caller``'s instance waits for ``call``; False (recording nothing, and the
    request cancelled) when that wait could never end."""
    if not caller.holds_instance:
        return True
    key = id(caller.backend)
    with _LOCK:
        if call.request.done:
            return True
        _WAITS.setdefault(key, []).append(call)
        if not _stuck(call, set()):
            return True
        _unhold_locked(key, call)
    call.request.cancelled = True  # dropped from its queue once an instance is free again
    return False


def release(caller: Caller, call: Call) -> None:
    if caller.holds_instance:
        with _LOCK:
            _unhold_locked(id(caller.backend), call)


def _unhold_locked(key: int, call: Call) -> None:
    calls = _WAITS.get(key)
    if calls and call in calls:
        calls.remove(call)
        if not calls:
            del _WAITS[key]


def _stuck(call: Call, assumed: set[int]) -> bool:
    """Whether ``call`` can never be answered: it waits in a queue (or runs on an instance) of a
    model whose every instance is stuck waiting itself."""
    request = call.request
    if request.done or request.deadline_ns or (call.target.decoupled and call.started):
        return False
    instances = call.target.instances
    return bool(instances) and all(_instance_stuck(instance, assumed) for instance in instances)


def _instance_stuck(instance, assumed: set[int]) -> bool:
    key = id(instance)
    if key in assumed:  # back at an instance already assumed stuck: a cycle of waiting instances
        return True
    calls = _WAITS.get(key)
    if not calls:
        return False
    assumed.add(key)
    try:
        return all(_stuck(call, assumed) for call in calls)
    finally:
        assumed.discard(key)


def deadlock_reason(model_name: str) -> str:
    return (f"the request would wait forever: every instance of model '{model_name}' is busy waiting for BLS "
            "requests that cannot run before this one is answered (Triton blocks here for good). Give model "
            f"'{model_name}' more instances (instance_group count) or avoid the circular call")
