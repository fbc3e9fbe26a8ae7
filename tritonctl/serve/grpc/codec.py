"""ModelInferRequest -> InferRequest and InferResponse -> ModelInferResponse
(serving_protocol.md A.6): raw contents in and out, typed contents accepted on input."""

from __future__ import annotations

import struct

import numpy as np

from tritonctl.serve.core.errors import invalid_arg, not_found
from tritonctl.serve.core.log_settings import DATE_FORMATS, SETTABLE, file_not_settable
from tritonctl.serve.core.shm import (BYTE_SIZE, OFFSET, REGION, SharedMemoryManager, ShmParams, manager_for,
                                      shm_params)
from tritonctl.serve.core.tensors import from_raw, to_raw
from tritonctl.serve.core.types import NUMPY_DTYPE, InferRequest, InferResponse, InferTensor, RequestedOutput

# The fields of InferTensorContents in the order Triton reads them, each with the datatype it holds;
# int_contents and uint_contents also hold the narrower types, as each element's low bytes.
CONTENTS_FIELDS = {"bool_contents": "BOOL", "int_contents": "INT32", "int64_contents": "INT64",
                   "uint_contents": "UINT32", "uint64_contents": "UINT64", "fp32_contents": "FP32",
                   "fp64_contents": "FP64", "bytes_contents": "BYTES"}
NARROWER = {"int_contents": ("INT8", "INT16"), "uint_contents": ("UINT8", "UINT16")}


def parameter_value(param):
    which = param.WhichOneof("parameter_choice")
    return getattr(param, which) if which else None


def typed_contents(tensor, model: str) -> bytes:
    """The raw bytes of a tensor sent in typed contents, as Triton's gRPC front end makes them: each
    non-empty field in turn must hold the tensor's datatype, and only one may be set. Its byte size
    is checked afterwards, as raw contents are."""
    data = b""
    for field, held in CONTENTS_FIELDS.items():
        values = getattr(tensor.contents, field)
        if not values:
            continue
        if tensor.datatype in NARROWER.get(field, ()):
            held = tensor.datatype
        if data:
            raise invalid_arg(f"unexpected explicit tensor data for input tensor '{tensor.name}' for model '{model}', "
                              "binary data was already supplied.")
        if held != tensor.datatype:
            expected = tensor.datatype if tensor.datatype in NUMPY_DTYPE else "<invalid>"
            raise invalid_arg(f"unexpected explicit tensor data for input tensor '{tensor.name}' for model '{model}' "
                              f"of type '{held}', expected datatype '{expected}'")
        if held == "BYTES":
            data = b"".join(struct.pack("<I", len(value)) + value for value in values)
        else:  # the narrower types keep each value's low bytes, as a C cast does
            data = np.array(values, NUMPY_DTYPE[CONTENTS_FIELDS[field]]).astype(NUMPY_DTYPE[held]).tobytes()
    return data


SEQUENCE_PARAMETERS = ("sequence_id", "sequence_start", "sequence_end")


def _sequence_parameter(request: InferRequest, key: str, param) -> None:
    """Triton's gRPC front end: ``sequence_id`` an int64 (read as uint64) or a string, the flags bools."""
    which = param.WhichOneof("parameter_choice")
    if key == "sequence_id":
        if which in ("int64_param", "uint64_param"):
            request.sequence_id = getattr(param, which) & 0xFFFF_FFFF_FFFF_FFFF
        elif which == "string_param":
            request.sequence_id = param.string_param
        else:
            raise invalid_arg("invalid value type for 'sequence_id' parameter, expected int64_param or "
                              "string_param.")
    elif which == "bool_param":
        setattr(request, key, param.bool_param)
    else:
        raise invalid_arg(f"invalid value type for '{key}' parameter, expected bool_param.")


ENABLE_EMPTY_FINAL = "triton_enable_empty_final_response"  # the one 'triton_' request key Triton allows


def _reserved_parameter(key: str, param) -> None:
    if key != ENABLE_EMPTY_FINAL:
        raise invalid_arg(f"parameter keys starting with 'triton_' are reserved for Triton usage. Only the following "
                          f"keys starting with 'triton_' are allowed: {ENABLE_EMPTY_FINAL}")
    if param.WhichOneof("parameter_choice") != "bool_param":
        raise invalid_arg(f"invalid value type for '{key}' parameter, expected bool_param.")


def _shm_where(params, tensor: str) -> ShmParams | None:
    """A tensor's shared-memory parameters; Triton takes only a string_param region and
    int64_param offset and byte size."""
    if not params:
        return None
    values = {}
    for key, kind in ((REGION, "string_param"), (OFFSET, "int64_param"), (BYTE_SIZE, "int64_param")):
        if key in params:
            param = params[key]
            values[key] = getattr(param, kind) if param.WhichOneof("parameter_choice") == kind else _WRONG_TYPE
    return shm_params(values, tensor, grpc=True)


_WRONG_TYPE = object()


def check_named(model: str) -> None:
    """Triton's answer to a request that names no model: no model has the empty name."""
    if not model:
        raise not_found("Request for unknown model: '' is not found")


def decode_request(message, shm: SharedMemoryManager | None = None, raw: list | None = None) -> InferRequest:
    """``shm``: the server's registered shared-memory regions, which tensors may name; ``raw``:
    the raw input contents where they were taken out of ``message`` (``wire.split_request``)."""
    model = message.model_name
    check_named(model)
    request = InferRequest(model, {}, model_version=message.model_version, id=message.id)
    for key, param in message.parameters.items():
        _read_parameter(request, key, param)
    if raw is None:
        raw = message.raw_input_contents
    index = 0
    for tensor in message.inputs:
        data, index = _input_data(tensor, request, shm, raw, index)
        if tensor.name in request.inputs:
            raise invalid_arg(f"[request id: {request.id or '<id_unknown>'}] input '{tensor.name}' already exists in "
                              "request")
        request.inputs[tensor.name] = InferTensor(tensor.name, tensor.datatype, data)
    if message.outputs:
        requested: dict[str, RequestedOutput] = {}
        for output in message.outputs:
            requested.setdefault(output.name, _requested_output(output, request, shm))
        request.requested_outputs = list(requested.values())
    return request


def _read_parameter(request: InferRequest, key: str, param) -> None:
    """One request parameter, checked as Triton's gRPC front end checks it."""
    if key.startswith("triton_"):
        _reserved_parameter(key, param)  # read by the stream handler, not a model parameter
        return
    which = param.WhichOneof("parameter_choice")
    if key == "priority":
        if which not in ("int64_param", "uint64_param"):
            raise invalid_arg("invalid value type for 'priority' parameter, expected int64_param or uint64_param.")
        if getattr(param, which) < 0:
            raise invalid_arg("invalid value for 'priority', expected value >= 0.")
        request.priority = getattr(param, which)
    elif key == "timeout":
        if which != "int64_param":
            raise invalid_arg("invalid value type for 'timeout' parameter, expected int64_param.")
        request.timeout_us = param.int64_param
    elif key in SEQUENCE_PARAMETERS:
        _sequence_parameter(request, key, param)
    elif key != "headers":
        if which is None:
            raise invalid_arg(f"invalid value type for '{key}' parameter, expected int64_param, bool_param, or "
                              "string_param.")
        request.parameters[key] = getattr(param, which)


def _input_data(tensor, request: InferRequest, shm, raw, index: int) -> tuple[np.ndarray, int]:
    """(the tensor's data, the index of the next raw contents), found as Triton finds it: shared
    memory, else its typed contents (not beside raw contents), else the next raw contents."""
    model = request.model_name
    shape = list(tensor.shape)
    if any(d < 0 for d in shape):
        raise invalid_arg(f"invalid shape {shape} for input '{tensor.name}' of model '{model}'")
    where = _shm_where(tensor.parameters, tensor.name)
    if where is not None:
        if tensor.HasField("contents"):
            raise invalid_arg(f"unexpected 'content' provided when using shared memory for input tensor "
                              f"'{tensor.name}' for model '{model}'")
        data = manager_for(shm, where).input_array(where, tensor.datatype, shape, tensor.name, model, request.id,
                                                   holder=request)
        return data, index
    if tensor.HasField("contents"):
        if raw:
            raise invalid_arg(f"contents field must not be specified when using raw_input_contents for "
                              f"'{tensor.name}' for model '{model}'")
        buffer = typed_contents(tensor, model)
    elif index >= len(raw):
        raise invalid_arg(f"unable to find data for input tensor '{tensor.name}' for model '{model}' in request.")
    else:
        buffer = raw[index]
        index += 1
    return from_raw(tensor.datatype, shape, buffer, tensor.name, model, request.id), index


def _requested_output(output, request: InferRequest, shm) -> RequestedOutput:
    classification = output.parameters.get("classification")
    count = 0
    if classification is not None:
        if classification.WhichOneof("parameter_choice") != "int64_param":
            raise invalid_arg("invalid value type for 'classification' parameter, expected int64_param")
        count = classification.int64_param
        if count < 0:
            raise invalid_arg("invalid value for 'classification' parameter, expected >= 0")
    requested = RequestedOutput(output.name, count)
    where = _shm_where(output.parameters, output.name)
    if where is not None:
        if classification is not None:
            raise invalid_arg("output can't set both 'shared_memory_region' and 'classification'")
        requested.shm = manager_for(shm, where).output_target(where, holder=request)
    return requested


def set_parameter(param, value) -> None:
    """An InferParameter holding ``value`` (bool, int or str, as response parameters are)."""
    if isinstance(value, bool):
        param.bool_param = value
    elif isinstance(value, int):
        param.int64_param = value
    else:
        param.string_param = str(value)


def encode_response(response: InferResponse, service_pb2, request: InferRequest | None = None):
    """``request``: where its requested outputs go to shared memory, they are written there and
    their raw contents left empty (Triton)."""
    message, raw = encode_response_parts(response, service_pb2, request)
    message.raw_output_contents.extend(bytes(buffer) for buffer in raw)
    return message


def encode_response_parts(response: InferResponse, service_pb2, request: InferRequest | None = None):
    """(the ModelInferResponse without raw_output_contents, those contents as buffers over the
    output arrays): for ``wire.join_response``, which copies each once."""
    message = service_pb2.ModelInferResponse(model_name=response.model_name, model_version=response.model_version,
                                             id=response.id)
    for key, value in response.parameters.items():
        set_parameter(message.parameters[key], value)
    raw = []
    in_shm = {o.name: o.shm for o in request.requested_outputs or () if o.shm is not None} if request else {}
    for tensor in response.outputs:
        message.outputs.add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
        if in_shm and tensor.name in in_shm:
            in_shm[tensor.name].write(tensor.name, tensor.datatype, tensor.data)
            raw.append(b"")
        else:
            raw.append(to_raw(tensor.datatype, tensor.data))
    return message, raw


_LOG_FIELDS = {"bool": ("bool_param", "boolean"), "uint": ("uint32_param", "int32"), "string": ("string_param", "string")}


def log_changes(settings) -> dict:
    """The changes a LogSettings request asks for, checked as Triton's gRPC front end checks them
    (each setting's own parameter field; names it does not know change nothing)."""
    if "log_file" in settings:
        raise file_not_settable()
    changes = {}
    for key, kind in SETTABLE.items():
        if key not in settings:
            continue
        field, words = _LOG_FIELDS[kind]
        if settings[key].WhichOneof("parameter_choice") != field:
            raise invalid_arg(f"expect {words} for '{key}'")
        value = getattr(settings[key], field)
        if key == "log_format" and value not in DATE_FORMATS:
            raise invalid_arg(f"invalid argument for log_format, got: {value}")
        changes[key] = value
    return changes
