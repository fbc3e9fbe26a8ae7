"""Triton's gRPC stream error mode (server 24.08+, L0_backend_python lifecycle cases
test_triton_grpc_error_*): a stream opened with the header ``triton_grpc_error: true`` ends at its
first error, which the client gets as the gRPC status (Triton's code and text); without the
header an error is one message and the stream goes on."""

from __future__ import annotations

import queue
import threading

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tritonctl.serve.grpc import native as grpc_native
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

# As Triton's execute_grpc_error model: every second request gets an (INTERNAL) error.
EVERY_SECOND_FAILS = '''
import threading
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.count = 0
        self.lock = threading.Lock()

    def execute(self, requests):
        responses = []
        for request in requests:
            with self.lock:
                self.count += 1
                fail = self.count % 2 == 0
            if fail:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("An Error Occurred")))
            else:
                responses.append(pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(request, "IN").as_numpy())]))
        return responses
'''

CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ -1, -1 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ -1, -1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""


@pytest.fixture
def served(tmp_path, transports):
    if transports["grpc_transport"] == "native" and not hasattr(grpc_native._native.Call, "triton_grpc_error"):
        pytest.skip("the C++ gRPC transport here was built before it read the triton_grpc_error header; "
                    "rebuild it (pip install -e .)")
    for name in ("execute_grpc_error", "second_model"):
        (tmp_path / "repo" / name / "1").mkdir(parents=True)
        (tmp_path / "repo" / name / "1" / "model.py").write_text(EVERY_SECOND_FAILS)
        (tmp_path / "repo" / name / "config.pbtxt").write_text(CONFIG.format(name=name))
    with BackgroundServer(ServeOptions(tmp_path / "repo", http_port=0, grpc_port=0, metrics_port=0,
                                       **transports)) as server:
        yield server


def inputs():
    tensor = grpcclient.InferInput("IN", [2, 2], "FP32")
    tensor.set_data_from_numpy(np.ones([2, 2], np.float32))
    return [tensor]


def open_stream(served, grpc_error: bool):
    client = grpcclient.InferenceServerClient(served.grpc_url)
    received: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: received.put(error if error is not None else result),
                        headers={"triton_grpc_error": "true"} if grpc_error else None)
    return client, received


def error_on(served, model: str) -> None:
    client, received = open_stream(served, grpc_error=True)
    try:
        client.async_stream_infer(model, inputs())
        first = received.get(timeout=10)
        assert first.as_numpy("OUT").tolist() == [[1.0, 1.0]] * 2
        client.async_stream_infer(model, inputs())
        second = received.get(timeout=10)
        assert isinstance(second, InferenceServerException)
        assert second.status() == "StatusCode.INTERNAL" and second.message() == "An Error Occurred"
        with pytest.raises(InferenceServerException, match="no longer in valid state"):  # the stream has ended
            client.async_stream_infer(model, inputs())
    finally:
        client.stop_stream()
    assert received.empty()


def test_with_the_header_an_error_ends_the_stream_as_its_grpc_status(served):
    error_on(served, "execute_grpc_error")
    assert grpcclient.InferenceServerClient(served.grpc_url).is_server_live()


def test_the_header_holds_per_stream_with_streams_open_at_once(served):
    failures: list = []

    def run(model: str) -> None:
        try:
            error_on(served, model)
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(m,)) for m in ("execute_grpc_error", "second_model")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_with_the_header_a_stream_can_still_be_cancelled(served):
    client, received = open_stream(served, grpc_error=True)
    client.async_stream_infer("execute_grpc_error", inputs())
    assert received.get(timeout=10).as_numpy("OUT") is not None
    client.stop_stream(cancel_requests=True)


def test_without_the_header_errors_are_messages_and_the_stream_goes_on(served):
    client, received = open_stream(served, grpc_error=False)
    try:
        answers = []
        for _ in range(4):
            client.async_stream_infer("execute_grpc_error", inputs())
            answers.append(received.get(timeout=10))
    finally:
        client.stop_stream()
    assert [isinstance(a, InferenceServerException) for a in answers] == [False, True, False, True]
    assert answers[1].message() == "An Error Occurred"


def raw_request(model: str, request_id: str) -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name=model, id=request_id)
    request.inputs.add(name="IN", datatype="FP32", shape=[2, 2])
    request.raw_input_contents.append(np.ones([2, 2], np.float32).tobytes())
    return request


def test_without_the_header_an_error_names_its_request_as_tritons_does(served):
    requests = [raw_request("execute_grpc_error", "first"), raw_request("missing", "refused"),
                raw_request("execute_grpc_error", "failed"), raw_request("execute_grpc_error", "third")]
    with grpc.insecure_channel(served.grpc_url) as channel:
        replies = list(service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelStreamInfer(iter(requests), timeout=10))
    assert [r.error_message for r in replies] == ["", "Request for unknown model: 'missing' is not found",
                                                  "An Error Occurred", ""]
    assert replies[1].infer_response == service_pb2.ModelInferResponse(id="refused")  # refused before it ran
    failed = replies[2].infer_response
    assert (failed.model_name, failed.model_version, failed.id, list(failed.outputs)) == \
        ("execute_grpc_error", "", "failed", [])
    assert dict(failed.parameters) == {"triton_final_response": service_pb2.InferParameter(bool_param=True)}
    assert [r.infer_response.id for r in (replies[0], replies[3])] == ["first", "third"]
