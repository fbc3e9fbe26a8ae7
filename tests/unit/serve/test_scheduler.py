"""The dynamic batcher on its own: a real scheduler with worker threads and a Python instance
that records what it is given."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from tritonctl.serve.core.errors import ServeError, Status
from tritonctl.serve.core.scheduler import POLL_MAX_S, BatchingOptions, QueuePolicy
from tritonctl.serve.core.types import InferRequest, InferResponse, InferTensor


class RecordingInstance:
    """Runs a batch by sleeping ``seconds``; records each batch as the list of request ids."""

    def __init__(self, seconds: float = 0.0):
        self.seconds = seconds
        self.batches: list[list[str]] = []
        self.gate = threading.Event()
        self.gate.set()

    def run(self, _instance, batch: list[InferRequest]) -> None:
        self.gate.wait(5)
        self.batches.append([r.id for r in batch])
        time.sleep(self.seconds)
        for request in batch:
            request.finish(InferResponse("m", "1", request.id, []))


class Results:
    def __init__(self):
        self.lock = threading.Lock()
        self.done: dict[str, ServeError | None] = {}
        self.all_done = threading.Event()
        self.expected = 0

    def callback(self, request_id: str):
        def complete(_response, error):
            with self.lock:
                self.done[request_id] = error
                if len(self.done) >= self.expected:
                    self.all_done.set()
        return complete


def make_request(request_id: str, results: Results, width: int = 4, priority: int = 0, timeout_us: int = 0):
    data = np.zeros((1, width), np.float32)
    results.expected += 1
    return InferRequest("m", {"X": InferTensor("X", "FP32", data)}, id=request_id, priority=priority,
                        timeout_us=timeout_us, complete=results.callback(request_id))


def batching(**kwargs) -> BatchingOptions:
    defaults = dict(enabled=True, max_batch_size=8, preferred_sizes=(8,), max_queue_delay_ns=0)
    defaults.update(kwargs)
    return BatchingOptions(**defaults)


def test_burst_runs_in_fewer_executions_than_requests(scheduler_factory):
    instance = RecordingInstance(seconds=0.02)
    scheduler = scheduler_factory(batching(), instance)
    results = Results()
    requests = [make_request(str(i), results) for i in range(16)]
    threads = [threading.Thread(target=scheduler.enqueue, args=(r,)) for r in requests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.all_done.wait(5)
    assert all(error is None for error in results.done.values())
    assert sorted(i for b in instance.batches for i in b) == sorted(str(i) for i in range(16))
    assert len(instance.batches) < 16
    assert max(len(b) for b in instance.batches) <= 8


def test_preferred_size_is_sent_at_once_and_the_rest_after_the_delay(scheduler_factory):
    instance = RecordingInstance()
    options = batching(preferred_sizes=(4,), max_queue_delay_ns=150_000_000)
    scheduler = scheduler_factory(options, instance)
    results = Results()
    started = time.monotonic()
    for i in range(6):
        scheduler.enqueue(make_request(str(i), results))
    assert results.all_done.wait(5)
    assert [len(b) for b in instance.batches] == [4, 2]
    assert time.monotonic() - started >= 0.14  # the tail waited for max_queue_delay


def test_delay_zero_sends_without_waiting(scheduler_factory):
    instance = RecordingInstance()
    scheduler = scheduler_factory(batching(preferred_sizes=(4,)), instance)
    results = Results()
    started = time.monotonic()
    scheduler.enqueue(make_request("only", results))
    assert results.all_done.wait(5)
    assert time.monotonic() - started < 0.1
    assert instance.batches == [["only"]]


def test_queue_timeout_rejects_with_tritons_text(scheduler_factory):
    instance = RecordingInstance(seconds=0.15)
    policy = QueuePolicy(default_timeout_us=20_000)
    scheduler = scheduler_factory(batching(max_batch_size=1, preferred_sizes=(1,), default_policy=policy), instance)
    results = Results()
    scheduler.enqueue(make_request("first", results))
    time.sleep(0.03)  # "first" is running; "late" waits behind it longer than its timeout
    scheduler.enqueue(make_request("late", results))
    assert results.all_done.wait(5)
    error = results.done["late"]
    assert error is not None and error.status is Status.UNAVAILABLE
    assert error.message == "Request timeout expired"
    assert instance.batches == [["first"]]
    assert scheduler.stats.failures == {"REJECTED": 1}


def test_request_timeout_may_only_shorten_the_default():
    policy = QueuePolicy(default_timeout_us=1000, allow_timeout_override=True)
    assert policy.timeout_us(100) == 100
    assert policy.timeout_us(5000) == 1000
    assert QueuePolicy(default_timeout_us=1000).timeout_us(100) == 1000
    assert QueuePolicy(allow_timeout_override=True).timeout_us(100) == 0


def test_delay_policy_runs_expired_requests_after_the_others(scheduler_factory):
    instance = RecordingInstance()
    instance.gate.clear()
    policy = QueuePolicy(delay_on_timeout=True, default_timeout_us=10_000)
    scheduler = scheduler_factory(batching(max_batch_size=1, preferred_sizes=(1,), default_policy=policy), instance)
    results = Results()
    scheduler.enqueue(make_request("blocker", results))
    time.sleep(0.02)
    scheduler.enqueue(make_request("old", results))
    time.sleep(0.03)  # "old" passes its timeout and is moved to the delayed queue
    scheduler.enqueue(make_request("new", results))
    instance.gate.set()
    assert results.all_done.wait(5)
    assert all(error is None for error in results.done.values())
    assert [b[0] for b in instance.batches] == ["blocker", "new", "old"]


def test_max_queue_size_rejects_at_once(scheduler_factory):
    instance = RecordingInstance()
    instance.gate.clear()
    policy = QueuePolicy(max_queue_size=2)
    scheduler = scheduler_factory(batching(max_batch_size=1, preferred_sizes=(1,), default_policy=policy), instance)
    results = Results()
    scheduler.enqueue(make_request("running", results))
    time.sleep(0.02)
    scheduler.enqueue(make_request("q1", results))
    scheduler.enqueue(make_request("q2", results))
    with pytest.raises(ServeError) as caught:
        scheduler.enqueue(make_request("overflow", results))
    assert caught.value.status is Status.UNAVAILABLE
    assert "Exceeds maximum queue size" in caught.value.message
    results.expected -= 1
    instance.gate.set()
    assert results.all_done.wait(5)


def test_higher_priority_runs_first(scheduler_factory):
    instance = RecordingInstance()
    instance.gate.clear()
    options = batching(max_batch_size=1, preferred_sizes=(1,), priority_levels=2, default_priority_level=2)
    scheduler = scheduler_factory(options, instance)
    results = Results()
    scheduler.enqueue(make_request("blocker", results))
    time.sleep(0.02)
    scheduler.enqueue(make_request("low-a", results, priority=2))
    scheduler.enqueue(make_request("default", results))  # priority 0 -> default level 2
    scheduler.enqueue(make_request("high", results, priority=1))
    scheduler.enqueue(make_request("beyond", results, priority=9))  # above the levels -> default level
    instance.gate.set()
    assert results.all_done.wait(5)
    assert [b[0] for b in instance.batches] == ["blocker", "high", "low-a", "default", "beyond"]


def test_cancelled_request_never_reaches_the_model(scheduler_factory):
    instance = RecordingInstance()
    instance.gate.clear()
    scheduler = scheduler_factory(batching(), instance)
    results = Results()
    scheduler.enqueue(make_request("running", results))
    time.sleep(0.02)
    gone = make_request("gone", results)
    scheduler.enqueue(gone)
    gone.cancelled = True
    instance.gate.set()
    assert results.all_done.wait(5)
    assert results.done["gone"].status is Status.CANCELLED
    assert all("gone" not in b for b in instance.batches)


def test_only_shape_compatible_requests_share_a_batch(scheduler_factory):
    instance = RecordingInstance()
    instance.gate.clear()
    scheduler = scheduler_factory(batching(), instance)
    results = Results()
    scheduler.enqueue(make_request("blocker", results))
    time.sleep(0.02)
    for i, width in enumerate([4, 4, 6, 6, 4]):
        scheduler.enqueue(make_request(f"r{i}", results, width=width))
    instance.gate.set()
    assert results.all_done.wait(5)
    assert instance.batches[1:] == [["r0", "r1"], ["r2", "r3"], ["r4"]]


def test_a_waiting_batch_goes_once_a_request_completes_it_or_cannot_join_it(scheduler_factory):
    instance = RecordingInstance()
    scheduler = scheduler_factory(batching(preferred_sizes=(2, 4), max_queue_delay_ns=5_000_000_000), instance)
    results = Results()
    narrow = [make_request(f"r{i}", results) for i in range(3)]
    wide = [make_request(f"wide{i}", results, width=6) for i in range(2)]
    started = time.monotonic()
    for request in narrow:  # r0 + r1 make the preferred 2 and go; r2 waits for the batch to grow
        scheduler.enqueue(request)
        time.sleep(0.02)
    time.sleep(0.05)
    scheduler.enqueue(wide[0])  # cannot join r2: r2 goes now
    scheduler.enqueue(wide[1])  # completes the preferred 2 with wide0
    assert results.all_done.wait(2)
    assert instance.batches == [["r0", "r1"], ["r2"], ["wide0", "wide1"]]
    assert time.monotonic() - started < 2  # nobody waited for the 5 s delay


def test_a_queue_deadline_inside_the_delay_is_kept(scheduler_factory):
    instance = RecordingInstance()
    policy = QueuePolicy(default_timeout_us=10_000_000, allow_timeout_override=True)
    scheduler = scheduler_factory(batching(max_queue_delay_ns=1_000_000_000, default_policy=policy), instance)
    results = Results()
    scheduler.enqueue(make_request("patient", results))
    time.sleep(0.05)  # the worker now waits for the 1 s delay
    started = time.monotonic()
    scheduler.enqueue(make_request("hasty", results, timeout_us=50_000))
    while "hasty" not in results.done and time.monotonic() - started < 2:
        time.sleep(0.01)
    assert time.monotonic() - started < 0.5  # rejected at its deadline, not when the delay ended
    assert results.done["hasty"].message == "Request timeout expired"
    assert results.all_done.wait(3)
    assert instance.batches == [["patient"]]


def wait_until_polling(scheduler) -> None:
    deadline = time.monotonic() + 2
    while not scheduler._polling:
        assert time.monotonic() < deadline, "no worker polled through the queue delay"
        time.sleep(0)


def test_a_lone_request_waits_out_a_short_delay(scheduler_factory):
    instance = RecordingInstance()
    scheduler = scheduler_factory(batching(max_queue_delay_ns=int(POLL_MAX_S * 1e9)), instance)
    results = Results()
    started = time.monotonic()
    scheduler.enqueue(make_request("lone", results))
    assert results.all_done.wait(5)
    assert time.monotonic() - started >= POLL_MAX_S
    assert instance.batches == [["lone"]]


def test_requests_that_come_while_a_worker_polls_join_its_batch(scheduler_factory):
    instance = RecordingInstance()
    options = batching(preferred_sizes=(3,), max_queue_delay_ns=int(POLL_MAX_S * 1e9))
    scheduler = scheduler_factory(options, instance, count=2)
    results = Results()
    scheduler.enqueue(make_request("first", results))
    wait_until_polling(scheduler)
    scheduler.enqueue(make_request("second", results))
    scheduler.enqueue(make_request("third", results))  # completes the preferred size: goes at once
    assert results.all_done.wait(5)
    assert instance.batches == [["first", "second", "third"]]


def test_stop_while_a_worker_polls_still_runs_the_lone_request(scheduler_factory):
    instance = RecordingInstance()
    scheduler = scheduler_factory(batching(max_queue_delay_ns=int(POLL_MAX_S * 1e9)), instance)
    results = Results()
    scheduler.enqueue(make_request("lone", results))
    wait_until_polling(scheduler)
    assert scheduler.stop(5)
    assert results.done == {"lone": None}
    assert instance.batches == [["lone"]]


def test_instances_execute_concurrently(scheduler_factory):
    instance = RecordingInstance(seconds=0.2)
    scheduler = scheduler_factory(BatchingOptions(), instance, count=3)
    results = Results()
    started = time.monotonic()
    for i in range(3):
        scheduler.enqueue(make_request(str(i), results))
    assert results.all_done.wait(5)
    assert time.monotonic() - started < 0.45  # three 0.2 s executions overlapped
    assert len(instance.batches) == 3


def test_stop_finishes_queued_work_and_refuses_new(scheduler_factory):
    instance = RecordingInstance(seconds=0.05)
    scheduler = scheduler_factory(BatchingOptions(), instance)
    results = Results()
    for i in range(3):
        scheduler.enqueue(make_request(str(i), results))
    assert scheduler.stop(5)
    assert len(results.done) == 3 and all(e is None for e in results.done.values())
    with pytest.raises(ServeError) as caught:
        scheduler.enqueue(make_request("late", results))
    assert caught.value.status is Status.UNAVAILABLE
