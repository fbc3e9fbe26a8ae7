"""TorchScript models (``backend: "pytorch"``) made here, served and called with the real
tritonclient over HTTP and gRPC: Triton's naming rules (forward() arguments, ``<name>__<index>``,
config order, a Dict input), several inputs and outputs, dynamic batching, strings, the
parameters, and Triton's texts for what the PyTorch backend refuses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritonctl.serve.runtime import BackgroundServer, ServeOptions

torch = pytest.importorskip("torch")

EXAMPLES = Path(__file__).parents[3] / "examples" / "model_repository"


class TwoInTwoOut(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        return self.linear(x) + y.sum(1, keepdim=True), (x * 2).to(torch.int64)


class Difference(torch.nn.Module):
    def forward(self, a, b):
        return a - b


class ByName(torch.nn.Module):
    def forward(self, inputs: Dict[str, torch.Tensor]):
        return inputs["first"] * 10 + inputs["second"]


class Upper(torch.nn.Module):
    def forward(self, words: List[str]) -> List[str]:
        return [w.upper() for w in words]


class RunningSum(torch.nn.Module):
    """A sequence's running sum, kept in implicit state; START resets it."""

    def forward(self, value, start, state):
        total = state * (1 - start) + value
        return total, total


class TupleWithInt(torch.nn.Module):
    def forward(self, x):
        return x, 3


class NoTensors(torch.nn.Module):
    def forward(self, x) -> List[torch.Tensor]:
        return []


class Pair(torch.nn.Module):
    def forward(self, x):
        return x, x * 2


class HalfBrain(torch.nn.Module):
    def forward(self, x):
        return x.to(torch.bfloat16)


class Failing(torch.nn.Module):
    def forward(self, x):
        if bool(x.sum() < 0):
            raise ValueError("negative input")
        return x


def _entry(repo: Path, name: str, module, config: str) -> None:
    (repo / name / "1").mkdir(parents=True)
    torch.jit.script(module).save(str(repo / name / "1" / "model.pt"))
    (repo / name / "config.pbtxt").write_text(textwrap.dedent(config))


FP32 = "data_type: TYPE_FP32"


def make_repository(repo: Path) -> Path:
    _entry(repo, "two", TwoInTwoOut(), f"""
        backend: "pytorch"
        max_batch_size: 8
        input [ {{ name: "x" {FP32} dims: [ 4 ] }}, {{ name: "y" {FP32} dims: [ 2 ] }} ]
        output [ {{ name: "twice__1" data_type: TYPE_INT64 dims: [ 4 ] }}, {{ name: "sum__0" {FP32} dims: [ 3 ] }} ]
        dynamic_batching {{ }}
        parameters {{ key: "INFERENCE_MODE" value: {{ string_value: "false" }} }}
        parameters {{ key: "DISABLE_OPTIMIZED_EXECUTION" value: {{ string_value: "true" }} }}
        parameters {{ key: "ENABLE_JIT_EXECUTOR" value: {{ string_value: "false" }} }}
        parameters {{ key: "INTRA_OP_THREAD_COUNT" value: {{ string_value: "1" }} }}
        """)
    _entry(repo, "batched", TwoInTwoOut(), f"""
        backend: "pytorch"
        max_batch_size: 8
        input [ {{ name: "x" {FP32} dims: [ 4 ] }}, {{ name: "y" {FP32} dims: [ 2 ] }} ]
        output [ {{ name: "sum__0" {FP32} dims: [ 3 ] }}, {{ name: "twice__1" data_type: TYPE_INT64 dims: [ 4 ] }} ]
        dynamic_batching {{ preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 5000000 }}
        """)
    _entry(repo, "indexed", Difference(), f"""
        platform: "pytorch_libtorch"
        max_batch_size: 4
        input [ {{ name: "B__1" {FP32} dims: [ 2 ] }}, {{ name: "A__0" {FP32} dims: [ 2 ] }} ]
        output [ {{ name: "OUT__0" {FP32} dims: [ 2 ] }} ]
        instance_group [ {{ kind: KIND_CPU count: 2 }} ]
        """)
    _entry(repo, "ordered", Difference(), f"""
        backend: "pytorch"
        max_batch_size: 0
        input [ {{ name: "minuend" {FP32} dims: [ 3 ] }}, {{ name: "subtrahend" {FP32} dims: [ 3 ] }} ]
        output [ {{ name: "difference" {FP32} dims: [ 3 ] }} ]
        """)
    _entry(repo, "by_name", ByName(), f"""
        backend: "pytorch"
        max_batch_size: 4
        input [ {{ name: "second" {FP32} dims: [ 2 ] }}, {{ name: "first" {FP32} dims: [ 2 ] }} ]
        output [ {{ name: "OUT__0" {FP32} dims: [ 2 ] }} ]
        """)
    _entry(repo, "upper", Upper(), """
        backend: "pytorch"
        max_batch_size: 0
        input [ { name: "words" data_type: TYPE_STRING dims: [ -1 ] } ]
        output [ { name: "OUT__0" data_type: TYPE_STRING dims: [ -1 ] } ]
        """)
    _entry(repo, "running_sum", RunningSum(), """
        backend: "pytorch"
        max_batch_size: 4
        input [ { name: "VALUE__0" data_type: TYPE_INT32 dims: [ 1 ] } ]
        output [ { name: "TOTAL__0" data_type: TYPE_INT32 dims: [ 1 ] } ]
        sequence_batching {
          control_input [ { name: "START__1" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]
          state [ { input_name: "STATE__2" output_name: "STATE__1" data_type: TYPE_INT32 dims: [ 1 ] } ]
        }
        """)
    _entry(repo, "failing", Failing(), f"""
        backend: "pytorch"
        max_batch_size: 4
        input [ {{ name: "x" {FP32} dims: [ 2 ] }} ]
        output [ {{ name: "y__0" {FP32} dims: [ 2 ] }} ]
        """)
    _entry(repo, "wrong_type", Difference(), f"""
        backend: "pytorch"
        max_batch_size: 4
        input [ {{ name: "a" {FP32} dims: [ 2 ] }}, {{ name: "b" {FP32} dims: [ 2 ] }} ]
        output [ {{ name: "OUT__0" data_type: TYPE_INT32 dims: [ 2 ] }} ]
        """)
    _entry(repo, "tuple_with_int", TupleWithInt(), f"""
        backend: "pytorch"
        max_batch_size: 4
        input [ {{ name: "x" {FP32} dims: [ 2 ] }} ]
        output [ {{ name: "OUTPUT__0" {FP32} dims: [ 2 ] }}, {{ name: "OUTPUT__1" {FP32} dims: [ 2 ] }} ]
        """)
    _entry(repo, "no_tensors", NoTensors(), f"""
        backend: "pytorch"
        max_batch_size: 4
        input [ {{ name: "x" {FP32} dims: [ 2 ] }} ]
        output [ {{ name: "OUTPUT__0" {FP32} dims: [ 2 ] }} ]
        """)
    _entry(repo, "pair_bad_index", Pair(), f"""
        backend: "pytorch"
        max_batch_size: 4
        input [ {{ name: "x" {FP32} dims: [ 2 ] }} ]
        output [ {{ name: "OUTPUT__0" {FP32} dims: [ 2 ] }}, {{ name: "OUTPUT__3" {FP32} dims: [ 2 ] }} ]
        """)
    _entry(repo, "pair_bad_type", Pair(), f"""
        backend: "pytorch"
        max_batch_size: 4
        input [ {{ name: "x" {FP32} dims: [ 2 ] }} ]
        output [ {{ name: "OUTPUT__0" {FP32} dims: [ 2 ] }}, {{ name: "OUTPUT__1" data_type: TYPE_INT32 dims: [ 2 ] }} ]
        """)
    _entry(repo, "bfloat16_out", HalfBrain(), f"""
        backend: "pytorch"
        max_batch_size: 4
        input [ {{ name: "x" {FP32} dims: [ 2 ] }} ]
        output [ {{ name: "OUTPUT__0" {FP32} dims: [ 2 ] }} ]
        parameters {{ key: "INTRA_OP_THREAD_COUNT" value: {{ string_value: "1 thread" }} }}
        """)
    return repo


@pytest.fixture(scope="module")
def served(tmp_path_factory, transports):
    repo = make_repository(tmp_path_factory.mktemp("pytorch") / "repo")
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, control_mode="explicit",
                           load_models=["*"], **transports)
    with BackgroundServer(options) as server:
        yield server


def _client(module, served):
    return module.InferenceServerClient(served.http_url if module is httpclient else served.grpc_url)


def _inputs(module, **arrays):
    tensors = []
    for name, array in arrays.items():
        datatype = "BYTES" if array.dtype == object else \
            {"float32": "FP32", "int64": "INT64", "int32": "INT32"}[array.dtype.name]
        tensor = module.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    return tensors


PROTOCOLS = pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])


@PROTOCOLS
def test_two_inputs_two_outputs_by_argument_name_and_output_index(served, module):
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    y = np.random.default_rng(2).standard_normal((3, 2)).astype(np.float32)
    client = _client(module, served)
    result = client.infer("two", _inputs(module, y=y, x=x))  # the request's order does not matter
    expected_sum, expected_twice = TwoInTwoOut()(torch.from_numpy(x), torch.from_numpy(y))
    np.testing.assert_allclose(result.as_numpy("sum__0"), expected_sum.detach().numpy(), rtol=1e-6, atol=1e-6)
    assert result.as_numpy("twice__1").dtype == np.int64
    assert np.array_equal(result.as_numpy("twice__1"), expected_twice.numpy())
    only = client.infer("two", _inputs(module, x=x, y=y), outputs=[module.InferRequestedOutput("twice__1")])
    assert only.as_numpy("sum__0") is None and np.array_equal(only.as_numpy("twice__1"), expected_twice.numpy())


def test_dynamic_batching_runs_concurrent_requests_as_one_execution(served):
    client = httpclient.InferenceServerClient(served.http_url, concurrency=4)
    before = client.get_inference_statistics("batched")["model_stats"][0]
    rows = [np.full((1, 4), i, np.float32) for i in range(4)]
    y = np.zeros((1, 2), np.float32)
    # preferred batch 4 with a 5 s delay: the four run together
    pending = [client.async_infer("batched", _inputs(httpclient, x=row, y=y)) for row in rows]
    results = [request.get_result() for request in pending]
    for row, result in zip(rows, results):
        assert np.array_equal(result.as_numpy("twice__1"), (row * 2).astype(np.int64))
    after = client.get_inference_statistics("batched")["model_stats"][0]
    assert after["inference_count"] - before["inference_count"] == 4
    assert after["execution_count"] - before["execution_count"] == 1


@PROTOCOLS
def test_indexed_names_and_config_order(served, module):
    a = np.array([[5.0, 7.0]], np.float32)
    b = np.array([[1.0, 2.0]], np.float32)
    client = _client(module, served)
    assert np.array_equal(client.infer("indexed", _inputs(module, A__0=a, B__1=b)).as_numpy("OUT__0"), a - b)
    # neither forward() arguments nor <name>__<index>: config order decides
    result = client.infer("ordered", _inputs(module, subtrahend=b[0, :1].repeat(3), minuend=np.ones(3, np.float32)))
    assert np.array_equal(result.as_numpy("difference"), np.zeros(3, np.float32))
    # a single Dict(str, Tensor) argument gets every input by name
    result = client.infer("by_name", _inputs(module, first=a, second=b))
    assert np.array_equal(result.as_numpy("OUT__0"), a * 10 + b)


@PROTOCOLS
def test_strings_go_through_as_a_list_of_str(served, module):
    words = np.array([b"triton", "caf\u00e9".encode()], dtype=object)
    result = _client(module, served).infer("upper", _inputs(module, words=words))
    assert result.as_numpy("OUT__0").tolist() == [b"TRITON", "CAF\u00e9".encode()]  # TorchScript upper() is ASCII


@PROTOCOLS
def test_sequence_controls_and_implicit_state_reach_forward_by_index(served, module):
    client = _client(module, served)
    totals = []
    for step, value in enumerate((1, 2, 3)):
        result = client.infer("running_sum", _inputs(module, VALUE__0=np.array([[value]], np.int32)),
                              sequence_id=41 if module is httpclient else 42, sequence_start=step == 0,
                              sequence_end=step == 2)
        totals.append(int(result.as_numpy("TOTAL__0")[0, 0]))
    assert totals == [1, 3, 6]


@PROTOCOLS
def test_model_errors_reach_the_client_with_tritons_texts(served, module):
    client = _client(module, served)
    with pytest.raises(InferenceServerException) as raised:
        client.infer("failing", _inputs(module, x=-np.ones((1, 2), np.float32)))
    assert raised.value.status() in ("500", "StatusCode.INTERNAL")
    assert raised.value.message().startswith("PyTorch execute failure:") and "negative input" in raised.value.message()
    with pytest.raises(InferenceServerException) as raised:
        client.infer("wrong_type", _inputs(module, a=np.ones((1, 2), np.float32), b=np.ones((1, 2), np.float32)))
    assert raised.value.status() in ("400", "StatusCode.INVALID_ARGUMENT")
    assert raised.value.message() == "configuration expects datatype TYPE_INT32 for output 'OUT__0', model provides " \
                                     "TYPE_FP32"
    with pytest.raises(InferenceServerException) as raised:  # BYTES for an FP32 input: refused before the model
        client.infer("failing", _inputs(module, x=np.array([[b"a", b"b"]], dtype=object)))
    assert "inference input 'x' data-type is 'BYTES', but model 'failing' expects 'FP32'" in raised.value.message()
    assert np.array_equal(client.infer("failing", _inputs(module, x=np.ones((1, 2), np.float32))).as_numpy("y__0"),
                          np.ones((1, 2), np.float32))


@PROTOCOLS
def test_outputs_are_checked_as_triton_checks_them(served, module):
    """Every output the config lists is checked after forward(), the ones not asked for too."""
    client = _client(module, served)
    x = np.ones((1, 2), np.float32)
    failures = {
        "tuple_with_int": ("500", "PyTorch execute failure: Expected Tensor but got Int"),
        "no_tensors": ("500", "PyTorch execute failure: output must be of type Tensor or List[str], received "
                              "List[Tensor]"),
        "pair_bad_index": ("400", "The output OUTPUT__3 in the model configuration refers to an output index which "
                                  "doesn't exist. This model has 2 outputs"),
        "pair_bad_type": ("400", "configuration expects datatype TYPE_INT32 for output 'OUTPUT__1', model provides "
                                 "TYPE_FP32"),
        "bfloat16_out": ("400", "configuration expects datatype TYPE_FP32 for output 'OUTPUT__0', model provides "
                                "TYPE_<invalid>"),
    }
    statuses = {"500": "StatusCode.INTERNAL", "400": "StatusCode.INVALID_ARGUMENT"}
    for model, (status, text) in failures.items():
        with pytest.raises(InferenceServerException) as raised:
            client.infer(model, _inputs(module, x=x), outputs=[module.InferRequestedOutput("OUTPUT__0")])
        assert raised.value.status() in (status, statuses[status]), model
        assert raised.value.message() == text, model


LOAD_FAILURES = {
    "too_few_inputs": (Difference(), f"""
        backend: "pytorch"
        max_batch_size: 4
        input [ {{ name: "a" {FP32} dims: [ 2 ] }} ]
        output [ {{ name: "OUT__0" {FP32} dims: [ 2 ] }} ]
        """, "unable to load model 'too_few_inputs', configuration expects 1 inputs, model provides 2"),
    "string_matrix": (Upper(), """
        backend: "pytorch"
        max_batch_size: 4
        input [ { name: "words" data_type: TYPE_STRING dims: [ 2 ] } ]
        output [ { name: "OUT__0" data_type: TYPE_STRING dims: [ 1 ] } ]
        """, "the PyTorch backend passes strings as a 1-dimensional list"),  # validate's PT04, before the backend
    "bad_parameter": (Failing(), f"""
        backend: "pytorch"
        max_batch_size: 4
        input [ {{ name: "x" {FP32} dims: [ 2 ] }} ]
        output [ {{ name: "y__0" {FP32} dims: [ 2 ] }} ]
        parameters {{ key: "INFERENCE_MODE" value: {{ string_value: "maybe" }} }}
        """, "failed to convert 'maybe' to boolean"),  # validate's PAR02, in the backend's words
    "uint32_input": (Failing(), """
        backend: "pytorch"
        max_batch_size: 4
        input [ { name: "INPUT0" data_type: TYPE_UINT32 dims: [ 2 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_INT8 dims: [ 2 ] } ]
        """, "unsupported datatype TYPE_UINT32 for input 'INPUT0' for model 'uint32_input'"),  # validate's IO18
    "no_inputs": (Failing(), f"""
        backend: "pytorch"
        max_batch_size: 4
        output [ {{ name: "y__0" {FP32} dims: [ 2 ] }} ]
        """, "model configuration must contain at least one input, none were specified."),  # validate's PT01
    "unindexed_state": (RunningSum(), """
        backend: "pytorch"
        max_batch_size: 4
        input [ { name: "VALUE__0" data_type: TYPE_INT32 dims: [ 1 ] } ]
        output [ { name: "TOTAL__0" data_type: TYPE_INT32 dims: [ 1 ] } ]
        sequence_batching {
          control_input [ { name: "START__1" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]
          state [ { input_name: "STATE__2" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
        }
        """, "PyTorch model 'unindexed_state' is using sequence batching with state but state 'STATE_OUT' does not "
             "follow the <name>__<index> naming convention."),  # validate's PT02
    "state_by_argument_name": (RunningSum(), """
        backend: "pytorch"
        max_batch_size: 4
        input [ { name: "value" data_type: TYPE_INT32 dims: [ 1 ] } ]
        output [ { name: "TOTAL__0" data_type: TYPE_INT32 dims: [ 1 ] } ]
        sequence_batching {
          control_input [ { name: "START__1" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]
          state [ { input_name: "STATE__2" output_name: "STATE__1" data_type: TYPE_INT32 dims: [ 1 ] } ]
        }
        """, "PyTorch model 'state_by_argument_name' is using sequence batching with state but not all inputs and "
             "outputs follow the <name>__<index> naming convention. "),
    "uint32_corrid": (RunningSum(), """
        backend: "pytorch"
        max_batch_size: 4
        input [ { name: "VALUE__0" data_type: TYPE_INT32 dims: [ 1 ] } ]
        output [ { name: "TOTAL__0" data_type: TYPE_INT32 dims: [ 1 ] } ]
        sequence_batching {
          control_input [ { name: "START__1" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
                          { name: "CORRID__2" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT32 } ] } ]
        }
        """, "input 'CORRID__2' type 'TYPE_UINT32' is not supported by PyTorch."),
    "on_gpu": (Failing(), f"""
        backend: "pytorch"
        max_batch_size: 4
        input [ {{ name: "x" {FP32} dims: [ 2 ] }} ]
        output [ {{ name: "y__0" {FP32} dims: [ 2 ] }} ]
        instance_group [ {{ kind: KIND_GPU gpus: [ 0 ] }} ]
        """, "lists gpu id 0, but the available GPU ids are: none"),  # IG05, before the backend
}


def test_what_the_pytorch_backend_refuses_fails_that_model_only(tmp_path, transports):
    repo = make_repository(tmp_path / "repo")
    cuda = torch.cuda.is_available()
    for name, (module, config, _) in LOAD_FAILURES.items():
        if not (name == "on_gpu" and cuda):
            _entry(repo, name, module, config)
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, control_mode="explicit",
                                       load_models=["indexed"], **transports)) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        for name, (_, _, text) in LOAD_FAILURES.items():
            if name == "on_gpu" and cuda:
                continue
            with pytest.raises(InferenceServerException) as raised:
                client.load_model(name)
            assert text in raised.value.message(), name
            assert not client.is_model_ready(name)
        assert client.is_model_ready("indexed")


def test_without_torch_a_pytorch_model_fails_naming_the_extra_and_the_rest_serves(tmp_path):
    """The server in a process where `import torch` fails as it does where torch is not installed."""
    hide = tmp_path / "hide" / "torch"
    hide.mkdir(parents=True)
    (hide / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLES / "add_sub", repo / "add_sub")
    _entry(repo, "indexed", Difference(), f"""
        backend: "pytorch"
        max_batch_size: 4
        input [ {{ name: "a" {FP32} dims: [ 2 ] }}, {{ name: "b" {FP32} dims: [ 2 ] }} ]
        output [ {{ name: "OUT__0" {FP32} dims: [ 2 ] }} ]
        """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hide.parent), *sys.path])}
    script = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        import tritonclient.http as httpclient
        from tritonclient.utils import InferenceServerException
        from tritonctl.serve.runtime import BackgroundServer, ServeOptions
        options = ServeOptions(Path({str(repo)!r}), http_port=0, grpc_port=0, metrics_port=0,
                               control_mode="explicit", load_models=["add_sub"])
        with BackgroundServer(options) as server:
            client = httpclient.InferenceServerClient(server.http_url)
            try:
                client.load_model("indexed")
                message = None
            except InferenceServerException as exc:
                message = exc.message()
            print(json.dumps({{"message": message, "add_sub": client.is_model_ready("add_sub"),
                               "torch": "torch" in sys.modules and hasattr(sys.modules["torch"], "jit")}}))
        """)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["add_sub"] is True and report["torch"] is False
    assert report["message"] is not None
    assert "unable to load model 'indexed': model 'indexed' (PyTorch backend) needs torch: " \
           "pip install 'tritonctl[torch]'" in report["message"]


@pytest.mark.gpu
def test_gpu_instances_run_on_their_device(tmp_path, transports):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device and a CUDA build of torch")
    repo = tmp_path / "repo"
    _entry(repo, "on_gpu", TwoInTwoOut(), f"""
        backend: "pytorch"
        max_batch_size: 8
        input [ {{ name: "x" {FP32} dims: [ 4 ] }}, {{ name: "y" {FP32} dims: [ 2 ] }} ]
        output [ {{ name: "sum__0" {FP32} dims: [ 3 ] }}, {{ name: "twice__1" data_type: TYPE_INT64 dims: [ 4 ] }} ]
        instance_group [ {{ kind: KIND_GPU count: 2 gpus: [ 0 ] }} ]
        dynamic_batching {{ }}
        parameters {{ key: "ENABLE_CACHE_CLEANING" value: {{ string_value: "true" }} }}
        """)
    x = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    y = np.random.default_rng(4).standard_normal((5, 2)).astype(np.float32)
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, **transports)) as server:
        for module in (httpclient, grpcclient):
            result = _client(module, server).infer("on_gpu", _inputs(module, x=x, y=y))
            expected = TwoInTwoOut()(torch.from_numpy(x), torch.from_numpy(y))[0].detach().numpy()
            np.testing.assert_allclose(result.as_numpy("sum__0"), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_models_without_instance_group_run_where_their_runtime_can(tmp_path, transports):
    """On a GPU machine a config without instance_group gets Triton's KIND_AUTO: the GPU for a
    PyTorch model when torch has CUDA, and the CPU for an ONNX model when onnxruntime is its CPU
    build (Triton's own onnxruntime always has CUDA; this server's may not), so both load."""
    import onnxruntime

    from tritonctl.repo_schema.gpus import local_gpus

    if local_gpus().count == 0:
        pytest.skip("needs a GPU that the driver shows (nvidia-smi)")
    repo = tmp_path / "repo"
    _entry(repo, "auto_pt", Difference(), f"""
        backend: "pytorch"
        max_batch_size: 4
        input [ {{ name: "a" {FP32} dims: [ 2 ] }}, {{ name: "b" {FP32} dims: [ 2 ] }} ]
        output [ {{ name: "OUTPUT__0" {FP32} dims: [ 2 ] }} ]
        """)
    (repo / "auto_onnx" / "1").mkdir(parents=True)
    torch.onnx.export(Difference(), (torch.ones(1, 2), torch.ones(1, 2)), str(repo / "auto_onnx" / "1" / "model.onnx"),
                      input_names=["a", "b"], output_names=["d"], dynamic_axes={"a": {0: "n"}, "b": {0: "n"}},
                      dynamo=False)
    (repo / "auto_onnx" / "config.pbtxt").write_text('backend: "onnxruntime"\nmax_batch_size: 4\n')
    ort_cuda = "CUDAExecutionProvider" in onnxruntime.get_available_providers()
    expected = {"auto_pt": "KIND_GPU" if torch.cuda.is_available() else "KIND_CPU",
                "auto_onnx": "KIND_GPU" if ort_cuda else "KIND_CPU"}
    a, b = np.array([[5.0, 7.0]], np.float32), np.array([[1.0, 2.0]], np.float32)
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, **transports)) as server:
        client = _client(httpclient, server)
        for model, kind in expected.items():
            assert [g["kind"] for g in client.get_model_config(model)["instance_group"]] == [kind]
        result = client.infer("auto_pt", _inputs(httpclient, a=a, b=b))
        np.testing.assert_array_equal(result.as_numpy("OUTPUT__0"), a - b)
        result = client.infer("auto_onnx", _inputs(httpclient, a=a, b=b))
        np.testing.assert_array_equal(result.as_numpy("d"), a - b)
