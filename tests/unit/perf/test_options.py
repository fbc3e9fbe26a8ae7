"""Argument parsing and checks: good spellings and clear errors for bad ones."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tritonctl.perf.client import ModelInfo, TensorSpec
from tritonctl.perf.inputs import build_requests, request_shapes
from tritonctl.perf.options import (PerfError, PerfOptions, check_options, parse_concurrency_range,
                                        parse_request_rate_range, parse_shapes)


def test_concurrency_ranges():
    assert parse_concurrency_range("4") == (4,)
    assert parse_concurrency_range("1:3") == (1, 2, 3)
    assert parse_concurrency_range("1:8:3") == (1, 4, 7)


@pytest.mark.parametrize("text, fragment", [
    ("0:4", "1 <= START"), ("4:2", "1 <= START"), ("1:4:0", "STEP >= 1"), ("a:b", "whole numbers"),
    ("1:2:3:4", "START:END:STEP"), ("1::2", "START:END:STEP"),
])
def test_bad_concurrency_ranges(text, fragment):
    with pytest.raises(PerfError, match=fragment):
        parse_concurrency_range(text)


def test_request_rate_ranges():
    assert parse_request_rate_range("50") == (50.0,)
    assert parse_request_rate_range("10:30:10") == (10.0, 20.0, 30.0)
    assert parse_request_rate_range("0.5:1.5:0.5") == (0.5, 1.0, 1.5)
    with pytest.raises(PerfError, match="0 < START"):
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
    assert len(requests) == 2
    assert requests[0]["IN"].tolist() == [[1, 2, 3, 4]] * 2 and requests[1]["VAR"].tolist() == [[1, 2, 3]] * 2
    data.write_text(json.dumps({"data": [{"IN": [1, 2, 3], "VAR": [1, 2, 3]}]}))
    with pytest.raises(PerfError, match="expected 4 values"):
        build_requests(BATCHED, shapes, str(data), 2)
    data.write_text(json.dumps({"data": [{"IN": [1, 2, 3, 4]}]}))
    with pytest.raises(PerfError, match="no data for input 'VAR'"):
        build_requests(BATCHED, shapes, str(data), 2)
    data.write_text("[1, 2]")
    with pytest.raises(PerfError, match="expected JSON like"):
        build_requests(BATCHED, shapes, str(data), 2)
