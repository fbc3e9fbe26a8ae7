"""The models of Triton's QA test.sh files that tests/integration/serve/test_serve_triton_compat.py
and tests/integration/test_triton_qa_differential.py serve, as Python models (standing in for the
C++ identity backend and the ONNX identity models), made in code."""

from __future__ import annotations

import textwrap
from pathlib import Path

IDENTITY = '''
import json
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.pairs = list(zip([i["name"] for i in config["input"]], [o["name"] for o in config["output"]]))

    def execute(self, requests):
        responses = []
        for request in requests:
            outputs = []
            for name, output in self.pairs:
                tensor = pb_utils.get_input_tensor_by_name(request, name)
                if tensor is not None:
                    outputs.append(pb_utils.Tensor(output, tensor.as_numpy()))
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
'''

# qa/L0_parameters/model_repository/parameter: the request's parameters as two BYTES outputs
# (values put in an object array as json.loads gives them), plus the JSON text itself.
PARAMETERS = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = request.parameters()
            parameters = json.loads(text)
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("key", np.asarray(list(parameters.keys()), dtype=object)),
                pb_utils.Tensor("value", np.asarray(list(parameters.values()), dtype=object)),
                pb_utils.Tensor("text", np.asarray([text.encode()], dtype=object))]))
        return responses
'''

NOT_UTF8 = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        data = np.array([b"\\xff\\xfeok", b'quote " and \\\\ \\x01'], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", data)]) for _ in requests]
'''

NON_FINITE = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            given = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            data = np.concatenate([given, np.array([np.nan, np.inf, -np.inf, 1.5], np.float32)])
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", data)]))
        return responses
'''

FAILING = '''
class TritonPythonModel:
    def execute(self, requests):
        raise RuntimeError("refused")
'''


def _tensor(name: str, datatype: str, dims: str, optional: bool = False) -> str:
    return f'{{ name: "{name}" data_type: {datatype} dims: {dims}{" optional: true" if optional else ""} }}'


def _model(repo: Path, name: str, max_batch_size: int, inputs: list[str], outputs: list[str],
           code: str = IDENTITY) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: {max_batch_size}\n'
        f'input [ {", ".join(inputs)} ]\noutput [ {", ".join(outputs)} ]\n')
    (repo / name / "1" / "model.py").write_text(textwrap.dedent(code))


def compat_repository(repo: Path) -> Path:
    """The models of Triton's test.sh files that these cases use, as Python models: identity
    models named as qa_identity_model_repository names them, L0_input_validation's optional-input
    models, L0_parameters' parameter model, one that answers non-UTF-8 BYTES and one that fails."""
    fp32 = ("TYPE_FP32", "[ -1 ]")
    _model(repo, "onnx_zero_1_float32", 8, [_tensor("INPUT0", *fp32)], [_tensor("OUTPUT0", *fp32)])
    _model(repo, "onnx_zero_3_float32", 8, [_tensor(f"INPUT{i}", *fp32) for i in range(3)],
           [_tensor(f"OUTPUT{i}", *fp32) for i in range(3)])
    _model(repo, "onnx_zero_1_object_1_element", 8, [_tensor("INPUT0", "TYPE_STRING", "[ 1 ]")],
           [_tensor("OUTPUT0", "TYPE_STRING", "[ 1 ]")])
    _model(repo, "onnx_zero_1_object", 8, [_tensor("INPUT0", "TYPE_STRING", "[ -1 ]")],
           [_tensor("OUTPUT0", "TYPE_STRING", "[ -1 ]")])
    _model(repo, "onnx_zero_1_float16", 8, [_tensor("INPUT0", "TYPE_FP16", "[ -1, -1 ]")],
           [_tensor("OUTPUT0", "TYPE_FP16", "[ -1, -1 ]")])
    one = ("TYPE_FP32", "[ 1 ]")
    _model(repo, "input_all_required", 0, [_tensor(f"INPUT{i}", *one) for i in range(3)],
           [_tensor("OUTPUT0", *one)])
    _model(repo, "input_optional", 0, [_tensor(f"INPUT{i}", *one, optional=i == 3) for i in range(4)],
           [_tensor("OUTPUT0", *one)])
    _model(repo, "parameter", 0, [_tensor("INPUT0", *one)],
           [_tensor("key", "TYPE_STRING", "[ -1 ]"), _tensor("value", "TYPE_STRING", "[ -1 ]"),
            _tensor("text", "TYPE_STRING", "[ 1 ]")], PARAMETERS)
    _model(repo, "not_utf8", 0, [_tensor("INPUT0", *one)], [_tensor("OUTPUT0", "TYPE_STRING", "[ 2 ]")], NOT_UTF8)
    _model(repo, "non_finite", 0, [_tensor("INPUT0", *one)], [_tensor("OUTPUT0", "TYPE_FP32", "[ 5 ]")], NON_FINITE)
    _model(repo, "failing", 0, [_tensor("INPUT0", *one)], [_tensor("OUTPUT0", *one)], FAILING)
    return repo
