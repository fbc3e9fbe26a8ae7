"""The two sequence-batching strategies, one batcher per model instance (Triton's
``DirectSequenceBatch`` and ``OldestSequenceBatch``). Each has one request queue per slot and
shares the lock of its SequenceScheduler (sequence.py); methods ending in ``_locked`` run under it.

direct: the instance's worker forms a batch from the front request of every slot up to the
highest active one, slot ``i`` always in row ``i``; a slot with nothing ready (or an input shape
that cannot join the batch) gets a filler request with READY false, which runs with the batch
and answers no one. ``max_queue_delay_microseconds`` with ``minimum_slot_utilization`` holds a
batch back until enough slots are ready or the oldest request waited that long.

oldest: each slot hands one request at a time (the next when the previous has finished) to a
dynamic batcher of its own instance (scheduler.py), which batches the candidate sequences with
``preferred_batch_size`` and ``max_queue_delay_microseconds``.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque

from tritonctl.serve.core.errors import ServeError
from tritonctl.serve.core.scheduler import BatchingOptions, DynamicBatchScheduler
from tritonctl.serve.core.sequence import FORCE_END, Failures
from tritonctl.serve.core.sequence_state import SequenceState, zeros
from tritonctl.serve.core.types import InferRequest, InferTensor


class _Slots:
    """Per-slot queues and states shared by both strategies."""

    def __init__(self, scheduler, index: int):
        self.scheduler = scheduler
        self.index = index
        count = scheduler.options.slots_per_instance
        self.queues: list[deque] = [deque() for _ in range(count)]
        self.states: list[SequenceState | None] = [None] * count
        self.cond = threading.Condition(scheduler.lock)
        self.retiring = False  # a model update removed the instance: the worker ends once idle

    def _start_locked(self, slot: int, request: InferRequest) -> None:
        """Controls and state for the slot's next request; START begins a fresh state."""
        if request.sequence_start or self.states[slot] is None:
            self.states[slot] = self.scheduler.new_state()
        self.scheduler.prepare_locked(request, self.states[slot])
        if request.sequence_end:
            self.states[slot] = None

    def _release_locked(self, slot: int) -> tuple[bool, Failures]:
        self.states[slot] = None
        return self.scheduler.release_slot_locked(self.index, slot, self.queues[slot])

    def take_queued_locked(self) -> list[InferRequest]:
        requests = [r for queue in self.queues for r in queue if r is not FORCE_END]
        for queue in self.queues:
            queue.clear()
        return requests


class DirectBatcher(_Slots):
    def __init__(self, scheduler, index: int, instance, run_batch):
        super().__init__(scheduler, index)
        self.instance = instance
        self._run_batch = run_batch
        self.busy = False
        self.thread = threading.Thread(target=self._work, daemon=True, name=f"{scheduler.model}-instance-{index}")
        self.thread.start()

    def enqueue_locked(self, slot: int, request: InferRequest) -> Failures:
        self.queues[slot].append(request)
        self.cond.notify()
        return []

    def force_end_locked(self, slot: int) -> Failures:
        self.queues[slot].append(FORCE_END)
        self.cond.notify()
        return []

    def requeue_locked(self, slot: int, request: InferRequest) -> None:
        """An iterative sequence's request that runs again: first in its slot."""
        self.queues[slot].appendleft(request)
        self.cond.notify()

    def end_locked(self, slot: int) -> Failures:
        """An iterative sequence ended: free its slot (a backlogged sequence may move in)."""
        moved, failed = self._release_locked(slot)
        if moved:
            self.cond.notify()
        return failed

    def idle_locked(self) -> bool:
        return not self.busy and not any(self.queues)

    # ---- the instance's worker ------------------------------------------------------------------
    def _work(self) -> None:
        scheduler = self.scheduler
        while True:
            batch, failed = self._next_batch()
            if failed:
                scheduler.fail(failed)
            if batch is None:
                return
            if not batch:
                continue
            scheduler.stats.add_pending(-sum(1 for r in batch if not r.padding))
            try:
                self._run_batch(self.instance, batch)
            finally:
                with self.cond:
                    self.busy = False

    def _next_batch(self) -> tuple[list[InferRequest] | None, Failures]:
        """(batch, failures) to run and answer; ([], failures) to answer first; (None, ...) to end."""
        with self.cond:
            while True:
                failed = self._release_ended_locked()
                if failed:
                    return [], failed
                active = [slot for slot, queue in enumerate(self.queues) if queue]
                if not active:
                    if self.scheduler.stopping or self.retiring:
                        return None, []
                    self.cond.wait()
                    continue
                wait_s = self._delay_locked(active)
                if wait_s > 0:
                    self.cond.wait(wait_s)
                    continue
                self.busy = True
                return self._take_locked(active)

    def _release_ended_locked(self) -> Failures:
        """Free the slots whose sequence idled out (FORCE_END) or whose next request was cancelled;
        a cancelled sequence's queued requests are cancelled with it, as in Triton."""
        failed: Failures = []
        for slot, queue in enumerate(self.queues):
            if queue and (queue[0] is FORCE_END or queue[0].cancelled):
                if queue[0] is FORCE_END:
                    queue.popleft()
                failed.extend(self._release_locked(slot)[1])
        return failed

    def _delay_locked(self, active: list[int]) -> float:
        """Seconds to hold the batch back (direct's max_queue_delay / minimum_slot_utilization)."""
        options = self.scheduler.options
        if not options.max_queue_delay_ns or not options.minimum_slot_utilization:
            return 0.0
        waited = time.monotonic_ns() - min(self.queues[slot][0].queue_start_ns for slot in active)
        if waited > options.max_queue_delay_ns or \
                len(active) / max(1, options.max_batch_size) >= options.minimum_slot_utilization:
            return 0.0
        return (options.max_queue_delay_ns - waited) / 1e9

    def _state_shapes_locked(self, slot: int, request: InferRequest) -> tuple:
        specs = self.scheduler.state_specs
        state = self.states[slot]
        if request.sequence_start or state is None:
            return tuple(s.initial.shape for s in specs)
        return state.shapes()

    def _key_locked(self, slot: int, request: InferRequest) -> tuple:
        """Requests share a batch when their inputs and states have the same names and shapes."""
        inputs = tuple(sorted((name, t.datatype, t.data.shape) for name, t in request.inputs.items()))
        return inputs, self._state_shapes_locked(slot, request)

    def _take_locked(self, active: list[int]) -> tuple[list[InferRequest], Failures]:
        first = self.queues[active[0]][0]
        key = self._key_locked(active[0], first)
        template = dict(first.inputs)  # its own inputs, before its controls are added
        state_shapes = key[1]
        batch: list[InferRequest] = []
        failed: Failures = []
        for slot in range(active[-1] + 1):
            queue = self.queues[slot]
            if not queue or self._key_locked(slot, queue[0]) != key:
                batch.append(self._filler(first, template, state_shapes))
                continue
            request = queue.popleft()
            self._start_locked(slot, request)
            batch.append(request)
            if request.sequence_end:
                failed.extend(self._release_locked(slot)[1])
        return batch, failed

    def _filler(self, first: InferRequest, template: dict[str, InferTensor], state_shapes: tuple) -> InferRequest:
        """A not-ready request shaped like ``first``, holding an idle slot's row."""
        scheduler = self.scheduler
        inputs = {name: InferTensor(name, t.datatype, zeros(t.datatype, list(t.data.shape)))
                  for name, t in template.items()}
        inputs.update(scheduler.controls.tensors(False, False, False, None))
        if scheduler.state_specs:
            inputs.update(SequenceState.blank(scheduler.state_specs, state_shapes).tensors())
        return InferRequest(scheduler.model, inputs, requested_outputs=first.requested_outputs, padding=True)

    # ---- lifecycle ------------------------------------------------------------------------------
    def stop(self, deadline: float | None) -> bool:
        """The worker ends once its slots hold nothing more to run."""
        with self.cond:
            self.cond.notify_all()
        self.thread.join(None if deadline is None else max(deadline - time.monotonic(), 0))
        return not self.thread.is_alive()

    def fail_queued(self, error: ServeError) -> None:
        """Nothing beyond the slot queues, which the scheduler empties."""


class OldestBatcher(_Slots):
    def __init__(self, scheduler, index: int, instance, run_batch):
        super().__init__(scheduler, index)
        options = scheduler.options
        self.in_flight = [False] * options.slots_per_instance
        max_batch = max(options.max_batch_size, 1)
        batching = BatchingOptions(enabled=options.max_batch_size > 0, max_batch_size=max_batch,
                                   preferred_sizes=options.preferred_sizes or (max_batch,),
                                   max_queue_delay_ns=options.max_queue_delay_ns)
        if options.preserve_ordering:
            batching = dataclasses.replace(batching, preserve_ordering=True)
        self.batcher = DynamicBatchScheduler(scheduler.model, batching, [instance], run_batch, scheduler.stats)

    def enqueue_locked(self, slot: int, request: InferRequest) -> Failures:
        self.queues[slot].append(request)
        return self._issue_locked(slot)

    def force_end_locked(self, slot: int) -> Failures:
        self.queues[slot].append(FORCE_END)
        return self._issue_locked(slot)

    def idle_locked(self) -> bool:
        return not any(self.in_flight) and not any(self.queues)

    def _issue_locked(self, slot: int) -> Failures:
        """Hand the slot's next request to the dynamic batcher unless one is still running there."""
        queue = self.queues[slot]
        failed: Failures = []
        while queue and not self.in_flight[slot]:
            front = queue[0]
            if front is FORCE_END or front.cancelled:
                if front is FORCE_END:
                    queue.popleft()
                failed.extend(self._release_locked(slot)[1])
                continue
            queue.popleft()
            self._start_locked(slot, front)
            error = self._send(slot, front)
            if error is None:
                self.in_flight[slot] = True
            else:
                failed.append((front, error, "REJECTED"))
            if front.sequence_end:
                # Nothing follows END; a backlogged sequence moving in waits for this request.
                failed.extend(self.scheduler.release_slot_locked(self.index, slot, queue)[1])
        return failed

    def _send(self, slot: int, request: InferRequest) -> ServeError | None:
        deliver = request.complete

        def complete(response, error) -> None:
            if deliver is not None:
                deliver(response, error)
            self._completed(slot)

        request.complete = complete
        self.scheduler.stats.add_pending(-1)  # the dynamic batcher counts it from here
        try:
            self.batcher.enqueue(request)
        except ServeError as exc:
            request.complete = deliver
            self.scheduler.stats.add_pending(1)
            return exc
        return None

    def _completed(self, slot: int) -> None:
        with self.cond:
            self.in_flight[slot] = False
            failed = self._issue_locked(slot)
            self.cond.notify_all()
        if failed:
            self.scheduler.fail(failed)

    # ---- lifecycle ------------------------------------------------------------------------------
    def stop(self, deadline: float | None) -> bool:
        """Wait until every slot has handed over and finished its requests, then stop the batcher."""
        with self.cond:
            while not self.idle_locked():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                self.cond.wait(remaining)
            drained = self.idle_locked()
        stopped = self.batcher.stop(None if deadline is None else max(deadline - time.monotonic(), 0))
        return drained and stopped

    def fail_queued(self, error: ServeError) -> None:
        self.batcher.fail_queued(error)
