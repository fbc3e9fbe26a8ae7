"""What Triton's Python-backend QA models return and take, checked with the real clients in stub
processes and in the server's process: fixed-width bytes (np.bytes_) and empty BYTES outputs
(qa/python_models/string_fixed), outputs that are not contiguous (transposed, reordered:
non_contiguous) and optional inputs left out (optional)."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from helpers.serve_models import write_python_model
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

MODEL = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "B")
            b = np.array([7], np.int32) if b is None else b.as_numpy()
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("T", x.T), pb_utils.Tensor("R", np.transpose(x, [1, 0, 2])),
                pb_utils.Tensor("FIXED", np.array(["123456", "7"], dtype=np.bytes_)),
                pb_utils.Tensor("EMPTY", np.array([], dtype=np.object_)),
                pb_utils.Tensor("SUM", (x.sum() + b).astype(np.int32))]))
        return responses
'''
CONFIG = '''
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1, -1, -1 ] },
        { name: "B" data_type: TYPE_INT32 dims: [ 1 ] optional: true } ]
output [ { name: "T" data_type: TYPE_FP32 dims: [ -1, -1, -1 ] }, { name: "R" data_type: TYPE_FP32 dims: [ -1, -1, -1 ] },
         { name: "FIXED" data_type: TYPE_STRING dims: [ -1 ] }, { name: "EMPTY" data_type: TYPE_STRING dims: [ -1 ] },
         { name: "SUM" data_type: TYPE_INT32 dims: [ 1 ] } ]
'''


@pytest.fixture(scope="module", params=["process", "thread"])
def server(request, tmp_path_factory):
    repo = tmp_path_factory.mktemp("outputs")
    write_python_model(repo, "shapes", CONFIG, MODEL)
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, python_isolation=request.param)
    with BackgroundServer(options) as running:
        yield running


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
@pytest.mark.parametrize("with_b", [True, False])
@pytest.mark.parametrize("size", [(2, 3, 4), (64, 32, 40)], ids=["small", "past-inline"])
def test_outputs_as_the_model_made_them(server, module, with_b, size):
    client = module.InferenceServerClient(server.http_url if module is httpclient else server.grpc_url)
    x = np.random.default_rng(0).random(size, dtype=np.float32)
    inputs = [module.InferInput("X", list(size), "FP32")]
    inputs[0].set_data_from_numpy(x)
    if with_b:
        inputs.append(module.InferInput("B", [1], "INT32"))
        inputs[1].set_data_from_numpy(np.array([3], np.int32))
    result = client.infer("shapes", inputs)
    assert np.array_equal(result.as_numpy("T"), x.T) and np.array_equal(result.as_numpy("R"), x.transpose(1, 0, 2))
    assert result.as_numpy("FIXED").tolist() == [b"123456", b"7"] and result.as_numpy("EMPTY").shape == (0,)
    assert result.as_numpy("SUM").tolist() == [int(x.sum()) + (3 if with_b else 7)]
