"""What ``import triton_python_backend_utils as pb_utils`` gives a Python-backend model.

The Python backend installs this module under that name while it loads a model's ``model.py``.
It holds the part of Triton's module that models use in ``initialize`` / ``execute`` /
``finalize``: tensors, requests, responses, errors and the config helpers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

TRITON_STRING_TO_NUMPY: dict[str, Any] = {
    "TYPE_BOOL": np.bool_, "TYPE_UINT8": np.uint8, "TYPE_UINT16": np.uint16, "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64, "TYPE_INT8": np.int8, "TYPE_INT16": np.int16, "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64, "TYPE_FP16": np.float16, "TYPE_FP32": np.float32, "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}
# InferenceRequest.flags() bits of a sequence's first and last request.
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
# DataType enum numbers of model_config.proto (TYPE_BOOL = 1 ... TYPE_STRING = 13).
_NUMPY_BY_ENUM = dict(enumerate(TRITON_STRING_TO_NUMPY.values(), start=1))


class TritonError:
    """An error a model puts in an ``InferenceResponse``; ``code`` is one of the class constants."""

    UNKNOWN, INTERNAL, NOT_FOUND, INVALID_ARG, UNAVAILABLE, UNSUPPORTED, ALREADY_EXISTS, CANCELLED = range(8)

    def __init__(self, message: str, code: int = INTERNAL):
        self._message = str(message)
        self._code = code

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code

    def __repr__(self) -> str:
        return f"TritonError({self._message!r})"


class TritonModelException(Exception):
    """Raised by these helpers when a model uses them wrongly."""


class Tensor:
    """A named tensor holding a numpy array (CPU memory)."""

    def __init__(self, name: str, data):
        if not isinstance(name, str):
            raise TritonModelException(f"a tensor's name must be a str, got {type(name).__name__}")
        array = np.asarray(data)
        if array.dtype.kind in "SU":
            array = array.astype(object)
        self._name = name
        self._data = array

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._data

    def shape(self) -> list[int]:
        return list(self._data.shape)

    def is_cpu(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"Tensor({self._name!r}, shape={self.shape()}, dtype={self._data.dtype})"


class InferenceRequest:
    """One request of the batch ``execute`` receives."""

    def __init__(self, model_name: str = "", inputs: list[Tensor] | None = None,
                 requested_output_names: list[str] | None = None, request_id: str = "",
                 correlation_id: int | str = 0,
                 flags: int = 0, parameters: dict | None = None, model_version: int = -1):
        self._model_name = model_name
        self._inputs = list(inputs or [])
        self._requested = list(requested_output_names or [])
        self._id = request_id
        self._correlation_id = correlation_id
        self._flags = flags
        self._parameters = dict(parameters or {})
        self._model_version = model_version

    def inputs(self) -> list[Tensor]:
        return list(self._inputs)

    def get_input_tensor_by_name(self, name: str) -> Tensor | None:
        return get_input_tensor_by_name(self, name)

    def requested_output_names(self) -> list[str]:
        return list(self._requested)

    def request_id(self) -> str:
        return self._id

    def correlation_id(self) -> int | str:
        """The sequence id (0 when none): an int, or a str for a string sequence id."""
        return self._correlation_id

    def flags(self) -> int:
        return self._flags

    def model_name(self) -> str:
        return self._model_name

    def model_version(self) -> int:
        return self._model_version

    def parameters(self) -> str:
        """The request's parameters as a JSON string, as Triton's Python backend gives them."""
        import json

        return json.dumps(self._parameters, default=str)

    def is_cancelled(self) -> bool:
        return False


class InferenceResponse:
    """The answer to one request: output tensors, or an error."""

    def __init__(self, output_tensors: list[Tensor] | None = None, error: TritonError | None = None):
        if error is not None and not isinstance(error, TritonError):
            raise TritonModelException("InferenceResponse's error must be a pb_utils.TritonError")
        self._outputs = list(output_tensors or [])
        self._error = error

    def output_tensors(self) -> list[Tensor]:
        return list(self._outputs)

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error


def get_input_tensor_by_name(inference_request: InferenceRequest, name: str) -> Tensor | None:
    return next((t for t in inference_request.inputs() if t.name() == name), None)


def get_output_tensor_by_name(inference_response: InferenceResponse, name: str) -> Tensor | None:
    return next((t for t in inference_response.output_tensors() if t.name() == name), None)


def get_input_config_by_name(model_config: dict, name: str) -> dict | None:
    return next((t for t in model_config.get("input", []) if t.get("name") == name), None)


def get_output_config_by_name(model_config: dict, name: str) -> dict | None:
    return next((t for t in model_config.get("output", []) if t.get("name") == name), None)


def using_decoupled_model_transaction_policy(model_config: dict) -> bool:
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled", False))


def triton_string_to_numpy(triton_type_string: str):
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def triton_to_numpy_type(data_type: int):
    return _NUMPY_BY_ENUM.get(data_type)


def numpy_to_triton_type(data_type) -> int | None:
    dtype = np.dtype(data_type)
    if dtype.kind in "SUO":
        return 13
    for number, numpy_type in _NUMPY_BY_ENUM.items():
        if np.dtype(numpy_type) == dtype:
            return number
    return None
