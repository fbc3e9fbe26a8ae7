"""The last look before a dynamic batcher's batch reaches the backend: a request whose queue
timeout (REJECT) passed or whose client went after the batch was taken from the queue is
answered as the queue answers it ("Request timeout expired" / CANCELLED) and never runs; the
rest of the batch runs (its inputs gathered without the dropped ones) and nothing counts as a
stale execution. Real onnxruntime and Python-backend instances, loaded from a repository on disk."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from helpers.serve_models import loaded_server, write_add_sub, write_tag_logger
from tritonctl.serve.core.errors import Status
from tritonctl.serve.core.types import InferRequest, InferTensor

POLICY = ("dynamic_batching { default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 60000000 "
          "max_queue_size: 8 } }")

class Answer:
    def __init__(self):
        self.event = threading.Event()
        self.response = self.error = None

    def __call__(self, response, error) -> None:
        self.response, self.error = response, error
        self.event.set()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("stale")
    write_add_sub(repo, extra=POLICY)
    write_tag_logger(repo, "logged", 4, POLICY)
    with loaded_server(repo) as server:
        server.repo = repo
        yield server


def queued(model, inputs: dict[str, np.ndarray], state: str) -> tuple[InferRequest, Answer]:
    """A request as the dynamic batcher hands it over: its queue deadline ``state`` is
    "passed" (1 ms ago), "ahead" (a minute away) or "gone" (its client left)."""
    answer = Answer()
    tensors = {name: InferTensor(name, "INT32" if name == "TAG" else "FP32", data) for name, data in inputs.items()}
    request = InferRequest(model.name, tensors, complete=answer)
    model.prepare(request)
    now = time.monotonic_ns()
    request.queue_start_ns = now
    request.reject_after_ns = request.deadline_ns = now - 1_000_000 if state == "passed" else now + 60_000_000_000
    request.cancelled = state == "gone"
    return request, answer


def test_a_python_models_batch_runs_without_the_requests_gone_stale_since_it_was_taken(server):
    model = server.manager.get("logged")
    before = dict(model.stats.failures)
    batch = [queued(model, {"TAG": np.array([[tag]], np.int32)}, state)
             for tag, state in ((1, "ahead"), (2, "passed"), (3, "gone"), (4, "ahead"))]
    model._run_fresh(model.instances[0], [request for request, _ in batch])
    answers = [answer for _, answer in batch]
    assert all(answer.event.wait(10) for answer in answers)
    assert [int(a.response.outputs[0].data.reshape(-1)[0]) for a in (answers[0], answers[3])] == [1, 4]
    assert answers[1].error.status is Status.UNAVAILABLE and answers[1].error.message == "Request timeout expired"
    assert answers[2].error.status is Status.CANCELLED and answers[2].error.message == "Request was cancelled"
    assert Path(server.repo / "logged" / "ran").read_text().split() == ["1", "4"]  # the stale ones never ran
    assert model.stats.failures.get("REJECTED", 0) - before.get("REJECTED", 0) == 1
    assert model.stats.failures.get("CANCELED", 0) - before.get("CANCELED", 0) == 1
    assert model.stats.stale_executions == 0


def test_an_onnx_models_batch_is_gathered_again_without_the_stale_requests(server):
    model = server.manager.get("add_sub")
    rows = [np.full((1, 4), value, np.float32) for value in (1, 2, 3)]
    batch = [queued(model, {"INPUT0": row, "INPUT1": np.ones((1, 4), np.float32)}, state)
             for row, state in zip(rows, ("passed", "ahead", "gone"))]
    model._run_fresh(model.instances[0], [request for request, _ in batch])
    expired, fresh, gone = (answer for _, answer in batch)
    assert all(answer.event.wait(10) for answer in (expired, fresh, gone))
    assert expired.error.message == "Request timeout expired" and gone.error.status is Status.CANCELLED
    outputs = {t.name: t.data for t in fresh.response.outputs}
    np.testing.assert_array_equal(outputs["OUTPUT0"], np.full((1, 4), 3, np.float32))  # 2 + 1, its own row
    np.testing.assert_array_equal(outputs["OUTPUT1"], np.full((1, 4), 1, np.float32))
    assert model.stats.stale_executions == 0


def test_a_batch_whose_every_request_went_stale_does_not_reach_the_backend(server):
    model = server.manager.get("logged")
    ran_before = Path(server.repo / "logged" / "ran").read_text() if (server.repo / "logged" / "ran").exists() else ""
    executions = model.stats.to_json()["execution_count"]
    batch = [queued(model, {"TAG": np.array([[tag]], np.int32)}, "passed") for tag in (7, 8)]
    model._run_fresh(model.instances[0], [request for request, _ in batch])
    assert all(answer.event.is_set() and answer.error.status is Status.UNAVAILABLE for _, answer in batch)
    ran_after = Path(server.repo / "logged" / "ran").read_text() if (server.repo / "logged" / "ran").exists() else ""
    assert ran_after == ran_before and model.stats.to_json()["execution_count"] == executions
