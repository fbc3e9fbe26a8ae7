"""The dynamic batcher while every instance is busy: a queued request whose client goes leaves
the queue at once (answered CANCELLED), not when an instance frees up, and its place in a
bounded queue is free again."""

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
