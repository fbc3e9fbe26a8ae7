"""BF16 tensors, which numpy has no type for. In Python models as qa/python_models/identity_bf16
uses them: ``as_numpy()`` refuses them in Triton's words and DLPack carries them to torch and
back, directly and through a BLS call, in stub processes and in the server's process. In ONNX
models (onnxruntime's bfloat16 tensors). The client sends and receives BF16 as the installed
tritonclient wants it: ml_dtypes' bfloat16 arrays (float32 ones before its r26.06 release)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import triton_to_np_dtype

from helpers.serve_models import write_python_model
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

pytest.importorskip("torch")
ml_dtypes = pytest.importorskip("ml_dtypes")

IDENTITY = '''
import numpy as np
import torch
import triton_python_backend_utils as pb_utils
from torch.utils.dlpack import from_dlpack, to_dlpack


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            try:
                tensor.as_numpy()
            except pb_utils.TritonModelException as exc:
                refused = str(exc)
            data = from_dlpack(tensor.to_dlpack())
            assert data.dtype == torch.bfloat16 and tensor.triton_dtype() == 14, (data.dtype, tensor.triton_dtype())
            out = pb_utils.Tensor.from_dlpack("OUTPUT0", to_dlpack(data * 2))
            refusal = pb_utils.Tensor("REFUSAL", np.array([[refused]] * len(data), object))
            responses.append(pb_utils.InferenceResponse([out, refusal]))
        return responses
'''

CALLER = '''
import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = torch.from_dlpack(pb_utils.get_input_tensor_by_name(request, "INPUT0")) + 1
            answer = pb_utils.InferenceRequest(
                model_name="identity_bf16", requested_output_names=["OUTPUT0"],
                inputs=[pb_utils.Tensor.from_dlpack("INPUT0", data)]).exec()
            if answer.has_error():
                raise pb_utils.TritonModelException(answer.error().message())
            doubled = pb_utils.get_output_tensor_by_name(answer, "OUTPUT0")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor.from_dlpack(
                "OUTPUT0", torch.from_dlpack(doubled) - 1)]))
        return responses
'''

CONFIG = '''
max_batch_size: 64
input [ { name: "INPUT0" data_type: TYPE_BF16 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_BF16 dims: [ -1 ] } ]
'''
REFUSAL = 'output [ { name: "REFUSAL" data_type: TYPE_STRING dims: [ 1 ] } ]\n'


def write_onnx_bf16(repo) -> None:
    """Y = X and Z = float(X), X and Y bfloat16 (onnxruntime's CPU kernels: Identity, Cast)."""
    (repo / "onnx_bf16" / "1").mkdir(parents=True)
    graph = helper.make_graph(
        [helper.make_node("Identity", ["X"], ["Y"]), helper.make_node("Cast", ["X"], ["Z"], to=TensorProto.FLOAT)],
        "bf16", [helper.make_tensor_value_info("X", TensorProto.BFLOAT16, [None, 3])],
        [helper.make_tensor_value_info("Y", TensorProto.BFLOAT16, [None, 3]),
         helper.make_tensor_value_info("Z", TensorProto.FLOAT, [None, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, str(repo / "onnx_bf16" / "1" / "model.onnx"))
    (repo / "onnx_bf16" / "config.pbtxt").write_text('backend: "onnxruntime"\nmax_batch_size: 8\n')


@pytest.fixture(scope="module", params=["process", "thread"])
def served(request, tmp_path_factory, transports):
    repo = tmp_path_factory.mktemp("bf16") / "repo"
    write_python_model(repo, "identity_bf16", CONFIG + REFUSAL, IDENTITY)
    write_python_model(repo, "caller", CONFIG, CALLER)
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, python_isolation=request.param,
                           **transports)
    with BackgroundServer(options) as server:
        yield server


@pytest.fixture(scope="module")
def onnx_served(tmp_path_factory, transports):
    repo = tmp_path_factory.mktemp("bf16_onnx") / "repo"
    write_onnx_bf16(repo)
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, **transports)) as server:
        yield server


def _infer(server, module, model: str, data: np.ndarray, outputs: list[str], name: str = "INPUT0"):
    client = module.InferenceServerClient(server.http_url if module is httpclient else server.grpc_url)
    tensor = module.InferInput(name, list(data.shape), "BF16")
    tensor.set_data_from_numpy(data.astype(triton_to_np_dtype("BF16")))
    return client.infer(model, [tensor], outputs=[module.InferRequestedOutput(name) for name in outputs])


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_bf16_reaches_torch_and_comes_back(served, module):
    data = np.array([[1.0, -2.5, 3.140625], [0.5, 1e-3, 1e4]], ml_dtypes.bfloat16)
    result = _infer(served, module, "identity_bf16", data, ["OUTPUT0", "REFUSAL"])
    output = result.get_output("OUTPUT0")
    assert (output["datatype"] if module is httpclient else output.datatype) == "BF16"
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0").astype(np.float32), data.astype(np.float32) * 2)
    assert result.as_numpy("REFUSAL")[0][0].decode() == (
        "Tensor dtype is BF16 and cannot be converted to NumPy. Use to_dlpack() and from_dlpack() instead.")


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_bf16_through_a_bls_call(served, module):
    data = np.array([[1.0, 2.0, 4.0]], ml_dtypes.bfloat16)
    result = _infer(served, module, "caller", data, ["OUTPUT0"])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0").astype(np.float32), (data.astype(np.float32) + 1) * 2 - 1)


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_an_onnx_model_takes_and_gives_bf16(onnx_served, module):
    """Auto-completed as TYPE_BF16, and served: before, onnxruntime was handed uint16 and refused it."""
    data = np.array([[1.0, -2.5, 3.140625], [0.5, 1e-3, 1e4]], ml_dtypes.bfloat16)
    result = _infer(onnx_served, module, "onnx_bf16", data, ["Y", "Z"], name="X")
    np.testing.assert_array_equal(result.as_numpy("Y").astype(np.float32), data.astype(np.float32))
    np.testing.assert_array_equal(result.as_numpy("Z"), data.astype(np.float32))
    only_fp32 = _infer(onnx_served, module, "onnx_bf16", data, ["Z"], name="X")  # no BF16 output asked for
    np.testing.assert_array_equal(only_fp32.as_numpy("Z"), data.astype(np.float32))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_perf_loads_a_bf16_model(onnx_served, protocol, tmp_path):
    """perf's generated data and its JSON input data hold BF16 inputs as tritonclient takes them."""
    from tritonctl.perf.options import PerfOptions
    from tritonctl.perf.run import run_perf

    fast = {"measurement_interval_ms": 120, "stability_percentage": 1000, "max_trials": 3}
    url = onnx_served.http_url if protocol == "http" else onnx_served.grpc_url
    data = tmp_path / "data.json"
    data.write_text('{"data": [{"X": [1.5, -2, 3.25]}]}')
    for input_data in ("random", str(data)):
        result = run_perf(PerfOptions("onnx_bf16", url=url, protocol=protocol, input_data=input_data, **fast))
        assert result.levels[0].error_count == 0 and result.total_sent == result.server_total.success_count > 0
