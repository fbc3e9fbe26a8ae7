"""KServe v2 inference JSON and Triton's binary tensor extension, both directions
(serving_protocol.md A.3-A.7)."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass

import numpy as np
import orjson

from tritonctl.serve.core.errors import ServeError, invalid_arg
from tritonctl.serve.core.log_settings import DATE_FORMATS, SETTABLE, file_not_settable
from tritonctl.serve.core.shm import REGION, SharedMemoryManager, manager_for, shm_params
from tritonctl.serve.core.tensors import checked_count, element_count, from_raw, to_raw
from tritonctl.serve.core.types import NUMPY_DTYPE, InferRequest, InferResponse, InferTensor, RequestedOutput
from tritonctl.serve.http.json_reader import syntax_error

RESERVED_PARAMETERS = {"sequence_id", "sequence_start", "sequence_end", "priority", "timeout", "headers",
                       "binary_data_output"}


NOT_STRING = "attempt to access JSON non-string as string"
NOT_UINT = "attempt to access JSON non-unsigned-integer as unsigned-integer"
NOT_BOOL = "attempt to access JSON non-boolean as boolean"
NOT_ARRAY = "attempt to access JSON non-array as array"
# TritonJson's refusal of a JSON value read as a datatype's element type
ELEMENT_READ_ERROR = {"BOOL": NOT_BOOL, "BYTES": NOT_STRING, "FP32": "attempt to access JSON non-number as double",
                      "FP64": "attempt to access JSON non-number as double"}
ELEMENT_READ_ERROR.update({f"INT{bits}": "attempt to access JSON non-signed-integer as signed-integer"
                           for bits in (8, 16, 32, 64)})
ELEMENT_READ_ERROR.update({f"UINT{bits}": NOT_UINT for bits in (8, 16, 32, 64)})


def unable_to_parse(field: str, reason: str) -> ServeError:
    return invalid_arg(f"Unable to parse '{field}': {reason}")


def missing_member(field: str) -> ServeError:
    return unable_to_parse(field, f"attempt to access non-existing object member '{field}'")


def is_uint64(value) -> bool:
    return type(value) is int and 0 <= value < 1 << 64


@dataclass(slots=True)
class HttpOutputOptions:
    binary_default: bool = False  # request-level binary_data_output


def _flatten(data: list) -> list:
    """The elements of ``data``, nested lists of any depth and mix read row-major (as Triton reads them)."""
    if not any(type(item) is list for item in data):
        return data
    flat: list = []
    for item in data:
        if type(item) is list:
            flat.extend(_flatten(item))
        else:
            flat.append(item)
    return flat


def _json_tensor(name: str, datatype: str, shape: list[int], data, model: str) -> np.ndarray:
    if datatype in ("FP16", "BF16"):
        raise invalid_arg(f"receiving {datatype} data via JSON is not supported. Please use the binary data format "
                          f"for input {name}")
    count = checked_count(shape, name, model)
    if not isinstance(data, list):
        raise unable_to_parse("data", NOT_ARRAY)
    flat = _flatten(data)
    if len(flat) != count:
        text = "Unable to parse 'data': Shape does not match true shape of 'data' field" if len(flat) > count \
            else "Failed to parse 'data' field: shape does not match true shape"
        raise invalid_arg(f"{text} for input '{name}' of model '{model}': the shape {shape} holds {count} "
                          f"elements, 'data' holds {len(flat)}")
    if datatype == "BYTES":
        out = np.empty(count, dtype=object)
        for i, item in enumerate(flat):
            if not isinstance(item, str):
                raise _element_error(name, datatype, model)
            out[i] = item.encode()
        return out.reshape(shape)
    dtype = NUMPY_DTYPE[datatype]
    try:
        if datatype == "BOOL":
            if not all(isinstance(v, bool) for v in flat):
                raise TypeError
        elif any(isinstance(v, (str, bool, list, dict)) or v is None for v in flat):
            raise TypeError
        elif dtype.kind in "iu" and any(type(v) is not int for v in flat):
            raise TypeError
        array = np.array(flat, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        raise _element_error(name, datatype, model) from None
    return array.reshape(shape)


def _element_error(name: str, datatype: str, model: str) -> ServeError:
    """Triton's refusal of a JSON element its datatype cannot read, then the input and model."""
    return invalid_arg(f"Unable to parse 'data': {ELEMENT_READ_ERROR[datatype]} (the values of input '{name}' of "
                       f"model '{model}' do not fit datatype {datatype})")


def parse_json(buffer) -> dict:
    value = parse_json_value(buffer)
    if not isinstance(value, dict):
        raise invalid_arg("failed to parse the request JSON buffer: the request must be a JSON object")
    return value


def parse_json_value(buffer):
    try:
        return orjson.loads(buffer)
    except orjson.JSONDecodeError as exc:
        value = _with_non_finite(buffer)
        if value is None:  # in Triton's words (RapidJSON's) where they are known
            raise invalid_arg(f"failed to parse the request JSON buffer: {syntax_error(buffer) or exc}") from None
        return value


def _with_non_finite(buffer):
    """The JSON value of ``buffer`` read with the NaN, Infinity and -Infinity tokens that Triton's
    reader (rapidjson) takes and orjson refuses; None when it is not JSON that way either."""
    data = bytes(buffer)
    if b"NaN" not in data and b"Infinity" not in data:
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def decode_request(body: bytes, header_length: int | None, model: str, version: str,
                   shm: SharedMemoryManager | None = None) -> tuple[InferRequest, HttpOutputOptions]:
    """``shm``: the server's registered shared-memory regions, which tensors may name.
    ``header_length``: the JSON's length (Inference-Header-Content-Length), None for the whole body."""
    if header_length is None:
        header, binary = body, memoryview(b"")
    else:
        view = memoryview(body)
        header, binary = view[:header_length], view[header_length:]
    doc = parse_json_value(header)
    if not isinstance(doc, dict):
        raise missing_member("inputs")
    options = HttpOutputOptions()
    request = InferRequest(model, {}, model_version=version, id=_request_id(doc))
    _read_parameters(doc.get("parameters"), request, options)
    inputs = doc.get("inputs")
    if not isinstance(inputs, list):
        raise missing_member("inputs") if "inputs" not in doc else unable_to_parse("inputs", NOT_ARRAY)
    offset = 0
    for entry in inputs:
        name, tensor, size = _input_tensor(entry, model, request, shm, binary, offset)
        if name in request.inputs:
            raise invalid_arg(f"[request id: {request.id or '<id_unknown>'}] input '{name}' already exists in request")
        request.inputs[name] = tensor
        offset += size
    if offset != len(binary):
        raise invalid_arg(f"unexpected additional input data for model '{model}'")
    if "outputs" in doc:
        request.requested_outputs = _requested_outputs(doc["outputs"], request, shm)
    return request, options


def _request_id(doc: dict) -> str:
    value = doc.get("id", "")
    if not isinstance(value, str):
        raise unable_to_parse("id", NOT_STRING)
    return value


def _input_tensor(entry, model: str, request: InferRequest, shm, binary, offset: int) -> tuple[str, InferTensor, int]:
    """(name, tensor, bytes of the binary data it took) of one entry of 'inputs', read as Triton
    reads it: which content it has, then its name, datatype and shape, then the content."""
    if not isinstance(entry, dict):
        raise invalid_arg(_content_error(False, False, False))
    params = entry.get("parameters")
    params = params if isinstance(params, dict) else {}
    size = params.get("binary_data_size")
    has_data = "data" in entry
    where = shm_params(params, entry.get("name"))
    if has_data + (size is not None) + (where is not None) != 1:
        raise invalid_arg(_content_error(has_data, size is not None, where is not None))
    name = _member_string(entry, "name")
    datatype = _member_string(entry, "datatype")
    if datatype not in NUMPY_DTYPE:
        raise invalid_arg(f"invalid datatype for input {name}")
    shape = _shape(entry, name, model)
    if where is not None:
        data = manager_for(shm, where).input_array(where, datatype, shape, name, model, request.id, holder=request)
        return name, InferTensor(name, datatype, data), 0
    if size is None:
        return name, InferTensor(name, datatype, _json_tensor(name, datatype, shape, entry["data"], model)), 0
    if not is_uint64(size):
        raise unable_to_parse("binary_data_size", NOT_UINT)
    if offset + size > len(binary):
        raise invalid_arg(f"unexpected size for input '{name}', expecting {offset + size - len(binary)} additional "
                          f"bytes for model '{model}'")
    data = from_raw(datatype, shape, binary[offset:offset + size], name, model, request.id)
    return name, InferTensor(name, datatype, data), size


def _member_string(entry: dict, field: str) -> str:
    if field not in entry:
        raise missing_member(field)
    value = entry[field]
    if not isinstance(value, str):
        raise unable_to_parse(field, NOT_STRING)
    return value


def _shape(entry: dict, name: str, model: str) -> list[int]:
    if "shape" not in entry:
        raise missing_member("shape")
    shape = entry["shape"]
    if not isinstance(shape, list):
        raise unable_to_parse("shape", NOT_ARRAY)
    if not all(type(d) is int and d >= 0 for d in shape):
        raise _shape_error(name, shape, model)
    return shape


def _requested_outputs(outputs, request: InferRequest, shm) -> list[RequestedOutput]:
    """The entries of 'outputs'; a name asked for again is taken once, as first asked (Triton)."""
    if not isinstance(outputs, list):
        raise unable_to_parse("outputs", NOT_ARRAY)
    requested: dict[str, RequestedOutput] = {}
    for entry in outputs:
        output = _requested_output(entry, request, shm)
        requested.setdefault(output.name, output)
    return list(requested.values())


def _requested_output(entry, request: InferRequest, shm) -> RequestedOutput:
    if not isinstance(entry, dict):
        raise missing_member("name")
    params = entry.get("parameters")
    params = params if isinstance(params, dict) else {}
    if REGION in params:
        if "classification" in params:
            raise invalid_arg("Output can't set both 'shared_memory_region' and 'classification'")
        if params.get("binary_data"):
            raise invalid_arg("Output can't set both 'shared_memory_region' and 'binary_data'")
    name = _member_string(entry, "name")
    classification = params.get("classification", 0)
    if not is_uint64(classification):
        raise invalid_arg(f"Unable to set 'classification': {NOT_UINT}")
    if "binary_data" in params and not isinstance(params["binary_data"], bool):
        raise unable_to_parse("binary_data", NOT_BOOL)
    output = RequestedOutput(name, classification, params)
    where = shm_params(params, name)
    if where is not None:
        output.shm = manager_for(shm, where).output_target(where, holder=request)
    return output


def _content_error(data: bool, binary: bool, shm: bool) -> str:
    """Triton's ValidateInputContentType text."""
    text = ("Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
            "'shared_memory_region' in 'parameters'. But")
    given = [f" '{name}'" for name, on in (("data", data), ("binary_data_size", binary),
                                           ("shared_memory_region", shm)) if on]
    return text + (" set" + "".join(given) if given else " no field is set")


def decode_raw_request(body: bytes, model, version: str) -> tuple[InferRequest, HttpOutputOptions]:
    """Triton's "raw binary request" (``Inference-Header-Content-Length: 0``): the whole body is the
    only input of a one-input model, taken as batch 1; every output comes back binary."""
    if len(model.inputs) != 1:
        raise invalid_arg(f"[request id: <id_unknown>] Raw request must only have 1 input (found 1) to be deduced "
                          f"but got {len(model.inputs)} inputs in '{model.name}' model configuration")
    spec = next(iter(model.inputs.values()))
    dims = spec.dims[1:] if model.max_batch_size > 0 else list(spec.dims)
    if spec.datatype == "BYTES":
        if -1 in dims or element_count(dims) != 1:
            raise invalid_arg(f"[request id: <id_unknown>] For BYTE datatype raw input '{spec.name}', the model "
                              "must have input shape [1]")
        shape = list(dims)
        data = np.empty(shape, dtype=object)  # the whole body is the one element (Triton adds no length prefix)
        data.reshape(-1)[0] = bytes(body)
    else:
        variable = [i for i, d in enumerate(dims) if d == -1]
        if len(variable) > 1:
            raise invalid_arg(f"[request id: <id_unknown>] The shape of the raw input '{spec.name}' can not be "
                              "deduced because there are more than one variable-sized dimension")
        fixed = element_count(d for d in dims if d != -1) * NUMPY_DTYPE[spec.datatype].itemsize
        shape = list(dims)
        if variable:
            if fixed == 0 or len(body) % fixed:
                raise invalid_arg(f"input byte size mismatch for input '{spec.name}' for model '{model.name}'")
            shape[variable[0]] = len(body) // fixed
        data = from_raw(spec.datatype, shape, body, spec.name, model.name)
    if model.max_batch_size > 0:
        data = data.reshape([1, *shape])
    request = InferRequest(model.name, {spec.name: InferTensor(spec.name, spec.datatype, data)}, model_version=version)
    return request, HttpOutputOptions(binary_default=True)


def _shape_error(name: str, shape, model: str) -> ServeError:
    """A 'shape' that is not a list of non-negative integers: Triton's text (its JSON reader's), then
    what is wrong. Triton answers it with 500, a client fault reported as a server one; here it is
    400 like every client fault (docs/compatibility.md)."""
    return invalid_arg("Unable to parse 'shape': attempt to access JSON non-unsigned-integer as "
                      f"unsigned-integer (the shape of input '{name}' of model '{model}' must be a list of "
                      f"non-negative integers, got {_clip(orjson.dumps(shape).decode())})")


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _read_parameters(params, request: InferRequest, options: HttpOutputOptions) -> None:
    if params is None:
        return
    if not isinstance(params, dict):
        raise invalid_arg("failed to get request params.: attempt to get members for non-object")
    for key, value in params.items():
        if key.startswith("triton_"):
            raise invalid_arg(f"parameter keys starting with 'triton_' are reserved for Triton usage and should "
                              f"not be specified (got '{key}')")
        if key == "priority":
            request.priority = _uint_parameter(key, value)
        elif key == "sequence_id":
            request.sequence_id = _sequence_id(value)
        elif key in ("sequence_start", "sequence_end"):
            setattr(request, key, _bool_parameter(key, value))
        elif key == "timeout":
            request.timeout_us = _uint_parameter(key, value)
        elif key == "binary_data_output":
            options.binary_default = _bool_parameter(key, value)
        elif key not in RESERVED_PARAMETERS:
            if value is None or isinstance(value, (dict, list)):
                raise invalid_arg(f"parameter '{key}' has invalid type. It should be either 'int', 'bool', or "
                                  "'string'.")
            request.parameters[key] = value


def _uint_parameter(key: str, value) -> int:
    if not is_uint64(value):
        raise unable_to_parse(key, NOT_UINT)
    return value


def _bool_parameter(key: str, value) -> bool:
    if not isinstance(value, bool):
        raise unable_to_parse(key, NOT_BOOL)
    return value


def _sequence_id(value) -> int | str:
    """A uint64, else a string, as Triton's HTTP front end reads ``sequence_id``."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2 ** 64:
        return value
    if isinstance(value, str):
        return value
    raise unable_to_parse("sequence_id", NOT_STRING)


class _RawTokens:
    """JSON text that orjson cannot write but Triton does, put in place after the dump: the bytes
    of a BYTES element that is not UTF-8 (Triton copies them into the string as they are) and
    the NaN, Infinity and -Infinity of a float output (rapidjson writes those tokens). Each is
    dumped as a stand-in string, then replaced in one pass."""

    def __init__(self):
        self.tokens: list[bytes] = []
        self.prefix = ""

    def stand_in(self, token: bytes) -> str:
        if not self.prefix:
            self.prefix = f"raw-json-{uuid.uuid4().hex}-"  # in no element
        self.tokens.append(token)
        return f"{self.prefix}{len(self.tokens) - 1}"

    def put_in_place(self, text: bytes) -> bytes:
        if not self.tokens:
            return text
        pattern = re.compile(b'"' + re.escape(self.prefix.encode()) + rb'(\d+)"')
        return pattern.sub(lambda match: self.tokens[int(match.group(1))], text)


_NON_FINITE = {"nan": b"NaN", "inf": b"Infinity", "-inf": b"-Infinity"}


def _json_data(tensor: InferTensor, raw: _RawTokens) -> list:
    if tensor.datatype in ("FP16", "BF16"):
        raise invalid_arg(f"sending {tensor.datatype} data via JSON is not supported. Please use the binary data "
                          f"format for output {tensor.name}")
    flat = tensor.data.reshape(-1)
    if tensor.datatype == "BYTES":
        values = []
        for item in flat:
            if not isinstance(item, bytes):
                values.append(str(item))
                continue
            try:
                values.append(item.decode("utf-8"))
            except UnicodeDecodeError:
                values.append(raw.stand_in(b'"' + _json_escape(item) + b'"'))
        return values
    values = flat.tolist()
    if flat.dtype.kind == "f" and not np.isfinite(flat).all():
        for index in np.flatnonzero(~np.isfinite(flat)):
            values[index] = raw.stand_in(_NON_FINITE[str(values[index])])
    return values


def _json_escape(value: bytes) -> bytes:
    """JSON string escaping for bytes that are not UTF-8: quote, backslash and control bytes
    escaped, every other byte copied. The response is then not UTF-8, as Triton's is, and
    tritonclient refuses it: "Failed to encode using UTF-8. Please use binary_data=True, if you
    want to pass a byte array." As binary data, such bytes arrive intact."""
    out = bytearray()
    for byte in value:
        if byte in (0x22, 0x5C):
            out += b"\\" + bytes([byte])
        elif byte < 0x20:
            out += b"\\u%04x" % byte
        else:
            out.append(byte)
    return bytes(out)


def encode_response(response: InferResponse, request: InferRequest, options: HttpOutputOptions) \
        -> tuple[list, int | None]:
    """(body parts, JSON header length or None when the body is pure JSON)."""
    wanted = {o.name: o.parameters for o in request.requested_outputs} if request.requested_outputs else {}
    in_shm = {o.name: o.shm for o in request.requested_outputs or () if o.shm is not None}
    tokens = _RawTokens()
    outputs = []
    binaries = []
    for tensor in response.outputs:
        params = wanted.get(tensor.name, {})
        binary = bool(params.get("binary_data", options.binary_default))
        item = {"name": tensor.name, "datatype": tensor.datatype, "shape": tensor.shape}
        if in_shm and tensor.name in in_shm:  # written to the region: the response carries no data (Triton)
            in_shm[tensor.name].write(tensor.name, tensor.datatype, tensor.data)
        elif binary:
            raw = to_raw(tensor.datatype, tensor.data)
            item["parameters"] = {"binary_data_size": len(raw)}
            binaries.append(raw)
        else:
            item["data"] = _json_data(tensor, tokens)
        outputs.append(item)
    doc = {}
    if response.id:
        doc["id"] = response.id
    doc["model_name"] = response.model_name
    doc["model_version"] = response.model_version
    if response.parameters:
        doc["parameters"] = response.parameters
    doc["outputs"] = outputs
    header = tokens.put_in_place(orjson.dumps(doc))
    if not binaries:
        return [header], None
    return [header, *binaries], len(header)


def error_body(error: ServeError | str) -> bytes:
    return orjson.dumps({"error": error.message if isinstance(error, ServeError) else error})




_KIND_CHECKS = {"bool": (lambda v: isinstance(v, bool), NOT_BOOL), "uint": (is_uint64, NOT_UINT),
                "string": (lambda v: isinstance(v, str), NOT_STRING)}


def log_changes(doc) -> dict:
    """The changes a POST to ``v2/logging`` asks for, read as Triton's HTTP front end reads them:
    a body that is not an object, unknown keys and null values change nothing."""
    if not isinstance(doc, dict):
        return {}
    if doc.get("log_file") is not None:
        raise file_not_settable()
    changes = {}
    for key, kind in SETTABLE.items():
        value = doc.get(key)
        if value is None:
            continue
        fits, refusal = _KIND_CHECKS[kind]
        if not fits(value):
            raise invalid_arg(refusal)
        if key == "log_format" and value not in DATE_FORMATS:
            raise invalid_arg(f"invalid argument for --log_format, got: {value}")
        changes[key] = value
    return changes
