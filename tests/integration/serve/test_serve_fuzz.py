"""Property-based fuzzing of the inference endpoints against a running server, over both
transports: HTTP JSON and binary framing, gRPC ModelInfer fields (shapes, datatypes, sizes,
contents, parameters). Every example gets a well-formed answer with a client-fault status
(or success); after each batch the server still serves a valid request."""

from __future__ import annotations

import http.client
import json

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tritonclient.grpc import service_pb2, service_pb2_grpc

from helpers.serve_clients import assert_serves

FUZZ = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
MODELS = ["add_sub", "add_sub_fp16", "add_sub_int", "echo_bytes", "missing", "..", "a/b", ""]
NAMES = ["INPUT0", "INPUT1", "TEXT", "X", ""]
DATATYPES = ["FP32", "FP16", "BF16", "INT32", "INT64", "UINT8", "BOOL", "BYTES", "FP64", "NOPE", ""]
DIMS = st.one_of(st.integers(0, 8), st.integers(-2, 1 << 62), st.sampled_from([1 << 31, 1 << 40, (1 << 63) - 1]))
SHAPES = st.lists(DIMS, max_size=6)
JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 63), (1 << 63) - 1),
                         st.floats(allow_nan=False), st.text(max_size=8))
JSON_DATA = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=6), max_leaves=24)
PARAMETERS = st.dictionaries(st.sampled_from(["binary_data_size", "shared_memory_region", "shared_memory_byte_size",
                                              "shared_memory_offset", "binary_data", "classification"]),
                             st.one_of(st.integers(-4, 64), st.text(max_size=6), st.booleans()), max_size=2)
HTTP_ANSWERS = {200, 400, 404}
GRPC_ANSWERS = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND}


@st.composite
def http_infer(draw):
    """(path, body, headers) of an inference request, JSON or binary, well or badly framed."""
    inputs = []
    for _ in range(draw(st.integers(0, 3))):
        entry = {"name": draw(st.sampled_from(NAMES)), "datatype": draw(st.sampled_from(DATATYPES)),
                 "shape": draw(SHAPES)}
        if draw(st.booleans()):
            entry["data"] = draw(JSON_DATA)
        params = draw(PARAMETERS)
        if params:
            entry["parameters"] = params
        for key in draw(st.sets(st.sampled_from(["name", "datatype", "shape"]), max_size=1)):
            del entry[key]
        inputs.append(entry)
    doc = {"inputs": inputs} if draw(st.booleans()) else draw(st.dictionaries(st.text(max_size=4), JSON_DATA,
                                                                                max_size=2))
    header = json.dumps(doc).encode()
    if draw(st.booleans()):
        header = header[:draw(st.integers(0, len(header)))]  # cut short
    binary = draw(st.binary(max_size=64))
    headers = {}
    framing = draw(st.sampled_from(["json", "binary", "wrong_length", "raw"]))
    if framing == "binary":
        headers["Inference-Header-Content-Length"] = str(len(header))
    elif framing == "wrong_length":
        headers["Inference-Header-Content-Length"] = draw(st.sampled_from(["-1", "x", str(len(header) + 100),
                                                                           "99999999999999999999"]))
    elif framing == "raw":
        headers["Inference-Header-Content-Length"] = "0"
        header = b""
    body = header + binary if framing != "json" else header
    model = draw(st.sampled_from(MODELS[:5]))
    version = draw(st.sampled_from(["", "/versions/1", "/versions/7"]))
    return f"/v2/models/{model}{version}/infer", body, headers


@given(request=http_infer())
@FUZZ
def test_http_inference_framing_gets_well_formed_client_fault_answers(served, request):
    path, body, headers = request
    host, port = served.http_url.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        status, reply = response.status, response.read()
    finally:
        conn.close()
    assert status in HTTP_ANSWERS, (status, reply)
    if status != 200:
        assert isinstance(json.loads(reply)["error"], str) and json.loads(reply)["error"]


@pytest.fixture(scope="module", autouse=True)
def still_serving_afterwards(served):
    yield
    assert_serves(served)


@st.composite
def grpc_infer(draw):
    request = service_pb2.ModelInferRequest(model_name=draw(st.sampled_from(MODELS)),
                                            model_version=draw(st.sampled_from(["", "1", "7", "x"])))
    for _ in range(draw(st.integers(0, 3))):
        shape = [d for d in draw(SHAPES) if d < (1 << 63)]
        tensor = request.inputs.add(name=draw(st.sampled_from(NAMES)), datatype=draw(st.sampled_from(DATATYPES)),
                                    shape=shape)
        contents = draw(st.sampled_from(["none", "fp32", "int", "bytes"]))
        if contents == "fp32":
            tensor.contents.fp32_contents.extend(draw(st.lists(st.floats(width=32, allow_nan=False), max_size=8)))
        elif contents == "int":
            tensor.contents.int_contents.extend(draw(st.lists(st.integers(-(1 << 31), (1 << 31) - 1), max_size=8)))
        elif contents == "bytes":
            tensor.contents.bytes_contents.extend(draw(st.lists(st.binary(max_size=8), max_size=8)))
        if draw(st.booleans()):
            tensor.parameters["shared_memory_region"].string_param = draw(st.text(max_size=4))
    for _ in range(draw(st.integers(0, 3))):
        request.raw_input_contents.append(draw(st.binary(max_size=40)))
    for key in draw(st.sets(st.sampled_from(["priority", "timeout", "sequence_id", "triton_x", "classification"]),
                            max_size=2)):
        which = draw(st.sampled_from(["int64_param", "bool_param", "string_param"]))
        value = {"int64_param": draw(st.integers(-(1 << 63), (1 << 63) - 1)), "bool_param": draw(st.booleans()),
                 "string_param": draw(st.text(max_size=4))}[which]
        setattr(request.parameters[key], which, value)
    for name in draw(st.lists(st.sampled_from(NAMES), max_size=2)):
        request.outputs.add(name=name)
    return request


@given(request=grpc_infer())
@FUZZ
def test_grpc_model_infer_fields_get_well_formed_client_fault_answers(served, request):
    with grpc.insecure_channel(served.grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        try:
            stub.ModelInfer(request, timeout=30)
        except grpc.RpcError as exc:
            assert exc.code() in GRPC_ANSWERS, (exc.code(), exc.details())
            assert exc.details()


# ---- the repository API --------------------------------------------------------------------
CONFIG_FIELDS = st.dictionaries(
    st.sampled_from(["name", "backend", "platform", "max_batch_size", "input", "output", "default_model_filename",
                     "version_policy", "instance_group", "parameters", "nonsense"]),
    st.one_of(JSON_DATA, st.sampled_from(["../../x.onnx", "/etc/passwd", "model.onnx", "onnxruntime", "fuzzed"]),
              st.dictionaries(st.text(max_size=6), JSON_SCALARS, max_size=2)),
    max_size=5)
LOAD_PARAMETERS = st.dictionaries(
    st.sampled_from(["config", "file:1/model.onnx", "file:../x", "file:/tmp/x", "file:", "other"]),
    st.one_of(CONFIG_FIELDS.map(json.dumps), JSON_DATA, st.text(max_size=6)), max_size=3)


@pytest.fixture(scope="module")
def fuzzed_model(served):
    """A model of the served repository that only the fuzzing loads (explicit mode)."""
    from helpers.serve_models import write_add_sub

    import shutil

    model_dir = write_add_sub(served.runtime.options.repository, "fuzzed")
    yield "fuzzed"
    served.runtime.manager.unload("fuzzed")
    served.runtime.manager.models.pop("fuzzed", None)
    shutil.rmtree(model_dir)


@given(name=st.sampled_from(["fuzzed", "fuzzed", "%2e%2e", "missing", "a%2Fb"]),
       body=st.one_of(LOAD_PARAMETERS.map(lambda p: json.dumps({"parameters": p}).encode()),
                      JSON_DATA.map(lambda v: json.dumps(v).encode()), st.binary(max_size=16)))
@FUZZ
def test_repository_loads_get_well_formed_answers(served, fuzzed_model, name, body):
    host, port = served.http_url.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        conn.request("POST", f"/v2/repository/models/{name}/load", body=body)
        response = conn.getresponse()
        status, reply = response.status, response.read()
    finally:
        conn.close()
    assert status in {200, 400}, (status, reply)
    if status != 200:
        assert json.loads(reply)["error"]
