"""The cases of Triton's own PyTorch QA suites that run on a CPU, their models made here as the
suites' generators make them: ``qa/L0_libtorch_inference_mode`` and
``qa/L0_libtorch_optimized_execution`` (a three-version add/sub model, each parameter logged once
per version), ``qa/L0_libtorch_shared_weights`` (16 instances, 15 of them reusing the first one's
module), ``qa/L0_libtorch_io_types`` (the types the backend refuses, in its words) and
``qa/L0_libtorch_instance_group_kind_model`` (a KIND_MODEL instance whose model moves its inputs
itself). ``qa/L0_libtorch_io_names`` is test_serve_pytorch_io_names.py."""

from __future__ import annotations

import logging
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from google.protobuf import text_format

from tritonctl.repo_schema.schema import model_config_pb2
from tritonctl.serve.core.model import instance_specs
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

torch = pytest.importorskip("torch")


class AddSub(torch.nn.Module):
    """gen_qa_models.py's libtorch add/sub model: version 1 returns (sum, difference), the later
    versions (``swap``) (difference, sum)."""

    def __init__(self, swap: bool):
        super().__init__()
        self.swap = swap

    def forward(self, INPUT0, INPUT1):  # noqa: N803 - the generator's argument names
        total, difference = INPUT0 + INPUT1, INPUT0 - INPUT1
        return (difference, total) if self.swap else (total, difference)


class Identity(torch.nn.Module):
    def forward(self, x):
        return x


class Sequence(torch.nn.Module):
    """The generator's libtorch sequence model: forward(input, START, READY)."""

    def forward(self, input0, start0, ready0):
        return (input0 + start0) * ready0


class SumModule(torch.nn.Module):
    def __init__(self, device: str):
        super().__init__()
        self.device = device

    def forward(self, INPUT0, INPUT1):  # noqa: N803
        INPUT0, INPUT1 = INPUT0.to(self.device), INPUT1.to(self.device)
        print("SumModule - INPUT0 device: {}, INPUT1 device: {}\n".format(INPUT0.device, INPUT1.device))
        return INPUT0 + INPUT1


class DiffModule(torch.nn.Module):
    def __init__(self, device: str):
        super().__init__()
        self.device = device

    def forward(self, INPUT0, INPUT1):  # noqa: N803
        INPUT0, INPUT1 = INPUT0.to(self.device), INPUT1.to(self.device)
        print("DiffModule - INPUT0 device: {}, INPUT1 device: {}\n".format(INPUT0.device, INPUT1.device))
        return INPUT0 - INPUT1


class MultiDevice(torch.nn.Module):
    """qa/L0_libtorch_instance_group_kind_model/gen_models.py's TestModel, its layers on the CPU
    (or on the devices given)."""

    def __init__(self, sum_device: str = "cpu", diff_device: str = "cpu"):
        super().__init__()
        self.layer1 = SumModule(sum_device)
        self.layer2 = DiffModule(diff_device)

    def forward(self, INPUT0, INPUT1):  # noqa: N803
        return self.layer1(INPUT0, INPUT1), self.layer2(INPUT0, INPUT1)


def _entry(repo: Path, name: str, modules: dict[int, torch.nn.Module], config: str) -> None:
    for version, module in modules.items():
        (repo / name / str(version)).mkdir(parents=True)
        torch.jit.script(module).save(str(repo / name / str(version) / "model.pt"))
    (repo / name / "config.pbtxt").write_text(f'name: "{name}"\nplatform: "pytorch_libtorch"\n'
                                              + textwrap.dedent(config))


def _parameters(**values: str) -> str:
    return "".join(f'parameters: {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'
                   for key, value in values.items())


ADD_SUB = """
    max_batch_size: 8
    version_policy: { all { } }
    input [ { name: "INPUT__0" data_type: TYPE_INT32 dims: [ 16 ] },
            { name: "INPUT__1" data_type: TYPE_INT32 dims: [ 16 ] } ]
    output [ { name: "OUTPUT__0" data_type: TYPE_INT32 dims: [ 16 ] },
             { name: "OUTPUT__1" data_type: TYPE_INT32 dims: [ 16 ] } ]
    instance_group [ { kind: KIND_CPU count: 2 } ]
    """
IDENTITY = """
    max_batch_size: 0
    input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ -1 ] } ]
    output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ -1 ] } ]
    instance_group [ { count: 16 kind: KIND_CPU } ]
    """
MULTI_DEVICE = """
    max_batch_size: 8
    input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
    output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 16 ] },
             { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 16 ] } ]
    instance_group [ { kind: KIND_MODEL } ]
    """


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One server for the suites that serve (their models side by side), and what it logged while
    loading them."""
    repo = tmp_path_factory.mktemp("pytorch_qa") / "repo"
    versions = {1: AddSub(False), 2: AddSub(True), 3: AddSub(True)}
    _entry(repo, "inference_on", versions, ADD_SUB + _parameters(INFERENCE_MODE="true",
                                                                 DISABLE_OPTIMIZED_EXECUTION="false"))
    _entry(repo, "inference_off", versions, ADD_SUB + _parameters(INFERENCE_MODE="false",
                                                                  DISABLE_OPTIMIZED_EXECUTION="true"))
    _entry(repo, "unshared", {1: Identity()}, IDENTITY)
    _entry(repo, "shared", {1: Identity()}, IDENTITY + _parameters(ENABLE_WEIGHT_SHARING="true"))
    _entry(repo, "libtorch_multi_device", {1: MultiDevice()}, MULTI_DEVICE)
    records: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: records.append(record.getMessage())
    logger = logging.getLogger("tritonctl.serve")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0)) as server:
            yield server, list(records)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@pytest.mark.parametrize("model, state", [("inference_on", "enabled"), ("inference_off", "disabled")])
def test_each_version_logs_its_parameters_once_as_the_inference_mode_suites_count(served, model, state):
    """L0_libtorch_inference_mode / L0_libtorch_optimized_execution: three loaded versions of two
    instances each, three lines per parameter (one per version, not one per instance)."""
    _, records = served
    optimized = "disabled" if state == "disabled" else "enabled"
    assert records.count(f"Inference Mode is {state} for model instance '{model}'") == 3
    assert records.count(f"Optimized execution is {optimized} for model instance '{model}'") == 3


@pytest.mark.parametrize("client_module", [httpclient, grpcclient], ids=["http", "grpc"])
@pytest.mark.parametrize("model", ["inference_on", "inference_off"])
def test_the_add_sub_model_answers_from_its_latest_version(served, client_module, model):
    server, _ = served
    input0 = np.arange(16, dtype=np.int32)[None]
    input1 = np.full((1, 16), -1, np.int32)
    inputs = [client_module.InferInput(name, [1, 16], "INT32") for name in ("INPUT__0", "INPUT__1")]
    inputs[0].set_data_from_numpy(input0)
    inputs[1].set_data_from_numpy(input1)
    url = server.http_url if client_module is httpclient else server.grpc_url
    with client_module.InferenceServerClient(url) as client:
        latest = client.infer(model, inputs)
        first = client.infer(model, inputs, model_version="1")
    assert np.array_equal(latest.as_numpy("OUTPUT__0"), input0 - input1)
    assert np.array_equal(latest.as_numpy("OUTPUT__1"), input0 + input1)
    assert np.array_equal(first.as_numpy("OUTPUT__0"), input0 + input1)


@pytest.mark.parametrize("model, reused", [("unshared", 0), ("shared", 15)])
def test_weight_sharing_reuses_the_first_instances_module(served, model, reused):
    """L0_libtorch_shared_weights on the CPU: concurrent requests (32 here, 128 in the suite) over
    16 instances, each answered with its own input; 15 "Reusing" lines with ENABLE_WEIGHT_SHARING,
    none without."""
    server, records = served
    assert records.count(f"Reusing TorchScript model for instance '{model}'") == reused
    rng = np.random.default_rng(0)
    datas = [(16384 * rng.standard_normal(8)).astype(np.float32) for _ in range(32)]
    client = httpclient.InferenceServerClient(server.http_url, concurrency=32)
    pending = []
    for data in datas:
        tensor = httpclient.InferInput("INPUT__0", list(data.shape), "FP32")
        tensor.set_data_from_numpy(data)
        pending.append(client.async_infer(model, [tensor]))
    for data, request in zip(datas, pending):
        np.testing.assert_allclose(request.get_result().as_numpy("OUTPUT__0"), data)
    client.close()


def test_a_kind_model_instance_leaves_the_devices_to_the_model(served, capfd):
    """L0_libtorch_instance_group_kind_model with both layers on the CPU (the suite's own pairs
    need 4 GPUs): the instance is KIND_MODEL, its inputs reach forward() on the CPU and the
    model's prints reach the server's output."""
    server, _ = served
    client = httpclient.InferenceServerClient(server.http_url)
    config = client.get_model_config("libtorch_multi_device")
    assert [g["kind"] for g in config["instance_group"]] == ["KIND_MODEL"]
    input0 = np.arange(16, dtype=np.float32)[None]
    input1 = np.arange(32, 48, dtype=np.float32)[None]
    inputs = [httpclient.InferInput(name, [1, 16], "FP32") for name in ("INPUT0", "INPUT1")]
    inputs[0].set_data_from_numpy(input0)
    inputs[1].set_data_from_numpy(input1)
    result = client.infer("libtorch_multi_device", inputs)
    assert np.array_equal(result.as_numpy("OUTPUT__0"), input0 + input1)
    assert np.array_equal(result.as_numpy("OUTPUT__1"), input0 - input1)
    out = capfd.readouterr().out
    assert "SumModule - INPUT0 device: cpu, INPUT1 device: cpu" in out
    assert "DiffModule - INPUT0 device: cpu, INPUT1 device: cpu" in out


def test_kind_model_groups_give_kind_model_instances():
    config = text_format.Parse('name: "m" instance_group [ { name: "m_0" kind: KIND_MODEL count: 2 } ]',
                               model_config_pb2().ModelConfig())
    assert [(s.name, s.kind) for s in instance_specs(config)] == [("m_0_0", "KIND_MODEL"), ("m_0_1", "KIND_MODEL")]


def test_types_the_backend_refuses_stop_the_server_in_its_words(tmp_path, caplog):
    """L0_libtorch_io_types: an input, an output and a CORRID control of a type the PyTorch backend
    has not; with --exit-on-error the server does not start, and the log says why."""
    repo = tmp_path / "repo"
    add_sub = """
        max_batch_size: 8
        input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
                { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_INT8 dims: [ 16 ] },
                 { name: "OUTPUT__1" data_type: TYPE_INT8 dims: [ 16 ] } ]
        """
    _entry(repo, "libtorch_invalid_input_type", {1: AddSub(False)}, add_sub.replace("TYPE_INT32", "TYPE_UINT32"))
    _entry(repo, "libtorch_invalid_output_type", {1: AddSub(False)}, add_sub.replace("TYPE_INT8", "TYPE_UINT64"))
    _entry(repo, "libtorch_invalid_sequence_int32", {1: Sequence()}, """
        max_batch_size: 8
        sequence_batching {
          control_input [
            { name: "START__1" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
            { name: "CORRID__2" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT32 } ] }
          ]
        }
        input [ { name: "INPUT__0" data_type: TYPE_INT32 dims: [ -1 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_INT32 dims: [ -1 ] } ]
        """)
    caplog.set_level(logging.INFO, logger="tritonctl.serve")
    with pytest.raises(RuntimeError, match="failed to load all models"):
        BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, exit_on_error=True)).start()
    for text in ("unsupported datatype TYPE_UINT32 for input 'INPUT0' for model 'libtorch_invalid_input_type'",
                 "unsupported datatype TYPE_UINT64 for output 'OUTPUT__0' for model 'libtorch_invalid_output_type'",
                 "input 'CORRID__2' type 'TYPE_UINT32' is not supported by PyTorch."):
        assert text in caplog.text


@pytest.mark.gpu
def test_weight_sharing_on_a_gpu(tmp_path, caplog):
    """L0_libtorch_shared_weights' KIND_GPU runs: 16 instances on GPU 0, 15 reusing the first's module."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device and a CUDA build of torch")
    repo = tmp_path / "repo"
    _entry(repo, "shared", {1: Identity()}, IDENTITY.replace("KIND_CPU", "KIND_GPU")
           + _parameters(ENABLE_WEIGHT_SHARING="true"))
    caplog.set_level(logging.INFO, logger="tritonctl.serve")
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0)) as server:
        data = np.arange(8, dtype=np.float32)
        tensor = httpclient.InferInput("INPUT__0", [8], "FP32")
        tensor.set_data_from_numpy(data)
        result = httpclient.InferenceServerClient(server.http_url).infer("shared", [tensor])
        np.testing.assert_array_equal(result.as_numpy("OUTPUT__0"), data)
    assert caplog.text.count("Reusing TorchScript model for instance 'shared'") == 15


@pytest.mark.gpu
def test_a_kind_model_instance_whose_layers_are_on_the_gpu(tmp_path, capfd):
    """L0_libtorch_instance_group_kind_model on one GPU: the sum on cuda:0, the difference on the
    CPU; the instance is KIND_MODEL, its inputs reach forward() on the CPU and the outputs come
    back from both devices."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device and a CUDA build of torch")
    repo = tmp_path / "repo"
    _entry(repo, "split", {1: MultiDevice("cuda:0", "cpu")}, MULTI_DEVICE)
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0)) as server:
        input0 = np.arange(16, dtype=np.float32)[None]
        input1 = np.arange(32, 48, dtype=np.float32)[None]
        inputs = [grpcclient.InferInput(name, [1, 16], "FP32") for name in ("INPUT0", "INPUT1")]
        inputs[0].set_data_from_numpy(input0)
        inputs[1].set_data_from_numpy(input1)
        result = grpcclient.InferenceServerClient(server.grpc_url).infer("split", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT__0"), input0 + input1)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT__1"), input0 - input1)
    out = capfd.readouterr().out
    assert "SumModule - INPUT0 device: cuda:0, INPUT1 device: cuda:0" in out
    assert "DiffModule - INPUT0 device: cpu, INPUT1 device: cpu" in out
