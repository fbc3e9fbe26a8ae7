"""The dynamic batcher while every instance is busy: queued requests leave at their queue
deadline (REJECT) or when their client goes, not when an instance frees up, and what they leave
behind is nothing (no thread, no place in the queue)."""

from __future__ import annotations

import threading

import numpy as np

from tritonctl.serve.core.errors import Status
from tritonctl.serve.core.scheduler import BatchingOptions, QueuePolicy
from tritonctl.serve.core.types import InferRequest, InferResponse, InferTensor


class BlockingInstance:
    """Runs each batch only once ``gate`` is set; ``started`` tells that a batch is running."""

    def __init__(self):
        self.gate = threading.Event()
        self.started = threading.Event()
        self.ran: list[str] = []

    def run(self, _instance, batch: list[InferRequest]) -> None:
        self.started.set()
        assert self.gate.wait(10)
        for request in batch:
            self.ran.append(request.id)
            request.finish(InferResponse("m", "1", request.id, []))


class Answer:
    def __init__(self):
        self.event = threading.Event()
        self.error = None

    def __call__(self, _response, error) -> None:
        self.error = error
        self.event.set()


def request(request_id: str, timeout_us: int = 0) -> tuple[InferRequest, Answer]:
    answer = Answer()
    data = np.zeros((1, 4), np.float32)
    return InferRequest("m", {"X": InferTensor("X", "FP32", data)}, id=request_id, timeout_us=timeout_us,
                        complete=answer), answer


def one_at_a_time(policy: QueuePolicy) -> BatchingOptions:
    return BatchingOptions(enabled=True, max_batch_size=1, preferred_sizes=(1,), default_policy=policy)


def busy(scheduler_factory, policy: QueuePolicy):
    """A scheduler whose only instance is running a blocker (until ``instance.gate`` is set)."""
    instance = BlockingInstance()
    scheduler = scheduler_factory(one_at_a_time(policy), instance)
    blocker, blocker_answer = request("blocker")
    scheduler.enqueue(blocker)
    assert instance.started.wait(10)
    return scheduler, instance, blocker_answer


def test_a_queued_request_is_rejected_at_its_deadline_while_the_instance_is_busy(scheduler_factory):
    policy = QueuePolicy(default_timeout_us=10_000_000, allow_timeout_override=True)
    scheduler, instance, blocker = busy(scheduler_factory, policy)
    late, answer = request("late", timeout_us=20_000)
    scheduler.enqueue(late)
    assert answer.event.wait(10)  # answered while the blocker still holds the instance
    assert not instance.gate.is_set() and not blocker.event.is_set()
    assert answer.error.status is Status.UNAVAILABLE and answer.error.message == "Request timeout expired"
    assert scheduler.stats.failures == {"REJECTED": 1} and scheduler.stats.pending == 0
    instance.gate.set()
    assert blocker.event.wait(10) and blocker.error is None
    assert instance.ran == ["blocker"]


def test_a_queued_request_whose_client_went_is_answered_at_once_and_frees_its_place(scheduler_factory):
    scheduler, instance, _ = busy(scheduler_factory, QueuePolicy(max_queue_size=1))
    gone, gone_answer = request("gone")
    scheduler.enqueue(gone)
    gone.cancel()
    assert gone_answer.event.is_set()  # answered by cancel() itself
    assert gone_answer.error.status is Status.CANCELLED
    assert scheduler.stats.failures == {"CANCELED": 1}
    kept, kept_answer = request("kept")
    scheduler.enqueue(kept)  # the queue of one has room again
    instance.gate.set()
    assert kept_answer.event.wait(10) and kept_answer.error is None
    assert instance.ran == ["blocker", "kept"]


def test_cancelling_a_request_that_already_runs_changes_nothing(scheduler_factory):
    instance = BlockingInstance()
    scheduler = scheduler_factory(one_at_a_time(QueuePolicy()), instance)
    running, answer = request("running")
    scheduler.enqueue(running)
    assert instance.started.wait(10)
    running.cancel()
    assert not answer.event.is_set()
    instance.gate.set()
    assert answer.event.wait(10) and answer.error is None


def test_stop_ends_the_deadline_thread_too(scheduler_factory):
    instance = BlockingInstance()
    instance.gate.set()
    scheduler = scheduler_factory(one_at_a_time(QueuePolicy(default_timeout_us=50_000)), instance)
    threads = {t.name for t in threading.enumerate()}
    assert "m-queue-timeouts" in threads
    served, answer = request("served")
    scheduler.enqueue(served)
    assert answer.event.wait(10) and answer.error is None
    assert scheduler.stop(10)
    assert "m-queue-timeouts" not in {t.name for t in threading.enumerate()}


def test_no_deadline_thread_without_a_reject_timeout(scheduler_factory):
    before = threading.active_count()
    scheduler_factory(one_at_a_time(QueuePolicy(max_queue_size=4)), BlockingInstance())
    scheduler_factory(one_at_a_time(QueuePolicy(delay_on_timeout=True, default_timeout_us=1000)), BlockingInstance())
    assert threading.active_count() == before + 2  # one worker each
