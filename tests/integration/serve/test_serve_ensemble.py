"""Ensembles over the example Python model, an ONNX model and a Python model that refuses
negative input, called with the real tritonclient."""

from __future__ import annotations

import shutil
import urllib.request
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

# S = A + B, then T = S + S; S is also an ensemble output
FAN = """
platform: "ensemble"
max_batch_size: 8
input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "S" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "T" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling { step [
  { model_name: "add_sub" model_version: -1 input_map { key: "INPUT0" value: "A" }
    input_map { key: "INPUT1" value: "B" } output_map { key: "OUTPUT0" value: "S" } },
  { model_name: "add_sub_onnx" model_version: -1 input_map { key: "INPUT0" value: "S" }
    input_map { key: "INPUT1" value: "S" } output_map { key: "OUTPUT0" value: "T" } }
] }
"""
PICKY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if (x < 0).any():
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("negative input")))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x)]))
        return responses
"""
PICKY_CONFIG = """
backend: "python"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


def single_step(model: str, source: str, target: str, step_input: str, step_output: str) -> str:
    return f"""
platform: "ensemble"
max_batch_size: 8
input [ {{ name: "{source}" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "{target}" data_type: TYPE_FP32 dims: [ 4 ] }} ]
ensemble_scheduling {{ step [ {{ model_name: "{model}" model_version: -1
  input_map {{ key: "{step_input}" value: "{source}" }} output_map {{ key: "{step_output}" value: "{target}" }} }} ] }}
"""


def write_config(repo: Path, name: str, config: str) -> Path:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(config)
    return repo / name


@pytest.fixture(scope="module")
def served(tmp_path_factory, transports):
    repo = tmp_path_factory.mktemp("ensemble") / "repo"
    shutil.copytree(EXAMPLES, repo)
    write_add_sub(repo, "add_sub_onnx", extra="dynamic_batching { }")
    write_config(repo, "chain", ENSEMBLE)
    write_config(repo, "fan", FAN)
    (write_config(repo, "picky", PICKY_CONFIG) / "1" / "model.py").write_text(PICKY)
    write_config(repo, "guarded", single_step("picky", "IN", "OUT", "X", "Y"))
    write_config(repo, "outer", single_step("guarded", "X", "Y", "IN", "OUT"))
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


def client_for(served, module):
    return module.InferenceServerClient(served.http_url if module is httpclient else served.grpc_url)


def fp32_inputs(module, values: dict[str, np.ndarray]) -> list:
    tensors = []
    for name, data in values.items():
        tensor = module.InferInput(name, list(data.shape), "FP32")
        tensor.set_data_from_numpy(data)
        tensors.append(tensor)
    return tensors


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_an_output_left_out_that_a_step_consumes_is_still_made(served, module):
    """T needs S: asked for T alone, the step making S runs (Triton's pruning would drop it and
    answer 'unexpected deadlock'; the server's log says so)."""
    client = client_for(served, module)
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    tensors = fp32_inputs(module, {"A": a, "B": a})
    both = client.infer("fan", tensors)
    assert np.array_equal(both.as_numpy("T"), 4 * a) and np.array_equal(both.as_numpy("S"), 2 * a)
    only = client.infer("fan", tensors, outputs=[module.InferRequestedOutput("T")])
    assert np.array_equal(only.as_numpy("T"), 4 * a) and only.as_numpy("S") is None


def test_a_failing_step_answers_its_error_under_each_ensembles_prefix_and_counts_twice(served):
    client = httpclient.InferenceServerClient(served.http_url)
    x = np.array([[1, -2, 3, 4]], np.float32)
    with pytest.raises(InferenceServerException) as raised:
        client.infer("outer", fp32_inputs(httpclient, {"X": x}))
    assert raised.value.status() == "500"
    assert raised.value.message() == "in ensemble 'outer', in ensemble 'guarded', negative input"
    ok = client.infer("outer", fp32_inputs(httpclient, {"X": x * x}))
    assert np.array_equal(ok.as_numpy("Y"), x * x)
    for name in ("outer", "guarded"):
        stats = client.get_inference_statistics(name)["model_stats"][0]
        assert stats["inference_stats"]["fail"]["count"] == 2, name
        assert stats["inference_stats"]["success"]["count"] == 1, name
        assert stats["inference_count"] == stats["execution_count"] == 1, name
    metrics = urllib.request.urlopen(served.metrics_url, timeout=10).read().decode()
    assert 'nv_inference_request_failure{model="outer",reason="OTHER",version="1"} 2' in metrics
