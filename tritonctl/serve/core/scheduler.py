"""Triton's dynamic batcher (serving_protocol.md section B) and its default scheduler.

One queue per model version, shared by all its instances. Each instance has a worker thread;
a free worker forms the next batch itself. While every instance is busy, a queue that allows
Triton's prefetching (one priority level, no timeouts, no max_queue_size) stages batches ahead,
up to two per instance, the last one growing with new arrivals until it is saturated, as
Triton's batcher fills its rate-limiter payloads; other queues wait for a free instance (Triton's
"payload slot" rule). Batching off (no ``dynamic_batching``) is the same scheduler handing
requests over one at a time.

A worker waiting out a short queue delay for a lone request polls instead of sleeping (see
``DynamicBatchScheduler._poll``): at low load the CPUs would otherwise halt during the delay, and
a CPU back from a halt runs the batch, the model and the reply markedly slower.

``Scheduler`` states what every scheduler of a model version provides.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterator, Protocol

from tritonctl.serve.core.errors import ServeError, Status, unavailable
from tritonctl.serve.core.ordering import OrderedCompletions
from tritonctl.serve.core.rate_limiter import Gate
from tritonctl.serve.core.stats import ModelStats
from tritonctl.serve.core.types import InferRequest


@dataclass(frozen=True)
class QueuePolicy:
    delay_on_timeout: bool = False  # timeout_action DELAY; REJECT otherwise
    default_timeout_us: int = 0
    allow_timeout_override: bool = False
    max_queue_size: int = 0  # 0 = unbounded

    @classmethod
    def from_proto(cls, policy) -> "QueuePolicy":
        return cls(policy.timeout_action == 1, policy.default_timeout_microseconds,
                   policy.allow_timeout_override, policy.max_queue_size)

    @property
    def allows_prefetch(self) -> bool:
        """Triton stages batches ahead only for a queue that can neither time out nor fill up."""
        return not (self.default_timeout_us or self.allow_timeout_override or self.max_queue_size)

    def timeout_us(self, requested_us: int) -> int:
        """A request may only shorten a non-zero default timeout (B.3)."""
        if self.allow_timeout_override and requested_us and self.default_timeout_us \
                and requested_us < self.default_timeout_us:
            return requested_us
        return self.default_timeout_us


@dataclass(frozen=True)
class BatchingOptions:
    enabled: bool = False
    max_batch_size: int = 0
    preferred_sizes: tuple[int, ...] = ()
    max_queue_delay_ns: int = 0
    priority_levels: int = 0
    default_priority_level: int = 0
    default_policy: QueuePolicy = QueuePolicy()
    level_policies: tuple[tuple[int, QueuePolicy], ...] = ()
    ragged_inputs: frozenset[str] = frozenset()  # allow_ragged_batch: any shape may join a batch
    preserve_ordering: bool = False
    prefetch: bool = False  # batches may be staged while every instance is busy
    checks_inputs: bool = False  # variable-size, shape-tensor or optional inputs must match in a batch

    @classmethod
    def from_config(cls, config) -> "BatchingOptions":
        if not config.HasField("dynamic_batching"):
            return cls()
        db = config.dynamic_batching
        max_batch = max(config.max_batch_size, 1)
        preferred = tuple(sorted(set(db.preferred_batch_size))) or (max_batch,)
        default_policy = QueuePolicy.from_proto(db.default_queue_policy)
        return cls(
            enabled=config.max_batch_size > 0,
            max_batch_size=max_batch,
            preferred_sizes=preferred,
            max_queue_delay_ns=db.max_queue_delay_microseconds * 1000,
            priority_levels=db.priority_levels,
            default_priority_level=db.default_priority_level if db.priority_levels else 0,
            default_policy=default_policy,
            level_policies=tuple((level, QueuePolicy.from_proto(p)) for level, p in db.priority_queue_policy.items()),
            ragged_inputs=frozenset(t.name for t in config.input if t.allow_ragged_batch),
            preserve_ordering=db.preserve_ordering,
            prefetch=db.priority_levels == 0 and default_policy.allows_prefetch,
            checks_inputs=any(_must_match(t) for t in config.input),
        )


def _must_match(tensor) -> bool:
    """Whether requests must agree on this input to share a batch (Triton's enforce_equal_shape
    inputs, or an optional input)."""
    return tensor.optional or tensor.is_shape_tensor or (-1 in tensor.dims and not tensor.allow_ragged_batch)


class _Level:
    __slots__ = ("policy", "queue", "delayed")

    def __init__(self, policy: QueuePolicy):
        self.policy = policy
        self.queue: deque[InferRequest] = deque()
        self.delayed: deque[InferRequest] = deque()

    def __len__(self) -> int:
        return len(self.queue) + len(self.delayed)


RunBatch = Callable[[object, list[InferRequest]], None]
READY: list[InferRequest] = []  # _next_batch's "a batch is ready" (compared by identity)

# The longest queue-delay wait that a worker polls through rather than sleeps (see _poll).
POLL_MAX_S = 0.005
_yield_cpu = getattr(os, "sched_yield", lambda: time.sleep(0))  # Windows has no sched_yield


class Scheduler(Protocol):
    """What every scheduler of a model version provides (``DynamicBatchScheduler`` here,
    ``sequence.SequenceScheduler``, ``ensemble.EnsembleScheduler``); the core asks nothing else."""

    @property
    def accepting(self) -> bool:
        """False once ``stop`` began: ``enqueue`` refuses."""

    def enqueue(self, request: InferRequest) -> None:
        """Queue ``request``; raises ServeError when it is refused at once."""

    def hold_in_order(self, request: InferRequest) -> None:
        """Make ``request``, answered without queueing (a cache hit), wait for the requests the
        scheduler has already taken where it keeps their order; else nothing."""

    def stop(self, timeout_s: float | None = None) -> bool:
        """Stop accepting and finish what is in flight; True when everything finished in time."""

    def fail_queued(self, error: ServeError) -> None:
        """Answer every request not yet run with ``error`` (when ``stop`` timed out)."""


class DynamicBatchScheduler:
    """Queues requests of one model version and runs batches of them on its instances."""

    def __init__(self, model: str, options: BatchingOptions, instances: list, run_batch: RunBatch,
                 stats: ModelStats, gate_of: Callable[[object], Gate | None] | None = None):
        """``gate_of``: the rate limiter's gate of an instance (None: the instance runs ungated),
        when the server has a rate limiter."""
        self.model = model
        self._gate_of = gate_of
        self.options = options
        self.stats = stats
        self._run_batch = run_batch
        policies = dict(options.level_policies)
        levels = range(1, options.priority_levels + 1) if options.priority_levels else [0]
        self._levels = {lv: _Level(policies.get(lv, options.default_policy)) for lv in levels}
        lock = threading.RLock()
        self._cond = threading.Condition(lock)
        self._reaper_wake = threading.Condition(lock)  # the reaper waits apart from the workers
        self._queued = 0
        self._queued_size = 0  # the queued requests' batch sizes, summed
        # While workers wait for a batch to grow (the queue delay), the queued size and batch key
        # at which a new request must wake them; None when every new request must.
        self._wake_size: int | None = None
        self._wake_key: tuple = ()
        self._accepting = True
        self._stopping = False
        self._busy = 0
        self._staged: deque[list[InferRequest]] = deque()  # batches formed ahead, oldest first
        self._growing = False  # the last staged batch may still take requests
        self._stage_limit = 2 * len(instances)
        self._stage_size = 0  # queued batch size at which a new request makes the staged batch grow
        self._stage_at_ns = 0  # when a staged batch's queue delay ends (0: none pending)
        self._stager_wake = threading.Condition(lock)
        self._polling = False  # a worker polls through a queue delay (one at a time)
        self._ordering = OrderedCompletions() if options.preserve_ordering else None
        self._workers: list[threading.Thread] = []
        self._worker_of: dict[int, threading.Thread] = {}  # id(instance) -> its worker
        self._retiring: set[int] = set()  # id() of the instances a model update removes
        self.add_instances(instances)
        # Queue timeouts hold while every instance is busy: a thread of its own rejects (or
        # delays) a queued request when its timeout passes, as Triton's does.
        if any(level.policy.default_timeout_us for level in self._levels.values()):
            self._reaper = threading.Thread(target=self._reap, daemon=True, name=f"{model}-queue-timeouts")
            self._reaper.start()
        if options.prefetch and options.max_queue_delay_ns:
            self._stager = threading.Thread(target=self._stage_on_delay, daemon=True, name=f"{model}-batch-delay")
            self._stager.start()

    # ---- enqueue ------------------------------------------------------------------------------
    def level_of(self, priority: int) -> int:
        if not self.options.priority_levels:
            return 0
        if priority == 0 or priority > self.options.priority_levels:
            return self.options.default_priority_level
        return priority

    def enqueue(self, request: InferRequest) -> None:
        """Queue ``request``; raises ServeError when the queue refuses it."""
        level = self._levels[self.level_of(request.priority)]
        now = time.monotonic_ns()
        request.queue_start_ns = now
        timeout_us = level.policy.timeout_us(request.timeout_us)
        request.deadline_ns = now + timeout_us * 1000 if timeout_us else 0
        request.reject_after_ns = 0 if level.policy.delay_on_timeout else request.deadline_ns
        request.batch_key = self._shape_key(request)
        request.on_cancel = self._drop_cancelled
        with self._cond:
            if not self._accepting:
                raise unavailable(f"Server is stopping, scheduler for model '{self.model}' has stopped accepting "
                                  "new inference requests")
            if level.policy.max_queue_size and len(level) >= level.policy.max_queue_size:
                # Triton 2.51 leaves this refusal out of the failure statistics and metrics
                # (a queue timeout, by contrast, counts as REJECTED)
                raise ServeError(Status.UNAVAILABLE,
                                 f"[request id: {request.id or '<id_unknown>'}] Exceeds maximum queue size",
                                 counted=False)
            level.queue.append(request)
            self._queued += 1
            self._queued_size += request.batch_size
            if self._staging_wakes():
                self._stage()
            if self._queued and self._must_wake(request):
                self._cond.notify()
            if request.deadline_ns:
                self._reaper_wake.notify()
        self.stats.add_pending(1)

    def _drop_cancelled(self, _request: InferRequest) -> None:
        """A queued request's client has gone: answer it now rather than when an instance frees
        up (until then it would hold a place in a bounded queue)."""
        with self._cond:
            failed = self._expire(time.monotonic_ns())
        self._fail(failed)

    def _must_wake(self, request: InferRequest) -> bool:
        """Whether a waiting worker could form a different batch now that ``request`` is queued:
        always, unless it waits for the queue delay and the request neither completes the next
        preferred size, nor brings a queue deadline, nor has a shape that cannot join the batch.
        (Waking a worker for every request costs it a GIL round trip and a batch formation.)"""
        return (self._wake_size is None or self._queued_size >= self._wake_size or request.deadline_ns != 0
                or request.batch_key != self._wake_key)

    # ---- batch formation (under the lock) -------------------------------------------------------
    def _candidates(self) -> Iterator[InferRequest]:
        for level in self._levels.values():
            yield from level.queue
            yield from level.delayed

    def _expire(self, now: int) -> list[tuple[InferRequest, ServeError, str]]:
        """Drop cancelled requests and apply timeouts; returns the requests to fail."""
        failed = []
        for level in self._levels.values():
            if not any(r.cancelled or (r.deadline_ns and r.deadline_ns <= now) for r in level.queue) \
                    and not any(r.cancelled for r in level.delayed):
                continue
            keep: deque[InferRequest] = deque()
            for request in level.queue:
                if request.cancelled:
                    failed.append((request, ServeError(Status.CANCELLED, "Request was cancelled"), "CANCELED"))
                elif request.deadline_ns and request.deadline_ns <= now:
                    if level.policy.delay_on_timeout:
                        request.delayed = True
                        level.delayed.append(request)
                    else:
                        failed.append((request, unavailable("Request timeout expired"), "REJECTED"))
                else:
                    keep.append(request)
            level.queue = keep
            cancelled = [r for r in level.delayed if r.cancelled]
            if cancelled:
                level.delayed = deque(r for r in level.delayed if not r.cancelled)
                failed.extend((r, ServeError(Status.CANCELLED, "Request was cancelled"), "CANCELED")
                              for r in cancelled)
        self._queued -= len(failed)
        self._queued_size -= sum(r.batch_size for r, _, _ in failed)
        return failed

    def _shape_key(self, request: InferRequest) -> tuple:
        """Requests share a batch when they carry the same inputs (optional ones included) and
        every input but the ragged ones has the same shape."""
        ragged = self.options.ragged_inputs
        return tuple(sorted((name, None if name in ragged else t.data.shape[1:])
                            for name, t in request.inputs.items()))

    def _form_batch(self, now: int, base_size: int = 0, base_key: tuple | None = None
                    ) -> tuple[list[InferRequest] | None, float | None, bool]:
        """Triton's GetDynamicBatch over the queue, on top of a staged batch of ``base_size``
        (0: a new batch) whose requests have the shape key ``base_key``. Returns (requests to
        take, None, saturated) or (None, seconds to wait before looking again, saturated);
        saturated: the batch they complete must not grow any further."""
        opts = self.options
        if not opts.enabled:
            return [next(self._candidates())], None, True
        max_preferred = opts.preferred_sizes[-1]
        pending: list[InferRequest] = []
        size = best = mark = 0
        send_now = saturated = False
        shape_key = base_key
        for request in self._candidates():
            total = base_size + size + request.batch_size
            if base_size + size:
                if total > max_preferred and best == 0:
                    best, mark, saturated = size, len(pending), True
                if total > opts.max_batch_size or request.batch_key != shape_key:
                    send_now = saturated = True
                    break
            shape_key = request.batch_key
            pending.append(request)
            size += request.batch_size
            if base_size + size in opts.preferred_sizes:
                best, mark = size, len(pending)
        delay = opts.max_queue_delay_ns
        oldest = min((r.queue_start_ns for r in pending), default=now)
        delay_exceeded = delay != 0 and now - oldest >= delay
        if best and not delay_exceeded:
            return pending[:mark], None, saturated or delay == 0
        if not pending:
            return [], None, saturated
        if send_now or base_size + size >= max_preferred:
            return pending, None, True
        if delay_exceeded or delay == 0:
            return pending, None, saturated
        if base_size and base_size not in opts.preferred_sizes:
            return pending, None, saturated  # a staged batch takes what it can before it runs
        self._wake_size = min(p for p in opts.preferred_sizes if p > base_size + size) - base_size
        self._wake_key = shape_key
        wait_ns = oldest + delay - now
        deadlines = [r.deadline_ns for r in self._candidates() if r.deadline_ns and not r.delayed]
        if deadlines:
            wait_ns = min(wait_ns, min(deadlines) - now)
        return None, max(wait_ns, 0) / 1e9, saturated

    def _remove(self, batch: list[InferRequest]) -> None:
        taken = set(map(id, batch))
        for level in self._levels.values():
            if any(id(r) in taken for r in level.queue):
                level.queue = deque(r for r in level.queue if id(r) not in taken)
            if level.delayed and any(id(r) in taken for r in level.delayed):
                level.delayed = deque(r for r in level.delayed if id(r) not in taken)
        self._queued -= len(batch)
        self._queued_size -= sum(r.batch_size for r in batch)

    def _next_batch(self, instance=None, mode: str = "take") -> tuple[list[InferRequest] | None, list]:
        """Wait for work; (batch, failures) or (None, failures) when stopped and drained, or
        when a model update removes ``instance``. ``mode`` "peek": wait until a batch is ready and
        return READY without taking it; "now": take a ready batch, else return ([], []) at once."""
        with self._cond:
            while True:
                if id(instance) in self._retiring:
                    return None, []
                now = time.monotonic_ns()
                failed = self._expire(now)
                if failed:
                    return [], failed
                if self._staged:
                    return (READY if mode == "peek" else self._take_staged()), []
                if self._queued == 0:
                    if self._stopping:
                        return None, []
                    if mode == "now":
                        return [], []
                    self._cond.wait()
                    continue
                batch, wait_s, _ = self._form_batch(now)
                if batch and mode == "peek":
                    return READY, []
                if batch is None and mode == "now":
                    self._wake_size = None
                    return [], []
                if batch is not None:
                    self._take(batch)
                    self._busy += 1
                    if self._queued:
                        self._cond.notify()
                    return batch, []
                if self._queued == 1 and wait_s <= POLL_MAX_S and not (self._polling or self._stopping):
                    self._poll(wait_s)
                else:
                    self._cond.wait(wait_s)
                self._wake_size = None

    def _take(self, batch: list[InferRequest]) -> None:
        """Remove ``batch`` from the queue; with preserve_ordering its responses keep queue order."""
        self._remove(batch)
        if self._ordering is not None:
            for request in batch:
                self._ordering.hold(request)

    def _take_staged(self) -> list[InferRequest]:
        batch = self._staged.popleft()
        if not self._staged:
            self._growing = False
            self._stage_size = 0
        self._busy += 1
        self._stage()
        return batch

    def _staging_wakes(self) -> bool:
        """Whether a new request wakes Triton's batcher to stage it: when requests must match
        inputs, or once the queue reaches the size it last waited for (0 for a new batch)."""
        return self.options.checks_inputs or self._queued_size >= self._stage_size

    def _stage(self) -> None:
        """While every instance is busy, form batches ahead as Triton's batcher fills payloads
        for its rate limiter: at most two per instance wait, and the last one keeps taking new
        requests until it is saturated (a preferred size reached without a queue delay, the
        largest preferred size reached, or a request that cannot join it)."""
        if not self.options.prefetch or self._busy < len(self._workers):
            return
        self._stage_at_ns = 0
        while self._queued and len(self._staged) < self._stage_limit:
            growing = self._staged[-1] if self._growing else []
            base_size = sum(r.batch_size for r in growing)
            base_key = growing[0].batch_key if growing else None
            now = time.monotonic_ns()
            batch, wait_s, saturated = self._form_batch(now, base_size, base_key)
            if batch is None:
                self._stage_size = self._wake_size or 0
                self._wake_size = None
                self._stage_at_ns = now + int(wait_s * 1e9)
                self._stager_wake.notify()
                return
            self._take(batch)
            if growing:
                growing.extend(batch)
            elif batch:
                self._staged.append(batch)
            self._growing = bool(batch or growing) and not saturated
            if not self._growing:
                self._stage_size = 0
            if not batch and not saturated:
                return

    def _stage_on_delay(self) -> None:
        """Stage what waits in the queue once its queue delay ends, as Triton's batcher does."""
        with self._cond:
            while not self._stopping:
                now = time.monotonic_ns()
                if self._stage_at_ns and self._stage_at_ns <= now:
                    self._stage_at_ns = 0
                    self._stage()
                    continue
                wait_ns = self._stage_at_ns - now if self._stage_at_ns else None
                self._stager_wake.wait(None if wait_ns is None else wait_ns / 1e9)

    def _poll(self, wait_s: float) -> None:
        """Wait (the lock held on entry and on return) until ``wait_s`` has passed, a request is
        queued or taken, or the scheduler stops, yielding the CPU in a loop with the lock and the
        GIL let go. For a lone request waiting out the queue delay: a worker that sleeps through
        it lets its CPU halt, and on a virtual machine the batch then starts late and the model
        and the reply run slower; sleeping in slices of 0.1 ms won back only part of that
        (benchmarks/RESULTS.md, serve, eighth round). Polling keeps one CPU busy for at most
        one short delay per batch, and only while nothing else is queued, that is, while the
        server has CPU to spare."""
        end = time.monotonic_ns() + int(wait_s * 1e9)
        queued = self._queued
        self._polling = True
        self._cond.release()
        try:
            while self._queued == queued and not self._stopping and time.monotonic_ns() < end:
                _yield_cpu()
        finally:
            self._cond.acquire()
            self._polling = False

    def _reap(self) -> None:
        """Apply queue timeouts at their deadlines, whether or not a worker is free."""
        with self._cond:
            while not self._stopping:
                now = time.monotonic_ns()
                failed = self._expire(now)
                if failed:
                    self._cond.release()
                    try:
                        self._fail(failed)
                    finally:
                        self._cond.acquire()
                    continue
                deadlines = [r.deadline_ns for level in self._levels.values() for r in level.queue if r.deadline_ns]
                self._reaper_wake.wait(max(min(deadlines) - now, 0) / 1e9 if deadlines else None)

    def _fail(self, failed: list[tuple[InferRequest, ServeError, str]]) -> None:
        for request, error, reason in failed:
            self.stats.add_pending(-1)
            self.stats.record_failure(time.monotonic_ns() - request.arrival_ns, reason)
            request.finish(None, error)

    def _work(self, instance) -> None:
        while True:
            gate = self._gate_of(instance) if self._gate_of is not None else None
            if gate is None:
                if not self._take_and_run(instance, "take"):
                    return
                continue
            # Under the rate limiter: wait for a batch to be ready, then for the instance's
            # resources, and only then take the batch, with what queued meanwhile (Triton's
            # payload grows while it waits for its instance).
            ready, failed = self._next_batch(instance, "peek")
            self._fail(failed)
            if ready is None:
                return
            if ready is not READY:
                continue
            gate.acquire()
            try:
                if not self._take_and_run(instance, "now"):
                    return
            finally:
                gate.release()

    def _take_and_run(self, instance, mode: str) -> bool:
        """Take the next batch (``_next_batch``'s ``mode``) and run it; False when stopped."""
        batch, failed = self._next_batch(instance, mode)
        self._fail(failed)
        if batch is None:
            return False
        if not batch:
            return True
        self.stats.add_pending(-len(batch))
        try:
            self._run_batch(instance, batch)
        finally:
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()
        return True

    def hold_in_order(self, request: InferRequest) -> None:
        """With preserve_ordering, make ``request`` (answered without queueing: a cache hit)
        wait for the requests already taken from the queue, as Triton does."""
        if self._ordering is not None:
            with self._cond:
                self._ordering.hold(request)

    # ---- lifecycle ------------------------------------------------------------------------------
    @property
    def accepting(self) -> bool:
        return self._accepting

    def stop(self, timeout_s: float | None = None) -> bool:
        """Stop accepting, run what is queued, then end the workers. True when all finished."""
        with self._cond:
            self._accepting = False
            self._stopping = True
            self._cond.notify_all()
            self._reaper_wake.notify_all()
            self._stager_wake.notify_all()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for worker in self._workers:
            worker.join(None if deadline is None else max(deadline - time.monotonic(), 0))
        return not any(w.is_alive() for w in self._workers)

    def add_instances(self, instances: list) -> None:
        """Start a worker for each of ``instances`` (at creation, and when a model update adds
        instances: Triton's instance update, the model serving on meanwhile)."""
        with self._cond:
            started = []
            for instance in instances:
                worker = threading.Thread(target=self._work, args=(instance,), daemon=True,
                                          name=f"{self.model}-instance-{len(self._worker_of)}")
                self._worker_of[id(instance)] = worker
                started.append(worker)
            self._workers.extend(started)
            self._stage_limit = 2 * len(self._workers)
            self._cond.notify_all()
        for worker in started:
            worker.start()

    def remove_instances(self, instances: list) -> None:
        """End the workers of ``instances`` (a model update that removes instances): each takes no
        new batch and ends once its running batch is answered; returns when they have ended. The
        other workers go on serving the queue."""
        with self._cond:
            self._retiring.update(id(instance) for instance in instances)
            self._cond.notify_all()
        ending = [self._worker_of[id(instance)] for instance in instances if id(instance) in self._worker_of]
        for worker in ending:
            worker.join()
        with self._cond:
            for instance in instances:
                self._worker_of.pop(id(instance), None)
                self._retiring.discard(id(instance))
            self._workers = [w for w in self._workers if w not in ending]
            self._stage_limit = 2 * len(self._workers)

    def fail_queued(self, error: ServeError) -> None:
        """Answer every request still queued with ``error`` (used when a stop times out)."""
        with self._cond:
            requests = [r for batch in self._staged for r in batch] + list(self._candidates())
            self._staged.clear()
            self._growing = False
            for level in self._levels.values():
                level.queue.clear()
                level.delayed.clear()
            self._queued = self._queued_size = 0
        for request in requests:
            self.stats.add_pending(-1)
            request.finish(None, error)


def drop_stale(batch: list[InferRequest], stats: ModelStats) -> list[InferRequest]:
    """The requests of ``batch`` still worth running; the others (client gone, or queue timeout
    passed under a REJECT policy) are answered as the queue answers them (``_expire``). The model
    calls it on a batch of the dynamic batcher right before it hands the batch to the backend:
    the worker may have waited for the GIL or gathered inputs since it took the batch from the
    queue, and under overload the request at the head of a full queue is near its deadline."""
    now = time.monotonic_ns()
    if not any(r.cancelled or 0 < r.reject_after_ns <= now for r in batch):
        return batch
    fresh = []
    for request in batch:
        if request.cancelled:
            error, reason = ServeError(Status.CANCELLED, "Request was cancelled"), "CANCELED"
        elif 0 < request.reject_after_ns <= now:
            error, reason = unavailable("Request timeout expired"), "REJECTED"
        else:
            fresh.append(request)
            continue
        stats.record_failure(now - request.arrival_ns, reason)
        request.finish(None, error)
    return fresh
