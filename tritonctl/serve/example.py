"""The example repository ``tritonctl serve`` uses when no repository is given: small ONNX
models made in code on first use, so the first command shows a working server."""

from __future__ import annotations

import os
from pathlib import Path

EXAMPLE_CONFIG = """name: "simple"
backend: "onnxruntime"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
  { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] }
]
instance_group [ { kind: KIND_CPU count: 1 } ]
dynamic_batching { max_queue_delay_microseconds: 100 }
"""


def default_location() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tritonctl" / "example_repository"


def _simple_onnx(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    shape = ["batch", 16]
    graph = helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
         helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"])],
        "simple",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("INPUT0", "INPUT1")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("OUTPUT0", "OUTPUT1")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def ensure_example_repository(root: Path | None = None) -> Path:
    """Create the example repository (once) and return its path."""
    root = root or default_location()
    model_dir = root / "simple"
    if not (model_dir / "1" / "model.onnx").is_file():
        _simple_onnx(model_dir / "1" / "model.onnx")
    config = model_dir / "config.pbtxt"
    if not config.is_file():
        config.write_text(EXAMPLE_CONFIG)
    return root
