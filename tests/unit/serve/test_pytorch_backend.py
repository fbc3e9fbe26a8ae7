"""The PyTorch backend on its own, over TorchScript files made here: what it refuses at load and at
execution with Triton's texts (the cases ``tritonctl validate`` does not stop first, reachable
through a load request's config override), and the parameters it applies."""

from __future__ import annotations

import glob
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
from google.protobuf import text_format
from hypothesis import given
from hypothesis import strategies as st

from tritonctl.repo_schema.schema import model_config_pb2
from tritonctl.repo_schema.modelfiles.pytorch import tensor_index as indexed
from tritonctl.serve.backends.pytorch import PyTorchBackend, read_settings
from tritonctl.serve.core.backend_api import BackendLoadError, InstanceSpec, ModelExecutionError
from tritonctl.serve.core.errors import ServeError, Status

torch = pytest.importorskip("torch")


class Scalar(torch.nn.Module):
    def forward(self, x):
        return x.sum(), x


class TensorList(torch.nn.Module):
    def forward(self, x):
        return [x, x]


class Options(torch.nn.Module):
    def forward(self, x, scale: float):
        return x * scale


class Identity(torch.nn.Module):
    def forward(self, x):
        return x


IO = ('input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
      'output [ { name: "y__0" data_type: TYPE_FP32 dims: [ 2 ] } ]\n')


def backend(tmp_path, module, text: str = IO, kind: str = "KIND_CPU") -> PyTorchBackend:
    (tmp_path / "1").mkdir(exist_ok=True)
    torch.jit.script(module).save(str(tmp_path / "1" / "model.pt"))
    config = text_format.Parse('name: "m" backend: "pytorch" max_batch_size: 4\n' + text,
                               model_config_pb2().ModelConfig())
    return PyTorchBackend(config, tmp_path / "1", InstanceSpec("m_0", kind))


def test_indexed_names_follow_tritons_reading():
    assert [indexed(n) for n in ("INPUT__0", "x__12", "x", "a__b__1", "x__", "x__\u0661", "in___0")] == \
        [0, 12, None, None, 0, None, None]


@given(st.text(min_size=1, max_size=12).filter(lambda n: "__" not in n and not n.endswith("_")),
       st.integers(0, 10**6))
def test_any_name_with_an_index_reads_back(name, index):
    assert indexed(f"{name}__{index}") == index
    assert indexed(name) is None


def test_execution_failures_carry_tritons_texts(tmp_path):
    scalar = backend(tmp_path, Scalar(), IO.replace("y__0", "y__2"))
    with pytest.raises(ServeError) as raised:
        scalar.execute({"x": np.ones((1, 2), np.float32)}, ["y__2"])
    assert raised.value.status is Status.INVALID_ARG
    assert raised.value.message == ("The output y__2 in the model configuration refers to an output index which "
                                    "doesn't exist. This model has 2 outputs")
    with pytest.raises(ServeError, match=r"^output 'y__0' is a scalar which is not supported.$"):
        backend(tmp_path, Scalar()).execute({"x": np.ones((1, 2), np.float32)}, ["y__0"])
    with pytest.raises(ModelExecutionError, match=r"^PyTorch execute failure: output must be of type Tensor or "
                                                  r"List\[str\], received List\[Tensor\]$"):
        backend(tmp_path, TensorList()).execute({"x": np.ones((1, 2), np.float32)}, ["y__0"])


def test_load_refusals(tmp_path):
    with pytest.raises(BackendLoadError, match=r"^An input of type 'float' was detected in the model. Only a single "
                                               r"input of type Dict\(str, Tensor\) or input\(s\) of type Tensor "
                                               r"are supported.$"):
        backend(tmp_path, Options())
    with pytest.raises(BackendLoadError, match="^Triton only supports 1 dimensional List of String as input for 'x' "
                                               "for model 'm'$"):
        backend(tmp_path, Identity(), IO.replace("TYPE_FP32 dims: [ 2 ] } ]\noutput", "TYPE_STRING dims: [ 2 ] } ]\n"
                                                 "output"))
    with pytest.raises(BackendLoadError, match="^unsupported datatype TYPE_UINT16 for output 'y__0' for model 'm'$"):
        backend(tmp_path, Identity(), IO.replace("TYPE_FP32 dims: [ 2 ] } ]\n", "TYPE_UINT16 dims: [ 2 ] } ]\n")
                .replace("TYPE_UINT16", "TYPE_FP32", 1))
    with pytest.raises(BackendLoadError, match="^failed to convert 'maybe' to boolean for parameter "
                                               "'INFERENCE_MODE'$"):
        backend(tmp_path, Identity(), IO + 'parameters { key: "INFERENCE_MODE" value { string_value: "maybe" } }')
    with pytest.raises(BackendLoadError, match="^failed to convert 'two' to integral number$"):
        backend(tmp_path, Identity(), IO + 'parameters { key: "INTRA_OP_THREAD_COUNT" value { string_value: "two" } }')
    (tmp_path / "1" / "model.pt").write_bytes(b"not a zip")
    config = text_format.Parse('name: "m" backend: "pytorch" max_batch_size: 4\n' + IO, model_config_pb2().ModelConfig())
    with pytest.raises(BackendLoadError, match="^failed to load model 'm': "):
        PyTorchBackend(config, tmp_path / "1", InstanceSpec("m_0", "KIND_CPU"))
    (tmp_path / "1" / "model.pt").unlink()
    with pytest.raises(BackendLoadError, match="^unable to find '.*model.pt' for model instance 'm'$"):
        PyTorchBackend(config, tmp_path / "1", InstanceSpec("m_0", "KIND_CPU"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where torch has no CUDA")
def test_gpu_instance_without_cuda_names_why(tmp_path):
    with pytest.raises(BackendLoadError, match="has kind KIND_GPU but no CUDA device is usable here"):
        backend(tmp_path, Identity(), kind="KIND_GPU")


def test_parameters_are_read_and_applied(tmp_path):
    settings = IO + "".join(f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}\n' for k, v in (
        ("DISABLE_OPTIMIZED_EXECUTION", "true"), ("INFERENCE_MODE", "off"), ("ENABLE_WEIGHT_SHARING", "1"),
        ("ENABLE_JIT_PROFILING", "false"), ("INTER_OP_THREAD_COUNT", "1")))
    first = backend(tmp_path, Identity(), settings)
    assert read_settings(first.config) == read_settings(first.config).__class__(
        optimized_execution=False, inference_mode=False, weight_sharing=True, jit_profiling=False, inter_op_threads=1)
    before = torch._C._get_graph_executor_optimize()
    try:
        out = first.execute({"x": np.arange(4, dtype=np.float32).reshape(2, 2)}, ["y__0"])
        assert torch._C._get_graph_executor_optimize() is False
    finally:
        torch._C._set_graph_executor_optimize(before)
    assert np.array_equal(out["y__0"], np.arange(4, dtype=np.float32).reshape(2, 2))
    second = PyTorchBackend(first.config, tmp_path / "1", InstanceSpec("m_1", "KIND_CPU"))
    assert second.module is first.module  # ENABLE_WEIGHT_SHARING: one module per device


def test_parameters_are_logged_in_tritons_words(tmp_path, caplog):
    settings = IO + 'parameters { key: "INFERENCE_MODE" value { string_value: "false" } }\n'
    with caplog.at_level(logging.INFO, logger="tritonctl.serve"):
        backend(tmp_path, Identity(), settings)
    lines = [r.getMessage() for r in caplog.records]
    assert "Inference Mode is disabled for model instance 'm'" in lines
    assert "Optimized execution is enabled for model instance 'm'" in lines
    assert not any(line.startswith("Weight sharing") for line in lines)


THREAD_COUNT_PROBE = """
import ctypes, glob, os, sys, threading
from pathlib import Path
import numpy as np, torch
from google.protobuf import text_format
from tritonctl.repo_schema.schema import model_config_pb2
from tritonctl.serve.backends.pytorch import PyTorchBackend
from tritonctl.serve.core.backend_api import InstanceSpec

version = sys.argv[1]
config = text_format.Parse(sys.argv[2], model_config_pb2().ModelConfig())
gomp = ctypes.CDLL(glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libgomp*"))[0])
model = PyTorchBackend(config, Path(version), InstanceSpec("m_0", "KIND_CPU"))
seen = []

def instance_thread():  # as the server's: a thread of its own, which torch never saw
    model.execute({"x": np.ones((4, 2), np.float32)}, ["y__0"])
    seen.append(gomp.omp_get_max_threads())  # OpenMP's count for this thread, as MKL reads it

thread = threading.Thread(target=instance_thread)
thread.start()
thread.join()
print(seen[0])
"""


def test_an_instance_thread_runs_with_the_configured_intra_op_thread_count(tmp_path):
    """OpenMP's and MKL's counts are per thread: INTRA_OP_THREAD_COUNT must reach the thread that
    runs forward(), not only the one that loaded the model (in a process of its own: the count is
    the process's)."""
    if not glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libgomp*")):
        pytest.skip("this torch does not run on GNU OpenMP (torch/lib/libgomp*)")
    if (os.cpu_count() or 1) < 2:
        pytest.skip("OpenMP's default count is 1 on one CPU: nothing to tell apart")
    (tmp_path / "1").mkdir()
    torch.jit.script(Identity()).save(str(tmp_path / "1" / "model.pt"))
    config = ('name: "m" backend: "pytorch" max_batch_size: 4\n' + IO
              + 'parameters { key: "INTRA_OP_THREAD_COUNT" value { string_value: "1" } }')
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", THREAD_COUNT_PROBE, str(tmp_path / "1"), config],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "1", done.stdout
