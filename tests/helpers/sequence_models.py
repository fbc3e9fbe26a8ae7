"""Sequence models for the serve tests, made in code: a Python accumulator that keeps running
totals keyed by its CONTROL_SEQUENCE_CORRID input, and an ONNX model with implicit state."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

ACCUMULATOR = '''
import numpy as np
import triton_python_backend_utils as pb_utils


def value(request, name):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(-1)[0]


class TritonPythonModel:
    """OUTPUT = the running total of INPUT over the sequence; FLAGS = request.flags()."""

    def initialize(self, args):
        self.totals = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            total = 0
            if value(request, "READY"):
                corrid = value(request, "CORRID")
                key = corrid.decode() if isinstance(corrid, bytes) else int(corrid)
                assert key == request.correlation_id() or str(key) == str(request.correlation_id())
                if value(request, "START"):
                    self.totals[key] = 0
                self.totals[key] += int(value(request, "INPUT"))
                total = self.totals[key]
                if value(request, "END"):
                    del self.totals[key]
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT", np.array([[total]], np.int32)),
                pb_utils.Tensor("FLAGS", np.array([[request.flags()]], np.int32))]))
        return responses
'''

ACCUMULATOR_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: {max_batch_size}
input [ {{ name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [
  {{ name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }},
  {{ name: "FLAGS" data_type: TYPE_INT32 dims: [ 1 ] }}
]
sequence_batching {{
  max_sequence_idle_microseconds: {idle_us}
  control_input [
    {{ name: "START" control [ {{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "END" control [ {{ kind: CONTROL_SEQUENCE_END bool_false_true: [ false, true ] }} ] }},
    {{ name: "READY" control [ {{ kind: CONTROL_SEQUENCE_READY fp32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "CORRID" control [ {{ kind: CONTROL_SEQUENCE_CORRID data_type: {corrid_type} }} ] }}
  ]
  {strategy}
}}
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""


def write_accumulator(repo: Path, name: str, strategy: str = "direct { }", max_batch_size: int = 4,
                      corrid_type: str = "TYPE_UINT64", idle_us: int = 5_000_000) -> Path:
    model_dir = repo / name
    (model_dir / "1").mkdir(parents=True, exist_ok=True)
    (model_dir / "1" / "model.py").write_text(ACCUMULATOR)
    (model_dir / "config.pbtxt").write_text(ACCUMULATOR_CONFIG.format(
        name=name, max_batch_size=max_batch_size, idle_us=idle_us, corrid_type=corrid_type, strategy=strategy))
    return model_dir


def state_onnx(path: Path) -> None:
    """OUTPUT = INPUT + STATE_IN, STATE_OUT = OUTPUT, CORRID_OUT = CORRID; all [batch, 1]."""
    inputs = [helper.make_tensor_value_info("INPUT", TensorProto.INT32, ["batch", 1]),
              helper.make_tensor_value_info("STATE_IN", TensorProto.INT32, ["batch", 1]),
              helper.make_tensor_value_info("CORRID", TensorProto.UINT64, ["batch", 1])]
    outputs = [helper.make_tensor_value_info("OUTPUT", TensorProto.INT32, ["batch", 1]),
               helper.make_tensor_value_info("STATE_OUT", TensorProto.INT32, ["batch", 1]),
               helper.make_tensor_value_info("CORRID_OUT", TensorProto.UINT64, ["batch", 1])]
    nodes = [helper.make_node("Add", ["INPUT", "STATE_IN"], ["OUTPUT"]),
             helper.make_node("Identity", ["OUTPUT"], ["STATE_OUT"]),
             helper.make_node("Identity", ["CORRID"], ["CORRID_OUT"])]
    model = helper.make_model(helper.make_graph(nodes, "running_sum", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


STATE_CONFIG = """
name: "{name}"
backend: "onnxruntime"
max_batch_size: 4
input [ {{ name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [
  {{ name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }},
  {{ name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ] }},
  {{ name: "CORRID_OUT" data_type: TYPE_UINT64 dims: [ 1 ] }}
]
sequence_batching {{
  control_input [ {{ name: "CORRID" control [ {{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 }} ] }} ]
  state [ {{
    input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ]
    {initial}
  }} ]
  {strategy}
}}
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""


def write_state_model(repo: Path, name: str, strategy: str = "direct { }", start_value: int | None = None) -> Path:
    """The ONNX running sum; its state starts at zero, or at ``start_value`` read from an
    initial_state data file."""
    model_dir = repo / name
    state_onnx(model_dir / "1" / "model.onnx")
    initial = ""
    if start_value is not None:
        (model_dir / "initial_state").mkdir()
        np.array([start_value], "<i4").tofile(model_dir / "initial_state" / "start.bin")
        initial = ('initial_state { data_type: TYPE_INT32 dims: [ 1 ] data_file: "start.bin" name: "start" }')
    (model_dir / "config.pbtxt").write_text(STATE_CONFIG.format(name=name, initial=initial, strategy=strategy))
    return model_dir
