"""What a diagnostic's example is made of: a small model (config.pbtxt, files, sibling
models, an ONNX graph) that makes tritonctl report the code. Each example is registered with its
code, beside the rule that reports it (``register(..., example=Example(...))``); ``validate
--explain`` runs it (render/code_examples.py), and tests/unit/test_render_codes.py checks that
every one still produces its code. The building blocks below keep the examples short."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Union

# A path (an empty file; model.py gets a minimal Python model), or (path, content).
FileSpec = Union[str, tuple[str, str]]


@dataclass(frozen=True)
class OnnxModel:
    """An ONNX graph with these inputs and outputs: (name, ONNX element type, shape)."""

    inputs: tuple[tuple[str, str, tuple], ...]
    outputs: tuple[tuple[str, str, tuple], ...]
    op: str = "Identity"
    opset: int = 17
    domain: str = ""  # the operators' domain (its opset is 1 when not the default one)

    def save(self, path: Path) -> None:
        import onnx
        from onnx import TensorProto, helper

        def info(name: str, elem: str, shape: tuple):
            return helper.make_tensor_value_info(name, getattr(TensorProto, elem), list(shape))

        nodes = [helper.make_node(self.op, [self.inputs[min(i, len(self.inputs) - 1)][0]], [out[0]],
                                  domain=self.domain) for i, out in enumerate(self.outputs)]
        graph = helper.make_graph(nodes, "example", [info(*i) for i in self.inputs],
                                  [info(*o) for o in self.outputs])
        path.parent.mkdir(parents=True, exist_ok=True)
        opsets = [helper.make_opsetid("", self.opset)] + ([helper.make_opsetid(self.domain, 1)] if self.domain else [])
        onnx.save(helper.make_model(graph, opset_imports=opsets), str(path))


@dataclass(frozen=True)
class Sibling:
    """Another model in the example's repository; config None leaves out config.pbtxt."""

    name: str
    config: str | None
    files: tuple[FileSpec, ...] = ("1/model.py",)


@dataclass(frozen=True)
class Example:
    config: str | None  # None: the model directory has no config.pbtxt
    model: str = "my_model"
    files: tuple[FileSpec, ...] = ("1/model.py",)  # in the model directory; a trailing '/' makes a directory
    siblings: tuple[Sibling, ...] = ()
    onnx: OnnxModel | None = None  # written as 1/model.onnx


H = 'backend: "python"\nmax_batch_size: 8\n'
IN = 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
OUT = 'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
IO = IN + OUT
ONNX = 'backend: "onnxruntime"\nmax_batch_size: 8\n'
TRT = 'platform: "tensorrt_plan"\nmax_batch_size: 8\n'
PT = 'backend: "pytorch"\nmax_batch_size: 8\n'
PTIO = (
    'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
)
ENS = 'platform: "ensemble"\nmax_batch_size: 8\n'
ADD = Sibling(
    "add",
    H + 'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    'output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
)
SEQ = (
    'sequence_batching {\n  control_input [\n    { name: "START" control [ { kind: CONTROL_SEQUENCE_START '
    "int32_false_true: [ 0, 1 ] } ] }%s\n  ]\n}\n"
)
STATE = (
    'sequence_batching {\n  state [ {\n    input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 '
    "dims: [ 4 ]%s\n  } ]\n}\n"
)
AUTO_COMPLETE = (
    "class TritonPythonModel:\n    @staticmethod\n    def auto_complete_config(config):\n        %s\n"
    "        return config\n\n    def execute(self, requests):\n        return []\n"
)
ORT_OK = OnnxModel((("INPUT0", "FLOAT", ("batch", 4)),), (("OUTPUT0", "FLOAT", ("batch", 4)),))
ORT_FIXED = OnnxModel((("INPUT0", "FLOAT", (1, 4)),), (("OUTPUT0", "FLOAT", (1, 4)),))


def ensemble_step(
    model: str = "add",
    i: str = 'key: "A" value: "INPUT0"',
    o: str = 'key: "SUM" value: "OUTPUT0"',
    extra: str = "",
    version: int = -1,
) -> str:
    return (
        f'    {{ model_name: "{model}" model_version: {version}{extra} input_map {{ {i} }} output_map {{ {o} }} }}'
    )


def ensemble(*steps: str, head: str = IO, top: str = "") -> str:
    return ENS + head + top + "ensemble_scheduling {\n  step [\n" + ",\n".join(steps) + "\n  ]\n}\n"


DECOUPLED = 'backend: "python"\nmax_batch_size: 8\nmodel_transaction_policy { decoupled: true }\n'
