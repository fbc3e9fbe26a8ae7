"""Triton's L0_queue_timeout case (test_default_queue_policy_timeout_prompt_response): a request
queued behind a long execution is rejected when its queue-policy timeout passes, while the
instance is still busy, with Triton's status and text (UNAVAILABLE, "Request timeout expired")."""

from __future__ import annotations

import queue
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tritonctl.serve.runtime import BackgroundServer, ServeOptions

# Runs until the test writes "go" beside its config; notes that it started in "started".
BLOCKING = '''
import time
from pathlib import Path
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.dir = Path(args["model_repository"])

    def execute(self, requests):
        (self.dir / "started").write_text("")
        deadline = time.monotonic() + 30
        while not (self.dir / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return [pb_utils.InferenceResponse(
            [pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]) for r in requests]
'''

CONFIG = """
name: "dynamic_batch"
backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 8 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 8 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
dynamic_batching {
  max_queue_delay_microseconds: 0
  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 200000 }
}
"""


@pytest.fixture
def served(tmp_path, transports):
    model = tmp_path / "repo" / "dynamic_batch"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(BLOCKING)
    (model / "config.pbtxt").write_text(CONFIG)
    with BackgroundServer(ServeOptions(tmp_path / "repo", http_port=0, grpc_port=0, metrics_port=0,
                                       **transports)) as server:
        yield server, model


def inputs(module):
    tensor = module.InferInput("INPUT0", [1, 8], "FP32")
    tensor.set_data_from_numpy(np.ones([1, 8], np.float32))
    return [tensor]


def wait_for(path) -> None:
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert path.exists()


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_queued_request_times_out_while_the_instance_is_busy(served, protocol):
    server, model = served
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    running: queue.Queue = queue.Queue()
    grpc.async_infer("dynamic_batch", inputs(grpcclient), lambda result, error: running.put((result, error)))
    wait_for(model / "started")
    if protocol == "grpc":
        queued: queue.Queue = queue.Queue()
        grpc.async_infer("dynamic_batch", inputs(grpcclient), lambda result, error: queued.put((result, error)))
        result, error = queued.get(timeout=10)  # while the first request still runs
        assert result is None and error.status() == "StatusCode.UNAVAILABLE"
    else:
        http = httpclient.InferenceServerClient(server.http_url, connection_timeout=20, network_timeout=20)
        with pytest.raises(Exception) as caught:
            http.infer("dynamic_batch", inputs(httpclient))
        error = caught.value
        assert error.status() == "503"
    assert error.message() == "Request timeout expired"
    assert running.empty()  # the first request was still running when the second was rejected
    (model / "go").write_text("")
    result, error = running.get(timeout=10)
    assert error is None and result.as_numpy("OUTPUT0").tolist() == [[1.0] * 8]
    stats = grpc.get_inference_statistics("dynamic_batch", as_json=True)["model_stats"][0]["inference_stats"]
    assert stats["fail"]["count"] == "1" and stats["success"]["count"] == "1"
