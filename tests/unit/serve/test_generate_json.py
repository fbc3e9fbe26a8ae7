"""The generate extension's request mapping (generate_codec.py) and the JSON reader under it
(json_reader.py, Triton's RapidJSON semantics). The values and texts asserted here are what
Triton 2.51 read or answered (helpers/generate_cases.py has the whole requests). Property-based:
any bytes are a value or a RapidJSON refusal; both read paths agree; any JSON value given for any
input becomes a tensor of the input's datatype and a shape its dims allow, or a 400, nothing else."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritonctl.serve.core.errors import ServeError, Status
from tritonctl.serve.core.types import NUMPY_DTYPE, InferResponse, InferTensor
from tritonctl.serve.http.generate_codec import GenerateDecoder, encode_response
from tritonctl.serve.http.json_reader import JsonSyntaxError, Pairs, _Reader, _document, read, syntax_error

SETTINGS = settings(max_examples=300, deadline=None)

# What Triton 2.51 read (the doubles a Python model saw in its parameters).
NUMBERS = {
    b"1.2345678901234567890123": 1.234567890123457,
    b"123456789012345678901234567890": 1.2345678901234566e+29,
    b"100000000000000000000000000000000000000": 9.999999999999998e+37,
    b"-9223372036854775809": -9.223372036854776e+18,
    b"18446744073709551615": 18446744073709551615,
    b"-9223372036854775808": -9223372036854775808,
    b"1e-320": 1e-320,
    b"2.2250738585072014e-308": 2.2250738585072014e-308,
    b"NaN.5": 0.5,
    b"-0": 0,
}

# What Triton 2.51 refused, in its words.
REFUSALS = {
    b"": "The document is empty. at 0",
    b"not json": "Invalid value. at 1",
    b'{"PROMPT": "a", "STREAM": false': "Missing a comma or '}' after an object member. at 31",
    b'{"x": 1e400}': "Number too big to be stored in double. at 6",
    b'{"F32": 0e400}': "Number too big to be stored in double. at 8",
    b'{"x": "a\\ud800b"}': "The surrogate pair in string is invalid. at 8",
    b'{"a": "\\ud800\\u0041"}': "The surrogate pair in string is invalid. at 7",
    b'{"F32": Infinit}': "Invalid value. at 15",
    b'{"F32": [1,]}': "Invalid value. at 11",
    b'{"F32": [01]}': "Missing a comma or ']' after an array element. at 10",
    b'{"F32": -}': "Invalid value. at 9",
    b'{"F32": 1.}': "Miss fraction part in number. at 10",
    b'{"a": "x\ty"}': "Invalid escape character in string. at 8",
    b'{"a":1,}': "Missing a name for object member. at 7",
    b"{} x": "The document root must not be followed by other values. at 3",
}


@pytest.mark.parametrize("literal, value", NUMBERS.items())
def test_numbers_read_as_tritons_reader_reads_them(literal, value):
    assert read(literal) == value and type(read(literal)) is type(value)


@pytest.mark.parametrize("body, message", REFUSALS.items())
def test_refusals_in_tritons_words(body, message):
    with pytest.raises(JsonSyntaxError) as refused:
        read(body)
    assert str(refused.value) == message
    assert syntax_error(body) == message


def test_a_document_ends_at_a_nul_and_after_a_bom():
    assert read(b'{"F32":[1]}\x00garbage') == [("F32", [1])]
    assert read('\ufeff{"F32":[1]}'.encode()) == [("F32", [1])]
    assert read(b'{"a": 1, "a": 2}').first("a") == 1  # duplicates kept, the first found


def json_values(max_leaves: int = 20):
    scalars = st.none() | st.booleans() | st.integers(-(1 << 70), 1 << 70) | st.floats(allow_nan=True) | st.text()
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner,
                                                                                               max_size=5),
                        max_leaves=max_leaves)


def same(a, b) -> bool:
    """Equal, NaN equal to NaN, types kept."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, tuple):
        return a[0] == b[0] and same(a[1], b[1])
    return a == b


@SETTINGS
@given(value=json_values())
def test_both_read_paths_agree(value):
    data = json.dumps(value).encode()
    fast = read(data)
    document, start = _document(data)
    slow = _Reader(document).document(start)
    assert same(fast, slow)


@SETTINGS
@given(data=st.binary(max_size=64) | json_values().map(lambda v: json.dumps(v).encode()[:-1]))
def test_any_bytes_are_a_value_or_a_refusal(data):
    try:
        read(data)
    except JsonSyntaxError:
        assert syntax_error(data) is not None
    else:
        assert syntax_error(data) is None


INPUTS = [{"name": f"{datatype}_{index}", "datatype": datatype, "shape": shape}
          for index, shape in enumerate([[-1], [1, 1], [2, -1], [-1, 2], [2, 3], [-1, -1], [], [1, -1, 1]])
          for datatype in ["BOOL", "INT8", "INT64", "UINT8", "UINT64", "FP32", "FP64", "BYTES", "FP16"]]


def decoded(body: bytes):
    return GenerateDecoder("m", "", INPUTS).decode(read(body))


@SETTINGS
@given(entry=st.sampled_from(INPUTS), value=json_values())
def test_any_json_value_for_any_input_is_a_tensor_or_a_400(entry, value):
    name = entry["name"]
    try:
        request = decoded(json.dumps({name: value}).encode())
    except ServeError as exc:
        assert exc.status is Status.INVALID_ARG and exc.message
        return
    tensor = request.inputs[name]
    count = len(value) if type(value) is list else 1
    assert tensor.data.dtype == (object if entry["datatype"] == "BYTES" else NUMPY_DTYPE[entry["datatype"]])
    assert tensor.data.size == count
    assert len(tensor.shape) == len(entry["shape"])
    assert all(dim == declared for dim, declared in zip(tensor.shape, entry["shape"]) if declared != -1)


@SETTINGS
@given(value=json_values(40))
def test_any_json_document_is_a_request_or_a_400(value):
    try:
        request = decoded(json.dumps(value).encode())
    except ServeError as exc:
        assert exc.status is Status.INVALID_ARG
    else:
        assert all(isinstance(v, str | bool | int | float) for v in request.parameters.values())


def test_values_are_narrowed_as_c_narrows_them():
    request = decoded(b'{"INT8_0": [-1, 300, 9223372036854775807], "FP32_0": [1e308, 0.1], "UINT8_0": 256}')
    assert request.inputs["INT8_0"].data.tolist() == [-1, 44, -1]
    assert request.inputs["FP32_0"].data.tolist() == [math.inf, float(np.float32(0.1))]
    assert request.inputs["UINT8_0"].data.tolist() == [0]


@pytest.mark.parametrize("body, message", [
    (b'{"INT8_4": [[1, 2, 3], [4, 5, 6]]}', "The schema can not convert input 'INT8_4' to tensor with proper shape"),
    (b'{"FP32_0": [[1], []]}', "Unable to parse 'data': Shape does not match true shape of 'data' field"),
    (b'{"BYTES_3": [["a"], []]}', "[request id: <id_unknown>] expected 2 string elements for inference input "
                                  "'BYTES_3' for model 'm', got 1"),
    (b'{"FP16_0": [1]}', "receiving FP16 data via JSON is not supported. Please use the binary data format for input "
                         "FP16_0"),
    (b'{"parameters": {"p": {}}}', "Converting keyword: 'parameters': parameter 'p' has invalid type. It should be "
                                   "either 'int', 'bool', or 'string'."),
    (b'{"id": "r1", "BOOL_0": [true], "BOOL_0": false}', "[request id: r1] input 'BOOL_0' already exists in request"),
    (b"[1]", "attempt to get members for non-object"),
])
def test_refusals_of_the_mapping(body, message):
    with pytest.raises(ServeError) as refused:
        decoded(body)
    assert refused.value.message == message


def test_a_response_is_one_object_in_byte_order():
    response = InferResponse("m", "1", "r", [InferTensor("b", "INT32", np.array([[7]], np.int32)),
                                             InferTensor("A", "BYTES", np.array([b"x", b"y"], dtype=object)),
                                             InferTensor("model_name", "BOOL", np.array([True]))],
                             parameters={"p": 1})
    assert encode_response(response) == b'{"A":["x","y"],"b":7,"id":"r","model_name":"m","model_version":"1","p":1}'
    assert isinstance(read(encode_response(response)), Pairs)
