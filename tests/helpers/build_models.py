"""Small ONNX models for build tests, made with onnx.helper."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model_at_lowest_ir(graph, opset: int = 17) -> onnx.ModelProto:
    """``graph`` as a model of ``opset`` with the lowest IR version that operator set allows, so that
    any onnxruntime that runs the opset reads it (onnx's default IR version is its newest, which an
    older onnxruntime refuses)."""
    opsets = [helper.make_opsetid("", opset)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))


@lru_cache(maxsize=1)
def onnxruntime_max_ir_version() -> int:
    """The newest ONNX IR version the installed onnxruntime reads, as its refusal of IR 99 says."""
    import onnxruntime as ort

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=99)
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - its text carries the number
        found = re.search(r"max supported IR version: (\d+)", str(exc))
        if found:
            return int(found.group(1))
    raise RuntimeError("onnxruntime did not say which IR versions it reads")


def _save(graph, path: Path, opset: int = 17) -> Path:
    model = model_at_lowest_ir(graph, opset)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def fixed_batch_reshape(path: Path) -> Path:
    """x [1,3,4] -> Reshape to the hard-coded [1,12] -> MatMul W[12,4] -> times (2+3) -> y [1,4].
    Exported with batch 1: both the IO shapes and the Reshape target pin it."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((12, 4)).astype(np.float32), "W"),
             numpy_helper.from_array(np.array([1, 12], dtype=np.int64), "target"),
             numpy_helper.from_array(np.array([2.0], dtype=np.float32), "two"),
             numpy_helper.from_array(np.array([3.0], dtype=np.float32), "three")]
    nodes = [helper.make_node("Add", ["two", "three"], ["five"], name="add_constants"),
             helper.make_node("Reshape", ["x", "target"], ["flat"], name="flatten"),
             helper.make_node("MatMul", ["flat", "W"], ["m"], name="matmul"),
             helper.make_node("Mul", ["m", "five"], ["y"], name="scale")]
    graph = helper.make_graph(nodes, "fixed_batch", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)
    return _save(graph, path)


def fixed_batch_concat(path: Path) -> Path:
    """Concatenates a learned [1,2] row to x [1,4] along axis 1: a batch of 1 that no
    rewrite of IO shapes or Reshape targets can free."""
    inits = [numpy_helper.from_array(np.ones((1, 2), dtype=np.float32), "row")]
    nodes = [helper.make_node("Concat", ["x", "row"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "concat", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6])], inits)
    return _save(graph, path)


def dynamic_add_sub(path: Path, dtype=TensorProto.FLOAT) -> Path:
    """Triton's classic add_sub with a symbolic batch: INPUT0, INPUT1 [batch,16]."""
    inputs = [helper.make_tensor_value_info(n, dtype, ["batch", 16]) for n in ("INPUT0", "INPUT1")]
    outputs = [helper.make_tensor_value_info(n, dtype, ["batch", 16]) for n in ("OUTPUT0", "OUTPUT1")]
    nodes = [helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
             helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"])]
    return _save(helper.make_graph(nodes, "add_sub", inputs, outputs), path)


def log_model(path: Path) -> Path:
    """y = log(x): random inputs in [-1, 1) make NaN in source and result alike."""
    graph = helper.make_graph([helper.make_node("Log", ["x"], ["y"])], "log",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
    return _save(graph, path)


def sequence_model(path: Path) -> Path:
    """x [batch, seq] float -> y = x * 2, with a dynamic seq dimension."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["y"])], "seq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])],
        [numpy_helper.from_array(np.array(2.0, dtype=np.float32), "two")])
    return _save(graph, path)


def with_ir_version(source: Path, path: Path, ir_version: int) -> Path:
    """``source`` saved with ``ir_version``; below IR version 4 every initializer is also listed
    as a graph input, as that IR requires."""
    model = onnx.load(str(source))
    model.ir_version = ir_version
    if ir_version < 4:
        listed = {v.name for v in model.graph.input}
        model.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                                 for t in model.graph.initializer if t.name not in listed)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path
