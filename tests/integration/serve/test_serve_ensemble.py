"""An ensemble over the example Python model and an ONNX model, called with the real tritonclient."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritonctl.serve.runtime import BackgroundServer, ServeOptions

from helpers.serve_models import write_add_sub

EXAMPLES = Path(__file__).parents[3] / "examples" / "model_repository"
# S = A + B (Python add_sub), then T = S + S and U = S - S (ONNX add_sub_onnx)
ENSEMBLE = """
platform: "ensemble"
max_batch_size: 8
input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "T" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "U" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling { step [
  { model_name: "add_sub" model_version: -1 input_map { key: "INPUT0" value: "A" }
    input_map { key: "INPUT1" value: "B" } output_map { key: "OUTPUT0" value: "S" } },
  { model_name: "add_sub_onnx" model_version: -1 input_map { key: "INPUT0" value: "S" }
    input_map { key: "INPUT1" value: "S" } output_map { key: "OUTPUT0" value: "T" }
    output_map { key: "OUTPUT1" value: "U" } }
] }
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory, transports):
    repo = tmp_path_factory.mktemp("ensemble") / "repo"
    shutil.copytree(EXAMPLES, repo)
    write_add_sub(repo, "add_sub_onnx", extra="dynamic_batching { }")
    (repo / "chain" / "1").mkdir(parents=True)
    (repo / "chain" / "config.pbtxt").write_text(ENSEMBLE)
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, **transports)) as server:
        yield server


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_ensemble_answers_with_the_requested_outputs(served, module):
    client = module.InferenceServerClient(served.http_url if module is httpclient else served.grpc_url)
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.ones((2, 4), np.float32)
    tensors = [module.InferInput("A", [2, 4], "FP32"), module.InferInput("B", [2, 4], "FP32")]
    tensors[0].set_data_from_numpy(a)
    tensors[1].set_data_from_numpy(b)
    assert client.is_model_ready("chain")
    result = client.infer("chain", tensors, outputs=[module.InferRequestedOutput("T")])
    assert np.array_equal(result.as_numpy("T"), 2 * (a + b)) and result.as_numpy("U") is None
    both = client.infer("chain", tensors)
    assert np.array_equal(both.as_numpy("U"), np.zeros((2, 4), np.float32))
    with pytest.raises(InferenceServerException) as raised:
        client.infer("chain", tensors, outputs=[module.InferRequestedOutput("S")])
    assert "unexpected inference output 'S' for model 'chain'" in str(raised.value)
