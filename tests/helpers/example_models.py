"""The models tritonclient's Python examples expect (Triton's docs/examples/model_repository and
the QA model `custom_identity_int32`), as Python-backend models made in code: seven models, the
count the model-control examples check in the repository index."""

from __future__ import annotations

from pathlib import Path

from helpers.serve_models import write_python_model

ADD_SUB_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


def inputs(request):
    return [pb_utils.get_input_tensor_by_name(request, name).as_numpy() for name in ("INPUT0", "INPUT1")]


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a, b = inputs(request)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", a + b),
                                                         pb_utils.Tensor("OUTPUT1", a - b)]))
        return responses
"""

STRING_ADD_SUB_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


def as_strings(values):
    return np.array([str(v).encode() for v in values.reshape(-1)], dtype=np.object_).reshape(values.shape)


class TritonPythonModel:
    \"\"\"BYTES elements holding decimal numbers: OUTPUT0 their sum, OUTPUT1 their difference.\"\"\"

    def execute(self, requests):
        responses = []
        for request in requests:
            a, b = (pb_utils.get_input_tensor_by_name(request, name).as_numpy().astype(np.int32)
                    for name in ("INPUT0", "INPUT1"))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", as_strings(a + b)),
                                                         pb_utils.Tensor("OUTPUT1", as_strings(a - b))]))
        return responses
"""

IDENTITY_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUT0", pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy())]) for request in requests]
"""

SEQUENCE_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


def tensor(request, name):
    found = pb_utils.get_input_tensor_by_name(request, name)
    return None if found is None else found.as_numpy()


class TritonPythonModel:
    \"\"\"OUTPUT = INPUT, plus 1 on a sequence's first request (START); with a CORRID control, plus
    the correlation ID on its last (END): what the examples' simple_sequence and
    simple_dyna_sequence give.\"\"\"

    def execute(self, requests):
        responses = []
        for request in requests:
            value = tensor(request, "INPUT") * tensor(request, "READY") + tensor(request, "START")
            corrid = tensor(request, "CORRID")
            if corrid is not None:
                value = value + (corrid * tensor(request, "END")).astype(np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", value.astype(np.int32))]))
        return responses
"""


def _io(direction: str, datatype: str, dims: str, names: tuple[str, ...]) -> str:
    tensors = ", ".join(f'{{ name: "{name}" data_type: {datatype} dims: [ {dims} ] }}' for name in names)
    return f"{direction} [ {tensors} ]\n"


def _control(name: str, kind: str, extra: str = "int32_false_true: [ 0, 1 ]") -> str:
    return f'{{ name: "{name}" control [ {{ kind: {kind} {extra} }} ] }}'


def _sequence_config(controls: list[str]) -> str:
    return ("max_batch_size: 8\n" + _io("input", "TYPE_INT32", "1", ("INPUT",))
            + _io("output", "TYPE_INT32", "1", ("OUTPUT",))
            + "sequence_batching { control_input [ " + ", ".join(controls) + " ] }\n")


def example_repository(repo: Path) -> Path:
    """simple (INT32 add/sub), simple_int8, simple_string, simple_identity (BYTES), simple_sequence,
    simple_dyna_sequence and custom_identity_int32."""
    pair, outs = ("INPUT0", "INPUT1"), ("OUTPUT0", "OUTPUT1")
    for name, datatype, code in (("simple", "TYPE_INT32", ADD_SUB_PY), ("simple_int8", "TYPE_INT8", ADD_SUB_PY),
                                 ("simple_string", "TYPE_STRING", STRING_ADD_SUB_PY)):
        write_python_model(repo, name, "max_batch_size: 8\n" + _io("input", datatype, "16", pair)
                           + _io("output", datatype, "16", outs), code)
    for name, datatype in (("simple_identity", "TYPE_STRING"), ("custom_identity_int32", "TYPE_INT32")):
        write_python_model(repo, name, "max_batch_size: 8\n" + _io("input", datatype, "-1", ("INPUT0",))
                           + _io("output", datatype, "-1", ("OUTPUT0",)), IDENTITY_PY)
    start, ready = _control("START", "CONTROL_SEQUENCE_START"), _control("READY", "CONTROL_SEQUENCE_READY")
    write_python_model(repo, "simple_sequence", _sequence_config([start, ready]), SEQUENCE_PY)
    write_python_model(repo, "simple_dyna_sequence", _sequence_config([
        start, ready, _control("END", "CONTROL_SEQUENCE_END"),
        _control("CORRID", "CONTROL_SEQUENCE_CORRID", "data_type: TYPE_UINT64")]), SEQUENCE_PY)
    return repo
