"""Broken configs that `tritonctl validate --fix` repairs, one or more per fixable code.

Each case is a model directory of a repository: an ONNX identity model, a Python identity
model or an ensemble over the ONNX one. The fixed configs must validate clean and load in
`tritonctl serve`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from onnx import TensorProto, helper

import onnx

IDENTITY_PY = '''import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", data)]))
        return responses
'''

ONNX = '''name: "{name}"
backend: "onnxruntime"
max_batch_size: 8
input [
  {{
    name: "INPUT0"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }}
]
output [
  {{
    name: "OUTPUT0"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }}
]
'''
PYTHON = ONNX.replace('backend: "onnxruntime"', 'backend: "python"')
GRID = ONNX.replace("dims: [ 4 ]", "dims: [ 2, 2 ]")  # the grid model: [batch, 2, 2]
ENSEMBLE = '''name: "{name}"
platform: "ensemble"
max_batch_size: 8
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }} ]
ensemble_scheduling {{
  step [
    {{
      model_name: "base"
      model_version: -1
      input_map {{ key: "INPUT0" value: "IN" }}
      output_map {{ key: "OUTPUT0" value: "OUT" }}
    }}
  ]
}}
'''


def identity_onnx(path: Path, shape: tuple = ("batch", 4)) -> None:
    graph = helper.make_graph([helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])], "identity",
                              [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, list(shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


@dataclass(frozen=True)
class Case:
    id: str  # also the model directory's name
    code: str  # the code the broken config gets, and --fix removes
    kind: str  # "onnx", "grid" (ONNX [batch, 2, 2]), "python" or "ensemble"
    old: str  # replaced in the kind's valid config ...
    new: str  # ... by this, to break it
    model_file: str = ""  # the model file's name in 1/ (default: model.onnx / model.py; none for ensembles)
    fixed: str | None = None  # what --fix turns ``new`` into; None: back to ``old``, the valid config
    last: bool = False  # break the last occurrence of ``old`` rather than the first

    @property
    def shape(self) -> tuple[int, ...]:
        return (2, 2) if self.kind == "grid" else (4,)

    def valid_config(self) -> str:
        template = {"onnx": ONNX, "grid": GRID, "python": PYTHON, "ensemble": ENSEMBLE}[self.kind]
        return template.format(name=self.id)

    def _replace(self, new: str) -> str:
        text = self.valid_config()
        assert self.old in text, (self.id, self.old)
        at = text.rindex(self.old) if self.last else text.index(self.old)
        return text[:at] + new + text[at + len(self.old):]

    def broken_config(self) -> str:
        return self._replace(self.new)

    def fixed_config(self) -> str:
        """The config --fix must produce, byte for byte."""
        return self._replace(self.old if self.fixed is None else self.fixed)

    def write(self, repo: Path) -> Path:
        model_dir = repo / self.id
        version = model_dir / "1"
        version.mkdir(parents=True, exist_ok=True)
        if self.kind in ("onnx", "grid"):
            identity_onnx(version / (self.model_file or "model.onnx"), ("batch",) + self.shape)
        elif self.kind == "python":
            (version / (self.model_file or "model.py")).write_text(IDENTITY_PY)
        (model_dir / "config.pbtxt").write_text(self.broken_config())
        return model_dir


CASES = [
    Case("txt01_colon", "TXT01", "onnx", "max_batch_size: 8", "max_batch_size 8"),
    Case("txt01_comma", "TXT01", "grid", "dims: [ 2, 2 ]", "dims: [ 2 2 ]"),
    Case("txt01_trailing_comma", "TXT01", "grid", "dims: [ 2, 2 ]", "dims: [ 2, 2, ]"),
    Case("txt02_inputs", "TXT02", "onnx", "input [", "inputs ["),
    Case("txt02_nested", "TXT02", "onnx", "data_type: TYPE_FP32", "datatype: TYPE_FP32"),
    Case("txt03_quoted_int", "TXT03", "onnx", "max_batch_size: 8", 'max_batch_size: "8"'),
    Case("txt03_bare_string", "TXT03", "onnx", 'backend: "onnxruntime"', "backend: onnxruntime"),
    Case("txt04_alias", "TXT04", "onnx", "data_type: TYPE_FP32", "data_type: TYPE_FLOAT32"),
    Case("txt04_nearest", "TXT04", "onnx", "max_batch_size: 8\n",
         "max_batch_size: 8\ninstance_group [ { kind: KIND_CPUU } ]\n",
         fixed="max_batch_size: 8\ninstance_group [ { kind: KIND_CPU } ]\n"),
    Case("txt04_quoted", "TXT04", "python", "data_type: TYPE_FP32", 'data_type: "TYPE_FP32"'),
    Case("txt06_same_twice", "TXT06", "onnx", "max_batch_size: 8\n", "max_batch_size: 8\nmax_batch_size: 8\n"),
    Case("txt52_map_key", "TXT52", "onnx", "max_batch_size: 8\n",
         'max_batch_size: 8\nparameters { key: "intra_op_thread_count" value { string_value: "2" } }\n'
         'parameters { key: "intra_op_thread_count" value { string_value: "1" } }\n',
         fixed='max_batch_size: 8\nparameters { key: "intra_op_thread_count" value { string_value: "1" } }\n'),
    Case("par50_key", "PAR50", "onnx", "max_batch_size: 8\n",
         'max_batch_size: 8\nparameters { key: "enable_mem_arna" value { string_value: "1" } }\n',
         fixed='max_batch_size: 8\nparameters { key: "enable_mem_arena" value { string_value: "1" } }\n'),
    Case("top02_name", "TOP02", "onnx", 'name: "top02_name"', 'name: "resnet"'),
    Case("db01_above_max", "DB01", "onnx", "max_batch_size: 8\n",
         "max_batch_size: 8\ndynamic_batching { preferred_batch_size: [ 4, 16 ] }\n",
         fixed="max_batch_size: 8\ndynamic_batching { preferred_batch_size: [ 4 ] }\n"),
    Case("db01_only_size", "DB01", "python", "max_batch_size: 8\n",
         "max_batch_size: 8\ndynamic_batching {\n  preferred_batch_size: 32\n  max_queue_delay_microseconds: 100\n}\n",
         fixed="max_batch_size: 8\ndynamic_batching {\n  max_queue_delay_microseconds: 100\n}\n"),
    Case("db51_twice", "DB51", "onnx", "max_batch_size: 8\n",
         "max_batch_size: 8\ndynamic_batching { preferred_batch_size: [ 4, 8, 4 ] }\n",
         fixed="max_batch_size: 8\ndynamic_batching { preferred_batch_size: [ 4, 8 ] }\n"),
    Case("io50_same_input", "IO50", "python", "    dims: [ 4 ]\n  }\n]\n",
         '    dims: [ 4 ]\n  },\n  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }\n]\n'),
    Case("io51_output_twice", "IO51", "onnx", "    dims: [ 4 ]\n  }\n]\n",
         '    dims: [ 4 ]\n  },\n  { name: "OUTPUT0" data_type: TYPE_FP16 dims: [ 9 ] }\n]\n', last=True),
    Case("ort05_batch_twice", "ORT05", "grid", "dims: [ 2, 2 ]", "dims: [ -1, 2, 2 ]"),
    Case("ort02_name", "ORT02", "onnx", 'name: "INPUT0"', 'name: "INPUT_0"'),
    Case("ort03_dtype", "ORT03", "onnx", "data_type: TYPE_FP32", "data_type: TYPE_INT32"),
    Case("ort05_dims", "ORT05", "onnx", "dims: [ 4 ]", "dims: [ 5 ]"),
    Case("io02_no_data_type", "IO02", "onnx", "    data_type: TYPE_FP32\n", ""),
    Case("io03_no_dims", "IO03", "onnx", "    dims: [ 4 ]\n", "", last=True),
    Case("ens10_model_name", "ENS10", "ensemble", 'model_name: "base"', 'model_name: "base_"'),
    Case("ens14_input_key", "ENS14", "ensemble", 'key: "INPUT0"', 'key: "INPUT_0"'),
    Case("ens16_output_key", "ENS16", "ensemble", 'key: "OUTPUT0"', 'key: "output0"'),
    Case("pb03_pair", "PB03", "onnx", 'backend: "onnxruntime"\n', 'backend: "onnxruntime"\nplatform: "tensorrt_plan"\n',
         fixed='backend: "onnxruntime"\nplatform: "onnxruntime_onnx"\n'),
    Case("pb01_alias", "PB01", "onnx", 'backend: "onnxruntime"', 'platform: "onnx"',
         fixed='platform: "onnxruntime_onnx"'),
    Case("pb01_backend_as_platform", "PB01", "python", 'backend: "python"', 'platform: "python"'),
    Case("pb02_ensemble_backend", "PB02", "ensemble", 'platform: "ensemble"\n',
         'platform: "ensemble"\nbackend: "onnxruntime"\n'),
    Case("pb05_no_platform", "PB05", "ensemble", 'platform: "ensemble"\n', ""),
    Case("pb08_onnx_file", "PB08", "onnx", 'backend: "onnxruntime"\n', "", model_file="identity.onnx",
         fixed='backend: "onnxruntime"\ndefault_model_filename: "identity.onnx"\n'),
    Case("pb08_python_file", "PB08", "python", 'backend: "python"\n', "", model_file="identity.py",
         fixed='backend: "python"\ndefault_model_filename: "identity.py"\n'),
    Case("pb09_filename", "PB09", "onnx", 'backend: "onnxruntime"', 'default_model_filename: "identity.onnx"',
         model_file="identity.onnx", fixed='default_model_filename: "identity.onnx"\nbackend: "onnxruntime"'),
    Case("pb50_cc_key", "PB50", "onnx", "max_batch_size: 8\n",
         'max_batch_size: 8\ncc_model_filenames { key: "86" value: "model.onnx" }\n',
         fixed='max_batch_size: 8\ncc_model_filenames { key: "8.6" value: "model.onnx" }\n'),
    Case("pb51_typo", "PB51", "onnx", 'backend: "onnxruntime"', 'backend: "onnxrutime"'),
    Case("pb51_python_typo", "PB51", "python", 'backend: "python"', 'backend: "pyton"'),
]


def write_base(repo: Path) -> None:
    """The model the ensembles run."""
    Case("base", "", "onnx", "", "").write(repo)
