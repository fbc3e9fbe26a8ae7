"""The generate extension's JSON (serving_protocol.md A.1, route 8), both directions, as Triton 2.51
maps it: each top-level key of the request that names a model input becomes that input's tensor,
shaped from the model's metadata; ``parameters`` (an object) is read the same way, one level
down; every other key becomes a request parameter. A response is one flat object: the outputs
(one element as a scalar, else a flat list), the response's parameters, ``id``, ``model_name`` and
``model_version``, keys in byte order."""

from __future__ import annotations

import numpy as np
import orjson

from tritonctl.serve.core.errors import ServeError, invalid_arg
from tritonctl.serve.core.tensors import check_string_count
from tritonctl.serve.core.types import NUMPY_DTYPE, InferRequest, InferResponse, InferTensor
from tritonctl.serve.http.codec import ELEMENT_READ_ERROR, NOT_STRING, _json_data, _RawTokens
from tritonctl.serve.http.json_reader import Pairs

NESTED = "parameters"  # the one keyword read as an object of its own
INT64 = (-(1 << 63), 1 << 63)
UINT64 = (0, 1 << 64)
PARAMETER_TYPES = "It should be either 'int', 'bool', or 'string'."


def shape_error(name: str) -> ServeError:
    return invalid_arg(f"The schema can not convert input '{name}' to tensor with proper shape")


def data_error(reason: str) -> ServeError:
    return invalid_arg(f"Unable to parse 'data': {reason}")


class GenerateDecoder:
    """One generate request's body -> an InferRequest of ``model``, whose inputs (metadata
    entries: name, datatype, shape) are ``inputs``."""

    def __init__(self, model: str, version: str, inputs: list[dict]):
        self.model = model
        self.version = version
        self.inputs = {entry["name"]: entry for entry in inputs}
        self.request = InferRequest(model, {}, model_version=version)
        self.string_counts: list[tuple[str, int, int]] = []  # BYTES inputs: (name, elements given, shape's)

    def decode(self, doc) -> InferRequest:
        if not isinstance(doc, Pairs):
            raise invalid_arg("attempt to get members for non-object")
        if "id" in doc.keys():
            request_id = doc.first("id")
            if not isinstance(request_id, str):
                raise invalid_arg(f"Unable to parse 'id': {NOT_STRING}")
            self.request.id = request_id
        self.members(doc, nested=False)
        self.check_string_counts()
        return self.request

    def members(self, doc: Pairs, nested: bool) -> None:
        """Every member, in order; a key given twice is read twice, each time with its first
        value (as Triton looks a key up)."""
        for key in doc.keys():
            if key == NESTED and not nested:
                self.nested(doc.first(key))
            elif key in self.inputs:
                self.input(key, doc.first(key))
            else:
                self.parameter(key, doc.first(key))

    def nested(self, value) -> None:
        if NESTED in self.inputs:
            raise invalid_arg(f"Keyword '{NESTED}' for nested schema also given as input tensor name")
        if not isinstance(value, Pairs):
            raise invalid_arg(f"Expected JSON object for keyword: '{NESTED}': attempt to access JSON non-object "
                              "as object")
        try:
            self.members(value, nested=True)
        except ServeError as exc:
            raise ServeError(exc.status, f"Converting keyword: '{NESTED}': {exc.message}") from None

    def parameter(self, key: str, value) -> None:
        if isinstance(value, str | bool) or (type(value) is int and INT64[0] <= value < INT64[1]):
            self.request.parameters[key] = value
        elif isinstance(value, int | float):  # beyond int64, or a decimal: a double
            self.request.parameters[key] = float(value)
        else:
            raise invalid_arg(f"parameter '{key}' has invalid type. {PARAMETER_TYPES}")

    def input(self, name: str, value) -> None:
        entry = self.inputs[name]
        datatype = entry["datatype"]
        count = len(value) if type(value) is list else 1
        strings = string_elements(value) if datatype == "BYTES" else None
        shape = distributed_shape(entry["shape"], count, name)
        if datatype in ("FP16", "BF16"):
            raise invalid_arg(f"receiving {datatype} data via JSON is not supported. Please use the binary data "
                              f"format for input {name}")
        if strings is not None:
            data = np.empty(len(strings), dtype=object)
            data[:] = strings
            self.string_counts.append((name, len(strings), count))
            if len(strings) == count:
                data = data.reshape(shape)
        else:
            data = numeric_tensor(value, datatype, count).reshape(shape)
        request = self.request
        if name in request.inputs:
            raise invalid_arg(f"[request id: {request.id or '<id_unknown>'}] input '{name}' already exists in "
                              "request")
        request.inputs[name] = InferTensor(name, datatype, data)

    def check_string_counts(self) -> None:
        """A BYTES input with more or fewer strings (nested lists) than its shape holds, refused as
        Triton refuses it once the request is formed."""
        rid = f"[request id: {self.request.id or '<id_unknown>'}] "
        for name, given, expected in self.string_counts:
            check_string_count(given, expected, name, self.model, rid)


def leaves(value):
    """The elements of a value read as tensor data: a list's, nested lists flattened in order (at
    any depth, without recursion); anything else is one element."""
    if type(value) is not list:  # an object (Pairs) is one element
        yield value
        return
    stack = [iter(value)]
    while stack:
        for item in stack[-1]:
            if type(item) is list:
                stack.append(iter(item))
                break
            yield item
        else:
            stack.pop()


def string_elements(value) -> list[bytes]:
    out = []
    for item in leaves(value):
        if not isinstance(item, str):
            raise invalid_arg(f"Unable to parse JSON bytes array: {NOT_STRING}")
        out.append(utf8(item))
    return out


def utf8(text: str) -> bytes:
    """The bytes the string was read from (a byte that is not UTF-8 kept, a lone surrogate
    escape as RapidJSON writes it)."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def distributed_shape(dims: list[int], count: int, name: str) -> list[int]:
    """The input's shape holding ``count`` elements: the fixed dimensions as declared, the innermost
    variable one taking what they leave, any other variable one 1."""
    left = count
    for dim in reversed(dims):
        if dim != -1:
            if dim <= 0 or left % dim:
                raise shape_error(name)
            left //= dim
    shape = list(dims)
    for index in reversed(range(len(shape))):
        if shape[index] == -1:
            shape[index], left = left, 1
    if left != 1:
        raise shape_error(name)
    return shape


def numeric_tensor(value, datatype: str, count: int) -> np.ndarray:
    """``count`` elements of ``datatype`` read as TritonJson reads them: integers of the wrong width
    wrapped as C casts them, a double narrowed to FP32 as C narrows it."""
    fits, wide = _READERS[datatype[:1] if datatype != "BOOL" else "BOOL"]
    values = []
    for item in leaves(value):
        if len(values) >= count:
            raise data_error("Shape does not match true shape of 'data' field")
        if not fits(item):
            raise data_error(ELEMENT_READ_ERROR[datatype])
        values.append(item)
    if len(values) != count:
        raise data_error("Shape does not match true shape of 'data' field")
    with np.errstate(over="ignore"):
        return np.array(values, dtype=wide).astype(NUMPY_DTYPE[datatype])


def _is_int(value, bounds: tuple[int, int]) -> bool:
    return type(value) is int and bounds[0] <= value < bounds[1]


_READERS = {
    "BOOL": (lambda v: type(v) is bool, np.bool_),
    "I": (lambda v: _is_int(v, INT64), np.int64),
    "U": (lambda v: _is_int(v, UINT64), np.uint64),
    "F": (lambda v: type(v) is float or type(v) is int, np.float64),
}


def encode_response(response: InferResponse) -> bytes:
    """The JSON of one response; ServeError for an output JSON cannot carry (FP16, BF16) or a
    parameter of bytes."""
    members = {}
    if response.id:
        members["id"] = response.id
    members["model_name"] = response.model_name
    members["model_version"] = response.model_version
    for key, value in response.parameters.items():
        if isinstance(value, bytes | bytearray):
            raise invalid_arg(f"Response parameter '{key}' has type 'TRITONSERVER_PARAMETER_BYTES' which is not "
                              "currently supported")
        members.setdefault(key, value)
    tokens = _RawTokens()
    for tensor in response.outputs:
        values = _json_data(tensor, tokens)
        members.setdefault(tensor.name, values[0] if len(values) == 1 else values)
    ordered = {key: members[key] for key in sorted(members, key=utf8)}
    return tokens.put_in_place(orjson.dumps(ordered))
