"""The repository's example Python-backend model, served and called with the real tritonclient."""

from __future__ import annotations

import re
import shutil
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritonctl.serve.runtime import BackgroundServer, ServeOptions

EXAMPLES = Path(__file__).parents[3] / "examples" / "model_repository"

RAISING = '''
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        if pb_utils.get_input_tensor_by_name(requests[0], "INPUT0").as_numpy().sum() < 0:
            raise ValueError("negative sum")
        return [pb_utils.InferenceResponse(error=pb_utils.TritonError("always refused")) for _ in requests]
'''

# A: 999 raises in execute(), a negative value is answered with an error response.
ANSWERS_OR_REFUSES = '''
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "A").as_numpy()
            if a.flat[0] == 999:
                raise RuntimeError("boom")
            if a.flat[0] < 0:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("x")))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", a)]))
        return responses
'''

# Through the response sender: A 999 raises in execute(); otherwise one response with A, then for
# a negative A an error response (decoupled) or the error response alone (ordinary), then final.
SENDS_OR_REFUSES = '''
import json
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(json.loads(args["model_config"]))

    def execute(self, requests):
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "A").as_numpy()
            if a.flat[0] == 999:
                raise RuntimeError("boom")
            sender = request.get_response_sender()
            error = pb_utils.InferenceResponse(error=pb_utils.TritonError("x"))
            if self.decoupled or a.flat[0] >= 0:
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", a)]))
            if a.flat[0] < 0:
                sender.send(error)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''


def write_answers_or_refuses(repo: Path, name: str, batching: str, model_py: str = ANSWERS_OR_REFUSES) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.py").write_text(model_py)
    (repo / name / "config.pbtxt").write_text(
        f'backend: "python"\nmax_batch_size: 5\n'
        'input [ { name: "A" data_type: TYPE_FP32 dims: [ 1 ] }, '
        '{ name: "B" data_type: TYPE_FP32 dims: [ 1 ] optional: true } ]\n'
        f'output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] }} ]\n{batching}\n'
        'instance_group [ { count: 1 kind: KIND_CPU } ]\n')


@pytest.fixture(scope="module")
def served(tmp_path_factory, transports):
    repo = tmp_path_factory.mktemp("python") / "repo"
    shutil.copytree(EXAMPLES, repo)
    shutil.copytree(repo / "add_sub", repo / "raising")
    (repo / "raising" / "1" / "model.py").write_text(RAISING)
    write_answers_or_refuses(repo, "refuses_batched", "dynamic_batching { max_queue_delay_microseconds: 2000000 }")
    write_answers_or_refuses(repo, "refuses_alone", "")
    write_answers_or_refuses(repo, "sends_or_refuses", "", SENDS_OR_REFUSES)
    write_answers_or_refuses(repo, "sends_or_refuses_decoupled", "model_transaction_policy { decoupled: true }",
                             SENDS_OR_REFUSES)
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, **transports)) as server:
        yield server


def inputs(module, a: np.ndarray, b: np.ndarray):
    tensors = [module.InferInput("INPUT0", list(a.shape), "FP32"), module.InferInput("INPUT1", list(b.shape), "FP32")]
    tensors[0].set_data_from_numpy(a)
    tensors[1].set_data_from_numpy(b)
    return tensors


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_example_add_sub_answers(served, module):
    url = served.http_url if module is httpclient else served.grpc_url
    client = module.InferenceServerClient(url)
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.full((2, 4), 0.5, np.float32)
    assert client.is_model_ready("add_sub")
    result = client.infer("add_sub", inputs(module, a, b))
    assert np.array_equal(result.as_numpy("OUTPUT0"), a + b) and np.array_equal(result.as_numpy("OUTPUT1"), a - b)
    only = client.infer("add_sub", inputs(module, a, b), outputs=[module.InferRequestedOutput("OUTPUT1")])
    assert only.as_numpy("OUTPUT0") is None and np.array_equal(only.as_numpy("OUTPUT1"), a - b)
    with pytest.raises(InferenceServerException) as raised:
        client.infer("add_sub", inputs(module, a[:, :3], b[:, :3]))
    assert "unexpected shape for input 'INPUT0' for model 'add_sub'. Expected [-1,4], got [2,3]" in str(raised.value)


def test_model_errors_reach_the_client_with_tritons_status(served):
    client = httpclient.InferenceServerClient(served.http_url)
    a = np.ones((1, 4), np.float32)
    with pytest.raises(InferenceServerException) as raised:
        client.infer("raising", inputs(httpclient, -a, a))
    assert raised.value.status() == "500"
    assert "Failed to process the request(s) for model 'raising_0_0', message: ValueError: negative sum" \
        in raised.value.message()
    grpc = grpcclient.InferenceServerClient(served.grpc_url)
    with pytest.raises(InferenceServerException) as raised:
        grpc.infer("raising", inputs(grpcclient, a, a))
    assert raised.value.status() == "StatusCode.INTERNAL" and raised.value.message() == "always refused"
    assert client.is_server_ready()  # the server keeps serving
    assert client.infer("add_sub", inputs(httpclient, a, a)).as_numpy("OUTPUT0").tolist() == [[2.0] * 4]


def rows(module, value: float, count: int, name: str = "A"):
    tensor = module.InferInput(name, [count, 1], "FP32")
    tensor.set_data_from_numpy(np.full((count, 1), value, np.float32))
    return tensor


def outcome(url: str, model: str, tensors) -> str:
    try:
        grpcclient.InferenceServerClient(url).infer(model, tensors)
    except InferenceServerException as exc:
        return f"{exc.status()} {exc.message().splitlines()[0]}"
    return "ok"


def together(served, model: str, *values_and_rows) -> list[str]:
    """Requests sent at once: with max_batch_size 5 and a long queue delay, one execution runs them."""
    results = [""] * len(values_and_rows)

    def send(index, value, count):
        results[index] = outcome(served.grpc_url, model, [rows(grpcclient, value, count)])

    threads = [threading.Thread(target=send, args=(i, *pair)) for i, pair in enumerate(values_and_rows)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def counts(served, model: str) -> dict:
    stats = httpclient.InferenceServerClient(served.http_url).get_inference_statistics(model)["model_stats"][0]
    phases = stats["inference_stats"]
    return {"inference": stats["inference_count"], "executions": stats["execution_count"],
            **{phase: phases[phase]["count"] for phase in ("success", "fail", "queue", "compute_input",
                                                           "compute_infer", "compute_output")},
            "batches": {b["batch_size"]: b["compute_infer"]["count"] for b in stats["batch_stats"]}}


def metrics(served, model: str) -> dict:
    text = urllib.request.urlopen(served.metrics_url, timeout=10).read().decode()
    found = re.findall(rf'^(nv_inference_(?:request_success|request_failure|count|exec_count))\{{model="{model}",(?:reason="(\w+)",)?version="1"\}} (\d+)', text,
                       re.MULTILINE)
    return {f"{name}:{reason}" if reason else name: int(value) for name, reason, value in found}


def test_an_error_response_counts_as_a_success_and_a_raise_as_an_execution(served):
    """Triton 2.51: a request a Python model answers with an error response reaches its client as
    that error, yet counts as a success with its rows; when execute() raises, the execution (and
    its batch size) counts, its requests fail (BACKEND) and no compute time counts."""
    refused, answered = together(served, "refuses_batched", (-1, 2), (1, 3))
    assert (refused, answered) == ("StatusCode.INTERNAL x", "ok")
    after_error = {"inference": 5, "executions": 1, "success": 2, "fail": 0, "queue": 2, "compute_input": 2,
                   "compute_infer": 2, "compute_output": 2, "batches": {5: 1}}
    assert counts(served, "refuses_batched") == after_error
    assert together(served, "refuses_batched", (999, 2), (1, 1)) == [
        "StatusCode.INTERNAL Failed to process the request(s) for model 'refuses_batched_0_0', message: "
        "RuntimeError: boom"] * 2
    assert counts(served, "refuses_batched") == {**after_error, "executions": 2, "fail": 2, "batches": {3: 1, 5: 1}}
    assert metrics(served, "refuses_batched") == {
        "nv_inference_request_success": 2, "nv_inference_request_failure:BACKEND": 2,
        "nv_inference_request_failure:CANCELED": 0, "nv_inference_request_failure:OTHER": 0,
        "nv_inference_request_failure:REJECTED": 0, "nv_inference_count": 5, "nv_inference_exec_count": 2}


def test_without_dynamic_batching_each_request_counts_the_same_way(served):
    """Triton 2.51, one request per execution: the same counts as with dynamic batching."""
    url = served.grpc_url
    assert outcome(url, "refuses_alone", [rows(grpcclient, -1, 2)]) == "StatusCode.INTERNAL x"
    assert outcome(url, "refuses_alone", [rows(grpcclient, 1, 3)]) == "ok"
    assert outcome(url, "refuses_alone", [rows(grpcclient, 999, 2)]).startswith("StatusCode.INTERNAL Failed to")
    assert counts(served, "refuses_alone") == {
        "inference": 5, "executions": 3, "success": 2, "fail": 1, "queue": 2, "compute_input": 2,
        "compute_infer": 2, "compute_output": 2, "batches": {2: 2, 3: 1}}
    found = metrics(served, "refuses_alone")
    assert (found["nv_inference_request_success"], found["nv_inference_request_failure:BACKEND"],
            found["nv_inference_count"], found["nv_inference_exec_count"]) == (2, 1, 5, 3)


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_inputs_of_different_batch_sizes_are_refused_with_tritons_text(served, module):
    """Triton 2.51 names the first input of the request, whichever is larger: "[request id:
    <id_unknown>] input 'A' batch size does not match other inputs for 'refuses_alone'"."""
    client = module.InferenceServerClient(served.http_url if module is httpclient else served.grpc_url)
    for a_rows, b_rows in ((1, 2), (2, 1)):
        with pytest.raises(InferenceServerException) as raised:
            client.infer("refuses_alone", [rows(module, 1, a_rows), rows(module, 1, b_rows, "B")], request_id="r7")
        assert raised.value.status() in ("400", "StatusCode.INVALID_ARGUMENT")
        assert raised.value.message() == \
            "[request id: r7] input 'A' batch size does not match other inputs for 'refuses_alone'"


def test_error_responses_sent_through_the_response_sender_count_as_successes(served):
    """Triton 2.51 (measured with these models): the model's own error response, sent through the
    response sender by an ordinary or a decoupled model, leaves the request a success with its
    rows; only an execute() that raises fails it (its execution counts, its compute time not)."""
    url = served.grpc_url
    assert outcome(url, "sends_or_refuses", [rows(grpcclient, 1, 1)]) == "ok"
    assert outcome(url, "sends_or_refuses", [rows(grpcclient, -1, 1)]) == "StatusCode.INTERNAL x"
    ordinary = counts(served, "sends_or_refuses")
    assert (ordinary["inference"], ordinary["executions"], ordinary["success"], ordinary["fail"]) == (2, 2, 2, 0)
    client = grpcclient.InferenceServerClient(url)
    answers: list = []
    client.start_stream(callback=lambda result, error: answers.append(error))
    try:
        for value in (1, -1, 999):
            client.async_stream_infer("sends_or_refuses_decoupled", [rows(grpcclient, value, 1)])
        deadline = time.monotonic() + 20
        while len(answers) < 4 and time.monotonic() < deadline:  # 1; -1 and its error; the raise
            time.sleep(0.01)
    finally:
        client.stop_stream()
    assert sum(error is not None for error in answers) == 2
    decoupled = counts(served, "sends_or_refuses_decoupled")
    assert (decoupled["inference"], decoupled["executions"], decoupled["success"], decoupled["fail"]) == (2, 3, 2, 1)
    assert decoupled["compute_infer"] == 2  # the execution that raised counts no compute time
