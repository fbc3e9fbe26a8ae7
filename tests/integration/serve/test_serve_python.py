"""The repository's example Python-backend model, served and called with the real tritonclient."""

from __future__ import annotations

import shutil
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


@pytest.fixture(scope="module")
def served(tmp_path_factory, transports):
    repo = tmp_path_factory.mktemp("python") / "repo"
    shutil.copytree(EXAMPLES, repo)
    shutil.copytree(repo / "add_sub", repo / "raising")
    (repo / "raising" / "1" / "model.py").write_text(RAISING)
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
