"""Argument parsing and checks: good spellings and clear errors for bad ones."""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tritonctl.perf.client import ModelInfo, TensorSpec
from tritonctl.perf.input_data import numpy_dtype
from tritonctl.perf.inputs import build_requests, build_workload, request_shapes
from tritonctl.perf.options import (PerfError, PerfOptions, check_options, parse_concurrency_range,
                                        parse_request_rate_range, parse_shapes)


def test_concurrency_ranges():
    assert parse_concurrency_range("4") == (4,)
    assert parse_concurrency_range("1:3") == (1, 2, 3)
    assert parse_concurrency_range("1:8:3") == (1, 4, 7)


@pytest.mark.parametrize("text, fragment", [
    ("0:4", "START > 0"), ("4:2", "START <= END"), ("1:4:0", "STEP > 0"), ("a:b", "whole numbers"),
    ("1:2:3:4", "START:END:STEP"), ("1::2", "START:END:STEP"),
])
def test_bad_concurrency_ranges(text, fragment):
    with pytest.raises(PerfError, match=fragment):
        parse_concurrency_range(text)


def test_request_rate_ranges():
    assert parse_request_rate_range("50") == (50.0,)
    assert parse_request_rate_range("10:30:10") == (10.0, 20.0, 30.0)
    assert parse_request_rate_range("0.5:1.5:0.5") == (0.5, 1.0, 1.5)
    with pytest.raises(PerfError, match="START > 0"):
        parse_request_rate_range("0:10")
    with pytest.raises(PerfError, match="numbers"):
        parse_request_rate_range("fast")


def test_shapes():
    assert parse_shapes(["INPUT0:3,224,224", "ns:name:2"]) == {"INPUT0": (3, 224, 224), "ns:name": (2,)}
    for bad in ("INPUT0", "INPUT0:", "INPUT0:3,x", "INPUT0:-1"):
        with pytest.raises(PerfError, match="--shape"):
            parse_shapes([bad])


@pytest.mark.parametrize("change, fragment", [
    ({"protocol": "tcp"}, "'http' or 'grpc'"),
    ({"request_rates": (10.0,)}, "not both"),
    ({"concurrency": ()}, "none was given"),
    ({"batch_size": 0}, "batch size"),
    ({"max_trials": 2}, "at least 3"),
    ({"measurement_interval_ms": 0}, "positive"),
    ({"input_data": "/no/such/file.json"}, "random"),
    ({"latency_percentile": 100}, "between 1 and 99"),
    ({"streaming": True}, "Streaming is only allowed with gRPC protocol"),
    ({"streaming": True, "protocol": "grpc", "async_mode": False}, "can not use streaming with synchronous API"),
])
def test_check_options_rejects(change, fragment):
    with pytest.raises(PerfError, match=fragment):
        check_options(replace(PerfOptions("m"), **change))


BATCHED = ModelInfo("m", 8, (TensorSpec("IN", "FP32", (-1, 4)), TensorSpec("VAR", "INT32", (-1, -1))), ())


def test_request_shapes_fill_batch_and_variable_dims():
    assert request_shapes(BATCHED, 2, {"VAR": (5,)}) == {"IN": (2, 4), "VAR": (2, 5)}


@pytest.mark.parametrize("batch, shapes, fragment", [
    (1, {}, "variable dims .* --shape VAR:1"),
    (1, {"VAR": (5,), "NOPE": (1,)}, "does not have"),
    (1, {"VAR": (5,), "IN": (3,)}, "does not fit"),
    (9, {"VAR": (5,)}, "max_batch_size 8"),
])
def test_request_shape_errors(batch, shapes, fragment):
    with pytest.raises(PerfError, match=fragment):
        request_shapes(BATCHED, batch, shapes)


def test_unbatched_model_refuses_batch_size():
    with pytest.raises(PerfError, match="does not support batching"):
        request_shapes(ModelInfo("m", 0, (TensorSpec("IN", "FP32", (4,)),), ()), 2, {})


def test_generated_and_json_inputs(tmp_path):
    shapes = {"IN": (2, 4), "VAR": (2, 3)}
    zero = build_requests(BATCHED, shapes, "zero", 2)[0]
    assert zero["IN"].shape == (2, 4) and not zero["IN"].any() and str(zero["VAR"].dtype) == "int32"
    rand = build_requests(BATCHED, shapes, "random", 2)[0]
    assert rand["IN"].dtype.name == "float32" and rand["IN"].any()
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"data": [{"IN": [1, 2, 3, 4], "VAR": {"content": [7, 8, 9], "shape": [3]}},
                                         {"IN": [5, 6, 7, 8], "VAR": [1, 2, 3]}]}))
    requests = build_requests(BATCHED, shapes, str(data), 2)
    # As perf_analyzer batches real data: a batch-2 request takes two consecutive entries.
    assert len(requests) == 1
    assert requests[0]["IN"].tolist() == [[1, 2, 3, 4], [5, 6, 7, 8]]
    assert requests[0]["VAR"].tolist() == [[7, 8, 9], [1, 2, 3]]
    data.write_text(json.dumps({"data": [{"IN": [1, 2, 3], "VAR": [1, 2, 3]}]}))
    with pytest.raises(PerfError, match="has 3 values, but its shape \\[4\\] needs 4"):
        build_requests(BATCHED, shapes, str(data), 2)
    data.write_text(json.dumps({"data": [{"IN": [1, 2, 3, 4]}]}))
    with pytest.raises(PerfError, match="no data for input 'VAR'"):
        build_requests(BATCHED, shapes, str(data), 2)
    data.write_text("[1, 2]")
    with pytest.raises(PerfError, match="no \"data\" list"):
        build_requests(BATCHED, shapes, str(data), 2)


PAIR = ModelInfo("pair", 8, (TensorSpec("INPUT0", "FP32", (-1, 4)), TensorSpec("INPUT1", "INT32", (-1, 4))),
                 (TensorSpec("OUTPUT0", "FP32", (-1, 4)),))
TEXT = ModelInfo("text", 4, (TensorSpec("TEXT", "BYTES", (-1, 2)),), ())
VARIABLE = ModelInfo("var", 0, (TensorSpec("INPUT", "INT32", (-1, -1)),), ())
OPTIONAL = ModelInfo("opt", 0, (TensorSpec("A", "FP32", (2,)), TensorSpec("B", "FP32", (2,), optional=True)), ())
SEQUENCE = ModelInfo("seq", 4, (TensorSpec("INPUT", "INT32", (-1, 1)),), (TensorSpec("OUTPUT", "INT32", (-1, 1)),),
                     sequence=True)


def _b64(array) -> str:
    return base64.b64encode(array.tobytes()).decode()


def _requests(tmp_path, info, document, batch=1, shapes=None):
    path = tmp_path / "data.json"
    path.write_text(json.dumps(document))
    return build_workload(info, request_shapes(info, batch, shapes or {}, data_gives_shapes=True), str(path), batch)


def test_input_data_in_every_documented_spelling(tmp_path):
    four = np.arange(4, dtype="<f4")
    workload = _requests(tmp_path, PAIR, {"data": [
        {"INPUT0": {"b64": _b64(four)}, "INPUT1": [1, 2, 3, 4]},
        {"INPUT0": {"content": {"b64": _b64(four)}, "shape": [4]}, "INPUT1": {"content": [[1, 2], [3, 4]]}},
        {"INPUT0": [0.5, 1, 2, 3], "INPUT1": {"content": [5, 6, 7, 8], "shape": [4]}, "model": "pair"},
    ], "validation_data": [{"OUTPUT0": [1, 2, 3, 4]}, {}, {"OUTPUT0": {"b64": _b64(four)}}]})
    requests = workload.requests
    assert [r.inputs["INPUT0"].tolist() for r in requests] == [[[0, 1, 2, 3]], [[0, 1, 2, 3]], [[0.5, 1, 2, 3]]]
    assert requests[1].inputs["INPUT1"].dtype == np.int32 and requests[2].inputs["INPUT1"].tolist() == [[5, 6, 7, 8]]
    assert requests[0].expected["OUTPUT0"].tolist() == [[1, 2, 3, 4]] and requests[1].expected == {}


def test_bytes_input_data_as_strings_and_length_prefixed_b64(tmp_path):
    packed = b"".join(struct.pack("<I", len(s)) + s for s in (b"hello", b"w\x00rld"))
    workload = _requests(tmp_path, TEXT, {"data": [{"TEXT": ["a", "b"]}, {"TEXT": {"b64": base64.b64encode(packed)
                                                                                    .decode()}}]}, batch=2)
    (request,) = workload.requests
    assert request.inputs["TEXT"].tolist() == [[b"a", b"b"], [b"hello", b"w\x00rld"]]


def test_variable_dims_come_from_the_data_shapes(tmp_path):
    workload = _requests(tmp_path, VARIABLE, {"data": [{"INPUT": {"content": [1] * 16, "shape": [2, 8]}},
                                                       {"INPUT": {"content": [1] * 16, "shape": [8, 2]}}]})
    assert [r.inputs["INPUT"].shape for r in workload.requests] == [(2, 8), (8, 2)]
    # Without "shape", --shape gives the dims.
    workload = _requests(tmp_path, VARIABLE, {"data": [{"INPUT": [1] * 16}]}, shapes={"INPUT": (4, 4)})
    assert workload.requests[0].inputs["INPUT"].shape == (4, 4)


def test_optional_inputs_may_be_left_out(tmp_path):
    workload = _requests(tmp_path, OPTIONAL, {"data": [{"A": [1, 2]}, {"A": [1, 2], "B": [3, 4]}]})
    assert [sorted(r.inputs) for r in workload.requests] == [["A"], ["A", "B"]]


def test_streams_of_a_sequence_model_stay_apart(tmp_path):
    workload = _requests(tmp_path, SEQUENCE, {"data": [[{"INPUT": [1]}, {"INPUT": [2]}], [{"INPUT": [9]}]]})
    assert [[r.inputs["INPUT"].tolist() for r in s] for s in workload.streams] == [[[[1]], [[2]]], [[[9]]]]


@pytest.mark.parametrize("info, document, fragment", [
    (PAIR, {"data": [{"INPUT0": [1, 2, 3, 4]}]}, "entry 0: no data for input 'INPUT1'"),
    (PAIR, {"data": [{"INPUT0": [1, 2, 3], "INPUT1": [1, 2, 3, 4]}]}, "input 'INPUT0' has 3 values, but its shape"),
    (PAIR, {"data": [{"INPUT0": ["a", "b", "c", "d"], "INPUT1": [1, 2, 3, 4]}]}, "'INPUT0' is FP32: \"a\" is not a"),
    (PAIR, {"data": [{"INPUT0": [1, 2, 3, 4], "INPUT1": [1.5, 2, 3, 4]}]}, "'INPUT1' is INT32: 1.5 is not a whole"),
    (PAIR, {"data": [{"INPUT0": {"b64": "%%%"}, "INPUT1": [1, 2, 3, 4]}]}, "\"b64\" is not valid base64"),
    (PAIR, {"data": [{"INPUT0": {"b64": "AAAAAA=="}, "INPUT1": [1, 2, 3, 4]}]}, "'INPUT0' has 1 values, but its shape"),
    (PAIR, {"data": [{"INPUT0": {"b64": "AAA="}, "INPUT1": [1, 2, 3, 4]}]}, "not a whole number of FP32 values"),
    (PAIR, {"data": [{"INPUT0": {"shape": [4]}, "INPUT1": [1, 2, 3, 4]}]}, "no \"content\" next to its \"shape\""),
    (PAIR, {"data": [{"INPUT0": {"content": [1] * 8, "shape": [8]}, "INPUT1": [1, 2, 3, 4]}]},
     "shape \\[8\\] does not fit the model's dims \\[4\\]"),
    (PAIR, {"data": [{"INPUT0": 5, "INPUT1": [1, 2, 3, 4]}]}, "expected a list of values"),
    (PAIR, {"data": [{"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 2, 3, 4], "OTHER": [1]}]},
     "'OTHER' is not an input of model 'pair' \\(inputs: INPUT0, INPUT1\\)"),
    (PAIR, {"data": [{"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 2, 3, 4]}], "validation_data": []},
     "\"validation_data\" must be a non-empty list"),
    (PAIR, {"data": [{"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 2, 3, 4]}], "validation_data": [{"NOPE": [1]}]},
     "'NOPE' is not an output"),
    (PAIR, {"data": [{"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 2, 3, 4]}, [{"INPUT0": [1, 2, 3, 4]}]]}, "not a mix"),
    (PAIR, {"samples": []}, "no \"data\" list"),
    (TEXT, {"data": [{"TEXT": [1, 2]}]}, "'TEXT' is BYTES: its values must be JSON strings"),
    (TEXT, {"data": [{"TEXT": {"b64": base64.b64encode(b"\x09\x00\x00\x00ab").decode()}}]},
     "a BYTES element claims 9 bytes"),
    (VARIABLE, {"data": [{"INPUT": [1] * 4}]}, "has variable dims \\[-1, -1\\]: add \"shape\""),
])
def test_malformed_input_data_names_the_input_and_the_fix(tmp_path, info, document, fragment):
    with pytest.raises(PerfError, match=fragment):
        _requests(tmp_path, info, document)


def test_input_data_that_is_not_json(tmp_path):
    path = tmp_path / "data.json"
    path.write_text("{\"data\": [")
    with pytest.raises(PerfError, match="not valid JSON"):
        build_workload(PAIR, request_shapes(PAIR, 1, {}), str(path), 1)


def test_consecutive_entries_of_different_shapes_cannot_share_a_batch(tmp_path):
    info = ModelInfo("v", 4, (TensorSpec("X", "FP32", (-1, -1)),), ())
    with pytest.raises(PerfError, match="different shapes"):
        _requests(tmp_path, info, {"data": [{"X": {"content": [1, 2], "shape": [2]}},
                                            {"X": {"content": [1, 2, 3], "shape": [3]}}]}, batch=2)


def test_directory_of_raw_files(tmp_path):
    np.arange(4, dtype="<f4").tofile(tmp_path / "INPUT0")
    np.arange(4, dtype="<i4").tofile(tmp_path / "INPUT1")
    np.ones(4, dtype="<f4").tofile(tmp_path / "OUTPUT0")
    (request,) = build_workload(PAIR, request_shapes(PAIR, 2, {}), str(tmp_path), 2).requests
    assert request.inputs["INPUT1"].tolist() == [[0, 1, 2, 3]] * 2 and request.expected["OUTPUT0"].shape == (2, 4)
    (tmp_path / "INPUT1").write_bytes(b"\x00" * 12)
    with pytest.raises(PerfError, match="12 bytes, but 'INPUT1' \\(INT32, shape \\[4\\]\\) needs 16"):
        build_workload(PAIR, request_shapes(PAIR, 1, {}), str(tmp_path), 1)
    (tmp_path / "STRAY").write_text("x")
    with pytest.raises(PerfError, match="file 'STRAY' is not an input or output"):
        build_workload(PAIR, request_shapes(PAIR, 1, {}), str(tmp_path), 1)


def test_generated_strings_follow_string_length_and_string_data():
    shapes = request_shapes(TEXT, 2, {})
    (random_request,) = build_requests(TEXT, shapes, "random", 2, string_length=7)
    assert {len(v) for v in random_request["TEXT"].reshape(-1)} == {7}
    (fixed,) = build_requests(TEXT, shapes, "random", 2, string_data="hi")
    assert fixed["TEXT"].tolist() == [[b"hi", b"hi"]] * 2


NUMERIC = st.sampled_from(["FP32", "FP64", "FP16", "BF16", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT32",
                           "BOOL"])


@given(datatype=NUMERIC, width=st.integers(1, 6), data=st.data())
@settings(max_examples=60, deadline=None)
def test_b64_and_list_spellings_give_the_same_tensor(tmp_path_factory, datatype, width, data):
    dtype = numpy_dtype(datatype)
    info = ModelInfo("m", 0, (TensorSpec("X", datatype, (width,)),), ())
    if dtype.kind == "b":
        values = data.draw(st.lists(st.booleans(), min_size=width, max_size=width))
    elif dtype.kind == "f" or datatype == "BF16":  # BF16: whole numbers up to 100 are exact
        values = data.draw(st.lists(st.integers(-100, 100), min_size=width, max_size=width))
    else:
        info_range = np.iinfo(dtype)
        values = data.draw(st.lists(st.integers(int(info_range.min), int(info_range.max)),
                                    min_size=width, max_size=width))
    tmp_path = tmp_path_factory.mktemp("b64")
    as_list = _requests(tmp_path, info, {"data": [{"X": values}]}).requests[0].inputs["X"]
    encoded = _b64(np.array(values, dtype=dtype).astype(dtype.newbyteorder("<")))
    as_b64 = _requests(tmp_path, info, {"data": [{"X": {"b64": encoded}}]}).requests[0].inputs["X"]
    assert as_list.dtype == as_b64.dtype == dtype and as_list.tolist() == as_b64.tolist() == values


@given(st.lists(st.binary(max_size=20), min_size=1, max_size=5))
@settings(max_examples=60, deadline=None)
def test_length_prefixed_bytes_round_trip(tmp_path_factory, items):
    info = ModelInfo("m", 0, (TensorSpec("S", "BYTES", (len(items),)),), ())
    packed = b"".join(struct.pack("<I", len(s)) + s for s in items)
    workload = _requests(tmp_path_factory.mktemp("bytes"), info,
                         {"data": [{"S": {"b64": base64.b64encode(packed).decode()}}]})
    assert workload.requests[0].inputs["S"].tolist() == items
