"""Python models that hand tensors to torch and back through DLPack, as models written for
Triton's Python backend do (``torch.utils.dlpack.from_dlpack(tensor.to_dlpack())``,
``pb_utils.Tensor.from_dlpack``), in stub processes and in the server's process, called with the
real tritonclient."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from helpers.serve_models import write_python_model
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

pytest.importorskip("torch")

MODEL = '''
import numpy as np
import torch
import triton_python_backend_utils as pb_utils
from torch.utils.dlpack import from_dlpack, to_dlpack


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "IN")
            if tensor.as_numpy().sum() < 0:  # refusals the model turns into an error response
                try:
                    pb_utils.Tensor.from_dlpack("OUT", from_dlpack(tensor.to_dlpack()).t())
                except pb_utils.TritonModelException as exc:
                    responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))))
                continue
            doubled = from_dlpack(tensor.to_dlpack()) * 2       # a capsule, to torch and back
            plus_one = torch.from_dlpack(tensor) + 1            # the tensor's own __dlpack__
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor.from_dlpack("DOUBLED", to_dlpack(doubled)),
                pb_utils.Tensor.from_dlpack("PLUS_ONE", plus_one),
            ]))
        return responses
'''

CONFIG = '''
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "DOUBLED" data_type: TYPE_FP32 dims: [ 3 ] }, { name: "PLUS_ONE" data_type: TYPE_FP32 dims: [ 3 ] } ]
'''


@pytest.fixture(scope="module", params=["process", "thread"])
def served(request, tmp_path_factory, transports):
    repo: Path = tmp_path_factory.mktemp("dlpack") / "repo"
    write_python_model(repo, "torchy", CONFIG, MODEL)
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, python_isolation=request.param,
                           **transports)
    with BackgroundServer(options) as server:
        yield server


def _call(served, module, data: np.ndarray):
    client = module.InferenceServerClient(served.http_url if module is httpclient else served.grpc_url)
    tensor = module.InferInput("IN", list(data.shape), "FP32")
    tensor.set_data_from_numpy(data)
    return client.infer("torchy", [tensor])


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_tensors_go_to_torch_and_back_through_dlpack(served, module):
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    result = _call(served, module, data)
    assert np.array_equal(result.as_numpy("DOUBLED"), data * 2)
    assert np.array_equal(result.as_numpy("PLUS_ONE"), data + 1)


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_a_tensor_not_in_c_order_is_refused_with_tritons_text(served, module):
    with pytest.raises(InferenceServerException) as raised:
        _call(served, module, -np.ones((3, 3), np.float32))
    assert "DLPack tensor is not contiguous. Only contiguous DLPack tensors that are stored in C-Order are " \
           "supported." in raised.value.message()


# ---- tensors in GPU memory (the `gpu` marker): what Triton's GPU examples do --------------------
GPU_MODEL = '''
import torch
import triton_python_backend_utils as pb_utils
from torch.utils.dlpack import from_dlpack, to_dlpack


class TritonPythonModel:
    def initialize(self, args):
        self.device = torch.device(f"cuda:{args['model_instance_device_id']}")

    def execute(self, requests):
        responses = []
        for request in requests:
            data = from_dlpack(pb_utils.get_input_tensor_by_name(request, "IN").to_dlpack()).to(self.device)
            squared = pb_utils.Tensor.from_dlpack("SQUARED", to_dlpack(data * data))  # a capsule
            assert not squared.is_cpu()
            # a BLS request whose input is in GPU memory: torchy doubles it
            bls = pb_utils.InferenceRequest(model_name="torchy", requested_output_names=["DOUBLED"],
                                            inputs=[pb_utils.Tensor.from_dlpack("IN", data.contiguous())])
            answer = bls.exec()
            if answer.has_error():
                raise pb_utils.TritonModelException(answer.error().message())
            doubled = pb_utils.get_output_tensor_by_name(answer, "DOUBLED")
            responses.append(pb_utils.InferenceResponse([
                squared, pb_utils.Tensor.from_dlpack("PLUS_ONE", data + 1),  # a torch tensor on the GPU
                pb_utils.Tensor("DOUBLED", doubled.as_numpy())]))
        return responses
'''

GPU_CONFIG = CONFIG.replace("output [", 'output [ { name: "SQUARED" data_type: TYPE_FP32 dims: [ 3 ] },') + \
    "instance_group [ { kind: KIND_GPU count: 1 gpus: [ 0 ] } ]\n"


@pytest.mark.gpu
@pytest.mark.parametrize("isolation", ["process", "thread"])
def test_outputs_in_gpu_memory_reach_the_client(tmp_path, transports, isolation):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device and a CUDA build of torch")
    repo = tmp_path / "repo"
    write_python_model(repo, "torchy", CONFIG, MODEL)
    write_python_model(repo, "gpu_torchy", GPU_CONFIG, GPU_MODEL)
    data = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, python_isolation=isolation, **transports)
    with BackgroundServer(options) as server:
        for module in (httpclient, grpcclient):
            client = module.InferenceServerClient(server.http_url if module is httpclient else server.grpc_url)
            tensor = module.InferInput("IN", list(data.shape), "FP32")
            tensor.set_data_from_numpy(data)
            result = client.infer("gpu_torchy", [tensor])
            np.testing.assert_array_equal(result.as_numpy("SQUARED"), data * data)
            np.testing.assert_array_equal(result.as_numpy("PLUS_ONE"), data + 1)
            np.testing.assert_array_equal(result.as_numpy("DOUBLED"), data * 2)
