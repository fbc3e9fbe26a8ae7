"""Sequence batching and implicit state beyond the corpus: a complete stateful ONNX
model that must validate clean, initial-state data files, growable memory."""

from __future__ import annotations

import struct
from pathlib import Path

import onnx
from onnx import TensorProto, helper

from tritonctl.repo_schema.validate import validate_paths

STATEFUL_CONFIG = """backend: "onnxruntime"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 4 ] }
]
sequence_batching {
  max_sequence_idle_microseconds: 1000000
  direct { }
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }
  ]
  state [
    {
      input_name: "STATE_IN"
      output_name: "STATE_OUT"
      data_type: TYPE_FP32
      dims: [ 4 ]
      initial_state [ { name: "initial" data_type: TYPE_FP32 dims: [ 4 ] data_file: "initial.bin" } ]
    }
  ]
}
instance_group [ { count: 1 kind: KIND_CPU } ]
"""


def stateful_onnx(path: Path) -> None:
    """OUTPUT0 = INPUT0 + STATE_IN; STATE_OUT = OUTPUT0; START is the sequence-start flag."""
    def tensor(name: str, elem: int, width: int):
        return helper.make_tensor_value_info(name, elem, ["batch", width])

    graph = helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "STATE_IN"], ["OUTPUT0"]),
         helper.make_node("Identity", ["OUTPUT0"], ["STATE_OUT"])],
        "accumulate",
        [tensor("INPUT0", TensorProto.FLOAT, 4), tensor("START", TensorProto.INT32, 1),
         tensor("STATE_IN", TensorProto.FLOAT, 4)],
        [tensor("OUTPUT0", TensorProto.FLOAT, 4), tensor("STATE_OUT", TensorProto.FLOAT, 4)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def write_model(root: Path, config: str, name: str = "m") -> Path:
    model_dir = root / "repo" / name
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(config)
    return model_dir


def codes(root: Path) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in validate_paths([root / "repo"]).diagnostics]


def test_stateful_onnx_model_validates_clean(tmp_path):
    model_dir = write_model(tmp_path, STATEFUL_CONFIG)
    stateful_onnx(model_dir / "1" / "model.onnx")
    (model_dir / "initial_state").mkdir()
    (model_dir / "initial_state" / "initial.bin").write_bytes(struct.pack("<4f", 0, 0, 0, 0))
    assert codes(tmp_path) == []


def test_initial_state_file_one_value_short(tmp_path):
    model_dir = write_model(tmp_path, STATEFUL_CONFIG)
    stateful_onnx(model_dir / "1" / "model.onnx")
    (model_dir / "initial_state").mkdir()
    (model_dir / "initial_state" / "initial.bin").write_bytes(struct.pack("<3f", 0, 0, 0))
    st06 = [message for code, message in codes(tmp_path) if code == "ST06"]
    assert st06 == ["initial_state data file 'initial.bin' has 12 bytes; [4] x TYPE_FP32 needs 16"]


def test_string_initial_state_has_no_size_requirement(tmp_path):
    config = (STATEFUL_CONFIG.replace("TYPE_FP32\n      dims", "TYPE_STRING\n      dims")
              .replace('data_type: TYPE_FP32 dims: [ 4 ] data_file', 'data_type: TYPE_STRING dims: [ 4 ] data_file'))
    model_dir = write_model(tmp_path, config)
    (model_dir / "initial_state").mkdir()
    (model_dir / "initial_state" / "initial.bin").write_bytes(b"")
    assert not [c for c, _ in codes(tmp_path) if c.startswith("ST0")]


def test_growable_memory_needs_shared_buffer_and_gpu_instances(tmp_path):
    config = STATEFUL_CONFIG.replace("      dims: [ 4 ]\n      initial_state",
                                     "      dims: [ 4 ]\n      use_growable_memory: true\n      initial_state")
    model_dir = write_model(tmp_path, config)
    stateful_onnx(model_dir / "1" / "model.onnx")
    (model_dir / "initial_state").mkdir()
    (model_dir / "initial_state" / "initial.bin").write_bytes(struct.pack("<4f", 0, 0, 0, 0))
    st07 = [message for code, message in codes(tmp_path) if code == "ST07"]
    assert st07 == ["state 'STATE_IN' uses growable memory without use_same_buffer_for_input_output",
                    "state 'STATE_IN' uses growable memory, which needs KIND_GPU instances"]


def test_state_support_depends_on_the_backend(tmp_path):
    python = STATEFUL_CONFIG.replace('backend: "onnxruntime"', 'backend: "python"')
    model_dir = write_model(tmp_path, python)
    (model_dir / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    (model_dir / "initial_state").mkdir()
    (model_dir / "initial_state" / "initial.bin").write_bytes(struct.pack("<4f", 0, 0, 0, 0))
    assert [c for c, _ in codes(tmp_path) if c.startswith("ST")] == ["ST51"]


def test_zero_slot_utilization_is_accepted(tmp_path):
    config = STATEFUL_CONFIG.replace("direct { }", "direct { minimum_slot_utilization: 0.0 }")
    model_dir = write_model(tmp_path, config)
    stateful_onnx(model_dir / "1" / "model.onnx")
    (model_dir / "initial_state").mkdir()
    (model_dir / "initial_state" / "initial.bin").write_bytes(struct.pack("<4f", 0, 0, 0, 0))
    assert codes(tmp_path) == []
