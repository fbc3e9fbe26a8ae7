"""Small ONNX models and model directories for the serve tests, made in code."""

from __future__ import annotations

import contextlib
import textwrap
from pathlib import Path

import onnx
from onnx import TensorProto, helper


def _save(graph, path: Path) -> None:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def add_sub_onnx(path: Path, elem=TensorProto.FLOAT, batch: bool = True, width: int = 4) -> None:
    """OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, shape [batch?, width]."""
    shape = (["batch"] if batch else []) + [width]
    inputs = [helper.make_tensor_value_info(n, elem, shape) for n in ("INPUT0", "INPUT1")]
    outputs = [helper.make_tensor_value_info(n, elem, shape) for n in ("OUTPUT0", "OUTPUT1")]
    nodes = [helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
             helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"])]
    _save(helper.make_graph(nodes, "add_sub", inputs, outputs), path)


def identity_bytes_onnx(path: Path) -> None:
    """A STRING identity: [batch, 2] -> [batch, 2]."""
    graph = helper.make_graph([helper.make_node("Identity", ["TEXT"], ["TEXT_OUT"])], "bytes",
                              [helper.make_tensor_value_info("TEXT", TensorProto.STRING, ["batch", 2])],
                              [helper.make_tensor_value_info("TEXT_OUT", TensorProto.STRING, ["batch", 2])])
    _save(graph, path)


def dynamic_width_onnx(path: Path) -> None:
    """Y = X * 2 with shape [batch, n] (n variable), FP32."""
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    graph = helper.make_graph([helper.make_node("Mul", ["X", "two"], ["Y"])], "double",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", "n"])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", "n"])],
                              initializer=[two])
    _save(graph, path)


ADD_SUB_CONFIG = """
name: "{name}"
backend: "onnxruntime"
max_batch_size: 8
input [
  {{ name: "INPUT0" data_type: {dtype} dims: [ 4 ] }},
  {{ name: "INPUT1" data_type: {dtype} dims: [ 4 ] }}
]
output [
  {{ name: "OUTPUT0" data_type: {dtype} dims: [ 4 ] }},
  {{ name: "OUTPUT1" data_type: {dtype} dims: [ 4 ] }}
]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
{extra}
"""

BYTES_CONFIG = """
name: "{name}"
backend: "onnxruntime"
max_batch_size: 4
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 2 ] } ]
output [ { name: "TEXT_OUT" data_type: TYPE_STRING dims: [ 2 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""


def write_add_sub(repo: Path, name: str = "add_sub", dtype: str = "TYPE_FP32", extra: str = "",
                  versions: tuple[int, ...] = (1,)) -> Path:
    elem = {"TYPE_FP32": TensorProto.FLOAT, "TYPE_INT32": TensorProto.INT32, "TYPE_FP16": TensorProto.FLOAT16}[dtype]
    model_dir = repo / name
    for version in versions:
        add_sub_onnx(model_dir / str(version) / "model.onnx", elem)
    (model_dir / "config.pbtxt").write_text(ADD_SUB_CONFIG.format(name=name, dtype=dtype, extra=extra))
    return model_dir


def write_bytes_model(repo: Path, name: str = "echo_bytes") -> Path:
    model_dir = repo / name
    identity_bytes_onnx(model_dir / "1" / "model.onnx")
    (model_dir / "config.pbtxt").write_text(BYTES_CONFIG.replace("{name}", name))
    return model_dir


def write_onnx_only(repo: Path, name: str = "onnx_only") -> Path:
    """A model directory holding only 1/model.onnx, no config (Triton's auto-complete)."""
    model_dir = repo / name
    dynamic_width_onnx(model_dir / "1" / "model.onnx")
    return model_dir


def standard_repository(repo: Path) -> Path:
    """add_sub (FP32, dynamic batching), add_sub_int (INT32, no batcher), echo_bytes, onnx_only
    and a model whose config is broken."""
    write_add_sub(repo, extra="dynamic_batching { max_queue_delay_microseconds: 1000 }")
    write_add_sub(repo, "add_sub_int", "TYPE_INT32")
    write_bytes_model(repo)
    write_onnx_only(repo)
    broken = repo / "broken"
    add_sub_onnx(broken / "1" / "model.onnx")
    (broken / "config.pbtxt").write_text('name: "broken"\nbackend: "onnxruntime"\nmax_batch_size: 8\n'
                                         'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 } ]\n')
    return repo


@contextlib.contextmanager
def loaded_server(repo: Path):
    """An in-process InferenceServer with every model of ``repo`` loaded; stopped afterwards."""
    from tritonctl.serve.backends import registry
    from tritonctl.serve.core.manager import ModelManager
    from tritonctl.serve.core.server import InferenceServer

    manager = ModelManager(repo, registry())
    manager.load_all()
    try:
        yield InferenceServer(manager)
    finally:
        manager.stop(5)


SLOW_BATCH = "dynamic_batching { max_queue_delay_microseconds: 300000 }"


def serving_repository(root: Path) -> Path:
    """The repository the integration tests serve (tests/integration/serve)."""
    write_add_sub(root, extra="dynamic_batching { max_queue_delay_microseconds: 2000 }")
    write_add_sub(root, "add_sub_int", "TYPE_INT32")
    write_add_sub(root, "add_sub_fp16", "TYPE_FP16")
    write_add_sub(root, "batched", extra=SLOW_BATCH.replace("300000", "200000"))
    write_add_sub(root, "limited", extra="dynamic_batching { max_queue_delay_microseconds: 400000 "
                                         "preferred_batch_size: [ 8 ] default_queue_policy { max_queue_size: 1 } }")
    write_add_sub(root, "unloadable")
    write_add_sub(root, "delayed", extra=SLOW_BATCH)
    write_add_sub(root, "reloadable", extra="dynamic_batching { }")
    write_bytes_model(root)
    write_onnx_only(root)
    return root


TAG_LOGGER_PY = """\
import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.log = os.path.join(args["model_repository"], "ran")

    def execute(self, requests):
        responses = []
        for request in requests:
            tag = pb_utils.get_input_tensor_by_name(request, "TAG").as_numpy()
            with open(self.log, "a") as log:
                log.write(f"{int(tag.reshape(-1)[0])}\\n")
            time.sleep(%r)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", tag)]))
        return responses
"""


def write_tag_logger(repo: Path, name: str, max_batch_size: int, dynamic_batching: str, seconds: float = 0.0) -> Path:
    """A Python model that echoes its INT32 input TAG as OUT, after ``seconds``, and writes every tag
    it executes to <model dir>/ran: which requests really ran. Returns that log's path."""
    model_dir = repo / name
    (model_dir / "1").mkdir(parents=True, exist_ok=True)
    (model_dir / "1" / "model.py").write_text(TAG_LOGGER_PY % seconds)
    (model_dir / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: {max_batch_size}\n'
        'input [ { name: "TAG" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'instance_group [ { kind: KIND_CPU count: 1 } ]\n' + dynamic_batching + "\n")
    return model_dir / "ran"


IDENTITY_PY = """\
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(
            r, "INPUT0").as_numpy())]) for r in requests]
"""


def write_python_identity(repo: Path, name: str = "identity") -> Path:
    """A Python model without batching that answers its FP32 [1] INPUT0 as OUTPUT0."""
    model_dir = repo / name
    (model_dir / "1").mkdir(parents=True, exist_ok=True)
    (model_dir / "1" / "model.py").write_text(IDENTITY_PY)
    (model_dir / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\n'
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]\n')
    return model_dir


def write_python_model(repo: Path, name: str, config: str, code: str) -> Path:
    """A Python-backend model directory: ``config`` (after name and backend) and version 1's model.py."""
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(f'name: "{name}"\nbackend: "python"\n' + textwrap.dedent(config))
    (repo / name / "1" / "model.py").write_text(textwrap.dedent(code))
    return repo / name


# Execute marks that it began ({started}), then waits until the test releases it ({release}):
# for ever when no release comes.
GATED_PY = '''
import os
import time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        open({started!r}, "w").close()
        while not os.path.exists({release!r}):
            time.sleep(0.01)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.array([7.0], np.float32))])
                for _ in requests]
'''
