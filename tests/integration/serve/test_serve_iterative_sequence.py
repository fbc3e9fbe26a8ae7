"""Iterative sequences (``sequence_batching { iterative_sequence: true }``), as Triton runs them
(its L0_iterative_sequence and L0_backend_python/request_rescheduling cases): each request is a
sequence of its own; a Python model that releases it with
``request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)`` gets it again (same
correlation id, START only the first time), and the sequence ends when it is released without."""

from __future__ import annotations

import logging
import queue
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritonctl.serve.runtime import BackgroundServer, ServeOptions

# Triton's iterative_sequence model, its count kept per sequence: IN[0] responses, OUT = how many
# are left, rescheduled until the last. While a file ``hold`` lies beside its config, an execution
# that reschedules waits for it to go (the idle-timeout case).
ITERATIVE = '''
import time
from pathlib import Path
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.remaining = {}
        self.hold = Path(args["model_repository"]) / "hold"

    def execute(self, requests):
        for request in requests:
            cid = request.correlation_id()
            if request.flags() & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START or cid not in self.remaining:
                self.remaining[cid] = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            self.remaining[cid] -= 1
            sender = request.get_response_sender()
            out = pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([self.remaining[cid]], np.int32))])
            if self.remaining[cid] <= 0:
                del self.remaining[cid]
                sender.send(out, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            else:
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                sender.send(out)
                while self.hold.exists():  # the test holds the execution (idle-timeout case)
                    time.sleep(0.01)
        return None
'''

ITERATIVE_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
model_transaction_policy {{ decoupled: true }}
input [ {{ name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
{scheduling}
instance_group [ {{ kind: KIND_CPU }} ]
"""

# Triton's request_rescheduling_addsub: its first request is rescheduled once (None returned for it).
ADDSUB = '''
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.idx = 0

    def execute(self, requests):
        responses = []
        for request in requests:
            in_0 = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            in_1 = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            if self.idx == 0:
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                responses.append(None)
                self.idx += 1
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", in_0 + in_1),
                                                             pb_utils.Tensor("OUTPUT1", in_0 - in_1)]))
        return responses
'''

# Triton's wrong_return_type: reschedules every request yet returns a response for it.
WRONG_RETURN_TYPE = '''
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            out = pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy())
            request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
'''

PLAIN_CONFIG = """
name: "{name}"
backend: "python"
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }}, {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }}, {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] }} ]
sequence_batching {{ iterative_sequence: true }}
instance_group [ {{ kind: KIND_CPU }} ]
"""

ITERATIVE_MODELS = {
    "iterative_sequence": "sequence_batching { iterative_sequence: true }",
    "iterative_short_idle": "sequence_batching { iterative_sequence: true max_sequence_idle_microseconds: 100000 }",
    "not_iterative_direct": "sequence_batching { direct { } iterative_sequence: false }",
    "dynamic": "dynamic_batching { }",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory, transports):
    repo = tmp_path_factory.mktemp("iterative") / "repo"
    for name, scheduling in ITERATIVE_MODELS.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(ITERATIVE)
        (repo / name / "config.pbtxt").write_text(ITERATIVE_CONFIG.format(name=name, scheduling=scheduling))
    for name, source in (("request_rescheduling_addsub", ADDSUB), ("wrong_return_type", WRONG_RETURN_TYPE)):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(source)
        (repo / name / "config.pbtxt").write_text(PLAIN_CONFIG.format(name=name))
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, **transports)) as server:
        yield server


def stream(served, model: str, values: list[int], count: int, **sequence) -> list:
    """``count`` messages (OUT values, or error texts) of one stream with a request per value."""
    client = grpcclient.InferenceServerClient(served.grpc_url)
    received: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: received.put(
        error.message() if error is not None else int(result.as_numpy("OUT")[0])))
    try:
        for value in values:
            tensor = grpcclient.InferInput("IN", [1], "INT32")
            tensor.set_data_from_numpy(np.array([value], np.int32))
            client.async_stream_infer(model, [tensor], **sequence)
        return [received.get(timeout=10) for _ in range(count)]
    finally:
        client.stop_stream()


def test_a_rescheduled_request_runs_again_until_its_sequence_ends(served):
    assert stream(served, "iterative_sequence", [3], 3) == [2, 1, 0]


def test_sequences_waiting_for_the_slot_run_in_turn(served):
    # Triton's test_backlog_fill: four sequences on one stream, one slot; each answers 1 then 0
    assert stream(served, "iterative_sequence", [2, 2, 2, 2], 8) == [1, 0] * 4


@pytest.mark.parametrize("model,sequence", [("dynamic", {}),
                                            ("not_iterative_direct", {"sequence_id": 7, "sequence_start": True})])
def test_a_reschedule_where_the_scheduler_cannot_reschedule_fails_with_tritons_text(served, model, sequence):
    [first, error] = stream(served, model, [2], 2, **sequence)
    assert first == 1
    assert error.startswith("Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is "
                            "not configured to handle such a flag.")


def test_a_sequence_that_idled_out_cannot_be_rescheduled(served, caplog):
    caplog.set_level(logging.INFO, logger="tritonctl.serve")
    hold = served.runtime.options.repository / "iterative_short_idle" / "hold"
    hold.write_text("")
    client = grpcclient.InferenceServerClient(served.grpc_url)
    received: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: received.put(
        error.message() if error is not None else int(result.as_numpy("OUT")[0])))
    try:
        tensor = grpcclient.InferInput("IN", [1], "INT32")
        tensor.set_data_from_numpy(np.array([2], np.int32))
        client.async_stream_infer("iterative_short_idle", [tensor])
        assert received.get(timeout=10) == 1
        deadline = time.monotonic() + 10  # the execution is held until its sequence idled out
        while "was idle for max_sequence_idle_microseconds" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "sequence 13835058055282163712 of model 'iterative_short_idle' was idle" in caplog.text
        hold.unlink()
        assert "must specify the START flag on the first request of the sequence" in received.get(timeout=10)
    finally:
        client.stop_stream()


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_an_ordinary_model_answers_a_rescheduled_request_on_its_next_run(served, module):
    client = module.InferenceServerClient(served.http_url if module is httpclient else served.grpc_url)
    a, b = np.arange(16, dtype=np.float32), np.ones(16, np.float32)
    inputs = [module.InferInput("INPUT0", [16], "FP32"), module.InferInput("INPUT1", [16], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    result = client.infer("request_rescheduling_addsub", inputs)
    assert np.array_equal(result.as_numpy("OUTPUT0"), a + b) and np.array_equal(result.as_numpy("OUTPUT1"), a - b)


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_a_response_returned_for_a_rescheduled_request_is_an_error(served, module):
    client = module.InferenceServerClient(served.http_url if module is httpclient else served.grpc_url)
    inputs = [module.InferInput("INPUT0", [16], "FP32"), module.InferInput("INPUT1", [16], "FP32")]
    for tensor in inputs:
        tensor.set_data_from_numpy(np.zeros(16, np.float32))
    with pytest.raises(InferenceServerException) as raised:
        client.infer("wrong_return_type", inputs)
    assert "Expected a None object in the execute function return list for reschduled request" in str(raised.value)
