"""Read an ONNX file's inputs and outputs without loading external weight files."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from tritonctl.repo_schema.modelfiles import (LFS_HINT, ModelFileError, ModelIO, OnnxOperators, TensorInfo,
                                              lfs_pointer_problem)
from tritonctl.repo_schema.datatypes import BY_ONNX
from tritonctl.repo_schema.schema import onnx_pb2


# onnxruntime's words when a model is newer than it reads
_IR_TOO_NEW = re.compile(r"Unsupported model IR version: (\d+), max supported IR version: (\d+)")


def explain_onnxruntime_error(text: str, onnxruntime_version: str) -> str:
    """onnxruntime's refusal of a model, with what it means and the two ways out when the model
    is newer than this onnxruntime reads (a newer onnx wrote it); any other text as it is."""
    too_new = _IR_TOO_NEW.search(text)
    if too_new is None:
        return text
    model_ir, max_ir = too_new.groups()
    return (f"the model has ONNX IR version {model_ir} and onnxruntime {onnxruntime_version} reads IR versions up "
            f"to {max_ir} (a newer onnx wrote it): upgrade onnxruntime (pip install -U onnxruntime), or save the "
            f"model with ir_version {max_ir} or lower (onnx.helper.find_min_ir_version_for gives the lowest its "
            "operator sets allow)")


def onnx_model_path(path: Path) -> Path:
    """Triton accepts ``model.onnx`` as a file or as a directory holding ``model.onnx`` (PB-10)."""
    return path / "model.onnx" if path.is_dir() else path


def _tensor(value_info) -> TensorInfo:
    tensor_type = value_info.type.tensor_type
    known = BY_ONNX.get(tensor_type.elem_type)
    onnx_name, triton = (known.onnx_name, known.config) if known else (f"type {tensor_type.elem_type}", "")
    if not value_info.type.HasField("tensor_type"):
        kind = value_info.type.WhichOneof("value") or "unknown"
        return TensorInfo(value_info.name, "", (), f"non-tensor ({kind})", ranked=False)
    if not tensor_type.HasField("shape"):
        return TensorInfo(value_info.name, triton, (), onnx_name, ranked=False)
    dims = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1 for d in tensor_type.shape.dim)
    return TensorInfo(value_info.name, triton, dims, onnx_name)


def read_onnx_io(path: Path) -> ModelIO:
    """Inputs and outputs of an ONNX model. External data files are never opened.

    Results are cached per file and modification time, so the rules that look at
    one model (its own checks, every ensemble that uses it) read it once.
    """
    file = onnx_model_path(path)
    try:
        stat = file.stat()
    except OSError as exc:
        raise ModelFileError(f"cannot read {file}: {exc.strerror}") from None
    return _read_onnx_io(file.resolve(), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=256)
def _read_onnx_io(file: Path, mtime_ns: int, size: int) -> ModelIO:
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise ModelFileError(f"cannot read {file}: {exc.strerror}") from None
    model = onnx_pb2().ModelProto()
    try:
        model.ParseFromString(data)
    except Exception:  # protobuf's DecodeError
        pointer = lfs_pointer_problem(file)
        if pointer:
            raise ModelFileError(f"{pointer}: {LFS_HINT}") from None
        raise ModelFileError(f"{file.name} is not a valid ONNX model (protobuf decoding failed)") from None
    if not model.HasField("graph"):
        raise ModelFileError(f"{file.name} is not a valid ONNX model (it has no graph)")
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    io = ModelIO()
    for value_info in graph.input:
        if value_info.name in initializers:
            io.overridable.append(value_info.name)
        else:
            io.inputs.append(_tensor(value_info))
    io.outputs = [_tensor(v) for v in graph.output]
    io.operators = _operators(model)
    return io


def _operators(model) -> OnnxOperators:
    used: dict[str, set[str]] = {}

    def visit(nodes) -> None:
        for node in nodes:
            used.setdefault(_domain(node.domain), set()).add(node.op_type)
            for attribute in node.attribute:  # the bodies of If, Loop and Scan
                if attribute.HasField("g"):
                    visit(attribute.g.node)
                for graph in attribute.graphs:
                    visit(graph.node)

    visit(model.graph.node)
    for function in model.functions:
        visit(function.node)
    return OnnxOperators(opsets={_domain(o.domain): o.version for o in model.opset_import},
                         used={domain: tuple(sorted(ops)) for domain, ops in used.items()},
                         function_domains=frozenset(_domain(f.domain) for f in model.functions))


def _domain(name: str) -> str:
    """ONNX names its default domain "" or "ai.onnx"."""
    return "" if name == "ai.onnx" else name
