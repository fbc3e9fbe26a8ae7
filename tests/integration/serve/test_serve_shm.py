"""The shared-memory extensions through the real tritonclient (HTTP and gRPC) and its
tritonclient.utils.shared_memory regions: registration, status, inference with inputs read
from and outputs written into the regions, Triton's errors, CUDA shared memory without a GPU."""

from __future__ import annotations

import base64
import concurrent.futures
import gc
import http.client
import importlib
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tritonctl.serve.runtime import BackgroundServer, ServeOptions

TRANSPORTS = ["http", "grpc"]
A = np.arange(8, dtype=np.float32).reshape(2, 4)
B = np.full((2, 4), 10, dtype=np.float32)
TENSOR_BYTES = A.nbytes  # 32


@pytest.fixture(scope="module")
def clients(served):
    both = {"http": httpclient.InferenceServerClient(served.http_url),
            "grpc": grpcclient.InferenceServerClient(served.grpc_url)}
    yield both
    for client in both.values():
        client.close()


@pytest.fixture
def regions(clients):
    """Two client regions, 'in' (holding A then B) and 'out', registered under unique names;
    everything is unregistered and destroyed afterwards."""
    tag = uuid.uuid4().hex[:8]
    made = {}
    for role in ("in", "out"):
        made[role] = shm.create_shared_memory_region(f"{role}_{tag}", f"/tctl_test_{role}_{tag}", 2 * TENSOR_BYTES)
    shm.set_shared_memory_region(made["in"], [A, B])
    yield {role: (f"{role}_{tag}", f"/tctl_test_{role}_{tag}", handle) for role, handle in made.items()}
    clients["http"].unregister_system_shared_memory()
    for handle in made.values():
        shm.destroy_shared_memory_region(handle)


def module_of(transport: str):
    return httpclient if transport == "http" else grpcclient


def register_both(client, regions) -> tuple[str, str]:
    (in_name, in_key, _), (out_name, out_key, _) = regions["in"], regions["out"]
    client.register_system_shared_memory(in_name, in_key, 2 * TENSOR_BYTES)
    client.register_system_shared_memory(out_name, out_key, 2 * TENSOR_BYTES)
    return in_name, out_name


def shm_request(transport: str, in_name: str, out_name: str, in_size: int = TENSOR_BYTES, in_offset: int = 0,
                out_size: int = TENSOR_BYTES, out_region: str | None = None):
    """INPUT0 at in_offset and INPUT1 right after it in 'in'; OUTPUT0 then OUTPUT1 in 'out'."""
    module = module_of(transport)
    inputs = [module.InferInput("INPUT0", [2, 4], "FP32"), module.InferInput("INPUT1", [2, 4], "FP32")]
    inputs[0].set_shared_memory(in_name, in_size, offset=in_offset)
    inputs[1].set_shared_memory(in_name, TENSOR_BYTES, offset=TENSOR_BYTES)
    outputs = [module.InferRequestedOutput("OUTPUT0"), module.InferRequestedOutput("OUTPUT1")]
    outputs[0].set_shared_memory(out_region or out_name, out_size)
    outputs[1].set_shared_memory(out_name, TENSOR_BYTES, offset=TENSOR_BYTES)
    return inputs, outputs


def failure(call) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as caught:
        call()
    return caught.value


def status_code(error: InferenceServerException, transport: str, http: str, grpc_code: str) -> bool:
    return error.status() == (http if transport == "http" else f"StatusCode.{grpc_code}")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_register_status_and_unregister(clients, regions, transport):
    client = clients[transport]
    in_name, out_name = register_both(client, regions)
    in_key = regions["in"][1]
    expected = {"name": in_name, "key": in_key, "offset": 0, "byte_size": 2 * TENSOR_BYTES}
    if transport == "http":
        assert expected in client.get_system_shared_memory_status()
        assert client.get_system_shared_memory_status(in_name) == [expected]
    else:
        status = client.get_system_shared_memory_status(as_json=True)["regions"]
        assert status[in_name] == {"name": in_name, "key": in_key, "byte_size": str(2 * TENSOR_BYTES)}
        assert set(client.get_system_shared_memory_status(in_name).regions) == {in_name}
    client.unregister_system_shared_memory(in_name)
    names = [r["name"] for r in clients["http"].get_system_shared_memory_status()]
    assert in_name not in names and out_name in names
    client.unregister_system_shared_memory()  # every region
    assert clients["http"].get_system_shared_memory_status() == []
    client.unregister_system_shared_memory("never-registered")  # not an error, as in Triton


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_inputs_and_outputs_in_shared_memory(clients, regions, transport):
    client = clients[transport]
    in_name, out_name = register_both(client, regions)
    inputs, outputs = shm_request(transport, in_name, out_name)
    result = client.infer("add_sub", inputs, outputs=outputs)
    out_handle = regions["out"][2]
    assert np.array_equal(shm.get_contents_as_numpy(out_handle, np.float32, [2, 4]), A + B)
    assert np.array_equal(shm.get_contents_as_numpy(out_handle, np.float32, [2, 4], offset=TENSOR_BYTES), A - B)
    if transport == "http":  # Triton's shape: no data and no parameters for an output in shared memory
        assert result.get_response()["outputs"] == [{"name": "OUTPUT0", "datatype": "FP32", "shape": [2, 4]},
                                                     {"name": "OUTPUT1", "datatype": "FP32", "shape": [2, 4]}]
    else:  # one empty raw entry per output
        response = result.get_response()
        assert [o.name for o in response.outputs] == ["OUTPUT0", "OUTPUT1"]
        assert list(response.outputs[0].shape) == [2, 4] and list(response.raw_output_contents) == [b"", b""]
    # the region is read anew for each request: new input values, new results
    shm.set_shared_memory_region(regions["in"][2], [B, A])
    client.infer("add_sub", inputs, outputs=outputs)
    assert np.array_equal(shm.get_contents_as_numpy(out_handle, np.float32, [2, 4], offset=TENSOR_BYTES), B - A)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_shared_memory_mixed_with_tensor_data(clients, regions, transport):
    """One input from a region, the other sent in the request, every output returned as data."""
    client = clients[transport]
    in_name, _ = register_both(client, regions)
    module = module_of(transport)
    inputs = [module.InferInput("INPUT0", [2, 4], "FP32"), module.InferInput("INPUT1", [2, 4], "FP32")]
    inputs[0].set_shared_memory(in_name, TENSOR_BYTES, offset=TENSOR_BYTES)  # B
    inputs[1].set_data_from_numpy(A)
    result = client.infer("add_sub", inputs)
    assert np.array_equal(result.as_numpy("OUTPUT0"), A + B) and np.array_equal(result.as_numpy("OUTPUT1"), B - A)


def test_region_registered_at_an_offset_of_its_object(clients, regions):
    """A region is a window of the shared-memory object: its offsets count from the window's start."""
    _, in_key, _ = regions["in"]
    client = clients["http"]
    client.register_system_shared_memory("window", in_key, TENSOR_BYTES, offset=TENSOR_BYTES)  # holds B
    out_name = regions["out"][0]
    client.register_system_shared_memory(out_name, regions["out"][1], 2 * TENSOR_BYTES)
    inputs = [httpclient.InferInput("INPUT0", [2, 4], "FP32"), httpclient.InferInput("INPUT1", [2, 4], "FP32")]
    inputs[0].set_shared_memory("window", TENSOR_BYTES)
    inputs[1].set_shared_memory("window", TENSOR_BYTES)
    output = httpclient.InferRequestedOutput("OUTPUT0")
    output.set_shared_memory(out_name, TENSOR_BYTES, offset=8)  # an offset no page boundary needs
    client.infer("add_sub", inputs, outputs=[output])
    assert np.array_equal(shm.get_contents_as_numpy(regions["out"][2], np.float32, [2, 4], offset=8), B + B)
    assert client.get_system_shared_memory_status("window") == [
        {"name": "window", "key": in_key, "offset": TENSOR_BYTES, "byte_size": TENSOR_BYTES}]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_registration_errors(clients, regions, transport):
    client = clients[transport]
    in_name, _ = register_both(client, regions)
    in_key = regions["in"][1]
    error = failure(lambda: client.register_system_shared_memory(in_name, in_key, 8))
    assert status_code(error, transport, "400", "ALREADY_EXISTS")
    assert error.message() == f"shared memory region '{in_name}' already in manager"
    error = failure(lambda: client.register_system_shared_memory("x", "/tctl_no_such_key", 8))
    assert status_code(error, transport, "500", "INTERNAL")
    assert error.message() == "Unable to open shared memory region: '/tctl_no_such_key'"
    error = failure(lambda: client.register_system_shared_memory("x", in_key, 2 * TENSOR_BYTES, offset=8))
    assert status_code(error, transport, "400", "INVALID_ARGUMENT")
    assert error.message() == "failed to register shared memory region 'x': invalid args"
    error = failure(lambda: client.get_system_shared_memory_status("nope"))
    assert status_code(error, transport, "404", "NOT_FOUND")
    assert error.message() == "Unable to find system shared memory region: 'nope'"
    error = failure(lambda: client.get_cuda_shared_memory_status(in_name))
    assert error.message() == (f"The region named '{in_name}' is registered as system shared memory, not CUDA "
                               "shared memory")


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("case,http_status,grpc_code,text", [
    ("unknown region", "404", "NOT_FOUND", "Unable to find shared memory region: 'nope'"),
    ("offset past the region", "400", "INVALID_ARGUMENT", "Invalid offset for shared memory region: '{in}'"),
    ("bytes past the region", "400", "INVALID_ARGUMENT", "Invalid offset + byte size for shared memory region: "
                                                         "'{in}'"),
    ("byte size mismatch", "400", "INVALID_ARGUMENT", "[request id: <id_unknown>] input byte size mismatch for "
                                                      "input 'INPUT0' for model 'add_sub'. Expected 32, got 28"),
    ("output region too small", "500", "INTERNAL", "shared memory size specified with the request for output "
                                                   "'OUTPUT0' (8 bytes) should be at least 32 bytes to hold the "
                                                   "results"),
    ("unknown output region", "404", "NOT_FOUND", "Unable to find shared memory region: 'nope'"),
])
def test_inference_errors(clients, regions, transport, case, http_status, grpc_code, text):
    client = clients[transport]
    in_name, out_name = register_both(client, regions)
    request = {"unknown region": dict(in_name="nope"), "offset past the region": dict(in_offset=2 * TENSOR_BYTES),
               "bytes past the region": dict(in_offset=TENSOR_BYTES + 4),
               "byte size mismatch": dict(in_size=TENSOR_BYTES - 4), "output region too small": dict(out_size=8),
               "unknown output region": dict(out_region="nope")}[case]
    inputs, outputs = shm_request(transport, **{"in_name": in_name, "out_name": out_name, **request})
    error = failure(lambda: client.infer("add_sub", inputs, outputs=outputs))
    assert status_code(error, transport, http_status, grpc_code)
    assert error.message() == text.format(**{"in": in_name})


def raw(served, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    host, port = served.http_url.split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request(method, path, body=body)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def post(served, path: str, doc) -> tuple[int, dict]:
    status, body = raw(served, "POST", path, json.dumps(doc).encode())
    return status, json.loads(body) if body else {}


def test_http_request_checks_in_triton_words(served, clients, regions):
    in_name, out_name = register_both(clients["http"], regions)
    tensor = {"name": "INPUT1", "shape": [2, 4], "datatype": "FP32", "data": B.ravel().tolist()}
    in_shm = {"shared_memory_region": in_name, "shared_memory_byte_size": TENSOR_BYTES}

    def infer(first: dict, outputs=None):
        doc = {"inputs": [{"name": "INPUT0", "shape": [2, 4], "datatype": "FP32", **first}, tensor]}
        if outputs is not None:
            doc["outputs"] = outputs
        return post(served, "/v2/models/add_sub/infer", doc)

    prefix = ("Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
              "'shared_memory_region' in 'parameters'. But")
    assert infer({"data": A.ravel().tolist(), "parameters": in_shm}) == (
        400, {"error": f"{prefix} set 'data' 'shared_memory_region'"})
    assert infer({}) == (400, {"error": f"{prefix} no field is set"})
    assert infer({"parameters": {"shared_memory_region": in_name}}) == (400, {"error": (
        "'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter for tensor "
        "'INPUT0'")})
    assert infer({"parameters": {**in_shm, "shared_memory_offset": "8"}}) == (
        400, {"error": "Unable to parse 'shared_memory_offset'"})
    out_shm = {"shared_memory_region": out_name, "shared_memory_byte_size": TENSOR_BYTES}
    for extra, word in (({"classification": 1}, "classification"), ({"binary_data": True}, "binary_data")):
        assert infer({"parameters": in_shm}, [{"name": "OUTPUT0", "parameters": {**out_shm, **extra}}]) == (
            400, {"error": f"Output can't set both 'shared_memory_region' and '{word}'"})
    status, body = infer({"parameters": in_shm}, [{"name": "OUTPUT1", "parameters": out_shm}])
    assert status == 200 and body["outputs"] == [{"name": "OUTPUT1", "datatype": "FP32", "shape": [2, 4]}]
    assert np.array_equal(shm.get_contents_as_numpy(regions["out"][2], np.float32, [2, 4]), A - B)


def test_http_register_checks_in_triton_words(served, regions):
    key = regions["in"][1]
    assert post(served, "/v2/systemsharedmemory/register", {"key": key, "byte_size": 8}) == (
        400, {"error": "'region name' is necessary to register system shared memory region"})
    assert post(served, "/v2/systemsharedmemory/region/q/register", {"byte_size": 8}) == (
        400, {"error": "Shared memory register request has no 'key' field"})
    assert post(served, "/v2/systemsharedmemory/region/q/register", {"key": key}) == (
        400, {"error": "Shared memory register request has no 'byte_size' field"})
    assert post(served, "/v2/systemsharedmemory/region/q/register", {"key": key, "byte_size": 0}) == (
        400, {"error": "failed to register shared memory region 'q': unable to process address spaceInvalid argument"})
    assert post(served, "/v2/systemsharedmemory/region/q/register", {"key": key, "byte_size": -1}) == (
        400, {"error": "Shared memory register request has an invalid 'byte_size' field: expected unsigned integer, "
                       "got -1"})
    assert raw(served, "POST", "/v2/systemsharedmemory/status")[0] == 405
    assert raw(served, "GET", "/v2/systemsharedmemory/region/q/register")[0] == 405
    assert raw(served, "GET", "/v2/systemsharedmemory/region/q/other")[0] == 404


def test_grpc_parameter_types_in_triton_words(served, clients, regions):
    """What tritonclient never sends: a region given with a wrongly typed offset, content beside a region."""
    in_name, _ = register_both(clients["grpc"], regions)
    request = service_pb2.ModelInferRequest(model_name="add_sub")
    first = request.inputs.add(name="INPUT0", datatype="FP32", shape=[2, 4])
    first.parameters["shared_memory_region"].string_param = in_name
    first.parameters["shared_memory_byte_size"].int64_param = TENSOR_BYTES
    first.parameters["shared_memory_offset"].uint64_param = 0
    request.inputs.add(name="INPUT1", datatype="FP32", shape=[2, 4])
    request.raw_input_contents.append(B.tobytes())
    with grpc.insecure_channel(served.grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.ModelInfer(request, timeout=10)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert caught.value.details() == ("invalid value type for 'shared_memory_offset' parameter for tensor "
                                          "'INPUT0', expected int64_param.")
        first.parameters["shared_memory_offset"].int64_param = 0
        first.contents.fp32_contents.extend([0.0] * 8)
        with pytest.raises(grpc.RpcError) as caught:
            stub.ModelInfer(request, timeout=10)
        assert caught.value.details() == ("unexpected 'content' provided when using shared memory for input tensor "
                                          "'INPUT0' for model 'add_sub'")
        first.ClearField("contents")
        response = stub.ModelInfer(request, timeout=10)  # one raw content: the input not in shared memory
        assert np.array_equal(np.frombuffer(response.raw_output_contents[0], np.float32).reshape(2, 4), A + B)


def cuda_usable(served) -> bool:
    return served.runtime.server.shm.cuda_supported()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_cuda_shared_memory_without_a_gpu(served, clients, transport):
    if cuda_usable(served):
        pytest.skip("a GPU is usable here; the GPU path is test_cuda_shared_memory_round_trip")
    client = clients[transport]
    handle = base64.b64encode(bytes(64))
    error = failure(lambda: client.register_cuda_shared_memory(
        "cuda0", handle.decode() if transport == "http" else handle, 0, 64))
    assert status_code(error, transport, "400", "INVALID_ARGUMENT")
    assert error.message() == "failed to register CUDA shared memory region: 'cuda0', GPUs not supported"
    status = client.get_cuda_shared_memory_status() if transport == "http" else \
        client.get_cuda_shared_memory_status(as_json=True)
    assert status in ([], {})
    client.unregister_cuda_shared_memory("cuda0")
    client.unregister_cuda_shared_memory()


CUDA_CLIENT = """
import json, sys
import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.cuda_shared_memory as cudashm

http_url, grpc_url = sys.argv[1:3]
a = np.arange(8, dtype=np.float32).reshape(2, 4)
b = np.full((2, 4), 10, dtype=np.float32)
size = 2 * a.nbytes
report = {}
for module, url in ((httpclient, http_url), (grpcclient, grpc_url)):
    client = module.InferenceServerClient(url)
    regions = {name: cudashm.create_shared_memory_region(name, size, 0) for name in ("cuda_in", "cuda_out")}
    try:
        cudashm.set_shared_memory_region(regions["cuda_in"], [a, b])
        for name, region in regions.items():
            client.register_cuda_shared_memory(name, cudashm.get_raw_handle(region), 0, size)
        status = client.get_cuda_shared_memory_status()
        names = sorted(r["name"] for r in status) if isinstance(status, list) else sorted(status.regions)
        inputs = [module.InferInput("INPUT0", [2, 4], "FP32"), module.InferInput("INPUT1", [2, 4], "FP32")]
        outputs = [module.InferRequestedOutput("OUTPUT0"), module.InferRequestedOutput("OUTPUT1")]
        for k, tensor in enumerate(inputs):
            tensor.set_shared_memory("cuda_in", a.nbytes, offset=k * a.nbytes)
        for k, tensor in enumerate(outputs):
            tensor.set_shared_memory("cuda_out", a.nbytes, offset=k * a.nbytes)
        client.infer("add_sub", inputs, outputs=outputs)
        out0 = cudashm.get_contents_as_numpy(regions["cuda_out"], np.float32, [2, 4])
        client.unregister_cuda_shared_memory()
        after = client.get_cuda_shared_memory_status()
        report[module.__name__] = {"registered": names, "sum_ok": bool(np.array_equal(out0, a + b)),
                                   "after": len(after) if isinstance(after, list) else len(after.regions)}
    finally:
        for region in regions.values():
            cudashm.destroy_shared_memory_region(region)
        client.close()
print(json.dumps(report))
"""


@pytest.mark.gpu
def test_cuda_shared_memory_round_trip(served):
    """The client's regions live in device memory of another process, as CUDA IPC requires (a
    handle cannot be opened in the process that exported it): registered over both protocols,
    inputs read from and outputs written into them, then unregistered."""
    try:  # tritonclient raises RuntimeError, not ImportError, when cuda-python is missing
        importlib.import_module("tritonclient.utils.cuda_shared_memory")
    except (ImportError, RuntimeError) as exc:
        pytest.skip(f"no CUDA shared-memory client here: {exc}")
    if not cuda_usable(served):
        pytest.skip("no usable GPU (or no cuda-python) on this machine")
    done = subprocess.run([sys.executable, "-c", CUDA_CLIENT, served.http_url, served.grpc_url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for protocol in ("tritonclient.http", "tritonclient.grpc"):
        assert report[protocol] == {"registered": ["cuda_in", "cuda_out"], "sum_ok": True, "after": 0}


def mappings(key: str) -> int:
    """How many times this process maps the shared-memory object ``key``: the test's client
    holds one mapping, the server (running in this process) one per registered region."""
    return Path("/proc/self/maps").read_text().count(f"/dev/shm/{key.lstrip('/')}")


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc (Linux)")
def test_unregister_and_stop_release_the_mappings(tmp_path, regions, transports):
    (tmp_path / "repo").mkdir()
    (in_name, in_key, _), (out_name, out_key, _) = regions["in"], regions["out"]
    assert mappings(in_key) == mappings(out_key) == 1
    server = BackgroundServer(ServeOptions(tmp_path / "repo", http_port=0, grpc_port=0, metrics_port=None,
                                           exit_timeout_secs=2, **transports)).start()
    try:
        client = httpclient.InferenceServerClient(server.http_url)
        client.register_system_shared_memory(in_name, in_key, 2 * TENSOR_BYTES)
        client.register_system_shared_memory(out_name, out_key, 2 * TENSOR_BYTES)
        assert mappings(in_key) == mappings(out_key) == 2
        client.unregister_system_shared_memory(in_name)
        assert mappings(in_key) == 1 and mappings(out_key) == 2
        client.close()
    finally:
        server.stop()
    assert mappings(out_key) == 1


GATED_MODEL_PY = """\
import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.dir = args["model_repository"]

    def execute(self, requests):
        open(os.path.join(self.dir, "started"), "w").close()
        while not os.path.exists(os.path.join(self.dir, "go")):
            time.sleep(0.01)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(
            request, "INPUT0").as_numpy())]) for request in requests]
"""


def wait_for(path: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout_s} s"
        time.sleep(0.01)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_unregister_while_a_request_uses_the_regions(tmp_path, regions, transports, transport):
    """Triton (after 2.51, L0_shared_memory's TestSharedMemoryUnregister): unregistering a region
    that a request in flight reads or writes succeeds, the region stays registered (listed, its
    name taken) until the request's outputs are written, and goes before its answer arrives; a
    request that starts meanwhile may still use it. Triton 2.51 refused the unregister instead."""
    model = tmp_path / "repo" / "gated"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(GATED_MODEL_PY)
    (model / "config.pbtxt").write_text('name: "gated"\nbackend: "python"\nmax_batch_size: 0\n'
                                        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 2, 4 ] } ]\n'
                                        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2, 4 ] } ]\n')
    server = BackgroundServer(ServeOptions(tmp_path / "repo", http_port=0, grpc_port=0, metrics_port=None,
                                           exit_timeout_secs=5, **transports)).start()
    module = module_of(transport)
    url = server.http_url if transport == "http" else server.grpc_url
    status_client = httpclient.InferenceServerClient(server.http_url)
    client, infer_client = module.InferenceServerClient(url), module.InferenceServerClient(url)
    try:
        in_name, out_name = register_both(client, regions)
        inputs = [module.InferInput("INPUT0", [2, 4], "FP32")]
        inputs[0].set_shared_memory(in_name, TENSOR_BYTES)
        outputs = [module.InferRequestedOutput("OUTPUT0")]
        outputs[0].set_shared_memory(out_name, TENSOR_BYTES)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            answer = pool.submit(infer_client.infer, "gated", inputs, outputs=outputs)
            try:
                wait_for(model / "started")
                client.unregister_system_shared_memory()  # every region: both are in use
                client.unregister_system_shared_memory(in_name)
                assert sorted(r["name"] for r in status_client.get_system_shared_memory_status()) == sorted(
                    [in_name, out_name])
                error = failure(lambda: client.register_system_shared_memory(in_name, regions["in"][1],
                                                                             TENSOR_BYTES))
                assert f"shared memory region '{in_name}' already in manager" in error.message()
                # a request refused while decoding, after naming a region, does not keep it
                refused = [module.InferRequestedOutput("OUTPUT0")]
                refused[0].set_shared_memory("never-registered", TENSOR_BYTES)
                error = failure(lambda: client.infer("gated", inputs, outputs=refused))
                assert error.message() == "Unable to find shared memory region: 'never-registered'"
            finally:
                (model / "go").touch()  # the model answers, whatever happened above
            answer.result(timeout=60)
        gc.collect()  # the refused request is gone (its finalizer lets go of what it held)
        assert np.array_equal(shm.get_contents_as_numpy(regions["out"][2], np.float32, [2, 4]), A)
        assert status_client.get_system_shared_memory_status() == []
        error = failure(lambda: status_client.get_system_shared_memory_status(in_name))
        assert error.message() == f"Unable to find system shared memory region: '{in_name}'"
        client.register_system_shared_memory(in_name, regions["in"][1], TENSOR_BYTES)  # the name is free again
    finally:
        for each in (status_client, client, infer_client):
            each.close()
        server.stop()
