"""Triton's sequence batcher (serving_protocol.md B.8; Triton's ``sequence_batch_scheduler.cc``),
for models with ``sequence_batching``.

Requests with the same correlation id (the ``sequence_id`` parameter, uint64 or string) form a
sequence. Its first request (``sequence_start``) takes a *slot*, one of the batch rows of one
instance; each later request of it runs in that slot, in arrival order and one at a time, and
its last (``sequence_end``) frees the slot. While every slot is taken, new sequences wait in a
backlog and take slots in the order they arrived. A sequence that sends nothing for
``max_sequence_idle_microseconds`` (default 1 s) loses its slot; its later requests then fail as
requests of an unknown sequence.

How an instance batches its slots is its strategy (sequence_batchers.py): ``direct`` runs one
request of every active slot together, each slot always in the same row; ``oldest`` batches
the next requests of its sequences dynamically. The model sees control inputs and implicit
state filled in by the server (sequence_state.py), never sent by clients.

The scheduler has the dynamic batcher's interface (``enqueue``, ``stop``, ``fail_queued``,
``accepting``) so a model version only picks the class.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from tritonctl.serve.core.backend_api import BackendLoadError
from tritonctl.serve.core.errors import ServeError, Status, invalid_arg, unavailable
from tritonctl.serve.core.sequence_state import SequenceControls, SequenceState, read_states
from tritonctl.serve.core.stats import ModelStats
from tritonctl.serve.core.types import InferRequest

log = logging.getLogger("tritonctl.serve")

DEFAULT_IDLE_US = 1_000_000  # Triton's default max_sequence_idle_microseconds
BACKLOG_IDLE_RECHECK_NS = 50_000_000  # an idle sequence still in the backlog is looked at again after 50 ms
FORCE_END = object()  # queued in a slot by the reaper: the slot's sequence idled out
# The correlation ids given to iterative sequences whose requests carry none (the top quarter of
# the uint64 range, which clients rarely use).
ITERATIVE_IDS = 3 << 62


@dataclass(frozen=True)
class SequenceOptions:
    strategy: str  # "direct" or "oldest"
    max_batch_size: int  # the config's; 0 = the model does not batch
    slots_per_instance: int
    idle_ns: int
    max_queue_delay_ns: int
    iterative: bool = False  # iterative_sequence: each request is a sequence its model reschedules
    minimum_slot_utilization: float = 0.0  # direct
    preferred_sizes: tuple[int, ...] = ()  # oldest
    preserve_ordering: bool = False  # oldest

    @classmethod
    def from_config(cls, config) -> "SequenceOptions":
        seq = config.sequence_batching
        if seq.iterative_sequence and seq.HasField("oldest"):
            raise BackendLoadError(f"model '{config.name}' sets sequence_batching.iterative_sequence with the "
                                   "oldest strategy; tritonctl serve runs iterative sequences with the direct "
                                   "strategy (leave 'oldest' out, or set 'direct { }')")
        idle_ns = (seq.max_sequence_idle_microseconds or DEFAULT_IDLE_US) * 1000
        slots = max(1, config.max_batch_size)
        if seq.HasField("oldest"):
            oldest = seq.oldest
            return cls("oldest", config.max_batch_size, oldest.max_candidate_sequences or slots, idle_ns,
                       oldest.max_queue_delay_microseconds * 1000,
                       preferred_sizes=tuple(sorted(set(oldest.preferred_batch_size))),
                       preserve_ordering=oldest.preserve_ordering)
        return cls("direct", config.max_batch_size, slots, idle_ns, seq.direct.max_queue_delay_microseconds * 1000,
                   iterative=seq.iterative_sequence, minimum_slot_utilization=seq.direct.minimum_slot_utilization)


class Backlog:
    """The requests of one sequence that is waiting for a slot."""

    __slots__ = ("requests", "expires_ns")

    def __init__(self):
        self.requests: deque[InferRequest] = deque()
        self.expires_ns = 0  # 0 = never; else the earliest deadline of a request's ``timeout``

    def add(self, request: InferRequest, now: int) -> None:
        self.requests.append(request)
        if request.timeout_us:
            deadline = now + request.timeout_us * 1000
            self.expires_ns = min(self.expires_ns, deadline) if self.expires_ns else deadline


Failures = list[tuple[InferRequest, ServeError, str]]


def refusal(error: ServeError) -> ServeError:
    """A request refused at enqueue: Triton's sequence batcher answers it without counting a
    failure in the model's statistics."""
    error.counted = False
    return error


def cancelled(request: InferRequest) -> tuple[InferRequest, ServeError, str]:
    return request, ServeError(Status.CANCELLED, "Request was cancelled"), "CANCELED"


class SequenceScheduler:
    """Routes the requests of each sequence to its slot, keeps the backlog, and ends idle sequences.
    One lock guards this and every batcher of the model."""

    def __init__(self, model: str, config, model_dir: Path, instances: list, run_batch, stats: ModelStats):
        from tritonctl.serve.core.sequence_batchers import DirectBatcher, OldestBatcher

        self.model = model
        self.options = SequenceOptions.from_config(config)
        self.iterative = self.options.iterative
        self._next_iterative_id = ITERATIVE_IDS  # ids of iterative sequences the clients left without one
        self.controls = SequenceControls(config)
        self.state_specs = read_states(config, model_dir)
        self.stats = stats
        self.lock = threading.Lock()
        self._slot_of: dict[int | str, tuple[int, int]] = {}  # correlation id -> (slot, batcher)
        self._backlog_of: dict[int | str, Backlog] = {}  # sequences collecting in the backlog
        self._backlogs: deque[Backlog] = deque()
        self._last_seen: dict[int | str, int] = {}  # correlation id -> arrival of its latest request
        # Free slots, lowest slot first: new sequences spread over the instances and fill rows from 0.
        self._free = [(slot, b) for slot in range(self.options.slots_per_instance) for b in range(len(instances))]
        heapq.heapify(self._free)
        self._accepting = True
        self.stopping = False
        self._reaper_wake = threading.Condition(self.lock)
        batcher = OldestBatcher if self.options.strategy == "oldest" else DirectBatcher
        self.batchers = [batcher(self, i, instance, run_batch) for i, instance in enumerate(instances)]
        self._batcher_type, self._run_batch = batcher, run_batch
        self._instances = list(instances)  # the instance of each batcher
        self._retired: set[int] = set()  # the batchers a model update removed: their slots take no sequence
        self._reaper = threading.Thread(target=self._reap, daemon=True, name=f"{model}-sequence-reaper")
        self._reaper.start()

    # ---- enqueue --------------------------------------------------------------------------------
    def enqueue(self, request: InferRequest) -> None:
        """Route ``request`` to its sequence's slot or backlog; raises ServeError (Triton's texts)."""
        try:
            self._enqueue(request)
        except ServeError as exc:
            raise refusal(exc) from None

    def _enqueue(self, request: InferRequest) -> None:
        model = self.model
        if request.batch_size > 1:
            raise invalid_arg(f"inference request to model '{model}' must specify batch-size 1 due to "
                              "requirements of sequence batcher")
        self.controls.check_id(request.sequence_id)
        if self.iterative:  # each request starts a sequence of its own, which ends when it is released
            request.sequence_start, request.sequence_end = True, False
            if request.sequence_id == 0 or request.sequence_id == "":
                with self.lock:
                    request.sequence_id = self._next_iterative_id
                    self._next_iterative_id += 1
        cid = request.sequence_id
        if cid == 0 or cid == "":
            raise invalid_arg(f"inference request to model '{model}' must specify a non-zero or non-empty "
                              "correlation ID")
        start, end = request.sequence_start, request.sequence_end
        with self.lock:
            if not self._accepting:
                raise unavailable(f"Server is stopping, scheduler for model '{model}' has stopped accepting new "
                                  "inference requests")
            slot = self._slot_of.get(cid)
            backlog = self._backlog_of.get(cid)
            if not start and slot is None and backlog is None:
                raise invalid_arg(f"inference request for sequence {cid} to model '{model}' must specify the START "
                                  "flag on the first request of the sequence")
            now = time.monotonic_ns()
            request.queue_start_ns = now
            if cid not in self._last_seen:
                self._reaper_wake.notify()
            self._last_seen[cid] = now
            if start and (slot is not None or backlog is not None):
                log.warning("sequence %s for model '%s' has a conflict. The previous sequence did not end before "
                            "this sequence start. Previous sequence will be terminated early.", cid, model)
            self.stats.add_pending(1)
            if slot is None and backlog is None:
                if self._free:
                    slot = self._slot_of[cid] = heapq.heappop(self._free)
                else:
                    backlog = Backlog()
                    self._backlogs.append(backlog)
                    if not end:
                        self._backlog_of[cid] = backlog
            elif slot is None and end:
                del self._backlog_of[cid]
            if slot is None:
                backlog.add(request, now)
                self._reaper_wake.notify()  # the backlog may now expire earlier
                return
            if end:
                del self._slot_of[cid]
            failed = self.batchers[slot[1]].enqueue_locked(slot[0], request)
        if failed:
            self.fail(failed)

    def released(self, request: InferRequest, rescheduled: bool) -> ServeError | None:
        """Iterative sequences: the backend has released ``request`` after an execution. Released
        with RESCHEDULE it runs again, first in its slot (an error, Triton's, when its sequence
        lost the slot meanwhile); otherwise its sequence ends and the slot is freed."""
        cid = request.sequence_id
        failed: Failures = []
        with self.lock:
            slot = self._slot_of.get(cid)
            if rescheduled:
                if slot is None:
                    return invalid_arg(f"inference request for sequence {cid} to model '{self.model}' must specify "
                                       "the START flag on the first request of the sequence")
                request.sequence_start = False
                request.queue_start_ns = self._last_seen[cid] = time.monotonic_ns()
                self.stats.add_pending(1)
                self.batchers[slot[1]].requeue_locked(slot[0], request)
                return None
            if slot is not None:
                del self._slot_of[cid]
                self._last_seen.pop(cid, None)
                failed = self.batchers[slot[1]].end_locked(slot[0])
        if failed:
            self.fail(failed)
        return None

    # ---- slots (called by the batchers, under the lock) ------------------------------------------
    def release_slot_locked(self, batcher: int, slot: int, queue: deque) -> tuple[bool, Failures]:
        """Free ``slot``: what is left in ``queue`` (a cancelled sequence) is cancelled, then the
        oldest backlogged sequence moves into ``queue``. Returns (a sequence moved in, failures)."""
        failed: Failures = []
        left = [r for r in queue if r is not FORCE_END]
        queue.clear()
        if left:
            cid = left[0].sequence_id
            if self._slot_of.get(cid) == (slot, batcher):
                del self._slot_of[cid]
            self._last_seen.pop(cid, None)
            failed.extend(cancelled(r) for r in left)
        while self._backlogs and batcher not in self._retired:
            backlog = self._backlogs.popleft()
            last = backlog.requests[-1]
            cid = last.sequence_id
            is_cancelled = any(r.cancelled for r in backlog.requests)
            if not last.sequence_end:
                self._backlog_of.pop(cid, None)
                if not is_cancelled:
                    self._slot_of[cid] = (slot, batcher)
                    # Its idle time starts now: waiting for a slot is not being idle. (Triton keeps
                    # counting from the last arrival, so such a sequence can lose the slot at once.)
                    self._last_seen[cid] = time.monotonic_ns()
            if is_cancelled:
                failed.extend(cancelled(r) for r in backlog.requests)
                continue
            queue.extend(backlog.requests)
            return True, failed
        if batcher not in self._retired:
            heapq.heappush(self._free, (slot, batcher))
        return False, failed

    def prepare_locked(self, request: InferRequest, state: SequenceState | None) -> None:
        """Give ``request`` its control tensors and its sequence's state tensors."""
        request.inputs.update(self.controls.tensors(request.sequence_start, request.sequence_end, True,
                                                    request.sequence_id))
        if state is not None:
            request.state = state
            request.inputs.update(state.tensors())

    def new_state(self) -> SequenceState | None:
        return SequenceState(self.state_specs) if self.state_specs else None

    def fail(self, failed: Failures) -> None:
        """Answer requests that will not run (outside the lock: completions may call back)."""
        now = time.monotonic_ns()
        for request, error, reason in failed:
            self.stats.add_pending(-1)
            self.stats.record_failure(now - request.arrival_ns, reason)
            request.finish(None, error)

    # ---- idle sequences and expired backlogs ------------------------------------------------------
    def _reap(self) -> None:
        idle_ns = self.options.idle_ns
        while True:
            with self.lock:
                if self.stopping:
                    return
                now = time.monotonic_ns()
                wait_ns = idle_ns
                failed = self._expire_backlogs_locked(now)
                for cid, seen in list(self._last_seen.items()):
                    remaining = seen + idle_ns - now
                    if remaining > 0:
                        wait_ns = min(wait_ns, remaining)
                        continue
                    slot = self._slot_of.pop(cid, None)
                    if slot is not None:
                        log.info("sequence %s of model '%s' was idle for max_sequence_idle_microseconds; its slot "
                                 "is released", cid, self.model)
                        del self._last_seen[cid]
                        failed.extend(self.batchers[slot[1]].force_end_locked(slot[0]))
                    elif cid in self._backlog_of:
                        wait_ns = min(wait_ns, BACKLOG_IDLE_RECHECK_NS)
                    else:
                        del self._last_seen[cid]  # the sequence ended
                deadlines = [b.expires_ns for b in self._backlogs if b.expires_ns]
                if deadlines:
                    wait_ns = min(wait_ns, min(deadlines) - now)
                if not failed:
                    self._reaper_wake.wait(max(wait_ns, 0) / 1e9)
                    continue
            self.fail(failed)

    def _expire_backlogs_locked(self, now: int) -> Failures:
        """Backlogged sequences whose requests' ``timeout`` passed are rejected (Triton's text)."""
        expired = [b for b in self._backlogs if b.expires_ns and b.expires_ns <= now]
        if not expired:
            return []
        self._backlogs = deque(b for b in self._backlogs if b not in expired)
        failed: Failures = []
        for backlog in expired:
            cid = backlog.requests[0].sequence_id
            if self._backlog_of.get(cid) is backlog:
                del self._backlog_of[cid]
            error = unavailable("timeout of the corresponding sequence has been expired")
            failed.extend((r, error, "REJECTED") for r in backlog.requests)
        return failed

    # ---- lifecycle ------------------------------------------------------------------------------
    @property
    def accepting(self) -> bool:
        return self._accepting

    def add_instances(self, instances: list) -> None:
        """A batcher, with its free slots, for each of ``instances`` (a model update that adds
        instances)."""
        with self.lock:
            for instance in instances:
                index = len(self.batchers)
                self.batchers.append(self._batcher_type(self, index, instance, self._run_batch))
                self._instances.append(instance)
                for slot in range(self.options.slots_per_instance):
                    heapq.heappush(self._free, (slot, index))

    def remove_instances(self, instances: list) -> None:
        """End the batchers of ``instances`` (a model update that removes instances): their slots
        take no new sequence, and each ends once the sequences it holds have ended (or idled
        out); returns when they have ended."""
        ids = {id(instance) for instance in instances}
        with self.lock:
            leaving = [self.batchers[i] for i, instance in enumerate(self._instances)
                       if id(instance) in ids and i not in self._retired]
            self._retired.update(batcher.index for batcher in leaving)
            self._free = [pair for pair in self._free if pair[1] not in self._retired]
            heapq.heapify(self._free)
        for batcher in leaving:
            with self.lock:
                while any(index == batcher.index for _, index in self._slot_of.values()) or not batcher.idle_locked():
                    batcher.cond.wait(0.05)
                batcher.retiring = True
            batcher.stop(None)

    def stop(self, timeout_s: float | None = None) -> bool:
        """Stop accepting, run what the slots hold, then end the batchers. True when nothing is
        left; sequences still waiting in the backlog are left to ``fail_queued``."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self.lock:
            self._accepting = False
            self.stopping = True
            self._reaper_wake.notify()
        finished = all([batcher.stop(deadline) for batcher in self.batchers])
        with self.lock:
            self._reaper_wake.notify()
        self._reaper.join(None if deadline is None else max(deadline - time.monotonic(), 0))
        with self.lock:
            return finished and not self._backlogs

    def hold_in_order(self, request: InferRequest) -> None:
        """Nothing to wait for: a sequence model's responses are never cached."""

    def fail_queued(self, error: ServeError) -> None:
        """Answer every request not yet run with ``error`` (when a stop timed out)."""
        with self.lock:
            requests = [r for b in self._backlogs for r in b.requests]
            self._backlogs.clear()
            self._backlog_of.clear()
            self._slot_of.clear()
            for batcher in self.batchers:
                requests.extend(batcher.take_queued_locked())
        for request in requests:
            self.stats.add_pending(-1)
            request.finish(None, error)
        for batcher in self.batchers:
            batcher.fail_queued(error)
